/*
 * Unit tests of the rendezvous core, part three: SPEC §4 rule 13's
 * rejoin_timeout. A job short of min_nodes after a loss waits that long for
 * a replacement and then fails naming the lost node; 0 (what rdzv-agent
 * asks for in a fixed Slurm or PBS allocation) fails it at once; spares
 * still replace a lost node at once.
 */

#include "core_harness.h"

/* Integers, with both values in the report. */
/* Unset, it is the join timeout; set, the job keeps it. */
static void
test_default_is_join_timeout(void)
{
	struct core_node	*n[3];
	struct core_join	 r;
	struct core_job		*j;

	setup(NULL);
	j = nodes("dflt", -1, 3, 3, n, 3);
	CHECK(j->settings.has_rejoin_timeout);
	CHECK_INT(j->settings.rejoin_timeout_ms, 600000);
	r = req("jt", "a", 1, 3, 3);
	r.settings.join_timeout_ms = 42000;
	CHECK_INT(join_req(&r, 0)->job->settings.rejoin_timeout_ms, 42000);
	j = nodes("zero", 0, 3, 3, n, 3);
	CHECK(j->settings.has_rejoin_timeout);
	CHECK_INT(j->settings.rejoin_timeout_ms, 0);
	/* The job's settings win: a later joiner's are ignored. */
	r = req("zero", "d", 1, 3, 3);
	r.settings.has_rejoin_timeout = true;
	r.settings.rejoin_timeout_ms = 5000;
	CHECK_INT(join_req(&r, 0)->job->settings.rejoin_timeout_ms, 0);
	CHECK(last_msg(n[0])->kind == CORE_MSG_ASSIGNMENT);
	teardown();
}

/* Over max-join-timeout: refused like a join timeout, naming the option. */
static void
test_bounded(void)
{
	struct core_join	 r;

	setup(NULL);
	r = req("big", "a", 1, 1, 1);
	r.settings.has_rejoin_timeout = true;
	r.settings.rejoin_timeout_ms = 25U * 3600 * 1000;
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "rejoin timeout 90000 s is over this rdzvd's limit");
	CHECK_HAS(err, "--rejoin-timeout");
	teardown();
}

/* The survivors wait rejoin_timeout, not join_timeout, then fail. */
static void
test_waits_then_fails_naming_the_node(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("wait", 20000, 3, 3, n, 3);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	core_lease_lost(C, NOW, n[2]);
	turn();
	CHECK(j->state == CORE_JOB_WAITING && j->restart_count == 1);
	CHECK(last_is(n[0], CORE_MSG_WAITING));
	CHECK_INT(core_job_join_timeout_in(j, NOW), 20000);
	CHECK_HAS(j->rejoin_lost, "node c (node 3) was lost");
	tick(10000);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 10000);
	tick(9999);
	CHECK(j->state == CORE_JOB_WAITING);
	tick(1);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node c (node 3) was lost");
	CHECK_HAS(j->reason, "no node replaced it within 20 s (2 of min 3 "
	    "nodes)");
	CHECK(last_is(n[0], CORE_MSG_FAILED) && last_is(n[1], CORE_MSG_FAILED));
	CHECK(j->rejoin_lost[0] == '\0');
	teardown();
}

/* A replacement in time: the round completes; the wait is over. */
static void
test_replacement_in_time(void)
{
	struct core_node	*n[3], *d;
	struct core_job		*j;

	setup(NULL);
	j = nodes("repl", 20000, 3, 3, n, 3);
	core_lease_lost(C, NOW, n[1]);
	turn();
	tick(15000);
	d = join("repl", "d", 1, 3, 3);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK(last_msg(d)->u.assignment.generation == 2);
	CHECK(j->rejoin_lost[0] == '\0');
	/* A planned leave later waits the same rejoin window (rule 13:
	 * whatever the departure), not the join timeout. */
	CHECK_RC(core_leave(C, NOW, "alice", d->session_id, "sigterm", err,
	    sizeof(err)), 0);
	turn();
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 20000);
	CHECK_HAS(j->rejoin_lost, "node d (node 4) left (sigterm)");
	tick(20000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node d (node 4) left (sigterm), "
	    "and no node replaced it within 20 s (2 of min 3 nodes)");
	teardown();
}

