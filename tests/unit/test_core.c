/*
 * Unit tests of the rendezvous core (daemon/core*.c): one or more tests per
 * rule of SPEC §4, driven with a fake clock. After every step the core's
 * invariants are checked, its changes go through a fake store (so a change
 * the core forgets to persist is caught by the restore tests), and the
 * messages for the nodes are collected for the assertions.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "grpc.h"
#include "core_fakestore.h"

static struct core	*C;
static struct core_now	 NOW;
static struct fakestore	 FS;
static uint32_t		 session_ctr;
static int		 failed;
static char		 err[512];

struct rec {
	uint64_t	node_id;
	struct core_msg	m;
};
static struct rec	*recs;
static size_t		 nrecs, caprecs;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "  %s:%d: CHECK failed: %s\n",		\
		    __FILE__, __LINE__, #cond);				\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_RC(rc, want) do {						\
	int rc_ = (rc);							\
	if (rc_ != (want)) {						\
		fprintf(stderr, "  %s:%d: status %s, want %s (%s)\n",	\
		    __FILE__, __LINE__, grpc_status_name(rc_),		\
		    grpc_status_name(want), err);			\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_STR(s, want) do {						\
	if (strcmp((s), (want)) != 0) {					\
		fprintf(stderr, "  %s:%d: got \"%s\"\n  want \"%s\"\n",	\
		    __FILE__, __LINE__, (s), (want));			\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_HAS(s, part) do {						\
	if (strstr((s), (part)) == NULL) {				\
		fprintf(stderr, "  %s:%d: \"%s\" lacks \"%s\"\n",	\
		    __FILE__, __LINE__, (s), (part));			\
		failed = 1;						\
	}								\
} while (0)

/* The end of a loop turn: check, commit, collect messages, clear. */
static void
turn(void)
{
	struct core_node	*n;
	struct core_msg		 m;
	char			 e[512];

	if (core_check(C, e, sizeof(e)) != 0) {
		fprintf(stderr, "  invariant broken: %s\n", e);
		failed = 1;
	}
	fs_commit(&FS, C);
	while (core_outbox_pop(C, &n, &m)) {
		if (nrecs == caprecs) {
			caprecs = caprecs == 0 ? 256 : caprecs * 2;
			recs = realloc(recs, caprecs * sizeof(*recs));
			if (recs == NULL)
				abort();
		}
		recs[nrecs].node_id = n->node_id;
		recs[nrecs++].m = m;
	}
	core_changes_clear(C);
}

static void
setup(const struct core_config *cfg)
{
	C = core_new(cfg);
	NOW.mono_ms = 1000000;
	NOW.wall_ms = 1700000000000LL;	/* 2023-11-14T22:13:20Z */
	nrecs = 0;
	memset(&FS, 0, sizeof(FS));
}

static void
teardown(void)
{
	turn();
	core_free(C);
	C = NULL;
	fs_free(&FS);
}

/* Time passes and the daemon's timer fires. */
static void
tick(uint64_t ms)
{
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	core_advance(C, NOW);
	turn();
}

static struct core_join
req(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r;

	memset(&r, 0, sizeof(r));
	r.rdzv_id = id;
	r.identity = "alice";
	r.hostname = host;
	r.advertise_addr = host;
	r.master_port = 29500;
	r.nproc = nproc;
	r.settings.min_nodes = min;
	r.settings.max_nodes = max;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[15] = 0xa5;
	return r;
}

static struct core_node *
join_req(struct core_join *r, int want)
{
	struct core_node	*n = NULL;

	err[0] = '\0';
	CHECK_RC(core_join(C, NOW, r, &n, err, sizeof(err)), want);
	turn();
	return want == 0 ? n : NULL;
}

static struct core_node *
join(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r = req(id, host, nproc, min, max);

	return join_req(&r, 0);
}

/* The last message the node got; one of kind 0 when none. */
static struct core_msg *
last_msg(const struct core_node *n)
{
	static struct core_msg	none;
	size_t			i;

	for (i = nrecs; i > 0; i--)
		if (recs[i - 1].node_id == n->node_id)
			return &recs[i - 1].m;
	memset(&none, 0, sizeof(none));
	return &none;
}

static size_t
count_msgs(const struct core_node *n, enum core_msg_kind kind)
{
	size_t	i, k = 0;

	for (i = 0; i < nrecs; i++)
		if (recs[i].node_id == n->node_id && recs[i].m.kind == kind)
			k++;
	return k;
}

static bool
last_is(const struct core_node *n, enum core_msg_kind kind)
{
	struct core_msg	*m = last_msg(n);

	if (m->kind != kind) {
		fprintf(stderr, "  node %llu: last message %s, want %s\n",
		    (unsigned long long)n->node_id, core_msg_kind_name(m->kind),
		    core_msg_kind_name(kind));
		return false;
	}
	return true;
}

