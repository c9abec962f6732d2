/*
 * The queue of calls waiting for munged to decode their credentials
 * (docs/SECURITY.md), shared fairly: each connection has its own line and
 * the decoding threads serve the lines in turn, one call each, so a new
 * client waits behind at most one call of each other connection, not
 * behind everything a flood queued before it. Lines are served in three
 * tiers: connections of a source address with no recent refusals first,
 * then other connections none of whose credentials was refused (a new
 * client on an address shared with an attacker, such as loopback or a
 * NAT), then connections one of whose credentials munged refused; a lower
 * tier only when no higher one has calls waiting. The lowest tiers lose
 * their calls first when the queue is full.
 *
 * Bounds: FAIR_CONN_MAX calls waiting per connection (more are refused),
 * FAIR_SOURCE_MAX per source address and FAIR_MAX in all (past these a
 * waiting call of the longest line, suspects first, makes room for the
 * new one if that line is longer than the new call's; else the new call
 * is refused).
 *
 * Not thread-safe: auth.c calls it under its mutex, from the loop (push,
 * cancel) and from the threads (pop, done). Never logs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_int.h"
#include "hash.h"

/* A source with this many refused credentials within FAIR_MEMORY_MS is
 * served after the others; a record of it is kept that long. */
#define FAIR_SOURCE_SUSPECT	3
#define FAIR_MEMORY_MS		60000
/* Sources remembered without a connection, past which the forgotten ones
 * are swept. */
#define FAIR_SOURCES_KEPT	4096

struct fair_src {
	char			 addr[64];
	uint64_t		 hv;
	size_t			 conns;		/* lines that name it */
	size_t			 queued;
	unsigned int		 refused;	/* within FAIR_MEMORY_MS */
	uint64_t		 refused_ms;	/* the first of those */
};

struct fair_conn {
	const void		*key;
	uint64_t		 hv;
	struct fair_src		*src;
	TAILQ_HEAD(fair_items, fair_item) items;
	size_t			 queued;
	size_t			 held;		/* popped, not done yet */
	unsigned int		 refused;
	int			 ring;		/* -1 none, else its tier */
	TAILQ_ENTRY(fair_conn)	 rentry;
};

static int
match_conn(const void *item, const void *key)
{
	return ((const struct fair_conn *)item)->key == key;
}

static int
match_src(const void *item, const void *key)
{
	return strcmp(((const struct fair_src *)item)->addr, key) == 0;
}

void
fair_init(struct fair *q)
{
	memset(q, 0, sizeof(*q));
	hash_init(&q->conns);
	hash_init(&q->srcs);
	for (int r = 0; r < FAIR_TIERS; r++)
		TAILQ_INIT(&q->ring[r]);
}

static int
src_suspect(const struct fair_src *s, uint64_t now)
{
	return s->refused >= FAIR_SOURCE_SUSPECT &&
	    now - s->refused_ms < FAIR_MEMORY_MS;
}

/* 0: a clean source; 1: a clean connection of a suspect source; 2: a
 * connection with a refused credential. */
static int
tier(const struct fair_conn *fc, uint64_t now)
{
	return fc->refused > 0 ? 2 : src_suspect(fc->src, now);
}

/* Puts a line with calls waiting at the back of its ring. */
static void
ring_put(struct fair *q, struct fair_conn *fc, uint64_t now)
{
	if (fc->ring >= 0)
		TAILQ_REMOVE(&q->ring[fc->ring], fc, rentry);
	fc->ring = -1;
	if (fc->queued == 0)
		return;
	fc->ring = tier(fc, now);
	TAILQ_INSERT_TAIL(&q->ring[fc->ring], fc, rentry);
}

/* Forgets sources with no connection and no recent refusal. */
static void
src_sweep(struct fair *q, uint64_t now)
{
	for (size_t i = 0; i < q->srcs.cap; i++) {
		struct fair_src *s = q->srcs.slots[i].item;

		if (s == NULL || s->conns > 0 || src_suspect(s, now))
			continue;
		hash_remove(&q->srcs, s->hv, s);
		free(s);
		/* Backward shift may have moved another item here. */
		i--;
	}
}

/* A line with nothing waiting nor held is freed, and its source with it
 * unless the source is remembered for its refusals. */
static void
conn_release(struct fair *q, struct fair_conn *fc, uint64_t now)
{
	struct fair_src *s = fc->src;

	if (fc->queued > 0 || fc->held > 0)
		return;
	if (fc->ring >= 0)
		TAILQ_REMOVE(&q->ring[fc->ring], fc, rentry);
	hash_remove(&q->conns, fc->hv, fc);
	free(fc);
	if (--s->conns == 0 && !src_suspect(s, now)) {
		hash_remove(&q->srcs, s->hv, s);
		free(s);
	}
}

static struct fair_conn *
conn_get(struct fair *q, const void *key, const char *addr, uint64_t now)
{
	uint64_t hv = hash_u64((uint64_t)(uintptr_t)key);
	struct fair_conn *fc = hash_find(&q->conns, hv, match_conn, key);
	struct fair_src *s;
	uint64_t shv;

	if (fc != NULL)
		return fc;
	shv = hash_bytes(addr, strlen(addr));
	if ((s = hash_find(&q->srcs, shv, match_src, addr)) == NULL) {
		if (q->srcs.n >= FAIR_SOURCES_KEPT)
			src_sweep(q, now);
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return NULL;
		snprintf(s->addr, sizeof(s->addr), "%s", addr);
		s->hv = shv;
		if (hash_insert(&q->srcs, shv, s) != 0) {
			free(s);
			return NULL;
		}
	}
	if ((fc = calloc(1, sizeof(*fc))) == NULL ||
	    hash_insert(&q->conns, hv, fc) != 0) {
		free(fc);
		if (s->conns == 0) {
			hash_remove(&q->srcs, s->hv, s);
			free(s);
		}
		return NULL;
	}
	fc->key = key;
	fc->hv = hv;
	fc->src = s;
	fc->ring = -1;
	TAILQ_INIT(&fc->items);
	s->conns++;
	return fc;
}

