/*
 * The etcd backend of the store (SPEC §14): opening, the per-job memory
 * the commits keep, fencing, and running a Txn. Committing a turn is in
 * store_etcd_commit.c, loading in store_etcd_load.c, the values in
 * store_etcd_enc.c; store_etcd.h has the key layout.
 *
 * The store talks to etcd synchronously, through a client on a private
 * event loop: like SQLite's fsync, a commit holds the daemon's loop until
 * etcd has the turn, and nothing is sent before.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_be.h"
#include "store_etcd.h"

void
estore_key(const struct estore *s, char *buf, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	n = snprintf(buf, STORE_ETCD_KEY_MAX, "%s/", s->prefix);
	va_start(ap, fmt);
	vsnprintf(buf + n, STORE_ETCD_KEY_MAX - (size_t)n, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------ what it remembers */

static int
ejob_match(const void *item, const void *key)
{
	return strcmp(((const struct ejob *)item)->rdzv_id, key) == 0;
}

struct ejob *
estore_job(struct estore *s, const char *rdzv_id, bool create)
{
	uint64_t	 hv = hash_bytes(rdzv_id, strlen(rdzv_id));
	struct ejob	*ej = hash_find(&s->jobs, hv, ejob_match, rdzv_id);

	if (ej != NULL || !create)
		return ej;
	if ((ej = calloc(1, sizeof(*ej))) == NULL)
		return NULL;
	snprintf(ej->rdzv_id, sizeof(ej->rdzv_id), "%s", rdzv_id);
	ej->hv = hv;
	if (hash_insert(&s->jobs, hv, ej) != 0) {
		free(ej);
		return NULL;
	}
	return ej;
}

void
estore_job_drop(struct estore *s, struct ejob *ej)
{
	if (ej == NULL)
		return;
	hash_remove(&s->jobs, ej->hv, ej);
	free(ej->bidx);
	free(ej->bver);
	free(ej);
}

void
estore_jobs_clear(struct estore *s)
{
	for (size_t i = 0; i < s->jobs.cap; i++) {
		struct ejob *ej = s->jobs.slots[i].item;

		if (ej != NULL) {
			free(ej->bidx);
			free(ej->bver);
			free(ej);
		}
	}
	hash_free(&s->jobs);
	hash_init(&s->jobs);
}

/* ------------------------------------------------------------------ a Txn */

