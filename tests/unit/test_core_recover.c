/*
 * Unit tests of the rendezvous core, part five: recovery (SPEC §4 rule
 * 14). A node whose connection closed is lost at once when a node of the
 * same generation reports a failure (its collective broke): the new round
 * forms without waiting out the reconnect grace, counted as one failure.
 * A closed connection alone still waits the grace, and a node that was
 * only a blip comes back as a refused resume and joins again as a new
 * node, placed by the usual rules: no ghost, no duplicate ranks.
 * Rule 16: with rank policy stable, survivors keep their ranks and a
 * spare takes exactly the place of the node it replaces. Issue 45: the
 * job's preload, which agents fork restarted workers from, is checked,
 * kept and told.
 */

#include <signal.h>
#include <string.h>

#include "core_harness.h"

/* Closed connection + a peer's failure report: a new round at once. */
static void
test_closed_and_peer_failure(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("r14", -1, 2, 3, n, 3);
	CHECK(j->generation == 1 && j->round_n == 3);
	disconnect(n[2]);
	tick(10);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "its connection closed and node a (node 1) "
	    "reported a failure of generation 1");
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 2);
	CHECK_INT(j->restart_count, 1);		/* one failure, not two */
	CHECK_INT(j->round_n, 2);
	CHECK_INT(j->world_size, 2);
	CHECK(!j->held_failure);
	CHECK(last_is(n[0], CORE_MSG_ASSIGNMENT));
	CHECK_INT(last_msg(n[1])->u.assignment.generation, 2);
	CHECK_INT(last_msg(n[1])->u.assignment.restart_count, 1);
	/* The second survivor's report of the same failure is stale. */
	CHECK_RC(report(n[1], 1, CORE_OUTCOME_FAILED),
	    CORE_REFUSED);
	CHECK_INT(j->restart_count, 1);
	CHECK_HAS(j->events[(j->events_start + j->events_n - 1) %
	    j->events_cap].message, "generation 2");
	teardown();
}

/* A closed connection alone waits its reconnect grace, as before. */
static void
test_closed_alone_waits_grace(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("grace", -1, 2, 3, n, 3);
	disconnect(n[2]);
	tick(2999);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT);
	CHECK(j->generation == 1 && j->restart_count == 0);
	/* A success is no failure: it does not end the closed node. */
	CHECK_RC(resume(n[2], 1), 0);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT && j->generation == 1);
	disconnect(n[2]);
	tick(3000);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "did not reconnect within reconnect_grace");
	CHECK(j->generation == 2 && j->restart_count == 1);
	teardown();
}

/*
 * The closed node was only a blip: it resumes after the shortcut. The
 * resume is refused (rule 10) and its agent joins again as a new node,
 * which the running job takes in by rule 3: no ghost of the lost
 * node, ranks a permutation (turn() checks every invariant).
 */
