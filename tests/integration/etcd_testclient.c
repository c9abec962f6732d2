/*
 * etcd-testclient: drives lib/etcd/etcd.h against a real etcd, for
 * test_etcd_client.py. It reads commands on stdin, one a line, and answers
 * each on stdout; one client of each kind lives for the whole run, so a
 * test can kill a member between commands and see the next one fail over.
 *
 *   etcd-testclient --endpoints E [--ca F] [--cert F --key F]
 *       [--timeout MS]
 *
 * Sync commands (the sync client, run while the main loop is blocked in
 * the stdin callback, as the store does):
 *   put KEY VALUE [LEASE]   ok rev=N   (LEASE: "lease" for the current
 *                           lease, else a lease id in hex)
 *   get KEY                 ok value=V create=N mod=N version=N lease=HEX
 *                           | ok none
 *   del KEY [prefix]        ok deleted=N
 *   list PREFIX PAGE        ok key=K value=V ... (one line each), then
 *                           ok count=N rev=N
 *   create KEY VALUE        ok succeeded=0|1 create=N: the election's
 *                           "if create_revision(KEY) == 0 put else get"
 *   fence KEY REV KEY2 V    ok succeeded=0|1: put KEY2 only if
 *                           create_revision(KEY) == REV
 *   ops N                   a Txn of N puts: ok succeeded=1 ops=N size=B
 *   big BYTES               a put of a BYTES-long value
 *   multi N                 N puts sent at once, then etcd_wait: ok done=N
 *   member                  ok member=HOST:PORT (the sync client's)
 * Failures answer "err STATUS message".
 *
 * Async commands (the async client on the main loop):
 *   lease TTL               later: "lease granted id=HEX ttl=N" and
 *                           "lease lost why=..."
 *   lease-free              revokes it: ok
 *   watch ID KEY key|prefix FROM
 *                           later: "watch ID created rev=N",
 *                           "watch ID PUT|DELETE key=K value=V rev=N",
 *                           "watch ID end status=S message=M"
 *   unwatch ID              ok
 *   quit
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "etcd.h"

#define MAX_WATCHES	16

static struct etcd *sync_ec, *async_ec;
static struct etcd_lease *lease;
static struct etcd_watch *watches[MAX_WATCHES];
static uint32_t timeout_ms;
static struct event_base *base;

static void
fail(int st, char *msg)
{
	if (st < 0)
		printf("err %s\n", strerror(-st));
	else
		printf("err %s %s\n", grpc_status_name(st),
		    msg != NULL ? msg : "");
	free(msg);
}

static void
print_kv(const char *pre, const Mvccpb__KeyValue *kv)
{
	printf("%skey=%.*s value=%.*s create=%" PRId64 " mod=%" PRId64
	    " version=%" PRId64 " lease=%" PRIx64 "\n", pre, (int)kv->key.len,
	    (const char *)kv->key.data, (int)kv->value.len,
	    (const char *)kv->value.data, kv->create_revision,
	    kv->mod_revision, kv->version, (uint64_t)kv->lease);
}

static int
list_each(const Mvccpb__KeyValue *kv, void *arg)
{
	print_kv("ok ", kv);
	++*(size_t *)arg;
	return 0;
}

static void
cmd_put(char **av, int ac)
{
	Etcdserverpb__PutRequest req;
	Etcdserverpb__PutResponse *rep;
	char *msg;

	int64_t id = 0;
	if (ac > 3)
		id = strcmp(av[3], "lease") == 0 ?
		    (lease != NULL ? etcd_lease_id(lease) : 0) :
		    (int64_t)strtoull(av[3], NULL, 16);
	etcd_put_init(&req, av[1], av[2], strlen(av[2]), id);
	int st = etcd_put_sync(sync_ec, &req, timeout_ms, &rep, &msg);
	if (st != GRPC_OK) {
		fail(st, msg);
		return;
	}
	printf("ok rev=%" PRId64 "\n", rep->header->revision);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
}

static void
cmd_get(char **av)
{
	Etcdserverpb__RangeRequest req;
	Etcdserverpb__RangeResponse *rep;
	char *msg;

	etcd_range_init(&req, av[1]);
	int st = etcd_range_sync(sync_ec, &req, timeout_ms, &rep, &msg);
	if (st != GRPC_OK) {
		fail(st, msg);
		return;
	}
	if (rep->n_kvs == 0)
		printf("ok none\n");
	else
		print_kv("ok ", rep->kvs[0]);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
}

static void
cmd_del(char **av, int ac)
{
	Etcdserverpb__DeleteRangeRequest req;
	Etcdserverpb__DeleteRangeResponse *rep;
	uint8_t end[512];
	char *msg;

	etcd_delete_init(&req, av[1]);
	if (ac > 2 && strlen(av[1]) < sizeof(end)) {
		req.range_end.data = end;
		req.range_end.len = etcd_prefix_end(av[1], strlen(av[1]), end);
	}
	int st = etcd_delete_range_sync(sync_ec, &req, timeout_ms, &rep,
	    &msg);
	if (st != GRPC_OK) {
		fail(st, msg);
		return;
	}
	printf("ok deleted=%" PRId64 "\n", rep->deleted);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
}

static void
cmd_list(char **av)
{
	size_t count = 0;
	int64_t rev = 0;
	char *msg;

	int st = etcd_range_prefix_sync(sync_ec, av[1], 0,
	    (size_t)atol(av[2]), list_each, &count, &rev, &msg);
	if (st != GRPC_OK) {
		fail(st, msg);
		return;
	}
	printf("ok count=%zu rev=%" PRId64 "\n", count, rev);
}

/* Runs |t| and prints whether it succeeded; |show| prints the first
 * range's key on failure. */
