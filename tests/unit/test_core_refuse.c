/*
 * Unit tests of a join refused because its host is quarantined
 * (daemon/core/core_refuse.c): the refusal is an event of its job, and a job of
 * a fixed allocation (rejoin_timeout 0) that can no longer make min_nodes
 * fails at once naming the host, whether the refused node came first, in
 * the middle or last; the allocation's late nodes are refused rather than
 * reopening the job. A spare in the allocation, a job that does not come
 * from an allocation, an elastic rejoin window, another identity's join
 * and a requeue keep their usual course.
 */

#include "core_harness.h"

static void
quarantine(const char *host)
{
	CHECK_INT(core_host_set(C, NOW, "root", true, host, HOST_QUARANTINED,
	    "bad DIMM", err, sizeof(err)), 0);
	turn();
}

/* A Slurm agent's join: fixed size, rejoin 0, |alloc| nodes. */
static struct core_join
slurm_req(const char *id, const char *host, uint32_t nodes, uint32_t alloc)
{
	struct core_join r = req(id, host, 1, nodes, nodes);

	r.settings.has_rejoin_timeout = true;
	r.settings.rejoin_timeout_ms = 0;
	r.allocation_nodes = alloc;
	r.attempt = 1;
	return r;
}

static struct core_node *
slurm_join(const char *id, const char *host, uint32_t nodes, uint32_t alloc,
    int want)
{
	struct core_join r = slurm_req(id, host, nodes, alloc);

	return join_req(&r, want);
}

/* The refused node comes between the others: the job fails at once, its
 * waiting nodes are told, naming the host; the last node is refused with
 * that failure instead of reopening the job. */
static void
test_refused_in_the_middle_fails_fixed_job(void)
{
	struct core_node	*a;
	struct core_job		*j;

	setup(NULL);
	quarantine("n2");
	a = slurm_join("42", "n1", 3, 3, 0);
	j = a->job;
	slurm_join("42", "n2", 3, 3, CORE_REFUSED);
	CHECK_HAS(err, "host n2 is quarantined");
	CHECK_INT(j->state, CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "a join from host n2 was refused: host n2 is "
	    "quarantined since");
	CHECK_HAS(j->reason, "quarantined by root: bad DIMM");
	CHECK_HAS(j->reason, "2 of the allocation's 3 nodes can join, fewer "
	    "than min 3, and rejoin_timeout is 0");
	CHECK(has_event(j, "refused", "a join from host n2 was refused"));
	CHECK(last_is(a, CORE_MSG_FAILED));
	CHECK_HAS(last_msg(a)->reason, "host n2");
	CHECK_INT(j->restart_count, 0);

	/* n3, of the same allocation, comes last. */
	slurm_join("42", "n3", 3, 3, CORE_REFUSED);
	CHECK_HAS(err, "job 42 failed: a join from host n2 was refused");
	CHECK_INT(j->state, CORE_JOB_FAILED);
	CHECK_INT(j->attempt, 1);

	/* n2 again, late: kept, but for this run only. */
	slurm_join("42", "n2", 3, 3, CORE_REFUSED);
	CHECK_INT(C->n_refusals, 1);

	/* A requeue (attempt 2) reopens it as usual. */
	struct core_join r = slurm_req("42", "n3", 3, 3);
	r.attempt = 2;
	CHECK(join_req(&r, 0) != NULL);
	CHECK_INT(j->state, CORE_JOB_WAITING);
	CHECK_INT(j->n_refused, 0);	/* n2's late refusal was attempt 1's */
	teardown();
}

/* The refused node comes first, before its job exists: the job takes the
 * refusal when its first node creates it, and fails then. */
static void
test_refused_first_is_kept_for_the_job(void)
{
	struct core_node	*a;
	struct core_job		*j;

	setup(NULL);
	quarantine("n1");
	slurm_join("43", "n1", 3, 3, CORE_REFUSED);
	CHECK(core_job_find(C, "43") == NULL);
	CHECK_INT(C->n_refusals, 1);
	tick(100);
	a = slurm_join("43", "n2", 3, 3, 0);
	j = a->job;
	CHECK_INT(j->state, CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "a join from host n1 was refused");
	CHECK(has_event(j, "refused", "host n1"));
	CHECK(last_is(a, CORE_MSG_FAILED));
	CHECK_INT(C->n_refusals, 0);
	slurm_join("43", "n3", 3, 3, CORE_REFUSED);
	CHECK_HAS(err, "job 43 failed");
	teardown();
}

