/*
 * What /metrics reports (SPEC §15), named by Prometheus' conventions: one
 * rdzvd_ prefix, base units, _total counters, _seconds histograms, and no
 * per-node or per-job labels, so that ten thousand jobs are not ten
 * thousand series. Counters count from this start of the process, as
 * Prometheus expects; gauges are computed from the core when scraped, so
 * they are right at once after a restart.
 *
 * The counters are fed where things happen: turn.c hands each turn's
 * changes (rounds, restarts, lost leases, GPU results) and the commit's
 * duration, the gRPC server tells how each call ended.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "buildconf.h"
#include "log.h"
#include "rdzvd.h"
#include "store.h"

#define NCODES	17	/* gRPC status codes 0..16 */

struct histogram {
	const double	*le;		/* upper bounds, ascending */
	size_t		 n;
	uint64_t	*counts;	/* per bucket, not cumulative */
	uint64_t	 count;
	double		 sum;
};

static const double commit_le[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
static const double rdzv_le[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
    10, 30, 60, 120, 300, 600 };
static uint64_t commit_counts[sizeof(commit_le) / sizeof(double)];
static uint64_t rdzv_counts[sizeof(rdzv_le) / sizeof(double)];

static const char *code_names[NCODES] = { "OK", "CANCELLED", "UNKNOWN",
    "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED" };

static struct {
	struct histogram	 commit;
	struct histogram	 rendezvous;
	uint64_t		 rounds;
	uint64_t		 restarts_failure;
	uint64_t		 hangs;
	uint64_t		 restarts_lost;
	uint64_t		 leases_ended;
	uint64_t		 ended_pruned;
	uint64_t		 gpu_failures;
	/* Calls by method (the served methods' order; the last: no method) and
	 * status code. */
	uint64_t		(*calls)[NCODES];
	const struct grpc_method *methods;
	size_t			 n_methods;
	size_t			(*agents_connected)(void);
	uint64_t		 http_requests;
} m = {
	.commit = { commit_le, sizeof(commit_le) / sizeof(double),
	    commit_counts, 0, 0 },
	.rendezvous = { rdzv_le, sizeof(rdzv_le) / sizeof(double),
	    rdzv_counts, 0, 0 },
};

void
metrics_init(const struct grpc_method *methods, size_t n_methods,
    size_t (*agents_connected)(void))
{
	m.methods = methods;
	m.n_methods = n_methods;
	m.agents_connected = agents_connected;
	m.calls = xcalloc(n_methods + 1, sizeof(*m.calls));
}

void
metrics_free(void)
{
	free(m.calls);
	m.calls = NULL;
}

static void
observe(struct histogram *h, double v)
{
	size_t i;

	for (i = 0; i < h->n && v > h->le[i]; i++)
		;
	if (i < h->n)
		h->counts[i]++;
	h->count++;
	h->sum += v;
}

void
metrics_call_ended(const char *path, int status, void *arg)
{
	size_t i = m.n_methods;

	if (m.calls == NULL)
		return;
	if (path != NULL)
		for (i = 0; i < m.n_methods; i++)
			if (m.methods[i].path == path ||
			    strcmp(m.methods[i].path, path) == 0)
				break;
	if (status < 0 || status >= NCODES)
		status = 2;	/* UNKNOWN */
	m.calls[i][status]++;
}

void
metrics_commit(uint64_t usec)
{
	observe(&m.commit, (double)usec / 1e6);
}

void
metrics_http_request(void)
{
	m.http_requests++;
}

/* ", restart N of" in a "round" event; -1 when absent. */
static long
round_restart(const struct core_event *e)
{
	const char *p = strstr(e->message, ", restart ");

	return p != NULL ? strtol(p + 10, NULL, 10) : -1;
}

/* Events that make a running job seek a new round at once. */
static int
ends_round(const char *kind)
{
	return strcmp(kind, "failure") == 0 || strcmp(kind, "hang") == 0 ||
	    strcmp(kind, "lost") == 0 || strcmp(kind, "left") == 0 || strcmp(kind, "evicted") == 0 ||
	    strcmp(kind, "nproc") == 0;
}

/* Events of a round that gathers nodes. */
static int
gathers(const char *kind)
{
	return strcmp(kind, "created") == 0 || strcmp(kind, "reopened") == 0 ||
	    strcmp(kind, "waiting") == 0 || strcmp(kind, "join") == 0;
}

/*
 * A round formed in this turn: its assignments go out now. The job's kept
 * events since its previous round tell since when it was sought, without
 * the core keeping more: since the last failure, lost, left or evicted
 * node when there is one (a spare that joined long before does not
 * count), else since the first event of gathering nodes ("created" for
 * the first round, a join for nodes taken into a running job). A rise of
 * the restart count since that previous round is a restart, caused by the
 * last failure or lost node before it.
 */
static void
round_formed(const struct core_event *e, const struct core_job *j,
    int64_t now_ms)
{
	const struct core_event *x, *prev = NULL;
	int64_t opened = 0, broke = 0;
	const char *cause = NULL;
	uint32_t i;

	m.rounds++;
	for (i = j->events_n; i-- > 0; ) {
		if ((x = core_job_event(j, i)) == NULL || x->seq >= e->seq)
			continue;
		if (strcmp(x->kind, "round") == 0) {
			prev = x;
			break;
		}
		if (broke == 0 && ends_round(x->kind))
			broke = x->wall_ms;
		if (gathers(x->kind))
			opened = x->wall_ms;
		if (cause == NULL && (strcmp(x->kind, "failure") == 0 ||
		    strcmp(x->kind, "hang") == 0 ||
		    strcmp(x->kind, "lost") == 0))
			cause = x->kind;
		if (strcmp(x->kind, "created") == 0 ||
		    strcmp(x->kind, "reopened") == 0)
			break;
	}
	if (broke != 0)
		opened = broke;
	if (opened == 0)
		opened = e->wall_ms;
	observe(&m.rendezvous, now_ms > opened ?
	    (double)(now_ms - opened) / 1000 : 0);
	if (prev != NULL && round_restart(e) > round_restart(prev)) {
		if (cause != NULL && strcmp(cause, "lost") == 0)
			m.restarts_lost++;
		else
			m.restarts_failure++;
	}
}

void
metrics_turn(const struct core *c, struct core_now now)
{
	const struct core_node *n;

	for (size_t i = 0; i < c->n_new_events; i++) {
		const struct core_event *e = &c->new_events[i];
		if (strcmp(e->kind, "lost") == 0)
			m.leases_ended++;
		else if (strcmp(e->kind, "hang") == 0)
			m.hangs++;
		else if (strcmp(e->kind, "round") == 0 && e->job != NULL &&
		    !e->job->removed)
			round_formed(e, e->job, now.wall_ms);
	}
	const struct core_job *j;
	TAILQ_FOREACH(j, &c->removed_jobs, entry)
		if (j->pruned)
			m.ended_pruned++;
	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry) {
		if (!n->gpus_dirty)
			continue;
		for (uint32_t g = 0; g < n->n_gpus; g++)
			if (!n->gpus[g].ok)
				m.gpu_failures++;
	}
}

