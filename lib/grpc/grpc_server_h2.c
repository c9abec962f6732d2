/*
 * The server's HTTP/2 session on nghttp2: request headers and DATA in,
 * validation (method, content type, path, size), dispatch once the request
 * has ended; and, at the end of this file, a connection's bytes in and out.
 * nghttp2's callbacks never write to the socket or close the connection: a
 * callback that hits a fatal error returns NGHTTP2_ERR_CALLBACK_FAILURE and
 * the caller of nghttp2 tears the connection down.
 *
 * TLS connections go through libevent's OpenSSL bufferevent. Cleartext ones
 * (loopback TCP, unix sockets) use the socket directly: a flush writes what
 * nghttp2 produced at once, in one writev, and asks for writability only
 * when the socket did not take it all. A bufferevent registers for EV_WRITE
 * and removes it again around every message, two epoll_ctl calls each, and
 * asks FIONREAD before every read; with ten thousand nodes joining at once
 * that was most of the daemon's system calls.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "errf.h"
#include "grpc_server_int.h"

/* A path longer than this names no method of ours. */
#define MAX_PATH_LEN	1024
/* Cleartext reads: bytes per recv, and recvs per readable event (more
 * waits for the next turn, so one busy peer cannot starve the others). */
#define READ_CHUNK		16384
#define READS_PER_EVENT		4
/* Cleartext writes: output limits (GRPC_SERVER_WBUF_MAX) written per flush
 * before the rest waits for the next turn. */
#define FLUSH_ROUNDS		16
/*
 * Rapid Reset (CVE-2023-44487): streams a client may reset at once, and
 * per second after that. Legitimate clients reset a stream when they
 * cancel a call or its deadline passes; one that resets hundreds makes us
 * start work that nobody waits for.
 */
#define RESET_BURST		200
#define RESET_PER_S		33

/*
 * Cleartext frames go to the server's staging buffer (every connection's,
 * in turn: it is written out, or what the socket did not take moved to the
 * connection's own output, before the flush returns), or after the
 * connection's own output while that still holds bytes; TLS ones to the
 * bufferevent's.
 */
