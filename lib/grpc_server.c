/*
 * The gRPC server: listeners, connections and their one teardown path,
 * backpressure, keepalive and graceful shutdown. The HTTP/2 side and the
 * connections' I/O live in grpc_server_h2.c, the call API in
 * grpc_server_call.c.
 *
 * Writes never happen inside nghttp2's callbacks or the user's: API functions
 * schedule a flush (an active event of the connection) and the flush runs
 * from the event loop, where closing the connection is safe.
 *
 * Reading and writing a connection's bytes is in grpc_server_h2.c.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "grpc_server_int.h"

/* How long accepting pauses when we are out of file descriptors. */
#define ACCEPT_PAUSE_MS		500
/* How long after the shutdown notice the final GOAWAY goes out. */
#define GOAWAY_DELAY_MS		200
/* How long forced connections may take to write their last frames. */
#define DRAIN_MS		1000

static void	server_check_done(struct grpc_server *);

static struct timeval
ms_tv(uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	return tv;
}

/* ------------------------------------------------------------ server */

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_server *srv = arg;
	void (*done)(void *) = srv->done;

	/* done() may free the server: nothing of it is touched afterwards. */
	srv->done = NULL;
	if (done != NULL)
		done(srv->done_arg);
}

/* Accepting again after a pause: a descriptor may be free now. */
static void
accept_resume(struct grpc_server *srv)
{
	srv->accept_paused = 0;
	evtimer_del(srv->accept_ev);
	if (srv->shutting_down)
		return;
	for (size_t i = 0; i < srv->n_listeners; i++)
		evconnlistener_enable(srv->listeners[i]->evl);
}

static void
accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	accept_resume(arg);
}

struct grpc_server *
grpc_server_new(struct event_base *base, const struct grpc_method *methods,
    size_t n_methods, const struct grpc_server_opts *opts)
{
	struct grpc_server *srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return NULL;
	srv->base = base;
	srv->methods = methods;
	srv->n_methods = n_methods;
	if (opts != NULL)
		srv->opts = *opts;
	if (srv->opts.max_message == 0)
		srv->opts.max_message = 4 << 20;
	if (srv->opts.max_streams == 0)
		srv->opts.max_streams = 100;
	if (srv->opts.max_conns == 0)
		srv->opts.max_conns = 100000;
	if (srv->opts.out_cap == 0)
		srv->opts.out_cap = 1 << 20;
	if (opts == NULL)
		srv->opts.keepalive_ms = 5000;
	TAILQ_INIT(&srv->conns);
	srv->accept_ev = evtimer_new(base, accept_resume_cb, srv);
	srv->done_ev = event_new(base, -1, 0, done_cb, srv);
	if (srv->accept_ev == NULL || srv->done_ev == NULL) {
		grpc_server_free(srv);
		return NULL;
	}
	return srv;
}

size_t
grpc_server_conn_count(const struct grpc_server *srv)
{
	return srv->n_conns;
}

int
grpc_server_port(const struct grpc_server *srv, size_t listener)
{
	if (listener >= srv->n_listeners)
		return -1;
	return srv->listeners[listener]->port;
}

/* ---------------------------------------------------------- listeners */

static void	accept_cb(struct evconnlistener *, evutil_socket_t,
		    struct sockaddr *, int, void *);

/*
 * Out of descriptors (or another accept error): stop accepting instead of
 * spinning on a listener that stays readable. The next of our connections
 * to close frees a descriptor and resumes accepting (sconn_close); the
 * timer covers descriptors freed elsewhere (relayd does the same).
 */
static void
accept_error_cb(struct evconnlistener *evl, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	struct timeval tv = ms_tv(ACCEPT_PAUSE_MS);
	int err = errno;

	for (size_t i = 0; i < srv->n_listeners; i++)
		evconnlistener_disable(srv->listeners[i]->evl);
	srv->accept_paused = 1;
	evtimer_add(srv->accept_ev, &tv);
	if (srv->opts.accept_paused != NULL)
		srv->opts.accept_paused(err, ACCEPT_PAUSE_MS, srv->opts.cb_arg);
}

