/*
 * Unit tests of the rendezvous core, part six: the culprit pays (SPEC §4
 * rule 17). A node that reports its own worker stuck, or members whose
 * ranks never arrived at a round's meeting, leave the job as lost; the
 * next round forms without them, one fault costs one restart (none more
 * when the round was formed to recover from that fault), and a reporter
 * cut off from most of its peers cannot take the healthy majority down.
 * A node whose workers are still starting as new processes is excused
 * from a meeting it missed, within the start-up allowance.
 */

#include <string.h>

#include "core_harness.h"
#include "core_int.h"		/* CORE_START_ALLOWANCE_MS */

/* A FAILED report of |gen| by |n| with |cause| and |n_absent| ranks. */
static int
blame(struct core_node *n, uint64_t gen, enum core_cause cause,
    const uint32_t *absent, uint32_t n_absent)
{
	struct core_report	r;
	int			rc;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_FAILED;
	r.cause = cause;
	r.message = cause == CORE_CAUSE_WORKER ? "rdzv.elastic: 2 s waiting "
	    "for the 3 ranks" : "no worker made progress for 3.0 s";
	r.absent_ranks = absent;
	r.n_absent = n_absent;
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

/* A node whose worker is stopped is lost; the bystanders' reports of the
 * same hang are stale; one restart. */
static void
test_stuck_node_is_lost(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("stuck", -1, 2, 3, n, 3);
	CHECK_RC(blame(n[2], 1, CORE_CAUSE_STUCK, NULL, 0), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "hung in generation 1 with a worker stopped");
	CHECK(last_is(n[2], CORE_MSG_LOST));
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK_INT(j->round_n, 2);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(last_msg(n[0])->u.assignment.generation, 2);
	CHECK_INT(last_msg(n[0])->u.assignment.world_size, 2);
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_HANG, NULL, 0), CORE_REFUSED);
	CHECK_INT(j->restart_count, 1);
	/* It joins again as a new node: taken in, no restart. */
	CHECK(join("stuck", "c", 1, 2, 3)->state == CORE_NODE_PARTICIPANT);
	CHECK(j->generation == 3 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/* A plain hang report (no evidence) is a failure of the job, as before:
 * a new round with every member. */
static void
test_plain_hang_reruns_everyone(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("hang", -1, 2, 3, n, 3);
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_HANG, NULL, 0), 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	teardown();
}

/*
 * Defect 7 of issue 40: a silent node under in-process restart. Its
 * peers' collectives time out first (a failure: restart 1, a round with
 * every member, the silent one too); in that round its ranks never
 * arrive, and the peers' barrier names them. It is lost, the round forms
 * without it, and that is not a second restart.
 */
