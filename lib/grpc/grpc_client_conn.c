/*
 * One HTTP/2 connection of the gRPC client once its socket is up: the
 * nghttp2 client session, requests, replies, keepalive PINGs and GOAWAY.
 * Every way a connection ends goes through gcli_conn_close(), which completes
 * its calls with UNAVAILABLE and tells the owner. Getting the socket (name
 * resolution, connect, TLS) is grpc_client_connect.c.
 *
 * TLS connections run through libevent's OpenSSL bufferevent; cleartext
 * ones write to the socket directly, once per flush, and wait for
 * writability only when the socket did not take everything (see
 * grpc_server.c for why).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netdb.h>

#include "grpc_client_int.h"

/* Queued output past which nghttp2 is told to wait (backpressure). */
#define OUTPUT_HIGH		(1u << 20)
/* Cleartext: output limits written per flush before the rest waits for the
 * socket to be writable. */
#define FLUSH_ROUNDS		4

void
gcli_conn_free(struct cconn *conn)
{
	if (conn == NULL)
		return;
	if (conn->start_ev != NULL)
		event_free(conn->start_ev);
	if (conn->connect_ev != NULL)
		event_free(conn->connect_ev);
	if (conn->connect_timer != NULL)
		event_free(conn->connect_timer);
	if (conn->ka_ev != NULL)
		event_free(conn->ka_ev);
	if (conn->ka_timeout != NULL)
		event_free(conn->ka_timeout);
	if (conn->h2 != NULL)
		nghttp2_session_del(conn->h2);
	if (conn->rev != NULL)
		event_free(conn->rev);
	if (conn->wev != NULL)
		event_free(conn->wev);
	if (conn->out != NULL)
		evbuffer_free(conn->out);
	if (conn->bev != NULL)
		bufferevent_free(conn->bev);	/* closes fd, frees SSL */
	else if (conn->fd >= 0)
		close(conn->fd);
	if (conn->ai != NULL)
		freeaddrinfo(conn->ai);
	free(conn);
}

/*
 * The one way a connection ends. Its memory stays until the outermost
 * gcli_leave; here it only stops, fails its calls and tells the owner (not
 * when the client itself is being freed).
 */
void
gcli_conn_close(struct cconn *conn, int err, const char *fmt, ...)
{
	struct grpc_client *cli = conn->cli;
	struct grpc_ccall *cc;
	char *msg = NULL;

	if (conn->state == CCONN_CLOSED)
		return;
	if (fmt != NULL) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) < 0)
			msg = NULL;
		va_end(ap);
	}
	conn->state = CCONN_CLOSED;
	if (cli->conn == conn)
		cli->conn = NULL;
	TAILQ_REMOVE(&cli->conns, conn, entry);
	TAILQ_INSERT_TAIL(&cli->dead_conns, conn, entry);
	if (conn->start_ev != NULL)
		event_del(conn->start_ev);
	if (conn->connect_ev != NULL)
		event_del(conn->connect_ev);
	if (conn->connect_timer != NULL)
		event_del(conn->connect_timer);
	if (conn->ka_ev != NULL)
		event_del(conn->ka_ev);
	if (conn->ka_timeout != NULL)
		event_del(conn->ka_timeout);
	if (conn->bev != NULL) {
		bufferevent_setcb(conn->bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(conn->bev, EV_READ | EV_WRITE);
	}
	if (conn->rev != NULL)
		event_del(conn->rev);
	if (conn->wev != NULL)
		event_del(conn->wev);

	cli->cb_gen++;
	while ((cc = TAILQ_FIRST(&conn->calls)) != NULL)
		gcli_call_complete(cc, GRPC_UNAVAILABLE, "%s",
		    msg != NULL ? msg : "connection closed");
	if (!cli->dead && cli->on_closed != NULL)
		cli->on_closed(cli, err, msg != NULL ? msg :
		    "connection closed", cli->arg);
	free(msg);
}

/* ------------------------------------------------------------- nghttp2 */

