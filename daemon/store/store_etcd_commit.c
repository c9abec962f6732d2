/*
 * Committing a loop turn to etcd (SPEC §9, §14). Every job the turn touched
 * is written whole: its node buckets that changed under a new version, the
 * turn's events and rounds as log chunks of that version, then its record
 * naming the new version, then deletions of the bucket versions it no
 * longer names. store_plan() packs this into Txns within etcd's limits,
 * each job in one Txn where it fits; the Txns of a phase go out at once,
 * and store_commit() returns only when all of them have committed. A
 * failure of any Txn (etcd's error, or a fence whose leader key is gone)
 * breaks the store until the next load: jobs are each whole, but the turn
 * may be in etcd in part, and nothing of it was acknowledged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_etcd.h"

enum wop_kind {
	WOP_PUT,
	WOP_DEL,
	WOP_DEL_PREFIX,
};

/* One write of the turn, before it is placed in a Txn. */
struct wop {
	enum wop_kind	 kind;
	char		*key;
	uint8_t		*val;		/* owned */
	size_t		 len;
};

struct turn {
	struct estore		 *s;
	struct core		 *c;
	struct wop		 *w;
	struct plan_op		 *p;
	size_t			  n, cap;
	uint32_t		  job;		/* ordinal of the job in hand */
	struct core_job		**jobs;		/* touched, in order */
	size_t			  njobs, jobs_cap;
	struct core_job		**again;	/* removed, and alive again */
	size_t			  nagain;
};

/* A bucket a node of a touched job is in, changed this turn. */
struct touch {
	uint32_t	ord;
	uint64_t	index;
};

static int
add(struct turn *t, enum plan_part part, enum wop_kind kind, const char *key,
    uint8_t *val, size_t len)
{
	if (t->n == t->cap) {
		size_t	 cap = t->cap != 0 ? t->cap * 2 : 256;
		void	*w = reallocarray(t->w, cap, sizeof(*t->w));
		void	*p;

		if (w == NULL)
			goto nomem;
		t->w = w;
		if ((p = reallocarray(t->p, cap, sizeof(*t->p))) == NULL)
			goto nomem;
		t->p = p;
		t->cap = cap;
	}
	if ((t->w[t->n].key = strdup(key)) == NULL)
		goto nomem;
	t->w[t->n].kind = kind;
	t->w[t->n].val = val;
	t->w[t->n].len = len;
	t->p[t->n].job = t->job;
	t->p[t->n].part = part;
	/* A RequestOp's framing and the key's and value's own. */
	t->p[t->n].bytes = strlen(key) + len + 16;
	t->p[t->n].txn = 0;
	t->n++;
	return 0;
nomem:
	free(val);
	return -1;
}

static void
etcd_turn_free(struct turn *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->w[i].key);
		free(t->w[i].val);
	}
	free(t->w);
	free(t->p);
	free(t->jobs);
	free(t->again);
}