/* 0: a fixed allocation. The job fails now; no STOP-and-wait first. */
static void
test_zero_fails_at_once(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("fixed", 0, 3, 3, n, 3);
	core_lease_lost(C, NOW, n[2]);
	turn();
	CHECK(j->state == CORE_JOB_FAILED && j->restart_count == 1);
	CHECK_HAS(j->reason, "node c (node 3) was lost");
	CHECK_HAS(j->reason, "2 of min 3 nodes remain and rejoin_timeout is "
	    "0, so no node can replace it");
	CHECK(count_msgs(n[0], CORE_MSG_STOP) == 0);
	CHECK(last_is(n[0], CORE_MSG_FAILED) && last_is(n[1], CORE_MSG_FAILED));
	CHECK(n[0]->state == CORE_NODE_FAILED);
	/* A requeue's join reopens it (rule 12). */
	n[0] = join("fixed", "a", 1, 3, 3);
	CHECK(j->state == CORE_JOB_WAITING && j->attempt == 2);
	teardown();
}

/* Spares replace a lost node at once, whatever rejoin_timeout is. */
static void
test_spare_replaces_at_once(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("spare", 0, 2, 2, n, 3);
	CHECK(n[2]->state == CORE_NODE_SPARE);
	core_lease_lost(C, NOW, n[0]);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK(j->restart_count == 1);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT && n[2]->group_rank >= 0);
	CHECK(last_is(n[1], CORE_MSG_ASSIGNMENT));
	/* Another loss with no spare left: rejoin_timeout 0 fails it. */
	core_lease_lost(C, NOW, n[1]);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node b (node 2) was lost");
	teardown();
}

/* Elastic: a loss that leaves min_nodes re-rounds; rejoin has no say. */
static void
test_elastic_rerounds(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("elastic", 0, 2, 3, n, 3);
	CHECK(j->state == CORE_JOB_RUNNING && j->round_n == 3);
	core_lease_lost(C, NOW, n[1]);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING && j->round_n == 2);
	CHECK(j->generation == 2);
	teardown();
}

/* A loss in the round still forming counts too: nobody can replace it. */
static void
test_open_round_loss(void)
{
	struct core_join	 r;
	struct core_node	*a, *b;
	struct core_job		*j;

	setup(NULL);
	r = req("open0", "a", 1, 3, 3);
	r.settings.has_rejoin_timeout = true;
	a = join_req(&r, 0);
	b = join("open0", "b", 1, 3, 3);
	j = a->job;
	CHECK(j->state == CORE_JOB_WAITING);
	core_lease_lost(C, NOW, b);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "node b (node 2) was lost");
	CHECK_HAS(j->reason, "rejoin_timeout is 0");

	/* With time to wait, the sooner deadline wins: the join timeout
	 * already counting (600 s) or the rejoin timeout from now. */
	r = req("open5", "a", 1, 3, 3);
	r.settings.has_rejoin_timeout = true;
	r.settings.rejoin_timeout_ms = 5000;
	a = join_req(&r, 0);
	b = join("open5", "b", 1, 3, 3);
	j = a->job;
	tick(1000);
	core_lease_lost(C, NOW, b);
	turn();
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(core_job_join_timeout_in(j, NOW), 5000);
	tick(5000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node b (node ");
	teardown();
}

/* Rule 11: after a daemon restart the wait resumes and still names it. */
static void
test_restart_keeps_the_lost_node(void)
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
	core_lease_lost(C, NOW, n[2]);
	turn();
	tick(5000);
	core_checkpoint(C, NOW);
	turn();
	if (!restart(&cfg, 1000, 30000)) {
		fs_free(&FS);
		return;
	}
	j = core_job_find(C, "rst");
	/* The survivors resume, holding no workers. */
	CHECK_RC(resume(core_node_find(C, a_id), 0), 0);
	CHECK_RC(resume(core_node_find(C, b_id), 0), 0);
	CHECK(j->state == CORE_JOB_WAITING);
	CHECK_INT(j->settings.rejoin_timeout_ms, 20000);
	CHECK_HAS(j->rejoin_lost, "node c (node 3) was lost");
	CHECK_INT(core_job_join_timeout_in(j, NOW), 15000);
	tick(15000);
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "rejoin timeout: node c (node 3) was lost");
	teardown();
}

