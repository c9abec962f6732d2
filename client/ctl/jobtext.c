/*
 * Jobs as text for people: the job list of `rdzvctl status`, the detail of
 * `rdzvctl status ID` (why a job waits and for how long, who holds which
 * ranks, which GPUs failed, what happened last), and the screen of
 * `--watch`, which redraws the same.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzvctl.h"
#include "text.h"

#define KEY_WIDTH	10

static const char *const list_headers[] = {
	"ID", "STATE", "GEN", "NODES", "WORLD", "RESTARTS", "AGE", "OWNER",
	"NOTE",
};

static const char *const node_headers[] = {
	"NODE", "HOST", "ADDRESS", "HINT", "GROUP", "RANKS", "NPROC", "STATE",
	"GPUS", "LAST SEEN",
};

static const char *const node_step_headers[] = {
	"NODE", "HOST", "ADDRESS", "HINT", "GROUP", "RANKS", "NPROC", "STATE",
	"GPUS", "STEP", "LAST SEEN",
};

static const char *const gpu_headers[] = {
	"NODE", "HOST", "GPU", "NAME", "UUID", "STEP", "ERROR",
};

static const char *const event_headers[] = {
	"TIME", "GEN", "KIND", "MESSAGE",
};

#define NCOLS(h) (sizeof(h) / sizeof(h[0]))

static uint32_t
min_nodes(const Rdzv__V1__Job *j)
{
	return j->settings != NULL ? j->settings->min_nodes : 0;
}

static uint32_t
max_nodes(const Rdzv__V1__Job *j)
{
	return j->settings != NULL ? j->settings->max_nodes : 0;
}

/* Nodes a waiting job lacks; rdzvd's counts may be anything, so the
 * difference is taken where it cannot overflow. */
static int64_t
nodes_needed(const Rdzv__V1__Job *j)
{
	return (int64_t)min_nodes(j) - j->participants;
}

/*
 * The list's last column: what a waiting job lacks and how long it has,
 * when the next round comes, or why a job ended, so a stuck job stands
 * out without `status ID`.
 */
static void
job_note(char *buf, size_t len, const Rdzv__V1__Job *j)
{
	char	d[32];
	int64_t	need = nodes_needed(j);

	buf[0] = '\0';
	switch (j->state) {
	case RDZV__V1__JOB_STATE__JOB_STATE_WAITING:
		if (need > 0 && j->join_timeout_in_ms >= 0)
			snprintf(buf, len, "needs %" PRId64 " more node%s; "
			    "fails in %s (join timeout)", need,
			    plural(need),
			    fmt_duration(d, sizeof(d), j->join_timeout_in_ms));
		else if (need > 0)
			snprintf(buf, len, "needs %" PRId64 " more node%s",
			    need, plural(need));
		else if (j->last_call_in_ms >= 0)
			snprintf(buf, len, "round completes in %s (last call)",
			    fmt_duration(d, sizeof(d), j->last_call_in_ms));
		break;
	case RDZV__V1__JOB_STATE__JOB_STATE_RUNNING:
		if (j->held_failure[0] != '\0')
			snprintf(buf, len, "a failure waits for an away node");
		else if (j->waiting > 0 && j->last_call_in_ms >= 0)
			snprintf(buf, len, "%u waiting node%s in %s",
			    j->waiting, j->waiting == 1 ? " joins" : "s join",
			    fmt_duration(d, sizeof(d), j->last_call_in_ms));
		break;
	default:
		snprintf(buf, len, "%s", j->reason);
		break;
	}
}

