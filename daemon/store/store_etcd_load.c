/*
 * Reading an etcd store: its meta, everything into a fresh core at a load
 * (SPEC §4 rule 11, and a standby that becomes the leader), and a job's
 * event history for Control.ListEvents. A load also collects what a turn
 * cut short left behind (buckets and log chunks of versions no job record
 * names) and deletes it, fenced, before anything new is written under
 * those versions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_etcd.h"

/*
 * Keys per Range of a scan. Job records are small; a node bucket may hold
 * 128 nodes with their GPUs' results (about 150 KiB), and a log chunk up to
 * 256 KiB, so their pages are short enough to stay far below the client's
 * 64 MiB limit on a reply.
 */
#define SCAN_PAGE_JOBS		1000
#define SCAN_PAGE_BUCKETS	64
#define SCAN_PAGE_LOGS		32

/*
 * A Range of [key, end) in key order (end NULL: every key under key), at
 * |rev| (0: now). The caller frees *out.
 */
static int
range(struct estore *s, const uint8_t *key, size_t klen, const uint8_t *end,
    size_t elen, bool desc, int64_t limit, bool keys_only, int64_t rev,
    Etcdserverpb__RangeResponse **out, char *err, size_t errlen)
{
	Etcdserverpb__RangeRequest	 r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint8_t				 pend[STORE_ETCD_KEY_MAX + 1];
	char				*msg = NULL;
	int				 st;

	*out = NULL;
	r.key.data = (uint8_t *)key;
	r.key.len = klen;
	if (end == NULL) {
		elen = etcd_prefix_end(key, klen, pend);
		end = pend;
	}
	r.range_end.data = (uint8_t *)end;
	r.range_end.len = elen;
	r.limit = limit;
	r.revision = rev;
	r.keys_only = keys_only;
	r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
	r.sort_order = desc ? ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND :
	    ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
	st = etcd_range_sync(s->ec, &r, s->timeout_ms, out, &msg);
	if (st != GRPC_OK) {
		errf(-1, err, errlen, "reading %.*s: %s%s%s", (int)klen,
		    (const char *)key, st < 0 ? strerror(-st) :
		    grpc_status_name(st), msg != NULL ? ": " : "",
		    msg != NULL ? msg : "");
		free(msg);
		return -1;
	}
	return 0;
}

/*
 * Every key under |prefix|, page by page at the revision of the first
 * page, in key order. |each| returns non-zero to stop with an error it
 * wrote into err.
 */
