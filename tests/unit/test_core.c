/*
 * Unit tests of the rendezvous core, part one: validation and SPEC §4 rules
 * 1 to 5 (rounds, ranks, waiting nodes and spares, lost participants), with
 * a fake clock. test_core_life.c has rules 6 to 12.
 */
#include "core_harness.h"

static void
test_validation(void)
{
	struct core_join	 r;
	struct core_config	 cfg;
	char			 long_id[200], long_addr[300];

	core_config_defaults(&cfg);
	cfg.max_nodes_per_job = 3;
	setup(&cfg);
	r = req("bad id", "h", 1, 1, 1);
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "character 4");
	r = req("none", "h", 1, 1, 1);
	join_req(&r, CORE_INVALID);
	r = req("", "h", 1, 1, 1);
	join_req(&r, CORE_INVALID);
	memset(long_id, 'a', 129);
	long_id[129] = '\0';
	r = req(long_id, "h", 1, 1, 1);
	join_req(&r, CORE_INVALID);
	long_id[128] = '\0';
	r = req(long_id, "h", 1, 1, 1);
	join_req(&r, 0);
	r = req("A-z0.9_:@+-", "h", 1, 1, 1);
	join_req(&r, 0);
	r = req("j", "h", 0, 1, 1);
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "nproc");
	r = req("j", "h", 1, 1, 1);
	r.master_port = 70000;
	join_req(&r, CORE_INVALID);
	CHECK_STR(err, "job j: master_port 70000 is not a TCP port (1 to "
	    "65535)");
	r.master_port = 29500;
	memset(long_addr, 'a', 256);
	long_addr[256] = '\0';
	r.advertise_addr = long_addr;
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "advertise address must be at most 255 bytes");
	r = req("j", "h", 1, 3, 2);
	join_req(&r, CORE_INVALID);
	CHECK_STR(err, "job j: min_nodes 3 is more than max_nodes 2 "
	    "(--nnodes 3:2)");
	r = req("j", "h", 1, 1, 4);
	join_req(&r, CORE_LIMIT);
	CHECK(core_job_find(C, "j") == NULL);
	/* The node limit per job. */
	join("lim", "a", 1, 3, 3);
	join("lim", "b", 1, 3, 3);
	join("lim", "c", 1, 3, 3);
	r = req("lim", "d", 1, 3, 3);
	join_req(&r, CORE_LIMIT);
	CHECK_HAS(err, "limit");
	teardown();
}

/* What one client may hold: jobs not ended per identity, join timeout. */
static void
test_limits_per_client(void)
{
	struct core_join	 r;
	struct core_config	 cfg;

	core_config_defaults(&cfg);
	cfg.max_jobs_per_owner = 2;
	cfg.max_join_timeout_ms = 3600 * 1000;
	setup(&cfg);
	r = req("long", "h", 1, 2, 2);
	r.settings.join_timeout_ms = 49ULL * 86400 * 1000;
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "join timeout 4233600 s is over this rdzvd's limit of 3600 s "
	    "(max-join-timeout)");
	CHECK(core_job_find(C, "long") == NULL);

	join("j1", "a", 1, 2, 2);
	join("j2", "a", 1, 2, 2);
	r = req("j3", "a", 1, 2, 2);
	join_req(&r, CORE_LIMIT);
	CHECK_HAS(err, "alice has 2 jobs that have not ended, the limit per "
	    "identity (max-jobs-per-identity)");
	CHECK(core_job_find(C, "j3") == NULL);
	/* More nodes of an existing job are fine; another owner too. */
	join("j1", "b", 1, 2, 2);
	r = req("j3", "a", 1, 2, 2);
	r.identity = "bob";
	join_req(&r, 0);
	/* An ended job makes room. */
	CHECK_RC(core_abort(C, NOW, "alice", false, "j1", "test", err,
	    sizeof(err)), 0);
	turn();
	CHECK(core_job_find(C, "j1")->state == CORE_JOB_FAILED);
	r = req("j4", "a", 1, 2, 2);
	join_req(&r, 0);
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