static ssize_t
send_cb(nghttp2_session *h2, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct grpc_conn *c = arg;
	struct grpc_server *srv = c->srv;

	/* Backpressure: nghttp2 keeps the frame until the write callback. */
	if (gsrv_conn_unwritten(c) + srv->stage_len >= GRPC_SERVER_WBUF_MAX) {
		c->send_blocked = 1;
		return NGHTTP2_ERR_WOULDBLOCK;
	}
	if (c->bev != NULL || (c->out != NULL &&
	    evbuffer_get_length(c->out) > 0)) {
		if (evbuffer_add(gsrv_conn_output(c), data, len) != 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return (ssize_t)len;
	}
	/* Below the limit it takes one more frame, whatever its size. */
	if (srv->stage_len + len > srv->stage_cap) {
		size_t cap = srv->stage_len + len < GRPC_SERVER_WBUF_MAX ?
		    GRPC_SERVER_WBUF_MAX : srv->stage_len + len;
		uint8_t *p = realloc(srv->stage, cap);

		if (p == NULL)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		srv->stage = p;
		srv->stage_cap = cap;
	}
	memcpy(srv->stage + srv->stage_len, data, len);
	srv->stage_len += len;
	return (ssize_t)len;
}

static int
begin_frame_cb(nghttp2_session *h2, const nghttp2_frame_hd *hd, void *arg)
{
	struct grpc_conn *c = arg;

	c->last_seen_ms = mono_ms();
	return 0;
}

static int
begin_headers_cb(nghttp2_session *h2, const nghttp2_frame *frame, void *arg)
{
	struct grpc_conn *c = arg;

	if (frame->hd.type != NGHTTP2_HEADERS ||
	    frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct grpc_call *call = gsrv_call_new(c, frame->hd.stream_id);
	if (call == NULL)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	nghttp2_session_set_stream_user_data(h2, frame->hd.stream_id, call);
	return 0;
}

static int
hdr_is(const uint8_t *name, size_t namelen, const char *s)
{
	size_t n = strlen(s);
	return namelen == n && memcmp(name, s, n) == 0;
}

static int
header_cb(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
    size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
    void *arg)
{
	struct grpc_call *call;

	if (frame->hd.type != NGHTTP2_HEADERS ||
	    frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	call = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
	if (call == NULL)
		return 0;
	if (hdr_is(name, namelen, ":method")) {
		call->bad_method = valuelen != 4 || memcmp(value, "POST",
		    4) != 0;
	} else if (hdr_is(name, namelen, ":path")) {
		if (call->path == NULL && valuelen <= MAX_PATH_LEN)
			call->path = strndup((const char *)value, valuelen);
	} else if (hdr_is(name, namelen, "content-type")) {
		static const char grpc_ct[] = "application/grpc";
		call->has_content_type = 1;
		call->bad_content_type = valuelen < sizeof(grpc_ct) - 1 ||
		    memcmp(value, grpc_ct, sizeof(grpc_ct) - 1) != 0 ||
		    (valuelen > sizeof(grpc_ct) - 1 &&
		    value[sizeof(grpc_ct) - 1] != '+' &&
		    value[sizeof(grpc_ct) - 1] != ';');
	} else if (hdr_is(name, namelen, "grpc-timeout")) {
		/* A malformed timeout is ignored rather than fatal. */
		if (grpc_timeout_parse((const char *)value, valuelen,
		    &call->timeout_ms) == 0)
			call->has_timeout = 1;
	} else if (call->conn->srv->opts.auth_key != NULL &&
	    !call->auth_seen &&
	    hdr_is(name, namelen, call->conn->srv->opts.auth_key)) {
		/* Too long to be a credential: "", which fails to decode. */
		call->auth_seen = 1;
		call->auth_value = valuelen <= GRPC_MAX_AUTH_VALUE ?
		    strndup((const char *)value, valuelen) : strdup("");
		if (call->auth_value == NULL)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return 0;
}

static const struct grpc_method *
find_method(const struct grpc_server *srv, const char *path)
{
	if (path == NULL)
		return NULL;
	for (size_t i = 0; i < srv->n_methods; i++) {
		if (strcmp(srv->methods[i].path, path) == 0)
			return &srv->methods[i];
	}
	return NULL;
}

/* The request's headers are complete: answer what we can answer now. */
static void
request_headers(struct grpc_call *call)
{
	struct grpc_server *srv = call->conn->srv;

	if (call->bad_method) {
		gsrv_call_respond_http(call, "405");
		return;
	}
	if (!call->has_content_type || call->bad_content_type) {
		gsrv_call_respond_http(call, "415");
		return;
	}
	call->method = find_method(srv, call->path);
	if (call->method == NULL) {
		gsrv_call_end(call, GRPC_UNIMPLEMENTED, call->path != NULL ?
		    "unknown method" : "no :path");
		return;
	}
	if (call->has_timeout)
		gsrv_call_arm_deadline(call);
	if (call->method->client_streaming)
		gsrv_call_start(call);
}

/* The client's END_STREAM: the request is whole, or it never will be. */
static void
request_end(struct grpc_call *call)
{
	int streaming = call->method != NULL && call->method->client_streaming;

	call->remote_closed = 1;
	if (call->state != (streaming ? CALL_ACTIVE : CALL_RECV))
		return;
	if (grpc_reader_partial(&call->reader)) {
		gsrv_call_end(call, GRPC_INTERNAL,
		    "request ended inside a message");
		gsrv_call_notify_close(call, 1);
		return;
	}
	if (streaming) {
		gsrv_call_deliver(call, NULL, 0);
		return;
	}
	if (call->nreq != 1) {
		gsrv_call_end(call, GRPC_INTERNAL,
		    "the request carried no message");
		return;
	}
	gsrv_call_dispatch(call);
}

/*
 * Remembers a GOAWAY, ours or the peer's, as the reason for the close that
 * follows once the session has nothing left to do. nghttp2 puts what went
 * wrong into the debug data of the GOAWAY it sends on a protocol error; a
 * peer's debug data is shown as printable ASCII only, since it ends up in
 * a log.
 */
static void
goaway_note(struct grpc_conn *c, const char *who, const nghttp2_goaway *g)
{
	const char *code = nghttp2_http2_strerror(g->error_code);
	char data[81];
	size_t n = 0;

	if (c->close_pending || c->close_reason != NULL)
		return;
	for (; n < g->opaque_data_len && n < sizeof(data) - 1; n++)
		data[n] = g->opaque_data[n] >= 0x20 && g->opaque_data[n] < 0x7f ?
		    (char)g->opaque_data[n] : '?';
	data[n] = '\0';
	if (g->error_code == NGHTTP2_NO_ERROR && c->srv->shutting_down)
		gsrv_conn_reason(c, "%s GOAWAY: the server is shutting down",
		    who);
	else
		gsrv_conn_reason(c, "%s GOAWAY %s%s%s", who, code,
		    n > 0 ? ": " : "", data);
}

/*
 * A client's RST_STREAM, counted in a token bucket: past RESET_BURST at
 * once (then RESET_PER_S a second) the connection ends with GOAWAY
 * ENHANCE_YOUR_CALM, the answer RFC 9113 §5.4.1 has for a peer that
 * makes us do work for nothing. nghttp2's own limit (gsrv_h2_session_new)
 * lies beyond ours and would say INTERNAL_ERROR.
 */
static void
reset_counted(struct grpc_conn *c)
{
	uint64_t now = mono_ms(), full = RESET_BURST * 1000ULL;

	if (c->reset_ms == 0)
		c->reset_tokens = full;
	else
		c->reset_tokens += (now - c->reset_ms) * RESET_PER_S;
	if (c->reset_tokens > full)
		c->reset_tokens = full;
	c->reset_ms = now;
	if (c->reset_tokens >= 1000) {
		c->reset_tokens -= 1000;
		return;
	}
	gsrv_conn_reason(c, "the client reset more than %d streams at once "
	    "(rapid reset): sent GOAWAY ENHANCE_YOUR_CALM", RESET_BURST);
	/* Whatever else the client sent is ignored from here. */
	nghttp2_session_terminate_session(c->h2, NGHTTP2_ENHANCE_YOUR_CALM);
}

static int
frame_recv_cb(nghttp2_session *h2, const nghttp2_frame *frame, void *arg)
{
	struct grpc_conn *c = arg;
	struct grpc_call *call;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	case NGHTTP2_SETTINGS:
		/* The client's preface is complete: idle from now on. */
		if (!c->preface_done && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
			c->preface_done = 1;
			c->idle_since_ms = mono_ms();
			/* The deadline was the preface's; from now on it is
			 * the idle one, so an idle timeout shorter than the
			 * preface's means what it says. */
			c->idle_due_ms = c->idle_since_ms + (c->proven ?
			    c->srv->opts.idle_ms :
			    c->srv->opts.unproven_idle_ms);
			gsrv_conn_timer_arm(c);
		}
		return 0;
	case NGHTTP2_RST_STREAM:
		reset_counted(c);
		return 0;
	case NGHTTP2_GOAWAY:
		goaway_note(c, "the peer sent", &frame->goaway);
		return 0;
	default:
		return 0;
	}
	call = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
	if (call == NULL)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS &&
	    frame->headers.cat == NGHTTP2_HCAT_REQUEST)
		request_headers(call);
	if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
		request_end(call);
	return 0;
}

static int
message_cb(void *arg, const uint8_t *msg, size_t len)
{
	struct grpc_call *call = arg;

	if (call->method->client_streaming) {
		gsrv_call_deliver(call, msg, len);
		return 0;
	}
	/* Unary and server-streaming requests carry one message. */
	if (call->nreq++ > 0)
		return -RDZV_EMSGCOUNT;
	call->req = malloc(len > 0 ? len : 1);
	if (call->req == NULL)
		return -ENOMEM;
	memcpy(call->req, msg, len);
	call->req_len = len;
	return 0;
}

/*
 * DATA is fed to the call's reader; nghttp2 counts it as consumed when we
 * return (automatic WINDOW_UPDATE), so data dropped after an early answer
 * keeps the connection's flow control going. A client-streaming call reads
 * while its handler holds it; the others until their one message is whole.
 */
static int
data_chunk_cb(nghttp2_session *h2, uint8_t flags, int32_t stream_id,
    const uint8_t *data, size_t len, void *arg)
{
	struct grpc_call *call;

	call = nghttp2_session_get_stream_user_data(h2, stream_id);
	if (call == NULL || call->discard || call->method == NULL ||
	    call->state != (call->method->client_streaming ? CALL_ACTIVE :
	    CALL_RECV))
		return 0;
	int rc = grpc_reader_feed(&call->reader, data, len, message_cb, call);
	switch (rc) {
	case 0:
		break;
	case -EMSGSIZE:
		gsrv_call_end(call, GRPC_RESOURCE_EXHAUSTED,
		    "request message larger than the limit");
		break;
	case -RDZV_ECOMPRESSED:
		gsrv_call_end(call, GRPC_UNIMPLEMENTED,
		    "compressed messages are not supported");
		break;
	case -RDZV_EMSGCOUNT:
		gsrv_call_end(call, GRPC_INTERNAL,
		    "more than one request message");
		break;
	default:
		gsrv_call_end(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		break;
	}
	/* A client-streaming call's handler holds it: tell it. */
	if (rc != 0)
		gsrv_call_notify_close(call, 1);
	return 0;
}

/*
 * A GOAWAY we sent is noted. Trailers sent before the client finished: end
 * the stream for good, as gRPC asks. Plain HTTP clients (curl) take a reset
 * during their upload as an error, so a 405/415 lets the upload finish
 * instead.
 */
static int
frame_send_cb(nghttp2_session *h2, const nghttp2_frame *frame, void *arg)
{
	struct grpc_call *call;

	if (frame->hd.type == NGHTTP2_GOAWAY) {
		goaway_note(arg, "sent", &frame->goaway);
		return 0;
	}
	if (frame->hd.type != NGHTTP2_HEADERS ||
	    !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	call = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
	if (call != NULL && !call->remote_closed && !call->plain_http)
		nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE,
		    frame->hd.stream_id, NGHTTP2_NO_ERROR);
	return 0;
}

static int
stream_close_cb(nghttp2_session *h2, int32_t stream_id, uint32_t error_code,
    void *arg)
{
	struct grpc_call *call;

	call = nghttp2_session_get_stream_user_data(h2, stream_id);
	if (call == NULL)
		return 0;
	nghttp2_session_set_stream_user_data(h2, stream_id, NULL);
	if (!call->user_done)
		gsrv_call_notify_close(call, 1);
	gsrv_call_free(call);
	return 0;
}

/* The callbacks and options every session of the server shares, made with
 * its first session instead of once per connection. */
static int
srv_h2_setup(struct grpc_server *srv)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;

	if (srv->h2_cbs != NULL)
		return 0;
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		return -ENOMEM;
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	nghttp2_session_callbacks_set_on_begin_frame_callback(cbs,
	    begin_frame_cb);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs,
	    begin_headers_cb);
	nghttp2_session_callbacks_set_on_header_callback(cbs, header_cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs,
	    frame_recv_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs,
	    data_chunk_cb);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs,
	    frame_send_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs,
	    stream_close_cb);

	if (nghttp2_option_new(&opt) != 0) {
		nghttp2_session_callbacks_del(cbs);
		return -ENOMEM;
	}
	/* Rapid Reset (CVE-2023-44487) and CONTINUATION floods. Our own
	 * count of resets (reset_counted) ends a connection first. */
	nghttp2_option_set_stream_reset_rate_limit(opt, 4 * RESET_BURST,
	    2 * RESET_PER_S);
	nghttp2_option_set_max_continuations(opt, 8);
	/*
	 * nghttp2 keeps up to max_streams closed streams per connection for
	 * RFC 7540's priority tree, which gRPC does not use: an agent's
	 * long-lived connection would hold a hundred of them (200 bytes
	 * each) after its first hundred calls.
	 */
	nghttp2_option_set_no_closed_streams(opt, 1);
	/*
	 * No HPACK dynamic table for what we send: it would hold up to 4 KiB
	 * of header copies per connection, for the few bytes of the answers'
	 * content-type and grpc-status. (Asking the same of clients, with
	 * SETTINGS_HEADER_TABLE_SIZE 0, would save as much again, but a
	 * client that omits the table size update RFC 7541 then requires
	 * would have its connection ended.)
	 */
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 0);
	srv->h2_cbs = cbs;
	srv->h2_opt = opt;
	return 0;
}

