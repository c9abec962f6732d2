/*
 * Server calls: the API a handler uses (send, reply, finish, callbacks) and
 * the response side of the stream (HEADERS, DATA through a deferred data
 * source, trailers or Trailers-Only).
 *
 * The user's view of a call ends when its on-close callback has run; the
 * struct lives on until nghttp2 closes the stream, because nghttp2 may still
 * read queued messages and trailers from it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "grpc_server_int.h"
#include "pb_strings.h"

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, \
	strlen(v), NGHTTP2_NV_FLAG_NONE }
/* A header whose name is not a literal. */
#define NV_DYN(n, v) { (uint8_t *)(n), (uint8_t *)(v), strlen(n), \
	strlen(v), NGHTTP2_NV_FLAG_NONE }

struct grpc_call *
gsrv_call_new(struct grpc_conn *c, int32_t stream_id)
{
	struct grpc_call *call = calloc(1, sizeof(*call));

	if (call == NULL)
		return NULL;
	call->conn = c;
	call->stream_id = stream_id;
	call->state = CALL_RECV;
	/* The user holds no pointer until the handler runs. */
	call->user_done = 1;
	grpc_reader_init(&call->reader, c->srv->opts.max_message);
	STAILQ_INIT(&call->out);
	TAILQ_INSERT_TAIL(&c->calls, call, entry);
	return call;
}

void
gsrv_call_free(struct grpc_call *call)
{
	struct outbuf *ob;

	if (call == NULL)
		return;
	TAILQ_REMOVE(&call->conn->calls, call, entry);
	/* Idle from now when it was the last (grpc_server.c, idle_cb). */
	if (TAILQ_EMPTY(&call->conn->calls))
		call->conn->idle_since_ms = mono_ms();
	while ((ob = STAILQ_FIRST(&call->out)) != NULL) {
		STAILQ_REMOVE_HEAD(&call->out, entry);
		gsrv_out_sub(call, ob->len - ob->off, 0);
		free(ob->buf);
		free(ob);
	}
	if (call->deadline != NULL)
		event_free(call->deadline);
	grpc_reader_reset(&call->reader);
	free(call->req);
	free(call->path);
	free(call->message);
	free(call->auth_value);
	free(call->identity);
	if (call->held != NULL)
		protobuf_c_message_free_unpacked(call->held, NULL);
	for (size_t i = 0; i < call->n_trailers; i++) {
		free(call->trailer_key[i]);
		free(call->trailer_val[i]);
	}
	free(call);
}

/* Tells the program how a call ended (grpc_server_opts.call_ended). */
static void
scall_ended(struct grpc_call *call, int status)
{
	const struct grpc_server_opts *o = &call->conn->srv->opts;

	if (o->call_ended != NULL)
		o->call_ended(call->method != NULL ? call->method->path : NULL,
		    status, o->cb_arg);
}

/* Runs the user's on-close callback once; the user lets go of the call. */
void
gsrv_call_notify_close(struct grpc_call *call, int cancelled)
{
	void (*cb)(struct grpc_call *, int, void *) = call->on_close;

	if (call->user_done)
		return;
	call->user_done = 1;
	call->want_writable = 0;
	call->on_close = NULL;
	call->on_writable = NULL;
	call->on_message = NULL;
	if (call->state != CALL_DONE) {
		call->state = CALL_DONE;
		call->discard = 1;
		scall_ended(call, GRPC_CANCELLED);
	}
	if (cb != NULL)
		cb(call, cancelled, call->on_close_arg);
}

/* A plain HTTP answer (405, 415) that ends the stream. */
void
gsrv_call_respond_http(struct grpc_call *call, const char *status)
{
	struct grpc_conn *c = call->conn;
	nghttp2_nv nva[] = {
		NV(":status", status),
		NV("content-type", "text/plain"),
	};

	call->state = CALL_DONE;
	call->discard = 1;
	call->headers_sent = 1;
	call->plain_http = 1;
	nghttp2_submit_response(c->h2, call->stream_id, nva, 2, NULL);
	gsrv_conn_schedule_flush(c);
}

/* The call's custom trailers (grpc_call_set_trailer) after the |n| headers
 * already in |nva|; returns the new count. */
static size_t
add_custom_trailers(const struct grpc_call *call, nghttp2_nv *nva, size_t n)
{
	for (size_t i = 0; i < call->n_trailers; i++) {
		nghttp2_nv t = NV_DYN(call->trailer_key[i],
		    call->trailer_val[i]);
		nva[n++] = t;
	}
	return n;
}

