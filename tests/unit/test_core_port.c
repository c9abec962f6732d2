/*
 * Unit tests of the rendezvous core: a master port taken on rank 0's host
 * (ReportRequest.cause "master_port", docs/AGENT.md). The round's master
 * saying so re-rounds at once on its new port without counting a restart
 * or failing the job, however often it happens; the same report from a
 * node that is not the master, of an older generation, or without a new
 * port only keeps the port for the next round.
 */

#include "core_harness.h"

static struct core_report
port_report(struct core_node *n, uint64_t gen, uint32_t port)
{
	struct core_report r;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = CORE_OUTCOME_UPDATE;
	r.master_port = port;
	r.cause = CORE_CAUSE_MASTER_PORT;
	return r;
}

static const struct core_event *
last_event(const struct core_job *j, const char *kind)
{
	const struct core_event *e = NULL;

	for (uint32_t i = 0; i < j->events_n; i++)
		if (strcmp(core_job_event(j, i)->kind, kind) == 0)
			e = core_job_event(j, i);
	return e;
}

/* Thirty takes in a row: thirty new rounds, each on the new port, each
 * assigned to both nodes, no restart counted, the job running. */
static void
test_master_reports_taken_port(void)
{
	struct core_report	 r;
	struct core_join	 q;
	struct core_node	*a, *b;
	const struct core_event	*e;
	uint64_t		 gen;

	setup(NULL);
	q = req("port", "a", 1, 2, 2);
	q.master_port = 30000;
	a = join_req(&q, 0);
	q = req("port", "b", 1, 2, 2);
	q.master_port = 31000;
	b = join_req(&q, 0);
	CHECK(a->group_rank == 0);
	CHECK(a->job->master_port == 30000);
	gen = a->job->generation;
	for (uint32_t i = 1; i <= 30; i++) {
		r = port_report(a, gen, 30000 + i);
		CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err,
		    sizeof(err)), 0);
		turn();
		CHECK(a->job->generation == gen + 1);
		CHECK(a->job->state == CORE_JOB_RUNNING);
		CHECK(a->job->restart_count == 0);
		CHECK(a->job->master_port == 30000 + i);
		CHECK(last_is(a, CORE_MSG_ASSIGNMENT));
		CHECK(last_is(b, CORE_MSG_ASSIGNMENT));
		CHECK(last_msg(b)->u.assignment.master_port == 30000 + i);
		CHECK(last_msg(b)->u.assignment.restart_count == 0);
		gen = a->job->generation;
	}
	e = last_event(a->job, "master_port");
	CHECK(e != NULL);
	CHECK_HAS(e->message, "node a (node 1) found master port 30029 of "
	    "generation 30 taken on its host; a new round on port 30030, no "
	    "restart counted");
	teardown();
}

/* Not the master, an older generation, no new port: no new round, and
 * the port offered is kept for the next one. */
static void
test_stale_or_foreign_reports(void)
{
	struct core_report	 r;
	struct core_join	 q;
	struct core_node	*a, *b;
	uint64_t		 gen;

	setup(NULL);
	q = req("port2", "a", 1, 2, 2);
	q.master_port = 30000;
	a = join_req(&q, 0);
	b = join("port2", "b", 1, 2, 2);
	gen = a->job->generation;
	CHECK(b->group_rank == 1);

	r = port_report(b, gen, 32000);		/* b is not the master */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(a->job->generation == gen);
	CHECK(b->port_offer == 32000);

	r = port_report(a, gen - 1, 30001);	/* an older generation */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(a->job->generation == gen);
	CHECK(a->port_offer == 30001);

	r = port_report(a, gen, 0);		/* no new port */
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK(a->job->generation == gen);
	CHECK(last_event(a->job, "master_port") == NULL);
	CHECK(a->job->restart_count == 0);
	teardown();
}

static const struct test tests[] = {
	{ "master_reports_taken_port", test_master_reports_taken_port },
	{ "stale_or_foreign_reports", test_stale_or_foreign_reports },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
