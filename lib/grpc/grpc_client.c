/*
 * The gRPC client: the client object, calls and how they end. The HTTP/2
 * connection itself lives in grpc_client_conn.c; the re-entrancy rules are
 * described in grpc_client_int.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "errf.h"
#include "grpc_client_int.h"
#include "pb_strings.h"

#define DEFAULT_CONNECT_TIMEOUT_MS	5000
#define DEFAULT_MAX_MESSAGE		(4u << 20)

static void	call_free(struct grpc_ccall *);
static void	call_timer_cb(evutil_socket_t, short, void *);

void
gcli_enter(struct grpc_client *cli)
{
	cli->busy++;
}

static void
cli_destroy(struct grpc_client *cli)
{
	struct cconn *conn;

	while ((conn = TAILQ_FIRST(&cli->conns)) != NULL) {
		TAILQ_REMOVE(&cli->conns, conn, entry);
		gcli_conn_free(conn);
	}
	if (cli->flush_ev != NULL)
		event_free(cli->flush_ev);
	free(cli->server_name);
	free(cli);
}

/* Sends what the callbacks queued; a send may itself run user callbacks
 * that queue more, hence the passes. */
static void
cli_flush(struct grpc_client *cli)
{
	struct cconn *conn;

	for (int pass = 0; pass < 64 && !cli->dead; pass++) {
		unsigned int gen = cli->cb_gen;
		TAILQ_FOREACH(conn, &cli->conns, entry) {
			gcli_conn_flush(conn);
			if (cli->cb_gen != gen)
				break;
		}
		if (cli->cb_gen == gen)
			break;
	}
}

/*
 * The outermost leave sends (or, for grpc_client_call, has flush_ev send
 * from the loop), then releases what ended while the client was busy. The
 * caller must not touch |cli| after.
 */
void
gcli_leave(struct grpc_client *cli)
{
	struct grpc_ccall *cc;
	struct cconn *conn;

	if (cli->busy > 1) {
		cli->busy--;
		return;
	}
	if (cli->flush_later) {
		cli->flush_later = 0;
		event_active(cli->flush_ev, EV_WRITE, 0);
	} else
		cli_flush(cli);
	cli->busy = 0;
	while ((cc = TAILQ_FIRST(&cli->dead_calls)) != NULL) {
		TAILQ_REMOVE(&cli->dead_calls, cc, entry);
		call_free(cc);
	}
	while ((conn = TAILQ_FIRST(&cli->dead_conns)) != NULL) {
		TAILQ_REMOVE(&cli->dead_conns, conn, entry);
		gcli_conn_free(conn);
	}
	if (cli->dead)
		cli_destroy(cli);
}

/* What grpc_client_call queued goes out from the loop. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_client *cli = arg;

	gcli_enter(cli);
	gcli_leave(cli);
}

struct grpc_client *
grpc_client_new(struct event_base *base, const struct grpc_client_opts *opts,
    void (*on_closed)(struct grpc_client *, int, const char *, void *),
    void *arg)
{
	struct grpc_client *cli;

	if (base == NULL || opts == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((cli = calloc(1, sizeof(*cli))) == NULL)
		return NULL;
	cli->base = base;
	cli->opts = *opts;
	cli->on_closed = on_closed;
	cli->arg = arg;
	TAILQ_INIT(&cli->conns);
	TAILQ_INIT(&cli->dead_conns);
	TAILQ_INIT(&cli->dead_calls);
	if ((cli->flush_ev = event_new(base, -1, 0, flush_cb, cli)) == NULL) {
		free(cli);
		return NULL;
	}
	if (opts->server_name != NULL && *opts->server_name != '\0') {
		if ((cli->server_name = strdup(opts->server_name)) == NULL) {
			event_free(cli->flush_ev);
			free(cli);
			return NULL;
		}
	}
	cli->opts.server_name = cli->server_name;
	if (cli->opts.connect_timeout_ms == 0)
		cli->opts.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	if (cli->opts.keepalive_timeout_ms == 0)
		cli->opts.keepalive_timeout_ms = 2 * cli->opts.keepalive_ms;
	if (cli->opts.max_message == 0)
		cli->opts.max_message = DEFAULT_MAX_MESSAGE;

	endpoint_format(&cli->opts.server, cli->peer, sizeof(cli->peer));
	if (cli->opts.server.kind == ENDPOINT_UNIX) {
		snprintf(cli->authority, sizeof(cli->authority), "localhost");
	} else {
		const char *h = cli->server_name != NULL ? cli->server_name :
		    cli->opts.server.host;
		snprintf(cli->authority, sizeof(cli->authority),
		    strchr(h, ':') != NULL ? "[%s]:%u" : "%s:%u", h,
		    (unsigned int)cli->opts.server.port);
	}
	return cli;
}

/* Completes every live call with CANCELLED, then closes the connections;
 * the memory goes when the outermost frame of the client returns. */
