/*
 * Packing one turn's writes into etcd Txns within etcd's limits (128
 * operations per Txn, 1.5 MiB per request), as a pure function so that the
 * limits can be tested without an etcd (tests/unit/test_store_plan.c).
 *
 * The input is every operation of the turn, grouped by job, each marked
 * with its part of the job's change:
 *   PRE    new values no one reads yet (a node bucket's new version, the
 *          turn's log chunks): harmless if the turn stops after them;
 *   FINAL  the job record, which makes the PRE values the job's (or the
 *          deletion of a job): the point where the change happens;
 *   POST   deletions of values the FINAL part made unreachable (older
 *          bucket versions): garbage, collected at the next load if lost.
 * A job whose operations fit one Txn goes whole into one Txn, next to other
 * jobs (phase 2). A bigger job has its PRE operations spread over Txns of
 * phase 1, its FINAL part in one Txn of phase 2, its POST part in phase 3.
 * Phases run one after the other; the Txns of a phase may run at once.
 */
#ifndef RDZV_STORE_PLAN_H
#define RDZV_STORE_PLAN_H

#include <stddef.h>
#include <stdint.h>

enum plan_part {
	PLAN_PRE = 0,
	PLAN_FINAL = 1,
	PLAN_POST = 2,
};

struct plan_limits {
	uint32_t	max_ops;	/* per Txn: etcd --max-txn-ops */
	size_t		max_bytes;	/* per request: --max-request-bytes */
	uint32_t	txn_ops;	/* ops every Txn carries besides */
	size_t		txn_bytes;	/* bytes every Txn carries besides */
};

/* One operation: filled by the caller except txn. */
struct plan_op {
	uint32_t	job;		/* ops of a job are next to each other */
	enum plan_part	part;
	size_t		bytes;		/* what it adds to the request */
	uint32_t	txn;		/* out: index into the Txns */
};

struct plan_txn {
	int		phase;		/* 1, 2 or 3 */
	uint32_t	ops;
	size_t		bytes;
};

/*
 * Assigns every op a Txn. *txns (malloc'd, the caller frees it) gets the
 * Txns in phase order, *n_txns their number. 0; -E2BIG when one operation,
 * or a job's FINAL part, exceeds a Txn, with *bad the index of the op (or
 * of the FINAL part's first op); -ENOMEM; -EINVAL when the limits leave no
 * room.
 */
int	store_plan(struct plan_op *ops, size_t n, const struct plan_limits *,
	    struct plan_txn **txns, size_t *n_txns, size_t *bad);

#endif