void
gsrv_h2_free(struct grpc_server *srv)
{
	nghttp2_option_del(srv->h2_opt);
	nghttp2_session_callbacks_del(srv->h2_cbs);
	srv->h2_opt = NULL;
	srv->h2_cbs = NULL;
}

int
gsrv_h2_session_new(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;
	int rv;

	if (srv_h2_setup(srv) != 0 || gsrv_slab_h2_server_new(c->slab,
	    &c->h2, srv->h2_cbs, c, srv->h2_opt) != 0)
		return -ENOMEM;

	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
		    srv->opts.max_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 },
	};
	rv = nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv,
	    sizeof(iv) / sizeof(iv[0]));
	if (rv == 0)
		rv = nghttp2_session_set_local_window_size(c->h2,
		    NGHTTP2_FLAG_NONE, 0, 4 << 20);
	if (rv != 0)
		return -ENOMEM;
	if (srv->shutting_down)
		gsrv_h2_goaway(c, 1);
	return 0;
}

/*
 * Shutdown in two steps (RFC 9113 §6.8): a notice that no new streams are
 * welcome, then the GOAWAY that names the last stream we will serve.
 */
void
gsrv_h2_goaway(struct grpc_conn *c, int final)
{
	if (c->h2 == NULL || c->goaway_sent)
		return;
	if (!final) {
		nghttp2_submit_shutdown_notice(c->h2);
		return;
	}
	c->goaway_sent = 1;
	nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
	    NULL, 0);
}