void
jobtext_list(struct ctl *ctl, FILE *f, Rdzv__V1__Job *const *jobs,
    size_t n)
{
	struct table	*t;
	char		 age[32], note[1024];

	if (n == 0) {
		fprintf(f, "%s\n", ctl->all ? "no jobs" :
		    "no active jobs (--all adds ended ones)");
		return;
	}
	t = table_new(NCOLS(list_headers), list_headers);
	for (size_t i = 0; i < n; i++) {
		const Rdzv__V1__Job *j = jobs[i];
		table_cell(t, "%s", j->rdzv_id);
		table_cell(t, "%s", job_state_name(j->state));
		table_cell(t, "%" PRIu64, j->generation);
		table_cell(t, "%u of %u:%u", j->participants, min_nodes(j),
		    max_nodes(j));
		table_cell(t, "%u", j->world_size);
		table_cell(t, "%u/%u", j->restart_count, j->settings != NULL ?
		    j->settings->max_restarts : 0);
		table_cell(t, "%s", fmt_age(age, sizeof(age), ctl->now_ms,
		    j->created_unix_ms));
		table_cell(t, "%s", j->owner);
		job_note(note, sizeof(note), j);
		table_cell(t, "%s", note);
	}
	table_print(t, f, "");
	table_free(t);
}

static void
key(FILE *f, const char *k)
{
	fprintf(f, "%-*s", KEY_WIDTH, k);
}

/* For a job whose round is open: how far it got and what comes next. */
static void
print_waiting(FILE *f, const Rdzv__V1__Job *j)
{
	char	d[32];
	int64_t	need = nodes_needed(j);

	key(f, "waiting");
	fprintf(f, "%u of min %u node%s joined", j->participants, min_nodes(j),
	    plural(min_nodes(j)));
	if (j->last_call_in_ms >= 0)
		fprintf(f, "; the round completes in %s (last call) or when "
		    "%u have joined", fmt_duration(d, sizeof(d),
		    j->last_call_in_ms), max_nodes(j));
	if (j->join_timeout_in_ms >= 0 && need > 0)
		fprintf(f, "; the job fails in %s unless %" PRId64 " more "
		    "join%s (join timeout)", fmt_duration(d, sizeof(d),
		    j->join_timeout_in_ms), need, need == 1 ? "s" : "");
	fputc('\n', f);
}

/* A failure held for an away member of the round, naming that member. */
static void
print_held(FILE *f, const Rdzv__V1__Job *j)
{
	char	who[300] = "the away node";

	for (size_t i = 0; i < j->n_nodes; i++)
		if (j->nodes[i]->group_rank >= 0 && !j->nodes[i]->connected) {
			snprintf(who, sizeof(who), "%s (node %" PRIu64 ")",
			    j->nodes[i]->hostname, j->nodes[i]->node_id);
			break;
		}
	key(f, "held");
	fprintf(f, "waits for %s to resume or be lost: %s\n", who,
	    j->held_failure);
}

static void
print_settings(FILE *f, const Rdzv__V1__JobSettings *s)
{
	char	lc[32], jt[32], rj[32], lt[32], rg[32], ht[32];

	if (s == NULL)
		return;
	key(f, "settings");
	fprintf(f, "nodes %u:%u, last call %s, join timeout %s, rejoin "
	    "timeout %s, max restarts %u, lease %s, reconnect grace %s",
	    s->min_nodes, s->max_nodes,
	    fmt_duration(lc, sizeof(lc), s->last_call_timeout_ms),
	    fmt_duration(jt, sizeof(jt), s->join_timeout_ms),
	    fmt_duration(rj, sizeof(rj), s->rejoin_timeout_ms), s->max_restarts,
	    fmt_duration(lt, sizeof(lt), s->lease_ttl_ms),
	    fmt_duration(rg, sizeof(rg), s->reconnect_grace_ms));
	/* Off by default: said only when set. */
	if (s->hang_timeout_ms > 0)
		fprintf(f, ", hang timeout %s",
		    fmt_duration(ht, sizeof(ht), s->hang_timeout_ms));
	/* So are the rank policy and the restart mode (docs/RECOVERY.md). */
	if (s->rank_policy == RDZV__V1__RANK_POLICY__RANK_POLICY_STABLE)
		fprintf(f, ", ranks stable");
	if (s->restart == RDZV__V1__RESTART_MODE__RESTART_MODE_IN_PROCESS)
		fprintf(f, ", restart in-process");
	/* And the preload (issue 45; docs/AGENT.md "Warm starts"). */
	if (s->preload != NULL && s->preload[0] != '\0')
		fprintf(f, ", preload %s", s->preload);
	fputc('\n', f);
}