/* ------------------------------------------------------------ exposition */

static void
head(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

static void
counter(struct evbuffer *b, const char *name, const char *help, uint64_t v)
{
	head(b, name, "counter", help);
	evbuffer_add_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void
gauge(struct evbuffer *b, const char *name, const char *help, double v)
{
	head(b, name, "gauge", help);
	evbuffer_add_printf(b, "%s %.15g\n", name, v);
}

static void
histogram(struct evbuffer *b, const char *name, const char *help,
    const struct histogram *h)
{
	uint64_t cum = 0;

	head(b, name, "histogram", help);
	for (size_t i = 0; i < h->n; i++) {
		cum += h->counts[i];
		evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name,
		    h->le[i], (unsigned long long)cum);
	}
	evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n"
	    "%s_count %llu\n", name, (unsigned long long)h->count, name,
	    h->sum, name, (unsigned long long)h->count);
}

/* "/rdzv.v1.Control/GetJob" -> "rdzv.v1.Control/GetJob". */
static const char *
method_label(size_t i)
{
	const char *p;

	if (i == m.n_methods)
		return "unknown";
	p = m.methods[i].path;
	return *p == '/' ? p + 1 : p;
}

/* Which rdzvd this is and whether it serves. */
static void
write_daemon(struct evbuffer *b)
{
	head(b, "rdzvd_build_info", "gauge", "rdzvd's version, always 1.");
	evbuffer_add_printf(b, "rdzvd_build_info{version=\"%s\"} 1\n",
	    RDZV_VERSION);
	head(b, "rdzvd_start_time_seconds", "gauge", "When rdzvd started, in "
	    "seconds since the epoch.");
	evbuffer_add_printf(b, "rdzvd_start_time_seconds %lld.%03lld\n",
	    (long long)rdzvd.started_wall_ms / 1000,
	    (long long)rdzvd.started_wall_ms % 1000);
	gauge(b, "rdzvd_ready", "1 while the store is open and rdzvd serves "
	    "as the leader.", rdzvd.serving && rdzvd.store != NULL &&
	    !rdzvd.standby);
	gauge(b, "rdzvd_leader", "1 while this replica leads (always with "
	    "SQLite), 0 on a standby.", !rdzvd.standby);
}

