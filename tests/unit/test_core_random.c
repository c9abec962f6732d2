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
 * but connections. And two that the chaos soak's checker (tests/chaos,
 * docs/RELIABILITY.md) judges on real processes: no two nodes are
 * assigned one worker rank in one generation of a job (invariant 1), and
 * one input (a fault) costs a job at most one counted restart (invariant
 * 4). RDZV_SEED sets the seed (printed), RDZV_STEPS the steps.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core_random.h"

const char *const job_ids[NJOBIDS] = {
	"1001", "1002", "1003", "1004", "job.5", "job:6", "7@a", "8+b",
	"n-9", "ten", "eleven", "12",
};
const char *const hosts[NHOSTS] = {
	"gpu01", "gpu02", "gpu03", "gpu04", "localhost", "localhost", "gpu05",
};

/* The world the inputs (core_random_inputs.c) act on. */
struct core		*C;
struct core_config	 CFG;
struct core_now		 NOW;
struct fakestore	 FS;
struct agent		 agents[NAGENTS];
struct jobinfo		 jobs[NJOBIDS];
uint64_t		 rng_state;
uint32_t		 session_ctr;
unsigned long		 step, nfail;
unsigned long		 stats[32];
char			 err[512];

uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint32_t
rndn(uint32_t n)
{
	return n == 0 ? 0 : (uint32_t)(rnd() % n);
}

bool
chance(uint32_t percent)
{
	return rndn(100) < percent;
}

void
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

struct agent *
agent_of(uint64_t node_id)
{
	int	i;

	for (i = 0; i < NAGENTS; i++)
		if (agents[i].used && agents[i].node_id == node_id)
			return &agents[i];
	return NULL;
}

/* The agent exits: its stream ends, which the daemon reports. */
void
agent_exit(struct agent *a)
{
	struct core_node	*n = core_node_find(C, a->node_id);

	if (n != NULL && a->attached)
		core_disconnect(C, NOW, n);
	a->used = false;
	a->attached = false;
}

/* After a join or resume, the last message queued is the node's place. */
void
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

int
job_index(const char *id)
{
	int	i;

	for (i = 0; i < NJOBIDS; i++)
		if (strcmp(job_ids[i], id) == 0)
			return i;
	return -1;
}

/*
 * The chaos checker's invariant 1 at the core's level: within one
 * generation of a job, the worker ranks [base, base + nproc) that nodes
 * are told they hold never overlap between two nodes.
 */
static void
hold_ranks(const struct core_node *n, const struct core_assignment *as)
{
	struct jobinfo	*ji = &jobs[job_index(n->job->rdzv_id)];
	uint32_t	 lo = as->base_rank, hi = lo + as->local_world_size;
	int		 k;

	if (as->generation < ji->held_gen)
		return;
	if (as->generation > ji->held_gen) {
		ji->held_gen = as->generation;
		ji->nheld = 0;
	}
	for (k = 0; k < ji->nheld; k++) {
		if (ji->held[k].node_id == n->node_id)
			break;
		if (lo < ji->held[k].base + ji->held[k].n &&
		    ji->held[k].base < hi)
			die("job %s generation %llu: node %llu assigned ranks "
			    "%u..%u, node %llu holds %u..%u", n->job->rdzv_id,
			    (unsigned long long)as->generation,
			    (unsigned long long)n->node_id, lo, hi - 1,
			    (unsigned long long)ji->held[k].node_id,
			    ji->held[k].base,
			    ji->held[k].base + ji->held[k].n - 1);
	}
	if (k == ji->nheld) {
		if (ji->nheld == NAGENTS)
			die("more assignments in one generation than agents");
		ji->nheld++;
	}
	ji->held[k].node_id = n->node_id;
	ji->held[k].base = lo;
	ji->held[k].n = as->local_world_size;
}

/* What the agent does with each message of its stream. */
void
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
		hold_ranks(n, as);
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
	case CORE_MSG_LOST:
		agent_exit(a);
		break;
	}
}

void
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
		if (j->attempt != jobs[i].attempt)
			jobs[i].restarts = 0;
		jobs[i].attempt = j->attempt;
		if (j->restart_count > j->settings.max_restarts + 1)
			die("job %s: restart count %u", j->rdzv_id,
			    j->restart_count);
		/* One input is at most one fault: one counted restart (rule
		 * 13, the chaos checker's invariant 4). A new attempt starts
		 * the count again. */
		if (j->restart_count > jobs[i].restarts + 1)
			die("job %s: restart count %u after %u in one turn",
			    j->rdzv_id, j->restart_count, jobs[i].restarts);
		jobs[i].restarts = j->restart_count;
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
void
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
		jobs[i].restarts = 0;
		jobs[i].held_gen = 0;
		jobs[i].nheld = 0;
		stats[S_REMOVED]++;
	}
	core_changes_clear(C);
}

struct agent *
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
