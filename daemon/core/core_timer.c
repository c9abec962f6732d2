/*
 * The core's deadlines: one binary min-heap holds every armed timer (last
 * calls, join timeouts, leases, retention, progress), and what is left of
 * one. The core never reads a clock: the time comes with each call.
 */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core_int.h"
#include "text.h"
/*
 * One binary min-heap holds every armed deadline (last calls, join
 * timeouts, retention, leases), so the daemon arms a single timer and
 * core_advance() pops only what is due.
 */
void
core_timer_init(struct core_timer *t, int kind, void *owner)
{
	t->at = 0;
	t->idx = SIZE_MAX;
	t->kind = kind;
	t->owner = owner;
}

bool
core_timer_armed(const struct core_timer *t)
{
	return t->idx != SIZE_MAX;
}

static void
heap_swap(struct core *c, size_t a, size_t b)
{
	struct core_timer	*t = c->heap[a];

	c->heap[a] = c->heap[b];
	c->heap[b] = t;
	c->heap[a]->idx = a;
	c->heap[b]->idx = b;
}

static void
heap_up(struct core *c, size_t i)
{
	while (i > 0 && c->heap[(i - 1) / 2]->at > c->heap[i]->at) {
		heap_swap(c, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void
heap_down(struct core *c, size_t i)
{
	size_t	l, r, m;

	for (;;) {
		l = 2 * i + 1;
		r = l + 1;
		m = i;
		if (l < c->heap_n && c->heap[l]->at < c->heap[m]->at)
			m = l;
		if (r < c->heap_n && c->heap[r]->at < c->heap[m]->at)
			m = r;
		if (m == i)
			return;
		heap_swap(c, i, m);
		i = m;
	}
}

void
core_timer_clear(struct core *c, struct core_timer *t)
{
	size_t	i = t->idx;

	if (i == SIZE_MAX)
		return;
	assert(i < c->heap_n && c->heap[i] == t);
	c->heap_n--;
	if (i != c->heap_n) {
		c->heap[i] = c->heap[c->heap_n];
		c->heap[i]->idx = i;
		heap_down(c, i);
		heap_up(c, i);
	}
	t->idx = SIZE_MAX;
	t->at = 0;
}

void
core_timer_set(struct core *c, struct core_timer *t, uint64_t at)
{
	if (core_timer_armed(t)) {
		assert(t->idx < c->heap_n && c->heap[t->idx] == t);
		t->at = at;
		heap_down(c, t->idx);
		heap_up(c, t->idx);
		return;
	}
	if (c->heap_n == c->heap_cap) {
		c->heap_cap = c->heap_cap == 0 ? 64 : c->heap_cap * 2;
		c->heap = xreallocarray(c->heap, c->heap_cap,
		    sizeof(*c->heap));
	}
	t->at = at;
	t->idx = c->heap_n;
	c->heap[c->heap_n++] = t;
	heap_up(c, t->idx);
}

struct core_timer *
core_timer_top(const struct core *c)
{
	return c->heap_n == 0 ? NULL : c->heap[0];
}

static int64_t
timer_in(const struct core_timer *t, struct core_now now)
{
	if (!core_timer_armed(t))
		return -1;
	return t->at > now.mono_ms ? (int64_t)(t->at - now.mono_ms) : 0;
}

int64_t
core_job_last_call_in(const struct core_job *j, struct core_now now)
{
	return timer_in(&j->last_call, now);
}

int64_t
core_job_join_timeout_in(const struct core_job *j, struct core_now now)
{
	return timer_in(&j->join_deadline, now);
}

/*
 * Pops every due deadline, then settles each touched job once: leases that
 * end together make one failure and one new round.
 */
void
core_advance(struct core *c, struct core_now now)
{
	struct core_timer	*t;
	struct core_job		*j;

	core_set_now(c, now);
	while ((t = core_timer_top(c)) != NULL && t->at <= c->now.mono_ms) {
		core_timer_clear(c, t);
		switch (t->kind) {
		case CORE_TIMER_LAST_CALL:
			j = t->owner;
			j->fired_last_call = true;
			core_settle_later(j);
			break;
		case CORE_TIMER_JOIN:
			j = t->owner;
			j->fired_join = true;
			core_settle_later(j);
			break;
		case CORE_TIMER_RETENTION:
			core_job_remove(t->owner);
			break;
		case CORE_TIMER_LEASE:
			core_lease_expired(t->owner);
			break;
		case CORE_TIMER_PROGRESS:
			core_progress_tell(t->owner);
			break;
		}
	}
	core_settle_due(c);
}

uint64_t
core_next_deadline(const struct core *c)
{
	struct core_timer	*t = core_timer_top(c);

	return t == NULL ? UINT64_MAX : t->at;
}