/* ------------------------------------------- bytes in, frames out */

/* Waits for the socket to take more. */
static int
sconn_wait_writable(struct grpc_conn *c)
{
	if (c->wev == NULL && (c->wev = event_new(c->srv->base, c->fd,
	    EV_WRITE, gsrv_conn_raw_write_cb, c)) == NULL) {
		gsrv_conn_closef(c, "out of memory");
		return -1;
	}
	if (!event_pending(c->wev, EV_WRITE, NULL))
		event_add(c->wev, NULL);
	return 0;
}

/*
 * Cleartext: writes the output now (the connection's own, or the staging
 * buffer's, which is empty when this returns) and waits for writability
 * only when the socket did not take all of it. Returns -1 when that
 * closed the connection.
 */
static int
sconn_write(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;
	size_t done = 0;
	ssize_t n;

	while (c->out != NULL && evbuffer_get_length(c->out) > 0) {
		if ((n = evbuffer_write(c->out, c->fd)) > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			return sconn_wait_writable(c);
		gsrv_conn_closef(c, "write: %s", strerror(errno));
		return -1;
	}
	while (done < srv->stage_len) {
		n = send(c->fd, srv->stage + done, srv->stage_len - done,
		    MSG_NOSIGNAL);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			srv->stage_len = 0;
			gsrv_conn_closef(c, "write: %s", strerror(errno));
			return -1;
		}
		/* The rest waits in the connection's own output. */
		if ((c->out == NULL && (c->out = evbuffer_new()) == NULL) ||
		    evbuffer_add(c->out, srv->stage + done,
		    srv->stage_len - done) != 0) {
			srv->stage_len = 0;
			gsrv_conn_closef(c, "out of memory");
			return -1;
		}
		srv->stage_len = 0;
		return sconn_wait_writable(c);
	}
	srv->stage_len = 0;
	/* A frame far larger than the limit made it grow: not kept. */
	if (srv->stage_cap > 4 * GRPC_SERVER_WBUF_MAX) {
		free(srv->stage);
		srv->stage = NULL;
		srv->stage_cap = 0;
	}
	return 0;
}