static int
report(struct core_node *n, uint64_t gen, enum core_outcome o)
{
	struct core_report	r;
	int			rc;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = o;
	r.message = "CUDA error: out of memory";
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

static int
resume(struct core_node *n, uint64_t gen)
{
	int	rc;

	err[0] = '\0';
	rc = core_resume(C, NOW, "alice", n->job->rdzv_id, n->session_id, gen,
	    NULL, err, sizeof(err));
	turn();
	return rc;
}

static void
disconnect(struct core_node *n)
{
	core_disconnect(C, NOW, n);
	turn();
}

/* ------------------------------------------------------------ the tests */

static void
test_validation(void)
{
	struct core_join	 r;
	struct core_config	 cfg;
	char			 long_id[200];

	core_config_defaults(&cfg);
	cfg.max_nodes_per_job = 3;
	setup(&cfg);
	r = req("bad id", "h", 1, 1, 1);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	CHECK_HAS(err, "character 4");
	r = req("none", "h", 1, 1, 1);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	r = req("", "h", 1, 1, 1);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	memset(long_id, 'a', 129);
	long_id[129] = '\0';
	r = req(long_id, "h", 1, 1, 1);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	long_id[128] = '\0';
	r = req(long_id, "h", 1, 1, 1);
	join_req(&r, 0);
	r = req("A-z0.9_:@+-", "h", 1, 1, 1);
	join_req(&r, 0);
	r = req("j", "h", 0, 1, 1);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	CHECK_HAS(err, "nproc");
	r = req("j", "h", 1, 3, 2);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	CHECK_STR(err, "job j: min_nodes 3 is more than max_nodes 2 "
	    "(--nnodes 3:2)");
	r = req("j", "h", 1, 1, 4);
	join_req(&r, GRPC_RESOURCE_EXHAUSTED);
	CHECK(core_job_find(C, "j") == NULL);
	/* The node limit per job. */
	join("lim", "a", 1, 3, 3);
	join("lim", "b", 1, 3, 3);
	join("lim", "c", 1, 3, 3);
	r = req("lim", "d", 1, 3, 3);
	join_req(&r, GRPC_RESOURCE_EXHAUSTED);
	CHECK_HAS(err, "limit");
	teardown();
}

static void
test_defaults(void)
{
	struct core_node	*n;
	struct core_msg		*m;

	setup(NULL);
	n = join("d", "host0", 3, 0, 0);
	CHECK(n->job->settings.min_nodes == 1 && n->job->settings.max_nodes == 1);
	CHECK(n->job->settings.last_call_timeout_ms == 30000);
	CHECK(n->job->settings.join_timeout_ms == 600000);
	CHECK(n->job->settings.max_restarts == 0);
	CHECK(n->job->settings.lease_ttl_ms == 15000);
	CHECK(n->job->settings.reconnect_grace_ms == 3000);
	CHECK(nrecs == 2 && recs[0].m.kind == CORE_MSG_ACCEPTED);
	CHECK(recs[0].m.u.accepted.node_id == n->node_id &&
	    !recs[0].m.u.accepted.resumed &&
	    recs[0].m.u.accepted.attempt == 1 &&
	    recs[0].m.u.accepted.settings.max_nodes == 1);
	CHECK(last_is(n, CORE_MSG_ASSIGNMENT));
	m = last_msg(n);
	CHECK(m->u.assignment.generation == 1);
	CHECK(m->u.assignment.world_size == 3);
	CHECK(m->u.assignment.local_world_size == 3);
	CHECK(m->u.assignment.group_world_size == 1);
	CHECK_STR(m->u.assignment.master_addr, "host0");
	CHECK(m->u.assignment.master_port == 29500);
	CHECK(n->job->state == CORE_JOB_RUNNING);
	/* One node of one job: only one timer would be armed, none is. */
	CHECK(core_next_deadline(C) == UINT64_MAX);
	teardown();
}

/* Rule 1: last call from min_nodes, not pushed back; completion at max. */
static void
test_rule1_last_call(void)
{
	struct core_node	*a, *b, *c, *d;
	struct core_job		*j;

	setup(NULL);
	a = join("r1", "a", 1, 2, 4);
	j = a->job;
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK(last_is(a, CORE_MSG_WAITING));
	CHECK(last_msg(a)->u.waiting.state == CORE_NODE_PARTICIPANT);
	CHECK(core_job_join_timeout_in(j, NOW) == 600000);
	CHECK(core_job_last_call_in(j, NOW) == -1);
	tick(5000);
	b = join("r1", "b", 1, 2, 4);
	CHECK(core_job_last_call_in(j, NOW) == 30000);
	CHECK(core_job_join_timeout_in(j, NOW) == -1);
	CHECK(core_next_deadline(C) == NOW.mono_ms + 30000);
	tick(10000);
	c = join("r1", "c", 1, 2, 4);
	CHECK(core_job_last_call_in(j, NOW) == 20000);
	tick(19999);
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK(count_msgs(a, CORE_MSG_ASSIGNMENT) == 0);
	tick(1);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	CHECK(j->round_n == 3 && j->restart_count == 0);
	CHECK(last_is(a, CORE_MSG_ASSIGNMENT));
	CHECK(last_is(b, CORE_MSG_ASSIGNMENT));
	CHECK(last_is(c, CORE_MSG_ASSIGNMENT));
	CHECK(last_msg(c)->u.assignment.group_world_size == 3);
	teardown();

	/* Reaching max_nodes completes at once. */
	setup(NULL);
	a = join("r1b", "a", 1, 2, 3);
	b = join("r1b", "b", 1, 2, 3);
	CHECK(a->job->state == CORE_JOB_WAITING);
	c = join("r1b", "c", 1, 2, 3);
	CHECK(a->job->state == CORE_JOB_RUNNING && a->job->generation == 1);
	CHECK(count_msgs(c, CORE_MSG_WAITING) == 0);
	CHECK(last_is(c, CORE_MSG_ASSIGNMENT));
	CHECK(count_msgs(a, CORE_MSG_ASSIGNMENT) == 1);
	d = join("r1b", "d", 1, 2, 3);
	CHECK(d->state == CORE_NODE_SPARE);
	teardown();
}

static void
test_rule1_join_timeout(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	int			 i;

	setup(NULL);
	for (i = 0; i < 3; i++) {
		char host[8];
		snprintf(host, sizeof(host), "h%d", i);
		n[i] = join("jt", host, 1, 4, 4);
		tick(1000);
	}
	j = n[0]->job;
	tick(600000 - 3000 - 1);
	CHECK(j->state == CORE_JOB_WAITING);
	tick(1);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_STR(j->reason, "join timeout: 3 of 4 required nodes joined "
	    "within 600 s");
	for (i = 0; i < 3; i++) {
		CHECK(last_is(n[i], CORE_MSG_FAILED));
		CHECK_STR(last_msg(n[i])->reason, j->reason);
		CHECK(n[i]->state == CORE_NODE_FAILED);
	}
	teardown();
}

/* Rule 2: heterogeneous nodes, prefix sums, master from group rank 0. */
static void
test_rule2_world_and_base_ranks(void)
{
	struct core_join	 r;
	struct core_node	*n[3];
	uint32_t		 nproc[3] = { 4, 2, 1 };
	int			 i;

	setup(NULL);
	for (i = 0; i < 3; i++) {
		char host[8];
		snprintf(host, sizeof(host), "n%d", i);
		r = req("w7", host, nproc[i], 3, 3);
		r.has_rank_hint = true;
		r.rank_hint = (uint32_t)i;
		r.master_port = 29500 + (uint32_t)i;
		n[i] = join_req(&r, 0);
	}
	CHECK(n[0]->job->world_size == 7);
	for (i = 0; i < 3; i++) {
		CHECK(last_is(n[i], CORE_MSG_ASSIGNMENT));
		CHECK(last_msg(n[i])->u.assignment.world_size == 7);
		CHECK(last_msg(n[i])->u.assignment.group_rank == (uint32_t)i);
		CHECK_STR(last_msg(n[i])->u.assignment.master_addr, "n0");
		CHECK(last_msg(n[i])->u.assignment.master_port == 29500);
		CHECK(last_msg(n[i])->u.assignment.local_world_size ==
		    nproc[i]);
	}
	CHECK(last_msg(n[0])->u.assignment.base_rank == 0);
	CHECK(last_msg(n[1])->u.assignment.base_rank == 4);
	CHECK(last_msg(n[2])->u.assignment.base_rank == 6);
	teardown();
}

/* Rule 2: hint ascending, no hint last, then hostname, then join time. */
static void
test_rule2_rank_order(void)
{
	struct core_join	 r;
	struct core_node	*a, *b, *c, *d, *e;

	setup(NULL);
	r = req("ord", "zeta", 1, 5, 5);		/* no hint */
	a = join_req(&r, 0);
	tick(1);
	r = req("ord", "alpha", 1, 5, 5);		/* no hint */
	b = join_req(&r, 0);
	tick(1);
	r = req("ord", "alpha", 1, 5, 5);		/* no hint, later */
	c = join_req(&r, 0);
	r = req("ord", "zzz", 1, 5, 5);
	r.has_rank_hint = true;
	r.rank_hint = 7;
	d = join_req(&r, 0);
	r = req("ord", "yyy", 1, 5, 5);
	r.has_rank_hint = true;
	r.rank_hint = 3;
	e = join_req(&r, 0);
	CHECK(a->job->state == CORE_JOB_RUNNING);
	CHECK(e->group_rank == 0);
	CHECK(d->group_rank == 1);
	CHECK(b->group_rank == 2);
	CHECK(c->group_rank == 3);
	CHECK(a->group_rank == 4);
	CHECK(last_msg(a)->u.assignment.group_rank == 4);
	CHECK_STR(a->job->master_addr, "yyy");
	teardown();
}

/* Rule 3: nodes arriving within one last call make one new round. */
static void
test_rule3_one_round_for_many(void)
{
	struct core_node	*a, *b, *w[3];
	struct core_job		*j;
	int			 i;

	setup(NULL);
	a = join("r3", "a", 1, 2, 6);
	b = join("r3", "b", 1, 2, 6);
	j = a->job;
	tick(30000);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	for (i = 0; i < 3; i++) {
		char host[8];
		snprintf(host, sizeof(host), "w%d", i);
		w[i] = join("r3", host, 1, 2, 6);
		CHECK(w[i]->state == CORE_NODE_WAITING);
		CHECK(last_is(w[i], CORE_MSG_WAITING));
		CHECK(last_msg(w[i])->u.waiting.state == CORE_NODE_WAITING);
		tick(5000);
	}
	CHECK(j->generation == 1);
	CHECK(core_job_last_call_in(j, NOW) == 15000);
	tick(15000);
	CHECK(j->generation == 2 && j->round_n == 5);
	CHECK(j->restart_count == 0);
	CHECK(count_msgs(a, CORE_MSG_ASSIGNMENT) == 2);
	CHECK(count_msgs(w[0], CORE_MSG_ASSIGNMENT) == 1);
	CHECK(last_msg(w[2])->u.assignment.generation == 2);
	CHECK(last_msg(b)->u.assignment.generation == 2);
	CHECK(core_job_last_call_in(j, NOW) == -1);
	teardown();

	/* Waiting nodes that fill max_nodes make the round at once. */
	setup(NULL);
	a = join("r3b", "a", 1, 2, 4);
	b = join("r3b", "b", 1, 2, 4);
	tick(30000);
	w[0] = join("r3b", "c", 1, 2, 4);
	CHECK(a->job->generation == 1);
	w[1] = join("r3b", "d", 1, 2, 4);
	CHECK(a->job->generation == 2 && a->job->round_n == 4);
	CHECK(last_is(w[1], CORE_MSG_ASSIGNMENT));
	/* The job is full now: the next one is a spare. */
	w[2] = join("r3b", "e", 1, 2, 4);
	CHECK(w[2]->state == CORE_NODE_SPARE);
	CHECK(last_msg(w[2])->u.waiting.state == CORE_NODE_SPARE);
	teardown();
}

/* Rule 5: a lost participant counts a failure; a spare takes its place. */
static void
test_rule5_spare_promoted(void)
{
	struct core_join	 r;
	struct core_node	*a, *b, *s;
	struct core_job		*j;

	setup(NULL);
	r = req("r5", "a", 1, 2, 2);
	r.settings.max_restarts = 1;
	a = join_req(&r, 0);
	b = join("r5", "b", 1, 2, 2);
	s = join("r5", "s", 1, 2, 2);
	j = a->job;
	CHECK(s->state == CORE_NODE_SPARE && j->generation == 1);
	disconnect(b);
	tick(2999);
	CHECK(b->state == CORE_NODE_PARTICIPANT);
	tick(1);
	CHECK(b->state == CORE_NODE_LOST);
	CHECK(j->restart_count == 1 && j->generation == 2);
	CHECK(s->state == CORE_NODE_PARTICIPANT && s->group_rank >= 0);
	CHECK(last_is(s, CORE_MSG_ASSIGNMENT));
	CHECK(last_msg(s)->u.assignment.restart_count == 1);
	CHECK(last_msg(a)->u.assignment.generation == 2);
	CHECK(last_msg(a)->u.assignment.max_restarts == 1);
	/* A second loss passes max_restarts: the job fails, naming it. */
	core_lease_lost(C, NOW, s);
	turn();
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 2);
	CHECK_HAS(j->reason, "node s (node 3) was lost");
	CHECK_HAS(j->reason, "restart 2 exceeds max_restarts 1");
	CHECK(last_is(a, CORE_MSG_FAILED));
	teardown();
}

