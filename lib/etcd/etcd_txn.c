/*
 * Building etcd requests: the end of a prefix's range, single-key requests
 * over caller-owned structs, and a Txn builder that owns what it holds
 * (lib/etcd/etcd.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

size_t
etcd_prefix_end(const void *prefix, size_t len, uint8_t *end)
{
	const uint8_t *p = prefix;

	/* clientv3.GetPrefixRangeEnd: increment the last byte that can be,
	 * dropping the 0xff bytes after it. */
	for (size_t i = len; i > 0; i--) {
		if (p[i - 1] < 0xff) {
			memcpy(end, p, i - 1);
			end[i - 1] = p[i - 1] + 1;
			return i;
		}
	}
	end[0] = '\0';
	return 1;
}

static ProtobufCBinaryData
bytes(const char *s)
{
	ProtobufCBinaryData b = { strlen(s), (uint8_t *)s };
	return b;
}

void
etcd_range_init(Etcdserverpb__RangeRequest *r, const char *key)
{
	etcdserverpb__range_request__init(r);
	r->key = bytes(key);
}

void
etcd_put_init(Etcdserverpb__PutRequest *p, const char *key, const void *val,
    size_t len, int64_t lease)
{
	etcdserverpb__put_request__init(p);
	p->key = bytes(key);
	p->value.data = (uint8_t *)val;
	p->value.len = len;
	p->lease = lease;
}

void
etcd_delete_init(Etcdserverpb__DeleteRangeRequest *d, const char *key)
{
	etcdserverpb__delete_range_request__init(d);
	d->key = bytes(key);
}

/* ------------------------------------------------------------ the builder */

/*
 * Each compare or operation is one allocation: the protobuf-c structs and,
 * after them, the bytes of its key, range end and value.
 */
struct cmp_item {
	Etcdserverpb__Compare cmp;
};

struct op_item {
	Etcdserverpb__RequestOp op;
	union {
		Etcdserverpb__PutRequest put;
		Etcdserverpb__DeleteRangeRequest del;
		Etcdserverpb__RangeRequest range;
	} u;
};

/* Growable arrays of the pointers protobuf-c takes; each element is the
 * first member of its item, so freeing it frees the item. */
struct cmp_vec {
	Etcdserverpb__Compare **v;
	size_t n, cap;
};

struct op_vec {
	Etcdserverpb__RequestOp **v;
	size_t n, cap;
};

struct etcd_txn {
	Etcdserverpb__TxnRequest req;
	struct cmp_vec cmp;
	struct op_vec ops[2];		/* by enum etcd_branch */
};

#define VEC_PUSH(pv, p) __extension__ ({				\
	int rc_ = 0;							\
	if ((pv)->n == (pv)->cap) {					\
		size_t cap_ = (pv)->cap ? (pv)->cap * 2 : 16;		\
		__typeof__((pv)->v) v_ = realloc((pv)->v,		\
		    cap_ * sizeof(*v_));				\
		if (v_ == NULL)						\
			rc_ = -ENOMEM;					\
		else {							\
			(pv)->v = v_;					\
			(pv)->cap = cap_;				\
		}							\
	}								\
	if (rc_ == 0)							\
		(pv)->v[(pv)->n++] = (p);				\
	rc_;								\
})

#define VEC_CLEAR(pv) do {						\
	for (size_t i_ = 0; i_ < (pv)->n; i_++)				\
		free((pv)->v[i_]);					\
	(pv)->n = 0;							\
} while (0)

struct etcd_txn *
etcd_txn_new(void)
{
	struct etcd_txn *t = calloc(1, sizeof(*t));

	if (t != NULL)
		etcdserverpb__txn_request__init(&t->req);
	return t;
}

void
etcd_txn_reset(struct etcd_txn *t)
{
	VEC_CLEAR(&t->cmp);
	VEC_CLEAR(&t->ops[0]);
	VEC_CLEAR(&t->ops[1]);
}

void
etcd_txn_free(struct etcd_txn *t)
{
	if (t == NULL)
		return;
	etcd_txn_reset(t);
	free(t->cmp.v);
	free(t->ops[0].v);
	free(t->ops[1].v);
	free(t);
}

/* Allocates |size| bytes of structs followed by |extra| bytes of data;
 * *data points at the data. */
static void *
item_new(size_t size, size_t extra, uint8_t **data)
{
	uint8_t *p = calloc(1, size + extra + 1);

	if (p != NULL)
		*data = p + size;
	return p;
}

static int
cmp_add(struct etcd_txn *t, const char *key,
    Etcdserverpb__Compare__CompareResult op,
    Etcdserverpb__Compare__CompareTarget target, int64_t num,
    const void *val, size_t vlen)
{
	size_t klen = strlen(key);
	uint8_t *data;
	struct cmp_item *it = item_new(sizeof(*it), klen + vlen, &data);

	if (it == NULL)
		return -ENOMEM;
	etcdserverpb__compare__init(&it->cmp);
	it->cmp.result = op;
	it->cmp.target = target;
	memcpy(data, key, klen);
	it->cmp.key.data = data;
	it->cmp.key.len = klen;
	switch (target) {
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION:
		it->cmp.target_union_case =
		    ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
		it->cmp.version = num;
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE:
		it->cmp.target_union_case =
		    ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		it->cmp.create_revision = num;
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD:
		it->cmp.target_union_case =
		    ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		it->cmp.mod_revision = num;
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE:
		it->cmp.target_union_case =
		    ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
		if (vlen > 0)
			memcpy(data + klen, val, vlen);
		it->cmp.value.data = data + klen;
		it->cmp.value.len = vlen;
		break;
	default:
		free(it);
		return -EINVAL;
	}
	if (VEC_PUSH(&t->cmp, &it->cmp) != 0) {
		free(it);
		return -ENOMEM;
	}
	return 0;
}