/*
 * Leases that end in one sweep are one failure (rule 13): two nodes a
 * switch took cost one restart and one round of the two survivors, so a
 * job with max_restarts 1 goes on. One at a time they are two.
 */
static void
test_one_sweep_one_failure(void)
{
	struct core_node	*n[4];
	struct core_job		*j;

	setup(NULL);
	j = nodes("sweep", -1, 2, 4, n, 4);
	j->settings.max_restarts = 1;
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	core_leases_lost(C, NOW, (struct core_node *[]){ n[2], n[3] }, NULL,
	    2);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(j->generation, 2);
	CHECK(n[2]->state == CORE_NODE_LOST && n[3]->state == CORE_NODE_LOST);
	CHECK(last_is(n[0], CORE_MSG_ASSIGNMENT));
	CHECK_INT(last_msg(n[0])->u.assignment.world_size, 2);
	CHECK_INT(last_msg(n[1])->u.assignment.generation, 2);

	j = nodes("apart", -1, 2, 4, n, 4);
	j->settings.max_restarts = 1;
	core_lease_lost(C, NOW, n[2]);
	core_lease_lost(C, NOW, n[3]);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "restart 2 exceeds max_restarts 1");
	teardown();
}

/*
 * Two nodes of one switch whose leases end a sweep apart, or a node whose
 * peers' collective broke on it before its lease ended: the round formed
 * for the first failure still held the silent node, and its loss re-rounds
 * without a second restart. A node silent only since that round counts.
 */
static void
test_silent_before_the_round(void)
{
	struct core_node	*n[4];
	struct core_job		*j;
	uint64_t		 silent;

	setup(NULL);
	j = nodes("switch", -1, 1, 4, n, 4);
	j->settings.max_restarts = 1;
	silent = j->settings.lease_ttl_ms;
	core_leases_lost(C, NOW, &n[2], &silent, 1);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK_INT(j->restart_count, 1);
	tick(500);
	core_leases_lost(C, NOW, &n[3], &silent, 1);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(j->generation, 3);
	CHECK_HAS(n[3]->reason, "since before the failure that formed this "
	    "round");
	CHECK_INT(last_msg(n[0])->u.assignment.world_size, 2);
	/* Silent only after generation 3 formed: a new failure. */
	tick(20000);
	core_leases_lost(C, NOW, &n[1], &silent, 1);
	turn();
	CHECK(j->state == CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "restart 2 exceeds max_restarts 1");

	/* A failure report forms the round first; the lease ends later. */
	j = nodes("report", -1, 1, 3, n, 3);
	j->settings.max_restarts = 1;
	tick(1000);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	turn();
	CHECK(j->generation == 2 && j->restart_count == 1);
	tick(silent - 1000);
	core_leases_lost(C, NOW, &n[2], &silent, 1);
	turn();
	CHECK(j->state == CORE_JOB_RUNNING && j->restart_count == 1);
	CHECK_INT(j->generation, 3);
	teardown();
}

static const struct test tests[] = {
	{ "default_is_join_timeout", test_default_is_join_timeout },
	{ "bounded", test_bounded },
	{ "waits_then_fails_naming_the_node",
	    test_waits_then_fails_naming_the_node },
	{ "replacement_in_time", test_replacement_in_time },
	{ "zero_fails_at_once", test_zero_fails_at_once },
	{ "spare_replaces_at_once", test_spare_replaces_at_once },
	{ "elastic_rerounds", test_elastic_rerounds },
	{ "open_round_loss", test_open_round_loss },
	{ "restart_keeps_the_lost_node", test_restart_keeps_the_lost_node },
	{ "one_sweep_one_failure", test_one_sweep_one_failure },
	{ "silent_before_the_round", test_silent_before_the_round },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
