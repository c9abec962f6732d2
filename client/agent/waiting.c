/*
 * While a node waits for the others (docs/AGENT.md): rdzvd's waiting
 * message is logged when it comes, and then nothing would be said until
 * the round forms or the join timeout fails the job, minutes later. So a
 * reminder says who is still missing and when the job fails, at growing
 * intervals (a sixtieth of the time left, 1 to 10 s, then doubling up to
 * 5 minutes): a short wait says little, a long one is not silent.
 */
#include <stdio.h>

#include "node.h"
#include "clock.h"
#include "log.h"
#include "text.h"

#define FIRST_MIN_MS	1000
#define FIRST_MAX_MS	10000
#define EVERY_MAX_MS	300000

/* "9m30s", "45s", "1h02m". */
static void
left_text(char *buf, size_t len, uint64_t ms)
{
	uint64_t s = (ms + 500) / 1000;

	if (s >= 3600)
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)s / 3600,
		    (unsigned long long)(s % 3600) / 60);
	else if (s >= 60 && s % 60 != 0)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)s / 60,
		    (unsigned long long)s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%llum", (unsigned long long)s / 60);
	else
		snprintf(buf, len, "%llus", (unsigned long long)s);
}

static void
arm(struct session *s)
{
	struct timeval tv = { (time_t)(s->wait.every_ms / 1000),
	    (suseconds_t)(s->wait.every_ms % 1000) * 1000 };

	evtimer_add(s->wait.ev, &tv);
}

static void
remind_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct waiting_log *w = &s->wait;
	uint64_t now = mono_ms();
	uint32_t more = w->min_nodes - w->participants;
	char left[32] = "", when[64] = "";

	if (w->fails_at_ms != 0) {
		left_text(left, sizeof(left), w->fails_at_ms > now ?
		    w->fails_at_ms - now : 0);
		snprintf(when, sizeof(when), "; fails in %s", left);
	}
	log_info("job %s: waiting for %u more node%s (%u of %u joined)%s",
	    s->opts->id, more, plural(more), w->participants, w->min_nodes,
	    when);
	w->every_ms = w->every_ms * 2 > EVERY_MAX_MS ? EVERY_MAX_MS :
	    w->every_ms * 2;
	arm(s);
}

int
waiting_init(struct session *s, struct event_base *base)
{
	s->wait.ev = evtimer_new(base, remind_cb, s);
	return s->wait.ev != NULL ? 0 : -1;
}

/* rdzvd's news while this node waits: reminders from now on while the
 * round is short of its minimum; none once it is not. */
void
waiting_news(struct session *s, const Rdzv__V1__Waiting *m)
{
	struct waiting_log *w = &s->wait;
	uint64_t first;

	if (w->ev == NULL)
		return;
	event_del(w->ev);
	if (s->quitting || m->participants >= m->min_nodes ||
	    m->state != RDZV__V1__NODE_STATE__NODE_STATE_PARTICIPANT)
		return;
	w->participants = m->participants;
	w->min_nodes = m->min_nodes;
	w->fails_at_ms = m->fails_in_ms != 0 ? mono_ms() + m->fails_in_ms : 0;
	first = m->fails_in_ms / 60;
	w->every_ms = first < FIRST_MIN_MS ? FIRST_MIN_MS :
	    first > FIRST_MAX_MS ? FIRST_MAX_MS : (uint32_t)first;
	arm(s);
}

/* The wait is over (an assignment, the end, an exit). */
void
waiting_over(struct session *s)
{
	if (s->wait.ev != NULL)
		event_del(s->wait.ev);
}

void
waiting_free(struct session *s)
{
	if (s->wait.ev != NULL)
		event_free(s->wait.ev);
	s->wait.ev = NULL;
}
