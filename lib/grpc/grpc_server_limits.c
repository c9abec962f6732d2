/*
 * Who may hold the gRPC server's connections (docs/SECURITY.md, "Limits
 * that keep the service up"). Connections cost descriptors, and most
 * cost nothing to open: a client that sends only the HTTP/2 preface, or
 * opens a health Watch (no credential needed), would otherwise hold its
 * slot until the idle timeout, and enough of them keep every agent out.
 *
 * - A connection is proven once a call on it reached its handler as an
 *   authenticated caller (grpc_call_proceed with an identity), or, on a
 *   server without authentication, once a call reached a method that is
 *   not open (struct grpc_method). Until then it is on the unproven
 *   list, oldest first, and its idle timeout is unproven_idle_ms.
 * - At max_conns, a new connection closes the oldest unproven one to make
 *   room; only when none is left is the new one refused. Proven
 *   connections (running jobs' agents) are never closed for room.
 * - At most max_conns_per_addr connections from one source address (unix
 *   sockets are not counted): past it the address's oldest unproven
 *   connection makes room, else the new one is refused.
 * - Calls the program's authentication refuses (grpc_call_finish before
 *   grpc_call_proceed) are counted per connection: past REFUSED_BURST at
 *   once, then REFUSED_PER_S a second, the connection ends with GOAWAY
 *   ENHANCE_YOUR_CALM. Each such call costs the event loop as much as a
 *   good one, and a client that sends bad credentials as fast as they are
 *   refused would otherwise keep the loop from everybody else.
 * - A refused cleartext connection is told why before it is closed: a
 *   SETTINGS and a GOAWAY (ENHANCE_YOUR_CALM) whose debug data names the
 *   limit, which rdzv's clients show. A TLS one is closed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc_server_int.h"

#define ADDR_BUCKETS	1024
/* Unproven connections looked at for one with no call under way. */
#define ROOM_SCAN	64
#define REFUSED_BURST	64
#define REFUSED_PER_S	16

struct gsrv_addr {
	struct gsrv_addr	*next;
	uint32_t		 n;
	char			 addr[48];
};

struct gsrv_addrs {
	struct gsrv_addr	*b[ADDR_BUCKETS];
};

static size_t
bucket(const char *addr)
{
	uint32_t h = 2166136261u;

	for (; *addr != '\0'; addr++)
		h = (h ^ (uint8_t)*addr) * 16777619u;
	return h % ADDR_BUCKETS;
}

static struct gsrv_addr **
addr_find(struct gsrv_addrs *t, const char *addr)
{
	struct gsrv_addr **p;

	for (p = &t->b[bucket(addr)]; *p != NULL; p = &(*p)->next)
		if (strcmp((*p)->addr, addr) == 0)
			break;
	return p;
}

static int
counted(const struct grpc_conn *c)
{
	return c->peer_port != 0;
}

uint32_t
gsrv_limits_addr_count(const struct grpc_server *srv, const char *addr)
{
	struct gsrv_addr **p;

	if (srv->addrs == NULL)
		return 0;
	p = addr_find(srv->addrs, addr);
	return *p != NULL ? (*p)->n : 0;
}

/*
 * The oldest unproven connection, of |addr| when not NULL; among the
 * ROOM_SCAN oldest, one with no call under way first: a health probe
 * whose Check is being answered (it needs no credential, so it never
 * proves its connection) must not lose it to a crowd of new ones.
 */
static struct grpc_conn *
oldest_unproven(struct grpc_server *srv, const char *addr)
{
	struct grpc_conn *c, *first = NULL;
	int n = 0;

	TAILQ_FOREACH(c, &srv->unproven, unproven_entry) {
		if (c->closed || (addr != NULL && strcmp(c->peer, addr) != 0))
			continue;
		if (TAILQ_EMPTY(&c->calls))
			return c;
		if (first == NULL)
			first = c;
		if (++n == ROOM_SCAN)
			break;
	}
	return first;
}

int
gsrv_limits_make_room(struct grpc_server *srv, const char *addr,
    const char *why)
{
	struct grpc_conn *c = oldest_unproven(srv, addr);

	if (c == NULL)
		return -1;
	srv->evicted++;
	gsrv_conn_closef(c, "closed to make room for a new connection: %s, "
	    "and it had made no authenticated call", why);
	return 0;
}

/*
 * Tells a refused cleartext client why (best effort, one write on the
 * non-blocking socket) and closes it: what it sent is read first, so that
 * the close is a FIN and the GOAWAY is not lost to a reset.
 */