static ssize_t
send_cb(nghttp2_session *h2, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct cconn *conn = arg;
	struct evbuffer *out = conn->bev != NULL ?
	    bufferevent_get_output(conn->bev) : conn->out;

	if (conn->state != CCONN_READY)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (evbuffer_get_length(out) >= OUTPUT_HIGH) {
		conn->send_blocked = 1;
		return NGHTTP2_ERR_WOULDBLOCK;
	}
	if (evbuffer_add(out, data, len) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return (ssize_t)len;
}

/* The request body: the framed request messages queued, then END_STREAM
 * once the request side is closed (at once for a unary or server-streaming
 * call). A stream call with nothing queued waits for grpc_ccall_send
 * (gcli_call_resume). A call that ended is about to be reset: wait for that. */
static ssize_t
data_read_cb(nghttp2_session *h2, int32_t stream_id, uint8_t *buf,
    size_t len, uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct grpc_ccall *cc = gcli_call_find(arg, stream_id);

	if (cc == NULL)
		return NGHTTP2_ERR_DEFERRED;
	size_t n = cc->req_len - cc->req_off;
	if (n == 0 && cc->open_send && !cc->send_closed)
		return NGHTTP2_ERR_DEFERRED;
	if (n > len)
		n = len;
	if (n > 0) {	/* a stream half-closed with nothing queued: no req */
		memcpy(buf, cc->req + cc->req_off, n);
		cc->req_off += n;
	}
	if (cc->req_off == cc->req_len && (!cc->open_send || cc->send_closed))
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int
header_cb(nghttp2_session *h2, const nghttp2_frame *frame,
    const uint8_t *name, size_t namelen, const uint8_t *value,
    size_t valuelen, uint8_t flags, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_ccall *cc;

	if (conn->state != CCONN_READY)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (frame->hd.type == NGHTTP2_HEADERS &&
	    (cc = gcli_call_find(conn, frame->hd.stream_id)) != NULL) {
		gcli_call_header(cc, name, namelen, value, valuelen);
		/* The block that ends the stream holds the trailers (or is
		 * a trailers-only response). */
		if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
			gcli_call_trailer(cc, name, namelen, value, valuelen);
	}
	return 0;
}

/*
 * GOAWAY: calls the server will not process (above last_stream_id, or not
 * yet sent) fail with UNAVAILABLE, the others may finish; new calls go to a
 * new connection. Its debug data, when printable, says why (rdzvd names
 * the connection limit that refused the connection).
 */
static void
conn_goaway(struct cconn *conn, int32_t last, uint32_t code,
    const uint8_t *data, size_t len)
{
	struct grpc_client *cli = conn->cli;
	struct grpc_ccall *cc;
	char why[256] = "";
	size_t n = 0;

	for (size_t i = 0; i < len && n + 3 < sizeof(why); i++)
		if (data[i] >= 0x20 && data[i] < 0x7f)
			why[n++] = (char)data[i];
	why[n] = '\0';
	if (n > 0 && strncmp(why, "rdzvd", 5) != 0)
		why[0] = '\0';

	conn->goaway = 1;
	conn->goaway_last = last;
	if (cli->conn == conn)
		cli->conn = NULL;
	while (conn->state == CCONN_READY && !cli->dead) {
		TAILQ_FOREACH(cc, &conn->calls, entry) {
			if (cc->stream_id == 0 || cc->stream_id > last)
				break;
		}
		if (cc == NULL)
			break;
		cc->stream_closed = 1;	/* nghttp2 closes it */
		gcli_call_complete(cc, GRPC_UNAVAILABLE,
		    "%s: the server is going away (GOAWAY %s)%s%s", cli->peer,
		    nghttp2_http2_strerror(code), why[0] != '\0' ? ": " : "",
		    why);
	}
}

static int
frame_recv_cb(nghttp2_session *h2, const nghttp2_frame *frame, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_ccall *cc;

	if (conn->state != CCONN_READY)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
		    (cc = gcli_call_find(conn, frame->hd.stream_id)) != NULL)
			gcli_call_finish_stream(cc, NGHTTP2_NO_ERROR);
		break;
	case NGHTTP2_PING:
		if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
			conn->ping_outstanding = 0;
			if (conn->ka_timeout != NULL)
				event_del(conn->ka_timeout);
		}
		break;
	case NGHTTP2_GOAWAY:
		conn_goaway(conn, frame->goaway.last_stream_id,
		    frame->goaway.error_code, frame->goaway.opaque_data,
		    frame->goaway.opaque_data_len);
		break;
	}
	return 0;
}

static int
data_chunk_cb(nghttp2_session *h2, uint8_t flags, int32_t stream_id,
    const uint8_t *data, size_t len, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_ccall *cc;

	if (conn->state != CCONN_READY)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if ((cc = gcli_call_find(conn, stream_id)) != NULL)
		gcli_call_feed(cc, data, len);
	return 0;
}

static int
stream_close_cb(nghttp2_session *h2, int32_t stream_id, uint32_t code,
    void *arg)
{
	struct cconn *conn = arg;
	struct grpc_ccall *cc;

	if (conn->state != CCONN_READY)
		return 0;
	if ((cc = gcli_call_find(conn, stream_id)) != NULL) {
		cc->stream_closed = 1;
		if (conn->early) {
			/* Inside grpc_client_call: end it from the loop. */
			cc->finish_later = 1;
			cc->close_code = code;
			gcli_call_fail_later(cc);
		} else
			gcli_call_finish_stream(cc, code);
	}
	return 0;
}

/* A request that could not be sent (the session is going away): fail it
 * from the loop. */
