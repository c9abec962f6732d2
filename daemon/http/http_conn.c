/*
 * The HTTP listener's connections, which libevent 2.1's evhttp does not
 * bound (docs/OPERATIONS.md, "The HTTP listener's limits"):
 *
 * - At most http-max-connections at once (and never more than a quarter of
 *   the open-file limit, which is the gRPC listeners'). At the cap the
 *   oldest connection that is neither an event stream nor sending a reply
 *   is closed to make room for the next one (a slowloris client's or an
 *   idle keep-alive one), so that a probe of /healthz gets in however many
 *   connections trickle; only when every connection is busy does the
 *   listener stop accepting, and new clients wait in the listen backlog
 *   until one closes.
 * - A whole-request deadline: a connection must deliver its request head
 *   (request line, headers, empty line) within http-request-timeout of
 *   being accepted, and each later request within that time of its first
 *   byte. evhttp's own timeout restarts on every byte, which a client
 *   sending a header line every few seconds holds open for ever.
 * - Accept errors (out of descriptors) pause accepting instead of spinning,
 *   and are logged once per episode, as the gRPC listeners do.
 * - The request head is checked byte by byte (lib/base/httphead.c) before
 *   evhttp parses it: a bare LF or CR, a folded header line, a NUL, or two
 *   Content-Length headers that differ are refused with 400. evhttp would
 *   take each.
 *
 * evhttp still accepts (2.1 exports neither evhttp_get_request nor 2.2's
 * evhttp_set_max_connections), and its per-connection bufferevent callback
 * is where each connection starts here: we make the bufferevent (TLS with
 * tls-cert), watch its input buffer (an evbuffer callback, which runs
 * before evhttp reads), and on the next loop turn take the evhttp
 * connection that evhttp made around it (the bufferevent's callback
 * argument) to hear of its end (the close callback). A reference held
 * until then keeps that look safe even if evhttp freed it already. The
 * listener is evhttp's, reached with evhttp_bound_socket_get_listener, to
 * pause it and to take its accept errors. A filter bufferevent would be
 * simpler but loses a reply's last bytes when evhttp closes after it.
 */
#include <sys/resource.h>
#include <sys/socket.h>

#include <sys/queue.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "clock.h"
#include "httphead.h"
#include "log.h"
#include "http_int.h"
#include "rdzvd.h"
#include "xmalloc.h"
#include "tls.h"

/* How long accepting pauses when we are out of file descriptors. */
#define ACCEPT_PAUSE_MS		500
/* A connection that sent nothing for less than this is not closed to make
 * room while one that did is there: its client may not have had the
 * moment to send its request (a probe beside a source that churns
 * connections). */
#define EVICT_GRACE_MS		50
/* The cap reached is logged at most this often. */
#define FULL_SAY_MS		10000

struct hconn {
	struct bufferevent	*bev;
	struct evhttp_connection *evcon;	/* NULL until hooked */
	struct event		*deadline;
	uint64_t		 born_ms;	/* accepted (mono_ms) */
	/* The status page's stream on it, told of the end too. */
	void			(*closecb)(struct evhttp_connection *, void *);
	void			*closecb_arg;
	int			 busy;		/* rewriting its input */
	int			 evicted;	/* closed to make room */
	struct http_head	 head;
	TAILQ_ENTRY(hconn)	 entry;
};
TAILQ_HEAD(hconns, hconn);

static struct {
	struct evconnlistener	*evl;
	struct event		*resume_ev;
	struct event		*hook_ev;
	struct event		*grace_ev;	/* the oldest's grace ends */
	struct hconns		 all;		/* hooked */
	struct hconns		 unhooked;	/* accepted this turn */
	struct tls_ctx		*tls;
	uint32_t		 max;
	uint32_t		 timeout_ms;
	uint32_t		 n;
	uint32_t		 n_evicted;	/* closing, still counted */
	uint64_t		 evictions;	/* this episode */
	int			 paused;	/* out of descriptors */
	int			 full;		/* at max: not accepting */
	int			 full_said;	/* the episode was logged */
	uint64_t		 full_ms;	/* at max since */
	uint64_t		 failed_ms;	/* accepts failing since */
	uint64_t		 failures;	/* ... this many */
} hc;

static void
listener_update(void)
{
	if (hc.evl == NULL)
		return;
	if (hc.paused || hc.full)
		evconnlistener_disable(hc.evl);
	else
		evconnlistener_enable(hc.evl);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	hc.paused = 0;
	listener_update();
}

/*
 * Out of descriptors (or another accept error): stop accepting instead of
 * spinning on a listener that stays readable, and say so once an episode.
 * The next connection to close, or a timer, resumes it.
 */
