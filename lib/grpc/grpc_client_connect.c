/*
 * Getting a gRPC client connection's socket: name resolution, a
 * non-blocking connect that tries each address in turn within the connect
 * timeout, and the TLS handshake (SNI, host verification, ALPN h2). Failures
 * are described so a user can act: the peer, then the cause.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
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

/*
 * A connection the server ended before sending anything usually means a
 * mismatch of settings: TLS 1.3 servers refuse a missing client certificate
 * only after the handshake, and a TLS server drops cleartext HTTP/2.
 */
static const char *
silent_hint(const struct cconn *conn)
{
	struct tls_ctx *tls = conn->cli->opts.tls;

	if (conn->state != CCONN_READY || conn->got_data)
		return "";
	if (tls == NULL)
		return " before answering (does it expect TLS?)";
	if (SSL_CTX_get0_certificate(tls_ssl_ctx(tls)) == NULL)
		return " (does the server require a client certificate?)";
	return "";
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
			gcli_conn_close(conn, -EPROTO,
			    "%s: %s: certificate verification failed: %s",
			    cli->peer, what, X509_verify_cert_error_string(vr));
			return;
		}
		const char *hint = silent_hint(conn);
		if (oe != 0) {
			const char *r = ERR_reason_error_string(oe);
			gcli_conn_close(conn, -EPROTO, "%s: %s: %s%s",
			    cli->peer,
			    what, r != NULL ? r : "unknown error", hint);
			return;
		}
		if (conn->state == CCONN_HANDSHAKE) {
			gcli_conn_close(conn, e != 0 ? -e : -ECONNRESET,
			    "%s: %s: %s", cli->peer, what, e != 0 ?
			    errno_reason(e, why, sizeof(why)) :
			    "connection closed by the server");
			return;
		}
	}
	if (e == 0)
		e = ECONNRESET;
	gcli_conn_close(conn, -e, "%s: %s", cli->peer,
	    errno_reason(e, why, sizeof(why)));
}

static void
event_cb(struct bufferevent *bev, short events, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	if (conn->state == CCONN_CLOSED) {
		/* Nothing: already closed. */
	} else if (events & BEV_EVENT_CONNECTED) {
		const unsigned char *alpn = NULL;
		unsigned int alen = 0;
		SSL_get0_alpn_selected(bufferevent_openssl_get_ssl(bev), &alpn,
		    &alen);
		if (alen != 2 || memcmp(alpn, "h2", 2) != 0)
			gcli_conn_close(conn, -EPROTO, "%s: the server did not "
			    "agree to HTTP/2 (ALPN h2)", cli->peer);
		else
			gcli_conn_ready(conn);
	} else if (events & BEV_EVENT_ERROR) {
		conn_error(conn);
	} else if (events & BEV_EVENT_EOF) {
		gcli_conn_close(conn, -ECONNRESET,
		    "%s: connection closed by the "
		    "server%s%s", cli->peer,
		        conn->goaway ? " after GOAWAY" : "",
		    silent_hint(conn));
	}
	gcli_leave(cli);
}

/* Cleartext: reads straight into nghttp2; an end or an error of the
 * socket closes the connection as the bufferevent's event_cb does. */
static void
raw_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	uint8_t buf[16384];
	char why[128];
	size_t used;

	gcli_enter(cli);
	for (int i = 0; i < 4 && conn->state == CCONN_READY; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0) {
			if (gcli_conn_feed(conn, buf, (size_t)n, &used) != 0 ||
			    (size_t)n < sizeof(buf))
				break;
			continue;
		}
		if (n == 0) {
			gcli_conn_close(conn, -ECONNRESET,
			    "%s: connection closed "
			    "by the server%s%s", cli->peer, conn->goaway ?
			    " after GOAWAY" : "", silent_hint(conn));
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		int e = errno;
		gcli_conn_close(conn, -e, "%s: %s", cli->peer,
		    errno_reason(e, why, sizeof(why)));
		break;
	}
	gcli_leave(cli);
}

/*
 * When (mono ms) the server's kernel last acknowledged our bytes on an
 * established connection: TCP_INFO's last ACK. A unix socket's peer is on
 * this host: now. 0 when it cannot be known.
 */
