/*
 * Unit tests of the rendezvous core, part four: SPEC §4 rule 13 for every
 * kind of departure. A round left short of min_nodes by a node that was
 * lost, left (SIGTERM, scancel, a strict GPU check, no usable GPU left) or
 * was evicted fails with rejoin_timeout 0 (a fixed allocation), naming the
 * node and how it went: a loss at once, a leave or an eviction after
 * CORE_LEAVE_SETTLE_MS (time for the rest of an scancel to arrive); and
 * waits the same rejoin window otherwise.
 * Changes that take no node away (fewer workers, a refused resume whose
 * agent joins again, a waiting node or a spare going) do not.
 */

#include "core_harness.h"

static void
leave(struct core_node *n, const char *why)
{
	CHECK_RC(core_leave(C, NOW, "alice", n->session_id, why, err,
	    sizeof(err)), 0);
	turn();
}

static void
evict(struct core_node *n, const char *why)
{
	CHECK_RC(core_evict(C, NOW, "root", true, n->job->rdzv_id, n->node_id,
	    why, err, sizeof(err)), 0);
	turn();
}

/*
 * A leave or an eviction: the survivors stop and wait CORE_LEAVE_SETTLE_MS
 * (no more), then are told the job failed, naming the node.
 */
static void
check_failed_now(struct core_job *j, struct core_node *a, struct core_node *b,
    const char *how)
{
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), CORE_LEAVE_SETTLE_MS);
	CHECK_HAS(j->rejoin_lost, how);
	/* What rdzvctl and the agents say is what happens next. */
	CHECK_HAS(j->reason, "; the job fails in 1 s unless a node joins: "
	    "rejoin_timeout is 0");
	CHECK(last_is(a, CORE_MSG_WAITING));
	CHECK_HAS(last_msg(a)->reason, "round 2: 2 of min 3 nodes; the job "
	    "fails in 1 s: ");
	CHECK_HAS(last_msg(a)->reason, how);
	tick(CORE_LEAVE_SETTLE_MS - 1);
	CHECK(j->state == CORE_JOB_WAITING);
	tick(1);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, how);
	CHECK_HAS(j->reason, "2 of min 3 nodes remain and rejoin_timeout is "
	    "0, so no node can replace it");
	CHECK(count_msgs(a, CORE_MSG_STOP) <= 1);
	CHECK(last_is(a, CORE_MSG_FAILED) && last_is(b, CORE_MSG_FAILED));
	CHECK_HAS(last_msg(a)->reason, how);
	CHECK(j->restart_count == 0);	/* a planned change counts none */
}

/* scancel: every agent leaves within the settle time; the job ends as
 * cancelled, not naming the first node that went. */
static void
test_scancel_is_cancelled(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("scancel", 0, 3, 3, n, 3);
	leave(n[1], "Terminated");
	tick(10);
	leave(n[0], "Terminated");
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), CORE_LEAVE_SETTLE_MS - 10);
	leave(n[2], "Terminated");
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_STR(j->reason, "cancelled: every node left");
	teardown();
}

/* A loss fails at once: its reconnect grace was the wait. */
static void
test_loss_fails_at_once(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("loss0", 0, 3, 3, n, 3);
	core_lease_lost(C, NOW, n[1]);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK(count_msgs(n[0], CORE_MSG_STOP) == 0);
	CHECK_HAS(j->reason, "node b (node 2) was lost (");
	CHECK_HAS(j->reason, "2 of min 3 nodes remain and rejoin_timeout is 0");
	teardown();
}

/* A clean leave (SIGTERM of one agent, scancel of one step), 3:3, 0. */
static void
test_leave_fails_now(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("leave0", 0, 3, 3, n, 3);
	CHECK(j->state == CORE_JOB_RUNNING);
	leave(n[2], "stopped by signal 15 (SIGTERM)");
	check_failed_now(j, n[0], n[1], "node c (node 3) left (stopped by "
	    "signal 15 (SIGTERM))");
	CHECK(n[2]->state == CORE_NODE_LEFT);
	teardown();
}

static void
test_evict_fails_now(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("evict0", 0, 3, 3, n, 3);
	evict(n[1], "bad NIC");
	check_failed_now(j, n[0], n[2], "node b (node 2) was evicted "
	    "(evicted by root: bad NIC)");
	CHECK(last_is(n[1], CORE_MSG_EVICTED));
	teardown();
}

/* The agent leaves for its GPUs: --health-check strict, or exclude with
 * no GPU left. Both are Leaves whose reason says so. */