static void
run_txn(struct etcd_txn *t, const char *extra)
{
	Etcdserverpb__TxnResponse *rep;
	char *msg;

	int st = etcd_txn_sync(sync_ec, etcd_txn_request(t), timeout_ms, &rep,
	    &msg);
	if (st != GRPC_OK) {
		fail(st, msg);
		return;
	}
	printf("ok succeeded=%d%s", rep->succeeded ? 1 : 0, extra);
	for (size_t i = 0; i < rep->n_responses; i++) {
		const Etcdserverpb__ResponseOp *op = rep->responses[i];
		if (op->response_case ==
		    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
		    op->response_range->n_kvs > 0)
			printf(" create=%" PRId64,
			    op->response_range->kvs[0]->create_revision);
		else if (op->response_case ==
		    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT)
			printf(" create=%" PRId64, rep->header->revision);
	}
	printf("\n");
	protobuf_c_message_free_unpacked(&rep->base, NULL);
}

static void
cmd_create(char **av)
{
	struct etcd_txn *t = etcd_txn_new();

	etcd_txn_cmp_create(t, av[1], ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL,
	    0);
	etcd_txn_put(t, ETCD_SUCCESS, av[1], av[2], strlen(av[2]), 0);
	etcd_txn_range(t, ETCD_FAILURE, av[1], 0);
	run_txn(t, "");
	etcd_txn_free(t);
}

static void
cmd_fence(char **av)
{
	struct etcd_txn *t = etcd_txn_new();

	etcd_txn_cmp_create(t, av[1], ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL,
	    strtoll(av[2], NULL, 10));
	etcd_txn_put(t, ETCD_SUCCESS, av[3], av[4], strlen(av[4]), 0);
	run_txn(t, "");
	etcd_txn_free(t);
}

