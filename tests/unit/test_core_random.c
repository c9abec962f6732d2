/*
 * A randomized test of the rendezvous core: agents of many jobs join,
 * resume, report, leave, drop their connections and go silent; operators
 * close, abort and evict; time passes; the daemon restarts from a fake
 * store now and then. After every step the invariants are checked: the
 * core's own (core_check: ranks are a permutation, base ranks are prefix
 * sums, world size is their sum, indexes agree with lists, timers), and
 * the ones seen from outside: generations only grow per job, also across
 * reopens and restarts; restart_count never passes max_restarts + 1; each
 * ASSIGNMENT a node gets carries a newer generation than the last, and one
 * of the current generation matches the round; a restart changes nothing
 * but connections. RDZV_SEED sets the seed (printed), RDZV_STEPS the steps.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "grpc.h"
#include "core_fakestore.h"

#define NJOBIDS		12
#define NAGENTS		160
#define DEFAULT_STEPS	100000

struct agent {
	bool		 used;
	uint64_t	 node_id;
	uint8_t		 session[CORE_SESSION_LEN];
	int		 job;		/* index into job_ids */
	uint64_t	 gen;		/* generation its workers run; 0 */
	uint64_t	 last_assign;	/* newest ASSIGNMENT generation */
	bool		 attached;
	bool		 expect_accepted;
	uint8_t		 token[CORE_TOKEN_LEN];	/* of its join */
};

struct jobinfo {
	bool			 known;		/* the core has the job */
	uint64_t		 max_gen;	/* highest generation seen */
	uint32_t		 attempt;
	struct core_settings	 s;		/* what its agents ask for */
	const char		*owner;
};

static const char *const job_ids[NJOBIDS] = {
	"1001", "1002", "1003", "1004", "job.5", "job:6", "7@a", "8+b",
	"n-9", "ten", "eleven", "12",
};
static const char *const hosts[] = {
	"gpu01", "gpu02", "gpu03", "gpu04", "localhost", "localhost", "gpu05",
};

static struct core		*C;
static struct core_config	 CFG;
static struct core_now		 NOW;
static struct fakestore		 FS;
static struct agent		 agents[NAGENTS];
static struct jobinfo		 jobs[NJOBIDS];
static uint64_t			 rng_state;
static uint32_t			 session_ctr;
static unsigned long		 step, nfail;
static unsigned long		 stats[32];
static char			 err[512];

enum { S_JOIN, S_JOIN_OK, S_JOIN_RETRY, S_RESUME, S_RESUME_OK, S_REPORT, S_REPORT_OK,
    S_LEAVE, S_DISC, S_LOST, S_EVICT, S_CLOSE, S_ABORT, S_TICK, S_RESTART,
    S_ROUNDS, S_FAILED_JOBS, S_CLOSED_JOBS, S_REMOVED, S_MSGS, S_RESUME_NF,
    S_RESUME_FP, S_PROGRESS, S_PROGRESS_OK };

static uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t
rndn(uint32_t n)
{
	return n == 0 ? 0 : (uint32_t)(rnd() % n);
}

static bool
chance(uint32_t percent)
{
	return rndn(100) < percent;
}

static void die(const char *, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void
die(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "step %lu: ", step);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	nfail++;
	printf("FAIL core_random\n");
	exit(1);
}

static struct agent *
agent_of(uint64_t node_id)
{
	int	i;

	for (i = 0; i < NAGENTS; i++)
		if (agents[i].used && agents[i].node_id == node_id)
			return &agents[i];
	return NULL;
}

/* The agent exits: its stream ends, which the daemon reports. */
static void
agent_exit(struct agent *a)
{
	struct core_node	*n = core_node_find(C, a->node_id);

	if (n != NULL && a->attached)
		core_disconnect(C, NOW, n);
	a->used = false;
	a->attached = false;
}

/* After a join or resume, the last message queued is the node's place. */
static void
check_told(const struct core_node *n, const char *what)
{
	struct core_msg	cur;

	core_node_current(n, &cur);
	if (n->out_tail == NULL || n->out_tail->kind != cur.kind ||
	    n->out_head->kind != CORE_MSG_ACCEPTED)
		die("%s of node %llu: last message %s, its place is %s", what,
		    (unsigned long long)n->node_id, n->out_tail == NULL ?
		    "none" : core_msg_kind_name(n->out_tail->kind),
		    core_msg_kind_name(cur.kind));
}