static void
submit_trailers(struct grpc_call *call)
{
	char status[16];
	nghttp2_nv nva[2 + GRPC_SERVER_MAX_TRAILERS];
	size_t n = 1;

	/* The status first: NV() measures the string it is given. */
	snprintf(status, sizeof(status), "%d", call->status);
	nghttp2_nv st = NV("grpc-status", status);
	nva[0] = st;
	if (call->message != NULL) {
		nghttp2_nv m = NV("grpc-message", call->message);
		nva[n++] = m;
	}
	n = add_custom_trailers(call, nva, n);
	nghttp2_submit_trailer(call->conn->h2, call->stream_id, nva, n);
}

/*
 * nghttp2 pulls queued messages from here. Nothing queued: DEFERRED until
 * grpc_call_send resumes the stream; the end of the queue after finish:
 * EOF without END_STREAM, and the trailers carry END_STREAM.
 */
static ssize_t
data_read_cb(nghttp2_session *h2, int32_t stream_id, uint8_t *buf,
    size_t length, uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct grpc_call *call = src->ptr;
	struct outbuf *ob;
	size_t n = 0;

	while (n < length && (ob = STAILQ_FIRST(&call->out)) != NULL) {
		size_t k = ob->len - ob->off;
		if (k > length - n)
			k = length - n;
		memcpy(buf + n, ob->buf + ob->off, k);
		ob->off += k;
		n += k;
		gsrv_out_sub(call, k, 1);
		if (ob->off == ob->len) {
			STAILQ_REMOVE_HEAD(&call->out, entry);
			free(ob->buf);
			free(ob);
		}
	}
	if (STAILQ_EMPTY(&call->out) && call->trailers_queued) {
		call->trailers_queued = 0;
		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		submit_trailers(call);
		return (ssize_t)n;
	}
	if (n == 0) {
		call->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

static void
scall_resume(struct grpc_call *call)
{
	if (call->deferred) {
		call->deferred = 0;
		nghttp2_session_resume_data(call->conn->h2, call->stream_id);
	}
	gsrv_conn_schedule_flush(call->conn);
}

/*
 * Ends the stream's response with |status|: trailers behind the queued
 * messages, or Trailers-Only when nothing was sent. The user is not told;
 * callers do that where it applies.
 */
void
gsrv_call_end(struct grpc_call *call, int status, const char *msg)
{
	struct grpc_conn *c = call->conn;

	if (call->state == CALL_DONE)
		return;
	call->state = CALL_DONE;
	call->discard = 1;
	if (call->deadline != NULL)
		evtimer_del(call->deadline);
	scall_ended(call, c->closed ? GRPC_CANCELLED : status);
	if (c->closed)
		return;
	call->status = status;
	if (msg != NULL && *msg != '\0')
		call->message = grpc_message_encode(msg);
	if (!call->headers_sent) {
		char st[16];
		size_t n = 3;

		/* Trailers-Only. The status first: NV() measures it. */
		snprintf(st, sizeof(st), "%d", status);
		nghttp2_nv nva[4 + GRPC_SERVER_MAX_TRAILERS] = {
			NV(":status", "200"),
			NV("content-type", "application/grpc"),
			NV("grpc-status", st),
		};
		if (call->message != NULL) {
			nghttp2_nv m = NV("grpc-message", call->message);
			nva[n++] = m;
		}
		n = add_custom_trailers(call, nva, n);
		call->headers_sent = 1;
		nghttp2_submit_response(c->h2, call->stream_id, nva, n, NULL);
		gsrv_conn_schedule_flush(c);
		return;
	}
	call->trailers_queued = 1;
	scall_resume(call);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_call *call = arg;

	gsrv_call_end(call, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
	gsrv_call_notify_close(call, 1);
}

void
gsrv_call_arm_deadline(struct grpc_call *call)
{
	struct timeval tv = {
		(time_t)(call->timeout_ms / 1000),
		(suseconds_t)(call->timeout_ms % 1000) * 1000,
	};

	call->deadline = evtimer_new(call->conn->srv->base, deadline_cb, call);
	if (call->deadline != NULL)
		evtimer_add(call->deadline, &tv);
}

/*
 * Decodes a request message and checks its strings. NULL when it is not a
 * valid request: the call has been ended with the reason.
 */
static ProtobufCMessage *
scall_unpack(struct grpc_call *call, const uint8_t *buf, size_t len)
{
	const ProtobufCMessageDescriptor *d = call->method->request;
	ProtobufCMessage *msg;
	char path[128], err[256];

	msg = protobuf_c_message_unpack(d, NULL, len, buf);
	if (msg == NULL) {
		snprintf(err, sizeof(err), "cannot decode the request as %s",
		    d->name);
		gsrv_call_end(call, GRPC_INTERNAL, err);
		return NULL;
	}
	if (pb_utf8_check(msg, path, sizeof(path)) != 0) {
		snprintf(err, sizeof(err), "%s.%s is not valid UTF-8",
		    d->short_name, path);
		protobuf_c_message_free_unpacked(msg, NULL);
		gsrv_call_end(call, GRPC_INVALID_ARGUMENT, err);
		return NULL;
	}
	return msg;
}

/*
 * The request is whole: decode it and hand it to the handler, or first to
 * the program's authentication (grpc_server_opts.authenticate), which
 * holds the decoded request until grpc_call_proceed.
 */
void
gsrv_call_dispatch(struct grpc_call *call)
{
	const struct grpc_method *m = call->method;
	const struct grpc_server_opts *o = &call->conn->srv->opts;
	ProtobufCMessage *msg;

	msg = scall_unpack(call, call->req, call->req_len);
	/* Authentication may bind a credential to the request's bytes:
	 * they stay until grpc_call_proceed. */
	if (msg == NULL || o->authenticate == NULL) {
		free(call->req);
		call->req = NULL;
		call->req_len = 0;
	}
	if (msg == NULL)
		return;
	call->state = CALL_ACTIVE;
	call->user_done = 0;
	if (o->authenticate != NULL) {
		call->held = msg;
		o->authenticate(call, call->auth_value, o->auth_arg);
		return;
	}
	if (!m->open)
		gsrv_limits_proven(call->conn);
	m->handler(call, msg, m->arg);
	protobuf_c_message_free_unpacked(msg, NULL);
}

int
grpc_call_proceed(struct grpc_call *call, const char *identity,
    unsigned int flags)
{
	const struct grpc_method *m = call->method;
	ProtobufCMessage *msg = call->held;

	if (call->user_done || call->state != CALL_ACTIVE || msg == NULL)
		return 0;
	call->on_close = NULL;
	call->on_close_arg = NULL;
	if (identity != NULL && (call->identity = strdup(identity)) == NULL) {
		grpc_call_finish(call, GRPC_INTERNAL, "out of memory");
		return -ENOMEM;
	}
	call->auth_flags = flags;
	call->held = NULL;
	if (identity != NULL)
		gsrv_limits_proven(call->conn);
	free(call->req);
	call->req = NULL;
	call->req_len = 0;
	m->handler(call, msg, m->arg);
	protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}

const ProtobufCMessage *
grpc_call_request(const struct grpc_call *call)
{
	return call->held;
}

const uint8_t *
grpc_call_request_bytes(const struct grpc_call *call, size_t *len)
{
	*len = call->held != NULL ? call->req_len : 0;
	return call->held != NULL ? call->req : NULL;
}

unsigned int
grpc_call_auth_flags(const struct grpc_call *call)
{
	return call->auth_flags;
}

/*
 * A client-streaming call starts before any message: the handler learns of
 * the call and takes its messages through grpc_call_on_message().
 */
void
gsrv_call_start(struct grpc_call *call)
{
	const struct grpc_method *m = call->method;

	call->state = CALL_ACTIVE;
	call->user_done = 0;
	m->handler(call, NULL, m->arg);
}

/*
 * One message of a client stream (|buf| NULL: the client's end of it) to
 * the user's callback. Whatever follows the end of the call is dropped.
 */
void
gsrv_call_deliver(struct grpc_call *call, const uint8_t *buf, size_t len)
{
	ProtobufCMessage *msg = NULL;

	if (call->state != CALL_ACTIVE || call->user_done)
		return;
	if (buf != NULL && (msg = scall_unpack(call, buf, len)) == NULL) {
		gsrv_call_notify_close(call, 1);
		return;
	}
	if (call->on_message != NULL)
		call->on_message(call, msg, call->on_message_arg);
	if (msg != NULL)
		protobuf_c_message_free_unpacked(msg, NULL);
}

/* Queues a packed message and makes sure nghttp2 will pull it. */
static int
scall_queue(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct grpc_conn *c = call->conn;
	struct outbuf *ob;
	int rc;

	ob = calloc(1, sizeof(*ob));
	if (ob == NULL)
		return -ENOMEM;
	rc = grpc_frame_pack(msg, c->srv->opts.max_message, &ob->buf, &ob->len);
	if (rc != 0) {
		free(ob);
		return rc;
	}
	if (!call->headers_sent) {
		nghttp2_nv nva[] = {
			NV(":status", "200"),
			NV("content-type", "application/grpc"),
		};
		nghttp2_data_provider prd;
		prd.source.ptr = call;
		prd.read_callback = data_read_cb;
		rc = nghttp2_submit_response(c->h2, call->stream_id, nva, 2,
		    &prd);
		if (rc != 0) {
			free(ob->buf);
			free(ob);
			return -EPIPE;
		}
		call->headers_sent = 1;
	}
	STAILQ_INSERT_TAIL(&call->out, ob, entry);
	gsrv_out_add(call, ob->len);
	scall_resume(call);
	return 0;
}

int
grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct grpc_conn *c = call->conn;

	if (call->state != CALL_ACTIVE || c->closed)
		return -EPIPE;
	char why[256];

	if (gsrv_out_room(call, why, sizeof(why)) != 0) {
		call->want_writable = 1;
		c->want_writable = 1;
		return -ENOBUFS;
	}
	return scall_queue(call, msg);
}

/*
 * A unary answer is queued unless the connection already holds out_cap
 * bytes of unary answers its client has not read (a stream's stalled
 * reader on the same connection does not count: the other streams still
 * flow), or the server's output budget is spent (grpc_server_out.c):
 * then the call ends RESOURCE_EXHAUSTED instead.
 */
int
grpc_call_reply(struct grpc_call *call, const ProtobufCMessage *msg)
{
	char why[256];
	int rc;

	if (call->state != CALL_ACTIVE || call->conn->closed)
		return -EPIPE;
	call->unary = 1;
	if (gsrv_out_room(call, why, sizeof(why)) != 0) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "%s", why);
		return 0;
	}
	if ((rc = scall_queue(call, msg)) != 0)
		return rc;
	grpc_call_finish(call, GRPC_OK, NULL);
	return 0;
}