/* Why a fenced Txn did not apply: the failure branch read the key. */
static int
fence_failed(struct estore *s, const Etcdserverpb__TxnResponse *r,
    const char *what, char *err, size_t errlen)
{
	const Etcdserverpb__RangeResponse	*rr = NULL;

	if (r->n_responses > 0 && r->responses[0]->response_case ==
	    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
		rr = r->responses[0]->response_range;
	if (rr == NULL || rr->n_kvs == 0)
		return errf(-1, err, errlen, "%s: the leader key %s is gone "
		    "(fenced at create_revision %lld): this rdzvd no longer "
		    "leads and must not write", what, s->fence_key,
		    (long long)s->fence_rev);
	return errf(-1, err, errlen, "%s: the leader key %s changed "
	    "(create_revision %lld, fenced at %lld): this rdzvd no longer "
	    "leads and must not write", what, s->fence_key,
	    (long long)rr->kvs[0]->create_revision, (long long)s->fence_rev);
}

int
estore_txn_fence(struct estore *s, struct etcd_txn *t)
{
	if (s->fence_key == NULL)
		return 0;
	if (etcd_txn_cmp_create(t, s->fence_key,
	    ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, s->fence_rev) != 0 ||
	    etcd_txn_range(t, ETCD_FAILURE, s->fence_key, 0) != 0)
		return -ENOMEM;
	return 0;
}

int
estore_txn_result(struct estore *s, int status, const char *msg,
    const Etcdserverpb__TxnResponse *r, const char *what, char *err,
    size_t errlen)
{
	if (status != GRPC_OK)
		return errf(-1, err, errlen, "%s: etcd %s: %s", what,
		    grpc_status_name(status), msg != NULL ? msg : "failed");
	if (!r->succeeded)
		return fence_failed(s, r, what, err, errlen);
	return 0;
}

int
estore_txn_run(struct estore *s, struct etcd_txn *t, const char *what,
    char *err, size_t errlen)
{
	Etcdserverpb__TxnResponse	*r = NULL;
	char				*msg = NULL;
	int				 st, rc;

	if (estore_txn_fence(s, t) != 0)
		return errf(-1, err, errlen, "%s: out of memory", what);
	st = etcd_txn_sync(s->ec, etcd_txn_request(t), s->timeout_ms, &r, &msg);
	if (st < 0)
		rc = errf(-1, err, errlen, "%s: %s", what, strerror(-st));
	else
		rc = estore_txn_result(s, st, msg, r, what, err, errlen);
	if (rc == 0) {
		__atomic_fetch_add(&s->bytes, etcd_txn_size(t),
		    __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->transactions, 1, __ATOMIC_RELAXED);
	}
	if (r != NULL)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	free(msg);
	return rc;
}

/* ----------------------------------------------------------------- opening */

static int
ops_open(const struct store_spec *spec, const struct store_opts *opts,
    void **out, char *err, size_t errlen)
{
	struct etcd_opts	 eo = { 0 };
	struct estore		*s;
	char			 e[512];
	bool			 exists;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return errf(-1, err, errlen, "out of memory");
	hash_init(&s->jobs);
	snprintf(s->prefix, sizeof(s->prefix), "%s", spec->prefix);
	snprintf(s->desc, sizeof(s->desc), "etcd://%s%s", spec->endpoints,
	    spec->prefix);
	s->timeout_ms = opts->etcd_timeout_ms != 0 ? opts->etcd_timeout_ms :
	    5000;
	s->next_node_id = 1;
	s->read_only = opts->read_only != 0;
	s->limits.max_ops = ETCD_MAX_TXN_OPS;
	s->limits.max_bytes = ETCD_MAX_REQUEST_BYTES;
	s->limits.txn_ops = 1;			/* meta */
	s->limits.txn_bytes = STORE_ETCD_TXN_BYTES;
	eo.endpoints = spec->endpoints;
	eo.ca = opts->etcd_ca;
	eo.cert = opts->etcd_cert;
	eo.key = opts->etcd_key;
	eo.timeout_ms = s->timeout_ms;
	if (etcd_new(NULL, &eo, &s->ec, e, sizeof(e)) != 0) {
		errf(-1, err, errlen, "store %s: %s", s->desc, e);
		goto bad;
	}
	if (estore_read_meta(s, &exists, NULL, e, sizeof(e)) != 0) {
		errf(-1, err, errlen, "store %s: %s", s->desc, e);
		goto bad;
	}
	*out = s;
	return 0;
bad:
	etcd_free(s->ec);
	hash_free(&s->jobs);
	free(s);
	return -1;
}

static void
ops_close(void *v)
{
	struct estore	*s = v;

	if (s == NULL)
		return;
	etcd_free(s->ec);
	estore_jobs_clear(s);
	hash_free(&s->jobs);
	free(s->fence_key);
	free(s);
}

static int
ops_fence(void *v, const char *leader_key, int64_t create_revision)
{
	struct estore	*s = v;
	char		*k = NULL;

	if (leader_key != NULL && (*leader_key == '\0' || create_revision <= 0))
		return -EINVAL;
	if (leader_key != NULL && (k = strdup(leader_key)) == NULL)
		return -ENOMEM;
	free(s->fence_key);
	s->fence_key = k;
	s->fence_rev = create_revision;
	return 0;
}

static uint64_t
ops_transactions(const void *v)
{
	/* Atomic: the commit thread counts them (turn.c). */
	return __atomic_load_n(&((const struct estore *)v)->transactions,
	    __ATOMIC_RELAXED);
}

static uint64_t
ops_bytes(const void *v)
{
	return __atomic_load_n(&((const struct estore *)v)->bytes,
	    __ATOMIC_RELAXED);
}

const struct store_ops store_etcd_ops = {
	.kind = STORE_ETCD,
	.name = "etcd",
	.open = ops_open,
	.load = estore_load,
	.commit = estore_commit,
	.commit_rows = estore_commit_rows,
	.commit_end = estore_commit_end,
	.fence = ops_fence,
	.events = estore_events,
	.empty = estore_empty,
	.transactions = ops_transactions,
	.bytes_written = ops_bytes,
	.close = ops_close,
};
