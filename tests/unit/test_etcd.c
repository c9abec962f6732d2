/*
 * Unit tests for the parts of lib/etcd*.c that need no etcd: the end of a
 * prefix's range, the Txn builder (what it counts, what it packs, that it
 * owns its copies) and the client's checks of its options. The calls
 * themselves are tested against a real etcd (test_etcd_client.py).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "etcd.h"

static void
check_prefix_end(const char *prefix, size_t len, const char *want,
    size_t want_len)
{
	uint8_t end[64];

	size_t n = etcd_prefix_end(prefix, len, end);
	CHECK_INT(n, want_len);
	CHECK(memcmp(end, want, want_len) == 0);
}

static void
test_prefix_end(void)
{
	check_prefix_end("/rdzv/", 6, "/rdzv0", 6);
	check_prefix_end("a", 1, "b", 1);
	check_prefix_end("a\xff", 2, "b", 1);
	check_prefix_end("a\xfe\xff\xff", 4, "a\xff", 2);
	/* Nothing can follow: every key ("\0"). */
	check_prefix_end("\xff\xff", 2, "\0", 1);
	check_prefix_end("", 0, "\0", 1);
}

static const Etcdserverpb__RequestOp *
op(const Etcdserverpb__TxnRequest *r, int failure, size_t i)
{
	return failure ? r->failure[i] : r->success[i];
}

static void
test_txn_builder(void)
{
	struct etcd_txn *t = etcd_txn_new();
	char key[32], val[32];

	CHECK(t != NULL);
	CHECK_INT(etcd_txn_ops(t), 0);
	CHECK_INT(etcd_txn_compares(t), 0);

	/* Copies: the buffers are reused after each call. */
	snprintf(key, sizeof(key), "/p/leader/1");
	CHECK_INT(etcd_txn_cmp_create(t, key,
	    ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, 42), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "/p/job/%d", i);
		snprintf(val, sizeof(val), "value %d", i);
		CHECK_INT(etcd_txn_put(t, ETCD_SUCCESS, key, val, strlen(val),
		    i == 4 ? 0x1234 : 0), 0);
	}
	CHECK_INT(etcd_txn_delete(t, ETCD_SUCCESS, "/p/old/", 1), 0);
	CHECK_INT(etcd_txn_range(t, ETCD_FAILURE, "/p/leader/1", 0), 0);
	memset(key, 'X', sizeof(key) - 1);
	memset(val, 'X', sizeof(val) - 1);
	CHECK_INT(etcd_txn_ops(t), 6);
	CHECK_INT(etcd_txn_compares(t), 1);
	CHECK_INT(etcd_txn_put(t, 7, "/k", "v", 1, 0), -EINVAL);

	const Etcdserverpb__TxnRequest *r = etcd_txn_request(t);
	CHECK_INT(r->n_compare, 1);
	CHECK_INT(r->compare[0]->target,
	    ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE);
	CHECK_INT(r->compare[0]->target_union_case,
	    ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION);
	CHECK_INT(r->compare[0]->create_revision, 42);
	CHECK(r->compare[0]->key.len == 11 &&
	    memcmp(r->compare[0]->key.data, "/p/leader/1", 11) == 0);
	CHECK_INT(r->n_success, 6);
	CHECK_INT(r->n_failure, 1);
	const Etcdserverpb__PutRequest *p = op(r, 0, 3)->request_put;
	CHECK_INT(op(r, 0, 3)->request_case,
	    ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT);
	CHECK(p->key.len == 8 && memcmp(p->key.data, "/p/job/3", 8) == 0);
	CHECK(p->value.len == 7 && memcmp(p->value.data, "value 3", 7) == 0);
	CHECK_INT(op(r, 0, 4)->request_put->lease, 0x1234);
	const Etcdserverpb__DeleteRangeRequest *d =
	    op(r, 0, 5)->request_delete_range;
	CHECK(d->range_end.len == 7 &&
	    memcmp(d->range_end.data, "/p/old0", 7) == 0);
	CHECK_INT(op(r, 1, 0)->request_case,
	    ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE);
	CHECK_INT(op(r, 1, 0)->request_range->range_end.len, 0);

	/* The size is what goes on the wire, and it round-trips. */
	size_t size = etcd_txn_size(t);
	uint8_t *buf = malloc(size);
	CHECK_INT(protobuf_c_message_pack(&r->base, buf), size);
	Etcdserverpb__TxnRequest *back =
	    etcdserverpb__txn_request__unpack(NULL, size, buf);
	CHECK(back != NULL && back->n_success == 6 && back->n_failure == 1);
	if (back != NULL)
		etcdserverpb__txn_request__free_unpacked(back, NULL);
	free(buf);

	/* A big value counts in full. */
	char *big = calloc(1, 100000);
	CHECK_INT(etcd_txn_put(t, ETCD_SUCCESS, "/big", big, 100000, 0), 0);
	CHECK(etcd_txn_size(t) > size + 100000);
	free(big);

	/* Reset empties it for reuse. A prefix "" is every key: from "\0"
	 * to "\0". */
	etcd_txn_reset(t);
	CHECK_INT(etcd_txn_ops(t), 0);
	CHECK_INT(etcd_txn_compares(t), 0);
	CHECK_INT(etcd_txn_delete(t, ETCD_SUCCESS, "", 1), 0);
	r = etcd_txn_request(t);
	d = r->success[0]->request_delete_range;
	CHECK(d->key.len == 1 && d->key.data[0] == 0);
	CHECK(d->range_end.len == 1 && d->range_end.data[0] == 0);
	CHECK_INT(etcd_txn_cmp_value(t, "/v", ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL,
	    "x", 1), 0);
	r = etcd_txn_request(t);
	CHECK_INT(r->n_compare, 1);
	CHECK(r->compare[0]->value.len == 1 && r->compare[0]->value.data[0] ==
	    'x');
	etcd_txn_free(t);
	etcd_txn_free(NULL);
}

