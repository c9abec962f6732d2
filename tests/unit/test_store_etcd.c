/*
 * What only the etcd store has (docs/STORE.md, "The etcd layout"), on a
 * real etcd that with_etcd.py starts: fencing on the leader key, loading
 * again and again into fresh cores on one open store, the collection of
 * what an interrupted turn left, retention deleting a job's keys, a store
 * written by a newer rdzvd or by someone else refused, and the keys
 * themselves. test_store.c runs the common suite on both backends. Without
 * RDZV_TEST_ETCD it skips (exit 77).
 */
#include "store_harness.h"

#include "etcd.h"
#include "store_etcd.h"

static struct etcd	*E;		/* our own look at etcd */
static char		 prefix[256];	/* the store's, from spec */

/* The keys under PREFIX/sub now. */
static long
count(const char *sub)
{
	Etcdserverpb__RangeRequest	 r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse	*resp = NULL;
	char				 key[512];
	uint8_t				 end[512];
	long				 n = -1;

	snprintf(key, sizeof(key), "%s/%s", prefix, sub);
	r.key.data = (uint8_t *)key;
	r.key.len = strlen(key);
	r.range_end.data = end;
	r.range_end.len = etcd_prefix_end(key, strlen(key), end);
	r.count_only = 1;
	if (etcd_range_sync(E, &r, 5000, &resp, NULL) == CORE_OK)
		n = (long)resp->count;
	if (resp != NULL)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return n;
}

static int
put(const char *key, const void *val, size_t len)
{
	Etcdserverpb__PutRequest	p;

	etcd_put_init(&p, key, val, len, 0);
	return etcd_put_sync(E, &p, 5000, NULL, NULL);
}

static int
del(const char *key)
{
	Etcdserverpb__DeleteRangeRequest	d;

	etcd_delete_init(&d, key);
	return etcd_delete_range_sync(E, &d, 5000, NULL, NULL);
}

/* The create_revision of a key put now. */
static int64_t
put_rev(const char *key)
{
	Etcdserverpb__PutResponse	*resp = NULL;
	Etcdserverpb__PutRequest	 p;
	int64_t				 rev = 0;

	etcd_put_init(&p, key, "me", 2, 0);
	if (etcd_put_sync(E, &p, 5000, &resp, NULL) == CORE_OK &&
	    resp->header != NULL)
		rev = resp->header->revision;
	if (resp != NULL)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rev;
}

static void
etcd_setup(const char *name)
{
	setup(name);
	snprintf(prefix, sizeof(prefix), "%s", strchr(spec + 7, '/'));
}

/* The layout: a record, buckets and a log per job, meta once. */
static void
test_keys(void)
{
	struct core_node	*n;

	etcd_setup("keys");
	n = join("k", "h1", 2, 1, 1);
	CHECK_INT(count("meta"), 1);
	CHECK_INT(count("job/"), 1);
	CHECK_INT(count("job/k"), 1);
	CHECK_INT(count("node/k/"), 1);
	CHECK(count("log/k/") >= 1);
	report(n, CORE_OUTCOME_SUCCEEDED);
	/* One bucket still: the old version went with the new record. */
	CHECK_INT(count("node/k/"), 1);
	teardown();
}

/*
 * A fence holds while the leader key lives; once it is gone, the commit
 * fails saying so, and every later one, until the store is loaded again.
 */