/*
 * Hands nghttp2's pending frames to the socket (or the TLS bufferevent) and
 * closes the connection once both sides are done with it.
 */
void
gsrv_conn_flush(struct grpc_conn *c)
{
	if (c->closed || c->h2 == NULL)
		return;
	for (int round = 0;; round++) {
		c->send_blocked = 0;
		c->in_h2++;
		int rv = nghttp2_session_send(c->h2);
		c->in_h2--;
		if (rv != 0 || c->close_pending)
			c->srv->stage_len = 0;	/* not for a closing one */
		if (rv != 0) {
			gsrv_conn_closef(c, "HTTP/2: %s", nghttp2_strerror(rv));
			return;
		}
		if (c->close_pending) {
			gsrv_conn_close(c, c->close_reason);
			return;
		}
		if (c->bev != NULL)
			break;
		if (sconn_write(c) != 0)
			return;
		/*
		 * The socket took everything but nghttp2 stopped at the
		 * output limit: go on, a bounded number of times per turn so
		 * that one large stream does not hold up every connection.
		 */
		if (!c->send_blocked || gsrv_conn_unwritten(c) > 0)
			break;
		if (round == FLUSH_ROUNDS) {
			gsrv_conn_schedule_flush(c);
			return;
		}
	}
	/*
	 * Whatever nghttp2 could not hand over (the output is full) goes out
	 * from the write callback once the output drains.
	 */
	if (gsrv_conn_unwritten(c) == 0 &&
	    !nghttp2_session_want_write(c->h2) &&
	    (c->draining || !nghttp2_session_want_read(c->h2))) {
		gsrv_conn_close(c,
		    c->close_reason != NULL ? c->close_reason :
		    "the HTTP/2 session ended");
		return;
	}
	gsrv_conn_check_writable(c);
}