static void
test_gpu_leaves_fail_now(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("strict0", 0, 3, 3, n, 3);
	leave(n[0], "GPU check failed: GPU 0: cuMemAlloc_v2: "
	    "CUDA_ERROR_OUT_OF_MEMORY (--health-check strict: leaving the job)");
	check_failed_now(j, n[1], n[2], "node a (node 1) left (GPU check "
	    "failed: GPU 0");
	j = nodes("nogpu0", 0, 3, 3, n, 3);
	leave(n[1], "no GPU of this node passes the check any more: leaving "
	    "the job");
	check_failed_now(j, n[0], n[2], "node b (node 5) left (no GPU of this "
	    "node passes the check any more");
	teardown();
}

/* Which limit ran out is in the loss: the reconnect grace, the lease of
 * a silent connection, or the lease a daemon restart gave it. */
static void
test_lost_says_which_limit(void)
{
	struct core_config	 cfg;
	struct core_node	*n[3];
	struct core_job		*j;
	uint64_t		 a_id, b_id;

	core_config_defaults(&cfg);
	setup(&cfg);
	j = nodes("grace", 0, 3, 3, n, 3);
	disconnect(n[2]);
	tick(2999);
	CHECK(j->state == CORE_JOB_RUNNING);
	tick(1);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node c (node 3) was lost (its connection closed "
	    "and it did not reconnect within reconnect_grace 3 s)");
	CHECK(j->restart_count == 1);

	j = nodes("silent", 0, 3, 3, n, 3);
	core_lease_lost(C, NOW, n[0]);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node a (node 4) was lost (its connection was "
	    "silent for its whole lease, lease_ttl 15 s)");

	j = nodes("restarted", 0, 3, 3, n, 3);
	a_id = n[0]->node_id;
	b_id = n[1]->node_id;
	if (!restart(&cfg, 1000, 5000)) {
		fs_free(&FS);
		return;
	}
	j = core_job_find(C, "restarted");
	CHECK_RC(resume(core_node_find(C, a_id), j->generation), 0);
	CHECK_RC(resume(core_node_find(C, b_id), j->generation), 0);
	tick(15000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node c (node 9) was lost (it did not reconnect "
	    "within lease_ttl 15 s after rdzvd restarted or failed over)");
	teardown();
}

/* With a window, every departure waits exactly that long, then fails
 * naming the node; the window does not restart on a second departure. */
static void
test_window_whatever_the_departure(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("wleave", 20000, 3, 3, n, 3);
	leave(n[2], "scancel");
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK(last_is(n[0], CORE_MSG_WAITING));
	CHECK(count_msgs(n[0], CORE_MSG_STOP) == 1);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 20000);
	CHECK_HAS(j->reason, "round 2 is open: 2 of min 3 nodes (node c "
	    "(node 3) left (scancel))");
	tick(19999);
	CHECK(j->state == CORE_JOB_WAITING);
	tick(1);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_STR(j->reason, "rejoin timeout: node c (node 3) left (scancel), "
	    "and no node replaced it within 20 s (2 of min 3 nodes)");

	j = nodes("wevict", 20000, 3, 3, n, 3);
	evict(n[0], "drain");
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 20000);
	tick(5000);
	leave(n[1], "sigterm");		/* the first one is named */
	CHECK_INT(core_job_join_timeout_in(j, NOW), 15000);
	tick(15000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node a (node 4) was evicted "
	    "(evicted by root: drain), and no node replaced it within 20 s "
	    "(1 of min 3 nodes)");
	teardown();
}

/* The round still forming: a leave or an eviction is a departure too. */
static void
test_open_round(void)
{
	struct core_node	*n[2];
	struct core_job		*j;

	setup(NULL);
	j = nodes("open0", 0, 3, 3, n, 2);
	CHECK(j->state == CORE_JOB_WAITING);
	leave(n[1], "sigterm");
	CHECK_INT(core_job_join_timeout_in(j, NOW), CORE_LEAVE_SETTLE_MS);
	tick(CORE_LEAVE_SETTLE_MS);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node b (node 2) left (sigterm); 1 of min 3 "
	    "nodes remain and rejoin_timeout is 0");

	j = nodes("openev", 0, 3, 3, n, 2);
	evict(n[0], "wrong host");
	tick(CORE_LEAVE_SETTLE_MS);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node a (node 3) was evicted");

	/* With a window, the sooner deadline: rejoin from now or the join
	 * timeout already counting. */
	j = nodes("openw", 5000, 3, 3, n, 2);
	tick(1000);
	leave(n[1], "sigterm");
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 5000);
	tick(5000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node b (node 6) left (sigterm)");
	teardown();
}

/* A reported failure held for an away member, then a leave: the leave is
 * the departure that fails the job, named. */
static void
test_held_failure_then_leave(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("held", 0, 3, 3, n, 3);
	if (!restart_away(n, 3, 2))
		return;
	j = n[0]->job;
	CHECK_RC(report(n[0], j->generation, CORE_OUTCOME_FAILED), 0);
	CHECK(j->held_failure);
	leave(n[1], "sigterm");
	tick(CORE_LEAVE_SETTLE_MS);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node b (node 2) left (sigterm); 2 of min 3");
	teardown();
}

