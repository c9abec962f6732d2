/*
 * The etcd client: its members, unary calls with failover between them,
 * and the sync form on a private event loop (lib/etcd/etcd.h). The lease and
 * watch helpers are etcd_lease.c and etcd_watch.c; the Txn builder
 * etcd_txn.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "etcd_int.h"

#define DEFAULT_TIMEOUT_MS		5000
#define DEFAULT_CONNECT_TIMEOUT_MS	2000
#define DEFAULT_KEEPALIVE_MS		1000
#define DEFAULT_MAX_MESSAGE		(64u << 20)
#define DEFAULT_PAGE			1000
/* Pauses between rounds of the members, doubling: a leader election in
 * the cluster takes about a second. */
#define RETRY_FIRST_MS			100
#define RETRY_MAX_MS			1000

struct etcd_call {
	struct etcd *ec;
	TAILQ_ENTRY(etcd_call) entry;
	char *path;
	ProtobufCMessage *req;		/* sent on each attempt */
	int req_borrowed;		/* the sync caller's, not a copy */
	const ProtobufCMessageDescriptor *reply_desc;
	uint32_t timeout_ms;
	uint64_t deadline_at;		/* mono_ms */
	size_t attempts;		/* members tried */
	size_t member;			/* the attempt's member */
	struct grpc_ccall *cc;		/* the attempt in flight */
	ProtobufCMessage *reply;	/* kept from the attempt */
	int cancelling;
	struct event *later;		/* a failure reported from the loop */
	struct event *retry;		/* the next round of members */
	uint32_t pause_ms;		/* before the next round */
	char *retry_msg;		/* why the last round failed */
	int later_status;
	char *later_msg;
	etcd_done_fn done;
	void *arg;
	ProtobufCMessage **keep;	/* sync: takes the reply */
};

static int	ecall_attempt(struct etcd_call *);

/* ---------------------------------------------------------------- members */