void
grpc_client_free(struct grpc_client *cli)
{
	struct cconn *conn;

	if (cli == NULL || cli->dead)
		return;
	gcli_enter(cli);
	cli->dead = 1;
	cli->conn = NULL;
	for (;;) {
		struct grpc_ccall *cc = NULL;
		TAILQ_FOREACH(conn, &cli->conns, entry) {
			if ((cc = TAILQ_FIRST(&conn->calls)) != NULL)
				break;
		}
		if (cc == NULL)
			break;
		gcli_call_complete(cc, GRPC_CANCELLED, "the client was closed");
	}
	while ((conn = TAILQ_FIRST(&cli->conns)) != NULL)
		gcli_conn_close(conn, -ECANCELED, NULL);
	gcli_leave(cli);
}

const char *
grpc_client_local_addr(const struct grpc_client *cli)
{
	if (cli == NULL || cli->conn == NULL ||
	    cli->conn->state != CCONN_READY)
		return NULL;
	return gcli_conn_local(cli->conn);
}

uint64_t
grpc_client_last_seen_ms(const struct grpc_client *cli)
{
	return cli != NULL ? cli->last_seen_ms : 0;
}

uint64_t
grpc_client_acked_ms(const struct grpc_client *cli)
{
	if (cli == NULL || cli->conn == NULL ||
	    cli->conn->state != CCONN_READY)
		return 0;
	return gcli_conn_acked_ms(cli->conn);
}

int
grpc_client_connected(const struct grpc_client *cli)
{
	return cli != NULL && cli->conn != NULL &&
	    cli->conn->state == CCONN_READY;
}

/* Starts a call; |open_send|: its request side stays open for
 * grpc_ccall_send (|req| may then be NULL). */