static int
not_send_cb(nghttp2_session *h2, const nghttp2_frame *frame, int err,
    void *arg)
{
	struct cconn *conn = arg;
	struct grpc_ccall *cc;

	if (frame->hd.type == NGHTTP2_HEADERS &&
	    (cc = gcli_call_find(conn, frame->hd.stream_id)) != NULL) {
		cc->stream_closed = 1;
		gcli_call_fail_later(cc);
	}
	return 0;
}

int
gcli_conn_submit(struct cconn *conn, struct grpc_ccall *cc)
{
	struct grpc_client *cli = conn->cli;
	char timeout[32];
	nghttp2_nv nva[GRPC_REQUEST_NV_MAX];
	size_t n;

	if (cc->deadline_at != 0) {
		uint64_t now = mono_ms();
		uint64_t left = cc->deadline_at > now ?
		    cc->deadline_at - now : 1;
		grpc_timeout_format(left, timeout, sizeof(timeout));
	}
	n = grpc_request_nv(nva, cli->opts.tls != NULL ? "https" : "http",
	    cc->path, cli->authority, cli->opts.cred_key, cc->cred,
	    cc->deadline_at != 0 ? timeout : NULL);

	nghttp2_data_provider dp = { .read_callback = data_read_cb };
	int32_t id = nghttp2_submit_request(conn->h2, NULL, nva, n, &dp, NULL);
	if (id < 0)
		return -EAGAIN;
	cc->stream_id = id;
	return 0;
}

/*
 * Cleartext: writes the output now and waits for writability only when the
 * socket did not take all of it. Returns -1 when that closed the
 * connection.
 */
static int
conn_write(struct cconn *conn)
{
	char why[128];

	if (conn->write_errno != 0) {
		errno = conn->write_errno;
		snprintf(why, sizeof(why), "%s", strerror(errno));
		gcli_conn_close(conn, -errno, "%s: %s", conn->cli->peer, why);
		return -1;
	}
	while (evbuffer_get_length(conn->out) > 0) {
		int n = evbuffer_write(conn->out, conn->fd);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
			if (!event_pending(conn->wev, EV_WRITE, NULL))
				event_add(conn->wev, NULL);
			return 0;
		}
		snprintf(why, sizeof(why), "%s", strerror(errno));
		gcli_conn_close(conn, -errno, "%s: %s", conn->cli->peer, why);
		return -1;
	}
	return 0;
}

/*
 * grpc_client_call's write, at once: the request is on the wire when the
 * call returns (a node's Join leaves when it is made, not a loop turn
 * later), yet nothing ends inside the caller's call. It only hands
 * nghttp2's frames to the socket; whatever else happens is the loop's
 * gcli_conn_flush's to handle: an nghttp2 error, output the socket did
 * not take, a failed write (its errno kept in write_errno, so that
 * gcli_conn_flush reports it rather than the EPIPE of a second try), a
 * stream closed meanwhile (stream_close_cb ends its call from the loop
 * while |early| is set).
 * 0 when everything went out, -1 when the loop must flush.
 */
int
gcli_conn_send_early(struct cconn *conn)
{
	int rv;

	if (conn->state != CCONN_READY || conn->bev != NULL ||
	    conn->write_errno != 0)
		return -1;
	conn->send_blocked = 0;
	conn->early = 1;
	rv = nghttp2_session_send(conn->h2);
	conn->early = 0;
	if (rv != 0 || conn->state != CCONN_READY)
		return -1;
	while (evbuffer_get_length(conn->out) > 0) {
		int n = evbuffer_write(conn->out, conn->fd);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			conn->write_errno = errno;
		return -1;
	}
	return conn->send_blocked ? -1 : 0;
}

/* Sends what nghttp2 has queued; closes a session that has ended and a
 * drained connection after GOAWAY. Only from the outermost gcli_leave. */
void
gcli_conn_flush(struct cconn *conn)
{
	const char *peer = conn->cli->peer;
	int rv = 0;

	for (int round = 0; conn->state == CCONN_READY; round++) {
		conn->send_blocked = 0;
		rv = nghttp2_session_send(conn->h2);
		if (conn->state != CCONN_READY)
			return;
		if (rv != 0 || conn->bev != NULL)
			break;
		if (conn_write(conn) != 0)
			return;
		/* The socket took it all but nghttp2 has more. */
		if (!conn->send_blocked || evbuffer_get_length(conn->out) > 0)
			break;
		if (round == FLUSH_ROUNDS) {
			event_add(conn->wev, NULL);
			break;
		}
	}
	if (conn->state != CCONN_READY)
		return;
	if (rv != 0)
		gcli_conn_close(conn, -EPROTO, "%s: HTTP/2 error: %s", peer,
		    nghttp2_strerror(rv));
	else if (!nghttp2_session_want_read(conn->h2) &&
	    !nghttp2_session_want_write(conn->h2))
		gcli_conn_close(conn, -ESHUTDOWN, "%s: HTTP/2 session ended",
		    peer);
	else if (conn->goaway && TAILQ_EMPTY(&conn->calls))
		gcli_conn_close(conn, -ESHUTDOWN, "%s: the server sent GOAWAY",
		    peer);
}

