/*
 * Host records in the store (docs/HEALTH.md, docs/STORE.md "Hosts"), on
 * SQLite and, under with_etcd.py, on a real etcd: a record is written in
 * the same commit as the turn that changed it, nothing is written when
 * nothing about a host changed, and a store_load (a restart, a standby
 * that becomes the leader) brings every record back as it was, so that a
 * quarantined host stays refused.
 */
#include <signal.h>

#include "store_harness.h"

static const struct host *
host(const struct core *c, const char *name)
{
	return hosts_find(c->hosts, name);
}

static void
crash(struct core_node *n)
{
	struct core_exit	 ex = { -1, SIGSEGV };
	struct core_report	 r;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = n->job->generation;
	r.outcome = CORE_OUTCOME_FAILED;
	r.exits = &ex;
	r.n_exits = 1;
	CHECK_INT(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
}

static void
test_hosts_survive_a_reload(void)
{
	static const struct core_gpu gpus[2] = {
		{ .device = 0, .ok = true, .uuid = "GPU-0" },
		{ .device = 1, .ok = false, .uuid = "GPU-1",
		    .failed_step = "kernel", .error = "CUDA_ERROR_ECC_UNCORRECTABLE" },
	};
	struct core_join	 r;
	struct core_node	*n;
	const struct host	*h;
	struct core		*L;
	uint64_t		 t;

	setup("hosts.db");
	r = req("j1", "gpu-bad", 1, 1, 1);
	r.gpus = gpus;
	r.n_gpus = 2;
	join_only(&r);
	turn();
	/* A crash and the job's failure: one transaction. */
	n = join("j2", "crashy", 1, 1, 1);
	t = store_transactions(S);
	crash(n);
	turn();
	CHECK_INT(store_transactions(S), t + 1);
	/* An admin's quarantine alone is a transaction too. */
	CHECK_INT(core_host_set(C, NOW, "root", true, "drained",
	    HOST_QUARANTINED, "bad fan", err, sizeof(err)), 0);
	turn();
	CHECK_INT(store_transactions(S), t + 2);
	/* Nothing new about a host: no write. */
	turn();
	CHECK_INT(store_transactions(S), t + 2);

	L = reload();
	CHECK_INT(L->hosts->n, 3);
	CHECK_INT(L->hosts->n_state[HOST_SUSPECT], 1);
	CHECK_INT(L->hosts->n_state[HOST_QUARANTINED], 1);
	h = host(L, "gpu-bad");
	CHECK(h != NULL && h->state == HOST_SUSPECT);
	if (h != NULL) {
		CHECK_INT(h->gpu_failures, 1);
		CHECK_INT(h->n_gpus, 2);
		CHECK(h->n_gpus == 2 && h->gpus[0].ok && !h->gpus[1].ok);
		CHECK_STR(h->gpus[1].error, "CUDA_ERROR_ECC_UNCORRECTABLE");
		CHECK_STR(h->gpus[1].failed_step, "kernel");
		CHECK_STR(h->reason, host(C, "gpu-bad")->reason);
		CHECK_INT(h->since_ms, host(C, "gpu-bad")->since_ms);
	}
	h = host(L, "crashy");
	CHECK(h != NULL && h->crashes == 1 && h->n_crash == 1 &&
	    h->crash_ms[0] == NOW.wall_ms && h->state == HOST_OK);
	h = host(L, "drained");
	CHECK(h != NULL && h->state == HOST_QUARANTINED);
	if (h != NULL)
		CHECK_STR(h->reason, "quarantined by root: bad fan");
	core_free(C);
	C = L;

	/* The loaded core refuses the quarantined host, and a second crash
	 * within the hour counts with the one before the reload. */
	r = req("j3", "drained", 1, 1, 1);
	CHECK_INT(core_join(C, NOW, &r, NULL, err, sizeof(err)),
	    CORE_REFUSED);
	CHECK(strstr(err, "quarantined by root: bad fan") != NULL);
	tick(60 * 1000);
	n = join("j4", "crashy", 1, 1, 1);
	crash(n);
	turn();
	CHECK_INT(host(C, "crashy")->state, HOST_SUSPECT);
	CHECK_INT(host(C, "crashy")->n_crash, 2);

	/* Cleared, and the clearing survives too. */
	CHECK_INT(core_host_set(C, NOW, "root", true, "drained", HOST_OK,
	    "fan replaced", err, sizeof(err)), 0);
	turn();
	L = reload();
	CHECK(host(L, "drained") != NULL &&
	    host(L, "drained")->state == HOST_OK);
	CHECK(host(L, "crashy") != NULL && host(L, "crashy")->n_crash == 2);
	core_free(L);
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "hosts_survive_a_reload", test_hosts_survive_a_reload },
	};

	return run_tests("test_store_hosts", tests,
	    sizeof(tests) / sizeof(tests[0]), argc, argv);
}