static void
test_rule5_restart_limit_zero(void)
{
	struct core_node	*a, *b;

	setup(NULL);
	a = join("r5z", "gpu01", 1, 2, 2);
	b = join("r5z", "gpu02", 1, 2, 2);
	disconnect(b);
	tick(3000);
	CHECK(a->job->state == CORE_JOB_FAILED);
	CHECK_STR(a->job->reason, "node gpu02 (node 2) was lost (it did not "
	    "reconnect before its lease ended); restart 1 exceeds "
	    "max_restarts 0");
	CHECK(last_is(a, CORE_MSG_FAILED));
	CHECK(a->state == CORE_NODE_FAILED);
	teardown();
}

/* Rule 5: too few survivors: they stop and wait; the round stays open. */
static void
test_rule5_survivors_wait(void)
{
	struct core_join	 r;
	struct core_node	*a, *b, *c;
	struct core_job		*j;

	setup(NULL);
	r = req("r5w", "a", 2, 2, 3);
	r.settings.max_restarts = 3;
	a = join_req(&r, 0);
	b = join("r5w", "b", 2, 2, 3);
	j = a->job;
	tick(30000);
	CHECK(j->generation == 1);
	core_lease_lost(C, NOW, b);
	turn();
	CHECK(j->state == CORE_JOB_WAITING && j->restart_count == 1);
	CHECK(j->generation == 1 && j->round_n == 0);
	CHECK(count_msgs(a, CORE_MSG_STOP) == 1);
	CHECK(last_is(a, CORE_MSG_WAITING));
	CHECK(core_job_join_timeout_in(j, NOW) == 600000);
	tick(1000);
	c = join("r5w", "c", 2, 2, 3);
	CHECK(c->state == CORE_NODE_PARTICIPANT);
	CHECK(core_job_last_call_in(j, NOW) == 30000);
	tick(30000);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK(last_msg(a)->u.assignment.generation == 2);
	CHECK(last_msg(c)->u.assignment.restart_count == 1);
	CHECK(j->world_size == 4);
	teardown();
}

