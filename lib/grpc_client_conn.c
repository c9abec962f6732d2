/*
 * One HTTP/2 connection of the gRPC client: name resolution, a non-blocking
 * connect that tries each address in turn, the TLS handshake (SNI, host
 * verification, ALPN h2), the nghttp2 client session, keepalive PINGs and
 * GOAWAY. Every way a connection ends goes through conn_close(), which
 * completes its calls with UNAVAILABLE and tells the owner.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "grpc_client_int.h"

/* Queued output past which nghttp2 is told to wait (backpressure). */
#define OUTPUT_HIGH		(1u << 20)
#define STREAM_WINDOW		(1 << 20)
#define CONN_WINDOW		(16 << 20)

static void	conn_connect_next(struct cconn *);

/* strerror with a lower-case first letter, to read well after a colon. */
static const char *
errno_reason(int e, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror(e));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && buf[1] >= 'a' && buf[1] <= 'z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

static int
is_ip_literal(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, buf) == 1 ||
	    inet_pton(AF_INET6, s, buf) == 1;
}

void
conn_free(struct cconn *conn)
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
 * cli_leave; here it only stops, fails its calls and tells the owner (not
 * when the client itself is being freed).
 */
void
conn_close(struct cconn *conn, int err, const char *fmt, ...)
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

	cli->cb_gen++;
	while ((cc = TAILQ_FIRST(&conn->calls)) != NULL)
		call_complete(cc, GRPC_UNAVAILABLE, "%s",
		    msg != NULL ? msg : "connection closed");
	if (!cli->dead && cli->on_closed != NULL)
		cli->on_closed(cli, err, cli->arg);
	free(msg);
}

/* ------------------------------------------------------------- nghttp2 */

static ssize_t
send_cb(nghttp2_session *h2, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct cconn *conn = arg;

	if (conn->state != CCONN_READY)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) >=
	    OUTPUT_HIGH)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (bufferevent_write(conn->bev, data, len) != 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return (ssize_t)len;
}

/* The request body: the one framed request message, then END_STREAM. A
 * call that ended is about to be reset: wait for that. */
static ssize_t
data_read_cb(nghttp2_session *h2, int32_t stream_id, uint8_t *buf,
    size_t len, uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct grpc_ccall *cc = call_find(arg, stream_id);

	if (cc == NULL)
		return NGHTTP2_ERR_DEFERRED;
	size_t n = cc->req_len - cc->req_off;
	if (n > len)
		n = len;
	memcpy(buf, cc->req + cc->req_off, n);
	cc->req_off += n;
	if (cc->req_off == cc->req_len)
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
	    (cc = call_find(conn, frame->hd.stream_id)) != NULL)
		call_header(cc, name, namelen, value, valuelen);
	return 0;
}

/*
 * GOAWAY: calls the server will not process (above last_stream_id, or not
 * yet sent) fail with UNAVAILABLE, the others may finish; new calls go to a
 * new connection.
 */
static void
conn_goaway(struct cconn *conn, int32_t last, uint32_t code)
{
	struct grpc_client *cli = conn->cli;
	struct grpc_ccall *cc;

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
		call_complete(cc, GRPC_UNAVAILABLE,
		    "%s: the server is going away (GOAWAY %s)", cli->peer,
		    nghttp2_http2_strerror(code));
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
		    (cc = call_find(conn, frame->hd.stream_id)) != NULL)
			call_finish_stream(cc, NGHTTP2_NO_ERROR);
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
		    frame->goaway.error_code);
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
	if ((cc = call_find(conn, stream_id)) != NULL)
		call_feed(cc, data, len);
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
	if ((cc = call_find(conn, stream_id)) != NULL) {
		cc->stream_closed = 1;
		call_finish_stream(cc, code);
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
	    (cc = call_find(conn, frame->hd.stream_id)) != NULL) {
		cc->stream_closed = 1;
		call_fail_later(cc);
	}
	return 0;
}

