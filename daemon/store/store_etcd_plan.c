/*
 * The Txn planner of the etcd store (store_etcd_plan.h). Next-fit packing: a
 * turn's jobs come in the core's order and each Txn is filled before the
 * next is opened, which is linear and wastes at most one Txn's room per
 * phase compared with a best fit; what matters is that no Txn is ever over
 * a limit and that a job's FINAL part is never split.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "store_etcd_plan.h"

struct packer {
	struct plan_txn		*txns;
	size_t			 n, cap;
	const struct plan_limits *lim;
	size_t			 open[4];	/* per phase: the Txn being
						   filled, or SIZE_MAX */
};

static bool
room(const struct packer *p, const struct plan_txn *t, uint32_t ops,
    size_t bytes)
{
	return t->ops + ops + p->lim->txn_ops <= p->lim->max_ops &&
	    t->bytes + bytes + p->lim->txn_bytes <= p->lim->max_bytes;
}

/* The Txn of |phase| that takes |ops| more operations of |bytes|. */
static int
place(struct packer *p, int phase, uint32_t ops, size_t bytes, uint32_t *out)
{
	struct plan_txn	*t;

	if (p->open[phase] != SIZE_MAX &&
	    room(p, &p->txns[p->open[phase]], ops, bytes)) {
		t = &p->txns[p->open[phase]];
	} else {
		if (p->n == p->cap) {
			size_t	 cap = p->cap != 0 ? p->cap * 2 : 16;
			void	*v = reallocarray(p->txns, cap, sizeof(*t));

			if (v == NULL)
				return -ENOMEM;
			p->txns = v;
			p->cap = cap;
		}
		t = &p->txns[p->n];
		t->phase = phase;
		t->ops = 0;
		t->bytes = 0;
		p->open[phase] = p->n++;
	}
	t->ops += ops;
	t->bytes += bytes;
	*out = (uint32_t)(t - p->txns);
	return 0;
}

/* Txn numbers by phase: phase 1's first, then 2's, then 3's. */
static int
renumber(struct packer *p, struct plan_op *ops, size_t n)
{
	uint32_t	*map, k = 0;
	struct plan_txn	*sorted;

	if ((map = calloc(p->n + 1, sizeof(*map))) == NULL ||
	    (sorted = calloc(p->n + 1, sizeof(*sorted))) == NULL) {
		free(map);
		return -ENOMEM;
	}
	for (int phase = 1; phase <= 3; phase++)
		for (size_t i = 0; i < p->n; i++)
			if (p->txns[i].phase == phase) {
				map[i] = k;
				sorted[k++] = p->txns[i];
			}
	for (size_t i = 0; i < n; i++)
		ops[i].txn = map[ops[i].txn];
	free(p->txns);
	free(map);
	p->txns = sorted;
	return 0;
}

int
store_plan(struct plan_op *ops, size_t n, const struct plan_limits *lim,
    struct plan_txn **txns, size_t *n_txns, size_t *bad)
{
	struct packer	 p = { .lim = lim };
	size_t		 i, j, k, first_final;
	uint32_t	 nops, fops;
	size_t		 bytes, fbytes;
	int		 rc;

	*txns = NULL;
	*n_txns = 0;
	*bad = 0;
	if (lim->txn_ops >= lim->max_ops || lim->txn_bytes >= lim->max_bytes)
		return -EINVAL;
	for (k = 0; k < 4; k++)
		p.open[k] = SIZE_MAX;
	for (i = 0; i < n; i = j) {
		/* The job's ops are i..j-1. */
		nops = fops = 0;
		bytes = fbytes = 0;
		first_final = SIZE_MAX;
		for (j = i; j < n && ops[j].job == ops[i].job; j++) {
			if (ops[j].bytes + lim->txn_bytes > lim->max_bytes) {
				*bad = j;
				rc = -E2BIG;
				goto fail;
			}
			nops++;
			bytes += ops[j].bytes;
			if (ops[j].part == PLAN_FINAL) {
				fops++;
				fbytes += ops[j].bytes;
				if (first_final == SIZE_MAX)
					first_final = j;
			}
		}
		if (nops + lim->txn_ops <= lim->max_ops &&
		    bytes + lim->txn_bytes <= lim->max_bytes) {
			uint32_t t;

			if ((rc = place(&p, 2, nops, bytes, &t)) != 0)
				goto fail;
			for (k = i; k < j; k++)
				ops[k].txn = t;
			continue;
		}
		if (fops + lim->txn_ops > lim->max_ops ||
		    fbytes + lim->txn_bytes > lim->max_bytes) {
			*bad = first_final;
			rc = -E2BIG;
			goto fail;
		}
		/* Split: the FINAL part whole in one Txn of its own phase. */
		uint32_t ft = UINT32_MAX;
		for (k = i; k < j; k++) {
			if (ops[k].part == PLAN_FINAL) {
				if (ft == UINT32_MAX && (rc = place(&p, 2, fops,
				    fbytes, &ft)) != 0)
					goto fail;
				ops[k].txn = ft;
				continue;
			}
			if ((rc = place(&p, ops[k].part == PLAN_PRE ? 1 : 3, 1,
			    ops[k].bytes, &ops[k].txn)) != 0)
				goto fail;
		}
	}
	if ((rc = renumber(&p, ops, n)) != 0)
		goto fail;
	*txns = p.txns;
	*n_txns = p.n;
	return 0;

fail:
	free(p.txns);
	return rc;
}