/* Rule 6: a worker failure re-rounds the same members; fenced. */
static void
test_rule6_worker_failure(void)
{
	struct core_join	 r;
	struct core_node	*a, *b;
	struct core_job		*j;

	setup(NULL);
	r = req("r6", "a", 1, 2, 2);
	r.settings.max_restarts = 2;
	a = join_req(&r, 0);
	b = join("r6", "b", 1, 2, 2);
	j = a->job;
	CHECK_RC(report(a, 1, CORE_OUTCOME_FAILED), 0);
	CHECK(j->restart_count == 1 && j->generation == 2);
	CHECK(last_msg(a)->u.assignment.generation == 2);
	CHECK(last_msg(b)->u.assignment.restart_count == 1);
	/* b's report of the same generation is stale and ignored. */
	CHECK_RC(report(b, 1, CORE_OUTCOME_FAILED), GRPC_FAILED_PRECONDITION);
	CHECK_HAS(err, "generation 1 is stale; the current generation is 2");
	CHECK(j->restart_count == 1 && j->generation == 2);
	CHECK_RC(report(b, 2, CORE_OUTCOME_FAILED), 0);
	CHECK(j->restart_count == 2 && j->generation == 3);
	CHECK_RC(report(b, 3, CORE_OUTCOME_FAILED), 0);
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 3);
	CHECK_HAS(j->reason, "node b (node 2) reported a worker failure in "
	    "generation 3: CUDA error: out of memory; restart 3 exceeds "
	    "max_restarts 2");
	CHECK(last_is(a, CORE_MSG_FAILED) && last_is(b, CORE_MSG_FAILED));
	teardown();
}