int
conn_submit(struct cconn *conn, struct grpc_ccall *cc)
{
	struct grpc_client *cli = conn->cli;
	char timeout[32];
	nghttp2_nv nva[8];
	size_t n = 0;

#define NV(k, v) do {							\
	nva[n].name = (uint8_t *)(k);					\
	nva[n].namelen = strlen(k);					\
	nva[n].value = (uint8_t *)(v);					\
	nva[n].valuelen = strlen(v);					\
	nva[n].flags = NGHTTP2_NV_FLAG_NONE;				\
	n++;								\
} while (0)
	NV(":method", "POST");
	NV(":scheme", cli->opts.tls != NULL ? "https" : "http");
	NV(":path", cc->path);
	NV(":authority", cli->authority);
	NV("te", "trailers");
	NV("content-type", "application/grpc");
	NV("user-agent", "rdzv/" RDZV_VERSION);
	if (cc->deadline_at != 0) {
		uint64_t now = mono_ms();
		uint64_t left = cc->deadline_at > now ?
		    cc->deadline_at - now : 1;
		grpc_timeout_format(left, timeout, sizeof(timeout));
		NV("grpc-timeout", timeout);
	}
#undef NV

	nghttp2_data_provider dp = { .read_callback = data_read_cb };
	int32_t id = nghttp2_submit_request(conn->h2, NULL, nva, n, &dp, NULL);
	if (id < 0)
		return -EAGAIN;
	cc->stream_id = id;
	return 0;
}

/* Sends what nghttp2 has queued; closes a session that has ended and a
 * drained connection after GOAWAY. Only from the outermost cli_leave. */
void
conn_flush(struct cconn *conn)
{
	const char *peer = conn->cli->peer;

	if (conn->state != CCONN_READY)
		return;
	int rv = nghttp2_session_send(conn->h2);
	if (conn->state != CCONN_READY)
		return;
	if (rv != 0)
		conn_close(conn, -EPROTO, "%s: HTTP/2 error: %s", peer,
		    nghttp2_strerror(rv));
	else if (!nghttp2_session_want_read(conn->h2) &&
	    !nghttp2_session_want_write(conn->h2))
		conn_close(conn, -ESHUTDOWN, "%s: HTTP/2 session ended", peer);
	else if (conn->goaway && TAILQ_EMPTY(&conn->calls))
		conn_close(conn, -ESHUTDOWN, "%s: the server sent GOAWAY",
		    peer);
}

/* ---------------------------------------------------------- keepalive */

static void
ka_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	cli_enter(cli);
	if (conn->state == CCONN_READY && !conn->ping_outstanding &&
	    nghttp2_submit_ping(conn->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
		struct timeval tv = { cli->opts.keepalive_timeout_ms / 1000,
		    (cli->opts.keepalive_timeout_ms % 1000) * 1000 };
		conn->ping_outstanding = 1;
		evtimer_add(conn->ka_timeout, &tv);
	}
	cli_leave(cli);
}

static void
ka_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	cli_enter(cli);
	if (conn->state == CCONN_READY)
		conn_close(conn, -ETIMEDOUT,
		    "%s: keepalive timeout: no PING ACK within %u ms",
		    cli->peer, cli->opts.keepalive_timeout_ms);
	cli_leave(cli);
}

/* --------------------------------------------------------- bufferevent */

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	struct evbuffer *in = bufferevent_get_input(bev);

	cli_enter(cli);
	if (evbuffer_get_length(in) > 0)
		conn->got_data = 1;
	while (conn->state == CCONN_READY && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		ssize_t rv = nghttp2_session_mem_recv(conn->h2, v.iov_base,
		    v.iov_len);
		if (conn->state != CCONN_READY)
			break;
		if (rv < 0) {
			conn_close(conn, -EPROTO, "%s: HTTP/2 error: %s",
			    cli->peer, nghttp2_strerror((int)rv));
			break;
		}
		evbuffer_drain(in, (size_t)rv);
	}
	cli_leave(cli);
}

