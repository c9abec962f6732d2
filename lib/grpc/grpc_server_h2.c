/*
 * The server's HTTP/2 session on nghttp2: request headers and DATA in,
 * validation (method, content type, path, size), dispatch once the request
 * has ended. A connection's bytes in and out are grpc_server_io.c's.
 * nghttp2's callbacks never write to the socket or close the connection: a
 * callback that hits a fatal error returns NGHTTP2_ERR_CALLBACK_FAILURE and
 * the caller of nghttp2 tears the connection down.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "errf.h"
#include "grpc_server_int.h"

/* A path longer than this names no method of ours. */
#define MAX_PATH_LEN	1024
/*
 * Rapid Reset (CVE-2023-44487): streams a client may reset at once, and
 * per second after that. Legitimate clients reset a stream when they
 * cancel a call or its deadline passes; one that resets hundreds makes us
 * start work that nobody waits for.
 */
#define RESET_BURST		200
#define RESET_PER_S		33
/*
 * SETTINGS_MAX_HEADER_LIST_SIZE, advertised and enforced: a request's
 * header fields, each counted as its name, its value and 32 bytes (RFC
 * 9113 §6.5.2), as HPACK decodes them. nghttp2 only advertises it, and a
 * 16 KB HEADERS frame that refers to a 4 KB entry of the dynamic table
 * thousands of times would decode to tens of megabytes (an HPACK bomb).
 */
#define MAX_HEADER_LIST		16384

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

	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	call = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
	if (call == NULL)
		return 0;
	/* A request's trailers count towards its list too. */
	call->header_bytes += namelen + valuelen + 32;
	if (call->header_bytes > MAX_HEADER_LIST) {
		/* No legitimate client sends more than it was told the limit
		 * is; the rest of what this one sent is not even decoded. */
		gsrv_conn_reason(call->conn, "a request's header list exceeds "
		    "SETTINGS_MAX_HEADER_LIST_SIZE (%d bytes decoded; an HPACK "
		    "bomb?): sent GOAWAY ENHANCE_YOUR_CALM", MAX_HEADER_LIST);
		nghttp2_session_terminate_session(h2,
		    NGHTTP2_ENHANCE_YOUR_CALM);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
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
		c->reset_tokens += mono_since(now, c->reset_ms) * RESET_PER_S;
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
	nghttp2_session_callbacks_set_send_callback(cbs, gsrv_send_cb);
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
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
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