int
etcd_txn_cmp_create(struct etcd_txn *t, const char *key,
    Etcdserverpb__Compare__CompareResult op, int64_t rev)
{
	return cmp_add(t, key, op, ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE,
	    rev, NULL, 0);
}

int
etcd_txn_cmp_mod(struct etcd_txn *t, const char *key,
    Etcdserverpb__Compare__CompareResult op, int64_t rev)
{
	return cmp_add(t, key, op, ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD,
	    rev, NULL, 0);
}

int
etcd_txn_cmp_version(struct etcd_txn *t, const char *key,
    Etcdserverpb__Compare__CompareResult op, int64_t version)
{
	return cmp_add(t, key, op,
	    ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION, version, NULL, 0);
}

int
etcd_txn_cmp_value(struct etcd_txn *t, const char *key,
    Etcdserverpb__Compare__CompareResult op, const void *val, size_t len)
{
	return cmp_add(t, key, op, ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE,
	    0, val, len);
}

static int
op_push(struct etcd_txn *t, enum etcd_branch b, struct op_item *it)
{
	if ((b != ETCD_SUCCESS && b != ETCD_FAILURE) ||
	    VEC_PUSH(&t->ops[b], &it->op) != 0) {
		free(it);
		return b != ETCD_SUCCESS && b != ETCD_FAILURE ? -EINVAL :
		    -ENOMEM;
	}
	return 0;
}

int
etcd_txn_put(struct etcd_txn *t, enum etcd_branch b, const char *key,
    const void *val, size_t len, int64_t lease)
{
	size_t klen = strlen(key);
	uint8_t *data;
	struct op_item *it = item_new(sizeof(*it), klen + len, &data);

	if (it == NULL)
		return -ENOMEM;
	memcpy(data, key, klen);
	if (len > 0)
		memcpy(data + klen, val, len);
	etcdserverpb__request_op__init(&it->op);
	etcdserverpb__put_request__init(&it->u.put);
	it->u.put.key.data = data;
	it->u.put.key.len = klen;
	it->u.put.value.data = data + klen;
	it->u.put.value.len = len;
	it->u.put.lease = lease;
	it->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	it->op.request_put = &it->u.put;
	return op_push(t, b, it);
}

/* A delete or range of |key|, or of every key under it. */
static int
op_keys(struct etcd_txn *t, enum etcd_branch b, const char *key, int prefix,
    int range)
{
	size_t klen = strlen(key);
	uint8_t *data;
	struct op_item *it = item_new(sizeof(*it), 2 * klen + 1, &data);
	ProtobufCBinaryData k, end = { 0, NULL };

	if (it == NULL)
		return -ENOMEM;
	memcpy(data, key, klen);
	k.data = data;
	k.len = klen;
	if (prefix) {
		end.data = data + klen;
		end.len = etcd_prefix_end(key, klen, end.data);
		if (klen == 0) {
			/* Every key: from "\0". */
			data[0] = '\0';
			k.len = 1;
			end.data = data + 1;
			end.data[0] = '\0';
			end.len = 1;
		}
	}
	etcdserverpb__request_op__init(&it->op);
	if (range) {
		etcdserverpb__range_request__init(&it->u.range);
		it->u.range.key = k;
		it->u.range.range_end = end;
		it->op.request_case =
		    ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		it->op.request_range = &it->u.range;
	} else {
		etcdserverpb__delete_range_request__init(&it->u.del);
		it->u.del.key = k;
		it->u.del.range_end = end;
		it->op.request_case =
		    ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		it->op.request_delete_range = &it->u.del;
	}
	return op_push(t, b, it);
}

int
etcd_txn_delete(struct etcd_txn *t, enum etcd_branch b, const char *key,
    int prefix)
{
	return op_keys(t, b, key, prefix, 0);
}

int
etcd_txn_range(struct etcd_txn *t, enum etcd_branch b, const char *key,
    int prefix)
{
	return op_keys(t, b, key, prefix, 1);
}

size_t
etcd_txn_ops(const struct etcd_txn *t)
{
	return t->ops[0].n > t->ops[1].n ? t->ops[0].n : t->ops[1].n;
}

size_t
etcd_txn_compares(const struct etcd_txn *t)
{
	return t->cmp.n;
}

const Etcdserverpb__TxnRequest *
etcd_txn_request(struct etcd_txn *t)
{
	t->req.n_compare = t->cmp.n;
	t->req.compare = t->cmp.v;
	t->req.n_success = t->ops[ETCD_SUCCESS].n;
	t->req.success = t->ops[ETCD_SUCCESS].v;
	t->req.n_failure = t->ops[ETCD_FAILURE].n;
	t->req.failure = t->ops[ETCD_FAILURE].v;
	return &t->req;
}

size_t
etcd_txn_size(const struct etcd_txn *t)
{
	return protobuf_c_message_get_packed_size(
	    &etcd_txn_request((struct etcd_txn *)t)->base);
}
