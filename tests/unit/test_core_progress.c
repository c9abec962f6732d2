/*
 * Unit tests of the rendezvous core, part four: training progress
 * (docs/HEALTH.md). Steps are kept in memory and never make a change to
 * commit; a node trails the job's leading node in steps and in time, and
 * is a straggler past either threshold; a step of another generation is
 * refused; watchers hear of steps at most once a second, and only those
 * that see the job's nodes when nothing else changed; a hang is a
 * failure like any other, with an event of its own; the hang timeout is a
 * job setting that survives a restart.
 */

#include "core_harness.h"

static int
step(struct core_node *n, uint64_t gen, uint64_t s)
{
	err[0] = '\0';
	return core_progress(C, NOW, "alice", n->session_id, gen, s, err,
	    sizeof(err));
}

/* Nothing of this turn is for the store. */
static bool
nothing_to_commit(void)
{
	return TAILQ_EMPTY(&C->dirty_jobs) && TAILQ_EMPTY(&C->dirty_nodes) &&
	    TAILQ_EMPTY(&C->removed_jobs) && TAILQ_EMPTY(&C->removed_nodes) &&
	    C->n_new_events == 0 && C->n_new_rounds == 0;
}

static struct core_job *
three(const char *id, struct core_node *n[3])
{
	static const char *const hosts[] = { "a", "b", "c" };
	struct core_join	 r;

	for (int i = 0; i < 3; i++) {
		r = req(id, hosts[i], 1, 3, 3);
		r.settings.max_restarts = 2;
		n[i] = join_req(&r, 0);
	}
	return n[0]->job;
}

static struct core_node_progress
where(const struct core_node *n)
{
	struct core_node_progress	p;
	uint64_t			lead;
	uint32_t			k;

	core_job_progress(n->job, NOW, &lead, &k);
	core_node_progress(n, lead, NOW, &p);
	return p;
}

static void
cfg_thresholds(struct core_config *cfg, uint64_t steps, uint64_t ms)
{
	core_config_defaults(cfg);
	cfg->straggler_steps = steps;
	cfg->straggler_ms = ms;
}

/* More than K steps behind the leader is a straggler; K is not. */
static void
test_steps_behind(void)
{
	struct core_config	 cfg;
	struct core_node	*n[3];
	struct core_job		*j;
	uint64_t		 lead;
	uint32_t		 k;

	cfg_thresholds(&cfg, 5, 0);
	setup(&cfg);
	j = three("steps", n);
	CHECK(j->state == CORE_JOB_RUNNING && j->generation == 1);
	CHECK(!core_job_progress(j, NOW, &lead, &k));
	CHECK(!where(n[0]).has_step);
	CHECK_RC(step(n[0], 1, 10), 0);
	CHECK_RC(step(n[1], 1, 5), 0);
	CHECK_RC(step(n[2], 1, 4), 0);
	CHECK(nothing_to_commit());
	turn();
	CHECK(core_job_progress(j, NOW, &lead, &k));
	CHECK_INT(lead, 10);
	CHECK_INT(k, 1);
	CHECK(where(n[0]).has_step && where(n[0]).steps_behind == 0 &&
	    !where(n[0]).straggler);
	CHECK_INT(where(n[1]).steps_behind, 5);
	CHECK(!where(n[1]).straggler);
	CHECK_INT(where(n[2]).steps_behind, 6);
	CHECK(where(n[2]).straggler);
	CHECK_INT(where(n[2]).step_wall_ms, NOW.wall_ms);
	/* It catches up: no straggler any more. */
	CHECK_RC(step(n[2], 1, 9), 0);
	turn();
	CHECK(!where(n[2]).straggler);
	CHECK(core_job_progress(j, NOW, &lead, &k) && k == 0);
	teardown();
}

/* Passing a step more than T after the leader did is a straggler too,
 * told by when the leader rose past it. */
static void
test_time_behind(void)
{
	struct core_config	 cfg;
	struct core_node	*n[3];

	cfg_thresholds(&cfg, 0, 10000);
	setup(&cfg);
	three("time", n);
	for (int i = 0; i < 3; i++)
		CHECK_RC(step(n[i], 1, 0), 0);
	tick(1000);
	CHECK_RC(step(n[0], 1, 1), 0);	/* the leader passes step 0 */
	CHECK_RC(step(n[1], 1, 1), 0);
	tick(4000);
	CHECK_INT(where(n[2]).behind_ms, 4000);
	CHECK(!where(n[2]).straggler);
	CHECK_RC(step(n[0], 1, 2), 0);
	tick(7000);
	CHECK_INT(where(n[2]).steps_behind, 2);
	CHECK_INT(where(n[2]).behind_ms, 11000);
	CHECK(where(n[2]).straggler);
	/* n[1] is one step behind, passed 7 s ago: within T. */
	CHECK_INT(where(n[1]).behind_ms, 7000);
	CHECK(!where(n[1]).straggler);
	/* Reaching step 1 it trails from when the leader passed step 1. */
	CHECK_RC(step(n[2], 1, 1), 0);
	CHECK_INT(where(n[2]).behind_ms, 7000);
	CHECK(!where(n[2]).straggler);
	teardown();
}

/* Only the current generation's participants report steps; each new
 * round starts without any. */