void
grpc_call_finish(struct grpc_call *call, int status, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;

	if (call->user_done)
		return;
	if (fmt != NULL) {
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) == -1)
			msg = NULL;
		va_end(ap);
	}
	/* Authentication held it and said no: counted first, while the
	 * connection surely lives (ending the call may close it). */
	if (call->held != NULL && status != GRPC_OK)
		gsrv_limits_refused(call->conn);
	gsrv_call_end(call, status, msg);
	free(msg);
	gsrv_call_notify_close(call, 0);
}

static int
trailer_key_ok(const char *key)
{
	size_t len = strlen(key);

	if (len == 0 || len > 64 || strncmp(key, "grpc-", 5) == 0 ||
	    (len >= 4 && strcmp(key + len - 4, "-bin") == 0))
		return 0;
	for (const char *p = key; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '.'))
			return 0;
	return 1;
}

static int
trailer_value_ok(const char *value)
{
	if (strlen(value) > 1024)
		return 0;
	for (const char *p = value; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			return 0;
	return 1;
}

int
grpc_call_set_trailer(struct grpc_call *call, const char *key,
    const char *value)
{
	size_t i;
	char *v;

	if (call->user_done || call->state == CALL_DONE)
		return -EPIPE;
	if (!trailer_key_ok(key) || !trailer_value_ok(value))
		return -EINVAL;
	for (i = 0; i < call->n_trailers; i++)
		if (strcmp(call->trailer_key[i], key) == 0)
			break;
	if (i == GRPC_SERVER_MAX_TRAILERS)
		return -E2BIG;
	if ((v = strdup(value)) == NULL)
		return -ENOMEM;
	if (i == call->n_trailers) {
		if ((call->trailer_key[i] = strdup(key)) == NULL) {
			free(v);
			return -ENOMEM;
		}
		call->n_trailers++;
	} else
		free(call->trailer_val[i]);
	call->trailer_val[i] = v;
	return 0;
}

void
grpc_call_on_close(struct grpc_call *call,
    void (*cb)(struct grpc_call *, int, void *), void *arg)
{
	call->on_close = cb;
	call->on_close_arg = arg;
}

void
grpc_call_on_message(struct grpc_call *call, grpc_handler_fn cb, void *arg)
{
	call->on_message = cb;
	call->on_message_arg = arg;
}

void
grpc_call_on_writable(struct grpc_call *call,
    void (*cb)(struct grpc_call *, void *), void *arg)
{
	call->on_writable = cb;
	call->on_writable_arg = arg;
}

const char *
grpc_call_identity(const struct grpc_call *call)
{
	return call->identity != NULL ? call->identity : call->conn->identity;
}

const char *
grpc_call_peer(const struct grpc_call *call)
{
	return call->conn->peer;
}

const char *
grpc_call_local(const struct grpc_call *call)
{
	return gsrv_conn_local(call->conn);
}

const char *
grpc_call_path(const struct grpc_call *call)
{
	return call->path != NULL ? call->path : "";
}

struct grpc_conn *
grpc_call_conn(const struct grpc_call *call)
{
	return call->conn;
}