/*
 * TCP_NODELAY: replies are small and must not wait for an ACK. And our
 * keepalive PINGs make a dead peer's kernel stop ACKing: with
 * TCP_USER_TIMEOUT the connection then fails after three intervals instead
 * of TCP's quarter of an hour. A live client that is merely slow to answer
 * PINGs (grpcio polls only during calls) is kept. Set on the listening
 * socket, they hold for every connection it accepts on Linux, which saves
 * two system calls per connection.
 */
static void
tcp_sockopts(const struct grpc_server *srv, int fd)
{
	unsigned int uto = srv->opts.keepalive_ms * 3;
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (uto > 0)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto,
		    sizeof(uto));
}

static int
listen_socket(const struct endpoint *ep, int *port)
{
	struct addrinfo hints, *res, *ai;
	char portstr[16];
	int fd = -1, err = -EADDRNOTAVAIL, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof(portstr), "%u", ep->port);
	int rc = getaddrinfo(ep->host, portstr, &hints, &res);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;

	/* The first address that binds: one listener per endpoint. */
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			    sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 1024) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		return err;

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

/* A socket file left by an earlier run is removed; anything else is not. */
static int
listen_unix(const struct endpoint *ep)
{
	struct sockaddr_un sun;
	struct stat st;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(ep->path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, ep->path);
	if (lstat(ep->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(ep->path);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    listen(fd, 1024) == -1) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int
grpc_server_listen(struct grpc_server *srv, const struct endpoint *ep,
    struct tls_ctx *tls)
{
	struct grpc_listener *l, **ls;
	int fd, port = -1;

	if (srv->shutting_down)
		return -ESHUTDOWN;
	if (ep->kind == ENDPOINT_UNIX)
		fd = listen_unix(ep);
	else
		fd = listen_socket(ep, &port);
	if (fd < 0)
		return fd;
	if (ep->kind != ENDPOINT_UNIX)
		tcp_sockopts(srv, fd);

	l = calloc(1, sizeof(*l));
	ls = reallocarray(srv->listeners, srv->n_listeners + 1, sizeof(*ls));
	if (ls != NULL)
		srv->listeners = ls;
	if (l == NULL || ls == NULL) {
		free(l);
		close(fd);
		return -ENOMEM;
	}
	l->srv = srv;
	l->tls = tls;
	l->unix_socket = ep->kind == ENDPOINT_UNIX;
	l->port = port;
	if (l->unix_socket) {
		struct stat st;
		snprintf(l->path, sizeof(l->path), "%s", ep->path);
		if (stat(l->path, &st) == 0) {
			l->dev = st.st_dev;
			l->ino = st.st_ino;
		}
	}
	/* libevent's default backlog (128) drops SYNs when a whole cluster
	 * connects at once, and each dropped client waits a second to retry;
	 * the kernel caps this at net.core.somaxconn. */
	l->evl = evconnlistener_new(srv->base, accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 65535, fd);
	if (l->evl == NULL) {
		free(l);
		close(fd);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(l->evl, accept_error_cb);
	srv->listeners[srv->n_listeners++] = l;
	return 0;
}

static void
listeners_free(struct grpc_server *srv)
{
	for (size_t i = 0; i < srv->n_listeners; i++) {
		struct grpc_listener *l = srv->listeners[i];
		struct stat st;
		/* Our socket file, unless someone has replaced it since. */
		if (l->unix_socket && stat(l->path, &st) == 0 &&
		    st.st_dev == l->dev && st.st_ino == l->ino)
			unlink(l->path);
		evconnlistener_free(l->evl);
		free(l);
	}
	free(srv->listeners);
	srv->listeners = NULL;
	srv->n_listeners = 0;
}

/* -------------------------------------------------------- connections */

static void
addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    buf, len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, len);
	else
		snprintf(buf, len, "unix");
}

static void
keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	uint64_t ka = c->srv->opts.keepalive_ms, now = mono_ms();
	uint64_t idle = now - c->last_seen_ms;
	struct timeval tv;

	if (c->h2 == NULL && idle >= ka) {
		sconn_close(c, "no TLS handshake within the keepalive "
		    "interval");
		return;
	}
	if (idle >= ka) {
		nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL);
		sconn_schedule_flush(c);
		tv = ms_tv(ka);
	} else
		tv = ms_tv(ka - idle);
	evtimer_add(c->keepalive_ev, &tv);
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	sconn_flush(arg);
}