/* ---------------------------------------------------------- keepalive */

static void
ka_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	if (conn->state == CCONN_READY && !conn->ping_outstanding &&
	    nghttp2_submit_ping(conn->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
		struct timeval tv = { cli->opts.keepalive_timeout_ms / 1000,
		    (cli->opts.keepalive_timeout_ms % 1000) * 1000 };
		conn->ping_outstanding = 1;
		evtimer_add(conn->ka_timeout, &tv);
	}
	gcli_leave(cli);
}

static void
ka_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	if (conn->state == CCONN_READY)
		gcli_conn_close(conn, -ETIMEDOUT,
		    "%s: keepalive timeout: no PING ACK within %u ms",
		    cli->peer, cli->opts.keepalive_timeout_ms);
	gcli_leave(cli);
}

/* --------------------------------------------------------- bufferevent */

/* Feeds bytes read to nghttp2. Returns -1 when the connection is no longer
 * ready (closed by a callback or by an HTTP/2 error). */
int
gcli_conn_feed(struct cconn *conn, const uint8_t *data, size_t len,
    size_t *used)
{
	conn->got_data = 1;
	conn->cli->last_seen_ms = mono_ms();
	ssize_t rv = nghttp2_session_mem_recv(conn->h2, data, len);
	if (conn->state != CCONN_READY)
		return -1;
	if (rv < 0) {
		gcli_conn_close(conn, -EPROTO, "%s: HTTP/2 error: %s",
		    conn->cli->peer, nghttp2_strerror((int)rv));
		return -1;
	}
	*used = (size_t)rv;
	return 0;
}

void
gcli_conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t used;

	gcli_enter(cli);
	while (conn->state == CCONN_READY && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		if (gcli_conn_feed(conn, v.iov_base, v.iov_len, &used) != 0)
			break;
		evbuffer_drain(in, used);
	}
	gcli_leave(cli);
}

/* Output drained: the outermost gcli_leave sends more. */
void
gcli_conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	gcli_leave(cli);
}

/* Cleartext socket writable again: the same. */
void
gcli_conn_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	gcli_leave(cli);
}

void
gcli_conn_ready(struct cconn *conn)
{
	struct grpc_client *cli = conn->cli;
	nghttp2_session_callbacks *cbs;
	struct grpc_ccall *cc, *next;
	int rv;

	event_del(conn->connect_timer);
	if (nghttp2_session_callbacks_new(&cbs) != 0) {
		gcli_conn_close(conn, -ENOMEM, "%s: out of memory", cli->peer);
		return;
	}
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	nghttp2_session_callbacks_set_on_header_callback(cbs, header_cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs,
	    frame_recv_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs,
	    data_chunk_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs,
	    stream_close_cb);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs,
	    not_send_cb);
	/*
	 * Requests' headers go without HPACK's dynamic table
	 * (grpc_client_session_new): the server keeps a copy of every header
	 * a client indexes, for as long as the connection lives (about 800
	 * bytes per agent after a join, up to 4 KiB of headers when timeouts
	 * vary), against some 100 bytes more per request on the wire.
	 */
	rv = grpc_client_session_new(&conn->h2, cbs, conn);
	nghttp2_session_callbacks_del(cbs);
	if (rv != 0) {
		gcli_conn_close(conn, -ENOMEM, "%s: cannot start HTTP/2: %s",
		    cli->peer, nghttp2_strerror(rv));
		return;
	}
	conn->state = CCONN_READY;

	if (cli->opts.keepalive_ms > 0) {
		struct timeval tv = { cli->opts.keepalive_ms / 1000,
		    (cli->opts.keepalive_ms % 1000) * 1000 };
		conn->ka_ev = event_new(cli->base, -1, EV_PERSIST, ka_cb, conn);
		conn->ka_timeout = evtimer_new(cli->base, ka_timeout_cb, conn);
		if (conn->ka_ev == NULL || conn->ka_timeout == NULL) {
			gcli_conn_close(conn, -ENOMEM, "%s: out of memory",
			    cli->peer);
			return;
		}
		event_add(conn->ka_ev, &tv);
	}

	for (cc = TAILQ_FIRST(&conn->calls); cc != NULL; cc = next) {
		next = TAILQ_NEXT(cc, entry);
		if (cc->stream_id == 0 && !cc->fail_later &&
		    gcli_conn_submit(conn, cc) != 0)
			gcli_call_fail_later(cc);
	}
}

