/*
 * Unit tests of the rendezvous core, part two: SPEC §4 rules 6 to 12
 * (worker failures, closing, leaves, operators, fencing, restarts, ended
 * jobs), persistence of changes, and a job of 10,000 nodes.
 */
#include "core_harness.h"

/* A worker of |n| says step |s| of generation |gen| (rdzv.progress). */
static void
stepped(struct core_node *n, uint64_t gen, uint64_t s)
{
	CHECK_RC(core_progress(C, NOW, "alice", n->session_id, gen, s, err,
	    sizeof(err)), 0);
}

/* Rule 6: a worker failure re-rounds the same members; fenced. Each round
 * steps before it fails, so that each failure counts (rule 18). */
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
	CHECK_RC(report(b, 1, CORE_OUTCOME_FAILED), CORE_REFUSED);
	CHECK_HAS(err, "generation 1 is stale; the current generation is 2");
	CHECK(j->restart_count == 1 && j->generation == 2);
	/* A report for a generation not formed yet is not called stale. */
	CHECK_RC(report(b, 7, CORE_OUTCOME_FAILED), CORE_REFUSED);
	CHECK_HAS(err, "generation 7 has not been formed; the current "
	    "generation is 2");
	CHECK(j->restart_count == 1 && j->generation == 2);
	stepped(a, 2, 1);
	CHECK_RC(report(b, 2, CORE_OUTCOME_FAILED), 0);
	CHECK(j->restart_count == 2 && j->generation == 3);
	stepped(b, 3, 1);
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
	join_req(&r, CORE_REFUSED);
	CHECK_HAS(err, "closing");
	tick(1000);
	CHECK_RC(report(b, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(j->state == CORE_JOB_CLOSED);
	CHECK(j->ended_ms == NOW.wall_ms);
	CHECK(last_is(s, CORE_MSG_CLOSED) && s->state == CORE_NODE_LEFT);
	CHECK(last_is(b, CORE_MSG_CLOSED));
	r = req("r7", "later", 1, 2, 2);
	join_req(&r, CORE_REFUSED);
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
	CHECK_RC(report(b, 2, CORE_OUTCOME_FAILED), CORE_REFUSED);
	/* The last one leaving too ends the job at once (rule 13), and its
	 * reason no longer speaks of an open round. */
	CHECK_RC(core_leave(C, NOW, "alice", a->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 0);
	CHECK_STR(j->reason, "cancelled: every node left");
	CHECK(core_job_join_timeout_in(j, NOW) < 0);
	teardown();
}

/* Rule 13: a job whose nodes have all gone ends now, however they went. */
static void
test_rule13_nobody_left(void)
{
	struct core_node	*a, *b;
	struct core_job		*j;

	setup(NULL);
	a = join("r13", "a", 1, 2, 2);
	b = join("r13", "b", 1, 2, 2);
	j = a->job;
	CHECK(j->state == CORE_JOB_RUNNING);
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, "scancel", err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_WAITING);
	core_lease_lost(C, NOW, a);
	turn();
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 0);
	CHECK_HAS(j->reason, "every node has gone (1 left, 1 lost, 0 evicted)");
	CHECK_HAS(j->reason, "last, node a (node 1) was lost: ");
	/* A requeued run's join reopens it (rule 12). */
	a = join("r13", "a2", 1, 2, 2);
	CHECK(j->state == CORE_JOB_WAITING && j->attempt == 2);
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
	    err, sizeof(err)), CORE_DENIED);
	CHECK_HAS(err, "job op belongs to alice; mallory may not");
	CHECK_RC(core_evict(C, NOW, "root", true, "op", 999, "x", err,
	    sizeof(err)), CORE_NOT_FOUND);
	CHECK_RC(core_evict(C, NOW, "root", true, "op", b->node_id,
	    "bad GPU", err, sizeof(err)), 0);
	turn();
	CHECK(b->state == CORE_NODE_EVICTED && last_is(b, CORE_MSG_EVICTED));
	CHECK_STR(last_msg(b)->reason, "evicted by root: bad GPU");
	CHECK(j->generation == 2 && j->round_n == 2 && j->restart_count == 0);
	CHECK_RC(resume(b, 0), 0);
	CHECK(last_is(b, CORE_MSG_EVICTED));
	CHECK_RC(core_evict(C, NOW, "alice", false, "op", b->node_id, "x",
	    err, sizeof(err)), CORE_REFUSED);
	CHECK_RC(core_abort(C, NOW, "mallory", false, "op", "why", err,
	    sizeof(err)), CORE_DENIED);
	CHECK_RC(core_abort(C, NOW, "alice", false, "op", "bad data", err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_STR(j->reason, "aborted by alice: bad data");
	CHECK(last_is(a, CORE_MSG_FAILED) && last_is(c, CORE_MSG_FAILED));
	CHECK_RC(core_abort(C, NOW, "alice", false, "op", "", err,
	    sizeof(err)), CORE_REFUSED);
	CHECK_RC(core_close(C, NOW, "alice", false, "nope", err, sizeof(err)),
	    CORE_NOT_FOUND);
	teardown();

	/* Close: running workers finish, then the job is closed. */
	setup(NULL);
	a = join("cl", "a", 1, 1, 2);
	tick(30000);
	CHECK_RC(core_close(C, NOW, "mallory", false, "cl", err, sizeof(err)),
	    CORE_DENIED);
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

/*
 * What a resume with generation |stopped| of a node now placed in round
 * |gen| is told, from recs[at] on: Accepted (resumed), STOP of |stopped|,
 * and the assignment of |gen| at its group rank.
 */
static void
check_resumed_into(size_t at, uint64_t stopped, uint64_t gen,
    const struct core_node *n)
{
	CHECK(nrecs == at + 3);
	CHECK(recs[at].m.kind == CORE_MSG_ACCEPTED &&
	    recs[at].m.u.accepted.resumed);
	CHECK(recs[at + 1].m.kind == CORE_MSG_STOP &&
	    recs[at + 1].m.u.stop.generation == stopped);
	CHECK(recs[at + 2].m.kind == CORE_MSG_ASSIGNMENT &&
	    recs[at + 2].m.u.assignment.generation == gen &&
	    recs[at + 2].m.u.assignment.group_rank == (uint32_t)n->group_rank);
}

/* Rule 10: fencing of reports and resumes. */
static void
test_rule10_fencing(void)
{
	struct core_node	*a, *b, *c;
	struct core_job		*j;
	uint8_t			 unknown[CORE_SESSION_LEN] = { 1, 2, 3 };
	struct core_report	 r;
	size_t			 before;

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
	    CORE_NOT_FOUND);
	CHECK_RC(core_resume(C, NOW, "alice", "f", unknown, 1, NULL, err,
	    sizeof(err)), CORE_NOT_FOUND);
	r.session_id = a->session_id;
	CHECK_RC(core_report(C, NOW, "bob", &r, NULL, err, sizeof(err)),
	    CORE_DENIED);
	CHECK_RC(report(a, 0, CORE_OUTCOME_FAILED), CORE_REFUSED);
	CHECK_RC(report(a, 7, CORE_OUTCOME_FAILED), CORE_REFUSED);
	CHECK(j->restart_count == 0 && j->generation == 1);
	/* c misses generation 2 while away, then resumes with 1. */
	disconnect(c);
	CHECK_RC(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->generation == 2);
	/* Rule 4: it keeps its place and gets generation 2 at once. */
	before = nrecs;
	CHECK_RC(resume(c, 1), 0);
	turn();
	check_resumed_into(before, 1, 2, c);
	CHECK(c->state == CORE_NODE_PARTICIPANT && j->generation == 2 &&
	    j->restart_count == 0 && j->state == CORE_JOB_RUNNING);
	/* A generation never formed is refused, and the node leaves. */
	disconnect(c);
	CHECK_RC(resume(c, 3), CORE_REFUSED);
	CHECK_STR(err, "job f: generation 3 is unknown; the current "
	    "generation is 2");
	CHECK(c->state == CORE_NODE_LEFT && j->restart_count == 0);
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_RC(resume(c, 2), CORE_REFUSED);
	teardown();
}

/*
 * Rule 4: after a daemon restart a third node joins a running 2:4 job;
 * the node that resumes late, with the generation it ran before, gets the
 * scale-up's assignment at once: the job makes only the scale-up's round,
 * and nobody leaves. A spare resuming with a generation it never held is
 * told STOP and that it is spare.
 */
static void
test_resume_older_generation(void)
{
	struct core_join	 r;
	struct core_node	*a, *b, *c, *d;
	struct core_job		*j;
	uint64_t		 a_id, b_id;
	size_t			 before;

	setup(NULL);
	r = req("og", "a", 1, 2, 4);
	r.settings.last_call_timeout_ms = 1000;
	a = join_req(&r, 0);
	b = join("og", "b", 1, 2, 4);
	j = a->job;
	tick(2000);
	CHECK(j->generation == 1 && j->state == CORE_JOB_RUNNING);
	a_id = a->node_id;
	b_id = b->node_id;
	if (!restart(NULL, 500000, 5000))
		return;
	a = core_node_find(C, a_id);
	b = core_node_find(C, b_id);
	j = a->job;
	CHECK_RC(resume(a, 1), 0);
	c = join("og", "c", 1, 2, 4);
	CHECK(c->state == CORE_NODE_WAITING);
	tick(1500);		/* c's last call: the scale-up, round 2 */
	CHECK(j->generation == 2 && j->round_n == 3);
	/* b comes back late, with generation 1. */
	before = nrecs;
	CHECK_RC(resume(b, 1), 0);
	check_resumed_into(before, 1, 2, b);
	CHECK(recs[before + 2].m.u.assignment.group_world_size == 3);
	CHECK(b->state == CORE_NODE_PARTICIPANT && j->restart_count == 0);
	tick(60000);
	CHECK(j->generation == 2 && j->restart_count == 0 &&
	    j->state == CORE_JOB_RUNNING);
	/* A spare resuming with a generation it never held. */
	join("og", "e", 1, 2, 4);
	tick(1500);
	CHECK(j->generation == 3);
	d = join("og", "d", 1, 2, 4);
	CHECK(d->state == CORE_NODE_SPARE);
	before = nrecs;
	CHECK_RC(resume(d, 1), 0);
	CHECK(nrecs == before + 3);
	CHECK(recs[before + 1].m.kind == CORE_MSG_STOP);
	CHECK(recs[before + 2].m.kind == CORE_MSG_WAITING &&
	    recs[before + 2].m.u.waiting.state == CORE_NODE_SPARE);
	CHECK(j->generation == 3 && j->restart_count == 0);
	teardown();
}

/*
 * Each owner keeps at most max_ended_per_owner ended jobs: the one that
 * ended first goes when one more ends (the store deletes it: gone after a
 * restore too); another owner's are not touched, and a failed job that is
 * reopened is no longer an ended one.
 */
static void
test_ended_jobs_bounded_per_owner(void)
{
	struct core_config	 cfg;
	struct core_join	 r;
	struct core_node	*n;
	char			 id[32];
	int			 i;

	core_config_defaults(&cfg);
	cfg.max_ended_per_owner = 3;
	setup(&cfg);
	r = req("bob-1", "h", 1, 1, 1);
	r.identity = "bob";
	n = join_req(&r, 0);
	CHECK_RC(core_report(C, NOW, "bob", &(struct core_report){
	    .session_id = n->session_id, .generation = 1,
	    .outcome = CORE_OUTCOME_SUCCEEDED }, NULL, err, sizeof(err)), 0);
	turn();
	for (i = 1; i <= 6; i++) {
		snprintf(id, sizeof(id), "e-%d", i);
		n = join(id, "h", 1, 1, 1);
		tick(1000);
		CHECK_RC(report(n, 1, CORE_OUTCOME_SUCCEEDED), 0);
		CHECK(n->job->state == CORE_JOB_CLOSED);
	}
	CHECK(core_job_find(C, "e-1") == NULL && core_job_find(C, "e-2") ==
	    NULL && core_job_find(C, "e-3") == NULL);
	CHECK(core_job_find(C, "e-4") != NULL && core_job_find(C, "e-6") !=
	    NULL);
	CHECK(core_job_find(C, "bob-1") != NULL);
	/* A live job does not count; a failed one that reopens leaves the
	 * ended ones. */
	n = join("f-1", "h", 1, 1, 1);
	core_lease_lost(C, NOW, n);
	turn();
	CHECK(n->job->state == CORE_JOB_FAILED);
	CHECK(core_job_find(C, "e-4") == NULL);
	n = join("f-1", "h2", 1, 1, 1);
	CHECK(n->job->state == CORE_JOB_RUNNING);
	n = join("e-7", "h", 1, 1, 1);
	CHECK_RC(report(n, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(core_job_find(C, "e-5") != NULL && C->n_jobs == 5);
	/* After a restore, the order in which they ended still holds. */
	if (!restart(&cfg, 900000, 1000))
		return;
	n = join("e-8", "h", 1, 1, 1);
	CHECK_RC(report(n, 1, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(core_job_find(C, "e-5") == NULL && core_job_find(C, "e-6") !=
	    NULL && core_job_find(C, "e-8") != NULL);
	CHECK(core_job_find(C, "bob-1") != NULL &&
	    core_job_find(C, "f-1") != NULL);
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

/* Workers of a round that stopped while the node was away are stopped. */
static void
test_rule11_resume_after_round_stopped(void)
{
	struct core_join	 r;
	struct core_node	*a, *b;
	size_t			 before;

	setup(NULL);
	r = req("rst", "a", 1, 2, 2);
	r.settings.max_restarts = 1;
	a = join_req(&r, 0);
	b = join("rst", "b", 1, 2, 2);
	disconnect(a);
	core_lease_lost(C, NOW, b);
	turn();
	CHECK(a->job->state == CORE_JOB_WAITING && a->job->generation == 1);
	before = nrecs;
	CHECK_RC(resume(a, 1), 0);
	CHECK(nrecs == before + 3);
	CHECK(recs[before].m.kind == CORE_MSG_ACCEPTED);
	CHECK(recs[before + 1].m.kind == CORE_MSG_STOP &&
	    recs[before + 1].m.u.stop.generation == 1);
	CHECK(recs[before + 2].m.kind == CORE_MSG_WAITING &&
	    recs[before + 2].m.u.waiting.state == CORE_NODE_PARTICIPANT &&
	    recs[before + 2].m.u.waiting.participants == 1 &&
	    recs[before + 2].m.u.waiting.min_nodes == 2);
	/* Resuming with no workers (0) is never stale. */
	disconnect(a);
	before = nrecs;
	CHECK_RC(resume(a, 0), 0);
	CHECK(nrecs == before + 2 && last_is(a, CORE_MSG_WAITING));
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
	if (!restart(&cfg, 5000, 60000)) {
		fs_free(&FS);
		return;
	}
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
	join_req(&r, CORE_LIMIT);
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

/*
 * OUTCOME_UPDATE: a fresh master port is used from the next round on; a
 * node that lost a GPU runs fewer workers, and its running job re-rounds
 * at once without counting a restart.
 */
static void
test_update_offer(void)
{
	struct core_report	 r;
	struct core_join	 q;
	struct core_node	*a, *b;
	uint64_t		 gen;

	setup(NULL);
	q = req("upd", "a", 4, 2, 2);
	q.master_port = 29500;
	a = join_req(&q, 0);
	b = join("upd", "b", 2, 2, 2);
	CHECK(last_is(a, CORE_MSG_ASSIGNMENT));
	CHECK(a->job->master_port == 29500);
	CHECK(a->job->world_size == 6);
	gen = a->job->generation;

	memset(&r, 0, sizeof(r));
	r.session_id = a->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_UPDATE;
	r.master_port = 29777;
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(a->job->generation == gen);	/* a port alone: no round */
	CHECK(a->job->master_port == 29500);

	r.master_port = 0;
	r.nproc = 3;				/* one GPU failed its check */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(a->job->generation == gen + 1);
	CHECK(a->job->restart_count == 0);
	CHECK(a->job->world_size == 5);
	CHECK(a->job->master_port == 29777);
	CHECK(last_is(a, CORE_MSG_ASSIGNMENT));
	CHECK(last_is(b, CORE_MSG_ASSIGNMENT));
	CHECK(last_msg(b)->u.assignment.base_rank == 3);
	CHECK(last_msg(b)->u.assignment.master_port == 29777);

	r.nproc = 0;
	r.master_port = 70000;			/* not a TCP port */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)),
	    CORE_INVALID);
	CHECK_HAS(err, "master_port 70000 is not a TCP port");
	r.master_port = 0;
	r.nproc = 70000;			/* over CORE_NPROC_MAX */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)),
	    CORE_INVALID);
	CHECK_HAS(err, "nproc");
	turn();
	teardown();
}

static const struct test tests[] = {
	{ "update_offer", test_update_offer },
	{ "rule6_worker_failure", test_rule6_worker_failure },
	{ "rule7_closing_and_closed", test_rule7_closing_and_closed },
	{ "rule13_nobody_left", test_rule13_nobody_left },
	{ "rule8_leave", test_rule8_leave },
	{ "rule9_operator", test_rule9_operator },
	{ "rule10_fencing", test_rule10_fencing },
	{ "resume_older_generation", test_resume_older_generation },
	{ "ended_jobs_bounded_per_owner", test_ended_jobs_bounded_per_owner },
	{ "rule11_resume_keeps_generation", test_rule11_resume_keeps_generation },
	{ "rule11_resume_after_round_stopped",
	    test_rule11_resume_after_round_stopped },
	{ "dirty_tracking", test_dirty_tracking },
	{ "rule11_restore", test_rule11_restore },
	{ "rule12_reopen_and_retention", test_rule12_reopen_and_retention },
	{ "ten_thousand", test_ten_thousand },
	{ "prune_ended_nodes", test_prune_ended_nodes },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