/* Frees what sconn_close has not; accepts half-built connections. */
static void
sconn_free(struct grpc_conn *c)
{
	struct grpc_call *call;

	while ((call = TAILQ_FIRST(&c->calls)) != NULL)
		scall_free(call);
	if (c->h2 != NULL)
		nghttp2_session_del(c->h2);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	if (c->rev != NULL)
		event_free(c->rev);
	if (c->wev != NULL)
		event_free(c->wev);
	if (c->out != NULL)
		evbuffer_free(c->out);
	if (c->bev == NULL && c->fd >= 0)
		close(c->fd);
	if (c->flush_ev != NULL)
		event_free(c->flush_ev);
	if (c->keepalive_ev != NULL)
		event_free(c->keepalive_ev);
	free(c);
}

/* "10.0.0.5:41234", "[::1]:41234" or "unix", for conn_closed. */
static void
peer_text(const struct grpc_conn *c, char *buf, size_t len)
{
	if (c->peer_port == 0)
		snprintf(buf, len, "%s", c->peer);
	else if (strchr(c->peer, ':') != NULL)
		snprintf(buf, len, "[%s]:%u", c->peer, c->peer_port);
	else
		snprintf(buf, len, "%s:%u", c->peer, c->peer_port);
}

/*
 * The one teardown path. The program hears why, then every call the user
 * still holds is told it was cancelled before anything is freed; a close
 * asked for while nghttp2 is running for this connection waits until it
 * has returned (and keeps its reason). The descriptor freed lets a paused
 * server accept again.
 */
void
sconn_close(struct grpc_conn *c, const char *reason)
{
	struct grpc_server *srv = c->srv;
	struct grpc_call *call;
	char peer[80];

	if (c->closed)
		return;
	if (c->in_h2 > 0) {
		if (!c->close_pending)
			snprintf(c->close_reason, sizeof(c->close_reason),
			    "%s", reason);
		c->close_pending = 1;
		return;
	}
	c->closed = 1;
	if (srv->opts.conn_closed != NULL) {
		peer_text(c, peer, sizeof(peer));
		srv->opts.conn_closed(peer, reason, srv->opts.cb_arg);
	}
again:
	TAILQ_FOREACH(call, &c->calls, entry) {
		if (!call->user_done) {
			scall_notify_close(call, 1);
			goto again;
		}
	}
	TAILQ_REMOVE(&srv->conns, c, entry);
	srv->n_conns--;
	sconn_free(c);
	if (srv->accept_paused)
		accept_resume(srv);
	server_check_done(srv);
}

void
sconn_closef(struct grpc_conn *c, const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	sconn_close(c, reason);
}

struct evbuffer *
sconn_output(const struct grpc_conn *c)
{
	return c->bev != NULL ? bufferevent_get_output(c->bev) : c->out;
}

size_t
sconn_queued(const struct grpc_conn *c)
{
	return c->queued + evbuffer_get_length(sconn_output(c));
}

/* The address of our side, looked up the first time someone asks. */
const char *
sconn_local(struct grpc_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = c->bev != NULL ? bufferevent_getfd(c->bev) : c->fd;

	if (c->local[0] != '\0')
		return c->local;
	if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		addr_text((struct sockaddr *)&ss, c->local, sizeof(c->local));
	else
		snprintf(c->local, sizeof(c->local), "unknown");
	return c->local;
}

void
sconn_schedule_flush(struct grpc_conn *c)
{
	if (!c->closed)
		event_active(c->flush_ev, EV_TIMEOUT, 0);
}