uint64_t
gcli_conn_acked_ms(struct cconn *conn)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int fd = conn->bev != NULL ? bufferevent_getfd(conn->bev) : conn->fd;
	uint64_t now = mono_ms();

	if (conn->cli->opts.server.kind == ENDPOINT_UNIX)
		return now;
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return 0;
	return ti.tcpi_last_ack_recv < now ? now - ti.tcpi_last_ack_recv : 0;
}

/* Our address on an established connection, looked up the first time
 * someone asks (the agent advertises it, SPEC §6). */
const char *
gcli_conn_local(struct cconn *conn)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = conn->bev != NULL ? bufferevent_getfd(conn->bev) : conn->fd;

	if (conn->local[0] != '\0')
		return conn->local;
	if (conn->cli->opts.server.kind == ENDPOINT_UNIX)
		snprintf(conn->local, sizeof(conn->local), "unix");
	else if (fd < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, conn->local,
	    sizeof(conn->local), NULL, 0, NI_NUMERICHOST) != 0)
		conn->local[0] = '\0';
	return conn->local;
}

/* The socket is connected: TLS, or HTTP/2 straight away. */
static void
conn_connected(struct cconn *conn)
{
	struct grpc_client *cli = conn->cli;
	int one = 1;

	if (cli->opts.server.kind != ENDPOINT_UNIX)
		setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));

	if (cli->opts.tls == NULL) {
		conn->rev = event_new(cli->base, conn->fd, EV_READ | EV_PERSIST,
		    raw_read_cb, conn);
		conn->wev = event_new(cli->base, conn->fd, EV_WRITE,
		    gcli_conn_raw_write_cb, conn);
		conn->out = evbuffer_new();
		if (conn->rev == NULL || conn->wev == NULL ||
		    conn->out == NULL || event_add(conn->rev, NULL) != 0) {
			gcli_conn_close(conn, -ENOMEM, "%s: out of memory",
			    cli->peer);
			return;
		}
		gcli_conn_ready(conn);
		return;
	}

	SSL_CTX *ctx = tls_ssl_ctx(cli->opts.tls);
	const char *name = cli->server_name;
	if (name == NULL && cli->opts.server.kind == ENDPOINT_TCP)
		name = cli->opts.server.host;
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL) {
		gcli_conn_close(conn, -ENOMEM, "%s: cannot start TLS",
		    cli->peer);
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
		gcli_conn_close(conn, -ENOMEM, "%s: cannot start TLS",
		    cli->peer);
		return;
	}
	conn->fd = -1;
	bufferevent_openssl_set_allow_dirty_shutdown(conn->bev, 1);
	conn->state = CCONN_HANDSHAKE;
	bufferevent_setcb(conn->bev, gcli_conn_read_cb, gcli_conn_write_cb,
	    event_cb, conn);
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

	gcli_enter(cli);
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
	gcli_leave(cli);
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
	gcli_conn_close(conn, -conn->last_errno, "%s: %s", conn->cli->peer,
	    errno_reason(conn->last_errno, why, sizeof(why)));
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;
	const struct endpoint *ep = &cli->opts.server;

	gcli_enter(cli);
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
			gcli_conn_close(conn, -EHOSTUNREACH,
			    "%s: cannot resolve "
			    "%s: %s", cli->peer, ep->host, gai_strerror(rc));
			goto out;
		}
		conn->ai_next = conn->ai;
		conn_connect_next(conn);
	}
out:
	gcli_leave(cli);
}

static void
connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *conn = arg;
	struct grpc_client *cli = conn->cli;

	gcli_enter(cli);
	if (conn->state == CCONN_CONNECTING || conn->state == CCONN_HANDSHAKE)
		gcli_conn_close(conn, -ETIMEDOUT,
		    "%s: connection timed out after "
		    "%u ms%s", cli->peer, cli->opts.connect_timeout_ms,
		    conn->state == CCONN_HANDSHAKE ? " (TLS handshake)" : "");
	gcli_leave(cli);
}

/* A connection that starts connecting on the next loop turn, so every
 * failure reaches the calls from the loop. */
struct cconn *
gcli_conn_new(struct grpc_client *cli)
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
		gcli_conn_free(conn);
		return NULL;
	}
	evtimer_add(conn->start_ev, &now);
	evtimer_add(conn->connect_timer, &tv);
	TAILQ_INSERT_TAIL(&cli->conns, conn, entry);
	return conn;
}