/* Output drained: the outermost cli_leave sends more. */
static void
write_cb(struct bufferevent *bev, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	cli_enter(cli);
	cli_leave(cli);
}

static void
conn_ready(struct cconn *conn)
{
	struct grpc_client *cli = conn->cli;
	nghttp2_session_callbacks *cbs;
	struct grpc_ccall *cc, *next;
	int rv;

	event_del(conn->connect_timer);
	if (nghttp2_session_callbacks_new(&cbs) != 0) {
		conn_close(conn, -ENOMEM, "%s: out of memory", cli->peer);
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
	rv = nghttp2_session_client_new(&conn->h2, cbs, conn);
	nghttp2_session_callbacks_del(cbs);
	if (rv != 0) {
		conn->h2 = NULL;
		conn_close(conn, -ENOMEM, "%s: %s", cli->peer,
		    nghttp2_strerror(rv));
		return;
	}

	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW },
	};
	if (nghttp2_submit_settings(conn->h2, NGHTTP2_FLAG_NONE, iv,
	    sizeof(iv) / sizeof(iv[0])) != 0 ||
	    nghttp2_session_set_local_window_size(conn->h2, NGHTTP2_FLAG_NONE,
	    0, CONN_WINDOW) != 0) {
		conn_close(conn, -ENOMEM, "%s: cannot start HTTP/2", cli->peer);
		return;
	}
	conn->state = CCONN_READY;

	if (cli->opts.keepalive_ms > 0) {
		struct timeval tv = { cli->opts.keepalive_ms / 1000,
		    (cli->opts.keepalive_ms % 1000) * 1000 };
		conn->ka_ev = event_new(cli->base, -1, EV_PERSIST, ka_cb, conn);
		conn->ka_timeout = evtimer_new(cli->base, ka_timeout_cb, conn);
		if (conn->ka_ev == NULL || conn->ka_timeout == NULL) {
			conn_close(conn, -ENOMEM, "%s: out of memory",
			    cli->peer);
			return;
		}
		event_add(conn->ka_ev, &tv);
	}

	for (cc = TAILQ_FIRST(&conn->calls); cc != NULL; cc = next) {
		next = TAILQ_NEXT(cc, entry);
		if (cc->stream_id == 0 && conn_submit(conn, cc) != 0)
			call_fail_later(cc);
	}
}

/* Describes why the bufferevent failed: TLS verification, another TLS
 * error, or the socket's errno. */
static void
conn_error(struct cconn *conn)
{
	struct grpc_client *cli = conn->cli;
	int e = EVUTIL_SOCKET_ERROR();
	const char *what = conn->state == CCONN_HANDSHAKE ?
	    "TLS handshake failed" : "TLS error";
	unsigned long oe = 0, x;
	char why[128];

	if (cli->opts.tls != NULL) {
		SSL *ssl = bufferevent_openssl_get_ssl(conn->bev);
		long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
		while ((x = bufferevent_get_openssl_error(conn->bev)) != 0) {
			if (oe == 0)
				oe = x;
		}
		if (conn->state == CCONN_HANDSHAKE && vr != X509_V_OK) {
			conn_close(conn, -EPROTO,
			    "%s: %s: certificate verification failed: %s",
			    cli->peer, what, X509_verify_cert_error_string(vr));
			return;
		}
		/* TLS 1.3 servers refuse a missing client certificate after
		 * the handshake, so the first read fails: say so. */
		const char *hint = conn->state == CCONN_READY &&
		    !conn->got_data && SSL_CTX_get0_certificate(
		    tls_ssl_ctx(cli->opts.tls)) == NULL ?
		    " (does the server require a client certificate?)" : "";
		if (oe != 0) {
			const char *r = ERR_reason_error_string(oe);
			conn_close(conn, -EPROTO, "%s: %s: %s%s", cli->peer,
			    what, r != NULL ? r : "unknown error", hint);
			return;
		}
		if (conn->state == CCONN_HANDSHAKE) {
			conn_close(conn, e != 0 ? -e : -ECONNRESET,
			    "%s: %s: %s", cli->peer, what, e != 0 ?
			    errno_reason(e, why, sizeof(why)) :
			    "connection closed by the server");
			return;
		}
	}
	if (e == 0)
		e = ECONNRESET;
	conn_close(conn, -e, "%s: %s", cli->peer,
	    errno_reason(e, why, sizeof(why)));
}