static void
accept_error_cb(struct evconnlistener *evl, void *arg)
{
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };
	struct pollfd pfd = { evconnlistener_get_fd(evl), POLLIN, 0 };
	int err = errno;

	/* With the table full accept fails even when no client waits. */
	if (poll(&pfd, 1, 0) == 0)
		return;
	hc.paused = 1;
	listener_update();
	evtimer_add(hc.resume_ev, &tv);
	if (hc.failures++ == 0) {
		hc.failed_ms = mono_ms();
		log_warnx("HTTP accept: %s: new HTTP clients wait in the listen "
		    "backlog until a descriptor is free (http-max-connections "
		    "%u, %u open)", strerror(err), hc.max, hc.n);
	}
}

/* The deadline of a request head passed: closing the socket under evhttp
 * makes it see the end of the connection and free it in its own way. */
static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c = arg;
	evutil_socket_t s = bufferevent_getfd(c->bev);

	log_debug("HTTP connection closed: no complete request within %u "
	    "ms", hc.timeout_ms);
	if (s >= 0)
		shutdown(s, SHUT_RDWR);
}

/* The end of a connection: evhttp freed it. */
static void
hconn_end(struct hconn *c, struct hconns *list)
{
	TAILQ_REMOVE(list, c, entry);
	event_free(c->deadline);
	if (c->evicted)
		hc.n_evicted--;
	free(c);
	hc.n--;
	if (hc.full && hc.n - hc.n_evicted < hc.max)
		hc.full = 0;
	/* The episode ends well below the cap: clients that refill each
	 * slot as it frees make one episode, not one a connection. */
	if (hc.full_said && hc.n + hc.max / 4 < hc.max) {
		log_info("HTTP connections below http-max-connections again "
		    "after %llu ms; %llu connections were closed to make room",
		    (unsigned long long)(mono_ms() - hc.full_ms),
		    (unsigned long long)hc.evictions);
		hc.full_said = 0;
		hc.evictions = 0;
	}
	if (hc.resume_ev == NULL)
		return;		/* the listener is gone */
	/* A descriptor is free now. */
	if (hc.paused) {
		evtimer_del(hc.resume_ev);
		hc.paused = 0;
	}
	listener_update();
}

static void
hconn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct hconn *c = arg;

	if (c->closecb != NULL)
		c->closecb(evcon, c->closecb_arg);
	hconn_end(c, &hc.all);
}

/* What a connection's client has sent of its next request, as far as
 * evict_one needs to know. */
enum head_seen { HEAD_NONE, HEAD_PART, HEAD_WHOLE };

/*
 * |c|'s next request: whole (its head waits in the socket, not yet read:
 * a client that connected and sent its request at once, such as a probe
 * of /healthz, while one source churns connections faster than the loop
 * reads them), begun (bytes read or waiting, a slowloris client's), or
 * nothing yet. A TLS connection's bytes say nothing before they are
 * decrypted: any are "begun".
 */
static enum head_seen
head_seen(struct hconn *c, evutil_socket_t s)
{
	char buf[1024];
	ssize_t n;

	n = recv(s, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n >= 4 && hc.tls == NULL &&
	    memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL)
		return HEAD_WHOLE;
	if (n > 0 || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
		return HEAD_PART;
	return HEAD_NONE;
}

/* How many connections evict_one looks at, at most, per new one. */
#define EVICT_SCAN		64

/*
 * At the cap: closes the oldest connection that holds its slot for
 * nothing: one trickling a request head, or one that sent nothing (idle
 * between requests, or never) for EVICT_GRACE_MS. Never an event stream,
 * one with a reply still going out, one whose whole request head waits
 * in its socket, or a new one that has had no moment to send its request
 * (grace_cb tries again when the oldest of those is old enough). Closing
 * the socket under evhttp makes it free the connection its own way, on a
 * later turn. Returns 0, or -1 when every connection is busy or new.
 */
static int
evict_one(void)
{
	struct hconn *c, *pick = NULL, *young = NULL;
	evutil_socket_t s = -1;
	uint64_t now = mono_ms();
	int looked = 0;

	TAILQ_FOREACH(c, &hc.all, entry) {
		if (c->evicted || c->closecb != NULL ||
		    evbuffer_get_length(bufferevent_get_output(c->bev)) > 0 ||
		    (s = bufferevent_getfd(c->bev)) < 0)
			continue;
		if (looked++ == EVICT_SCAN)
			break;
		enum head_seen seen = head_seen(c, s);
		if (seen == HEAD_WHOLE)
			continue;
		if (seen == HEAD_PART ||
		    mono_since(now, c->born_ms) >= EVICT_GRACE_MS) {
			pick = c;
			break;
		}
		if (young == NULL)
			young = c;
	}
	if (pick == NULL) {
		if (young != NULL && hc.grace_ev != NULL) {
			uint64_t age = mono_since(now, young->born_ms);
			struct timeval tv = { 0,
			    (suseconds_t)(EVICT_GRACE_MS - age) * 1000 };
			evtimer_add(hc.grace_ev, &tv);
		}
		return -1;
	}
	log_debug("HTTP connection closed to make room for a new one: it had "
	    "no request under way at the cap (%u)", hc.max);
	shutdown(bufferevent_getfd(pick->bev), SHUT_RDWR);
	pick->evicted = 1;
	hc.n_evicted++;
	hc.evictions++;
	return 0;
}

/* The oldest connection's grace ended while the listener waited at the
 * cap: it may make room now. */
static void
grace_cb(evutil_socket_t fd, short what, void *arg)
{
	if (hc.full && evict_one() == 0) {
		hc.full = 0;
		listener_update();
	}
}

/*
 * The loop turn after accepting: evhttp's connection is the bufferevent's
 * callback argument, and its close callback is the connection's end. A
 * bufferevent whose callbacks are gone was freed by evhttp already.
 */
static void
hook_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c;
	bufferevent_event_cb ecb;
	void *evcon;

	while ((c = TAILQ_FIRST(&hc.unhooked)) != NULL) {
		struct bufferevent *bev = c->bev;
		bufferevent_getcb(bev, NULL, NULL, &ecb, &evcon);
		if (ecb == NULL || evcon == NULL)
			hconn_end(c, &hc.unhooked);
		else {
			TAILQ_REMOVE(&hc.unhooked, c, entry);
			TAILQ_INSERT_TAIL(&hc.all, c, entry);
			c->evcon = evcon;
			evhttp_connection_set_closecb(c->evcon, hconn_closed, c);
		}
		bufferevent_decref(bev);
	}
	/* Full while the connections accepted last turn could not yet make
	 * room: now they can. */
	if (hc.full && hc.resume_ev != NULL && evict_one() == 0) {
		hc.full = 0;
		listener_update();
	}
}