static struct grpc_ccall *
call_start(struct grpc_client *cli, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply,
    uint32_t timeout_ms, grpc_msg_fn on_msg, grpc_done_fn done, void *arg,
    int open_send)
{
	struct grpc_ccall *cc;
	int rc;

	if (cli == NULL || path == NULL || (req == NULL && !open_send) ||
	    reply == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (cli->dead) {
		errno = ESHUTDOWN;
		return NULL;
	}
	if ((cc = calloc(1, sizeof(*cc))) == NULL)
		return NULL;
	cc->cli = cli;
	cc->reply = reply;
	cc->on_msg = on_msg;
	cc->done = done;
	cc->arg = arg;
	cc->grpc_status = -1;
	cc->timeout_ms = timeout_ms;
	cc->open_send = open_send;
	grpc_reader_init(&cc->reader, cli->opts.max_message);
	if (req != NULL && (rc = grpc_frame_pack(req, cli->opts.max_message,
	    &cc->req, &cc->req_len)) != 0) {
		call_free(cc);
		errno = -rc;
		return NULL;
	}
	if ((cc->path = strdup(path)) == NULL ||
	    (cc->deadline = evtimer_new(cli->base, call_timer_cb, cc)) ==
	    NULL) {
		call_free(cc);
		errno = ENOMEM;
		return NULL;
	}

	/* A fresh credential per call; without one the call fails from the
	 * loop and nothing is sent. */
	if (cli->opts.cred_fn != NULL && (rc = cli->opts.cred_fn(path,
	    cc->req != NULL ? cc->req + GRPC_PREFIX_LEN : NULL,
	    cc->req != NULL ? cc->req_len - GRPC_PREFIX_LEN : 0, &cc->cred,
	    &cc->fail_msg, cli->opts.cred_arg)) != 0) {
		cc->fail_status = rc;
		cc->fail_later = 1;
	}

	gcli_enter(cli);
	if (cli->conn == NULL && (cli->conn = gcli_conn_new(cli)) == NULL) {
		gcli_leave(cli);
		call_free(cc);
		errno = ENOMEM;
		return NULL;
	}
	cc->conn = cli->conn;
	TAILQ_INSERT_TAIL(&cc->conn->calls, cc, entry);
	if (timeout_ms > 0) {
		struct timeval tv = { timeout_ms / 1000,
		    (timeout_ms % 1000) * 1000 };
		cc->deadline_at = mono_ms() + timeout_ms;
		evtimer_add(cc->deadline, &tv);
	}
	if (cc->fail_later)
		gcli_call_fail_later(cc);
	else if (cc->conn->state == CCONN_READY &&
	    gcli_conn_submit(cc->conn, cc) != 0) {
		/* This connection cannot take more streams: the call fails
		 * from the loop, the next call connects anew. */
		cli->conn = NULL;
		cc->conn->goaway = 1;
		gcli_call_fail_later(cc);
	}
	/* Sending here could fail, close the connection and end this call
	 * before the caller has it: when this is the outermost frame, the
	 * request goes out now only where that cannot happen, and the loop
	 * sends the rest (grpc.h). */
	if (cli->busy == 1 && (cc->conn != cli->conn ||
	    gcli_conn_send_early(cc->conn) != 0))
		cli->flush_later = 1;
	gcli_leave(cli);
	return cc;
}

struct grpc_ccall *
grpc_client_call(struct grpc_client *cli, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply,
    uint32_t timeout_ms, grpc_msg_fn on_msg, grpc_done_fn done, void *arg)
{
	return call_start(cli, path, req, reply, timeout_ms, on_msg, done,
	    arg, 0);
}

struct grpc_ccall *
grpc_client_stream(struct grpc_client *cli, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply,
    uint32_t timeout_ms, grpc_msg_fn on_msg, grpc_done_fn done, void *arg)
{
	return call_start(cli, path, req, reply, timeout_ms, on_msg, done,
	    arg, 1);
}

void
grpc_ccall_keep_reply(struct grpc_ccall *cc, ProtobufCMessage **keep)
{
	cc->keep = keep;
}

void
grpc_ccall_cancel(struct grpc_ccall *cc)
{
	if (cc == NULL || cc->finished)
		return;
	struct grpc_client *cli = cc->cli;
	gcli_enter(cli);
	gcli_call_complete(cc, GRPC_CANCELLED, "cancelled by the client");
	gcli_leave(cli);
}

static void
call_free(struct grpc_ccall *cc)
{
	if (cc == NULL)
		return;
	if (cc->deadline != NULL)
		event_free(cc->deadline);
	grpc_reader_reset(&cc->reader);
	for (size_t i = 0; i < cc->n_trailers; i++) {
		free(cc->trailers[i].key);
		free(cc->trailers[i].value);
	}
	free(cc->trailers);
	free(cc->grpc_message);
	free(cc->fail_msg);
	free(cc->cred);
	free(cc->req);
	free(cc->path);
	free(cc);
}

/*
 * Ends a call: stops its timer, resets its stream when the stream is still
 * open on our side, and runs done. The call stays allocated until the
 * outermost gcli_leave, so done may cancel it again or free the client.
 */
void
gcli_call_complete(struct grpc_ccall *cc, int status, const char *fmt, ...)
{
	struct cconn *conn = cc->conn;
	char *msg = NULL;

	if (cc->finished)
		return;
	cc->finished = 1;
	if (fmt != NULL) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) < 0)
			msg = NULL;
		va_end(ap);
	}
	event_del(cc->deadline);
	TAILQ_REMOVE(&conn->calls, cc, entry);
	TAILQ_INSERT_TAIL(&cc->cli->dead_calls, cc, entry);

	if (cc->stream_id > 0 && !cc->stream_closed && conn->h2 != NULL &&
	    conn->state == CCONN_READY &&
	    nghttp2_session_get_stream_local_close(conn->h2,
	    cc->stream_id) != 1)
		nghttp2_submit_rst_stream(conn->h2, NGHTTP2_FLAG_NONE,
		    cc->stream_id, NGHTTP2_CANCEL);

	cc->cli->cb_gen++;
	if (cc->done != NULL)
		cc->done(cc, status, status == GRPC_OK ? NULL : msg, cc->arg);
	free(msg);
}