/* Feeds bytes read to nghttp2. Returns -1 when the connection closed. */
static int
sconn_feed(struct grpc_conn *c, const uint8_t *data, size_t len,
    size_t *used)
{
	c->in_h2++;
	ssize_t n = nghttp2_session_mem_recv(c->h2, data, len);
	c->in_h2--;
	if (n < 0) {
		gsrv_conn_closef(c, "HTTP/2: %s", nghttp2_strerror((int)n));
		return -1;
	}
	if (c->close_pending) {
		gsrv_conn_close(c, c->close_reason);
		return -1;
	}
	*used = (size_t)n;
	return 0;
}

void
gsrv_conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len, used;

	while (!c->closed && (len = evbuffer_get_contiguous_space(in)) > 0) {
		unsigned char *data = evbuffer_pullup(in, (ev_ssize_t)len);
		if (sconn_feed(c, data, len, &used) != 0)
			return;
		evbuffer_drain(in, used);
	}
	gsrv_conn_flush(c);
}

/* Cleartext: reads straight into nghttp2, then flushes its answers. */
void
gsrv_conn_raw_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	uint8_t buf[READ_CHUNK];
	size_t used;

	for (int i = 0; i < READS_PER_EVENT; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0) {
			/* nghttp2 takes all of it or fails. */
			if (sconn_feed(c, buf, (size_t)n, &used) != 0)
				return;
			if ((size_t)n < sizeof(buf))
				break;
			continue;
		}
		if (n == 0) {
			gsrv_conn_close(c, "the peer closed the connection");
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		gsrv_conn_closef(c, "read: %s", strerror(errno));
		return;
	}
	gsrv_conn_flush(c);
}