static int
job_index(const char *id)
{
	int	i;

	for (i = 0; i < NJOBIDS; i++)
		if (strcmp(job_ids[i], id) == 0)
			return i;
	return -1;
}

/* What the agent does with each message of its stream. */
static void
deliver(struct core_node *n, const struct core_msg *m)
{
	struct agent		*a = agent_of(n->node_id);
	const struct core_job	*j = n->job;
	const struct core_assignment *as;

	stats[S_MSGS]++;
	if (a == NULL)
		die("message %s for node %llu that no agent holds",
		    core_msg_kind_name(m->kind), (unsigned long long)n->node_id);
	if (a->expect_accepted) {
		if (m->kind != CORE_MSG_ACCEPTED)
			die("first message of node %llu is %s",
			    (unsigned long long)n->node_id,
			    core_msg_kind_name(m->kind));
		a->expect_accepted = false;
		return;
	}
	switch (m->kind) {
	case CORE_MSG_ACCEPTED:
		die("ACCEPTED twice for node %llu",
		    (unsigned long long)n->node_id);
		break;
	case CORE_MSG_ASSIGNMENT:
		as = &m->u.assignment;
		if (as->generation <= a->last_assign &&
		    as->generation != a->gen)
			die("node %llu: assignment %llu after %llu",
			    (unsigned long long)n->node_id,
			    (unsigned long long)as->generation,
			    (unsigned long long)a->last_assign);
		if (as->generation > j->generation)
			die("assignment from the future");
		if (as->generation == j->generation && n->group_rank >= 0 &&
		    (as->group_rank != (uint32_t)n->group_rank ||
		    as->base_rank != n->base_rank ||
		    as->world_size != j->world_size ||
		    as->group_world_size != j->round_n ||
		    as->local_world_size != n->nproc ||
		    strcmp(as->master_addr, j->master_addr) != 0))
			die("assignment of node %llu disagrees with the round",
			    (unsigned long long)n->node_id);
		if (as->restart_count > as->max_restarts)
			die("assignment with restart %u of max %u",
			    as->restart_count, as->max_restarts);
		a->gen = a->last_assign = as->generation;
		break;
	case CORE_MSG_STOP:
		a->gen = 0;
		break;
	case CORE_MSG_WAITING:
		break;
	case CORE_MSG_CLOSED:
	case CORE_MSG_FAILED:
	case CORE_MSG_EVICTED:
	case CORE_MSG_LEFT:
		agent_exit(a);
		break;
	}
}

static void
check_outside(void)
{
	const struct core_job	*j;
	int			 i;

	TAILQ_FOREACH(j, &C->jobs, entry) {
		i = job_index(j->rdzv_id);
		if (i < 0)
			die("unknown job %s", j->rdzv_id);
		if (j->generation < jobs[i].max_gen)
			die("job %s: generation went from %llu to %llu",
			    j->rdzv_id, (unsigned long long)jobs[i].max_gen,
			    (unsigned long long)j->generation);
		if (j->generation > jobs[i].max_gen)
			stats[S_ROUNDS] += j->generation - jobs[i].max_gen;
		jobs[i].max_gen = j->generation;
		if (j->attempt < jobs[i].attempt)
			die("job %s: attempt went back", j->rdzv_id);
		jobs[i].attempt = j->attempt;
		if (j->restart_count > j->settings.max_restarts + 1)
			die("job %s: restart count %u", j->rdzv_id,
			    j->restart_count);
	}
	for (i = 0; i < NAGENTS; i++) {
		struct core_node *n;

		if (!agents[i].used)
			continue;
		n = core_node_find(C, agents[i].node_id);
		if (n != NULL && strcmp(n->job->rdzv_id,
		    job_ids[agents[i].job]) != 0)
			die("node %llu moved jobs",
			    (unsigned long long)agents[i].node_id);
	}
}

/* The end of a daemon loop turn. */
static void
turn(void)
{
	struct core_node	*n;
	struct core_msg		 m;
	struct core_job		*j;
	char			 e[512];
	int			 i;

	if (core_check(C, e, sizeof(e)) != 0)
		die("invariant: %s", e);
	check_outside();
	fs_commit(&FS, C);
	if (FS.bad_seq != 0)
		die("event sequence numbers skip");
	while (core_outbox_pop(C, &n, &m))
		deliver(n, &m);
	TAILQ_FOREACH(j, &C->removed_jobs, entry) {
		i = job_index(j->rdzv_id);
		jobs[i].known = false;
		jobs[i].max_gen = 0;
		jobs[i].attempt = 0;
		stats[S_REMOVED]++;
	}
	core_changes_clear(C);
}