static int
parse_endpoints(struct etcd *ec, const char *list, char *err, size_t errlen)
{
	const char *p = list;
	size_t n = 1;

	for (const char *q = list; *q != '\0'; q++)
		n += *q == ',';
	if ((ec->members = calloc(n, sizeof(*ec->members))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		char one[400], why[256];

		while (len > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0 || len >= sizeof(one)) {
			snprintf(err, errlen, "etcd endpoints \"%s\": %s "
			    "member %zu", list, len == 0 ? "empty" :
			    "overlong", i + 1);
			return -EINVAL;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		if (endpoint_parse(one, ETCD_DEFAULT_PORT, &ec->members[i].ep,
		    why, sizeof(why)) != 0) {
			snprintf(err, errlen, "etcd endpoints \"%s\": %s",
			    list, why);
			return -EINVAL;
		}
		endpoint_format(&ec->members[i].ep, ec->members[i].name,
		    sizeof(ec->members[i].name));
		ec->n_members++;
		p = comma != NULL ? comma + 1 : p + len;
	}
	return 0;
}

int
etcd_new(struct event_base *base, const struct etcd_opts *opts,
    struct etcd **out, char *err, size_t errlen)
{
	struct etcd *ec;
	char dummy[1];
	int rc;

	if (err == NULL || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	*err = '\0';
	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	if (opts == NULL || opts->endpoints == NULL ||
	    *opts->endpoints == '\0') {
		snprintf(err, errlen, "etcd endpoints: none given");
		return -EINVAL;
	}
	if ((ec = calloc(1, sizeof(*ec))) == NULL)
		return -ENOMEM;
	TAILQ_INIT(&ec->calls);
	TAILQ_INIT(&ec->leases);
	TAILQ_INIT(&ec->watches);
	ec->timeout_ms = opts->timeout_ms ? opts->timeout_ms :
	    DEFAULT_TIMEOUT_MS;
	ec->connect_timeout_ms = opts->connect_timeout_ms ?
	    opts->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	ec->keepalive_ms = opts->keepalive_ms ? opts->keepalive_ms :
	    DEFAULT_KEEPALIVE_MS;
	ec->max_message = opts->max_message ? opts->max_message :
	    DEFAULT_MAX_MESSAGE;
	if ((ec->endpoints = strdup(opts->endpoints)) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = parse_endpoints(ec, opts->endpoints, err, errlen)) != 0)
		goto fail;
	if (opts->ca != NULL || opts->cert != NULL || opts->key != NULL) {
		struct tls_opts to = { opts->cert, opts->key, opts->ca, 0 };
		char why[512];
		if ((opts->cert == NULL) != (opts->key == NULL)) {
			snprintf(err, errlen, "etcd TLS: a client certificate "
			    "needs both a certificate and a key file");
			rc = -EINVAL;
			goto fail;
		}
		if ((rc = tls_client_new(&to, &ec->tls, why,
		    sizeof(why))) != 0) {
			snprintf(err, errlen, "etcd TLS: %s", why);
			goto fail;
		}
	}
	if (base == NULL) {
		if ((base = event_base_new()) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		ec->own_base = 1;
	}
	ec->base = base;
	*out = ec;
	return 0;
fail:
	if (rc == -ENOMEM && *err == '\0')
		snprintf(err, errlen, "etcd: out of memory");
	etcd_free(ec);
	return rc;
}

void
etcd_free(struct etcd *ec)
{
	struct etcd_call *c;

	if (ec == NULL)
		return;
	etcd_lease_drop_all(ec);
	etcd_watch_drop_all(ec);
	/* Done callbacks may start calls: those are cancelled too, and the
	 * loop ends because each round only cancels (a callback that always
	 * starts another is the caller's loop, not ours). */
	for (size_t guard = 0; guard < 1000000 &&
	    (c = TAILQ_FIRST(&ec->calls)) != NULL; guard++)
		etcd_call_cancel(c);
	for (size_t i = 0; i < ec->n_members; i++)
		grpc_client_free(ec->members[i].cli);
	free(ec->members);
	tls_free(ec->tls);
	if (ec->own_base && ec->base != NULL) {
		/* A TLS bufferevent is released from the loop (its deferred
		 * callbacks hold it): one pass lets it go. */
		event_base_loop(ec->base, EVLOOP_NONBLOCK);
		event_base_free(ec->base);
	}
	free(ec->endpoints);
	free(ec);
}

const char *
etcd_endpoints(const struct etcd *ec)
{
	return ec->endpoints;
}

const char *
etcd_member(const struct etcd *ec)
{
	return ec->members[ec->cur].name;
}

struct grpc_client *
etcd_member_client(struct etcd *ec, size_t *idx)
{
	struct etcd_member *m = &ec->members[ec->cur];

	if (m->cli == NULL) {
		struct grpc_client_opts o;
		memset(&o, 0, sizeof(o));
		o.server = m->ep;
		o.tls = ec->tls;
		o.connect_timeout_ms = ec->connect_timeout_ms;
		o.keepalive_ms = ec->keepalive_ms;
		/* A member that stops answering (a hung host) must be left
		 * well within a lease's TTL: a PING unanswered for as long
		 * as the interval closes the connection. */
		o.keepalive_timeout_ms = ec->keepalive_ms;
		o.max_message = ec->max_message;
		if ((m->cli = grpc_client_new(ec->base, &o, NULL, NULL)) ==
		    NULL)
			return NULL;
	}
	*idx = ec->cur;
	return m->cli;
}

void
etcd_member_failed(struct etcd *ec, size_t idx)
{
	if (idx == ec->cur)
		ec->cur = (ec->cur + 1) % ec->n_members;
}

/* ------------------------------------------------------------ unary calls */

static void
ecall_free(struct etcd_call *c)
{
	if (c->later != NULL)
		event_free(c->later);
	if (c->retry != NULL)
		event_free(c->retry);
	free(c->retry_msg);
	if (c->req != NULL && !c->req_borrowed)
		protobuf_c_message_free_unpacked(c->req, NULL);
	if (c->reply != NULL)
		protobuf_c_message_free_unpacked(c->reply, NULL);
	free(c->later_msg);
	free(c->path);
	free(c);
}

/* Ends a call: its done callback, then the reply goes to a sync caller or
 * away. */
static void
ecall_finish(struct etcd_call *c, int status, const char *msg)
{
	struct etcd *ec = c->ec;
	ProtobufCMessage *reply = c->reply;

	TAILQ_REMOVE(&ec->calls, c, entry);
	ec->n_calls--;
	c->reply = NULL;
	if (status == GRPC_OK && reply == NULL) {
		status = GRPC_INTERNAL;
		msg = "etcd answered OK without a reply";
	}
	if (status != GRPC_OK && reply != NULL) {
		protobuf_c_message_free_unpacked(reply, NULL);
		reply = NULL;
	}
	if (c->done != NULL)
		c->done(c, status, status == GRPC_OK ? NULL :
		    (msg != NULL ? msg : grpc_status_name(status)), reply,
		    c->arg);
	if (c->keep != NULL && reply != NULL)
		*c->keep = reply;
	else if (reply != NULL)
		protobuf_c_message_free_unpacked(reply, NULL);
	ecall_free(c);
}

static void
ecall_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_call *c = arg;

	ecall_finish(c, c->later_status, c->later_msg);
}

/* Reports a failure from the loop: the caller of etcd_call must hold the
 * call before its done runs. */
static void
ecall_fail_later(struct etcd_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
ecall_fail_later(struct etcd_call *c, int status, const char *fmt, ...)
{
	va_list ap;

	c->later_status = status;
	free(c->later_msg);
	c->later_msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&c->later_msg, fmt, ap) < 0)
		c->later_msg = NULL;
	va_end(ap);
	event_active(c->later, EV_TIMEOUT, 0);
}

static void
ecall_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_call *c = arg;
	int rc;

	if ((rc = ecall_attempt(c)) != 0)
		ecall_finish(c, GRPC_INTERNAL, strerror(-rc));
}