static void
test_absent_in_failure_round_not_counted(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("silent", -1, 2, 3, n, 3);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);
	tick(2000);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "took no part in generation 2");
	CHECK_HAS(n[2]->reason, "not counted again");
	CHECK(last_is(n[2], CORE_MSG_LOST));
	CHECK(j->generation == 3 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	/* The other bystander's report of generation 2 is stale. */
	CHECK_RC(blame(n[1], 2, CORE_CAUSE_WORKER, &absent, 1), CORE_REFUSED);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/* In a round that no failure formed, a member that never arrives is a
 * fault of its own: one restart. */
static void
test_absent_in_plain_round_counted(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("absent", -1, 2, 3, n, 3);
	absent = n[1]->base_rank;
	CHECK_RC(blame(n[2], 1, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[1]->state == CORE_NODE_LOST);
	CHECK_HAS(n[1]->reason, "took no part in generation 1");
	CHECK(j->generation == 2 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/* A reporter that sees most of its peers absent is the one cut off: its
 * report is a plain failure, and nobody is lost. A tie goes to it. */
static void
test_absent_majority_is_not_believed(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent[2];

	setup(NULL);
	j = nodes("alone", -1, 2, 3, n, 3);
	absent[0] = n[1]->base_rank;
	absent[1] = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);

	j = nodes("pair", -1, 1, 2, n, 2);
	absent[0] = n[1]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, absent, 1), 0);
	CHECK(n[1]->state == CORE_NODE_LOST);
	CHECK(j->generation == 2 && j->round_n == 1);
	teardown();
}

/* Ranks that are no member's, or the reporter's own, name nobody. */
static void
test_absent_names_only_members(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent[2];

	setup(NULL);
	j = nodes("nobody", -1, 2, 3, n, 3);
	absent[0] = 1000;
	absent[1] = n[0]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/* An UPDATE of |n|: its workers of |gen| are starting, or started. */
static int
starting(struct core_node *n, uint64_t gen, bool yes)
{
	struct core_report	r;
	int			rc;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_UPDATE;
	r.cause = yes ? CORE_CAUSE_STARTING : CORE_CAUSE_STARTED;
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

/*
 * Issue 41: a node whose workers start as new processes (they import
 * torch first) misses the round's meeting. It is kept and no restart is
 * counted: the job re-rounds at once with it. Once its workers started,
 * missing a meeting is a fault again.
 */
static void
test_starting_absent_is_kept(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("starting", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[2], 1, true), 0);
	tick(3100);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 0);
	CHECK(has_event(j, "starting", "node c (node "));
	CHECK(has_event(j, "starting", "was still starting its workers "
	    "(for 3.1 s): the meeting of generation 1 missed it; not "
	    "counted"));
	CHECK(last_is(n[2], CORE_MSG_ASSIGNMENT));
	CHECK_INT(last_msg(n[2])->u.assignment.generation, 2);
	CHECK_INT(last_msg(n[2])->u.assignment.restart_count, 0);
	/* The other bystander's report of generation 1 is stale. */
	CHECK_RC(blame(n[1], 1, CORE_CAUSE_WORKER, &absent, 1), CORE_REFUSED);
	CHECK_INT(j->restart_count, 0);
	/* Its workers came up during generation 2: its meeting may have
	 * given up on them just before (the report comes after). */
	tick(2000);
	CHECK_RC(starting(n[2], 2, false), 0);
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(has_event(j, "starting", "(for 5.1 s): the meeting of "
	    "generation 2 missed it; not counted"));
	CHECK(j->generation == 3 && j->round_n == 3);
	CHECK_INT(j->restart_count, 0);
	/* Generation 3, formed after they came up, is their first meeting
	 * from a cold start: missing it is still excused. */
	CHECK_RC(blame(n[0], 3, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(has_event(j, "starting", "the meeting of generation 3 missed "
	    "it; not counted"));
	CHECK(j->generation == 4 && j->round_n == 3);
	CHECK_INT(j->restart_count, 0);
	/* Up before generation 3 formed: missing generation 4's meeting is
	 * a fault. */
	CHECK_RC(blame(n[0], 4, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "took no part in generation 4");
	CHECK(j->generation == 5 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/*
 * Two fresh nodes still starting are more than the one that arrived: not
 * a reporter cut off from its peers (they said themselves why they are
 * late), so they are excused as well. A starting node that is also absent
 * beside a member that is not: that one is lost (one restart), the
 * starting one kept, and it does not count as arrived in the vote.
 */
static void
test_starting_and_absent_together(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent[2];

	setup(NULL);
	j = nodes("two", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[1], 1, true), 0);
	CHECK_RC(starting(n[2], 1, true), 0);
	CHECK_RC(starting(n[1], 1, false), 0);	/* up in generation 1 */
	absent[0] = n[1]->base_rank;
	absent[1] = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(j->restart_count, 0);

	/* Generation 2 is n[1]'s first meeting since it came up: both
	 * excused again. */
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 0);
	CHECK(j->generation == 3 && j->round_n == 3);
	CHECK_INT(j->restart_count, 0);

	/* n[1] was up before generation 2 formed; n[2] still starting.
	 * Both absent from generation 3: a tie of n[0] against n[1] alone,
	 * believed. */
	CHECK_RC(blame(n[0], 3, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK(n[1]->state == CORE_NODE_LOST);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(has_event(j, "starting", "generation 3 missed it; kept"));
	CHECK(j->generation == 4 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/* Past the allowance a node still starting is lost, as without it. */
static void
test_starting_past_allowance_is_lost(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("slow", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[2], 1, true), 0);
	tick(CORE_START_ALLOWANCE_MS);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "took no part in generation 1");
	CHECK(!has_event(j, "starting", "was still starting"));
	CHECK(j->generation == 2 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/*
 * A failure forms generation 2 (restart 1); a starting node misses its
 * meeting and is excused, and the job re-rounds uncounted. Past the
 * allowance it misses generation 3's too: that round stands for the one
 * the failure formed, so its loss is that failure still, not counted
 * again (netns_silent_inproc: a silent node that said "starting" before
 * its link went down cost two restarts).
 */
static void
test_excused_round_keeps_its_failure(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("carry", -1, 2, 3, n, 3);
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, NULL, 0), 0);
	CHECK(j->generation == 2);
	CHECK_INT(j->restart_count, 1);
	CHECK_RC(starting(n[2], 2, true), 0);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(j->generation == 3 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);
	tick(CORE_START_ALLOWANCE_MS);
	CHECK_RC(blame(n[0], 3, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "not counted again");
	CHECK(j->generation == 4 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/*
 * Issue 41, seed 17 etcd: a partition broke generation 1 (one restart);
 * the meeting of generation 2, the round that failure formed, missed b
 * (lost, counted already) and c, whose worker came up in generation 1
 * and was cut from the master (excused: its first meeting). The round
 * that re-forms stands for the failure too: c, absent again as the cut
 * heals and no longer excused, is that failure still, not a second
 * restart.
 */
static void
test_partial_excuse_keeps_its_failure(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent[2];

	setup(NULL);
	j = nodes("part", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[2], 1, true), 0);
	CHECK_RC(starting(n[2], 1, false), 0);
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, NULL, 0), 0);
	CHECK(j->generation == 2);
	CHECK_INT(j->restart_count, 1);
	absent[0] = n[1]->base_rank;
	absent[1] = n[2]->base_rank;
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, absent, 2), 0);
	CHECK(n[1]->state == CORE_NODE_LOST);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(j->generation == 3 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	absent[0] = n[2]->base_rank;
	CHECK_RC(blame(n[0], 3, CORE_CAUSE_WORKER, absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "not counted again");
	CHECK_INT(j->restart_count, 1);
	teardown();
}

/*
 * A node cannot stretch the allowance by saying "starting" again: the
 * start is the first report's. Only "started" ends it; a later "starting"
 * begins a new one. A node whose connection closed is not excused.
 */
static void
test_starting_again_does_not_extend(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint32_t		 absent;

	setup(NULL);
	j = nodes("again", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[2], 1, true), 0);
	tick(CORE_START_ALLOWANCE_MS / 2);
	CHECK_RC(starting(n[2], 1, true), 0);
	tick(CORE_START_ALLOWANCE_MS / 2);
	CHECK_RC(starting(n[2], 1, true), 0);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_INT(j->restart_count, 1);
	CHECK(j->generation == 2 && j->round_n == 2);

	/* A new start after "started" is a new allowance. */
	CHECK_RC(starting(n[1], 2, true), 0);
	tick(CORE_START_ALLOWANCE_MS - 1000);
	CHECK_RC(starting(n[1], 2, false), 0);
	CHECK_RC(starting(n[1], 2, true), 0);
	tick(1000);
	absent = n[1]->base_rank;
	CHECK_RC(blame(n[0], 2, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[1]->state == CORE_NODE_PARTICIPANT);
	CHECK(j->generation == 3 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);

	/* Starting, but its connection closed: not excused. */
	j = nodes("closed", -1, 2, 3, n, 3);
	CHECK_RC(starting(n[2], 1, true), 0);
	disconnect(n[2]);
	absent = n[2]->base_rank;
	CHECK_RC(blame(n[0], 1, CORE_CAUSE_WORKER, &absent, 1), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_INT(j->restart_count, 1);
	teardown();
}

static const struct test tests[] = {
	{ "stuck_node_is_lost", test_stuck_node_is_lost },
	{ "plain_hang_reruns_everyone", test_plain_hang_reruns_everyone },
	{ "absent_in_failure_round_not_counted",
	    test_absent_in_failure_round_not_counted },
	{ "absent_in_plain_round_counted", test_absent_in_plain_round_counted },
	{ "absent_majority_is_not_believed",
	    test_absent_majority_is_not_believed },
	{ "absent_names_only_members", test_absent_names_only_members },
	{ "starting_absent_is_kept", test_starting_absent_is_kept },
	{ "starting_and_absent_together", test_starting_and_absent_together },
	{ "starting_past_allowance_is_lost",
	    test_starting_past_allowance_is_lost },
	{ "starting_again_does_not_extend",
	    test_starting_again_does_not_extend },
	{ "excused_round_keeps_its_failure",
	    test_excused_round_keeps_its_failure },
	{ "partial_excuse_keeps_its_failure",
	    test_partial_excuse_keeps_its_failure },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