/* The call's timer: its deadline, or a failure that must reach done from
 * the loop rather than from inside grpc_client_call. */
static void
call_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_ccall *cc = arg;
	struct grpc_client *cli = cc->cli;

	gcli_enter(cli);
	if (cc->finish_later)
		gcli_call_finish_stream(cc, cc->close_code);
	else if (cc->fail_later && cc->fail_status != 0)
		gcli_call_complete(cc, cc->fail_status, "%s",
		    cc->fail_msg != NULL ?
		    cc->fail_msg : "no credential for the call");
	else if (cc->fail_later)
		gcli_call_complete(cc, GRPC_UNAVAILABLE,
		    "%s: the connection cannot take new calls", cli->peer);
	else
		gcli_call_complete(cc, GRPC_DEADLINE_EXCEEDED,
		    "deadline of %u ms exceeded", cc->timeout_ms);
	gcli_leave(cli);
}

void
gcli_call_fail_later(struct grpc_ccall *cc)
{
	struct timeval tv = { 0, 0 };
	cc->fail_later = 1;
	evtimer_add(cc->deadline, &tv);
}

struct grpc_ccall *
gcli_call_find(struct cconn *conn, int32_t stream_id)
{
	struct grpc_ccall *cc;

	if (stream_id <= 0)
		return NULL;
	TAILQ_FOREACH(cc, &conn->calls, entry) {
		if (cc->stream_id == stream_id)
			return cc;
	}
	return NULL;
}

/* Records the headers that decide how a call ends. */
void
gcli_call_header(struct grpc_ccall *cc, const uint8_t *name, size_t namelen,
    const uint8_t *value, size_t valuelen)
{
	char buf[16];

#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
	if (IS(":status")) {
		if (valuelen == 0 || valuelen >= sizeof(buf))
			return;
		memcpy(buf, value, valuelen);
		buf[valuelen] = '\0';
		cc->http_status = atoi(buf);
	} else if (IS("content-type")) {
		cc->content_type = (valuelen >= 16 &&
		    strncasecmp((const char *)value, "application/grpc", 16)
		    == 0 && (valuelen == 16 || value[16] == '+' ||
		    value[16] == ';')) ? 1 : -1;
	} else if (IS("grpc-status")) {
		int v = 0;
		if (valuelen == 0 || valuelen > 3) {
			cc->grpc_status = GRPC_UNKNOWN;
			return;
		}
		for (size_t i = 0; i < valuelen; i++) {
			if (value[i] < '0' || value[i] > '9') {
				cc->grpc_status = GRPC_UNKNOWN;
				return;
			}
			v = v * 10 + (value[i] - '0');
		}
		cc->grpc_status = v;
	} else if (IS("grpc-message")) {
		free(cc->grpc_message);
		cc->grpc_message = grpc_message_decode((const char *)value,
		    valuelen);
	}
#undef IS
}

/*
 * Keeps one entry of the header block that ended the stream, unless it is
 * one of the reserved headers that say how the call ended. Bounded: what
 * does not fit is dropped, as the call's outcome does not depend on it.
 */
void
gcli_call_trailer(struct grpc_ccall *cc, const uint8_t *name, size_t namelen,
    const uint8_t *value, size_t valuelen)
{
	struct ccall_trailer *t;

	if (namelen == 0 || name[0] == ':' || valuelen > GRPC_MAX_TRAILER_LEN ||
	    cc->n_trailers >= GRPC_MAX_TRAILERS)
		return;
#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
	if (IS("grpc-status") || IS("grpc-message") || IS("content-type"))
		return;
#undef IS
	if (cc->n_trailers % 4 == 0) {
		t = reallocarray(cc->trailers, cc->n_trailers + 4,
		    sizeof(*t));
		if (t == NULL)
			return;
		cc->trailers = t;
	}
	t = &cc->trailers[cc->n_trailers];
	if ((t->key = strndup((const char *)name, namelen)) == NULL)
		return;
	if ((t->value = strndup((const char *)value, valuelen)) == NULL) {
		free(t->key);
		return;
	}
	cc->n_trailers++;
}