static struct agent *
random_agent(bool attached)
{
	int	i, k;

	for (k = 0; k < 8; k++) {
		i = (int)rndn(NAGENTS);
		if (agents[i].used && agents[i].attached == attached)
			return &agents[i];
	}
	return NULL;
}

static void
do_join(void)
{
	struct core_join	 r;
	struct core_node	*n = NULL;
	struct core_job		*j;
	struct agent		*a = NULL;
	int			 i, ji, rc, want = 0;

	for (i = 0; i < NAGENTS; i++)
		if (!agents[i].used) {
			a = &agents[i];
			break;
		}
	if (a == NULL)
		return;
	ji = (int)rndn(NJOBIDS);
	if (!jobs[ji].known) {
		memset(&jobs[ji].s, 0, sizeof(jobs[ji].s));
		jobs[ji].s.min_nodes = 1 + rndn(4);
		jobs[ji].s.max_nodes = jobs[ji].s.min_nodes + rndn(4);
		jobs[ji].s.max_restarts = rndn(4);
		jobs[ji].s.last_call_timeout_ms = 500 + rndn(4000);
		jobs[ji].s.join_timeout_ms = 5000 + rndn(30000);
		jobs[ji].s.lease_ttl_ms = 2000 + rndn(5000);
		jobs[ji].s.reconnect_grace_ms = 500 + rndn(3000);
		/* Rule 13: unset, 0 (a fixed allocation) or a wait. */
		if (chance(60)) {
			jobs[ji].s.has_rejoin_timeout = true;
			jobs[ji].s.rejoin_timeout_ms = chance(50) ? 0 :
			    rndn(20000);
		}
		jobs[ji].owner = chance(90) ? "alice" : "bob";
	}
	memset(&r, 0, sizeof(r));
	r.rdzv_id = job_ids[ji];
	r.settings = jobs[ji].s;
	if (chance(3))
		r.settings.max_nodes++;		/* a mismatch */
	r.identity = chance(97) ? jobs[ji].owner : "mallory";
	r.hostname = hosts[rndn(sizeof(hosts) / sizeof(hosts[0]))];
	r.advertise_addr = r.hostname;
	r.master_port = 29500 + rndn(10);
	r.nproc = 1 + rndn(8);
	r.has_rank_hint = chance(50);
	r.rank_hint = rndn(6);
	r.gpus_total = r.nproc;
	r.gpus_healthy = r.nproc;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[12] = 0x5a;
	r.has_token = true;
	memcpy(r.join_token, r.session_id, CORE_TOKEN_LEN);
	r.join_token[13] = 0x7e;

	/* Predict the answer from the job as it is. */
	j = core_job_find(C, r.rdzv_id);
	if (j != NULL) {
		if (strcmp(j->owner, r.identity) != 0)
			want = GRPC_PERMISSION_DENIED;
		else if (j->state == CORE_JOB_CLOSED ||
		    j->state == CORE_JOB_CLOSING)
			want = GRPC_FAILED_PRECONDITION;
		else if (r.settings.max_nodes != j->settings.max_nodes)
			want = GRPC_INVALID_ARGUMENT;
		else if (j->state != CORE_JOB_FAILED &&
		    j->n_state[CORE_NODE_PARTICIPANT] +
		    j->n_state[CORE_NODE_WAITING] +
		    j->n_state[CORE_NODE_SPARE] >= CFG.max_nodes_per_job)
			want = GRPC_RESOURCE_EXHAUSTED;
	} else if (r.settings.max_nodes != jobs[ji].s.max_nodes)
		want = -1;	/* creates the job with other settings */
	stats[S_JOIN]++;
	rc = core_join(C, NOW, &r, &n, err, sizeof(err));
	if (want >= 0 && rc != want)
		die("join %s: status %s, want %s (%s)", r.rdzv_id,
		    grpc_status_name(rc), grpc_status_name(want), err);
	if (rc == 0) {
		check_told(n, "join");
		stats[S_JOIN_OK]++;
		jobs[ji].known = true;
		jobs[ji].s.max_nodes = n->job->settings.max_nodes;
		jobs[ji].owner = r.identity;	/* a literal */
		memset(a, 0, sizeof(*a));
		a->used = true;
		a->node_id = n->node_id;
		memcpy(a->session, n->session_id, CORE_SESSION_LEN);
		a->job = ji;
		memcpy(a->token, r.join_token, CORE_TOKEN_LEN);
		a->attached = true;
		a->expect_accepted = true;
	}
}