static void
check_bad_opts(const struct etcd_opts *o, const char *msg)
{
	struct etcd *ec = (struct etcd *)1;
	char err[256] = "";

	CHECK(etcd_new(NULL, o, &ec, err, sizeof(err)) < 0);
	CHECK(ec == NULL);
	CHECK_CONTAINS(err, msg);
}

static void
test_options(void)
{
	struct etcd_opts o;
	struct etcd *ec = NULL;
	char err[256] = "";

	memset(&o, 0, sizeof(o));
	check_bad_opts(&o, "none given");
	o.endpoints = "127.0.0.1:2379,";
	check_bad_opts(&o, "empty member 2");
	o.endpoints = "127.0.0.1:70000";
	check_bad_opts(&o, "etcd endpoints");
	o.endpoints = "127.0.0.1:2379";
	o.cert = "/nonexistent/cert.pem";
	check_bad_opts(&o, "needs both");
	o.key = "/nonexistent/key.pem";
	check_bad_opts(&o, "etcd TLS");

	memset(&o, 0, sizeof(o));
	o.endpoints = " 127.0.0.1:2379 , [::1]:2380,localhost";
	CHECK_INT(etcd_new(NULL, &o, &ec, err, sizeof(err)), 0);
	CHECK_STR(etcd_member(ec), "127.0.0.1:2379");
	CHECK_STR(etcd_endpoints(ec), o.endpoints);
	CHECK_INT(etcd_pending(ec), 0);
	CHECK_INT(etcd_wait(ec, 10), 0);
	/* Leases and watches need a client on the caller's loop. */
	errno = 0;
	CHECK(etcd_lease_new(ec, 5, NULL, NULL) == NULL && errno == EINVAL);
	struct etcd_watch_opts wo = { "/k", 0, 0, 0 };
	errno = 0;
	CHECK(etcd_watch_new(ec, &wo, NULL, NULL, NULL, NULL) == NULL &&
	    errno == EINVAL);
	etcd_free(ec);
	etcd_free(NULL);
}

int
main(void)
{
	test_prefix_end();
	test_txn_builder();
	test_options();
	return check_done("test_etcd");
}