/* Schedules another round of the members, when it can start before the
 * deadline. Returns 0, or -ETIMEDOUT when there is no time for it. */
static int
ecall_retry_later(struct etcd_call *c, const char *msg)
{
	uint64_t now = mono_ms();

	c->pause_ms = c->pause_ms == 0 ? RETRY_FIRST_MS :
	    (c->pause_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : c->pause_ms * 2);
	if (now + c->pause_ms >= c->deadline_at)
		return -ETIMEDOUT;
	free(c->retry_msg);
	c->retry_msg = msg != NULL ? strdup(msg) : NULL;
	struct timeval tv = { c->pause_ms / 1000,
	    (c->pause_ms % 1000) * 1000 };
	evtimer_add(c->retry, &tv);
	return 0;
}

static void
ecall_grpc_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct etcd_call *c = arg;
	struct etcd *ec = c->ec;
	char *last = NULL;

	c->cc = NULL;
	if (c->cancelling) {
		ecall_finish(c, GRPC_CANCELLED, "etcd call cancelled");
		return;
	}
	if (status == GRPC_UNAVAILABLE) {
		etcd_member_failed(ec, c->member);
		if (c->reply != NULL) {
			protobuf_c_message_free_unpacked(c->reply, NULL);
			c->reply = NULL;
		}
		/* The next member at once; after a round of them all, the
		 * cluster may be electing a leader ("etcdserver: no
		 * leader"): another round after a pause, while time is
		 * left. */
		c->attempts++;
		if (c->attempts % ec->n_members != 0) {
			if (mono_ms() < c->deadline_at && ecall_attempt(c) == 0)
				return;
		} else if (ecall_retry_later(c, msg) == 0)
			return;
		if (asprintf(&last, "etcd: no member could answer %s "
		    "(%zu tries over %zu members); the last: %s", c->path,
		    c->attempts, ec->n_members, msg != NULL ? msg :
		    "unavailable") < 0)
			last = NULL;
		ecall_finish(c, status, last != NULL ? last : msg);
		free(last);
		return;
	}
	if (status == GRPC_DEADLINE_EXCEEDED) {
		if (asprintf(&last, "etcd %s: %s: no answer within %u ms",
		    ec->members[c->member].name, c->path, c->timeout_ms) < 0)
			last = NULL;
		ecall_finish(c, status, last != NULL ? last : msg);
		free(last);
		return;
	}
	ecall_finish(c, status, msg);
}