static void
event_cb(struct bufferevent *bev, short events, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	cli_enter(cli);
	if (conn->state == CCONN_CLOSED) {
		/* Nothing: already closed. */
	} else if (events & BEV_EVENT_CONNECTED) {
		const unsigned char *alpn = NULL;
		unsigned int alen = 0;
		SSL_get0_alpn_selected(bufferevent_openssl_get_ssl(bev), &alpn,
		    &alen);
		if (alen != 2 || memcmp(alpn, "h2", 2) != 0)
			conn_close(conn, -EPROTO, "%s: the server did not "
			    "agree to HTTP/2 (ALPN h2)", cli->peer);
		else
			conn_ready(conn);
	} else if (events & BEV_EVENT_ERROR) {
		conn_error(conn);
	} else if (events & BEV_EVENT_EOF) {
		conn_close(conn, -ECONNRESET, "%s: connection closed by the "
		    "server%s", cli->peer, conn->goaway ? " after GOAWAY" : "");
	}
	cli_leave(cli);
}

/* The socket is connected: note our address, then TLS or HTTP/2. */
static void
conn_connected(struct cconn *conn)
{
	struct grpc_client *cli = conn->cli;
	int one = 1;

	if (cli->opts.server.kind == ENDPOINT_UNIX) {
		snprintf(conn->local, sizeof(conn->local), "unix");
	} else {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (getsockname(conn->fd, (struct sockaddr *)&ss, &len) != 0 ||
		    getnameinfo((struct sockaddr *)&ss, len, conn->local,
		    sizeof(conn->local), NULL, 0, NI_NUMERICHOST) != 0)
			conn->local[0] = '\0';
	}

	if (cli->opts.tls == NULL) {
		conn->bev = bufferevent_socket_new(cli->base, conn->fd,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (conn->bev == NULL) {
			conn_close(conn, -ENOMEM, "%s: out of memory",
			    cli->peer);
			return;
		}
		conn->fd = -1;
		bufferevent_setcb(conn->bev, read_cb, write_cb, event_cb, conn);
		bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
		conn_ready(conn);
		return;
	}

	SSL_CTX *ctx = tls_ssl_ctx(cli->opts.tls);
	const char *name = cli->server_name;
	if (name == NULL && cli->opts.server.kind == ENDPOINT_TCP)
		name = cli->opts.server.host;
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL) {
		conn_close(conn, -ENOMEM, "%s: cannot start TLS", cli->peer);
		return;
	}
	if (name != NULL && !is_ip_literal(name))
		SSL_set_tlsext_host_name(ssl, name);
	if (name != NULL && (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER))
		SSL_set1_host(ssl, name);
	conn->bev = bufferevent_openssl_socket_new(cli->base, conn->fd, ssl,
	    BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (conn->bev == NULL) {
		SSL_free(ssl);
		conn_close(conn, -ENOMEM, "%s: cannot start TLS", cli->peer);
		return;
	}
	conn->fd = -1;
	bufferevent_openssl_set_allow_dirty_shutdown(conn->bev, 1);
	conn->state = CCONN_HANDSHAKE;
	bufferevent_setcb(conn->bev, read_cb, write_cb, event_cb, conn);
	bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
}

/* --------------------------------------------------------------- connect */

static void
connect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	int err = 0;
	socklen_t len = sizeof(err);

	cli_enter(cli);
	if (conn->state == CCONN_CONNECTING) {
		if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0) {
			close(conn->fd);
			conn->fd = -1;
			conn->last_errno = err;
			conn_connect_next(conn);
		} else {
			conn_connected(conn);
		}
	}
	cli_leave(cli);
}

