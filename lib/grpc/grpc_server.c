/*
 * The gRPC server: connections and their one teardown path, their
 * deadlines (keepalive, the HTTP/2 preface, idleness), backpressure and
 * graceful shutdown. Listeners and accepting live in grpc_server_listen.c,
 * the HTTP/2 side in grpc_server_h2.c, the connections' I/O in
 * grpc_server_io.c, the call API in grpc_server_call.c.
 *
 * Writes never happen inside nghttp2's callbacks or the user's: API functions
 * schedule a flush (the connection joins the server's flush list, written
 * by one active event) and the flush runs from the event loop, where
 * closing the connection is safe.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
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

/* How long after the shutdown notice the final GOAWAY goes out. */
#define GOAWAY_DELAY_MS		200
/* How long forced connections may take to write their last frames, and
 * idle ones after their GOAWAY. */
#define DRAIN_MS		1000

static void	server_check_done(struct grpc_server *);
static void	flush_cb(evutil_socket_t, short, void *);

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
	if (srv->opts.out_total_cap == 0)
		srv->opts.out_total_cap = 32 << 20;
	if (opts == NULL)
		srv->opts.keepalive_ms = 5000;
	if (srv->opts.preface_ms == 0)
		srv->opts.preface_ms = 10000;
	if (srv->opts.idle_ms == 0)
		srv->opts.idle_ms = 600000;
	if (srv->opts.unproven_idle_ms == 0 ||
	    srv->opts.unproven_idle_ms > srv->opts.idle_ms)
		srv->opts.unproven_idle_ms = srv->opts.idle_ms;
	TAILQ_INIT(&srv->conns);
	TAILQ_INIT(&srv->flushq);
	TAILQ_INIT(&srv->unproven);
	srv->done_ev = event_new(base, -1, 0, done_cb, srv);
	srv->flush_ev = event_new(base, -1, 0, flush_cb, srv);
	if (srv->done_ev == NULL || srv->flush_ev == NULL) {
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

uint32_t
grpc_server_max_conns(const struct grpc_server *srv)
{
	return srv->opts.max_conns;
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

/*
 * A connection's deadlines share one timer: keepalive (a PING once the
 * client has been silent that long), the HTTP/2 preface and idleness.
 * Each keeps its due time; the timer is armed for the earliest and, when
 * it fires, handles those that are due and arms itself again. Moving a
 * deadline later leaves the timer as it is: it finds that out when it
 * fires.
 */
void
gsrv_conn_timer_arm(struct grpc_conn *c)
{
	uint64_t due = c->idle_due_ms, now;
	struct timeval tv;

	if (c->keepalive_due_ms != 0 && c->keepalive_due_ms < due)
		due = c->keepalive_due_ms;
	if (c->queued > 0 && c->out_progress_ms + OUT_STALL_MS < due)
		due = c->out_progress_ms + OUT_STALL_MS;
	if (c->timer_due_ms != 0 && c->timer_due_ms <= due)
		return;
	now = mono_ms();
	tv = ms_tv(due > now ? due - now : 0);
	c->timer_due_ms = due;
	evtimer_add(c->timer, &tv);
}

/* Keepalive's part of the timer. Returns -1 when it closed the
 * connection. */
static int
keepalive_due(struct grpc_conn *c, uint64_t now)
{
	uint64_t ka = c->srv->opts.keepalive_ms;
	uint64_t idle = mono_since(now, c->last_seen_ms);

	if (c->h2 == NULL && idle >= ka) {
		gsrv_conn_tls_fail(c, "no TLS handshake within the keepalive "
		    "interval");
		return -1;
	}
	if (idle >= ka) {
		nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL);
		gsrv_conn_schedule_flush(c);
		c->keepalive_due_ms = now + ka;
	} else
		c->keepalive_due_ms = now + ka - idle;
	return 0;
}

/*
 * A connection must send the HTTP/2 preface (after its TLS handshake)
 * within preface_ms of being accepted, and is not kept once it has held no
 * stream for idle_ms: otherwise silent connections would hold descriptors
 * and max_conns slots for as long as their clients like. An idle
 * connection is told with GOAWAY, which gRPC clients take as a reason to
 * reconnect before their next call, and closed once that is written (or
 * DRAIN_MS later). The deadline is not moved as streams come and go: when
 * it comes it looks at when the last stream closed and is set again.
 */
static void
idle_due(struct grpc_conn *c, uint64_t now)
{
	const struct grpc_server_opts *o = &c->srv->opts;
	uint64_t due;
	/* One that has made no authenticated call is kept for less. */
	uint32_t idle = c->proven ? o->idle_ms : o->unproven_idle_ms;

	if (c->idle_goaway) {
		gsrv_conn_close(c, c->close_reason);
		return;
	}
	if (!c->preface_done) {
		if (c->bev != NULL && c->h2 == NULL)
			gsrv_conn_tls_fail(c, "no TLS handshake within the "
			    "preface deadline");
		else
			gsrv_conn_closef(c, "no HTTP/2 preface within %u ms",
			    o->preface_ms);
		return;
	}
	due = TAILQ_EMPTY(&c->calls) ? c->idle_since_ms + idle : now + idle;
	if (now < due || c->goaway_sent) {
		c->idle_due_ms = now < due ? due : now + idle;
		gsrv_conn_timer_arm(c);
		return;
	}
	/* The reason stays: the close that follows the GOAWAY gives it. */
	free(c->close_reason);
	c->close_reason = NULL;
	gsrv_conn_reason(c, "no stream for %u ms%s: sent GOAWAY", idle,
	    c->proven ? "" : " and no authenticated call");
	c->goaway_sent = 1;
	c->idle_goaway = 1;
	nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
	    (const uint8_t *)"max_idle", 8);
	c->idle_due_ms = now + DRAIN_MS;
	gsrv_conn_timer_arm(c);
	/* Now, not on the next turn: a stream the client opens before the
	 * GOAWAY is written would be one it believes we ignored. */
	gsrv_conn_flush(c);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	uint64_t now = mono_ms(), stall;

	c->timer_due_ms = 0;
	if (gsrv_out_stalled(c, now, &stall) != 0)
		return;
	if (c->keepalive_due_ms != 0 && now >= c->keepalive_due_ms &&
	    keepalive_due(c, now) != 0)
		return;
	if (now >= c->idle_due_ms)
		idle_due(c, now);	/* arms the timer unless it closed */
	else
		gsrv_conn_timer_arm(c);
}