/* Rule 7: success, closing, closed; a failure while closing fails. */
static void
test_rule7_closing_and_closed(void)
{
	struct core_node	*a, *b, *s;
	struct core_join	 r;
	struct core_job		*j;

	setup(NULL);
	a = join("r7", "a", 1, 2, 2);
	b = join("r7", "b", 1, 2, 2);
	s = join("r7", "s", 1, 2, 2);
	j = a->job;
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(j->state == CORE_JOB_CLOSING && a->state == CORE_NODE_SUCCEEDED);
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);	/* a retry */
	r = req("r7", "late", 1, 2, 2);
	join_req(&r, GRPC_FAILED_PRECONDITION);
	CHECK_HAS(err, "closing");
	tick(1000);
	CHECK_RC(report(b, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(j->state == CORE_JOB_CLOSED);
	CHECK(j->ended_ms == NOW.wall_ms);
	CHECK(last_is(s, CORE_MSG_CLOSED) && s->state == CORE_NODE_LEFT);
	CHECK(last_is(b, CORE_MSG_CLOSED));
	r = req("r7", "later", 1, 2, 2);
	join_req(&r, GRPC_FAILED_PRECONDITION);
	CHECK_STR(err, "job r7 closed at 2023-11-14T22:13:21Z; use a new --id");
	teardown();

	setup(NULL);
	a = join("r7f", "a", 1, 2, 2);
	b = join("r7f", "b", 1, 2, 2);
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK_RC(report(b, 1, CORE_OUTCOME_FAILED), 0);
	CHECK(a->job->state == CORE_JOB_FAILED);
	CHECK_HAS(a->job->reason, "while the job was closing");
	CHECK(a->state == CORE_NODE_SUCCEEDED && b->state == CORE_NODE_FAILED);
	teardown();

	/* One who leaves no longer holds closing up. */
	setup(NULL);
	a = join("r7l", "a", 1, 2, 2);
	b = join("r7l", "b", 1, 2, 2);
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, "SIGTERM", err,
	    sizeof(err)), 0);
	turn();
	CHECK(a->job->state == CORE_JOB_CLOSED);
	teardown();
}

/* Rule 8: a leave re-rounds without the node and counts no restart. */
static void
test_rule8_leave(void)
{
	struct core_node	*a, *b, *c;
	struct core_job		*j;

	setup(NULL);
	a = join("r8", "a", 1, 2, 3);
	b = join("r8", "b", 1, 2, 3);
	c = join("r8", "c", 1, 2, 3);
	j = a->job;
	CHECK_RC(core_leave(C, NOW, "alice", c->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	CHECK(c->state == CORE_NODE_LEFT);
	CHECK(j->generation == 2 && j->round_n == 2 && j->restart_count == 0);
	CHECK(last_msg(b)->u.assignment.group_world_size == 2);
	CHECK(count_msgs(c, CORE_MSG_ASSIGNMENT) == 1);
	/* Below min_nodes: the survivor stops and the round reopens. */
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_WAITING && j->restart_count == 0);
	CHECK(count_msgs(a, CORE_MSG_STOP) == 1 && last_is(a, CORE_MSG_WAITING));
	/* A second leave is fine; a report after leaving is refused. */
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);
	CHECK_RC(report(b, 2, CORE_OUTCOME_FAILED), GRPC_FAILED_PRECONDITION);
	teardown();
}