const char *
grpc_ccall_trailer(const struct grpc_ccall *cc, const char *key)
{
	if (cc == NULL || key == NULL)
		return NULL;
	for (size_t i = 0; i < cc->n_trailers; i++) {
		if (strcmp(cc->trailers[i].key, key) == 0)
			return cc->trailers[i].value;
	}
	return NULL;
}

/* gRPC's mapping of HTTP statuses (doc/http-grpc-status-mapping.md). */
static int
http_to_grpc(int http)
{
	switch (http) {
	case 400:
	case 415:
		return GRPC_INTERNAL;
	case 401:
		return GRPC_UNAUTHENTICATED;
	case 403:
		return GRPC_PERMISSION_DENIED;
	case 404:
		return GRPC_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504:
		return GRPC_UNAVAILABLE;
	default:
		return GRPC_UNKNOWN;
	}
}

/* gRPC's mapping of RST_STREAM codes (doc/PROTOCOL-HTTP2.md). */
static int
h2_error_to_grpc(uint32_t code)
{
	switch (code) {
	case NGHTTP2_REFUSED_STREAM:
		return GRPC_UNAVAILABLE;
	case NGHTTP2_CANCEL:
		return GRPC_CANCELLED;
	case NGHTTP2_ENHANCE_YOUR_CALM:
		return GRPC_RESOURCE_EXHAUSTED;
	case NGHTTP2_INADEQUATE_SECURITY:
		return GRPC_PERMISSION_DENIED;
	default:
		return GRPC_INTERNAL;
	}
}

/*
 * The stream ended: the server's END_STREAM (|code| 0) or its closing with
 * an error code. The status comes from the trailers when the response was a
 * proper gRPC one, else from the HTTP status or the reset code.
 */
void
gcli_call_finish_stream(struct grpc_ccall *cc, uint32_t code)
{
	const char *peer = cc->cli->peer;

	if (cc->finished)
		return;
	if (cc->http_status != 0 && cc->http_status != 200) {
		gcli_call_complete(cc, http_to_grpc(cc->http_status),
		    "%s: server answered with HTTP status %d", peer,
		    cc->http_status);
	} else if (cc->grpc_status < 0 && code != NGHTTP2_NO_ERROR) {
		gcli_call_complete(cc, h2_error_to_grpc(code),
		    "%s: stream reset by the server: %s", peer,
		    nghttp2_http2_strerror(code));
	} else if (cc->http_status == 0) {
		gcli_call_complete(cc, GRPC_INTERNAL,
		    "%s: stream ended without a response", peer);
	} else if (cc->content_type < 0) {
		gcli_call_complete(cc, GRPC_UNKNOWN,
		    "%s: response is not application/grpc", peer);
	} else if (cc->grpc_status < 0) {
		gcli_call_complete(cc, GRPC_UNKNOWN,
		    "%s: response has no grpc-status", peer);
	} else if (grpc_reader_partial(&cc->reader) && cc->grpc_status ==
	    GRPC_OK) {
		gcli_call_complete(cc, GRPC_INTERNAL,
		    "%s: stream ended inside a message", peer);
	} else if (cc->grpc_status == GRPC_OK) {
		gcli_call_complete(cc, GRPC_OK, NULL);
	} else {
		gcli_call_complete(cc, cc->grpc_status, "%s",
		    cc->grpc_message != NULL ? cc->grpc_message : "");
	}
}

/* One reassembled reply message: decode it and hand it out. Non-zero stops
 * the feed (the call ended meanwhile). */
