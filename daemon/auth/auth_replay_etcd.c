/*
 * The record of accepted MUNGE credentials shared by rdzvd's replicas on
 * an etcd store (issue 42; docs/SECURITY.md). auth_replay.c keeps each
 * replica's own record; with an etcd store each credential is also
 * recorded under PREFIX/replay/<hex of its record>, put only when absent,
 * with a lease that ends when the credential expires. A credential used
 * at one replica is thus refused at another after a failover, also when
 * munged restarted meanwhile (its own replay cache lives in its memory).
 * What is recorded is opaque to this file: the bytes auth_replay.c keys
 * its record on, and their expiry.
 *
 * Called from the decoding threads (auth.c), each with a synchronous etcd
 * client of its own, made at its first use and kept for the thread's
 * life. Never logs: a failure is an error the caller turns into a refusal
 * (the credential cannot be shown to be fresh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth_int.h"
#include "etcd.h"

#define KEY_MAX		512
/* Seconds the record outlives the credential: clocks differ a little. */
#define REPLAY_SLACK_S	30

static struct {
	char		endpoints[1024];
	char		prefix[256];
	char		*ca, *cert, *key;
	uint32_t	timeout_ms;
} S;

static __thread struct etcd	*tl_ec;

static int
client(void)
{
	struct etcd_opts	eo = { 0 };
	char			e[256];

	if (tl_ec != NULL)
		return 0;
	eo.endpoints = S.endpoints;
	eo.ca = S.ca;
	eo.cert = S.cert;
	eo.key = S.key;
	eo.timeout_ms = S.timeout_ms;
	return etcd_new(NULL, &eo, &tl_ec, e, sizeof(e)) == 0 ? 0 : -1;
}

/* 1 when another replica (or this one) recorded |md| before; 0 after
 * recording it now; -1 when etcd could not be asked. */
static int
shared_seen(const uint8_t *md, size_t len, time_t expires, void *arg)
{
	Etcdserverpb__LeaseGrantRequest		 lg =
	    ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantResponse	*lr = NULL;
	Etcdserverpb__TxnResponse		*tr = NULL;
	struct etcd_txn				*t = NULL;
	char					 key[KEY_MAX], *msg = NULL;
	size_t					 off;
	int64_t					 ttl = (int64_t)(expires - time(NULL));
	int					 rc = -1, st;

	if (client() != 0)
		return -1;
	off = (size_t)snprintf(key, sizeof(key), "%s/replay/", S.prefix);
	for (size_t i = 0; i < len && off + 3 < sizeof(key); i++)
		off += (size_t)snprintf(key + off, sizeof(key) - off, "%02x",
		    md[i]);
	lg.ttl = (ttl > 0 ? ttl : 0) + REPLAY_SLACK_S;
	st = etcd_call_sync(tl_ec, "/etcdserverpb.Lease/LeaseGrant", &lg.base,
	    &etcdserverpb__lease_grant_response__descriptor, S.timeout_ms,
	    (ProtobufCMessage **)&lr, &msg);
	if (st != 0 || lr == NULL)
		goto out;
	if ((t = etcd_txn_new()) == NULL ||
	    etcd_txn_cmp_create(t, key,
	    ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, 0) != 0 ||
	    etcd_txn_put(t, ETCD_SUCCESS, key, "", 0, lr->id) != 0)
		goto out;
	free(msg);
	msg = NULL;
	st = etcd_txn_sync(tl_ec, etcd_txn_request(t), S.timeout_ms, &tr,
	    &msg);
	if (st == 0 && tr != NULL)
		rc = tr->succeeded ? 0 : 1;
out:
	free(msg);
	etcd_txn_free(t);
	if (lr != NULL)
		protobuf_c_message_free_unpacked(&lr->base, NULL);
	if (tr != NULL)
		protobuf_c_message_free_unpacked(&tr->base, NULL);
	return rc;
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

void
auth_replay_etcd_start(const char *endpoints, const char *prefix,
    const char *ca, const char *cert, const char *key)
{
	snprintf(S.endpoints, sizeof(S.endpoints), "%s", endpoints);
	snprintf(S.prefix, sizeof(S.prefix), "%s", prefix);
	S.ca = dup_or_null(ca);
	S.cert = dup_or_null(cert);
	S.key = dup_or_null(key);
	S.timeout_ms = 5000;
	auth_replay_share(shared_seen, NULL);
}