int
estore_scan(struct estore *s, const char *prefix, int64_t page, bool keys_only,
    int (*each)(const Mvccpb__KeyValue *, void *, char *, size_t), void *arg,
    char *err, size_t errlen)
{
	Etcdserverpb__RangeResponse	*r;
	uint8_t				 start[STORE_ETCD_KEY_MAX + 2];
	uint8_t				 end[STORE_ETCD_KEY_MAX + 1];
	size_t				 slen = strlen(prefix), elen;
	int64_t				 rev = 0;
	bool				 more = true;

	memcpy(start, prefix, slen);
	elen = etcd_prefix_end(prefix, slen, end);
	/* Bounded: every page moves the start past a key that exists. */
	while (more) {
		if (range(s, start, slen, end, elen, false, page,
		    keys_only, rev, &r, err, errlen) != 0)
			return -1;
		if (rev == 0 && r->header != NULL)
			rev = r->header->revision;
		for (size_t i = 0; i < r->n_kvs; i++) {
			if (each(r->kvs[i], arg, err, errlen) != 0) {
				protobuf_c_message_free_unpacked(&r->base,
				    NULL);
				return -1;
			}
		}
		more = r->more && r->n_kvs > 0;
		if (more) {
			const ProtobufCBinaryData *k = &r->kvs[r->n_kvs - 1]->key;

			if (k->len + 1 > sizeof(start))
				more = false;
			else {
				memcpy(start, k->data, k->len);
				start[k->len] = '\0';
				slen = k->len + 1;
			}
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	return 0;
}

int
estore_read_meta(struct estore *s, bool *exists, struct core *c, char *err,
    size_t errlen)
{
	Etcdserverpb__RangeResponse	*r;
	Rdzv__Store__V1__Meta		*m;
	char				 key[STORE_ETCD_KEY_MAX];
	int				 rc = 0;

	*exists = false;
	estore_key(s, key, "meta");
	/* [key, key + "\0"): exactly the key. */
	if (range(s, (const uint8_t *)key, strlen(key), (const uint8_t *)key,
	    strlen(key) + 1, false, 1, false, 0, &r, err, errlen) != 0)
		return -1;
	if (r->n_kvs == 0)
		goto out;
	*exists = true;
	m = rdzv__store__v1__meta__unpack(NULL, r->kvs[0]->value.len,
	    r->kvs[0]->value.data);
	if (m == NULL || m->format == 0)
		rc = errf(-1, err, errlen, "%s is not an rdzv store's meta "
		    "(another program's keys under this prefix?); use another "
		    "prefix", key);
	else if (m->format > STORE_ETCD_FORMAT)
		rc = errf(-1, err, errlen, "the store has format %u, newer "
		    "than format %u that this rdzvd knows; run the newer "
		    "rdzvd that wrote it, or use another prefix", m->format,
		    STORE_ETCD_FORMAT);
	else {
		s->next_node_id = m->next_node_id > 0 ? m->next_node_id : 1;
		for (size_t i = 0; c != NULL && i < m->n_refusals; i++) {
			const Rdzv__Store__V1__Refusal *rm = m->refusals[i];
			struct core_refusal kept = { .allocation_nodes = 0 };

			snprintf(kept.rdzv_id, sizeof(kept.rdzv_id), "%s",
			    rm->rdzv_id);
			snprintf(kept.identity, sizeof(kept.identity), "%s",
			    rm->identity);
			snprintf(kept.why, sizeof(kept.why), "%s", rm->why);
			kept.allocation_nodes = rm->allocation_nodes;
			kept.attempt = rm->attempt;
			core_restore_refusal(c, &kept, rm->left_ms);
		}
	}
	if (m != NULL)
		rdzv__store__v1__meta__free_unpacked(m, NULL);
out:
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

int
estore_empty(void *v, char *err, size_t errlen)
{
	struct estore			*s = v;
	Etcdserverpb__RangeResponse	*r;
	char				 key[STORE_ETCD_KEY_MAX];
	int				 rc;

	estore_key(s, key, "%s", "");
	if (range(s, (uint8_t *)key, strlen(key), NULL, 0, false, 1, true, 0,
	    &r, err, errlen) != 0)
		return -1;
	rc = r->n_kvs == 0;
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

/* ---------------------------------------------------------------- loading */

struct kept {
	Rdzv__Store__V1__NodeBucket	*b;
	char			 id[RDZV_ID_MAX + 1];
};

struct ld {
	struct estore		 *s;
	Rdzv__Store__V1__Job	**jobs;
	size_t			  nj;
	struct kept		 *kept;
	size_t			  nk;
	char			**gc;		/* keys to delete */
	size_t			  ngc;
	size_t			  plen;		/* of "PREFIX/node/" etc. */
};

static void *
grow(void *v, size_t n, size_t size)
{
	/* Doubling at powers of two: amortised O(1) appends. */
	if (n != 0 && (n & (n - 1)) != 0)
		return v;
	return reallocarray(v, n == 0 ? 1 : n * 2, size);
}

static int
gc_add(struct ld *l, const ProtobufCBinaryData *k)
{
	char	**v = grow(l->gc, l->ngc, sizeof(*l->gc));

	if (v == NULL)
		return -1;
	l->gc = v;
	if ((v[l->ngc] = strndup((const char *)k->data, k->len)) == NULL)
		return -1;
	l->ngc++;
	return 0;
}

static int
each_job(const Mvccpb__KeyValue *kv, void *arg, char *err, size_t errlen)
{
	struct ld		 *l = arg;
	Rdzv__Store__V1__Job	 *m, **v;

	m = rdzv__store__v1__job__unpack(NULL, kv->value.len, kv->value.data);
	if (m == NULL)
		return errf(-1, err, errlen, "%.*s: not a job record",
		    (int)kv->key.len, (const char *)kv->key.data);
	if ((v = grow(l->jobs, l->nj, sizeof(*v))) == NULL) {
		rdzv__store__v1__job__free_unpacked(m, NULL);
		return errf(-1, err, errlen, "out of memory");
	}
	l->jobs = v;
	v[l->nj++] = m;
	return 0;
}

/* "ID/WVER/INDEX" (or "ID/WVER/CHUNK") after PREFIX/node/ or /log/. */
static bool
key_parse(const ProtobufCBinaryData *k, size_t plen, char *id,
    uint64_t *wver, uint64_t *index)
{
	char		 buf[STORE_ETCD_KEY_MAX], *p, *q, *end;

	if (k->len <= plen || k->len - plen >= sizeof(buf))
		return false;
	memcpy(buf, k->data + plen, k->len - plen);
	buf[k->len - plen] = '\0';
	if ((p = strchr(buf, '/')) == NULL || (size_t)(p - buf) > RDZV_ID_MAX)
		return false;
	*p++ = '\0';
	if ((q = strchr(p, '/')) == NULL)
		return false;
	*q++ = '\0';
	*wver = strtoull(p, &end, 16);
	if (*end != '\0')
		return false;
	*index = strtoull(q, &end, 16);
	if (*end != '\0')
		return false;
	strcpy(id, buf);
	return true;
}

static bool
bucket_named(const struct ejob *ej, uint64_t index, uint64_t wver)
{
	for (size_t i = 0; i < ej->nb; i++)
		if (ej->bidx[i] == index)
			return ej->bver[i] == wver;
	return false;
}

static int
each_bucket(const Mvccpb__KeyValue *kv, void *arg, char *err, size_t errlen)
{
	struct ld		*l = arg;
	struct ejob		*ej;
	struct kept		*v;
	char			 id[RDZV_ID_MAX + 1];
	uint64_t		 wver, index;

	if (!key_parse(&kv->key, l->plen, id, &wver, &index) ||
	    (ej = estore_job(l->s, id, false)) == NULL ||
	    !bucket_named(ej, index, wver))
		return gc_add(l, &kv->key) == 0 ? 0 :
		    errf(-1, err, errlen, "out of memory");
	if ((v = grow(l->kept, l->nk, sizeof(*v))) == NULL)
		return errf(-1, err, errlen, "out of memory");
	l->kept = v;
	v[l->nk].b = rdzv__store__v1__node_bucket__unpack(NULL, kv->value.len,
	    kv->value.data);
	if (v[l->nk].b == NULL)
		return errf(-1, err, errlen, "%.*s: not a node bucket",
		    (int)kv->key.len, (const char *)kv->key.data);
	strcpy(v[l->nk].id, id);
	l->nk++;
	return 0;
}

static int
job_cmp(const void *a, const void *b)
{
	const Rdzv__Store__V1__Job	*x = *(Rdzv__Store__V1__Job *const *)a;
	const Rdzv__Store__V1__Job	*y = *(Rdzv__Store__V1__Job *const *)b;

	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->rdzv_id, y->rdzv_id);
}

struct nref {
	const Rdzv__Store__V1__Node	*m;
	const char		*id;
};

static int
nref_cmp(const void *a, const void *b)
{
	const struct nref	*x = a, *y = b;

	return x->m->node_id < y->m->node_id ? -1 :
	    x->m->node_id > y->m->node_id;
}

/* The job records, as jobs of the core and as the store's memory. */
static int
load_jobs(struct ld *l, struct core *c, char *err, size_t errlen)
{
	struct ejob	*ej;
	size_t		 i, k;

	if (l->nj > 0)
		qsort(l->jobs, l->nj, sizeof(*l->jobs), job_cmp);
	for (i = 0; i < l->nj; i++) {
		const Rdzv__Store__V1__Job *m = l->jobs[i];

		if (dec_job(c, m, err, errlen) != 0)
			return -1;
		if ((ej = estore_job(l->s, m->rdzv_id, true)) == NULL ||
		    (ej->bidx = calloc(m->n_buckets + 1, 8)) == NULL ||
		    (ej->bver = calloc(m->n_buckets + 1, 8)) == NULL)
			return errf(-1, err, errlen, "out of memory");
		ej->wver = m->wver;
		for (k = 0; k < m->n_buckets; k++) {
			ej->bidx[k] = m->buckets[k]->index;
			ej->bver[k] = m->buckets[k]->wver;
		}
		ej->nb = m->n_buckets;
	}
	return 0;
}

/* Every node of the kept buckets, in node_id order as SQLite loads them. */
static int
load_nodes(struct ld *l, struct core *c, char *err, size_t errlen)
{
	struct nref	*v;
	size_t		 n = 0, i, k;
	int		 rc = 0;

	for (i = 0; i < l->nk; i++)
		n += l->kept[i].b->n_nodes;
	if ((v = calloc(n + 1, sizeof(*v))) == NULL)
		return errf(-1, err, errlen, "out of memory");
	for (i = 0, n = 0; i < l->nk; i++)
		for (k = 0; k < l->kept[i].b->n_nodes; k++) {
			v[n].m = l->kept[i].b->nodes[k];
			v[n++].id = l->kept[i].id;
		}
	qsort(v, n, sizeof(*v), nref_cmp);
	for (i = 0; i < n && rc == 0; i++) {
		struct core_job *j = core_job_find(c, v[i].id);

		if (j == NULL)
			rc = errf(-1, err, errlen, "node %llu: no job '%s'",
			    (unsigned long long)v[i].m->node_id, v[i].id);
		else
			rc = dec_node(c, j, v[i].m, err, errlen);
	}
	free(v);
	return rc;
}

/*
 * Each job's latest CORE_EVENTS_KEPT events: its newest log chunks, read
 * newest first until there are enough. Chunks above the job's version are
 * what a cut-short turn left, to be collected. The reads go out as Txns of
 * up to EVENTS_BATCH Ranges, all at once: a thousand jobs are ten requests,
 * not a thousand round trips, when a standby takes over. A chunk may be as
 * big as STORE_ETCD_CHUNK, so a Txn asks for at most EVENTS_CHUNKS chunks
 * in all (50 MiB at worst, below the client's 64 MiB for a reply): two per
 * job at first, then as many as its chunks so far say it still needs.
 */
#define EVENTS_BATCH	100
#define EVENTS_CHUNKS	200
#define EVENTS_FIRST	2

struct evload {
	struct ld		*l;
	struct core_job		*j;
	uint64_t		 wver;
	char			 key[STORE_ETCD_KEY_MAX];
	uint8_t			 end[STORE_ETCD_KEY_MAX + 1];
	size_t			 elen;
	Rdzv__Store__V1__Log	*logs[CORE_EVENTS_KEPT];
	size_t			 nlog, nev;
	bool			 more;		/* another Range is needed */
	int64_t			 ask;		/* chunks in the next one */
	int			 rc;
	char			 err[256];
};

/* The Ranges of one Txn, and whose they are. */
struct evbatch {
	struct evload	*x[EVENTS_BATCH];
	size_t		 n;
	int64_t		 chunks;	/* asked for in all */
};

/* One job's Range answered: its chunks, and whether to read on. */
static void
events_take(struct evload *x, const Etcdserverpb__RangeResponse *r)
{
	char		 id[RDZV_ID_MAX + 1];
	uint64_t	 wver, chunk;
	size_t		 i;

	x->more = false;
	for (i = 0; i < r->n_kvs && x->nev < CORE_EVENTS_KEPT &&
	    x->nlog < CORE_EVENTS_KEPT; i++) {
		const Mvccpb__KeyValue *kv = r->kvs[i];

		if (!key_parse(&kv->key, x->l->plen, id, &wver, &chunk) ||
		    wver > x->wver) {
			if (gc_add(x->l, &kv->key) != 0)
				x->rc = errf(-1, x->err, sizeof(x->err),
				    "out of memory");
			continue;
		}
		x->logs[x->nlog] = rdzv__store__v1__log__unpack(NULL,
		    kv->value.len, kv->value.data);
		if (x->logs[x->nlog] == NULL) {
			x->rc = errf(-1, x->err, sizeof(x->err), "%.*s: not a "
			    "log chunk", (int)kv->key.len,
			    (const char *)kv->key.data);
			return;
		}
		x->nev += x->logs[x->nlog++]->n_events;
	}
	if (r->more && r->n_kvs > 0 && i == r->n_kvs &&
	    x->nev < CORE_EVENTS_KEPT && x->nlog < CORE_EVENTS_KEPT) {
		const ProtobufCBinaryData *lk = &r->kvs[r->n_kvs - 1]->key;

		size_t avg = x->nlog > 0 && x->nev > 0 ? x->nev / x->nlog : 1;
		int64_t need;

		/* Next: the keys below the last one read, as many as the
		 * chunks so far say are missing, and one more. */
		memcpy(x->end, lk->data, lk->len);
		x->elen = lk->len;
		x->more = true;
		need = (int64_t)((CORE_EVENTS_KEPT - x->nev + avg - 1) / avg) + 1;
		x->ask = need;
		if (x->ask > CORE_EVENTS_KEPT - (int64_t)x->nlog)
			x->ask = CORE_EVENTS_KEPT - (int64_t)x->nlog;
		if (x->ask > EVENTS_CHUNKS)
			x->ask = EVENTS_CHUNKS;
	}
}

static void
events_got(struct etcd_call *call, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	struct evbatch				*b = arg;
	const Etcdserverpb__TxnResponse		*r = (const void *)reply;
	size_t					 i;

	(void)call;
	for (i = 0; i < b->n; i++) {
		struct evload *x = b->x[i];

		if (status != GRPC_OK)
			x->rc = errf(-1, x->err, sizeof(x->err), "reading %s: "
			    "%s%s%s", x->key, grpc_status_name(status),
			    message != NULL ? ": " : "",
			    message != NULL ? message : "");
		else if (i >= r->n_responses || r->responses[i]->response_case !=
		    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
			x->rc = errf(-1, x->err, sizeof(x->err), "reading %s: "
			    "etcd's answer has no range", x->key);
		else
			events_take(x, r->responses[i]->response_range);
	}
}

/* Starts the next Ranges of a batch of jobs, as one read-only Txn. */
static int
events_ask(struct estore *s, struct evbatch *b)
{
	Etcdserverpb__TxnRequest	 t = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__RangeRequest	 r[EVENTS_BATCH];
	Etcdserverpb__RequestOp		 op[EVENTS_BATCH], *ops[EVENTS_BATCH];

	for (size_t i = 0; i < b->n; i++) {
		struct evload *x = b->x[i];

		etcdserverpb__range_request__init(&r[i]);
		r[i].key.data = (uint8_t *)x->key;
		r[i].key.len = strlen(x->key);
		r[i].range_end.data = x->end;
		r[i].range_end.len = x->elen;
		r[i].limit = x->ask;
		r[i].sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
		r[i].sort_order =
		    ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
		etcdserverpb__request_op__init(&op[i]);
		op[i].request_case =
		    ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		op[i].request_range = &r[i];
		ops[i] = &op[i];
	}
	t.n_success = b->n;
	t.success = ops;
	if (etcd_txn(s->ec, &t, s->timeout_ms, events_got, b) == NULL)
		return -1;
	return 0;
}

/* Oldest first into the job's ring: the chunks were read newest first. */
static void
events_restore(struct evload *x)
{
	size_t	skip, i, k;

	skip = x->nev > CORE_EVENTS_KEPT ? x->nev - CORE_EVENTS_KEPT : 0;
	for (i = x->nlog; i > 0; i--) {
		for (k = 0; k < x->logs[i - 1]->n_events; k++) {
			struct core_event e;

			if (skip > 0) {
				skip--;
				continue;
			}
			dec_event(x->logs[i - 1]->events[k], &e);
			core_restore_event(x->j, &e);
		}
	}
}

static int
load_events(struct ld *l, struct core *c, char *err, size_t errlen)
{
	struct estore	*s = l->s;
	struct evload	*v;
	struct evbatch	*b;
	struct core_job	*j;
	size_t		 n = 0, i, nb;
	int		 rc = 0;

	v = calloc(c->n_jobs + 1, sizeof(*v));
	b = calloc(c->n_jobs + 1, sizeof(*b));
	if (v == NULL || b == NULL) {
		free(v);
		free(b);
		return errf(-1, err, errlen, "out of memory");
	}
	TAILQ_FOREACH(j, &c->jobs, entry) {
		struct evload *x = &v[n++];

		x->l = l;
		x->j = j;
		x->wver = estore_job(s, j->rdzv_id, false)->wver;
		estore_key(s, x->key, "log/%s/", j->rdzv_id);
		x->elen = etcd_prefix_end(x->key, strlen(x->key), x->end);
		x->more = true;
		x->ask = EVENTS_FIRST;
	}
	/* Bounded: a job asks again only after a full page of chunks, and
	 * at most until it has CORE_EVENTS_KEPT of them. */
	do {
		nb = 0;
		for (i = 0; i < n; i++) {
			if (!v[i].more || v[i].rc != 0)
				continue;
			if (nb == 0 || b[nb - 1].n == EVENTS_BATCH ||
			    b[nb - 1].chunks + v[i].ask > EVENTS_CHUNKS) {
				b[nb].n = 0;
				b[nb++].chunks = 0;
			}
			b[nb - 1].x[b[nb - 1].n++] = &v[i];
			b[nb - 1].chunks += v[i].ask;
		}
		for (i = 0; i < nb; i++)
			if (events_ask(s, &b[i]) != 0)
				rc = errf(-1, err, errlen, "reading events: %s",
				    strerror(errno));
		etcd_wait(s->ec, 0);
		for (i = 0; i < n && rc == 0; i++)
			if (v[i].rc != 0)
				rc = errf(-1, err, errlen, "%s", v[i].err);
	} while (nb > 0 && rc == 0);
	for (i = 0; i < n; i++) {
		if (rc == 0)
			events_restore(&v[i]);
		for (size_t k = 0; k < v[i].nlog; k++)
			rdzv__store__v1__log__free_unpacked(v[i].logs[k], NULL);
	}
	free(v);
	free(b);
	return rc;
}

/* Deletes what no job record names, 100 keys per fenced Txn. */
static int
collect_garbage(struct ld *l, char *err, size_t errlen)
{
	struct etcd_txn	*tx;
	size_t		 i = 0, k;
	int		 rc = 0;

	/* A reader must not delete what may be a writer's turn in flight. */
	if (l->s->read_only)
		return 0;
	while (i < l->ngc && rc == 0) {
		if ((tx = etcd_txn_new()) == NULL)
			return errf(-1, err, errlen, "out of memory");
		for (k = 0; k < 100 && i < l->ngc && rc == 0; k++, i++)
			rc = etcd_txn_delete(tx, ETCD_SUCCESS, l->gc[i], 0);
		if (rc != 0)
			rc = errf(-1, err, errlen, "out of memory");
		else
			rc = estore_txn_run(l->s, tx, "deleting what an "
			    "unfinished commit left", err, errlen);
		etcd_txn_free(tx);
	}
	return rc;
}

static void
ld_free(struct ld *l)
{
	size_t	i;

	for (i = 0; i < l->nj; i++)
		rdzv__store__v1__job__free_unpacked(l->jobs[i], NULL);
	free(l->jobs);
	for (i = 0; i < l->nk; i++)
		rdzv__store__v1__node_bucket__free_unpacked(l->kept[i].b, NULL);
	free(l->kept);
	for (i = 0; i < l->ngc; i++)
		free(l->gc[i]);
	free(l->gc);
}

int
estore_load(void *v, struct core *c, struct core_now now, char *err,
    size_t errlen)
{
	struct estore	*s = v;
	struct ld	 l = { .s = s };
	char		 key[STORE_ETCD_KEY_MAX], e[CORE_REASON_MAX * 2];
	bool		 exists;
	int		 rc = -1;

	if (c->n_jobs != 0)
		return errf(-1, err, errlen, "store %s: loading into a core "
		    "that already has jobs", s->desc);
	estore_jobs_clear(s);
	if (estore_read_meta(s, &exists, c, e, sizeof(e)) != 0)
		goto out;
	estore_key(s, key, "job/");
	if (estore_scan(s, key, SCAN_PAGE_JOBS, false, each_job, &l, e,
	    sizeof(e)) != 0 ||
	    load_jobs(&l, c, e, sizeof(e)) != 0)
		goto out;
	estore_key(s, key, "node/");
	l.plen = strlen(key);
	if (estore_scan(s, key, SCAN_PAGE_BUCKETS, false, each_bucket, &l, e,
	    sizeof(e)) != 0 ||
	    load_nodes(&l, c, e, sizeof(e)) != 0)
		goto out;
	estore_key(s, key, "log/");
	l.plen = strlen(key);
	if (load_events(&l, c, e, sizeof(e)) != 0 ||
	    estore_load_hosts(s, c, e, sizeof(e)) != 0)
		goto out;
	if (collect_garbage(&l, e, sizeof(e)) != 0 ||
	    core_restore_finish(c, now, s->next_node_id, e, sizeof(e)) != 0)
		goto out;
	s->next_node_id = c->next_node_id;
	rc = 0;
out:
	ld_free(&l);
	if (rc != 0) {
		estore_jobs_clear(s);
		errf(-1, err, errlen, "store %s: %s", s->desc, e);
	}
	return rc;
}

/* ------------------------------------------------------------------ events */

struct evread {
	uint64_t	 after_seq;
	uint32_t	 limit, sent;
	int		(*cb)(const struct core_event *, void *);
	void		*arg;
	bool		 stop;
};

static int
each_log(const Mvccpb__KeyValue *kv, void *arg, char *err, size_t errlen)
{
	struct evread		*x = arg;
	Rdzv__Store__V1__Log	*m;
	struct core_event	 e;

	if (x->stop)
		return 0;
	m = rdzv__store__v1__log__unpack(NULL, kv->value.len, kv->value.data);
	if (m == NULL)
		return errf(-1, err, errlen, "%.*s: not a log chunk",
		    (int)kv->key.len, (const char *)kv->key.data);
	for (size_t i = 0; i < m->n_events && !x->stop; i++) {
		if (m->events[i]->seq <= x->after_seq)
			continue;
		dec_event(m->events[i], &e);
		if (x->cb(&e, x->arg) != 0 || ++x->sent == x->limit)
			x->stop = true;
	}
	rdzv__store__v1__log__free_unpacked(m, NULL);
	return 0;
}

int
estore_events(void *v, const char *rdzv_id, uint64_t after_seq,
    uint32_t limit, int (*cb)(const struct core_event *, void *), void *arg,
    char *err, size_t errlen)
{
	struct estore	*s = v;
	struct ejob	*ej = estore_job(s, rdzv_id, false);
	struct evread	 x = { after_seq, limit, 0, cb, arg, false };
	char		 key[STORE_ETCD_KEY_MAX];

	if (ej == NULL || limit == 0)
		return 0;
	/*
	 * Chunks of versions above the job's are not the job's; they exist
	 * only between a cut-short turn and the next load, which collects
	 * them, and the job's version is what this store wrote last.
	 */
	estore_key(s, key, "log/%s/", rdzv_id);
	return estore_scan(s, key, SCAN_PAGE_LOGS, false, each_log, &x, err, errlen);
}
