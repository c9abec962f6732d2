/*
 * Unit tests of host memory and the quarantine policy (daemon/core/core_hostrules.c,
 * daemon/core/core_hosts.c, docs/HEALTH.md), with the core's fake clock: which
 * results make a host suspect or quarantined, the crash window, a
 * quarantined host's joins refused for every job, its live nodes evicted
 * so that a spare takes over, and an admin's clear and quarantine.
 */
#include <signal.h>

#include "core_harness.h"

#define HOUR	(3600ULL * 1000)

static struct core_gpu
gpu(uint32_t dev, bool ok)
{
	struct core_gpu	g;

	memset(&g, 0, sizeof(g));
	g.device = dev;
	g.ok = ok;
	snprintf(g.uuid, sizeof(g.uuid), "GPU-%u", dev);
	if (!ok) {
		snprintf(g.failed_step, sizeof(g.failed_step), "alloc");
		snprintf(g.error, sizeof(g.error),
		    "CUDA_ERROR_ECC_UNCORRECTABLE");
	}
	return g;
}

/* A report of a worker failure whose worker died of |sig| (0: exit 1). */
static int
crash_report(struct core_node *n, int sig, const char *message)
{
	struct core_exit	 ex[2] = { { -1, sig }, { -1, SIGTERM } };
	struct core_report	 r;
	int			 rc;

	if (sig == 0)
		ex[0] = (struct core_exit){ 1, 0 };
	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = n->job->generation;
	r.outcome = CORE_OUTCOME_FAILED;
	r.message = message;
	r.exits = ex;
	r.n_exits = 2;
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

static enum host_state
state_of(const char *name)
{
	const struct host *h = hosts_find(C->hosts, name);
	return h != NULL ? h->state : 0;
}

static bool
job_has_event(const struct core_job *j, const char *kind, const char *part)
{
	for (uint32_t i = 0; i < j->events_n; i++) {
		const struct core_event *e = core_job_event(j, i);
		if (strcmp(e->kind, kind) == 0 && strstr(e->message, part))
			return true;
	}
	return false;
}

/* Which exits are held against a host. */
static void
test_crash_classes(void)
{
	CHECK(hosts_exit_is_crash(-1, SIGSEGV, NULL));
	CHECK(hosts_exit_is_crash(-1, SIGBUS, NULL));
	CHECK(hosts_exit_is_crash(-1, SIGABRT, ""));
	/* What the agent stops workers with is no crash. */
	CHECK(!hosts_exit_is_crash(-1, SIGTERM, NULL));
	CHECK(!hosts_exit_is_crash(-1, SIGKILL, "CUDA error"));
	CHECK(!hosts_exit_is_crash(-1, SIGINT, NULL));
	CHECK(!hosts_exit_is_crash(-1, SIGHUP, NULL));
	CHECK(hosts_exit_is_crash(1, 0, "RuntimeError: CUDA error: an "
	    "illegal memory access was encountered"));
	CHECK(hosts_exit_is_crash(3, 0, "CUDA_ERROR_ECC_UNCORRECTABLE"));
	CHECK(!hosts_exit_is_crash(1, 0, "ValueError: bad learning rate"));
	CHECK(!hosts_exit_is_crash(1, 0, NULL));
	CHECK(!hosts_exit_is_crash(0, 0, "CUDA error"));
}

/* A failed GPU check at join quarantines the host; that join and the
 * host's joins to any other job are refused naming it and the reason. */
static void
test_gpu_failure_quarantines(void)
{
	struct core_gpu		 g[2] = { gpu(0, true), gpu(1, false) };
	struct core_config	 cfg;
	struct core_join	 r;
	const struct host_change *hc;

	core_config_defaults(&cfg);
	cfg.hosts.gpu_failure = HOST_GPU_QUARANTINE;
	setup(&cfg);
	r = req("j1", "n2", 1, 1, 2);
	r.gpus = g;
	r.n_gpus = 2;
	r.gpus_healthy = 1;
	r.gpus_total = 2;
	CHECK_INT(core_join(C, NOW, &r, NULL, err, sizeof(err)),
	    CORE_REFUSED);
	CHECK_HAS(err, "host n2 is quarantined");
	CHECK_HAS(err, "GPU check failed on device 1 (alloc: "
	    "CUDA_ERROR_ECC_UNCORRECTABLE) in job j1");
	CHECK_HAS(err, "rdzvctl host clear n2");
	/* The change is there for the store and the hook until the turn
	 * ends. */
	CHECK_INT(C->hosts->n_changes, 1);
	hc = &C->hosts->changes[0];
	CHECK_STR(hc->name, "n2");
	CHECK_INT(hc->from, HOST_OK);
	CHECK_INT(hc->to, HOST_QUARANTINED);
	/* The gist, for the hook's RDZV_BRIEF and sinfo -R's 20 columns. */
	CHECK_STR(hc->brief, "GPU1 ECC_UNCORRECTABLE");
	CHECK(!TAILQ_EMPTY(&C->hosts->dirty));
	turn();
	CHECK_INT(C->hosts->n_changes, 0);
	CHECK(TAILQ_EMPTY(&C->hosts->dirty));

	const struct host *h = hosts_find(C->hosts, "n2");
	CHECK(h != NULL && h->n_gpus == 2 && h->gpu_failures == 1);
	CHECK(h != NULL && !h->gpus[1].ok &&
	    strcmp(h->gpus[1].error, "CUDA_ERROR_ECC_UNCORRECTABLE") == 0);
	CHECK_INT(C->hosts->n_state[HOST_QUARANTINED], 1);

	/* Another job, without GPU results: refused all the same. */
	r = req("j2", "n2", 1, 1, 1);
	join_req(&r, CORE_REFUSED);
	CHECK_HAS(err, "host n2 is quarantined");
	CHECK(core_job_find(C, "j2") == NULL);
	/* Other hosts join. */
	join("j2", "n3", 1, 1, 1);
	CHECK(core_job_find(C, "j2") != NULL);

	/* Cleared, the host's old results are gone: the same failure again
	 * is a new one and quarantines it again. */
	CHECK_INT(core_host_set(C, NOW, "root", true, "n2", HOST_OK, "swapped",
	    err, sizeof(err)), 0);
	turn();
	CHECK_INT(hosts_find(C->hosts, "n2")->n_gpus, 0);
	r = req("j3", "n2", 1, 1, 2);
	r.gpus = g;
	r.n_gpus = 2;
	join_req(&r, CORE_REFUSED);
	CHECK_HAS(err, "in job j3");
	CHECK_INT(hosts_find(C->hosts, "n2")->gpu_failures, 2);
	teardown();
}

/* Passing results of a host without a record make none: a join storm of
 * healthy nodes writes no host. */
static void
test_healthy_hosts_not_written(void)
{
	struct core_gpu		 good[2] = { gpu(0, true), gpu(1, true) };
	struct core_join	 r;
	char			 host[16];

	setup(NULL);
	for (int i = 0; i < 100; i++) {
		snprintf(host, sizeof(host), "h%03d", i);
		r = req("storm", host, 2, 100, 100);
		r.gpus = good;
		r.n_gpus = 2;
		CHECK_INT(core_join(C, NOW, &r, NULL, err, sizeof(err)), 0);
	}
	CHECK_INT(C->hosts->n, 0);
	CHECK(TAILQ_EMPTY(&C->hosts->dirty));
	turn();
	teardown();
}

/* The defaults mark a host and take nothing out of service. */
static void
test_defaults(void)
{
	struct core_gpu		 bad = gpu(0, false);
	struct core_join	 r;
	struct core_node	*n;

	setup(NULL);
	CHECK_INT(C->cfg.hosts.gpu_failure, HOST_GPU_SUSPECT);
	CHECK_INT(C->cfg.hosts.crash_window_ms, HOUR);
	r = req("j", "d", 1, 1, 1);
	r.gpus = &bad;
	r.n_gpus = 1;
	n = join_req(&r, 0);
	CHECK_INT(state_of("d"), HOST_SUSPECT);
	for (int i = 0; i < 5; i++) {
		n = join("k", "e", 1, 1, 1);
		CHECK_INT(crash_report(n, SIGSEGV, NULL), 0);
	}
	CHECK_INT(state_of("e"), HOST_SUSPECT);
	CHECK_INT(hosts_find(C->hosts, "e")->crashes, 5);
	teardown();
}

/* Under `host-gpu-failure = suspect` the host is marked and still runs;
 * passing results later do not hide the history. */
static void
test_gpu_failure_suspect(void)
{
	struct core_config	 cfg;
	struct core_gpu		 bad = gpu(0, false), good = gpu(0, true);
	struct core_join	 r;

	core_config_defaults(&cfg);
	cfg.hosts.gpu_failure = HOST_GPU_SUSPECT;
	setup(&cfg);
	r = req("j", "n1", 1, 1, 1);
	r.gpus = &bad;
	r.n_gpus = 1;
	CHECK(join_req(&r, 0) != NULL);
	CHECK_INT(state_of("n1"), HOST_SUSPECT);
	CHECK(job_has_event(core_job_find(C, "j"), "host",
	    "host n1 suspect: GPU check failed on device 0"));
	/* The same failure reported again (agents resend every result) is
	 * not a second one, and writes nothing. */
	r = req("j2", "n1", 1, 1, 1);
	r.gpus = &bad;
	r.n_gpus = 1;
	CHECK(core_join(C, NOW, &r, NULL, err, sizeof(err)) == 0);
	CHECK(TAILQ_EMPTY(&C->hosts->dirty));
	CHECK_INT(hosts_find(C->hosts, "n1")->gpu_failures, 1);
	turn();
	/* Its GPUs pass again and it crashed too little to be suspect: it
	 * is ok again; the same results once more write nothing. */
	r = req("k", "n1", 1, 1, 1);
	r.gpus = &good;
	r.n_gpus = 1;
	CHECK(core_join(C, NOW, &r, NULL, err, sizeof(err)) == 0);
	CHECK(!TAILQ_EMPTY(&C->hosts->dirty));
	CHECK_INT(state_of("n1"), HOST_OK);
	CHECK_HAS(hosts_find(C->hosts, "n1")->reason, "its GPUs pass");
	turn();
	r = req("l", "n1", 1, 1, 1);
	r.gpus = &good;
	r.n_gpus = 1;
	CHECK(core_join(C, NOW, &r, NULL, err, sizeof(err)) == 0);
	CHECK(TAILQ_EMPTY(&C->hosts->dirty));
	turn();
	CHECK_INT(hosts_find(C->hosts, "n1")->gpu_failures, 1);
	teardown();
}

/* Crashes across jobs within the window: 2 make the host suspect, 3
 * quarantined; crashes further apart than the window never add up, and a
 * suspect host is ok again at a join once its window is clear. */
static void
test_crash_window(void)
{
	struct core_config	 cfg;
	struct core_node	*a, *b;

	core_config_defaults(&cfg);
	cfg.hosts.quarantine_crashes = 3;
	setup(&cfg);
	a = join("j1", "h", 1, 1, 1);
	CHECK_INT(crash_report(a, SIGSEGV, NULL), 0);
	CHECK_INT(state_of("h"), HOST_OK);
	CHECK_INT(hosts_find(C->hosts, "h")->crashes, 1);
	/* A SIGTERM'd worker alone is no crash. */
	b = join("j2", "h", 1, 1, 1);
	CHECK_INT(crash_report(b, SIGTERM, NULL), 0);
	CHECK_INT(hosts_find(C->hosts, "h")->crashes, 1);

	/* Over an hour later: the first one no longer counts. */
	tick(HOUR + 1000);
	b = join("j3", "h", 1, 1, 1);
	CHECK_INT(crash_report(b, 0, "RuntimeError: CUDA error: unspecified "
	    "launch failure"), 0);
	CHECK_INT(state_of("h"), HOST_OK);
	tick(60 * 1000);
	b = join("j4", "h", 1, 1, 1);
	CHECK_INT(crash_report(b, SIGBUS, NULL), 0);
	CHECK_INT(state_of("h"), HOST_SUSPECT);
	CHECK_HAS(hosts_find(C->hosts, "h")->reason,
	    "2 worker crashes within 3600 s, the latest in job j4");
	CHECK(job_has_event(b->job, "host", "host h suspect: 2 worker "
	    "crashes"));

	/* Quiet for the window: the next join finds it ok again. */
	tick(HOUR);
	b = join("j5", "h", 1, 1, 1);
	CHECK_INT(state_of("h"), HOST_OK);
	CHECK_HAS(hosts_find(C->hosts, "h")->reason, "its GPUs pass and 0 "
	    "worker crashes within 3600 s");

	/* Three within the window: quarantined. */
	CHECK_INT(crash_report(b, SIGSEGV, NULL), 0);
	b = join("j6", "h", 1, 1, 1);
	CHECK_INT(crash_report(b, SIGSEGV, NULL), 0);
	b = join("j7", "h", 1, 1, 1);
	CHECK_INT(crash_report(b, SIGSEGV, NULL), 0);
	CHECK_INT(state_of("h"), HOST_QUARANTINED);
	CHECK_INT(hosts_find(C->hosts, "h")->crashes, 6);
	{
		struct core_join r = req("j8", "h", 1, 1, 1);
		join_req(&r, CORE_REFUSED);
		CHECK_HAS(err, "3 worker crashes within 3600 s");
	}
	teardown();
}

/* A host quarantined by a crash loses its nodes in every job: the job it
 * crashed in takes the spare, another job on it re-rounds without it. */
static void
test_quarantine_evicts_spare_takes_over(void)
{
	struct core_config	 cfg;
	struct core_join	 r;
	struct core_node	*a, *b, *spare, *other, *o2;
	struct core_job		*j;

	core_config_defaults(&cfg);
	cfg.hosts.quarantine_crashes = 1;
	setup(&cfg);
	r = req("train", "a", 2, 2, 2);
	r.settings.max_restarts = 3;
	a = join_req(&r, 0);
	r = req("train", "b", 2, 2, 2);
	b = join_req(&r, 0);
	r = req("train", "c", 2, 2, 2);
	spare = join_req(&r, 0);
	j = a->job;
	CHECK_INT(j->generation, 1);
	CHECK_INT(spare->state, CORE_NODE_SPARE);
	/* Host a also runs a node of an elastic job. */
	r = req("other", "a", 1, 1, 2);
	other = join_req(&r, 0);
	r = req("other", "d", 1, 1, 2);
	o2 = join_req(&r, 0);
	CHECK_INT(other->job->round_n, 2);

	CHECK_INT(crash_report(a, SIGSEGV, "Segmentation fault"), 0);
	CHECK_INT(state_of("a"), HOST_QUARANTINED);
	CHECK_INT(a->state, CORE_NODE_EVICTED);
	CHECK(last_is(a, CORE_MSG_EVICTED));
	CHECK_HAS(last_msg(a)->reason, "host a quarantined: 1 worker crash");
	/* The spare took its place in one new round; the failure counted. */
	CHECK_INT(j->generation, 2);
	CHECK_INT(j->restart_count, 1);
	CHECK_INT(spare->state, CORE_NODE_PARTICIPANT);
	CHECK_INT(b->state, CORE_NODE_PARTICIPANT);
	CHECK(job_has_event(j, "host", "host a quarantined"));
	CHECK(job_has_event(j, "evicted", "node a (node"));
	/* The other job goes on without host a. */
	CHECK_INT(other->state, CORE_NODE_EVICTED);
	CHECK_INT(o2->state, CORE_NODE_PARTICIPANT);
	CHECK(job_has_event(o2->job, "evicted", "host a quarantined"));
	teardown();
}

/* Only an admin clears or quarantines a host; a cleared host joins again;
 * an operator's quarantine evicts like the policy's. */
static void
test_admin_actions(void)
{
	struct core_node	*n;
	struct core_join	 r;

	setup(NULL);
	CHECK_INT(core_host_set(C, NOW, "alice", false, "x", HOST_QUARANTINED,
	    "flaky", err, sizeof(err)), CORE_DENIED);
	CHECK_HAS(err, "alice may not quarantine host x (only an admin may)");
	CHECK_INT(core_host_set(C, NOW, "root", true, "x", HOST_OK, "ok",
	    err, sizeof(err)), CORE_NOT_FOUND);
	CHECK_HAS(err, "no record of host x");
	CHECK_INT(core_host_set(C, NOW, "root", true, "", HOST_OK, "ok",
	    err, sizeof(err)), CORE_INVALID);

	n = join("j", "x", 1, 1, 1);
	CHECK_INT(core_host_set(C, NOW, "root", true, "x", HOST_QUARANTINED,
	    "bad DIMM", err, sizeof(err)), 0);
	CHECK_INT(C->hosts->n_changes, 1);
	CHECK_STR(C->hosts->changes[0].brief, "bad DIMM");
	turn();
	/* The same reason again is no change (the hook runs not again); a
	 * new one is. */
	CHECK_INT(core_host_set(C, NOW, "root", true, "x", HOST_QUARANTINED,
	    "bad DIMM", err, sizeof(err)), 0);
	CHECK_INT(C->hosts->n_changes, 0);
	CHECK_INT(core_host_set(C, NOW, "root", true, "x", HOST_QUARANTINED,
	    "bad DIMM and PSU", err, sizeof(err)), 0);
	CHECK_INT(C->hosts->n_changes, 1);
	CHECK_INT(C->hosts->changes[0].from, HOST_QUARANTINED);
	CHECK_STR(C->hosts->changes[0].brief, "bad DIMM and PSU");
	turn();
	CHECK_INT(n->state, CORE_NODE_EVICTED);
	CHECK_HAS(hosts_find(C->hosts, "x")->reason,
	    "quarantined by root: bad DIMM");
	r = req("k", "x", 1, 1, 1);
	join_req(&r, CORE_REFUSED);
	CHECK_HAS(err, "quarantined by root: bad DIMM");

	/* A host never seen may be quarantined ahead. */
	CHECK_INT(core_host_set(C, NOW, "root", true, "y", HOST_QUARANTINED,
	    "", err, sizeof(err)), 0);
	CHECK_HAS(hosts_find(C->hosts, "y")->reason, "no reason given");
	CHECK_STR(C->hosts->changes[0].brief, "quarantined by root");

	CHECK_INT(core_host_set(C, NOW, "root", true, "x", HOST_OK,
	    "DIMM replaced", err, sizeof(err)), 0);
	turn();
	CHECK_INT(state_of("x"), HOST_OK);
	CHECK_INT(C->hosts->n_state[HOST_QUARANTINED], 1);
	CHECK(join("k", "x", 1, 1, 1) != NULL);
	teardown();
}

/* A record restored from the store is as it was, and not dirty. */
static void
test_restore(void)
{
	struct host		 h;
	struct core_gpu		 g = { .device = 3, .ok = false,
				    .uuid = "GPU-3", .failed_step = "kernel",
				    .error = "CUDA_ERROR_LAUNCH_FAILED" };
	const struct host	*got;
	struct core_join	 r;

	setup(NULL);
	memset(&h, 0, sizeof(h));
	h.name = "r1";
	h.state = HOST_QUARANTINED;
	snprintf(h.reason, sizeof(h.reason), "from the store");
	h.since_ms = NOW.wall_ms - 5000;
	h.crashes = 7;
	h.n_crash = 2;
	h.crash_ms[0] = NOW.wall_ms - 2000;
	h.crash_ms[1] = NOW.wall_ms - 1000;
	h.gpus = &g;
	h.n_gpus = 1;
	hosts_restore(C->hosts, &h);
	CHECK(TAILQ_EMPTY(&C->hosts->dirty));
	got = hosts_find(C->hosts, "r1");
	CHECK(got != NULL && got->crashes == 7 && got->n_crash == 2 &&
	    got->n_gpus == 1 && got->gpus[0].device == 3 &&
	    strcmp(got->gpus[0].error, "CUDA_ERROR_LAUNCH_FAILED") == 0);
	CHECK_INT(C->hosts->n_state[HOST_QUARANTINED], 1);
	CHECK_INT(C->hosts->n_state[HOST_OK], 0);
	r = req("j", "r1", 1, 1, 1);
	join_req(&r, CORE_REFUSED);
	CHECK_HAS(err, "from the store");
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "crash_classes", test_crash_classes },
		{ "gpu_failure_quarantines", test_gpu_failure_quarantines },
		{ "gpu_failure_suspect", test_gpu_failure_suspect },
		{ "defaults", test_defaults },
		{ "healthy_hosts_not_written", test_healthy_hosts_not_written },
		{ "crash_window", test_crash_window },
		{ "quarantine_evicts_spare_takes_over",
		    test_quarantine_evicts_spare_takes_over },
		{ "admin_actions", test_admin_actions },
		{ "restore", test_restore },
	};
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