/* Starts a non-blocking connect to one address. Returns 0 when connected
 * or under way, -errno when it failed at once. */
static int
conn_try(struct cconn *conn, const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) == 0) {
		conn->fd = fd;
		conn_connected(conn);
		return 0;
	}
	if (errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	conn->fd = fd;
	if (conn->connect_ev != NULL)
		event_free(conn->connect_ev);
	conn->connect_ev = event_new(conn->cli->base, fd, EV_WRITE, connect_cb,
	    conn);
	if (conn->connect_ev == NULL ||
	    event_add(conn->connect_ev, NULL) != 0) {
		close(fd);
		conn->fd = -1;
		return -ENOMEM;
	}
	return 0;
}

/* Tries the remaining addresses in order; fails with the last error. */
static void
conn_connect_next(struct cconn *conn)
{
	char why[128];
	int rc;

	while (conn->ai_next != NULL) {
		struct addrinfo *ai = conn->ai_next;
		conn->ai_next = ai->ai_next;
		if ((rc = conn_try(conn, ai->ai_addr, ai->ai_addrlen)) == 0)
			return;
		conn->last_errno = -rc;
	}
	if (conn->last_errno == 0)
		conn->last_errno = ECONNREFUSED;
	conn_close(conn, -conn->last_errno, "%s: %s", conn->cli->peer,
	    errno_reason(conn->last_errno, why, sizeof(why)));
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	const struct endpoint *ep = &cli->opts.server;

	cli_enter(cli);
	if (conn->state != CCONN_CONNECTING)
		goto out;
	if (ep->kind == ENDPOINT_UNIX) {
		struct sockaddr_un sun;
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", ep->path);
		int rc = conn_try(conn, (struct sockaddr *)&sun, sizeof(sun));
		if (rc != 0) {
			conn->last_errno = -rc;
			conn_connect_next(conn);
		}
	} else {
		struct addrinfo hints;
		char port[8];
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_NUMERICSERV;
		snprintf(port, sizeof(port), "%u", (unsigned int)ep->port);
		int rc = getaddrinfo(ep->host, port, &hints, &conn->ai);
		if (rc != 0) {
			conn->ai = NULL;
			conn_close(conn, -EHOSTUNREACH, "%s: cannot resolve "
			    "%s: %s", cli->peer, ep->host, gai_strerror(rc));
			goto out;
		}
		conn->ai_next = conn->ai;
		conn_connect_next(conn);
	}
out:
	cli_leave(cli);
}

static void
connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	cli_enter(cli);
	if (conn->state == CCONN_CONNECTING || conn->state == CCONN_HANDSHAKE)
		conn_close(conn, -ETIMEDOUT, "%s: connection timed out after "
		    "%u ms%s", cli->peer, cli->opts.connect_timeout_ms,
		    conn->state == CCONN_HANDSHAKE ? " (TLS handshake)" : "");
	cli_leave(cli);
}

/* A connection that starts connecting on the next loop turn, so every
 * failure reaches the calls from the loop. */
struct cconn *
conn_new(struct grpc_client *cli)
{
	struct cconn *conn;
	struct timeval now = { 0, 0 };
	struct timeval tv = { cli->opts.connect_timeout_ms / 1000,
	    (cli->opts.connect_timeout_ms % 1000) * 1000 };

	if ((conn = calloc(1, sizeof(*conn))) == NULL)
		return NULL;
	conn->cli = cli;
	conn->fd = -1;
	conn->state = CCONN_CONNECTING;
	TAILQ_INIT(&conn->calls);
	conn->start_ev = evtimer_new(cli->base, start_cb, conn);
	conn->connect_timer = evtimer_new(cli->base, connect_timeout_cb, conn);
	if (conn->start_ev == NULL || conn->connect_timer == NULL) {
		conn_free(conn);
		return NULL;
	}
	evtimer_add(conn->start_ev, &now);
	evtimer_add(conn->connect_timer, &tv);
	TAILQ_INSERT_TAIL(&cli->conns, conn, entry);
	return conn;
}