void
gsrv_limits_refuse(int fd, int tls, const char *why)
{
	uint8_t buf[9 + 8 + 1024], junk[4096];
	size_t dlen = strlen(why), len;

	if (dlen > 1024 - 8)
		dlen = 1024 - 8;
	if (!tls) {
		/* SETTINGS, empty. */
		memset(buf, 0, 9);
		buf[3] = 0x4;
		/* GOAWAY: last stream 0, ENHANCE_YOUR_CALM, the reason. */
		len = 8 + dlen;
		buf[9] = (uint8_t)(len >> 16);
		buf[10] = (uint8_t)(len >> 8);
		buf[11] = (uint8_t)len;
		buf[12] = 0x7;
		buf[13] = 0;
		memset(buf + 14, 0, 4 + 4 + 4);
		buf[25] = NGHTTP2_ENHANCE_YOUR_CALM;
		memcpy(buf + 26, why, dlen);
		while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
			;
		if (send(fd, buf, 26 + dlen, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* The client is gone already. */
		}
		shutdown(fd, SHUT_WR);
	}
	close(fd);
}

/* A new connection, its peer known: 0 to serve it, or -1 with why. */
int
gsrv_limits_admit(struct grpc_conn *c, char *why, size_t whylen)
{
	struct grpc_server *srv = c->srv;
	uint32_t max = srv->opts.max_conns_per_addr;
	struct gsrv_addr **p, *a;
	char text[160];

	if (!counted(c) || max == 0)
		return 0;
	if (srv->addrs == NULL && (srv->addrs = calloc(1,
	    sizeof(*srv->addrs))) == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	p = addr_find(srv->addrs, c->peer);
	if (*p != NULL && (*p)->n >= max) {
		snprintf(text, sizeof(text), "max-connections-per-address "
		    "(%u) reached for %s", max, c->peer);
		if (gsrv_limits_make_room(srv, c->peer, text) != 0) {
			snprintf(why, whylen, "rdzvd: too many connections "
			    "from %s: max-connections-per-address (%u) "
			    "reached, and each of them made an authenticated "
			    "call", c->peer, max);
			return -1;
		}
		p = addr_find(srv->addrs, c->peer);
	}
	if ((a = *p) == NULL) {
		if ((a = calloc(1, sizeof(*a))) == NULL) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		snprintf(a->addr, sizeof(a->addr), "%s", c->peer);
		a->next = srv->addrs->b[bucket(c->peer)];
		srv->addrs->b[bucket(c->peer)] = a;
	}
	a->n++;
	c->addr_counted = 1;
	return 0;
}

/* The connection is served: on the unproven list until proven. */
void
gsrv_limits_added(struct grpc_conn *c)
{
	TAILQ_INSERT_TAIL(&c->srv->unproven, c, unproven_entry);
	c->on_unproven = 1;
}

/* The idle timer may be set for the unproven timeout: idle_cb sets it
 * again for the longer one when it fires. */
void
gsrv_limits_proven(struct grpc_conn *c)
{
	if (c->proven)
		return;
	c->proven = 1;
	if (c->on_unproven) {
		TAILQ_REMOVE(&c->srv->unproven, c, unproven_entry);
		c->on_unproven = 0;
	}
}

/* Authentication refused a call of |c|: one token of its bucket. */
void
gsrv_limits_refused(struct grpc_conn *c)
{
	uint64_t now = mono_ms(), full = REFUSED_BURST * 1000ULL;

	if (c->refused_ms == 0)
		c->refused_tokens = full;
	else
		c->refused_tokens += (now - c->refused_ms) * REFUSED_PER_S;
	if (c->refused_tokens > full)
		c->refused_tokens = full;
	c->refused_ms = now;
	if (c->refused_tokens >= 1000) {
		c->refused_tokens -= 1000;
		return;
	}
	if (c->h2 == NULL || c->goaway_sent)
		return;
	gsrv_conn_reason(c, "the server refused more than %d of the "
	    "client's calls at once (bad credentials?): sent GOAWAY "
	    "ENHANCE_YOUR_CALM", REFUSED_BURST);
	c->goaway_sent = 1;
	/* Whatever else the client sent is ignored from here. */
	nghttp2_session_terminate_session(c->h2, NGHTTP2_ENHANCE_YOUR_CALM);
	if (!c->in_h2)
		gsrv_conn_schedule_flush(c);
}

/* The connection is going away. */
void
gsrv_limits_removed(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;
	struct gsrv_addr **p, *a;

	if (c->on_unproven) {
		TAILQ_REMOVE(&srv->unproven, c, unproven_entry);
		c->on_unproven = 0;
	}
	if (!c->addr_counted || srv->addrs == NULL)
		return;
	c->addr_counted = 0;
	p = addr_find(srv->addrs, c->peer);
	if ((a = *p) == NULL)
		return;
	if (--a->n == 0) {
		*p = a->next;
		free(a);
	}
}

void
gsrv_limits_free(struct grpc_server *srv)
{
	struct gsrv_addr *a;

	if (srv->addrs == NULL)
		return;
	for (size_t i = 0; i < ADDR_BUCKETS; i++)
		while ((a = srv->addrs->b[i]) != NULL) {
			srv->addrs->b[i] = a->next;
			free(a);
		}
	free(srv->addrs);
	srv->addrs = NULL;
}