/* What the core holds now: jobs and nodes by state, agents, hosts.
 * Returns the stragglers counted on the way, for write_rendezvous(). */
static uint64_t
write_held(struct evbuffer *b)
{
	const struct core *c = rdzvd.core;
	const struct core_job *j;
	uint64_t jobs[6] = { 0 }, nodes[CORE_NODE_NSTATES] = { 0 };
	uint64_t stragglers = 0, lead, runs, failures;
	uint32_t k;
	struct core_now now = turn_now();

	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (j->state >= 1 && j->state <= 5)
			jobs[j->state]++;
		for (int s = 1; s < CORE_NODE_NSTATES; s++)
			nodes[s] += j->n_state[s];
		if (j->state == CORE_JOB_RUNNING &&
		    core_job_progress(j, now, &lead, &k))
			stragglers += k;
	}
	head(b, "rdzvd_jobs", "gauge", "Jobs the daemon holds, by state.");
	for (int s = 1; s <= 5; s++)
		evbuffer_add_printf(b, "rdzvd_jobs{state=\"%s\"} %llu\n",
		    core_job_state_name(s), (unsigned long long)jobs[s]);
	head(b, "rdzvd_nodes", "gauge", "Nodes of the jobs held, by state.");
	for (int s = 1; s < CORE_NODE_NSTATES; s++)
		evbuffer_add_printf(b, "rdzvd_nodes{state=\"%s\"} %llu\n",
		    core_node_state_name(s), (unsigned long long)nodes[s]);
	gauge(b, "rdzvd_agents_connected", "Agents with an open Join stream.",
	    (double)m.agents_connected());
	head(b, "rdzvd_hosts", "gauge", "Hosts rdzvd remembers, by state "
	    "(docs/HEALTH.md).");
	for (int s = HOST_OK; s <= HOST_QUARANTINED; s++)
		evbuffer_add_printf(b, "rdzvd_hosts{state=\"%s\"} %u\n",
		    host_state_name((enum host_state)s), c->hosts->n_state[s]);
	hook_counts(&runs, &failures);
	counter(b, "rdzvd_quarantine_hook_runs_total", "Runs of the "
	    "on-quarantine command started.", runs);
	counter(b, "rdzvd_quarantine_hook_failures_total", "Runs of "
	    "the on-quarantine command that failed, timed out or could "
	    "not start.", failures);
	return stragglers;
}