static void
test_blip_resumes_after_shortcut(void)
{
	struct core_node	*n[3], *again;
	struct core_job		*j;
	uint32_t		 i, seen = 0;

	setup(NULL);
	j = nodes("blip", -1, 2, 3, n, 3);
	disconnect(n[1]);
	CHECK_RC(report(n[2], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(n[1]->state == CORE_NODE_LOST && j->generation == 2);
	CHECK_RC(resume(n[1], 1), CORE_REFUSED);
	CHECK_HAS(err, "was lost");
	CHECK_HAS(err, "join again as a new node");
	CHECK(j->generation == 2 && j->round_n == 2);
	again = join("blip", "b", 1, 2, 3);
	CHECK(again != n[1] && again->node_id != n[1]->node_id);
	/* It fills max_nodes again: taken in at once (rule 3). */
	CHECK(again->state == CORE_NODE_PARTICIPANT);
	CHECK_INT(j->n_state[CORE_NODE_LOST], 1);
	CHECK(j->generation == 3 && j->round_n == 3);
	CHECK_INT(j->restart_count, 1);		/* taking it in is no failure */
	for (i = 0; i < j->round_n; i++) {
		CHECK(j->round[i] != n[1]);
		seen |= 1u << j->round[i]->group_rank;
	}
	CHECK_INT(seen, 7);
	CHECK(last_is(again, CORE_MSG_ASSIGNMENT));
	teardown();
}

/*
 * The other order: the peer's report arrives first and forms a round of
 * every member, then the dead node's connection closes. Within the grace
 * of the report it is lost at once, and the round forms again without it,
 * still one restart. Later, or a node that reported the failure itself,
 * waits out the grace as before.
 */
static void
test_report_then_closed(void)
{
	struct core_node	*n[3];
	struct core_job		*j;

	setup(NULL);
	j = nodes("r14b", -1, 2, 3, n, 3);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(j->generation == 2 && j->round_n == 3 && j->restart_count == 1);
	tick(20);
	disconnect(n[2]);
	CHECK(n[2]->state == CORE_NODE_LOST);
	CHECK_HAS(n[2]->reason, "just after a failure of generation 1");
	CHECK(j->generation == 3 && j->round_n == 2);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(last_msg(n[1])->u.assignment.generation, 3);

	/* The cause of generation 1's failure was found (n[2], closed, lost
	 * with the report): another member closing during the recovery is a
	 * second fault, lost at once and counted. */
	j = nodes("r14s", -1, 1, 3, n, 3);
	disconnect(n[2]);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(n[2]->state == CORE_NODE_LOST && j->generation == 2);
	CHECK_INT(j->restart_count, 1);
	tick(70);
	disconnect(n[1]);
	CHECK(n[1]->state == CORE_NODE_LOST);
	CHECK_HAS(n[1]->reason, "a second fault, during the recovery");
	CHECK(j->generation == 3 && j->round_n == 1);
	CHECK_INT(j->restart_count, 2);

	/* A node killed with its workers whose agent still told of its own
	 * worker killed (SIGKILL) before it went: its connection closing is
	 * the same death, not a second fault. */
	{
		struct core_report	r;
		struct core_exit	killed = { .exit_code = -1,
					    .signal = SIGKILL };

		j = nodes("r14k", -1, 1, 3, n, 3);
		memset(&r, 0, sizeof(r));
		r.session_id = n[2]->session_id;
		r.generation = 1;
		r.outcome = CORE_OUTCOME_FAILED;
		r.exits = &killed;
		r.n_exits = 1;
		CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err,
		    sizeof(err)), 0);
		turn();
		CHECK(j->generation == 2 && j->restart_count == 1);
		tick(5);
		disconnect(n[2]);
		CHECK(n[2]->state == CORE_NODE_LOST);
		CHECK_HAS(n[2]->reason, "it reported its own worker killed "
		    "in generation 1 (the same death)");
		CHECK(j->generation == 3 && j->round_n == 2);
		CHECK_INT(j->restart_count, 1);
	}

	/* The reporter itself dies during the recovery (issue 40's second
	 * failure): lost at once too, a fault of its own. */
	j = nodes("r14r", -1, 1, 3, n, 3);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	CHECK(j->generation == 2 && j->restart_count == 1);
	tick(70);
	disconnect(n[0]);
	CHECK(n[0]->state == CORE_NODE_LOST);
	CHECK_HAS(n[0]->reason, "its own report of a failure of generation 1");
	CHECK(j->generation == 3 && j->round_n == 2);
	CHECK_INT(j->restart_count, 2);
	CHECK_INT(last_msg(n[1])->u.assignment.generation, 3);

	/* Past the grace of the report: the grace as before. */
	j = nodes("r14c", -1, 2, 3, n, 3);
	CHECK_RC(report(n[0], 1, CORE_OUTCOME_FAILED), 0);
	tick(3001);
	disconnect(n[2]);
	CHECK(n[2]->state == CORE_NODE_PARTICIPANT && j->generation == 2);
	tick(3000);
	CHECK(n[2]->state == CORE_NODE_LOST && j->generation == 3);
	CHECK_INT(j->restart_count, 2);
	teardown();
}

/* Nodes a, b, c (two workers each) of a 2:3 job with rank policy |rp|,
 * then spare d. */