void
http_conn_set_closecb(struct evhttp_connection *evcon,
    void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct hconn *c;

	/* Served a loop turn after it came, a connection is hooked; be sure. */
	hook_cb(-1, 0, NULL);
	TAILQ_FOREACH(c, &hc.all, entry)
		if (c->evcon == evcon) {
			c->closecb = cb;
			c->closecb_arg = arg;
			return;
		}
	fatalx("http_conn_set_closecb: not a connection of ours");
}

static void
arm(struct hconn *c)
{
	struct timeval tv = { hc.timeout_ms / 1000,
	    (suseconds_t)(hc.timeout_ms % 1000) * 1000 };

	if (!evtimer_pending(c->deadline, NULL))
		evtimer_add(c->deadline, &tv);
}

/* Keeps the first |keep| bytes of |buf| and drops the rest. */
static void
truncate_to(struct evbuffer *buf, size_t keep)
{
	struct evbuffer *tmp = evbuffer_new();

	if (tmp == NULL)
		fatalx("out of memory");
	evbuffer_remove_buffer(buf, tmp, keep);
	evbuffer_drain(buf, evbuffer_get_length(buf));
	evbuffer_add_buffer(buf, tmp);
	evbuffer_free(tmp);
}

/*
 * What arrived, checked before evhttp reads it. At the first bad byte the
 * rest is dropped and a line evhttp cannot parse takes its place (a request
 * line or a header without a colon), so that evhttp answers 400 Bad Request
 * and closes; anything after that is dropped too.
 */
static void
input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct hconn *c = arg;
	size_t len = evbuffer_get_length(buf), i, n, good;
	struct evbuffer_ptr pos;
	unsigned char chunk[2048];
	unsigned events;

	if (info->n_added == 0 || c->busy || info->n_added > len)
		return;
	c->busy = 1;
	i = len - info->n_added;
	if (c->head.bad) {
		truncate_to(buf, i);
		c->busy = 0;
		return;
	}
	evbuffer_ptr_set(buf, &pos, i, EVBUFFER_PTR_SET);
	while (i < len) {
		n = len - i < sizeof(chunk) ? len - i : sizeof(chunk);
		if (evbuffer_copyout_from(buf, &pos, chunk, n) != (ev_ssize_t)n)
			break;
		good = http_head_feed(&c->head, chunk, n, &events);
		/* A head that ended has met its deadline; one begun has it. */
		if (events & HTTP_HEAD_ENDED)
			evtimer_del(c->deadline);
		if (c->head.in_head)
			arm(c);
		i += good;
		if (good < n)
			break;
		evbuffer_ptr_set(buf, &pos, n, EVBUFFER_PTR_ADD);
	}
	if (c->head.bad) {
		/* The deadline stays: it closes the connection should evhttp
		 * not answer. */
		log_debug("HTTP request refused: %s", c->head.why);
		truncate_to(buf, i);
		evbuffer_add_printf(buf, "%s", http_head_poison(&c->head));
	}
	c->busy = 0;
}