/* Rule 9 and SPEC §11: close, abort, evict; owners and admins. */
static void
test_rule9_operator(void)
{
	struct core_node	*a, *b, *c;
	struct core_job		*j;

	setup(NULL);
	a = join("op", "a", 1, 2, 3);
	b = join("op", "b", 1, 2, 3);
	c = join("op", "c", 1, 2, 3);
	j = a->job;
	CHECK_RC(core_evict(C, NOW, "mallory", false, "op", b->node_id, "x",
	    err, sizeof(err)), GRPC_PERMISSION_DENIED);
	CHECK_HAS(err, "job op belongs to alice; mallory may not");
	CHECK_RC(core_evict(C, NOW, "root", true, "op", 999, "x", err,
	    sizeof(err)), GRPC_NOT_FOUND);
	CHECK_RC(core_evict(C, NOW, "root", true, "op", b->node_id,
	    "bad GPU", err, sizeof(err)), 0);
	turn();
	CHECK(b->state == CORE_NODE_EVICTED && last_is(b, CORE_MSG_EVICTED));
	CHECK_STR(last_msg(b)->reason, "evicted by root: bad GPU");
	CHECK(j->generation == 2 && j->round_n == 2 && j->restart_count == 0);
	CHECK_RC(resume(b, 0), 0);
	CHECK(last_is(b, CORE_MSG_EVICTED));
	CHECK_RC(core_evict(C, NOW, "alice", false, "op", b->node_id, "x",
	    err, sizeof(err)), GRPC_FAILED_PRECONDITION);
	CHECK_RC(core_abort(C, NOW, "mallory", false, "op", "why", err,
	    sizeof(err)), GRPC_PERMISSION_DENIED);
	CHECK_RC(core_abort(C, NOW, "alice", false, "op", "bad data", err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_STR(j->reason, "aborted by alice: bad data");
	CHECK(last_is(a, CORE_MSG_FAILED) && last_is(c, CORE_MSG_FAILED));
	CHECK_RC(core_abort(C, NOW, "alice", false, "op", "", err,
	    sizeof(err)), GRPC_FAILED_PRECONDITION);
	CHECK_RC(core_close(C, NOW, "alice", false, "nope", err, sizeof(err)),
	    GRPC_NOT_FOUND);
	teardown();

	/* Close: running workers finish, then the job is closed. */
	setup(NULL);
	a = join("cl", "a", 1, 1, 2);
	tick(30000);
	CHECK_RC(core_close(C, NOW, "mallory", false, "cl", err, sizeof(err)),
	    GRPC_PERMISSION_DENIED);
	CHECK_RC(core_close(C, NOW, "ops", true, "cl", err, sizeof(err)), 0);
	turn();
	CHECK(a->job->state == CORE_JOB_CLOSING);
	CHECK_HAS(a->job->reason, "closed by ops");
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(a->job->state == CORE_JOB_CLOSED);
	teardown();

	/* Closing a job whose round is open closes it at once. */
	setup(NULL);
	a = join("cw", "a", 1, 2, 2);
	CHECK_RC(core_close(C, NOW, "alice", false, "cw", err, sizeof(err)),
	    0);
	turn();
	CHECK(a->job->state == CORE_JOB_CLOSED && last_is(a, CORE_MSG_CLOSED));
	teardown();
}

/* SPEC §3 and §11 on later joins. */
static void
test_join_checks(void)
{
	struct core_join	 r;
	struct core_node	*a;

	setup(NULL);
	r = req("own", "a", 1, 2, 4);
	r.settings.max_restarts = 5;
	r.settings.last_call_timeout_ms = 1000;
	a = join_req(&r, 0);
	r = req("own", "b", 1, 2, 4);
	r.identity = "bob";
	join_req(&r, GRPC_PERMISSION_DENIED);
	CHECK_STR(err, "job own belongs to alice; bob may not join it");
	r = req("own", "b", 1, 3, 4);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	CHECK_STR(err, "job own: min_nodes is 2 but this node asked for 3 "
	    "(--nnodes 3:4)");
	r = req("own", "b", 1, 2, 8);
	join_req(&r, GRPC_INVALID_ARGUMENT);
	CHECK_STR(err, "job own: max_nodes is 4 but this node asked for 8 "
	    "(--nnodes 2:8)");
	/* Other settings of later joiners are ignored; they are told. */
	r = req("own", "b", 1, 0, 0);
	r.settings.max_restarts = 9;
	a = join_req(&r, 0);
	CHECK(a->job->settings.max_restarts == 5);
	CHECK(recs[nrecs - 2].m.kind == CORE_MSG_ACCEPTED &&
	    recs[nrecs - 2].m.u.accepted.settings.max_restarts == 5 &&
	    recs[nrecs - 2].m.u.accepted.settings.last_call_timeout_ms == 1000);
	teardown();
}

/* Rule 10: fencing of reports and resumes. */
static void
test_rule10_fencing(void)
{
	struct core_node	*a, *b, *c;
	struct core_job		*j;
	uint8_t			 unknown[CORE_SESSION_LEN] = { 1, 2, 3 };
	struct core_report	 r;

	setup(NULL);
	a = join("f", "a", 1, 2, 3);
	b = join("f", "b", 1, 2, 3);
	c = join("f", "c", 1, 2, 3);
	j = a->job;
	memset(&r, 0, sizeof(r));
	r.session_id = unknown;
	r.generation = 1;
	r.outcome = CORE_OUTCOME_FAILED;
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)),
	    GRPC_NOT_FOUND);
	CHECK_RC(core_resume(C, NOW, "alice", "f", unknown, 1, NULL, err,
	    sizeof(err)), GRPC_NOT_FOUND);
	r.session_id = a->session_id;
	CHECK_RC(core_report(C, NOW, "bob", &r, NULL, err, sizeof(err)),
	    GRPC_PERMISSION_DENIED);
	CHECK_RC(report(a, 0, CORE_OUTCOME_FAILED), GRPC_FAILED_PRECONDITION);
	CHECK_RC(report(a, 7, CORE_OUTCOME_FAILED), GRPC_FAILED_PRECONDITION);
	CHECK(j->restart_count == 0 && j->generation == 1);
	/* c misses generation 2 while away, then resumes with 1. */
	disconnect(c);
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->generation == 2);
	CHECK_RC(resume(c, 1), GRPC_FAILED_PRECONDITION);
	CHECK_STR(err, "job f: generation 1 is stale; the current generation "
	    "is 2");
	/* It counts as having left: no restart, a round without it. */
	CHECK(c->state == CORE_NODE_LEFT && j->restart_count == 0);
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_RC(resume(c, 2), GRPC_FAILED_PRECONDITION);
	teardown();
}