static void
print_when(struct ctl *ctl, FILE *f, const char *k, int64_t t)
{
	char	c[32], a[32];

	if (t == 0)
		return;
	key(f, k);
	fprintf(f, "%s (%s ago)\n", fmt_clock(c, sizeof(c), t),
	    fmt_age(a, sizeof(a), ctl->now_ms, t));
}

static void
print_header(struct ctl *ctl, FILE *f, const Rdzv__V1__Job *j)
{
	char	d[32], hp[300];

	key(f, "job");
	fprintf(f, "%s\n", j->rdzv_id);
	key(f, "state");
	fprintf(f, "%s\n", job_state_name(j->state));
	if (j->reason[0] != '\0') {
		key(f, "reason");
		fprintf(f, "%s\n", j->reason);
	}
	if (j->state == RDZV__V1__JOB_STATE__JOB_STATE_WAITING)
		print_waiting(f, j);
	key(f, "owner");
	fprintf(f, "%s (attempt %u)\n", j->owner, j->attempt);
	key(f, "round");
	if (j->generation == 0)
		fprintf(f, "none completed yet\n");
	else
		fprintf(f, "generation %" PRIu64 ", world size %u, master %s, "
		    "restarts %u of max %u\n", j->generation, j->world_size,
		    j->master_addr[0] != '\0' ? fmt_hostport(hp, sizeof(hp),
		    j->master_addr, j->master_port) : "-", j->restart_count,
		    j->settings != NULL ? j->settings->max_restarts : 0);
	if (j->state == RDZV__V1__JOB_STATE__JOB_STATE_RUNNING &&
	    j->last_call_in_ms >= 0) {
		key(f, "next");
		fprintf(f, "a new round takes in %u waiting node%s in %s "
		    "(last call)\n", j->waiting, plural(j->waiting),
		    fmt_duration(d, sizeof(d), j->last_call_in_ms));
	}
	if (j->held_failure[0] != '\0')
		print_held(f, j);
	key(f, "nodes");
	fprintf(f, "%u participant%s, %u waiting, %u spare%s (min %u, max "
	    "%u)\n", j->participants, plural(j->participants),
	    j->waiting, j->spares, plural(j->spares), min_nodes(j),
	    max_nodes(j));
	if (j->has_lead_step) {
		key(f, "progress");
		fprintf(f, "leading step %" PRIu64 ", %u straggler%s\n",
		    j->lead_step, j->stragglers, plural(j->stragglers));
	}
	print_settings(f, j->settings);
	print_when(ctl, f, "created", j->created_unix_ms);
	print_when(ctl, f, "ended", j->ended_unix_ms);
}

/* A node's step and how far it trails the leader: "17 (-25, 31s)
 * STRAGGLER"; "-" when it reported none. */
static void
step_cell(struct table *t, const Rdzv__V1__Node *n)
{
	char	d[32];

	if (!n->has_step)
		table_cell(t, "-");
	else if (n->steps_behind == 0)
		table_cell(t, "%" PRIu64, n->step);
	else
		table_cell(t, "%" PRIu64 " (-%" PRIu64 ", %s)%s", n->step,
		    n->steps_behind, fmt_duration(d, sizeof(d),
		    n->behind_ms > 0 ? n->behind_ms : 0),
		    n->straggler ? " STRAGGLER" : "");
}