/*
 * An agent that never got its first answer sends its join again with the
 * same token: while the node still has a place it gets that node back
 * (ACCEPTED, its place), never a second one.
 */
static void
do_join_retry(void)
{
	struct agent		*a = random_agent(chance(50));
	struct core_node	*n, *got = NULL;
	struct core_join	 r;
	uint32_t		 before;
	int			 rc;

	if (a == NULL || a->last_assign != 0 || a->gen != 0 ||
	    (n = core_node_find(C, a->node_id)) == NULL || !n->has_token ||
	    memcmp(n->join_token, a->token, CORE_TOKEN_LEN) != 0 ||
	    !core_node_live(n) || core_job_ended(n->job))
		return;
	memset(&r, 0, sizeof(r));
	r.rdzv_id = n->job->rdzv_id;
	r.identity = n->job->owner;
	r.hostname = n->hostname;
	r.advertise_addr = n->advertise_addr;
	r.master_port = 29500;
	r.nproc = 1;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[12] = 0x5a;
	r.has_token = true;
	memcpy(r.join_token, a->token, CORE_TOKEN_LEN);
	before = n->job->n_nodes;
	rc = core_join(C, NOW, &r, &got, err, sizeof(err));
	if (rc != 0 || got != n || n->job->n_nodes != before)
		die("retried join of node %llu: %s, node %llu (%s)",
		    (unsigned long long)n->node_id, grpc_status_name(rc),
		    got != NULL ? (unsigned long long)got->node_id : 0ULL,
		    err);
	check_told(n, "retried join");
	stats[S_JOIN_RETRY]++;
	a->attached = true;
	a->expect_accepted = true;
}

static void
do_resume(void)
{
	struct agent	*a = random_agent(false);
	struct core_node *n = NULL;
	uint64_t	 gen;
	int		 rc;

	if (a == NULL)
		return;
	gen = a->gen;
	if (chance(5) && gen > 0)
		gen--;
	stats[S_RESUME]++;
	rc = core_resume(C, NOW, jobs[a->job].owner, job_ids[a->job],
	    a->session, gen, &n, err, sizeof(err));
	if (rc == 0) {
		/* A lagging agent never saw the newer rounds: it is told
		 * STOP and its current place (rule 4). */
		if (gen != a->gen)
			a->gen = a->last_assign = gen;
		check_told(n, "resume");
		stats[S_RESUME_OK]++;
		a->attached = true;
		a->expect_accepted = true;
	} else if (rc == GRPC_NOT_FOUND || rc == GRPC_FAILED_PRECONDITION) {
		stats[rc == GRPC_NOT_FOUND ? S_RESUME_NF : S_RESUME_FP]++;
		/* Refused: the agent stops its workers and goes. */
		a->used = false;
	} else
		die("resume: %s (%s)", grpc_status_name(rc), err);
}

static void
do_report(void)
{
	struct agent		*a = random_agent(true);
	struct core_report	 r;
	uint32_t		 restarts;
	int			 rc;

	if (a == NULL)
		return;
	memset(&r, 0, sizeof(r));
	r.session_id = a->session;
	r.generation = a->gen;
	if (chance(5))
		r.generation = rndn(6);
	r.outcome = chance(20) ? CORE_OUTCOME_SUCCEEDED :
	    chance(80) ? CORE_OUTCOME_FAILED : CORE_OUTCOME_UPDATE;
	if (chance(30)) {
		r.has_gpus = true;
		r.gpus_total = 8;
		r.gpus_healthy = rndn(9);
	}
	if (r.outcome == CORE_OUTCOME_UPDATE) {
		r.nproc = rndn(5);		/* 0: unchanged */
		r.master_port = rndn(3) == 0 ? 0 : 30000 + rndn(1000);
	}
	stats[S_REPORT]++;
	rc = core_report(C, NOW, jobs[a->job].owner, &r, &restarts, err,
	    sizeof(err));
	if (rc == 0)
		stats[S_REPORT_OK]++;
	else if (rc != GRPC_FAILED_PRECONDITION && rc != GRPC_NOT_FOUND)
		die("report: %s (%s)", grpc_status_name(rc), err);
	if (rc == 0 && r.outcome == CORE_OUTCOME_SUCCEEDED)
		agent_exit(a);		/* exits 0 */
}