/* evhttp's bufferevent for a connection it accepted (it sets the
 * descriptor afterwards). */
static struct bufferevent *
hconn_bev(struct event_base *base, void *arg)
{
	struct bufferevent *bev;
	struct hconn *c;

	if (hc.failures > 0) {
		log_warnx("HTTP accept: accepting again after %llu ms; %llu "
		    "accepts failed meanwhile", (unsigned long long)(mono_ms() -
		    hc.failed_ms), (unsigned long long)hc.failures);
		hc.failures = 0;
	}
	if (hc.tls != NULL) {
		SSL *ssl = SSL_new(tls_ssl_ctx(hc.tls));
		/* evhttp would serve cleartext on NULL: never on this port. */
		if (ssl == NULL)
			fatalx("HTTP listener: out of memory for a TLS "
			    "connection");
		bev = bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	} else
		bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	c = xcalloc(1, sizeof(*c));
	if (bev == NULL || (c->deadline = evtimer_new(base, deadline_cb, c)) == NULL ||
	    evbuffer_add_cb(bufferevent_get_input(bev), input_cb, c) == NULL)
		fatalx("HTTP listener: out of memory for a connection");
	c->bev = bev;
	c->born_ms = mono_ms();
	/* Until hook_cb has looked at it. */
	bufferevent_incref(bev);
	TAILQ_INSERT_TAIL(&hc.unhooked, c, entry);
	event_active(hc.hook_ev, EV_TIMEOUT, 0);
	/* The deadline covers the TLS handshake too. */
	http_head_init(&c->head);
	arm(c);
	if (++hc.n - hc.n_evicted >= hc.max) {
		/* Closing connections to make room empties the table in
		 * bursts: an episode is said at most once per FULL_SAY_MS. */
		if (!hc.full_said && (hc.full_ms == 0 || mono_ms() -
		    hc.full_ms >= FULL_SAY_MS)) {
			hc.full_said = 1;
			hc.full_ms = mono_ms();
			log_warnx("http-max-connections (%u) reached: the oldest "
			    "connections with no request under way are closed "
			    "to make room; when none is left, new HTTP clients "
			    "wait in the listen backlog", hc.max);
		}
		if (evict_one() != 0) {
			hc.full = 1;
			listener_update();
		}
	}
	return bev;
}

/* http-max-connections, held below a quarter of the open-file limit so
 * that the gRPC listeners keep the rest. */
static uint32_t
effective_max(uint32_t want)
{
	struct rlimit rl;
	uint64_t share;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return want;
	share = rl.rlim_cur / 4 > 0 ? rl.rlim_cur / 4 : 1;
	if (want <= share)
		return want;
	log_warnx("http-max-connections %u is more than a quarter of the "
	    "open-file limit (%llu): at most %llu HTTP connections", want,
	    (unsigned long long)rl.rlim_cur, (unsigned long long)share);
	return (uint32_t)share;
}

void
http_conn_start(struct evhttp *http, struct evhttp_bound_socket *bound,
    struct tls_ctx *tls)
{
	memset(&hc, 0, sizeof(hc));
	hc.tls = tls;
	hc.max = effective_max(rdzvd.cfg.http_max_conns);
	hc.timeout_ms = rdzvd.cfg.http_request_timeout_ms;
	hc.evl = evhttp_bound_socket_get_listener(bound);
	TAILQ_INIT(&hc.all);
	TAILQ_INIT(&hc.unhooked);
	if ((hc.resume_ev = evtimer_new(rdzvd.base, resume_cb, NULL)) == NULL ||
	    (hc.hook_ev = event_new(rdzvd.base, -1, 0, hook_cb, NULL)) == NULL ||
	    (hc.grace_ev = evtimer_new(rdzvd.base, grace_cb, NULL)) == NULL)
		fatalx("HTTP listener: cannot create its timers");
	evconnlistener_set_error_cb(hc.evl, accept_error_cb);
	evhttp_set_bevcb(http, hconn_bev, NULL);
}

size_t
http_conn_count(void)
{
	return hc.n;
}

size_t
http_conn_max(void)
{
	return hc.max;
}

/* Before evhttp_free, which frees the listener and then the connections
 * (each telling hconn_closed). */
void
http_conn_stop(void)
{
	hook_cb(-1, 0, NULL);
	if (hc.resume_ev != NULL)
		event_free(hc.resume_ev);
	if (hc.hook_ev != NULL)
		event_free(hc.hook_ev);
	if (hc.grace_ev != NULL)
		event_free(hc.grace_ev);
	hc.resume_ev = hc.hook_ev = hc.grace_ev = NULL;
	hc.evl = NULL;
}