/* A kept refusal is for its job's owner only, and for the join timeout. */
static void
test_kept_refusal_owner_and_expiry(void)
{
	struct core_join	 r;
	struct core_node	*a;

	setup(NULL);
	quarantine("n1");
	r = slurm_req("44", "n1", 3, 3);
	r.identity = "mallory";
	join_req(&r, CORE_REFUSED);
	a = slurm_join("44", "n2", 3, 3, 0);
	CHECK_INT(a->job->state, CORE_JOB_WAITING);
	CHECK(!has_event(a->job, "refused", "n1"));

	r = slurm_req("45", "n1", 3, 3);
	r.settings.join_timeout_ms = 1000;
	join_req(&r, CORE_REFUSED);
	tick(1000);
	a = slurm_join("45", "n2", 3, 3, 0);
	CHECK_INT(a->job->state, CORE_JOB_WAITING);
	CHECK(!has_event(a->job, "refused", "n1"));
	CHECK_INT(C->n_refusals, 1);	/* mallory's, for job 44 */
	teardown();
}

/* A spare in the allocation (4 nodes for 3) can fill in for one refused
 * node: the refusal is told, the job waits; a second refusal dooms it. */
static void
test_spare_fills_in(void)
{
	struct core_node	*a;
	struct core_job		*j;

	setup(NULL);
	quarantine("n2");
	quarantine("n3");
	a = slurm_join("46", "n1", 3, 4, 0);
	j = a->job;
	slurm_join("46", "n2", 3, 4, CORE_REFUSED);
	CHECK_INT(j->state, CORE_JOB_WAITING);
	CHECK(has_event(j, "refused", "host n2"));
	slurm_join("46", "n3", 3, 4, CORE_REFUSED);
	CHECK_INT(j->state, CORE_JOB_FAILED);
	CHECK_HAS(j->reason, "2 of the allocation's 4 nodes can join");
	teardown();
}

/* Outside an allocation, or with a rejoin window, a node may still come:
 * the refusal is only told. So is one into a running job, or from another
 * identity (which tells nothing). */
static void
test_refusal_only_told(void)
{
	struct core_join	 r;
	struct core_node	*a, *n[3];
	struct core_job		*j;

	setup(NULL);
	quarantine("q");
	a = slurm_join("47", "n1", 3, 0, 0);
	slurm_join("47", "q", 3, 0, CORE_REFUSED);
	CHECK_INT(a->job->state, CORE_JOB_WAITING);
	CHECK(has_event(a->job, "refused", "host q"));

	r = slurm_req("48", "n1", 3, 3);
	r.settings.rejoin_timeout_ms = 60000;
	a = join_req(&r, 0);
	r = slurm_req("48", "q", 3, 3);
	r.settings.rejoin_timeout_ms = 60000;
	join_req(&r, CORE_REFUSED);
	CHECK_INT(a->job->state, CORE_JOB_WAITING);

	j = nodes("49", 0, 2, 2, n, 2);
	CHECK_INT(j->state, CORE_JOB_RUNNING);
	slurm_join("49", "q", 2, 2, CORE_REFUSED);
	CHECK_INT(j->state, CORE_JOB_RUNNING);
	CHECK(has_event(j, "refused", "host q"));

	a = slurm_join("50", "n1", 3, 3, 0);
	r = slurm_req("50", "q", 3, 3);
	r.identity = "mallory";
	join_req(&r, CORE_REFUSED);
	CHECK_INT(a->job->state, CORE_JOB_WAITING);
	CHECK(!has_event(a->job, "refused", "host q"));
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "refused_in_the_middle_fails_fixed_job",
		    test_refused_in_the_middle_fails_fixed_job },
		{ "refused_first_is_kept_for_the_job",
		    test_refused_first_is_kept_for_the_job },
		{ "kept_refusal_owner_and_expiry",
		    test_kept_refusal_owner_and_expiry },
		{ "spare_fills_in", test_spare_fills_in },
		{ "refusal_only_told", test_refusal_only_told },
	};
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