/* Sends the call to the member in use, with what is left of its time.
 * Returns 0, or -errno when it could not be started. */
static int
ecall_attempt(struct etcd_call *c)
{
	struct etcd *ec = c->ec;
	struct grpc_client *cli;
	uint64_t now = mono_ms();

	if ((cli = etcd_member_client(ec, &c->member)) == NULL)
		return -ENOMEM;
	c->cc = grpc_client_call(cli, c->path, c->req, c->reply_desc,
	    (uint32_t)(c->deadline_at > now ? c->deadline_at - now : 1),
	    NULL, ecall_grpc_done, c);
	if (c->cc == NULL)
		return errno != 0 ? -errno : -ENOMEM;
	/* The reply is kept past the gRPC callbacks (as grpc_unary_sync
	 * does): it arrives from the loop, after this. */
	grpc_ccall_keep_reply(c->cc, &c->reply);
	return 0;
}

/* A copy of |msg| that owns its memory. */
static ProtobufCMessage *
msg_copy(const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);
	ProtobufCMessage *copy;

	if (buf == NULL)
		return NULL;
	protobuf_c_message_pack(msg, buf);
	copy = protobuf_c_message_unpack(msg->descriptor, NULL, len, buf);
	free(buf);
	return copy;
}

/* Starts a call; |borrow|: use |req| itself, which outlives the call (a
 * sync call's), instead of a copy. */