/* Adds |j| to the turn's jobs once. */
static int
touch_job(struct turn *t, struct core_job *j)
{
	struct ejob	*ej;

	if (j->removed)
		return 0;
	if ((ej = estore_job(t->s, j->rdzv_id, true)) == NULL)
		return -1;
	if (ej->touched)
		return 0;
	if (t->njobs == t->jobs_cap) {
		size_t	 cap = t->jobs_cap != 0 ? t->jobs_cap * 2 : 64;
		void	*v = reallocarray(t->jobs, cap, sizeof(*t->jobs));

		if (v == NULL)
			return -1;
		t->jobs = v;
		t->jobs_cap = cap;
	}
	ej->touched = true;
	ej->ord = (uint32_t)t->njobs;
	t->jobs[t->njobs++] = j;
	return 0;
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
touch_cmp(const void *a, const void *b)
{
	const struct touch	*x = a, *y = b;

	if (x->ord != y->ord)
		return x->ord < y->ord ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * Sets bucket |index| of the job to version |ver| (0: the bucket is gone);
 * returns the version it had, 0 when none, or -1 on ENOMEM.
 */
static int64_t
bucket_set(struct ejob *ej, uint64_t index, uint64_t ver)
{
	size_t		 i;
	uint64_t	 old;
	void		*a, *b;

	for (i = 0; i < ej->nb && ej->bidx[i] < index; i++)
		;
	if (i < ej->nb && ej->bidx[i] == index) {
		old = ej->bver[i];
		if (ver != 0) {
			ej->bver[i] = ver;
		} else {
			memmove(&ej->bidx[i], &ej->bidx[i + 1],
			    (ej->nb - i - 1) * sizeof(*ej->bidx));
			memmove(&ej->bver[i], &ej->bver[i + 1],
			    (ej->nb - i - 1) * sizeof(*ej->bver));
			ej->nb--;
		}
		return (int64_t)old;
	}
	if (ver == 0)
		return 0;
	if ((a = reallocarray(ej->bidx, ej->nb + 1, sizeof(*ej->bidx))) ==
	    NULL)
		return -1;
	ej->bidx = a;
	if ((b = reallocarray(ej->bver, ej->nb + 1, sizeof(*ej->bver))) ==
	    NULL)
		return -1;
	ej->bver = b;
	memmove(&ej->bidx[i + 1], &ej->bidx[i], (ej->nb - i) *
	    sizeof(*ej->bidx));
	memmove(&ej->bver[i + 1], &ej->bver[i], (ej->nb - i) *
	    sizeof(*ej->bver));
	ej->bidx[i] = index;
	ej->bver[i] = ver;
	ej->nb++;
	return 0;
}

static bool
bucket_has_nodes(const struct core_job *j, uint64_t index)
{
	const struct core_node	*n;

	TAILQ_FOREACH(n, &j->nodes, entry)
		if (index == STORE_ETCD_BUCKET_ALL ||
		    n->node_id / STORE_ETCD_BUCKET == index)
			return true;
	return false;
}

/*
 * Which buckets of the job this turn rewrites (or finds empty). A job of
 * at most STORE_ETCD_BUCKET nodes keeps them all in one bucket, so that
 * small jobs whose node ids interleave (many jobs joining at once) cost
 * one bucket each; a bigger one keeps them by node_id / STORE_ETCD_BUCKET,
 * so that a turn touching a few of its nodes rewrites a few buckets. When
 * a job crosses from one way to the other, every bucket of the old way is
 * dropped and every bucket of the new way written. *out (malloc'd) gets
 * the indices, sorted and unique.
 */
static int
job_buckets(const struct core_job *j, const struct ejob *ej,
    const struct touch *tb, size_t ntb, uint64_t **out, size_t *nout)
{
	const struct core_node	*n;
	bool			 single = j->n_nodes <= STORE_ETCD_BUCKET;
	bool			 was_single = ej->nb == 1 &&
				    ej->bidx[0] == STORE_ETCD_BUCKET_ALL;
	uint64_t		*v;
	size_t			 k = 0, cap, i;

	cap = ej->nb + ntb + (single ? 1 : j->n_nodes) + 1;
	if ((v = calloc(cap, sizeof(*v))) == NULL)
		return -1;
	if (single) {
		/* Every old bucket of the other way goes. */
		for (i = 0; i < ej->nb; i++)
			if (ej->bidx[i] != STORE_ETCD_BUCKET_ALL)
				v[k++] = ej->bidx[i];
		if (ntb > 0 || k > 0 || (ej->nb == 0 && j->n_nodes > 0))
			v[k++] = STORE_ETCD_BUCKET_ALL;
	} else if (was_single || ej->nb == 0) {
		v[k++] = STORE_ETCD_BUCKET_ALL;
		TAILQ_FOREACH(n, &j->nodes, entry)
			v[k++] = n->node_id / STORE_ETCD_BUCKET;
		for (i = 0; i < ntb; i++)
			v[k++] = tb[i].index;
	} else {
		for (i = 0; i < ntb; i++)
			v[k++] = tb[i].index;
	}
	qsort(v, k, sizeof(*v), u64_cmp);
	for (i = 0, cap = 0; i < k; i++)
		if (cap == 0 || v[i] != v[cap - 1])
			v[cap++] = v[i];
	*out = v;
	*nout = cap;
	return 0;
}

/*
 * Whether bucket |index| holds nodes of the job the way the job keeps them
 * now: the one bucket of a small job, or an id range of a big one.
 */
static bool
bucket_live(const struct core_job *j, uint64_t index)
{
	bool	single = j->n_nodes <= STORE_ETCD_BUCKET;

	if (single != (index == STORE_ETCD_BUCKET_ALL))
		return false;
	return bucket_has_nodes(j, index);
}

/* The writes of one touched job: buckets, log, record, old buckets. */
static int
job_writes(struct turn *t, struct core_job *j, const struct touch *tb,
    size_t ntb)
{
	struct estore	*s = t->s;
	struct ejob	*ej = estore_job(s, j->rdzv_id, false);
	char		 key[STORE_ETCD_KEY_MAX];
	uint64_t	 ver = ej->wver + 1, *old = NULL, *idx = NULL;
	uint8_t		*buf, **chunks;
	size_t		 len, *lens, nch, i, nidx;
	int64_t		 was;

	if (job_buckets(j, ej, tb, ntb, &idx, &nidx) != 0 ||
	    (old = calloc(nidx + 1, sizeof(*old))) == NULL)
		goto nomem;
	for (i = 0; i < nidx; i++) {
		if (!bucket_live(j, idx[i])) {
			if ((was = bucket_set(ej, idx[i], 0)) < 0)
				goto nomem;
			old[i] = (uint64_t)was;
			continue;
		}
		if ((buf = enc_bucket(j, idx[i], &len)) == NULL)
			goto nomem;
		estore_key(s, key, "node/%s/%016llx/%08llx", j->rdzv_id,
		    (unsigned long long)ver, (unsigned long long)idx[i]);
		if (add(t, PLAN_PRE, WOP_PUT, key, buf, len) != 0 ||
		    (was = bucket_set(ej, idx[i], ver)) < 0)
			goto nomem;
		old[i] = (uint64_t)was;
	}
	if (enc_log(t->c, j, &chunks, &lens, &nch) != 0)
		goto nomem;
	for (i = 0; i < nch; i++) {
		estore_key(s, key, "log/%s/%016llx/%04zx", j->rdzv_id,
		    (unsigned long long)ver, i);
		if (add(t, PLAN_PRE, WOP_PUT, key, chunks[i], lens[i]) != 0) {
			chunks[i] = NULL;
			enc_chunks_free(chunks, lens, nch);
			goto nomem;
		}
		chunks[i] = NULL;
	}
	enc_chunks_free(chunks, lens, nch);
	ej->wver = ver;
	if ((buf = enc_job(j, ej, &len)) == NULL)
		goto nomem;
	estore_key(s, key, "job/%s", j->rdzv_id);
	if (add(t, PLAN_FINAL, WOP_PUT, key, buf, len) != 0)
		goto nomem;
	for (i = 0; i < nidx; i++) {
		if (old[i] == 0)
			continue;
		estore_key(s, key, "node/%s/%016llx/%08llx", j->rdzv_id,
		    (unsigned long long)old[i], (unsigned long long)idx[i]);
		if (add(t, PLAN_POST, WOP_DEL, key, NULL, 0) != 0)
			goto nomem;
	}
	free(old);
	free(idx);
	return 0;
nomem:
	free(old);
	free(idx);
	return -1;
}

/* The deletion of a removed job: its record, buckets and log. */
static int
removal_writes(struct turn *t, const char *rdzv_id)
{
	char	key[STORE_ETCD_KEY_MAX];

	estore_key(t->s, key, "job/%s", rdzv_id);
	if (add(t, PLAN_FINAL, WOP_DEL, key, NULL, 0) != 0)
		return -1;
	estore_key(t->s, key, "node/%s/", rdzv_id);
	if (add(t, PLAN_FINAL, WOP_DEL_PREFIX, key, NULL, 0) != 0)
		return -1;
	estore_key(t->s, key, "log/%s/", rdzv_id);
	return add(t, PLAN_FINAL, WOP_DEL_PREFIX, key, NULL, 0);
}

/* Every write of the turn, grouped by job, in t->w and t->p. */
static int
collect(struct turn *t)
{
	struct core		*c = t->c;
	struct core_job		*j;
	struct core_node	*n;
	struct touch		*tb = NULL;
	size_t			 ntb = 0, cap = 0, i, k;
	struct ejob		*ej;
	int			 rc = -1;

	TAILQ_FOREACH(j, &c->removed_jobs, entry) {
		estore_job_drop(t->s, estore_job(t->s, j->rdzv_id, false));
		if (core_job_find(c, j->rdzv_id) != NULL) {
			/* Deleted before the new job's keys are written:
			 * etcd refuses a put inside a range deleted by the
			 * same Txn. */
			void *v = reallocarray(t->again, t->nagain + 1,
			    sizeof(*t->again));
			if (v == NULL)
				return -1;
			t->again = v;
			t->again[t->nagain++] = j;
			continue;
		}
		if (removal_writes(t, j->rdzv_id) != 0)
			return -1;
		t->job++;
	}
	TAILQ_FOREACH(j, &c->dirty_jobs, dirty_entry)
		if (touch_job(t, j) != 0)
			goto out;
	for (int pass = 0; pass < 2; pass++) {
		struct core_nodes *l = pass == 0 ? &c->dirty_nodes :
		    &c->removed_nodes;

		n = TAILQ_FIRST(l);
		for (; n != NULL; n = pass == 0 ? TAILQ_NEXT(n, dirty_entry) :
		    TAILQ_NEXT(n, entry)) {
			if (n->job->removed)
				continue;
			if (touch_job(t, n->job) != 0)
				goto out;
			if (ntb == cap) {
				cap = cap != 0 ? cap * 2 : 256;
				void *v = reallocarray(tb, cap, sizeof(*tb));
				if (v == NULL)
					goto out;
				tb = v;
			}
			ej = estore_job(t->s, n->job->rdzv_id, false);
			tb[ntb].ord = ej->ord;
			tb[ntb++].index = n->node_id / STORE_ETCD_BUCKET;
		}
	}
	for (i = 0; i < c->n_new_events; i++)
		if (touch_job(t, c->new_events[i].job) != 0)
			goto out;
	for (i = 0; i < c->n_new_rounds; i++)
		if (touch_job(t, c->new_rounds[i].job) != 0)
			goto out;
	if (ntb > 0)
		qsort(tb, ntb, sizeof(*tb), touch_cmp);
	for (i = 0, k = 0; i < t->njobs; i++) {
		size_t first, m;

		/* This job's changed buckets, once each. */
		while (k < ntb && tb[k].ord < i)
			k++;
		first = k;
		for (m = k; k < ntb && tb[k].ord == i; k++)
			if (m == first || tb[k].index != tb[m - 1].index)
				tb[m++] = tb[k];
		if (job_writes(t, t->jobs[i], tb != NULL ? &tb[first] : NULL,
		    m - first) != 0)
			goto out;
		t->job++;
	}
	/* Each changed host record is one more group of one write. */
	const struct host *h;
	TAILQ_FOREACH(h, &c->hosts->dirty, dirty_entry) {
		char	 key[STORE_ETCD_KEY_MAX];
		size_t	 len;
		uint8_t	*val = enc_host(h, &len);

		if (val == NULL)
			goto out;
		estore_key(t->s, key, "host/%s", h->name);
		if (add(t, PLAN_FINAL, WOP_PUT, key, val, len) != 0)
			goto out;
		t->job++;
	}
	rc = 0;
out:
	for (i = 0; i < t->njobs; i++)
		if ((ej = estore_job(t->s, t->jobs[i]->rdzv_id, false)) != NULL)
			ej->touched = false;
	free(tb);
	return rc;
}

/* ------------------------------------------------------------ sending */

struct sent {
	struct estore	*s;
	int		 rc;		/* 0 committed, -1 failed, 1 pending */
	size_t		 bytes;
	char		 err[512];
};

static void
txn_done(struct etcd_call *call, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	struct sent	*x = arg;

	(void)call;
	x->rc = estore_txn_result(x->s, status, message,
	    (const Etcdserverpb__TxnResponse *)reply, "committing", x->err,
	    sizeof(x->err));
}

static int
txn_add(struct etcd_txn *tx, const struct wop *w)
{
	switch (w->kind) {
	case WOP_PUT:
		return etcd_txn_put(tx, ETCD_SUCCESS, w->key, w->val, w->len,
		    0);
	case WOP_DEL:
		return etcd_txn_delete(tx, ETCD_SUCCESS, w->key, 0);
	case WOP_DEL_PREFIX:
		return etcd_txn_delete(tx, ETCD_SUCCESS, w->key, 1);
	}
	return -EINVAL;
}

/*
 * Builds the planned Txns and runs them phase by phase, the Txns of a
 * phase at once. 0 when every one committed.
 */
static int
send_all(struct turn *t, const struct plan_txn *pt, size_t npt,
    const uint8_t *meta, size_t metalen, char *err, size_t errlen)
{
	struct estore	 *s = t->s;
	struct etcd_txn	**tx;
	struct sent	 *sent;
	char		  key[STORE_ETCD_KEY_MAX];
	size_t		  i, first, last;
	int		  rc = -1;

	tx = calloc(npt + 1, sizeof(*tx));
	sent = calloc(npt + 1, sizeof(*sent));
	if (tx == NULL || sent == NULL)
		goto nomem;
	estore_key(s, key, "meta");
	for (i = 0; i < npt; i++) {
		if ((tx[i] = etcd_txn_new()) == NULL ||
		    estore_txn_fence(s, tx[i]) != 0)
			goto nomem;
		if (meta != NULL && etcd_txn_put(tx[i], ETCD_SUCCESS, key,
		    meta, metalen, 0) != 0)
			goto nomem;
	}
	for (i = 0; i < t->n; i++)
		if (txn_add(tx[t->p[i].txn], &t->w[i]) != 0)
			goto nomem;
	/* The planner's estimate of a Txn is an upper bound; should it ever
	 * not be, etcd would refuse the Txn with less of a message. */
	for (i = 0; i < npt; i++) {
		if (etcd_txn_ops(tx[i]) > s->limits.max_ops ||
		    etcd_txn_size(tx[i]) > s->limits.max_bytes) {
			errf(-1, err, errlen, "committing: a planned Txn of %zu "
			    "operations and %zu bytes is over etcd's limits",
			    etcd_txn_ops(tx[i]), etcd_txn_size(tx[i]));
			goto out;
		}
	}
	for (first = 0; first < npt; first = last) {
		for (last = first; last < npt &&
		    pt[last].phase == pt[first].phase; last++) {
			sent[last].s = s;
			sent[last].rc = 1;
			sent[last].bytes = etcd_txn_size(tx[last]);
			if (etcd_txn(s->ec, etcd_txn_request(tx[last]),
			    s->timeout_ms, txn_done, &sent[last]) == NULL) {
				sent[last].rc = -1;
				snprintf(sent[last].err, sizeof(sent[last].err),
				    "committing: %s", strerror(errno));
			}
		}
		etcd_wait(s->ec, 0);
		for (i = first; i < last; i++) {
			if (sent[i].rc == 0) {
				/* Read by the loop meanwhile. */
				__atomic_fetch_add(&s->transactions, 1,
				    __ATOMIC_RELAXED);
				__atomic_fetch_add(&s->bytes, sent[i].bytes,
				    __ATOMIC_RELAXED);
			}
		}
		for (i = first; i < last; i++) {
			if (sent[i].rc != 0) {
				errf(-1, err, errlen, "%s%s", sent[i].err,
				    sent[i].rc > 0 ? "no answer" : "");
				goto out;
			}
		}
	}
	rc = 0;
	goto out;
nomem:
	errf(-1, err, errlen, "committing: out of memory");
out:
	for (i = 0; tx != NULL && i < npt; i++)
		etcd_txn_free(tx[i]);
	free(tx);
	free(sent);
	return rc;
}

/* Jobs removed and created again in this turn: their old keys go first. */
static int
remove_first(struct turn *t, char *err, size_t errlen)
{
	struct etcd_txn	*tx;
	char		 key[STORE_ETCD_KEY_MAX];
	int		 rc = 0;

	for (size_t i = 0; i < t->nagain && rc == 0; i++) {
		const char *id = t->again[i]->rdzv_id;

		if ((tx = etcd_txn_new()) == NULL)
			return errf(-1, err, errlen, "out of memory");
		estore_key(t->s, key, "job/%s", id);
		rc = etcd_txn_delete(tx, ETCD_SUCCESS, key, 0);
		estore_key(t->s, key, "node/%s/", id);
		rc = rc != 0 ? rc : etcd_txn_delete(tx, ETCD_SUCCESS, key, 1);
		estore_key(t->s, key, "log/%s/", id);
		rc = rc != 0 ? rc : etcd_txn_delete(tx, ETCD_SUCCESS, key, 1);
		if (rc != 0)
			rc = errf(-1, err, errlen, "out of memory");
		else
			rc = estore_txn_run(t->s, tx, "deleting a removed job",
			    err, errlen);
		etcd_txn_free(tx);
	}
	return rc;
}

/*
 * A commit whose Txns are built (estore_commit_rows, on the loop: it reads
 * the core) and not yet sent (estore_commit_end, from the commit thread:
 * it reads nothing of the core and drives the store's own etcd client,
 * which nothing else uses meanwhile, on its private loop). The election's
 * client, on rdzvd's loop, keeps the leader's lease alive throughout, so
 * a slow Txn no longer costs the leadership (issue 42).
 */
struct pending {
	struct turn	 t;
	struct plan_txn	*pt;
	size_t		 npt;
	uint8_t		*meta;
	size_t		 metalen;
	uint64_t	 next_node_id;
};

static void
pending_free(struct pending *p)
{
	if (p == NULL)
		return;
	free(p->meta);
	free(p->pt);
	etcd_turn_free(&p->t);
	free(p);
}

int
estore_commit_rows(void *v, struct core *c, bool write_meta, char *err,
    size_t errlen)
{
	struct estore	*s = v;
	struct pending	*p;
	size_t		 bad = 0;
	int		 rc;

	pending_free(s->pending);
	s->pending = NULL;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return errf(-1, err, errlen, "committing: out of memory");
	p->t.s = s;
	p->t.c = c;
	if (collect(&p->t) != 0) {
		errf(-1, err, errlen, "committing: out of memory");
		goto bad;
	}
	/* Rare (a job removed and made again in one turn), and sent here. */
	if (remove_first(&p->t, err, errlen) != 0)
		goto bad;
	rc = store_plan(p->t.p, p->t.n, &s->limits, &p->pt, &p->npt, &bad);
	if (rc == -E2BIG) {
		errf(-1, err, errlen, "committing: a write of %zu bytes to %s "
		    "does not fit etcd's request limit of %zu bytes",
		    p->t.p[bad].bytes, p->t.w[bad].key, s->limits.max_bytes);
		goto bad;
	}
	if (rc != 0) {
		errf(-1, err, errlen, "committing: %s", strerror(-rc));
		goto bad;
	}
	if (write_meta && (p->meta = enc_meta(c->next_node_id, c,
	    &p->metalen)) == NULL) {
		errf(-1, err, errlen, "committing: out of memory");
		goto bad;
	}
	p->next_node_id = c->next_node_id;
	/* The jobs were collected: the thread must not look at the core. */
	p->t.c = NULL;
	free(p->t.jobs);
	p->t.jobs = NULL;
	p->t.njobs = 0;
	s->pending = p;
	return 0;

bad:
	pending_free(p);
	return -1;
}

int
estore_commit_end(void *v, char *err, size_t errlen)
{
	struct estore	*s = v;
	struct pending	*p = s->pending;
	int		 rc;

	if (p == NULL)
		return errf(-1, err, errlen, "committing: nothing was begun");
	s->pending = NULL;
	if (p->npt == 0 && p->meta != NULL) {
		/* Only the meta record moved: one Txn for it. */
		struct plan_txn one = { .phase = 2 };

		rc = send_all(&p->t, &one, 1, p->meta, p->metalen, err,
		    errlen);
	} else
		rc = send_all(&p->t, p->pt, p->npt, p->meta, p->metalen, err,
		    errlen);
	if (rc == 0)
		s->next_node_id = p->next_node_id;
	pending_free(p);
	return rc;
}

int
estore_commit(void *v, struct core *c, bool write_meta, char *err,
    size_t errlen)
{
	if (estore_commit_rows(v, c, write_meta, err, errlen) != 0)
		return -1;
	return estore_commit_end(v, err, errlen);
}
