/*
 * Unit tests of the rendezvous core, part eight: a failure that repeats
 * before the job stepped (docs/RENDEZVOUS.md rule 18). Two nodes
 * cut from each other but not from rdzvd fail, re-round with the same
 * nodes and fail again at the new round's first collective while the cut
 * lasts: one fault, one restart (issue 41's partition finding). Bounded:
 * at most CORE_REPEAT_MAX repeats in a row within CORE_REPEAT_WINDOW_MS;
 * a round that stepped, a killed worker, a hang, a round with other nodes
 * and a daemon restart all count as before.
 */

#include <signal.h>
#include <string.h>

#include "core_harness.h"
#include "core_int.h"		/* CORE_REPEAT_MAX, CORE_REPEAT_WINDOW_MS */

/* A FAILED report of |gen| by |n|: its worker exited 1, or was killed by
 * |sig|, or hung (|cause|). */
static int
fail(struct core_node *n, uint64_t gen, int sig, enum core_cause cause)
{
	struct core_report	r;
	struct core_exit	ex = { 1, 0 };
	int			rc;

	if (sig != 0) {
		ex.exit_code = -1;
		ex.signal = sig;
	}
	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_FAILED;
	r.cause = cause;
	r.message = "RuntimeError: Timed out initializing process group";
	r.exits = &ex;
	r.n_exits = 1;
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

/* The partition: every failure after the first, of the same two nodes
 * and before a step, is that failure again, up to CORE_REPEAT_MAX; the
 * one after counts. */
static void
test_partition_counts_once(void)
{
	struct core_node	*n[2];
	struct core_job		*j;
	uint64_t		 g;

	setup(NULL);
	j = nodes("cut", -1, 2, 2, n, 2);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK(j->restart_count == 1 && j->generation == 2);
	for (g = 2; g < 2 + CORE_REPEAT_MAX; g++) {
		tick(4000);
		CHECK_RC(fail(n[g % 2], g, 0, CORE_CAUSE_WORKER), 0);
		CHECK_INT(j->restart_count, 1);
		CHECK(j->generation == g + 1 && j->state == CORE_JOB_RUNNING);
		CHECK(last_msg(n[0])->u.assignment.generation == g + 1);
	}
	CHECK(has_event(j, "repeat", "generation 2 failed before any step, "
	    "with the nodes of generation 1, 4 s after the failure that "
	    "formed it: that failure again, not counted (repeat 1 of 3)"));
	CHECK(has_event(j, "repeat", "(repeat 3 of 3)"));
	/* The fourth repeat in a row counts. */
	CHECK_RC(fail(n[0], g, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	CHECK(!has_event(j, "repeat", "generation 5 failed"));
	/* And the repeats start again from it. */
	CHECK_RC(fail(n[1], g + 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	teardown();
}

/* Past the window, a failure counts: a script that fails the same way
 * every time still spends its restarts. */
static void
test_window_bounds_the_repeats(void)
{
	struct core_node	*n[2];
	struct core_job		*j;

	setup(NULL);
	j = nodes("win", -1, 2, 2, n, 2);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	tick(CORE_REPEAT_WINDOW_MS + 1);
	CHECK_RC(fail(n[1], 2, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	CHECK(!has_event(j, "repeat", "failed before any step"));
	teardown();
}

/* A round whose workers said a step ran: its failure is a new one. */
static void
test_stepped_round_counts(void)
{
	struct core_node	*n[2];
	struct core_job		*j;

	setup(NULL);
	j = nodes("step", -1, 2, 2, n, 2);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK_RC(core_progress(C, NOW, "alice", n[1]->session_id, 2, 7, err,
	    sizeof(err)), 0);
	CHECK_RC(fail(n[1], 2, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	teardown();
}

/* A worker killed (SIGKILL) or a hang is a fault of its own. */
static void
test_killed_or_hung_counts(void)
{
	struct core_node	*n[2];
	struct core_job		*j;

	setup(NULL);
	j = nodes("kill", -1, 2, 2, n, 2);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK_RC(fail(n[1], 2, SIGKILL, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	CHECK_RC(fail(n[0], 3, 0, CORE_CAUSE_HANG), 0);
	CHECK_INT(j->restart_count, 3);
	/* A worker that died of another signal (an abort on a collective
	 * timeout) is the repeat it looks like. */
	CHECK_RC(fail(n[1], 4, SIGABRT, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 3);
	teardown();
}

/* A round with a node less than the one that failed is a new round: its
 * failure counts; the round after it has its nodes again, and repeats. */
static void
test_other_nodes_count(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("three", -1, 2, 3, n, 3);
	CHECK(j->generation == 1 && j->round_n == 3);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 1);
	/* c's connection closes just after: the death that broke
	 * generation 1 (rule 14), a round without it, no restart. */
	disconnect(n[2]);
	CHECK(n[2]->state == CORE_NODE_LOST && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	CHECK_RC(fail(n[0], j->generation, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	CHECK_RC(fail(n[1], j->generation, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	teardown();
}

/* The state is memory only: after a daemon restart the next failure
 * counts. */
static void
test_restart_forgets(void)
{
	struct core_node	*n[2];
	struct core_job		*j;

	setup(NULL);
	j = nodes("boot", -1, 2, 2, n, 2);
	CHECK_RC(fail(n[0], 1, 0, CORE_CAUSE_WORKER), 0);
	CHECK(restart_away(n, 2, -1));
	j = n[0]->job;
	CHECK_INT(j->restart_count, 1);
	CHECK_RC(fail(n[1], 2, 0, CORE_CAUSE_WORKER), 0);
	CHECK_INT(j->restart_count, 2);
	teardown();
}

static const struct test tests[] = {
	{ "partition_counts_once", test_partition_counts_once },
	{ "window_bounds_the_repeats", test_window_bounds_the_repeats },
	{ "stepped_round_counts", test_stepped_round_counts },
	{ "killed_or_hung_counts", test_killed_or_hung_counts },
	{ "other_nodes_count", test_other_nodes_count },
	{ "restart_forgets", test_restart_forgets },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