/* Tells calls waiting for room that there is some again. */
void
sconn_check_writable(struct grpc_conn *c)
{
	struct grpc_call *call;

	if (c->closed || !c->want_writable ||
	    sconn_queued(c) >= c->srv->opts.out_cap / 2)
		return;
	c->want_writable = 0;
	/* Calls are freed only inside nghttp2, never from here. */
	TAILQ_FOREACH(call, &c->calls, entry) {
		if (c->closed)
			break;
		if (!call->want_writable || call->user_done)
			continue;
		call->want_writable = 0;
		if (call->on_writable != NULL)
			call->on_writable(call, call->on_writable_arg);
	}
}

static void
sconn_peer_identity(struct grpc_conn *c, evutil_socket_t fd,
    struct sockaddr *sa)
{
	addr_text(sa, c->peer, sizeof(c->peer));
	if (sa->sa_family == AF_INET)
		c->peer_port = ntohs(((struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		c->peer_port = ntohs(((struct sockaddr_in6 *)sa)->sin6_port);
	if (c->listener->unix_socket) {
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
			snprintf(c->identity, sizeof(c->identity), "uid:%u",
			    (unsigned)uc.uid);
		else
			snprintf(c->identity, sizeof(c->identity), "unknown");
	} else
		snprintf(c->identity, sizeof(c->identity), "anonymous");
}

static void
accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	struct grpc_conn *c;

	if (srv->shutting_down || srv->n_conns >= srv->opts.max_conns ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	/* The listener accepts with SOCK_NONBLOCK | SOCK_CLOEXEC. */
	c->fd = -1;
#ifndef __linux__
	/* Linux copies these from the listening socket (tcp_sockopts). */
	if (!l->unix_socket)
		tcp_sockopts(srv, fd);
#endif
	c->srv = srv;
	c->listener = l;
	c->last_seen_ms = mono_ms();
	TAILQ_INIT(&c->calls);
	sconn_peer_identity(c, fd, sa);

	int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;
	if (l->tls != NULL) {
		SSL *ssl = SSL_new(tls_ssl_ctx(l->tls));
		if (ssl == NULL) {
			evutil_closesocket(fd);
			free(c);
			return;
		}
		c->bev = bufferevent_openssl_socket_new(srv->base, fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, opts);
		if (c->bev == NULL) {
			SSL_free(ssl);
			evutil_closesocket(fd);
			free(c);
			return;
		}
	} else {
		/* From here on sconn_free closes it. */
		c->fd = fd;
		c->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST,
		    sconn_raw_read_cb, c);
		c->wev = event_new(srv->base, fd, EV_WRITE, sconn_raw_write_cb,
		    c);
		c->out = evbuffer_new();
		if (c->rev == NULL || c->wev == NULL || c->out == NULL) {
			sconn_free(c);
			return;
		}
	}
	c->flush_ev = event_new(srv->base, -1, 0, flush_cb, c);
	if (srv->opts.keepalive_ms > 0)
		c->keepalive_ev = evtimer_new(srv->base, keepalive_cb, c);
	if (c->flush_ev == NULL || (srv->opts.keepalive_ms > 0 &&
	    c->keepalive_ev == NULL) || (l->tls == NULL &&
	    srv_h2_session_new(c) != 0)) {
		sconn_free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->conns, c, entry);
	srv->n_conns++;
	if (c->keepalive_ev != NULL) {
		struct timeval tv = ms_tv(srv->opts.keepalive_ms);
		evtimer_add(c->keepalive_ev, &tv);
	}
	if (c->bev == NULL) {
		/*
		 * Our SETTINGS wait for the client's preface and go out with
		 * the answer to it: one write less per connection. A client
		 * sends its preface without waiting for ours (RFC 9113 §3.4).
		 */
		event_add(c->rev, NULL);
		return;
	}
	bufferevent_setwatermark(c->bev, EV_WRITE, GRPC_SERVER_WBUF_MAX / 2, 0);
	bufferevent_setcb(c->bev, sconn_read_cb, sconn_write_cb, sconn_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* ----------------------------------------------------------- shutdown */

static void
server_check_done(struct grpc_server *srv)
{
	if (srv->shutting_down && srv->n_conns == 0 && srv->done != NULL)
		event_active(srv->done_ev, EV_TIMEOUT, 0);
}

static void
goaway_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_server *srv = arg;
	struct grpc_conn *c, *next;

	TAILQ_FOREACH_SAFE(c, &srv->conns, entry, next) {
		if (c->h2 == NULL) {
			sconn_close(c, "the server is shutting down");
			continue;
		}
		srv_h2_goaway(c, 1);
		sconn_schedule_flush(c);
	}
}

/*
 * The timeout: calls still open end with UNAVAILABLE, each connection gets
 * a moment to write that, and after it whatever is left is closed.
 */
static void
shutdown_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_server *srv = arg;
	struct grpc_conn *c, *next;
	struct grpc_call *call;
	int forced = srv->forcing;

	srv->forcing = 1;
	TAILQ_FOREACH_SAFE(c, &srv->conns, entry, next) {
		if (forced || c->h2 == NULL) {
			sconn_close(c, "the shutdown timeout passed");
			continue;
		}
		c->draining = 1;
again:
		TAILQ_FOREACH(call, &c->calls, entry) {
			if (call->state != CALL_DONE) {
				scall_end(call, GRPC_UNAVAILABLE,
				    "server shutting down");
				if (!call->user_done)
					scall_notify_close(call, 1);
				goto again;
			}
		}
		sconn_schedule_flush(c);
	}
	if (!forced && srv->n_conns > 0) {
		struct timeval tv = ms_tv(DRAIN_MS);
		evtimer_add(srv->shutdown_ev, &tv);
	}
}

void
grpc_server_shutdown(struct grpc_server *srv, uint32_t timeout_ms,
    void (*done)(void *arg), void *arg)
{
	struct grpc_conn *c;
	struct timeval tv;

	if (srv->shutting_down)
		return;
	srv->shutting_down = 1;
	srv->done = done;
	srv->done_arg = arg;
	listeners_free(srv);
	evtimer_del(srv->accept_ev);
	srv->goaway_ev = evtimer_new(srv->base, goaway_cb, srv);
	srv->shutdown_ev = evtimer_new(srv->base, shutdown_timeout_cb, srv);
	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->h2 != NULL) {
			srv_h2_goaway(c, 0);
			sconn_schedule_flush(c);
		}
	}
	if (srv->goaway_ev != NULL) {
		tv = ms_tv(timeout_ms < GOAWAY_DELAY_MS * 2 ? timeout_ms / 2 :
		    GOAWAY_DELAY_MS);
		evtimer_add(srv->goaway_ev, &tv);
	}
	if (srv->shutdown_ev != NULL) {
		tv = ms_tv(timeout_ms);
		evtimer_add(srv->shutdown_ev, &tv);
	}
	server_check_done(srv);
}

void
grpc_server_free(struct grpc_server *srv)
{
	struct grpc_conn *c;

	if (srv == NULL)
		return;
	listeners_free(srv);
	srv->done = NULL;
	while ((c = TAILQ_FIRST(&srv->conns)) != NULL) {
		/* Freeing the server from inside its callbacks is a caller's
		 * bug; closing anyway beats looping forever. */
		c->in_h2 = 0;
		sconn_close(c, "the server was freed");
	}
	if (srv->accept_ev != NULL)
		event_free(srv->accept_ev);
	if (srv->goaway_ev != NULL)
		event_free(srv->goaway_ev);
	if (srv->shutdown_ev != NULL)
		event_free(srv->shutdown_ev);
	if (srv->done_ev != NULL)
		event_free(srv->done_ev);
	free(srv);
}

uint64_t
grpc_conn_last_seen_ms(const struct grpc_conn *conn)
{
	return conn->last_seen_ms;
}