/* The turn's flush: every connection with output, in one event. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_server *srv = arg;
	struct grpc_conn *c;

	while ((c = TAILQ_FIRST(&srv->flushq)) != NULL) {
		TAILQ_REMOVE(&srv->flushq, c, flush_entry);
		c->flush_queued = 0;
		/* Here, where no caller is iterating over its calls. */
		if (c->out_dying)
			gsrv_conn_close(c, c->close_reason != NULL ?
			    c->close_reason : "closed to free the output budget");
		else
			gsrv_conn_flush(c);
	}
}

/* Frees what gsrv_conn_close has not; accepts half-built connections. */
static void
sconn_free(struct grpc_conn *c)
{
	struct gsrv_slab *slab = c->slab;
	struct grpc_call *call;

	while ((call = TAILQ_FIRST(&c->calls)) != NULL)
		gsrv_call_free(call);
	gsrv_limits_removed(c);
	if (c->h2 != NULL)
		nghttp2_session_del(c->h2);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	gsrv_slab_event_free(slab, c->rev);
	gsrv_slab_event_free(slab, c->wev);
	if (c->out != NULL)
		evbuffer_free(c->out);
	if (c->bev == NULL && c->fd >= 0)
		close(c->fd);
	if (c->flush_queued)
		TAILQ_REMOVE(&c->srv->flushq, c, flush_entry);
	gsrv_stage_drop(c);
	gsrv_slab_event_free(slab, c->timer);
	free(c->close_reason);
	gsrv_slab_release(slab, c->identity);
	gsrv_slab_release(slab, c->local);
	gsrv_slab_free(c->srv, slab);
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
gsrv_conn_close(struct grpc_conn *c, const char *reason)
{
	struct grpc_server *srv = c->srv;
	struct grpc_call *call;
	char peer[80];

	if (c->closed)
		return;
	if (reason == NULL)	/* a reason kept when there was no memory */
		reason = "the connection closed";
	if (c->in_h2 > 0) {
		if (!c->close_pending && reason != c->close_reason) {
			free(c->close_reason);
			c->close_reason = NULL;
			gsrv_conn_reason(c, "%s", reason);
		}
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
			gsrv_call_notify_close(call, 1);
			goto again;
		}
	}
	TAILQ_REMOVE(&srv->conns, c, entry);
	srv->n_conns--;
	sconn_free(c);
	gsrv_listen_conn_gone(srv);
	server_check_done(srv);
}