static void
unqueue(struct fair *q, struct fair_item *it, uint64_t now)
{
	struct fair_conn *fc = it->fc;

	TAILQ_REMOVE(&fc->items, it, entry);
	it->queued = 0;
	fc->queued--;
	fc->src->queued--;
	q->queued--;
	if (fc->queued == 0)
		ring_put(q, fc, now);
}

/*
 * The line to lose a call for |fc|'s new one (of source |s| only, unless
 * NULL): the longest of the lowest tier, if it is longer than |fc|'s or
 * of a lower tier. NULL: the new call is refused.
 */
static struct fair_conn *
victim(struct fair *q, const struct fair_conn *fc, const struct fair_src *s,
    uint64_t now)
{
	struct fair_conn *v, *best = NULL;

	for (int r = FAIR_TIERS - 1; r >= 0 && best == NULL; r--)
		TAILQ_FOREACH(v, &q->ring[r], rentry)
			if ((s == NULL || v->src == s) && v != fc &&
			    (best == NULL || v->queued > best->queued))
				best = v;
	if (best == NULL)
		return NULL;
	if (best->queued > fc->queued + 1 || best->ring > tier(fc, now))
		return best;
	return NULL;
}

int
fair_push(struct fair *q, const void *key, const char *addr,
    struct fair_item *it, uint64_t now, struct fair_item **evicted,
    char *why, size_t whylen)
{
	struct fair_conn *fc, *v = NULL;

	*evicted = NULL;
	if ((fc = conn_get(q, key, addr, now)) == NULL) {
		snprintf(why, whylen, "rdzvd is out of memory for its queue of "
		    "calls waiting for munged; try again");
		return -1;
	}
	if (fc->queued >= FAIR_CONN_MAX) {
		snprintf(why, whylen, "rdzvd: %zu calls of this connection "
		    "already wait for munged to decode their credentials, the "
		    "most one connection may have; wait for their answers and "
		    "try again", fc->queued);
		conn_release(q, fc, now);
		return -1;
	}
	if (fc->src->queued >= FAIR_SOURCE_MAX &&
	    (v = victim(q, fc, fc->src, now)) == NULL) {
		snprintf(why, whylen, "rdzvd: %zu calls from %s already wait "
		    "for munged to decode their credentials, the most one "
		    "address may have; try again", fc->src->queued, addr);
		conn_release(q, fc, now);
		return -1;
	}
	if (v == NULL && q->queued >= FAIR_MAX &&
	    (v = victim(q, fc, NULL, now)) == NULL) {
		snprintf(why, whylen, "rdzvd: %zu calls already wait for munged "
		    "to decode their credentials; try again", q->queued);
		conn_release(q, fc, now);
		return -1;
	}
	if (v != NULL) {
		*evicted = TAILQ_LAST(&v->items, fair_items);
		unqueue(q, *evicted, now);
		(*evicted)->fc = NULL;
		conn_release(q, v, now);
	}
	it->fc = fc;
	it->queued = 1;
	TAILQ_INSERT_TAIL(&fc->items, it, entry);
	fc->queued++;
	fc->src->queued++;
	q->queued++;
	if (fc->ring < 0)
		ring_put(q, fc, now);
	return 0;
}

struct fair_item *
fair_pop(struct fair *q, uint64_t now)
{
	struct fair_conn *fc = NULL;
	struct fair_item *it;

	for (int r = 0; r < FAIR_TIERS && fc == NULL; r++)
		fc = TAILQ_FIRST(&q->ring[r]);
	if (fc == NULL)
		return NULL;
	it = TAILQ_FIRST(&fc->items);
	unqueue(q, it, now);
	fc->held++;
	/* Its next call waits for every other line's turn. */
	if (fc->queued > 0)
		ring_put(q, fc, now);
	return it;
}

void
fair_done(struct fair *q, struct fair_item *it, int refused, uint64_t now)
{
	struct fair_conn *fc = it->fc;
	struct fair_src *s;

	if (fc == NULL)
		return;
	it->fc = NULL;
	s = fc->src;
	fc->held--;
	if (refused) {
		fc->refused++;
		if (s->refused == 0 || now - s->refused_ms >= FAIR_MEMORY_MS) {
			s->refused = 0;
			s->refused_ms = now;
		}
		s->refused++;
		/* It waits behind everybody else from now on. */
		if (fc->ring >= 0 && fc->ring < 2)
			ring_put(q, fc, now);
	}
	conn_release(q, fc, now);
}

int
fair_cancel(struct fair *q, struct fair_item *it, uint64_t now)
{
	struct fair_conn *fc = it->fc;

	if (fc == NULL || !it->queued)
		return 0;
	unqueue(q, it, now);
	it->fc = NULL;
	conn_release(q, fc, now);
	return 1;
}

void
fair_free(struct fair *q)
{
	for (size_t i = 0; i < q->conns.cap; i++)
		free(q->conns.slots[i].item);
	for (size_t i = 0; i < q->srcs.cap; i++)
		free(q->srcs.slots[i].item);
	hash_free(&q->conns);
	hash_free(&q->srcs);
	fair_init(q);
}