static struct core_job *
policy_job(const char *id, uint8_t rp, struct core_node *n[4])
{
	static const char *const hosts[] = { "a", "b", "c", "d" };
	struct core_join	 r;
	int			 i;

	for (i = 0; i < 4; i++) {
		r = req(id, hosts[i], 2, 2, 3);
		r.settings.max_restarts = 3;
		r.settings.rank_policy = rp;
		n[i] = join_req(&r, 0);
	}
	CHECK(n[3]->state == CORE_NODE_SPARE);
	CHECK_INT(n[0]->group_rank, 0);
	CHECK_INT(n[2]->group_rank, 2);
	return n[0]->job;
}

/* Rule 16: with stable ranks a spare takes exactly the lost node's place
 * and ranks; the survivors keep theirs. Ordered (the default) re-sorts. */
static void
test_stable_spare_takes_lost_ranks(void)
{
	struct core_node	*n[4];
	struct core_job		*j;

	setup(NULL);
	j = policy_job("stable", CORE_RANK_STABLE, n);
	CHECK_INT(j->settings.rank_policy, CORE_RANK_STABLE);
	core_lease_lost(C, NOW, n[0]);		/* a: group rank 0 */
	turn();
	CHECK(j->generation == 2 && j->round_n == 3);
	CHECK_INT(n[3]->group_rank, 0);
	CHECK_INT(n[3]->base_rank, 0);
	CHECK_INT(n[1]->group_rank, 1);
	CHECK_INT(n[1]->base_rank, 2);
	CHECK_INT(n[2]->group_rank, 2);
	CHECK_INT(n[2]->base_rank, 4);
	CHECK_INT(last_msg(n[3])->u.assignment.base_rank, 0);
	CHECK_HAS(j->events[(j->events_start + j->events_n - 2) %
	    j->events_cap].message, "rank policy stable: 2 of 3 nodes keep "
	    "their ranks; node d (node 4) takes group rank 0 of node a (gone)");

	j = policy_job("ordered", 0, n);
	CHECK_INT(j->settings.rank_policy, CORE_RANK_ORDERED);
	core_lease_lost(C, NOW, n[0]);
	turn();
	CHECK_INT(n[1]->group_rank, 0);
	CHECK_INT(n[2]->group_rank, 1);
	CHECK_INT(n[3]->group_rank, 2);
	teardown();
}

/* A smaller world: only the node whose rank is past it moves. */
static void
test_stable_shrink_moves_only_what_must(void)
{
	struct core_node	*n[4];
	struct core_job		*j;

	setup(NULL);
	j = policy_job("shrink", CORE_RANK_STABLE, n);
	core_leave(C, NOW, "alice", n[3]->session_id, "spare not needed",
	    err, sizeof(err));		/* no spare: the world shrinks */
	turn();
	core_lease_lost(C, NOW, n[1]);		/* b: group rank 1 */
	turn();
	CHECK(j->generation == 2 && j->round_n == 2);
	CHECK_INT(n[0]->group_rank, 0);
	CHECK_INT(n[0]->base_rank, 0);
	CHECK_INT(n[2]->group_rank, 1);		/* c: was 2, past the world */
	CHECK_INT(n[2]->base_rank, 2);
	teardown();
}

/* The Accepted message node |n| got last; NULL: none. */
static const struct core_msg *
accepted_of(const struct core_node *n)
{
	const struct core_msg	*m = NULL;
	size_t			 i;

	for (i = 0; i < nrecs; i++)
		if (recs[i].node_id == n->node_id &&
		    recs[i].m.kind == CORE_MSG_ACCEPTED)
			m = &recs[i].m;
	return m;
}

/*
 * Issue 45: the join that creates a job sets its preload, every node is
 * told it in Accepted, and a later join that asks another (or none) gets
 * the job's, as with the restart mode. Names that `import` cannot take
 * are refused, naming the name and what is wrong with it, and make no job.
 */