void
gsrv_conn_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
	gsrv_conn_flush(arg);
}

void
gsrv_conn_write_cb(struct bufferevent *bev, void *arg)
{
	gsrv_conn_flush(arg);
}

/*
 * Once TLS is up: insist on h2 and take the certificate's subject. NULL, or
 * why the connection cannot go on.
 */
static const char *
sconn_tls_ready(struct grpc_conn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	const unsigned char *alpn = NULL;
	unsigned int alpnlen = 0;
	char subject[512];
	char *id;

	SSL_get0_alpn_selected(ssl, &alpn, &alpnlen);
	if (alpn == NULL || alpnlen != 2 || memcmp(alpn, "h2", 2) != 0)
		return "TLS: the peer did not offer ALPN h2";
	if (tls_peer_subject(ssl, subject, sizeof(subject)) != 0) {
		if (tls_wants_client_cert(c->listener->tls))
			return "TLS: no client certificate";
		snprintf(subject, sizeof(subject), "anonymous");
	}
	if ((id = gsrv_slab_strdup(c->slab, subject)) == NULL)
		return "out of memory for the peer's identity";
	gsrv_slab_release(c->slab, c->identity);
	c->identity = id;
	if (gsrv_h2_session_new(c) != 0)
		return "out of memory for the HTTP/2 session";
	return NULL;
}

/*
 * The TLS connection ended, or failed. Before the handshake completed
 * (no HTTP/2 session yet) that is a failed handshake the program hears
 * of, unless the peer went away without sending a byte: a port probe or
 * a load balancer's check is not a TLS client.
 */
void
gsrv_conn_event_cb(struct bufferevent *bev, short events, void *arg)
{
	struct grpc_conn *c = arg;
	int err = errno;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	/* Bytes from the peer, and no HTTP/2 session yet. */
	int handshaking = c->h2 == NULL && ssl != NULL &&
	    BIO_number_read(SSL_get_rbio(ssl)) > 0;
	char why[160];
	const char *r;

	if (events & BEV_EVENT_CONNECTED) {
		if ((r = sconn_tls_ready(c)) != NULL) {
			gsrv_conn_tls_fail(c, r);
			return;
		}
		gsrv_conn_flush(c);
		return;
	}
	if (events & BEV_EVENT_ERROR) {
		unsigned long e = bufferevent_get_openssl_error(bev);
		const char *what = e != 0 ? ERR_reason_error_string(e) : NULL;
		if (what != NULL)
			snprintf(why, sizeof(why), "TLS: %s", what);
		else if (err != 0)
			snprintf(why, sizeof(why), "TLS: %s", strerror(err));
		else
			snprintf(why, sizeof(why), "TLS: the connection ended "
			    "without close_notify");
	} else if (events & (BEV_EVENT_EOF | BEV_EVENT_TIMEOUT))
		snprintf(why, sizeof(why), handshaking ? "TLS: the peer closed "
		    "the connection during the handshake" : "the peer closed "
		    "the connection");
	else
		return;
	if (handshaking)
		gsrv_conn_tls_fail(c, why);
	else
		gsrv_conn_close(c, why);
}