static void
cmd_ops(char **av)
{
	struct etcd_txn *t = etcd_txn_new();
	long n = atol(av[1]);
	char key[64], extra[64];

	for (long i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "/ops/%ld", i);
		etcd_txn_put(t, ETCD_SUCCESS, key, "v", 1, 0);
	}
	snprintf(extra, sizeof(extra), " ops=%zu size=%zu", etcd_txn_ops(t),
	    etcd_txn_size(t));
	run_txn(t, extra);
	etcd_txn_free(t);
}

static void
cmd_big(char **av)
{
	size_t n = (size_t)atol(av[1]);
	char *v = malloc(n + 1);
	Etcdserverpb__PutRequest req;
	char *msg;

	memset(v, 'x', n);
	v[n] = '\0';
	etcd_put_init(&req, "/big", v, n, 0);
	int st = etcd_put_sync(sync_ec, &req, timeout_ms, NULL, &msg);
	if (st != GRPC_OK)
		fail(st, msg);
	else
		printf("ok\n");
	free(v);
}

static void
multi_done(struct etcd_call *c, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	if (status == GRPC_OK)
		++*(int *)arg;
	else
		printf("multi: %s %s\n", grpc_status_name(status), message);
}

static void
cmd_multi(char **av)
{
	int n = atoi(av[1]), ok = 0;
	char key[64], val[64];

	for (int i = 0; i < n; i++) {
		Etcdserverpb__PutRequest req;
		snprintf(key, sizeof(key), "/multi/%d", i);
		snprintf(val, sizeof(val), "%d", i);
		etcd_put_init(&req, key, val, strlen(val), 0);
		if (etcd_put(sync_ec, &req, timeout_ms, multi_done, &ok) ==
		    NULL)
			printf("multi: cannot start: %s\n", strerror(errno));
	}
	int rc = etcd_wait(sync_ec, 0);
	if (rc != 0)
		fail(rc, NULL);
	else
		printf("ok done=%d pending=%zu\n", ok, etcd_pending(sync_ec));
}

static void
lease_cb(struct etcd_lease *l, enum etcd_lease_event ev, const char *why,
    void *arg)
{
	if (ev == ETCD_LEASE_GRANTED)
		printf("lease granted id=%" PRIx64 " ttl=%" PRId64 "\n",
		    (uint64_t)etcd_lease_id(l), etcd_lease_ttl(l));
	else {
		printf("lease lost why=%s\n", why);
		etcd_lease_free(l);
		lease = NULL;
	}
}

static void
watch_event(struct etcd_watch *w, const Mvccpb__Event *ev, int64_t rev,
    void *arg)
{
	printf("watch %ld %s key=%.*s value=%.*s rev=%" PRId64 "\n",
	    (long)(intptr_t)arg,
	    ev->type == MVCCPB__EVENT__EVENT_TYPE__PUT ? "PUT" : "DELETE",
	    (int)ev->kv->key.len, (const char *)ev->kv->key.data,
	    (int)ev->kv->value.len, (const char *)ev->kv->value.data, rev);
}

static void
watch_created(struct etcd_watch *w, int64_t rev, void *arg)
{
	printf("watch %ld created rev=%" PRId64 "\n", (long)(intptr_t)arg,
	    rev);
}

static void
watch_end(struct etcd_watch *w, int status, const char *message, void *arg)
{
	long id = (long)(intptr_t)arg;

	printf("watch %ld end status=%s message=%s\n", id,
	    grpc_status_name(status), message);
	etcd_watch_free(w);
	watches[id] = NULL;
}

static void
cmd_watch(char **av)
{
	long id = atol(av[1]);
	struct etcd_watch_opts o = { av[2], strcmp(av[3], "prefix") == 0,
	    strtoll(av[4], NULL, 10), 0 };

	if (id < 0 || id >= MAX_WATCHES || watches[id] != NULL) {
		printf("err bad watch id\n");
		return;
	}
	watches[id] = etcd_watch_new(async_ec, &o, watch_event, watch_created,
	    watch_end, (void *)(intptr_t)id);
	if (watches[id] == NULL)
		printf("err %s\n", strerror(errno));
	else
		printf("ok\n");
}