static int
on_message(void *arg, const uint8_t *data, size_t len)
{
	struct grpc_ccall *cc = arg;
	ProtobufCMessage *m;
	char path[128];

	m = protobuf_c_message_unpack(cc->reply, NULL, len, data);
	if (m == NULL) {
		gcli_call_complete(cc, GRPC_INTERNAL,
		    "%s: cannot decode the reply as %s", cc->cli->peer,
		    cc->reply->name);
		return 1;
	}
	if (pb_utf8_check(m, path, sizeof(path)) != 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		gcli_call_complete(cc, GRPC_INTERNAL,
		    "%s: the reply's %s.%s is not "
		    "valid UTF-8", cc->cli->peer, cc->reply->short_name, path);
		return 1;
	}
	if (cc->keep != NULL && *cc->keep == NULL) {
		*cc->keep = m;
		return 0;
	}
	if (cc->on_msg != NULL) {
		cc->cli->cb_gen++;
		cc->on_msg(cc, m, cc->arg);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return cc->finished || cc->cli->dead;
}

/* DATA for a call. Returns non-zero when the call ended. */
int
gcli_call_feed(struct grpc_ccall *cc, const uint8_t *data, size_t len)
{
	if (cc->http_status != 200 || cc->content_type < 0)
		return 0;	/* decided by the HTTP status at the end */
	int rc = grpc_reader_feed(&cc->reader, data, len, on_message, cc);
	if (rc == 0 || rc == 1)
		return rc;
	if (rc == -EMSGSIZE)
		gcli_call_complete(cc, GRPC_RESOURCE_EXHAUSTED,
		    "%s: reply larger than the limit of %zu bytes",
		    cc->cli->peer, cc->cli->opts.max_message);
	else if (rc == -RDZV_ECOMPRESSED)
		gcli_call_complete(cc, GRPC_INTERNAL,
		    "%s: compressed reply, but no compression was offered",
		    cc->cli->peer);
	else
		gcli_call_complete(cc, GRPC_RESOURCE_EXHAUSTED,
		    "%s: out of memory for the reply", cc->cli->peer);
	return 1;
}

/* ---------------------------------------------------------------- sync */

struct sync_state {
	int done;
	int status;
	char *message;
	const char *key;	/* the trailer to keep, or NULL */
	char *trailer;
};

static void
sync_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct sync_state *st = arg;
	const char *t;

	st->done = 1;
	st->status = status;
	if (message != NULL)
		st->message = strdup(message);
	if (st->key != NULL && (t = grpc_ccall_trailer(cc, st->key)) != NULL)
		st->trailer = strdup(t);
}

int
grpc_unary_sync(const struct grpc_client_opts *opts, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
    uint32_t timeout_ms, ProtobufCMessage **reply, char **errmsg)
{
	return grpc_unary_sync_trailer(opts, path, req, reply_desc, timeout_ms,
	    reply, errmsg, NULL, NULL);
}

int
grpc_unary_sync_trailer(const struct grpc_client_opts *opts,
    const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply_desc, uint32_t timeout_ms,
    ProtobufCMessage **reply, char **errmsg, const char *key,
    char **trailer)
{
	struct sync_state st = { 0, GRPC_UNKNOWN, NULL, NULL, NULL };
	struct event_base *base;
	struct grpc_client *cli = NULL;
	struct grpc_ccall *cc;
	ProtobufCMessage *got = NULL;

	if (reply != NULL)
		*reply = NULL;
	if (errmsg != NULL)
		*errmsg = NULL;
	if (trailer != NULL) {
		*trailer = NULL;
		st.key = key;
	}
	if ((base = event_base_new()) == NULL ||
	    (cli = grpc_client_new(base, opts, NULL, NULL)) == NULL) {
		st.status = GRPC_INTERNAL;
		st.message = strdup("cannot create the event loop or client");
		goto out;
	}
	cc = grpc_client_call(cli, path, req, reply_desc, timeout_ms, NULL,
	    sync_done, &st);
	if (cc == NULL) {
		st.status = GRPC_INTERNAL;
		if (asprintf(&st.message, "cannot start %s: %s", path,
		    strerror(errno)) < 0)
			st.message = NULL;
		goto out;
	}
	cc->keep = &got;
	/* The connect timeout and the deadline bound this loop. */
	while (!st.done) {
		if (event_base_loop(base, EVLOOP_ONCE) < 0)
			break;
	}
	if (!st.done) {
		st.status = GRPC_INTERNAL;
		st.message = strdup("the event loop failed");
	} else if (st.status == GRPC_OK && got == NULL) {
		st.status = GRPC_INTERNAL;
		if (asprintf(&st.message, "%s: %s returned no reply",
		    cli->peer, path) < 0)
			st.message = NULL;
	}
out:
	grpc_client_free(cli);
	if (base != NULL)
		event_base_free(base);
	if (st.status == GRPC_OK && reply != NULL)
		*reply = got;
	else if (got != NULL)
		protobuf_c_message_free_unpacked(got, NULL);
	if (errmsg != NULL)
		*errmsg = st.message;
	else
		free(st.message);
	if (trailer != NULL)
		*trailer = st.trailer;
	else
		free(st.trailer);
	return st.status;
}
