/*
 * rdzvd's clock for deadlines: monotonic time less the time the event loop
 * could not run (SIGSTOP, a paused VM, a long fsync on the loop thread).
 * A heartbeat timer looks at the clock every STALL_TICK_MS, so two looks
 * further apart than STALL_GAP_MS mean the loop was held; that time counts
 * for no deadline, and the silence of every connection is judged from the
 * end of the stall at the earliest: a stall, however caused, ends no lease
 * (issue 12). A slow commit is such a stall too: while it runs on the
 * commit thread the core is sealed (turn.c: its inputs wait), so turn.c
 * reports a commit past STALL_GAP_MS (stall_commit_took) and it counts
 * for no deadline and no lease; an agent that gave up on its join
 * meanwhile finds its node by its join token (core.c).
 * Whichever callback runs first after a stall notices it.
 */
#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "rdzvd.h"

#define STALL_TICK_MS	100
#define STALL_GAP_MS	1000

static struct event	*tick_ev;
static uint64_t		 last_look;	/* mono ms */
static uint64_t		 stalled_ms;	/* in all */
static uint64_t		 stall_end;	/* mono ms the last stall was seen */

static void
look(void)
{
	uint64_t	now = mono_ms(), gap;

	if (last_look != 0 && mono_since(now, last_look) > STALL_GAP_MS) {
		gap = now - last_look - STALL_TICK_MS;
		stalled_ms += gap;
		stall_end = now;
		log_warnx("the event loop was held for %llu ms (stopped, paused "
		    "or waiting on the disk); that time counts for no lease or "
		    "deadline", (unsigned long long)gap);
	}
	last_look = now;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	look();
}

void
stall_init(void)
{
	struct timeval tv = { 0, STALL_TICK_MS * 1000 };

	/* Once for the process: a replica that leads again keeps its clock
	 * (ha.c). */
	if (tick_ev != NULL)
		return;
	tick_ev = event_new(rdzvd.base, -1, EV_PERSIST, tick_cb, NULL);
	if (tick_ev == NULL || event_add(tick_ev, &tv) != 0)
		fatalx("stall_init: cannot create the heartbeat timer");
	look();
}

void
stall_free(void)
{
	if (tick_ev != NULL)
		event_free(tick_ev);
	tick_ev = NULL;
	last_look = stalled_ms = stall_end = 0;
}

uint64_t
stall_clock_ms(void)
{
	look();
	return mono_ms() - stalled_ms;
}

void
stall_commit_took(uint64_t ms)
{
	look();
	if (ms <= STALL_GAP_MS)
		return;
	stalled_ms += ms;
	stall_end = mono_ms();
	log_warnx("a commit took %llu ms; that time counts for no lease or "
	    "deadline", (unsigned long long)ms);
}

uint64_t
stall_end_ms(void)
{
	look();
	return stall_end;
}