static void
test_fence(void)
{
	struct core_join	 r;
	struct core		*L;
	char			 leader[300];
	int64_t			 rev, rev2;

	etcd_setup("fence");
	snprintf(leader, sizeof(leader), "%s/leader/1234", prefix);
	CHECK((rev = put_rev(leader)) > 0);
	CHECK_INT(store_fence(S, leader, rev), 0);
	CHECK_INT(store_fence(S, "", rev), -EINVAL);
	CHECK_INT(store_fence(S2, leader, rev), -ENOTSUP);
	CHECK_INT(store_kind_etcd(S), 1);
	CHECK_INT(store_kind_etcd(S2), 0);
	join("f1", "h1", 1, 1, 1);
	CHECK_INT(count("job/f1"), 1);

	/* The key is gone: nothing of the turn is written. */
	CHECK_INT(del(leader), CORE_OK);
	r = req("f2", "h2", 1, 1, 1);
	join_only(&r);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "leader key");
	CHECK_CONTAINS(err, "is gone");
	CHECK_CONTAINS(err, leader);
	CHECK_INT(count("job/f2"), 0);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "an earlier commit failed");

	/* A key created again is another leader's: "changed". */
	CHECK_INT(del(leader), CORE_OK);
	CHECK((rev2 = put_rev(leader)) > rev);
	core_free(C);
	C = core_new(NULL);
	CHECK_INT(store_load(S, C, NOW, err, sizeof(err)), 0);
	CHECK(core_job_find(C, "f1") != NULL && core_job_find(C, "f2") == NULL);
	r = req("f3", "h3", 1, 1, 1);
	join_only(&r);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "changed");
	CHECK_INT(count("job/f3"), 0);

	/* Loaded and fenced on the key as it is now, it writes again. */
	core_free(C);
	C = core_new(NULL);
	CHECK_INT(store_load(S, C, NOW, err, sizeof(err)), 0);
	CHECK_INT(store_fence(S, leader, rev2), 0);
	r = req("f3", "h3", 1, 1, 1);
	join_only(&r);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), 0);
	turn_send(false);
	CHECK_INT(count("job/f3"), 1);
	/* Unfenced, it writes whatever the key. */
	CHECK_INT(store_fence(S, NULL, 0), 0);
	CHECK_INT(del(leader), CORE_OK);
	r = req("f4", "h4", 1, 1, 1);
	join_only(&r);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), 0);
	turn_send(false);
	L = reload();
	CHECK(core_job_find(L, "f4") != NULL);
	core_free(L);
	teardown();
}

/*
 * A standby that becomes the leader loads into a fresh core, any number
 * of times, on the store it has had open all along; what another writer
 * committed meanwhile is there.
 */