void
gsrv_conn_tls_fail(struct grpc_conn *c, const char *reason)
{
	struct grpc_server *srv = c->srv;
	char peer[80];

	if (!c->closed && srv->opts.tls_failed != NULL) {
		peer_text(c, peer, sizeof(peer));
		srv->opts.tls_failed(peer, reason, srv->opts.cb_arg);
	}
	gsrv_conn_close(c, reason);
}

void
gsrv_conn_reason(struct grpc_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->close_reason != NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&c->close_reason, fmt, ap) < 0)
		c->close_reason = NULL;
	va_end(ap);
}

void
gsrv_conn_closef(struct grpc_conn *c, const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	gsrv_conn_close(c, reason);
}

struct evbuffer *
gsrv_conn_output(const struct grpc_conn *c)
{
	return c->bev != NULL ? bufferevent_get_output(c->bev) : c->out;
}

size_t
gsrv_conn_unwritten(const struct grpc_conn *c)
{
	struct evbuffer *out = gsrv_conn_output(c);

	return out != NULL ? evbuffer_get_length(out) : 0;
}

size_t
gsrv_conn_queued(const struct grpc_conn *c)
{
	return c->queued + gsrv_conn_unwritten(c);
}

/* The address of our side, looked up the first time someone asks. */
const char *
gsrv_conn_local(struct grpc_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = c->bev != NULL ? bufferevent_getfd(c->bev) : c->fd;
	char text[64];

	if (c->local != NULL)
		return c->local;
	if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		addr_text((struct sockaddr *)&ss, text, sizeof(text));
	else
		snprintf(text, sizeof(text), "unknown");
	c->local = gsrv_slab_strdup(c->slab, text);
	return c->local != NULL ? c->local : "unknown";
}

void
gsrv_conn_schedule_flush(struct grpc_conn *c)
{
	if (c->closed || c->flush_queued)
		return;
	TAILQ_INSERT_TAIL(&c->srv->flushq, c, flush_entry);
	c->flush_queued = 1;
	event_active(c->srv->flush_ev, EV_TIMEOUT, 0);
}