static void
test_preload_setting(void)
{
	static const struct {
		const char	*preload, *says;
	} bad[] = {
		{ "torch,,numpy", "module name 2 is empty" },
		{ ",torch", "module name 1 is empty" },
		{ "torch,", "module name 2 is empty" },
		{ "torch,num-py", "module name \"num-py\" is not a module name "
		    "(it has a character other than letters, digits" },
		{ "torch nn", "\"torch nn\" is not a module name" },
		{ "torch..nn", "\"torch..nn\" is not a module name (a '.' "
		    "must be between two parts)" },
		{ "torch.", "\"torch.\" is not a module name (a '.' must" },
		{ "numpy,9lives", "\"9lives\" is not a module name (a part "
		    "starts with a digit)" },
		{ "torch,\xc3\xa9", "module name 2 has byte 0xc3" },
		{ "torch..x\xc3\xa9", "module name 1 is not a module name (a "
		    "'.' must be between two parts)" },
	};
	const struct core_msg	*m;
	struct core_node	*a, *b, *c;
	struct core_join	 r;
	char			 big[CORE_PRELOAD_MAX + 2];
	size_t			 i;

	setup(NULL);
	r = req("warm", "a", 1, 3, 3);
	r.preload = "torch,numpy.linalg,_ext9";
	a = join_req(&r, 0);
	CHECK_STR(a->job->settings.preload, "torch,numpy.linalg,_ext9");
	r = req("warm", "b", 1, 3, 3);		/* asks none: the job's */
	b = join_req(&r, 0);
	r = req("warm", "c", 1, 3, 3);
	r.preload = "numpy";			/* asks another: the job's */
	c = join_req(&r, 0);
	CHECK_STR(a->job->settings.preload, "torch,numpy.linalg,_ext9");
	CHECK((m = accepted_of(a)) != NULL &&
	    strcmp(m->u.accepted.settings.preload,
	    "torch,numpy.linalg,_ext9") == 0);
	CHECK((m = accepted_of(b)) != NULL &&
	    strcmp(m->u.accepted.settings.preload,
	    "torch,numpy.linalg,_ext9") == 0);
	CHECK((m = accepted_of(c)) != NULL &&
	    strcmp(m->u.accepted.settings.preload,
	    "torch,numpy.linalg,_ext9") == 0);
	/* None asked, or "" (a JoinRequest's unset string): none. */
	c = join("cold", "a", 1, 1, 1);
	CHECK_STR(c->job->settings.preload, "");
	r = req("cold2", "a", 1, 1, 1);
	r.preload = "";
	c = join_req(&r, 0);
	CHECK(c != NULL && c->job->settings.preload[0] == '\0');

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = req("bad", "a", 1, 1, 1);
		r.preload = bad[i].preload;
		join_req(&r, CORE_INVALID);
		CHECK_HAS(err, "job bad: preload");
		CHECK_HAS(err, bad[i].says);
		CHECK_HAS(err, "(--preload)");
		CHECK(core_job_find(C, "bad") == NULL);
	}
	/* The bound: 255 bytes are taken, 256 refused. */
	memset(big, 'm', sizeof(big));
	big[CORE_PRELOAD_MAX + 1] = '\0';
	r = req("bad", "a", 1, 1, 1);
	r.preload = big;
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "job bad: preload is 256 bytes, over the limit of 255");
	big[CORE_PRELOAD_MAX] = '\0';
	r = req("big", "a", 1, 1, 1);
	r.preload = big;
	c = join_req(&r, 0);
	CHECK(c != NULL && strlen(c->job->settings.preload) ==
	    CORE_PRELOAD_MAX);
	teardown();
}

static const struct test tests[] = {
	{ "preload_setting", test_preload_setting },
	{ "stable_spare_takes_lost_ranks", test_stable_spare_takes_lost_ranks },
	{ "stable_shrink_moves_only_what_must",
	    test_stable_shrink_moves_only_what_must },
	{ "report_then_closed", test_report_then_closed },
	{ "closed_and_peer_failure", test_closed_and_peer_failure },
	{ "closed_alone_waits_grace", test_closed_alone_waits_grace },
	{ "blip_resumes_after_shortcut", test_blip_resumes_after_shortcut },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