static void
test_load_again(void)
{
	struct core	*L, *M;
	struct store	*other = NULL;
	struct core_join r;
	int		 i;

	etcd_setup("again");
	join("a1", "h1", 1, 2, 2);
	join("a1", "h2", 1, 2, 2);
	for (i = 0; i < 3; i++) {
		L = core_new(NULL);
		CHECK_INT(store_load(S, L, NOW, err, sizeof(err)), 0);
		compare_cores(C, L);
		core_free(L);
	}
	/* Another store on the same prefix writes (as a new leader would). */
	CHECK_INT(store_open(spec, &other, err, sizeof(err)), 0);
	M = core_new(NULL);
	CHECK_INT(store_load(other, M, NOW, err, sizeof(err)), 0);
	core_free(C);
	C = M;
	r = req("a2", "h3", 1, 1, 1);
	r.preload = "torch,numpy";	/* issue 45: kept in the job record */
	join_only(&r);
	CHECK_INT(store_commit(other, C, err, sizeof(err)), 0);
	turn_send(false);
	L = core_new(NULL);
	CHECK_INT(store_load(S, L, NOW, err, sizeof(err)), 0);
	compare_cores(C, L);
	CHECK_STR(core_job_find(L, "a2")->settings.preload, "torch,numpy");
	CHECK_INT(L->next_node_id, C->next_node_id);
	/* Loading into a core that has jobs is refused. */
	CHECK_INT(store_load(S, L, NOW, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "already has jobs");
	core_free(L);
	store_close(other);
	teardown();
}

/*
 * A turn cut short after a big job's new buckets and log went, before its
 * record: the next load sees the job as before and deletes the leftovers,
 * so that the version they were written under can be used again.
 */
static void
test_leftovers(void)
{
	struct core		*L;
	struct core_node	*n;
	char			 key[512];
	uint64_t		 wver;
	struct ejob		*ej;

	etcd_setup("left");
	n = join("lo", "h1", 1, 1, 1);
	ej = estore_job(store_backend(S), "lo", false);
	CHECK(ej != NULL);
	wver = ej != NULL ? ej->wver : 0;
	snprintf(key, sizeof(key), "%s/node/lo/%016llx/%08x", prefix,
	    (unsigned long long)wver + 1, 0);
	CHECK_INT(put(key, "\x0a\x00", 2), CORE_OK);
	snprintf(key, sizeof(key), "%s/log/lo/%016llx/0000", prefix,
	    (unsigned long long)wver + 1);
	CHECK_INT(put(key, "junk", 4), CORE_OK);
	/* And a stray bucket version no record names. */
	snprintf(key, sizeof(key), "%s/node/lo/%016llx/%08x", prefix,
	    (unsigned long long)wver - 0, 7);
	CHECK_INT(put(key, "", 0), CORE_OK);
	CHECK_INT(count("node/lo/"), 3);
	CHECK_INT(count("log/lo/"), (long)wver + 1);
	/* A reader (--migrate-store's FROM) leaves them to the writer. */
	{
		struct store_opts	 ro = { .read_only = 1 };
		struct store		*r = NULL;
		struct core		*R = core_new(NULL);
		struct core_join	 q = req("ro", "h9", 1, 1, 1);

		CHECK_INT(store_open_opts(spec, &ro, &r, err, sizeof(err)), 0);
		CHECK_INT(store_load(r, R, NOW, err, sizeof(err)), 0);
		compare_cores(C, R);
		CHECK_INT(count("node/lo/"), 3);
		CHECK_INT(count("log/lo/"), (long)wver + 1);
		CHECK_INT(core_join(R, NOW, &q, NULL, err, sizeof(err)), 0);
		CHECK_INT(store_commit(r, R, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "read only");
		store_close(r);
		core_free(R);
	}
	L = reload();
	compare_cores(C, L);
	CHECK_INT(count("node/lo/"), 1);
	CHECK_INT(count("log/lo/"), (long)wver);
	/* The version is written again, whole. */
	report(n, CORE_OUTCOME_SUCCEEDED);
	CHECK_INT(count("log/lo/"), (long)wver + 1);
	core_free(L);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/*
 * A 10,000-node job whose round forms again (a worker failed): every
 * bucket is rewritten, more than one Txn holds, the job's record names
 * only the new versions, and the old ones are gone.
 */
static void
test_big_rewrite(void)
{
	struct core_join	 r;
	struct core_node	*first = NULL, *n;
	struct core		*L;
	char			 host[32];
	uint64_t		 t0;
	int			 i;

	etcd_setup("big");
	for (i = 0; i < 10000; i++) {
		snprintf(host, sizeof(host), "gpu%05d.cluster", i);
		r = req("big", host, 8, 10000, 10000);
		r.settings.max_restarts = 3;
		r.settings.hang_timeout_ms = 90000;
		n = join_only(&r);
		if (first == NULL)
			first = n;
	}
	turn();
	CHECK_INT(core_job_find(C, "big")->generation, 1);
	CHECK_INT(count("node/big/"), (10000 + 127) / 128);
	t0 = store_transactions(S);
	report(first, CORE_OUTCOME_FAILED);
	CHECK_INT(core_job_find(C, "big")->restart_count, 1);
	CHECK_INT(core_job_find(C, "big")->generation, 2);
	/* Buckets and log, the record, then the old versions' deletions. */
	CHECK(store_transactions(S) - t0 >= 3);
	CHECK_INT(count("node/big/"), (10000 + 127) / 128);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/*
 * A small job keeps its nodes in one bucket, whatever their ids (many jobs
 * joining at once interleave them); past 128 nodes a job keeps them by id
 * range, and the one bucket goes.
 */
static void
test_bucket_ways(void)
{
	struct core_join	 r;
	struct core		*L;
	char			 id[32], host[32];
	uint64_t		 t0;
	int			 i, k;

	etcd_setup("ways");
	/* 50 jobs of 4, their joins interleaved: ids 1, 51, 101, 151 are
	 * one job's. */
	for (k = 0; k < 4; k++)
		for (i = 0; i < 50; i++) {
			snprintf(id, sizeof(id), "small-%d", i);
			snprintf(host, sizeof(host), "h%d-%d", i, k);
			r = req(id, host, 1, 4, 4);
			join_only(&r);
		}
	t0 = store_transactions(S);
	turn();
	/* Record, bucket, log: 3 ops a job, 42 jobs a Txn. */
	CHECK_INT(store_transactions(S) - t0, 2);
	CHECK_INT(count("node/small-7/"), 1);
	CHECK_INT(count("node/"), 50);

	/* One job grows past 128 nodes: by id range from then on. */
	for (i = 0; i < 100; i++) {
		snprintf(host, sizeof(host), "g%d", i);
		r = req("grows", host, 1, 300, 300);
		join_only(&r);
	}
	turn();
	CHECK_INT(count("node/grows/"), 1);
	for (i = 100; i < 200; i++) {
		snprintf(host, sizeof(host), "g%d", i);
		r = req("grows", host, 1, 300, 300);
		join_only(&r);
	}
	turn();
	/* Ids 201 to 400: buckets 1, 2 and 3 of 128 ids each. */
	CHECK_INT(count("node/grows/"), 3);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/* Retention: the record, the buckets and the log of the job go. */
static void
test_retention_keys(void)
{
	struct core_node	*n;

	etcd_setup("ret");
	n = join("old", "h1", 1, 1, 1);
	report(n, CORE_OUTCOME_SUCCEEDED);
	join("young", "h2", 1, 1, 1);
	CHECK(count("log/old/") > 0 && count("node/old/") > 0);
	tick(7ULL * 24 * 3600 * 1000 + 1000);
	CHECK(core_job_find(C, "old") == NULL);
	CHECK_INT(count("job/old"), 0);
	CHECK_INT(count("node/old/"), 0);
	CHECK_INT(count("log/old/"), 0);
	CHECK_INT(count("job/"), 1);
	teardown();
}

/* A prefix holding someone else's meta, or a newer rdzvd's, is refused. */
static void
test_refused(void)
{
	struct store	*s = NULL;
	char		 key[512];
	/* Meta { format = 9 } */
	static const uint8_t newer[] = { 0x08, 0x09 };

	etcd_setup("refused");
	teardown();
	snprintf(key, sizeof(key), "%s/meta", prefix);
	CHECK_INT(put(key, newer, sizeof(newer)), CORE_OK);
	CHECK_INT(store_open(spec, &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "format 9, newer than format 1");
	CHECK_CONTAINS(err, spec);
	CHECK_INT(put(key, "hello", 5), CORE_OK);
	CHECK_INT(store_open(spec, &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "not an rdzv store");
	CHECK(s == NULL);
	/* Nobody at that address: a clear error naming the store. */
	CHECK_INT(store_open("etcd://127.0.0.1:1/x", &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "etcd://127.0.0.1:1/x");
	/* Bad specs. */
	CHECK_INT(store_open("etcd://127.0.0.1:2379", &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "no key prefix");
	CHECK_INT(store_open("etcd://h/x", &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "is not HOST:PORT");
	/* Emptiness, as --migrate-store asks it. */
	etcd_setup("empty");
	CHECK_INT(store_is_empty(S, err, sizeof(err)), 1);
	join("e", "h", 1, 1, 1);
	CHECK_INT(store_is_empty(S, err, sizeof(err)), 0);
	CHECK_INT(store_is_empty(S2, err, sizeof(err)), 0);
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "keys", test_keys },
		{ "fence", test_fence },
		{ "load_again", test_load_again },
		{ "leftovers", test_leftovers },
		{ "retention_keys", test_retention_keys },
		{ "big_rewrite", test_big_rewrite },
		{ "bucket_ways", test_bucket_ways },
		{ "refused", test_refused },
	};
	struct etcd_opts	 o = { 0 };
	char			 e[256];
	const char		*ep = getenv("RDZV_TEST_ETCD");

	if (ep == NULL || *ep == '\0') {
		printf("SKIP: RDZV_TEST_ETCD is not set (run through "
		    "with_etcd.py)\n");
		return 77;
	}
	o.endpoints = ep;
	if (etcd_new(NULL, &o, &E, e, sizeof(e)) != 0) {
		fprintf(stderr, "etcd: %s\n", e);
		return 1;
	}
	int rc = run_tests("test_store_etcd", tests,
	    sizeof(tests) / sizeof(tests[0]), argc, argv);
	etcd_free(E);
	return rc;
}
