/*
 * The etcd store's Txn planner (daemon/store/store_etcd_plan.c) at etcd's default
 * limits, on the shapes SPEC §14 names (a 10,000-node job, 1,000 jobs of 8
 * nodes joining in one turn) with the sizes the store really writes, and on
 * random turns. Every plan is checked for what the store relies on: no Txn
 * over 128 operations or 1.5 MiB, a job that fits one Txn whole in one Txn,
 * a bigger job's record (FINAL) whole in one Txn after all of its new
 * values (PRE) and before the deletions of its old ones (POST).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "rng.h"
#include "store_etcd_plan.h"

#define MIB		(1024 * 1024)
#define MAX_OPS		128
#define MAX_BYTES	(1536 * 1024)

static const struct plan_limits lim = {
	.max_ops = MAX_OPS,
	.max_bytes = MAX_BYTES,
	.txn_ops = 1,		/* the meta put */
	.txn_bytes = 4096,	/* fence, meta, framing */
};

struct turn {
	struct plan_op	*ops;
	size_t		 n, cap;
	uint32_t	 jobs;
};

static void
op(struct turn *t, enum plan_part part, size_t bytes)
{
	if (t->n == t->cap) {
		t->cap = t->cap != 0 ? t->cap * 2 : 1024;
		t->ops = reallocarray(t->ops, t->cap, sizeof(*t->ops));
		if (t->ops == NULL)
			abort();
	}
	t->ops[t->n].job = t->jobs;
	t->ops[t->n].part = part;
	t->ops[t->n].bytes = bytes;
	t->ops[t->n].txn = UINT32_MAX;
	t->n++;
}

/*
 * A job as the store writes it: |buckets| node buckets of |bucket_bytes|
 * each (and as many old versions to delete when |old|), |log| bytes of
 * events and rounds in chunks of at most 256 KiB, and its record.
 */
static void
job(struct turn *t, size_t buckets, size_t bucket_bytes, size_t log, bool old)
{
	size_t	i;

	for (i = 0; i < buckets; i++)
		op(t, PLAN_PRE, bucket_bytes + 80);
	for (; log > 0; log -= log > 256 * 1024 ? 256 * 1024 : log)
		op(t, PLAN_PRE, (log > 256 * 1024 ? 256 * 1024 : log) + 80);
	op(t, PLAN_FINAL, 300 + 16 * buckets);
	for (i = 0; old && i < buckets; i++)
		op(t, PLAN_POST, 80);
	t->jobs++;
}

/* A removed job: its record and two prefixes, all FINAL. */
static void
removal(struct turn *t)
{
	op(t, PLAN_FINAL, 60);
	op(t, PLAN_FINAL, 60);
	op(t, PLAN_FINAL, 60);
	t->jobs++;
}

/* Checks a plan against everything the store relies on. */
static void
verify(const struct turn *t, const struct plan_txn *tx, size_t ntx)
{
	uint32_t	*ops = calloc(ntx + 1, sizeof(*ops));
	size_t		*bytes = calloc(ntx + 1, sizeof(*bytes));
	size_t		 i, j, k;

	CHECK(ops != NULL && bytes != NULL);
	for (i = 1; i < ntx; i++)
		CHECK(tx[i - 1].phase <= tx[i].phase);
	for (i = 0; i < t->n; i++) {
		CHECK(t->ops[i].txn < ntx);
		if (t->ops[i].txn >= ntx)
			goto out;
		ops[t->ops[i].txn]++;
		bytes[t->ops[i].txn] += t->ops[i].bytes;
	}
	for (i = 0; i < ntx; i++) {
		CHECK(ops[i] + lim.txn_ops <= MAX_OPS);
		CHECK(bytes[i] + lim.txn_bytes <= MAX_BYTES);
		CHECK_INT(ops[i], tx[i].ops);
		CHECK_INT(bytes[i], tx[i].bytes);
		CHECK(ops[i] > 0);
	}
	for (i = 0; i < t->n; i = j) {
		uint32_t nops = 0, final_txn = UINT32_MAX;
		size_t sz = 0;
		bool whole = true;

		for (j = i; j < t->n && t->ops[j].job == t->ops[i].job; j++) {
			nops++;
			sz += t->ops[j].bytes;
			whole &= t->ops[j].txn == t->ops[i].txn;
		}
		/* What fits one Txn is in one Txn. */
		if (nops + lim.txn_ops <= MAX_OPS &&
		    sz + lim.txn_bytes <= MAX_BYTES) {
			CHECK(whole);
			continue;
		}
		for (k = i; k < j; k++) {
			if (t->ops[k].part != PLAN_FINAL)
				continue;
			if (final_txn == UINT32_MAX)
				final_txn = t->ops[k].txn;
			CHECK_INT(t->ops[k].txn, final_txn);
		}
		for (k = i; k < j; k++) {
			if (t->ops[k].part == PLAN_PRE)
				CHECK(tx[t->ops[k].txn].phase <
				    tx[final_txn].phase);
			if (t->ops[k].part == PLAN_POST)
				CHECK(tx[t->ops[k].txn].phase >
				    tx[final_txn].phase);
		}
	}
out:
	free(ops);
	free(bytes);
}