/* Rule 11: resuming with the current generation keeps the workers. */
static void
test_rule11_resume_keeps_generation(void)
{
	struct core_node	*a, *b;
	struct core_msg		*m;
	size_t			 before;

	setup(NULL);
	a = join("rs", "a", 2, 2, 2);
	b = join("rs", "b", 2, 2, 2);
	disconnect(a);
	CHECK(core_next_deadline(C) == NOW.mono_ms + 3000);
	tick(2000);
	before = nrecs;
	CHECK_RC(resume(a, 1), 0);
	CHECK(nrecs == before + 2);
	CHECK(recs[before].m.kind == CORE_MSG_ACCEPTED &&
	    recs[before].m.u.accepted.resumed);
	m = &recs[before + 1].m;
	CHECK(m->kind == CORE_MSG_ASSIGNMENT && m->u.assignment.generation == 1);
	CHECK(m->u.assignment.base_rank == a->base_rank);
	CHECK(count_msgs(a, CORE_MSG_STOP) == 0);
	tick(10000);
	CHECK(a->state == CORE_NODE_PARTICIPANT && a->job->generation == 1);
	CHECK(core_next_deadline(C) == UINT64_MAX);
	(void)b;
	teardown();
}

/* Keepalives and reconnects write nothing; joins and rounds do. */
static void
test_dirty_tracking(void)
{
	struct core_node	*a;

	setup(NULL);
	a = join("dt", "a", 1, 1, 2);
	tick(30000);
	core_disconnect(C, NOW, a);
	CHECK(TAILQ_EMPTY(&C->dirty_jobs) && TAILQ_EMPTY(&C->dirty_nodes));
	CHECK(C->n_new_events == 0);
	CHECK(TAILQ_FIRST(&C->changed_jobs) == a->job);
	turn();
	CHECK_RC(resume(a, 1), 0);
	/* Two rows (job, node) for the join, two for the round. */
	CHECK(FS.rows == 4);
	join("dt", "b", 1, 1, 2);
	CHECK(FS.rows == 7);	/* the job, a, b: a round of two */
	CHECK(FS.bad_seq == 0);
	teardown();
}

/* Rule 11: a restart restores rounds, extends leases, keeps deadlines. */
static void
test_rule11_restore(void)
{
	struct core_node	*a, *b, *w1;
	struct core_job		*j, *k;
	struct core_config	 cfg;
	uint64_t		 a_id, b_id;
	char			 e[256];

	core_config_defaults(&cfg);
	setup(&cfg);
	a = join("rr", "a", 4, 2, 4);
	b = join("rr", "b", 2, 2, 4);
	tick(30000);
	CHECK(a->job->generation == 1);
	w1 = join("rr", "c", 1, 2, 4);
	CHECK(core_job_last_call_in(a->job, NOW) == 30000);
	k = join("wt", "x", 1, 3, 3)->job;
	tick(10000);
	CHECK(core_job_join_timeout_in(k, NOW) == 590000);
	core_checkpoint(C, NOW);
	turn();
	a_id = a->node_id;
	b_id = b->node_id;

	/* The daemon restarts 60 s later. */
	core_free(C);
	NOW.mono_ms = 5000;
	NOW.wall_ms += 60000;
	C = fs_restore(&FS, &cfg, NOW, e, sizeof(e));
	CHECK(C != NULL);
	if (C == NULL) {
		fprintf(stderr, "  %s\n", e);
		fs_free(&FS);
		return;
	}
	turn();
	j = core_job_find(C, "rr");
	k = core_job_find(C, "wt");
	a = core_node_find(C, a_id);
	b = core_node_find(C, b_id);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	CHECK(j->world_size == 6 && j->round_n == 2);
	CHECK(a->group_rank >= 0 && !a->connected);
	CHECK(core_job_last_call_in(j, NOW) == 20000);
	CHECK(core_job_join_timeout_in(k, NOW) == 590000);
	CHECK(a->lease.at == NOW.mono_ms + 15000);
	/* a resumes with its generation: same assignment, no STOP. */
	tick(14000);
	CHECK_RC(resume(a, 1), 0);
	CHECK(last_is(a, CORE_MSG_ASSIGNMENT));
	CHECK(last_msg(a)->u.assignment.generation == 1);
	CHECK(count_msgs(a, CORE_MSG_STOP) == 0);
	/* b does not: its lease ends and that is a failure (max 0). */
	tick(1000);
	CHECK(b->state != CORE_NODE_PARTICIPANT);
	CHECK(j->state == CORE_JOB_FAILED);
	/* A new node gets a new id. */
	w1 = join("new", "n", 1, 1, 1);
	CHECK(w1->node_id > b_id);
	teardown();
}