static void
test_fenced_by_generation(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	uint64_t		 lead;
	uint32_t		 k;
	uint8_t			 nobody[CORE_SESSION_LEN] = { 0xee };

	setup(NULL);
	j = three("fence", n);
	CHECK_RC(step(n[0], 2, 1), CORE_REFUSED);
	CHECK_HAS(err, "generation 2 does not run on node");
	CHECK_RC(core_progress(C, NOW, "alice", nobody, 1, 1, err,
	    sizeof(err)), CORE_NOT_FOUND);
	CHECK_RC(core_progress(C, NOW, "mallory", n[0]->session_id, 1, 1, err,
	    sizeof(err)), CORE_DENIED);
	CHECK_RC(step(n[0], 1, 7), 0);
	turn();
	CHECK_RC(report(n[1], 1, CORE_OUTCOME_FAILED), 0);
	CHECK_INT(j->generation, 2);
	CHECK(!core_job_progress(j, NOW, &lead, &k));
	CHECK(!where(n[0]).has_step);
	CHECK_RC(step(n[0], 1, 8), CORE_REFUSED);
	CHECK_RC(step(n[0], 2, 3), 0);
	CHECK(core_job_progress(j, NOW, &lead, &k) && lead == 3);
	teardown();
}

/* Watchers hear of steps at once, then at most once a second; the last
 * step of a burst is told when the progress timer fires. */
static void
test_told_once_a_second(void)
{
	struct core_node	*n[3], *spare;
	struct core_job		*j;
	struct core_join	 r;

	setup(NULL);
	j = three("tell", n);
	CHECK_RC(step(n[0], 1, 1), 0);
	CHECK(j->changed && j->steps_only);
	turn();
	tick(100);
	CHECK_RC(step(n[0], 1, 2), 0);
	CHECK(!j->changed);
	CHECK_INT(core_next_deadline(C), NOW.mono_ms + 900);
	/* The same step again is no news at all. */
	CHECK_RC(step(n[0], 1, 2), 0);
	CHECK(!j->changed);
	NOW.mono_ms += 900;
	NOW.wall_ms += 900;
	core_advance(C, NOW);
	CHECK(j->changed && j->steps_only);
	CHECK(nothing_to_commit());
	turn();
	/* A change of the job itself in the same turn is more than steps:
	 * watchers of every job hear of it. */
	tick(1000);
	CHECK_RC(step(n[0], 1, 3), 0);
	CHECK(j->steps_only);
	r = req("tell", "d", 1, 3, 3);	/* a spare */
	CHECK_RC(core_join(C, NOW, &r, &spare, err, sizeof(err)), 0);
	CHECK(j->changed && !j->steps_only);
	turn();
	teardown();
}

/* A hang counts as a failure (a restart, a new round) with an event of
 * kind "hang" naming the node. */
static void
test_hang_is_a_failure(void)
{
	struct core_node	*n[3];
	struct core_job		*j;
	struct core_report	 r;
	const struct core_event	*e;

	setup(NULL);
	j = three("hang", n);
	memset(&r, 0, sizeof(r));
	r.session_id = n[1]->session_id;
	r.generation = 1;
	r.outcome = CORE_OUTCOME_FAILED;
	r.cause = CORE_CAUSE_HANG;
	r.message = "no worker made progress for 3.0 s since step 7";
	CHECK_RC(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(j->generation, 2);
	CHECK(j->state == CORE_JOB_RUNNING);
	e = NULL;
	for (uint32_t i = 0; i < j->events_n; i++)
		if (strcmp(core_job_event(j, i)->kind, "hang") == 0)
			e = core_job_event(j, i);
	CHECK(e != NULL);
	if (e != NULL)
		CHECK_STR(e->message, "node b (node 2) hung in generation 1: "
		    "no worker made progress for 3.0 s since step 7");
	teardown();
}

/* The hang timeout is the creating join's; later joiners' are ignored;
 * it is bounded like a join timeout and survives a restart. */
static void
test_hang_timeout_setting(void)
{
	struct core_join	 r;
	struct core_job		*j;

	setup(NULL);
	r = req("ht", "a", 1, 2, 2);
	r.settings.hang_timeout_ms = 10000;
	j = join_req(&r, 0)->job;
	CHECK_INT(j->settings.hang_timeout_ms, 10000);
	r = req("ht", "b", 1, 2, 2);
	r.settings.hang_timeout_ms = 99000;
	join_req(&r, 0);
	CHECK_INT(j->settings.hang_timeout_ms, 10000);
	CHECK_INT(join("off", "a", 1, 1, 1)->job->settings.hang_timeout_ms, 0);
	r = req("big", "a", 1, 1, 1);
	r.settings.hang_timeout_ms = 25U * 3600 * 1000;
	join_req(&r, CORE_INVALID);
	CHECK_HAS(err, "--hang-timeout");
	CHECK(restart(NULL, 5000000, 1000));
	CHECK_INT(core_job_find(C, "ht")->settings.hang_timeout_ms, 10000);
	teardown();
}

static const struct test tests[] = {
	{ "steps_behind", test_steps_behind },
	{ "time_behind", test_time_behind },
	{ "fenced_by_generation", test_fenced_by_generation },
	{ "told_once_a_second", test_told_once_a_second },
	{ "hang_is_a_failure", test_hang_is_a_failure },
	{ "hang_timeout_setting", test_hang_timeout_setting },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