/*
 * Rule 4: the daemon forms the new round itself, from the live
 * participants and, where room is left, spares in arrival order. Members
 * are sent a higher generation without rejoining, and membership changes
 * (scale up, a planned leave) count no restart.
 */
static void
test_rule4_daemon_forms_the_round(void)
{
	struct core_node	*a, *b, *w, *s1, *s2;
	struct core_job		*j;

	setup(NULL);
	a = join("r4", "a", 2, 2, 3);
	b = join("r4", "b", 1, 2, 3);
	j = a->job;
	tick(30000);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	w = join("r4", "w", 1, 2, 3);
	/* A waiting node that fills max_nodes is taken in at once. */
	CHECK(j->generation == 2 && w->state == CORE_NODE_PARTICIPANT);
	s1 = join("r4", "s1", 4, 2, 3);
	tick(1);
	s2 = join("r4", "s2", 1, 2, 3);
	CHECK(s1->state == CORE_NODE_SPARE && s2->state == CORE_NODE_SPARE);
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	/* At once: the live participants and the first spare to arrive. */
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 3);
	CHECK(j->round_n == 3 && j->restart_count == 0);
	CHECK(a->state == CORE_NODE_PARTICIPANT);
	CHECK(w->state == CORE_NODE_PARTICIPANT);
	CHECK(s1->state == CORE_NODE_PARTICIPANT);
	CHECK(s2->state == CORE_NODE_SPARE);
	CHECK(count_msgs(s2, CORE_MSG_ASSIGNMENT) == 0);
	CHECK(count_msgs(a, CORE_MSG_ASSIGNMENT) == 3);
	CHECK(last_msg(a)->u.assignment.generation == 3);
	CHECK(last_msg(w)->u.assignment.generation == 3);
	CHECK(last_msg(s1)->u.assignment.generation == 3);
	CHECK(last_msg(s1)->u.assignment.restart_count == 0);
	CHECK(last_msg(s1)->u.assignment.base_rank == 2);	/* a, s1, w */
	CHECK(j->world_size == 7);
	CHECK(core_job_last_call_in(j, NOW) == -1);
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
	CHECK_STR(a->job->reason, "node gpu02 (node 2) was lost (its "
	    "connection closed and it did not reconnect within "
	    "reconnect_grace 3 s); restart 1 exceeds max_restarts 0");
	CHECK(last_is(a, CORE_MSG_FAILED));
	CHECK(a->state == CORE_NODE_FAILED);
	teardown();
}

/*
 * Three nodes h0..h2 of job id, 2:max, max_restarts 1: rdzvd restarts, h2
 * does not come back (yet) and h0 reports FAILED, which is held: h2's
 * absence is not known to be a loss (rule 14 needs a closed connection).
 */
static void
held_setup(const char *id, uint32_t max, struct core_node *n[3])
{
	struct core_join	r;
	int			i;

	for (i = 0; i < 3; i++) {
		char host[8];
		snprintf(host, sizeof(host), "h%d", i);
		r = req(id, host, 1, 2, max);
		r.settings.max_restarts = 1;
		n[i] = join_req(&r, 0);
	}
	if (n[0]->job->generation == 0)
		tick(30000);
	CHECK(n[0]->job->generation == 1 && n[0]->job->round_n == 3);
	if (!restart_away(n, 3, 2))
		return;
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(n[0]->job->held_failure && n[0]->job->restart_count == 0);
}

/*
 * A node dies; its peers' workers fail at once and their agents report
 * FAILED while it is within its reconnect grace. That is one failure, the
 * loss (rule 5), counted once and named after the lost node; had the node
 * come back, the report would count (rule 6).
 */