static void
print_nodes(struct ctl *ctl, FILE *f, const Rdzv__V1__Job *j)
{
	struct table	*t;
	char		 buf[64];
	/* The STEP column shows once some node reported a step, so jobs
	 * that do not report progress read as before. */
	bool		 steps = j->has_lead_step;

	if (j->n_nodes == 0) {
		fprintf(f, "\nno nodes\n");
		return;
	}
	t = steps ? table_new(NCOLS(node_step_headers), node_step_headers) :
	    table_new(NCOLS(node_headers), node_headers);
	for (size_t i = 0; i < j->n_nodes; i++) {
		const Rdzv__V1__Node *n = j->nodes[i];
		table_cell(t, "%" PRIu64, n->node_id);
		table_cell(t, "%s", n->hostname);
		table_cell(t, "%s", n->advertise_addr[0] != '\0' ?
		    n->advertise_addr : "-");
		/* --node-rank, SLURM_NODEID: what orders the group ranks. */
		if (n->has_rank_hint)
			table_cell(t, "%u", n->rank_hint);
		else
			table_cell(t, "-");
		if (n->group_rank >= 0)
			table_cell(t, "%d", n->group_rank);
		else
			table_cell(t, "-");
		table_cell(t, "%s", fmt_ranks(buf, sizeof(buf), n));
		table_cell(t, "%u", n->nproc);
		table_cell(t, "%s", node_state_name(n->state));
		if (n->gpus_total > 0)
			table_cell(t, "%u/%u", n->gpus_healthy, n->gpus_total);
		else
			table_cell(t, "-");
		if (steps)
			step_cell(t, n);
		if (n->silent)
			table_cell(t, "silent for %s", fmt_age(buf,
			    sizeof(buf), ctl->now_ms, n->last_seen_unix_ms));
		else if (n->connected)
			table_cell(t, "connected");
		else
			table_cell(t, "%s ago", fmt_age(buf, sizeof(buf),
			    ctl->now_ms, n->last_seen_unix_ms));
	}
	fputc('\n', f);
	table_print(t, f, "");
	table_free(t);
}

/* Every failed device, below the node table: what an operator replaces. */
static void
print_failed_gpus(FILE *f, const Rdzv__V1__Job *j)
{
	struct table	*t = table_new(NCOLS(gpu_headers), gpu_headers);

	for (size_t i = 0; i < j->n_nodes; i++) {
		const Rdzv__V1__Node *n = j->nodes[i];
		size_t listed = 0;
		for (size_t k = 0; k < n->n_gpus; k++) {
			const Rdzv__V1__GpuResult *g = n->gpus[k];
			if (g->ok)
				continue;
			table_cell(t, "%" PRIu64, n->node_id);
			table_cell(t, "%s", n->hostname);
			table_cell(t, "%u", g->device);
			table_cell(t, "%s", g->name[0] ? g->name : "-");
			table_cell(t, "%s", g->uuid[0] ? g->uuid : "-");
			table_cell(t, "%s", g->failed_step[0] ?
			    g->failed_step : "-");
			table_cell(t, "%s", g->error[0] ? g->error : "-");
			listed++;
		}
		/* Counts without per-device results: say what is known. */
		if (listed == 0 && n->gpus_healthy < n->gpus_total) {
			table_cell(t, "%" PRIu64, n->node_id);
			table_cell(t, "%s", n->hostname);
			table_cell(t, "-");
			table_cell(t, "-");
			table_cell(t, "-");
			table_cell(t, "-");
			table_cell(t, "%u of %u failed (no per-device results)",
			    n->gpus_total - n->gpus_healthy, n->gpus_total);
		}
	}
	if (table_rows(t) > 0) {
		fprintf(f, "\nfailed GPUs\n");
		table_print(t, f, "  ");
	}
	table_free(t);
}

static void
print_events(FILE *f, const Rdzv__V1__Job *j)
{
	struct table	*t;
	char		 c[32];

	if (j->n_events == 0)
		return;
	t = table_new(NCOLS(event_headers), event_headers);
	for (size_t i = 0; i < j->n_events; i++) {
		const Rdzv__V1__Event *e = j->events[i];
		table_cell(t, "%s", fmt_clock(c, sizeof(c), e->time_unix_ms));
		table_cell(t, "%" PRIu64, e->generation);
		table_cell(t, "%s", e->kind);
		table_cell(t, "%s", e->message);
	}
	fprintf(f, "\nlatest events (rdzvctl events %s for all)\n",
	    j->rdzv_id);
	table_print(t, f, "  ");
	table_free(t);
}

void
jobtext_detail(struct ctl *ctl, FILE *f, const Rdzv__V1__Job *j,
    bool with_events)
{
	print_header(ctl, f, j);
	print_nodes(ctl, f, j);
	print_failed_gpus(f, j);
	if (with_events)
		print_events(f, j);
}