/* One command line; returns 1 on quit. */
static int
command(char *line)
{
	char *av[8];
	int ac = 0;

	for (char *tok = strtok(line, " "); tok != NULL && ac < 8;
	    tok = strtok(NULL, " "))
		av[ac++] = tok;
	if (ac == 0)
		return 0;
#define IS(name, n) (strcmp(av[0], name) == 0 && ac >= (n))
	if (IS("quit", 1))
		return 1;
	else if (IS("put", 3))
		cmd_put(av, ac);
	else if (IS("get", 2))
		cmd_get(av);
	else if (IS("del", 2))
		cmd_del(av, ac);
	else if (IS("list", 3))
		cmd_list(av);
	else if (IS("create", 3))
		cmd_create(av);
	else if (IS("fence", 5))
		cmd_fence(av);
	else if (IS("ops", 2))
		cmd_ops(av);
	else if (IS("big", 2))
		cmd_big(av);
	else if (IS("multi", 2))
		cmd_multi(av);
	else if (IS("member", 1))
		printf("ok member=%s async=%s\n", etcd_member(sync_ec),
		    etcd_member(async_ec));
	else if (IS("lease", 2)) {
		etcd_lease_free(lease);
		lease = etcd_lease_new(async_ec, atol(av[1]), lease_cb, NULL);
		printf(lease != NULL ? "ok\n" : "err lease\n");
	} else if (IS("lease-free", 1)) {
		etcd_lease_free(lease);
		lease = NULL;
		printf("ok\n");
	} else if (IS("watch", 5))
		cmd_watch(av);
	else if (IS("unwatch", 2)) {
		long id = atol(av[1]);
		if (id >= 0 && id < MAX_WATCHES) {
			etcd_watch_free(watches[id]);
			watches[id] = NULL;
		}
		printf("ok\n");
	} else
		printf("err unknown command %s\n", av[0]);
#undef IS
	return 0;
}

static void
stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	struct evbuffer *in = arg;
	char *line;

	if (evbuffer_read(in, fd, 4096) <= 0) {
		event_base_loopbreak(base);
		return;
	}
	while ((line = evbuffer_readln(in, NULL, EVBUFFER_EOL_LF)) != NULL) {
		int quit = command(line);
		free(line);
		if (quit) {
			event_base_loopbreak(base);
			return;
		}
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "endpoints", required_argument, NULL, 'e' },
		{ "ca", required_argument, NULL, 'a' },
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct etcd_opts o;
	char err[512];
	int c, rc;

	memset(&o, 0, sizeof(o));
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': o.endpoints = optarg; break;
		case 'a': o.ca = optarg; break;
		case 'c': o.cert = optarg; break;
		case 'k': o.key = optarg; break;
		case 't': timeout_ms = (uint32_t)atol(optarg); break;
		default:
			fprintf(stderr, "usage: etcd-testclient --endpoints E "
			    "[--ca F] [--cert F --key F] [--timeout MS]\n");
			return 2;
		}
	}
	base = event_base_new();
	if ((rc = etcd_new(NULL, &o, &sync_ec, err, sizeof(err))) != 0 ||
	    (rc = etcd_new(base, &o, &async_ec, err, sizeof(err))) != 0) {
		fprintf(stderr, "etcd-testclient: %s\n", err);
		return 2;
	}
	struct evbuffer *in = evbuffer_new();
	struct event *ev = event_new(base, STDIN_FILENO, EV_READ | EV_PERSIST,
	    stdin_cb, in);
	event_add(ev, NULL);
	printf("ready\n");
	event_base_dispatch(base);
	event_free(ev);
	evbuffer_free(in);
	etcd_free(async_ec);
	etcd_free(sync_ec);
	/* What the async client closed goes away from the loop (lib/etcd/etcd.h). */
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	return 0;
}