/*
 * A training step (docs/HEALTH.md): accepted from the generation an agent
 * runs, refused otherwise, and never a change for the store. Where the
 * node stands against its job's leader is always consistent.
 */
static void
do_progress(void)
{
	struct agent			*a = random_agent(true);
	struct core_node_progress	 p;
	struct core_node		*n;
	struct core_job			*j;
	uint64_t			 gen, lead;
	uint32_t			 k;
	int				 rc;

	if (a == NULL)
		return;
	gen = chance(5) ? rndn(6) : a->gen;
	stats[S_PROGRESS]++;
	rc = core_progress(C, NOW, jobs[a->job].owner, a->session, gen,
	    rndn(1000), err, sizeof(err));
	if (rc == 0)
		stats[S_PROGRESS_OK]++;
	else if (rc != GRPC_FAILED_PRECONDITION && rc != GRPC_NOT_FOUND)
		die("progress: %s (%s)", grpc_status_name(rc), err);
	if (!TAILQ_EMPTY(&C->dirty_jobs) || !TAILQ_EMPTY(&C->dirty_nodes) ||
	    C->n_new_events > 0 || C->n_new_rounds > 0)
		die("progress made a change to commit");
	if ((n = core_node_find(C, a->node_id)) == NULL)
		return;
	j = n->job;
	if (!core_job_progress(j, NOW, &lead, &k)) {
		if (rc == 0)
			die("progress accepted but the job has no leading step");
		return;
	}
	if (k > j->n_nodes)
		die("%u stragglers of %u nodes", k, j->n_nodes);
	TAILQ_FOREACH(n, &j->nodes, entry) {
		core_node_progress(n, lead, NOW, &p);
		if (p.has_step && (p.step > lead ||
		    p.steps_behind != lead - p.step || p.behind_ms < 0))
			die("node %llu: step %llu, %llu behind a lead of %llu",
			    (unsigned long long)n->node_id,
			    (unsigned long long)p.step,
			    (unsigned long long)p.steps_behind,
			    (unsigned long long)lead);
	}
}

static void
do_leave(void)
{
	struct agent	*a = random_agent(chance(80));
	int		 rc;

	if (a == NULL)
		return;
	stats[S_LEAVE]++;
	rc = core_leave(C, NOW, jobs[a->job].owner, a->session, "SIGTERM",
	    err, sizeof(err));
	if (rc != 0 && rc != GRPC_NOT_FOUND)
		die("leave: %s (%s)", grpc_status_name(rc), err);
	agent_exit(a);
}

static void
do_disconnect(bool silent)
{
	struct agent		*a = random_agent(true);
	struct core_node	*n;

	if (a == NULL)
		return;
	a->attached = false;
	if ((n = core_node_find(C, a->node_id)) == NULL)
		return;
	stats[silent ? S_LOST : S_DISC]++;
	if (silent)
		core_lease_lost(C, NOW, n);
	else
		core_disconnect(C, NOW, n);
}

static void
do_operator(void)
{
	int		 ji = (int)rndn(NJOBIDS), rc, what = (int)rndn(10);
	struct core_job	*j = core_job_find(C, job_ids[ji]);
	bool		 admin = chance(30);
	const char	*who = chance(80) ? jobs[ji].owner : "eve";
	struct core_node *n;
	uint32_t	 k;

	if (j == NULL)
		return;
	if (what < 6) {
		if (j->n_nodes == 0)
			return;
		k = rndn(j->n_nodes);
		TAILQ_FOREACH(n, &j->nodes, entry)
			if (k-- == 0)
				break;
		stats[S_EVICT]++;
		rc = core_evict(C, NOW, who, admin, j->rdzv_id, n->node_id,
		    "maintenance", err, sizeof(err));
	} else if (what < 9) {
		stats[S_CLOSE]++;
		rc = core_close(C, NOW, who, admin, j->rdzv_id, err,
		    sizeof(err));
	} else {
		stats[S_ABORT]++;
		rc = core_abort(C, NOW, who, admin, j->rdzv_id, "test", err,
		    sizeof(err));
	}
	if (!admin && strcmp(who, j->owner) != 0 &&
	    rc != GRPC_PERMISSION_DENIED)
		die("operator action by a stranger: %s",
		    grpc_status_name(rc));
	if (rc != 0 && rc != GRPC_PERMISSION_DENIED &&
	    rc != GRPC_FAILED_PRECONDITION)
		die("operator: %s (%s)", grpc_status_name(rc), err);
}