/* Tells calls waiting for room that there is some again. */
void
gsrv_conn_check_writable(struct grpc_conn *c)
{
	struct grpc_call *call;

	if (c->closed || !c->want_writable ||
	    gsrv_conn_queued(c) >= c->srv->opts.out_cap / 2)
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

static int
sconn_peer_identity(struct grpc_conn *c, evutil_socket_t fd,
    struct sockaddr *sa)
{
	char id[32];

	addr_text(sa, c->peer, sizeof(c->peer));
	if (sa->sa_family == AF_INET)
		c->peer_port = ntohs(((struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		c->peer_port = ntohs(((struct sockaddr_in6 *)sa)->sin6_port);
	if (c->listener->unix_socket) {
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
			snprintf(id, sizeof(id), "uid:%u", (unsigned)uc.uid);
		else
			snprintf(id, sizeof(id), "unknown");
	} else
		snprintf(id, sizeof(id), "anonymous");
	/* A TLS connection's is its certificate's, once the handshake is
	 * done. */
	c->identity = gsrv_slab_strdup(c->slab, id);
	return c->identity != NULL ? 0 : -1;
}

void
gsrv_conn_new(struct grpc_listener *l, evutil_socket_t fd, struct sockaddr *sa)
{
	struct grpc_server *srv = l->srv;
	struct gsrv_slab *slab = gsrv_slab_new(srv);
	struct grpc_conn *c;
	char why[256], peer[80];

	if (slab == NULL || (c = gsrv_slab_zalloc(slab, sizeof(*c))) == NULL) {
		gsrv_slab_free(srv, slab);
		evutil_closesocket(fd);
		return;
	}
	/* The listener accepts with SOCK_NONBLOCK | SOCK_CLOEXEC. */
	c->slab = slab;
	c->fd = -1;
	c->srv = srv;
	c->listener = l;
	c->last_seen_ms = mono_ms();
	TAILQ_INIT(&c->calls);
	if (sconn_peer_identity(c, fd, sa) != 0) {
		evutil_closesocket(fd);
		sconn_free(c);
		return;
	}
	if (gsrv_limits_admit(c, why, sizeof(why)) != 0) {
		if (srv->opts.conn_refused != NULL) {
			peer_text(c, peer, sizeof(peer));
			srv->opts.conn_refused(peer, why, srv->opts.cb_arg);
		}
		gsrv_limits_refuse(fd, l->tls != NULL, why);
		sconn_free(c);
		return;
	}

	int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;
	if (l->tls != NULL) {
		SSL *ssl = SSL_new(tls_ssl_ctx(l->tls));
		if (ssl == NULL) {
			evutil_closesocket(fd);
			sconn_free(c);
			return;
		}
		c->bev = bufferevent_openssl_socket_new(srv->base, fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, opts);
		if (c->bev == NULL) {
			SSL_free(ssl);
			evutil_closesocket(fd);
			sconn_free(c);
			return;
		}
	} else {
		/* From here on sconn_free closes it. */
		c->fd = fd;
		c->rev = gsrv_slab_event(slab, srv->base, fd,
		    EV_READ | EV_PERSIST, gsrv_conn_raw_read_cb, c);
		/* The write event (c->wev) and the connection's own
		 * output (c->out) are made when a write first leaves
		 * output behind: most connections never need them, and
		 * the slab's first page keeps its room for frames. */
		if (c->rev == NULL) {
			sconn_free(c);
			return;
		}
	}
	c->timer = gsrv_slab_event(slab, srv->base, -1, 0, timer_cb, c);
	if (c->timer == NULL ||
	    (l->tls == NULL && gsrv_h2_session_new(c) != 0)) {
		sconn_free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->conns, c, entry);
	srv->n_conns++;
	gsrv_limits_added(c);
	if (srv->opts.keepalive_ms > 0)
		c->keepalive_due_ms = c->last_seen_ms + srv->opts.keepalive_ms;
	c->idle_due_ms = c->last_seen_ms + srv->opts.preface_ms;
	gsrv_conn_timer_arm(c);
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
	bufferevent_setcb(c->bev, gsrv_conn_read_cb, gsrv_conn_write_cb,
	    gsrv_conn_event_cb, c);
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
			gsrv_conn_close(c, "the server is shutting down");
			continue;
		}
		gsrv_h2_goaway(c, 1);
		gsrv_conn_schedule_flush(c);
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
			gsrv_conn_close(c, "the shutdown timeout passed");
			continue;
		}
		c->draining = 1;
again:
		TAILQ_FOREACH(call, &c->calls, entry) {
			if (call->state != CALL_DONE) {
				gsrv_call_end(call, GRPC_UNAVAILABLE,
				    "server shutting down");
				if (!call->user_done)
					gsrv_call_notify_close(call, 1);
				goto again;
			}
		}
		gsrv_conn_schedule_flush(c);
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
	gsrv_listeners_free(srv);
	srv->goaway_ev = evtimer_new(srv->base, goaway_cb, srv);
	srv->shutdown_ev = evtimer_new(srv->base, shutdown_timeout_cb, srv);
	TAILQ_FOREACH(c, &srv->conns, entry) {
		if (c->h2 != NULL) {
			gsrv_h2_goaway(c, 0);
			gsrv_conn_schedule_flush(c);
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
	gsrv_listeners_free(srv);
	srv->done = NULL;
	while ((c = TAILQ_FIRST(&srv->conns)) != NULL) {
		/* Freeing the server from inside its callbacks is a caller's
		 * bug; closing anyway beats looping forever. */
		c->in_h2 = 0;
		gsrv_conn_close(c, "the server was freed");
	}
	if (srv->accept_ev != NULL)
		event_free(srv->accept_ev);
	if (srv->goaway_ev != NULL)
		event_free(srv->goaway_ev);
	if (srv->shutdown_ev != NULL)
		event_free(srv->shutdown_ev);
	if (srv->done_ev != NULL)
		event_free(srv->done_ev);
	if (srv->flush_ev != NULL)
		event_free(srv->flush_ev);
	free(srv->stage);
	gsrv_h2_free(srv);
	gsrv_slabs_free(srv);
	gsrv_limits_free(srv);
	free(srv);
}

uint64_t
grpc_conn_last_seen_ms(const struct grpc_conn *conn)
{
	return conn->last_seen_ms;
}
