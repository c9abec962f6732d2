/*
 * A job's event history (what `rdzvctl events` shows) and the words the core
 * uses for its states, kinds and durations.
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
 * An event goes to the job's ring of the latest CORE_EVENTS_KEPT and to the
 * turn's new events, which the store appends to the job's full history.
 */
void
core_event_add(struct core_job *j, const char *kind, const char *fmt, ...)
{
	struct core		*c = j->core;
	struct core_event	*e;
	va_list			 ap;

	if (j->removed)
		return;
	if (c->n_new_events == c->new_events_cap) {
		c->new_events_cap = c->new_events_cap == 0 ? 64 :
		    c->new_events_cap * 2;
		c->new_events = xreallocarray(c->new_events,
		    c->new_events_cap, sizeof(*c->new_events));
	}
	e = &c->new_events[c->n_new_events++];
	memset(e, 0, sizeof(*e));
	e->seq = ++j->event_seq;
	e->wall_ms = c->now.wall_ms;
	e->generation = j->generation;
	textcpy(e->kind, sizeof(e->kind), kind);
	va_start(ap, fmt);
	vtextf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	e->job = j;
	core_restore_event(j, e);
	core_job_dirty(j);
}

void
core_restore_event(struct core_job *j, const struct core_event *e)
{
	struct core_event	*slot;

	if (j->events_n < CORE_EVENTS_KEPT) {
		if (j->events_n == j->events_cap) {
			j->events_cap = j->events_cap == 0 ? 8 :
			    j->events_cap * 2;
			if (j->events_cap > CORE_EVENTS_KEPT)
				j->events_cap = CORE_EVENTS_KEPT;
			j->events = xreallocarray(j->events,
			    j->events_cap, sizeof(*j->events));
		}
		slot = &j->events[j->events_n++];
	} else {
		slot = &j->events[j->events_start];
		j->events_start = (j->events_start + 1) % CORE_EVENTS_KEPT;
	}
	*slot = *e;
	slot->job = NULL;
	if (e->seq > j->event_seq)
		j->event_seq = e->seq;
}

const struct core_event *
core_job_event(const struct core_job *j, uint32_t i)
{
	if (i >= j->events_n)
		return NULL;
	if (j->events_n < CORE_EVENTS_KEPT)
		return &j->events[i];
	return &j->events[(j->events_start + i) % CORE_EVENTS_KEPT];
}


/* "600 s", or "1.5 s" for durations that are not whole seconds. */
void
core_waiting_reason(const struct core_node *n, char *buf, size_t len)
{
	const struct core_job	*j = n->job;
	uint32_t		 p = j->n_state[CORE_NODE_PARTICIPANT];
	char			 t[32];

	switch (n->state) {
	case CORE_NODE_PARTICIPANT:
		if (p < j->settings.min_nodes)
			textf(buf, len, "round %llu: %u of min %u node%s "
			    "joined; waiting for %u more",
			    (unsigned long long)j->generation + 1, p,
			    j->settings.min_nodes, plural(j->settings.min_nodes),
			    j->settings.min_nodes - p);
		else {
			core_fmt_secs(t, sizeof(t), (uint64_t)
			    core_job_last_call_in(j, j->core->now));
			textf(buf, len, "round %llu: %u node%s joined; it "
			    "completes at %u node%s or in %s (last call)",
			    (unsigned long long)j->generation + 1, p,
			    plural(p), j->settings.max_nodes,
			    plural(j->settings.max_nodes), t);
		}
		break;
	case CORE_NODE_WAITING:
		textf(buf, len, "generation %llu is running; the next "
		    "round takes this node in", (unsigned long long)
		    j->generation);
		break;
	case CORE_NODE_SPARE:
		textf(buf, len, "the job has max_nodes (%u) node%s; spare "
		    "until one goes", j->settings.max_nodes,
		    plural(j->settings.max_nodes));
		break;
	case CORE_NODE_SUCCEEDED:
		textf(buf, len, "this node succeeded; %u other node%s still "
		    "running", p, p == 1 ? " is" : "s are");
		break;
	default:
		textf(buf, len, "node is %s%s%s", core_node_state_name(
		    n->state), n->reason != NULL ? ": " : "",
		    n->reason != NULL ? n->reason : "");
		break;
	}
}

void
core_fmt_secs(char *buf, size_t len, uint64_t ms)
{
	if (ms % 1000 == 0)
		textf(buf, len, "%llu s", (unsigned long long)(ms / 1000));
	else
		textf(buf, len, "%.3g s", (double)ms / 1000.0);
}

/* UTC, ISO 8601: what a user can compare with the scheduler's logs. */
void
core_fmt_wall(char *buf, size_t len, int64_t wall_ms)
{
	struct tm	tm;
	time_t		t = (time_t)(wall_ms / 1000);

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		textf(buf, len, "%lld ms", (long long)wall_ms);
}

const char *
core_job_state_name(enum core_job_state st)
{
	switch (st) {
	case CORE_JOB_WAITING:
		return "waiting";
	case CORE_JOB_RUNNING:
		return "running";
	case CORE_JOB_CLOSING:
		return "closing";
	case CORE_JOB_CLOSED:
		return "closed";
	case CORE_JOB_FAILED:
		return "failed";
	}
	return "unknown";
}

const char *
core_node_state_name(enum core_node_state st)
{
	static const char *const names[CORE_NODE_NSTATES] = {
		"unknown", "participant", "waiting", "spare", "succeeded",
		"left", "lost", "evicted", "failed",
	};

	if ((unsigned)st >= CORE_NODE_NSTATES)
		return "unknown";
	return names[st];
}

const char *
core_msg_kind_name(enum core_msg_kind k)
{
	static const char *const names[] = {
		"none", "accepted", "waiting", "assignment", "stop", "closed",
		"failed", "evicted", "left",
	};

	if ((unsigned)k >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[k];
}

const char *
core_result_name(int r)
{
	static const char *const names[] = {
		[CORE_OK] = "OK", [CORE_INVALID] = "INVALID",
		[CORE_NOT_FOUND] = "NOT_FOUND", [CORE_DENIED] = "DENIED",
		[CORE_REFUSED] = "REFUSED", [CORE_LIMIT] = "LIMIT",
		[CORE_ERROR] = "ERROR",
	};

	return r >= 0 && (size_t)r < sizeof(names) / sizeof(names[0]) ?
	    names[r] : "?";
}