static void
do_tick(void)
{
	uint64_t	ms = rndn(1000) < 5 ? rndn(400000) : rndn(1500);
	uint64_t	next = core_next_deadline(C);

	/* Sometimes land exactly on the next deadline. */
	if (chance(20) && next != UINT64_MAX && next > NOW.mono_ms &&
	    next - NOW.mono_ms < 200000)
		ms = next - NOW.mono_ms;
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	stats[S_TICK]++;
	core_advance(C, NOW);
	if (core_next_deadline(C) <= NOW.mono_ms)
		die("a due deadline survived core_advance");
}

struct snap_node {
	uint64_t	node_id;
	int		state;
	int32_t		group_rank;
	uint32_t	base_rank;
	uint64_t	generation;
};

struct snap_job {
	char		id[RDZV_ID_MAX + 1];
	int		state;
	bool		held;
	uint64_t	generation;
	uint32_t	restarts, attempt, world, nnodes;
	int64_t		last_call_in, join_in;
};

/*
 * The daemon restarts: every connection drops, the core is rebuilt from
 * the store, and nothing but connections may differ.
 */
static void
do_restart(void)
{
	static struct snap_job	 sj[NJOBIDS];
	static struct snap_node	*sn;
	static size_t		 sncap;
	size_t			 nsn = 0, nsj = 0, i;
	struct core_job		*j;
	struct core_node	*n;
	char			 e[256];

	stats[S_RESTART]++;
	core_advance(C, NOW);
	core_checkpoint(C, NOW);
	turn();
	TAILQ_FOREACH(j, &C->jobs, entry) {
		snprintf(sj[nsj].id, sizeof(sj[nsj].id), "%s", j->rdzv_id);
		sj[nsj].state = j->state;
		sj[nsj].held = j->held_failure;
		sj[nsj].generation = j->generation;
		sj[nsj].restarts = j->restart_count;
		sj[nsj].attempt = j->attempt;
		sj[nsj].world = j->world_size;
		sj[nsj].nnodes = j->n_nodes;
		sj[nsj].last_call_in = core_job_last_call_in(j, NOW);
		sj[nsj].join_in = core_job_join_timeout_in(j, NOW);
		nsj++;
		TAILQ_FOREACH(n, &j->nodes, entry) {
			if (nsn == sncap) {
				sncap = sncap == 0 ? 256 : sncap * 2;
				sn = realloc(sn, sncap * sizeof(*sn));
				if (sn == NULL)
					abort();
			}
			sn[nsn].node_id = n->node_id;
			sn[nsn].state = n->state;
			sn[nsn].group_rank = n->group_rank;
			sn[nsn].base_rank = n->base_rank;
			sn[nsn].generation = n->generation;
			nsn++;
		}
	}
	core_free(C);
	NOW.mono_ms = 1000 + rndn(100000);	/* a new boot */
	NOW.wall_ms += 1000 + rndn(5000);
	if ((C = fs_restore(&FS, &CFG, NOW, e, sizeof(e))) == NULL)
		die("restore: %s", e);
	for (i = 0; i < nsj; i++) {
		j = core_job_find(C, sj[i].id);
		if (j == NULL || (int)j->state != sj[i].state ||
		    j->held_failure != sj[i].held ||
		    j->generation != sj[i].generation ||
		    j->restart_count != sj[i].restarts ||
		    j->attempt != sj[i].attempt ||
		    j->world_size != sj[i].world ||
		    j->n_nodes != sj[i].nnodes ||
		    core_job_last_call_in(j, NOW) != sj[i].last_call_in ||
		    core_job_join_timeout_in(j, NOW) != sj[i].join_in)
			die("job %s differs after a restart", sj[i].id);
	}
	if (C->n_jobs != nsj)
		die("%u jobs after a restart, not %zu", C->n_jobs, nsj);
	for (i = 0; i < nsn; i++) {
		n = core_node_find(C, sn[i].node_id);
		if (n == NULL || (int)n->state != sn[i].state ||
		    n->group_rank != sn[i].group_rank ||
		    n->base_rank != sn[i].base_rank ||
		    n->generation != sn[i].generation || n->connected)
			die("node %llu differs after a restart",
			    (unsigned long long)sn[i].node_id);
		if (core_node_live(n) && !(n->job->state == CORE_JOB_CLOSED ||
		    n->job->state == CORE_JOB_FAILED) &&
		    n->lease.at != NOW.mono_ms + n->job->settings.lease_ttl_ms)
			die("node %llu: lease not extended",
			    (unsigned long long)n->node_id);
	}
	if ((j = TAILQ_FIRST(&C->dirty_jobs)) != NULL ||
	    (n = TAILQ_FIRST(&C->dirty_nodes)) != NULL) {
		if (j == NULL)
			j = n->job;
		die("a restart alone changed job %s (%s, %s)", j->rdzv_id,
		    core_job_state_name(j->state), j->reason);
	}
	for (i = 0; i < NAGENTS; i++)
		agents[i].attached = false;
	turn();
}