/* What the rendezvous has done: rounds, restarts, losses, stragglers. */
static void
write_rendezvous(struct evbuffer *b, uint64_t stragglers)
{
	counter(b, "rdzvd_rounds_total", "Rounds formed (assignments sent).",
	    m.rounds);
	head(b, "rdzvd_restarts_total", "counter", "Restarts of a job's "
	    "workers, by cause: a reported worker failure or a lost node.");
	evbuffer_add_printf(b, "rdzvd_restarts_total{cause=\"failure\"} %llu\n"
	    "rdzvd_restarts_total{cause=\"lost\"} %llu\n",
	    (unsigned long long)m.restarts_failure,
	    (unsigned long long)m.restarts_lost);
	counter(b, "rdzvd_ended_jobs_pruned_total", "Ended jobs removed before "
	    "their retention because their owner had more than "
	    "max-ended-jobs-per-identity.", m.ended_pruned);
	counter(b, "rdzvd_leases_ended_total", "Nodes lost because their "
	    "lease ended.", m.leases_ended);
	counter(b, "rdzvd_hangs_total", "Nodes their agents reported hung "
	    "(no worker progress for the job's hang timeout).", m.hangs);
	gauge(b, "rdzvd_stragglers", "Nodes of running jobs that trail "
	    "their job's leading node (straggler-steps, straggler-seconds).",
	    (double)stragglers);
	counter(b, "rdzvd_gpu_check_failures_total", "Failed GPU results "
	    "reported by agents' health checks.", m.gpu_failures);
	histogram(b, "rdzvd_rendezvous_seconds", "From a round being sought "
	    "to its assignments being sent.", &m.rendezvous);
}

/* The store's commits, the one place a slow disk shows. */
static void
write_store(struct evbuffer *b)
{
	histogram(b, "rdzvd_store_commit_seconds", "Time of one store "
	    "transaction (a turn's changes), fsync included.", &m.commit);
	counter(b, "rdzvd_store_transactions_total", "Store transactions "
	    "committed.", store_transactions(rdzvd.store));
	gauge(b, "rdzvd_store_commit_in_flight_seconds", "Age of the store "
	    "commit in flight (0: none); a slow disk shows here first.",
	    (double)turn_commit_age_ms() / 1000.0);
	gauge(b, "rdzvd_calls_held", "Calls and stream ends waiting for the "
	    "commit in flight (docs/RDZVD.md, the commit pipeline).",
	    (double)turn_held_count());
}

/* The servers: gRPC calls and connections, HTTP connections and requests. */
static void
write_servers(struct evbuffer *b, size_t http_conns, size_t sse_clients)
{
	head(b, "rdzvd_grpc_calls_total", "counter", "gRPC calls handled, by "
	    "method and status code.");
	for (size_t i = 0; m.calls != NULL && i <= m.n_methods; i++)
		for (int s = 0; s < NCODES; s++)
			if (m.calls[i][s] != 0)
				evbuffer_add_printf(b, "rdzvd_grpc_calls_total"
				    "{method=\"%s\",code=\"%s\"} %llu\n",
				    method_label(i), code_names[s],
				    (unsigned long long)m.calls[i][s]);
	gauge(b, "rdzvd_grpc_connections", "Open gRPC connections.",
	    rdzvd.srv != NULL ? (double)grpc_server_conn_count(rdzvd.srv) : 0);
	gauge(b, "rdzvd_http_connections", "Open HTTP connections.",
	    (double)http_conns);
	gauge(b, "rdzvd_http_event_streams", "Status pages following changes "
	    "(server-sent events).", (double)sse_clients);
	counter(b, "rdzvd_http_requests_total", "HTTP requests answered.",
	    m.http_requests);
}

void
metrics_write(struct evbuffer *b, size_t http_conns, size_t sse_clients)
{
	uint64_t stragglers;

	write_daemon(b);
	stragglers = write_held(b);
	write_rendezvous(b, stragglers);
	write_store(b);
	write_servers(b, http_conns, sse_clients);
}