static void
test_rule5_peer_failures_wait_for_the_loss(void)
{
	struct core_node	*n[3];
	int			 i;

	for (int resumes = 0; resumes <= 1; resumes++) {
		setup(NULL);
		held_setup("held", 3, n);
		CHECK_RC(report(n[1], 1, CORE_OUTCOME_FAILED), 0);
		CHECK(n[0]->job->generation == 1);	/* held */
		CHECK(n[0]->job->restart_count == 0);
		if (resumes) {
			CHECK_RC(resume(n[2], 1), 0);
			CHECK(n[0]->job->generation == 2);
			CHECK(n[0]->job->restart_count == 1);
			CHECK(n[0]->job->world_size == 3);
			CHECK(last_is(n[2], CORE_MSG_ASSIGNMENT));
		} else {
			tick(15000);			/* the lease ends */
			CHECK(n[0]->job->state == CORE_JOB_RUNNING);
			CHECK(n[0]->job->generation == 2);
			CHECK(n[0]->job->restart_count == 1);
			CHECK(n[0]->job->world_size == 2);
			CHECK(n[2]->state == CORE_NODE_LOST);
			CHECK(last_is(n[0], CORE_MSG_ASSIGNMENT));
			CHECK(last_msg(n[1])->u.assignment.restart_count == 1);
		}
		teardown();
	}
	/* With max_restarts 0 the job fails naming the lost node. */
	setup(NULL);
	for (i = 0; i < 2; i++) {
		char host[8];
		snprintf(host, sizeof(host), "h%d", i);
		n[i] = join("held0", host, 1, 2, 2);
	}
	if (!restart_away(n, 2, 1))
		return;
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(n[0]->job->state == CORE_JOB_RUNNING);
	tick(15000);
	CHECK(n[0]->job->state == CORE_JOB_FAILED);
	CHECK_HAS(n[0]->job->reason, "node h1 (node 2) was lost");
	teardown();
}