int
main(void)
{
	const char	*s;
	uint64_t	 seed = 20261121;
	unsigned long	 steps = DEFAULT_STEPS, ended_failed = 0;
	uint32_t	 op;

	if ((s = getenv("RDZV_SEED")) != NULL && *s != '\0')
		seed = strtoull(s, NULL, 0);
	if ((s = getenv("RDZV_STEPS")) != NULL && *s != '\0')
		steps = strtoul(s, NULL, 0);
	printf("seed %llu (set RDZV_SEED to repeat), %lu steps\n",
	    (unsigned long long)seed, steps);
	rng_state = seed;

	core_config_defaults(&CFG);
	CFG.retention_ms = 300000;
	CFG.max_nodes_per_job = 64;
	CFG.max_ended_per_owner = 2;	/* pruning all the time */
	C = core_new(&CFG);
	NOW.mono_ms = 1000;
	NOW.wall_ms = 1700000000000LL;

	for (step = 0; step < steps; step++) {
		op = rndn(100);
		if (step % 2000 == 1999)
			do_restart();
		else if (op < 20)
			do_join();
		else if (op < 22)
			do_join_retry();
		else if (op < 32)
			do_resume();
		else if (op < 46)
			do_report();
		else if (op < 51)
			do_leave();
		else if (op < 59)
			do_disconnect(false);
		else if (op < 62)
			do_disconnect(true);
		else if (op < 64)
			do_operator();
		else if (op < 70)
			do_progress();
		else
			do_tick();
		turn();
	}
	{
		struct core_job *j;
		TAILQ_FOREACH(j, &C->jobs, entry)
			ended_failed += j->state == CORE_JOB_FAILED;
	}
	printf("resumes refused: not found %lu, precondition %lu; joins "
	    "retried with their token %lu\n", stats[S_RESUME_NF],
	    stats[S_RESUME_FP], stats[S_JOIN_RETRY]);
	printf("progress %lu (ok %lu)\n", stats[S_PROGRESS],
	    stats[S_PROGRESS_OK]);
	printf("joins %lu (ok %lu), resumes %lu (ok %lu), reports %lu "
	    "(ok %lu), leaves %lu, disconnects %lu, silent %lu, evicts %lu, "
	    "closes %lu, aborts %lu, ticks %lu, restarts %lu, rounds %lu, "
	    "jobs removed %lu, messages %lu, failed jobs now %lu\n",
	    stats[S_JOIN], stats[S_JOIN_OK], stats[S_RESUME],
	    stats[S_RESUME_OK], stats[S_REPORT], stats[S_REPORT_OK],
	    stats[S_LEAVE], stats[S_DISC], stats[S_LOST], stats[S_EVICT],
	    stats[S_CLOSE], stats[S_ABORT], stats[S_TICK], stats[S_RESTART],
	    stats[S_ROUNDS], stats[S_REMOVED], stats[S_MSGS], ended_failed);
	core_free(C);
	fs_free(&FS);
	printf("PASS core_random\n");
	return 0;
}