/* Rule 12: a failed job reopens; a closed one refuses; retention. */
static void
test_rule12_reopen_and_retention(void)
{
	struct core_node	*a, *b, *c;
	struct core_job		*j;
	uint8_t			 old[CORE_SESSION_LEN];

	setup(NULL);
	a = join("rq", "a", 1, 2, 2);
	b = join("rq", "b", 1, 2, 2);
	j = a->job;
	CHECK_RC(report(a, 1, CORE_OUTCOME_FAILED), 0);
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 1);
	memcpy(old, a->session_id, sizeof(old));
	/* An agent of the old attempt that resumes is told the job failed. */
	CHECK_RC(resume(b, 1), 0);
	CHECK(last_is(b, CORE_MSG_FAILED));
	tick(60000);
	c = join("rq", "a2", 1, 2, 2);
	CHECK(c->job == j && j->attempt == 2 && j->restart_count == 0);
	CHECK(j->state == CORE_JOB_WAITING && j->ended_ms == 0);
	CHECK(core_node_by_session(C, old) == NULL);
	CHECK(FS.nnodes == 1);
	CHECK(recs[nrecs - 2].m.u.accepted.attempt == 2);
	join("rq", "b2", 1, 2, 2);
	CHECK(j->generation == 2 && j->state == CORE_JOB_RUNNING);
	CHECK(last_msg(c)->u.assignment.generation == 2);
	CHECK(last_msg(c)->u.assignment.restart_count == 0);
	teardown();

	/* Ended jobs go after retention (7 days). */
	setup(NULL);
	a = join("ret", "a", 1, 1, 1);
	CHECK_RC(report(a, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(a->job->state == CORE_JOB_CLOSED);
	CHECK(FS.njobs == 1);
	NOW.mono_ms += 7ULL * 24 * 3600 * 1000 - 1;
	core_advance(C, NOW);
	CHECK(core_job_find(C, "ret") != NULL);
	NOW.mono_ms += 1;
	core_advance(C, NOW);
	CHECK(core_job_find(C, "ret") == NULL);
	CHECK(TAILQ_FIRST(&C->removed_jobs) != NULL);
	turn();
	CHECK(FS.njobs == 0 && FS.nnodes == 0);
	/* The id is free again. */
	a = join("ret", "a", 1, 1, 1);
	CHECK(a->job->generation == 1 && a->job->attempt == 1);
	teardown();
}

/* Many nodes in one job: joins stay cheap, one round of 10,000. */
static void
test_ten_thousand(void)
{
	struct core_join	 r;
	struct core_node	*n = NULL;
	uint32_t		 i;
	char			 host[32];

	setup(NULL);
	for (i = 0; i < 10000; i++) {
		snprintf(host, sizeof(host), "node%05u", 9999 - i);
		r = req("big", host, 8, 10000, 10000);
		err[0] = '\0';
		CHECK_RC(core_join(C, NOW, &r, &n, err, sizeof(err)), 0);
		if (i % 1000 == 999)
			turn();
	}
	turn();
	CHECK(n->job->state == CORE_JOB_RUNNING);
	CHECK(n->job->world_size == 80000);
	CHECK(n->group_rank == 0 && n->job->round[9999]->base_rank == 79992);
	r = req("big", "one-too-many", 8, 10000, 10000);
	join_req(&r, GRPC_RESOURCE_EXHAUSTED);
	teardown();
}

/* Ended nodes beyond the per-job limit are dropped, oldest first. */
static void
test_prune_ended_nodes(void)
{
	struct core_config	 cfg;
	struct core_node	*n, *prev;
	struct core_job		*j;
	int			 i;

	core_config_defaults(&cfg);
	cfg.max_nodes_per_job = 3;
	setup(&cfg);
	prev = join("el", "h", 1, 1, 1);
	j = prev->job;
	for (i = 0; i < 10; i++) {
		n = join("el", "h", 1, 1, 1);
		CHECK(n->state == CORE_NODE_SPARE);
		CHECK_RC(core_leave(C, NOW, "alice", prev->session_id, NULL,
		    err, sizeof(err)), 0);
		turn();
		CHECK(n->state == CORE_NODE_PARTICIPANT && n->group_rank == 0);
		prev = n;
	}
	CHECK(j->generation == 11 && j->restart_count == 0);
	CHECK(j->n_nodes <= 5 && j->n_state[CORE_NODE_LEFT] <= 4);
	CHECK(FS.nnodes == j->n_nodes);
	teardown();
}

static const struct {
	const char	*name;
	void		(*fn)(void);
} tests[] = {
	{ "validation", test_validation },
	{ "defaults", test_defaults },
	{ "rule1_last_call", test_rule1_last_call },
	{ "rule1_join_timeout", test_rule1_join_timeout },
	{ "rule2_world_and_base_ranks", test_rule2_world_and_base_ranks },
	{ "rule2_rank_order", test_rule2_rank_order },
	{ "rule3_one_round_for_many", test_rule3_one_round_for_many },
	{ "rule5_spare_promoted", test_rule5_spare_promoted },
	{ "rule5_restart_limit_zero", test_rule5_restart_limit_zero },
	{ "rule5_survivors_wait", test_rule5_survivors_wait },
	{ "rule6_worker_failure", test_rule6_worker_failure },
	{ "rule7_closing_and_closed", test_rule7_closing_and_closed },
	{ "rule8_leave", test_rule8_leave },
	{ "rule9_operator", test_rule9_operator },
	{ "join_checks", test_join_checks },
	{ "rule10_fencing", test_rule10_fencing },
	{ "rule11_resume_keeps_generation",
	    test_rule11_resume_keeps_generation },
	{ "dirty_tracking", test_dirty_tracking },
	{ "rule11_restore", test_rule11_restore },
	{ "rule12_reopen_and_retention", test_rule12_reopen_and_retention },
	{ "prune_ended_nodes", test_prune_ended_nodes },
	{ "ten_thousand", test_ten_thousand },
};

int
main(int argc, char **argv)
{
	size_t	i;
	int	nfailed = 0;

	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
			continue;
		failed = 0;
		session_ctr = 0;
		tests[i].fn();
		printf("%s %s\n", failed ? "FAIL" : "PASS", tests[i].name);
		nfailed += failed;
	}
	free(recs);
	printf("%d failed\n", nfailed);
	return nfailed == 0 ? 0 : 1;
}