static struct etcd_call *
ecall_start(struct etcd *ec, const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply, uint32_t timeout_ms,
    etcd_done_fn done, void *arg, int borrow)
{
	struct etcd_call *c;
	int rc;

	if (ec == NULL || path == NULL || req == NULL || reply == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->ec = ec;
	c->reply_desc = reply;
	c->done = done;
	c->arg = arg;
	c->timeout_ms = timeout_ms ? timeout_ms : ec->timeout_ms;
	c->deadline_at = mono_ms() + c->timeout_ms;
	c->req_borrowed = borrow;
	c->req = borrow ? (ProtobufCMessage *)req : msg_copy(req);
	if ((c->path = strdup(path)) == NULL || c->req == NULL ||
	    (c->later = event_new(ec->base, -1, 0, ecall_later_cb, c)) ==
	    NULL ||
	    (c->retry = evtimer_new(ec->base, ecall_retry_cb, c)) == NULL) {
		ecall_free(c);
		errno = ENOMEM;
		return NULL;
	}
	TAILQ_INSERT_TAIL(&ec->calls, c, entry);
	ec->n_calls++;
	if ((rc = ecall_attempt(c)) != 0)
		ecall_fail_later(c, GRPC_INTERNAL, "etcd %s: cannot start %s: "
		    "%s", ec->members[ec->cur].name, path, strerror(-rc));
	return c;
}

struct etcd_call *
etcd_call(struct etcd *ec, const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply, uint32_t timeout_ms,
    etcd_done_fn done, void *arg)
{
	return ecall_start(ec, path, req, reply, timeout_ms, done, arg, 0);
}

struct etcd_call *
etcd_range(struct etcd *ec, const Etcdserverpb__RangeRequest *req,
    uint32_t timeout_ms, etcd_done_fn done, void *arg)
{
	return etcd_call(ec, ETCD_PATH_RANGE, &req->base,
	    &etcdserverpb__range_response__descriptor, timeout_ms, done, arg);
}

struct etcd_call *
etcd_put(struct etcd *ec, const Etcdserverpb__PutRequest *req,
    uint32_t timeout_ms, etcd_done_fn done, void *arg)
{
	return etcd_call(ec, ETCD_PATH_PUT, &req->base,
	    &etcdserverpb__put_response__descriptor, timeout_ms, done, arg);
}

struct etcd_call *
etcd_delete_range(struct etcd *ec, const Etcdserverpb__DeleteRangeRequest *req,
    uint32_t timeout_ms, etcd_done_fn done, void *arg)
{
	return etcd_call(ec, ETCD_PATH_DELETE_RANGE, &req->base,
	    &etcdserverpb__delete_range_response__descriptor, timeout_ms,
	    done, arg);
}

struct etcd_call *
etcd_txn(struct etcd *ec, const Etcdserverpb__TxnRequest *req,
    uint32_t timeout_ms, etcd_done_fn done, void *arg)
{
	return etcd_call(ec, ETCD_PATH_TXN, &req->base,
	    &etcdserverpb__txn_response__descriptor, timeout_ms, done, arg);
}

void
etcd_call_cancel(struct etcd_call *c)
{
	if (c == NULL)
		return;
	if (c->cc != NULL) {
		c->cancelling = 1;
		grpc_ccall_cancel(c->cc);	/* ecall_grpc_done finishes */
		return;
	}
	event_del(c->later);
	event_del(c->retry);
	ecall_finish(c, GRPC_CANCELLED, "etcd call cancelled");
}

size_t
etcd_pending(const struct etcd *ec)
{
	return ec->n_calls;
}

/* ------------------------------------------------------------------- sync */

static void
wait_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

int
etcd_wait(struct etcd *ec, uint32_t timeout_ms)
{
	struct event *timer = NULL;
	int expired = 0, rc = 0;

	if (ec == NULL || !ec->own_base || ec->running)
		return -EINVAL;
	if (timeout_ms > 0) {
		struct timeval tv = { timeout_ms / 1000,
		    (timeout_ms % 1000) * 1000 };
		if ((timer = evtimer_new(ec->base, wait_timer_cb, &expired)) ==
		    NULL)
			return -ENOMEM;
		evtimer_add(timer, &tv);
	}
	ec->running = 1;
	/* Every call has a deadline, so each pass ends and so does this. */
	while (ec->n_calls > 0 && !expired) {
		if (event_base_loop(ec->base, EVLOOP_ONCE) < 0) {
			rc = -EIO;
			break;
		}
	}
	ec->running = 0;
	if (timer != NULL)
		event_free(timer);
	if (rc == 0 && ec->n_calls > 0)
		rc = -ETIMEDOUT;
	return rc;
}

struct sync_state {
	int done;
	int status;
	char *message;
};

static void
sync_done(struct etcd_call *c, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	struct sync_state *st = arg;

	st->done = 1;
	st->status = status;
	if (message != NULL)
		st->message = strdup(message);
}

int
etcd_call_sync(struct etcd *ec, const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply_desc, uint32_t timeout_ms,
    ProtobufCMessage **reply, char **errmsg)
{
	struct sync_state st = { 0, GRPC_UNKNOWN, NULL };
	ProtobufCMessage *got = NULL;
	struct etcd_call *c;

	if (reply != NULL)
		*reply = NULL;
	if (errmsg != NULL)
		*errmsg = NULL;
	if (ec == NULL || !ec->own_base || ec->running)
		return -EINVAL;
	if ((c = ecall_start(ec, path, req, reply_desc, timeout_ms, sync_done,
	    &st, 1)) == NULL)
		return -errno;
	c->keep = &got;
	ec->running = 1;
	/* The call's deadline bounds this loop. */
	while (!st.done) {
		if (event_base_loop(ec->base, EVLOOP_ONCE) < 0) {
			etcd_call_cancel(c);
			break;
		}
	}
	ec->running = 0;
	if (st.status == GRPC_OK && reply != NULL)
		*reply = got;
	else if (got != NULL)
		protobuf_c_message_free_unpacked(got, NULL);
	if (errmsg != NULL)
		*errmsg = st.message;
	else
		free(st.message);
	return st.status;
}

int
etcd_range_sync(struct etcd *ec, const Etcdserverpb__RangeRequest *req,
    uint32_t timeout_ms, Etcdserverpb__RangeResponse **reply, char **errmsg)
{
	return etcd_call_sync(ec, ETCD_PATH_RANGE, &req->base,
	    &etcdserverpb__range_response__descriptor, timeout_ms,
	    (ProtobufCMessage **)reply, errmsg);
}

int
etcd_put_sync(struct etcd *ec, const Etcdserverpb__PutRequest *req,
    uint32_t timeout_ms, Etcdserverpb__PutResponse **reply, char **errmsg)
{
	return etcd_call_sync(ec, ETCD_PATH_PUT, &req->base,
	    &etcdserverpb__put_response__descriptor, timeout_ms,
	    (ProtobufCMessage **)reply, errmsg);
}

int
etcd_delete_range_sync(struct etcd *ec,
    const Etcdserverpb__DeleteRangeRequest *req, uint32_t timeout_ms,
    Etcdserverpb__DeleteRangeResponse **reply, char **errmsg)
{
	return etcd_call_sync(ec, ETCD_PATH_DELETE_RANGE, &req->base,
	    &etcdserverpb__delete_range_response__descriptor, timeout_ms,
	    (ProtobufCMessage **)reply, errmsg);
}

int
etcd_txn_sync(struct etcd *ec, const Etcdserverpb__TxnRequest *req,
    uint32_t timeout_ms, Etcdserverpb__TxnResponse **reply, char **errmsg)
{
	return etcd_call_sync(ec, ETCD_PATH_TXN, &req->base,
	    &etcdserverpb__txn_response__descriptor, timeout_ms,
	    (ProtobufCMessage **)reply, errmsg);
}

int
etcd_range_prefix_sync(struct etcd *ec, const char *prefix, int64_t rev,
    size_t page, int (*each)(const Mvccpb__KeyValue *kv, void *arg),
    void *arg, int64_t *rev_out, char **errmsg)
{
	size_t plen = prefix != NULL ? strlen(prefix) : 0;
	uint8_t *start = NULL, *end = NULL;
	size_t start_len, end_len;
	int rc = 0;

	if (errmsg != NULL)
		*errmsg = NULL;
	if (ec == NULL || each == NULL)
		return -EINVAL;
	if (page == 0)
		page = DEFAULT_PAGE;
	/* Room for the last key seen plus a NUL, grown as keys need. */
	if ((end = malloc(plen + 1)) == NULL)
		return -ENOMEM;
	end_len = etcd_prefix_end(prefix, plen, end);
	start_len = plen > 0 ? plen : 1;
	if ((start = malloc(start_len)) == NULL) {
		free(end);
		return -ENOMEM;
	}
	if (plen > 0)
		memcpy(start, prefix, plen);
	else
		start[0] = '\0';

	/* Each page starts past the last key of the one before, so this
	 * ends. */
	for (;;) {
		Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
		Etcdserverpb__RangeResponse *rep = NULL;
		req.key.data = start;
		req.key.len = start_len;
		req.range_end.data = end;
		req.range_end.len = end_len;
		req.limit = (int64_t)page;
		req.revision = rev;
		rc = etcd_range_sync(ec, &req, 0, &rep, errmsg);
		if (rc != GRPC_OK)
			break;
		if (rev <= 0) {
			rev = rep->header != NULL ? rep->header->revision : 0;
			if (rev_out != NULL)
				*rev_out = rev;
		}
		for (size_t i = 0; i < rep->n_kvs && rc == 0; i++)
			rc = each(rep->kvs[i], arg);
		int more = rep->more && rep->n_kvs > 0;
		if (rc == 0 && more) {
			const Mvccpb__KeyValue *last = rep->kvs[rep->n_kvs - 1];
			uint8_t *n = realloc(start, last->key.len + 1);
			if (n == NULL)
				rc = -ENOMEM;
			else {
				start = n;
				memcpy(start, last->key.data, last->key.len);
				start[last->key.len] = '\0';
				start_len = last->key.len + 1;
			}
		}
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		if (rc != 0 || !more)
			break;
	}
	free(start);
	free(end);
	return rc;
}