/* A held failure is settled by what happens next, whatever that is. */
static void
test_rule5_held_failure_settles(void)
{
	struct core_node	*n[3], *w;
	uint64_t		 id[3];
	struct core_job		*j;
	int			 i;

	/* The daemon restarts: the failure counts once every member is
	 * back (a report answered is never lost, SPEC §9). */
	setup(NULL);
	held_setup("hr", 3, n);
	for (i = 0; i < 3; i++)
		id[i] = n[i]->node_id;
	if (!restart(NULL, 5000, 1000)) {
		fs_free(&FS);
		return;
	}
	for (i = 0; i < 3; i++)
		n[i] = core_node_find(C, id[i]);
	j = n[0]->job;
	CHECK(j->held_failure && j->generation == 1);
	CHECK_RC(resume(n[1], 1), 0);
	CHECK_RC(resume(n[2], 1), 0);
	CHECK(j->generation == 1 && j->restart_count == 0);
	CHECK_RC(resume(n[0], 1), 0);
	CHECK(!j->held_failure && j->generation == 2 && j->restart_count == 1);
	CHECK(last_msg(n[2])->u.assignment.generation == 2);
	CHECK_HAS(last_msg(n[2])->u.assignment.master_addr, "h0");
	teardown();

	/* The job begins closing: rule 7's failure while closing. */
	setup(NULL);
	held_setup("hc", 3, n);
	CHECK_RC(core_close(C, NOW, "alice", false, "hc", err,
	    sizeof(err)), 0);
	turn();
	CHECK(n[0]->job->state == CORE_JOB_FAILED);
	CHECK_HAS(n[0]->job->reason, "node h0 (node 1) reported a worker "
	    "failure in generation 1");
	CHECK_HAS(n[0]->job->reason, "while the job was closing");
	teardown();

	/* A node arrives meanwhile: it is taken in with the settlement, in
	 * one round. */
	setup(NULL);
	held_setup("hw", 4, n);
	w = join("hw", "w", 1, 2, 4);
	CHECK(w->state == CORE_NODE_WAITING && w->job->generation == 1);
	tick(15000);			/* h2's lease ends */
	CHECK(w->job->generation == 2 && w->job->restart_count == 1);
	CHECK(w->state == CORE_NODE_PARTICIPANT && w->job->round_n == 3);
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
	join_req(&r, CORE_DENIED);
	CHECK_STR(err, "job own belongs to alice; bob may not join it");
	r = req("own", "b", 1, 3, 4);
	join_req(&r, CORE_INVALID);
	CHECK_STR(err, "job own: min_nodes is 2 but this node asked for 3 "
	    "(--nnodes 3:4)");
	r = req("own", "b", 1, 2, 8);
	join_req(&r, CORE_INVALID);
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

/*
 * A join re-sent with its token after the first answer came too late gets
 * the node of the first attempt: no second node, no round for a ghost.
 * Another job, another owner or an ended node do not match.
 */
static void
test_join_token_retry(void)
{
	struct core_join	 r, again;
	struct core_node	*a, *b, *c, *d;
	struct core_job		*j;
	uint32_t		 nodes;
	size_t			 before;

	setup(NULL);
	a = join("jt", "a", 1, 2, 4);
	b = join("jt", "b", 1, 2, 4);
	j = a->job;
	tick(31000);
	CHECK(j->generation == 1 && j->state == CORE_JOB_RUNNING);
	r = req("jt", "c", 1, 2, 4);
	r.has_token = true;
	memset(r.join_token, 0x5c, sizeof(r.join_token));
	c = join_req(&r, 0);
	CHECK(c != NULL && c->state == CORE_NODE_WAITING);
	nodes = j->n_nodes;
	/* The agent gave up on its stream and sends the join again (a
	 * fresh request: the harness draws another session id). */
	disconnect(c);
	again = req("jt", "c", 1, 2, 4);
	again.has_token = true;
	memcpy(again.join_token, r.join_token, sizeof(r.join_token));
	before = nrecs;
	d = join_req(&again, 0);
	CHECK(d == c && j->n_nodes == nodes);
	CHECK(nrecs == before + 2);
	CHECK(recs[before].m.kind == CORE_MSG_ACCEPTED &&
	    recs[before].m.u.accepted.node_id == c->node_id &&
	    memcmp(recs[before].m.u.accepted.session_id, c->session_id,
	    CORE_SESSION_LEN) == 0);
	CHECK(recs[before + 1].m.kind == CORE_MSG_WAITING &&
	    recs[before + 1].m.u.waiting.state == CORE_NODE_WAITING);
	CHECK(c->connected && c->state == CORE_NODE_WAITING);
	/* Its last call makes the scale-up, the only round: nobody lost. */
	tick(31000);
	CHECK(j->generation == 2 && j->round_n == 3 && j->restart_count == 0);
	CHECK(last_is(c, CORE_MSG_ASSIGNMENT));
	tick(60000);
	CHECK(j->generation == 2 && j->state == CORE_JOB_RUNNING);
	/* The same token from another owner, or for another job, is a new
	 * join. */
	again = req("jt2", "c", 1, 1, 1);
	again.has_token = true;
	memcpy(again.join_token, r.join_token, sizeof(r.join_token));
	d = join_req(&again, 0);
	CHECK(d != NULL && d != c && d->job != j);
	/* A node that left does not answer to its token. */
	CHECK_RC(core_leave(C, NOW, "alice", d->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	again = req("jt2", "c", 1, 1, 1);
	again.has_token = true;
	memcpy(again.join_token, r.join_token, sizeof(r.join_token));
	d = join_req(&again, 0);
	CHECK(d != NULL && d->state == CORE_NODE_PARTICIPANT &&
	    d->job->generation == 2);
	(void)b;
	teardown();
}

static const struct test tests[] = {
	{ "join_token_retry", test_join_token_retry },
	{ "validation", test_validation },
	{ "limits_per_client", test_limits_per_client },
	{ "defaults", test_defaults },
	{ "rule1_last_call", test_rule1_last_call },
	{ "rule1_join_timeout", test_rule1_join_timeout },
	{ "rule2_world_and_base_ranks", test_rule2_world_and_base_ranks },
	{ "rule2_rank_order", test_rule2_rank_order },
	{ "rule3_one_round_for_many", test_rule3_one_round_for_many },
	{ "rule4_daemon_forms_the_round",
	    test_rule4_daemon_forms_the_round },
	{ "rule5_spare_promoted", test_rule5_spare_promoted },
	{ "rule5_restart_limit_zero", test_rule5_restart_limit_zero },
	{ "rule5_survivors_wait", test_rule5_survivors_wait },
	{ "rule5_peer_failures_wait_for_the_loss",
	    test_rule5_peer_failures_wait_for_the_loss },
	{ "rule5_held_failure_settles", test_rule5_held_failure_settles },
	{ "join_checks", test_join_checks },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