/* What takes no node away, or leaves min_nodes, does not fail the job. */
static void
test_not_departures(void)
{
	struct core_node	*n[4], *c2;
	struct core_report	 r;
	struct core_job		*j;
	uint64_t		 gen;

	setup(NULL);
	/* Fewer workers (a GPU excluded): a new round, same nodes. */
	for (int i = 0; i < 3; i++)
		n[i] = join("fewer", i == 0 ? "a" : i == 1 ? "b" : "c", 2, 3, 3);
	j = n[0]->job;
	gen = j->generation;
	memset(&r, 0, sizeof(r));
	r.session_id = n[0]->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_UPDATE;
	r.nproc = 1;
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == gen + 1);
	CHECK(j->round_n == 3 && j->world_size == 5);

	/* A spare takes a leaving node's place at once. */
	j = nodes("spare", 0, 3, 3, n, 4);
	CHECK(n[3]->state == CORE_NODE_SPARE);
	leave(n[0], "sigterm");
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK(n[3]->state == CORE_NODE_PARTICIPANT);
	/* A spare that goes takes nothing from the round. */
	j = nodes("spare2", 0, 3, 3, n, 4);
	leave(n[3], "sigterm");
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);

	/* Elastic: min_nodes still there re-rounds. */
	j = nodes("elastic", 0, 2, 3, n, 3);
	evict(n[1], "drain");
	CHECK(j->state == CORE_JOB_RUNNING && j->round_n == 2);

	/* A closing job: a leave is rule 7's, not rule 13's. */
	j = nodes("closing", 0, 3, 3, n, 3);
	CHECK_RC(report(n[0], j->generation, CORE_OUTCOME_SUCCEEDED), 0);
	CHECK(j->state == CORE_JOB_CLOSING);
	leave(n[1], "sigterm");
	CHECK(j->state == CORE_JOB_CLOSING);

	/* A refused resume (a generation rdzvd never formed; an older one
	 * keeps its place, rule 4): that agent joins again at once as a new
	 * node, so the open round waits for it (the join timeout), not 0.
	 * The round moved on while it was away (a spare replaced a leaver). */
	j = nodes("stale", 0, 3, 3, n, 4);
	disconnect(n[2]);
	leave(n[0], "sigterm");
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK(n[2]->group_rank >= 0);
	CHECK_RC(resume(n[2], j->generation + 1), CORE_REFUSED);
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK(j->rejoin_lost[0] == '\0');
	CHECK_INT(core_job_join_timeout_in(j, NOW), 600000);
	c2 = join("stale", "c", 1, 3, 3);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 3);
	CHECK(last_is(c2, CORE_MSG_ASSIGNMENT));
	teardown();
}

/* Rule 11: the departure the round waits on survives a daemon restart. */
static void
test_restart_keeps_the_departure(void)
{
	struct core_config	 cfg;
	struct core_node	*n[3];
	struct core_job		*j;
	uint64_t		 a_id, b_id;

	core_config_defaults(&cfg);
	setup(&cfg);
	j = nodes("rst", 20000, 3, 3, n, 3);
	a_id = n[0]->node_id;
	b_id = n[1]->node_id;
	evict(n[2], "drain");
	tick(5000);
	core_checkpoint(C, NOW);
	turn();
	if (!restart(&cfg, 1000, 30000)) {
		fs_free(&FS);
		return;
	}
	j = core_job_find(C, "rst");
	CHECK_RC(resume(core_node_find(C, a_id), 0), 0);
	CHECK_RC(resume(core_node_find(C, b_id), 0), 0);
	CHECK_HAS(j->rejoin_lost, "node c (node 3) was evicted (evicted by "
	    "root: drain)");
	CHECK_INT(core_job_join_timeout_in(j, NOW), 15000);
	tick(15000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node c (node 3) was evicted");
	teardown();
}

static const struct test tests[] = {
	{ "leave_fails_now", test_leave_fails_now },
	{ "scancel_is_cancelled", test_scancel_is_cancelled },
	{ "loss_fails_at_once", test_loss_fails_at_once },
	{ "evict_fails_now", test_evict_fails_now },
	{ "gpu_leaves_fail_now", test_gpu_leaves_fail_now },
	{ "lost_says_which_limit", test_lost_says_which_limit },
	{ "window_whatever_the_departure",
	    test_window_whatever_the_departure },
	{ "open_round", test_open_round },
	{ "held_failure_then_leave", test_held_failure_then_leave },
	{ "not_departures", test_not_departures },
	{ "restart_keeps_the_departure", test_restart_keeps_the_departure },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