static size_t
plan(struct turn *t, struct plan_txn **tx)
{
	size_t	ntx = 0, bad = 0;

	CHECK_INT(store_plan(t->ops, t->n, &lim, tx, &ntx, &bad), 0);
	verify(t, *tx, ntx);
	return ntx;
}

/* 1,000 jobs of 8 nodes, all created and completing a round in one turn. */
static void
test_thousand_jobs(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx;
	size_t		 ntx, i;

	for (i = 0; i < 1000; i++)
		/* One bucket of 8 nodes, 8 joins + created + round events and
		 * the round: about 1.5 KiB of log. */
		job(&t, 1, 8 * 90, 1500, false);
	ntx = plan(&t, &tx);
	/* 3 ops per job, 127 per Txn: 42 jobs per Txn. */
	CHECK_INT(ntx, (1000 + 41) / 42);
	for (i = 0; i < ntx; i++)
		CHECK_INT(tx[i].phase, 2);
	printf("figure: 1,000 jobs x 8 nodes: %zu Txns\n", ntx);
	free(tx);
	free(t.ops);
}

/* A 10,000-node job whose round completes: every bucket rewritten. */
static void
test_ten_thousand_nodes(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx;
	size_t		 ntx, i, phase[4] = { 0 };

	/* 10,000 / 128 buckets of 128 nodes of ~100 bytes; 10,000 join
	 * events of ~90 bytes and a round of 10,000 members. */
	job(&t, 79, 128 * 100, 10000 * 90 + 10000 * 14, true);
	ntx = plan(&t, &tx);
	for (i = 0; i < ntx; i++)
		phase[tx[i].phase]++;
	CHECK(phase[1] >= 2);
	CHECK_INT(phase[2], 1);
	CHECK_INT(phase[3], 1);
	printf("figure: one 10,000-node job: %zu Txns (%zu + %zu + %zu by "
	    "phase)\n", ntx, phase[1], phase[2], phase[3]);
	free(tx);
	free(t.ops);
}

/* Both at once, with removals: the small jobs still go whole. */
static void
test_mixed(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx;
	size_t		 i;

	for (i = 0; i < 300; i++) {
		job(&t, 1, 700, 1500, i % 2 == 0);
		if (i % 50 == 0)
			removal(&t);
		if (i == 150)
			job(&t, 79, 128 * 100, 1140000, true);
	}
	plan(&t, &tx);
	free(tx);
	free(t.ops);
}

/* The edges: 127 ops fit beside the meta put, 128 do not. */
static void
test_op_limit(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx;
	size_t		 i;

	for (i = 0; i < 126; i++)
		op(&t, PLAN_PRE, 100);
	op(&t, PLAN_FINAL, 100);
	t.jobs++;
	CHECK_INT(plan(&t, &tx), 1);
	free(tx);
	t.n = 0;
	for (i = 0; i < 127; i++)
		op(&t, PLAN_PRE, 100);
	op(&t, PLAN_FINAL, 100);
	CHECK_INT(plan(&t, &tx), 2);	/* PRE in one, FINAL in one */
	free(tx);
	free(t.ops);
}

/* What cannot be written is refused, naming the op. */
static void
test_too_big(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx = NULL;
	size_t		 ntx, bad;

	op(&t, PLAN_PRE, 100);
	op(&t, PLAN_PRE, MAX_BYTES);
	op(&t, PLAN_FINAL, 100);
	CHECK_INT(store_plan(t.ops, t.n, &lim, &tx, &ntx, &bad), -E2BIG);
	CHECK_INT(bad, 1);
	CHECK(tx == NULL);
	/* A FINAL part over 127 ops: a record cannot be split. */
	t.n = 0;
	for (int i = 0; i < 200; i++)
		op(&t, PLAN_FINAL, 10);
	CHECK_INT(store_plan(t.ops, t.n, &lim, &tx, &ntx, &bad), -E2BIG);
	CHECK_INT(bad, 0);
	struct plan_limits none = lim;
	none.txn_ops = MAX_OPS;
	CHECK_INT(store_plan(t.ops, t.n, &none, &tx, &ntx, &bad), -EINVAL);
	/* Nothing to write: no Txn. */
	CHECK_INT(store_plan(t.ops, 0, &lim, &tx, &ntx, &bad), 0);
	CHECK_INT(ntx, 0);
	free(tx);
	free(t.ops);
}

/* Random turns: any mix of job sizes keeps every rule. */
static void
test_random(void)
{
	struct turn	 t = { 0 };
	struct plan_txn	*tx;

	rng_state = 0x5eed;
	for (int round = 0; round < 200; round++) {
		t.n = 0;
		t.jobs = 0;
		int jobs = 1 + (int)(rng() % 300);
		for (int i = 0; i < jobs; i++) {
			if (rng() % 20 == 0)
				removal(&t);
			else if (rng() % 50 == 0)
				job(&t, 1 + rng() % 90, 1000 + rng() % 20000,
				    rng() % (2 * MIB), rng() % 2);
			else
				job(&t, 1 + rng() % 4, 100 + rng() % 3000,
				    rng() % 4000, rng() % 2);
		}
		plan(&t, &tx);
		free(tx);
	}
	free(t.ops);
}

int
main(void)
{
	test_thousand_jobs();
	test_ten_thousand_nodes();
	test_mixed();
	test_op_limit();
	test_too_big();
	test_random();
	return check_done("test_store_plan");
}
