/*
 * Fencing (docs/AGENT.md): a node that rdzvd cannot have heard from for
 * the job's lease may have been lost there, and its ranks given to a new
 * round; its workers then hold their GPUs and their peers' old collectives
 * for nothing. So once nothing came from rdzvd for a whole lease (our own
 * PINGs, three to a lease, are answered at once by a reachable rdzvd),
 * the agent stops its workers and says why, and resumes or joins again
 * when rdzvd is back. What rdzvd's host still acknowledges (TCP), or a
 * connection it refuses (rdzvd not running), counts as heard: a stopped,
 * stalled or restarting rdzvd loses no node for it (issue 12, SPEC §4
 * rule 11), so it must not cost a worker either.
 *
 * One exception: workers that still step (docs/HEALTH.md's progress
 * reports), after the silence began and within the last half lease, are
 * in collectives that every peer of their generation still runs, so no
 * rank of theirs was given away. That is rdzvd's own outage (SPEC §4 rule
 * 13), which holds the job: stopping them would restart a healthy job.
 * Workers that send no progress are fenced at the lease. A fenced
 * generation is reported FAILED (sent when rdzvd is reached again): a
 * job that rdzvd held meanwhile restarts instead of keeping a node with
 * no workers in its round; a node rdzvd lost finds the report stale.
 *
 * Fencing reads the session and the progress watch and decides when; the
 * hub (agent.c) says what runs and stops it, through the fence_events it
 * gave fence_init(): this file never calls agent.c.
 */
#include <errno.h>
#include <stdio.h>

#include <event2/event.h>

#include "agent.h"
#include "clock.h"
#include "fence_rule.h"
#include "log.h"

#define FENCE_TICK_MS	250

static void
fence_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fence *f = arg;
	const struct session *s = f->session;
	uint64_t now = mono_ms(), ttl = s->lease_ttl_ms, acked, gen;
	uint64_t moved = f->progress->moved_us / 1000;
	enum fence_verdict v;
	char why[160];

	f->heard_ms = fence_heard(f->heard_ms,
	    grpc_client_last_seen_ms(s->cli));
	/* rdzvd's host took our bytes (it reads them when it runs: a stalled
	 * rdzvd counts no silence), or refused us (no rdzvd runs there to
	 * judge us): either way it cannot have given our ranks away. Both
	 * are read after |now| and may be later than it (fence_rule.c). */
	acked = grpc_client_acked_ms(s->cli);
	if (!grpc_client_connected(s->cli) && s->close_err == -ECONNREFUSED)
		acked = now;
	f->heard_ms = fence_heard(f->heard_ms, acked);
	v = fence_decide(now, f->heard_ms, moved, ttl);
	if (v == FENCE_KEEP)
		f->stepping_said = false;
	if (v == FENCE_KEEP ||
	    (gen = f->events.running(f->events.arg)) == 0)
		return;
	if (v == FENCE_STEPPING) {
		if (!f->stepping_said)
			log_warnx("generation %llu: rdzvd has not been heard "
			    "for %.1f s (lease %.1f s) but the workers still "
			    "step with every peer: they keep running",
			    (unsigned long long)gen,
			    mono_since(now, f->heard_ms) / 1000.0,
			    ttl / 1000.0);
		f->stepping_said = true;
		return;
	}
	log_warnx("generation %llu: rdzvd cannot have heard from this node "
	    "for %.1f s, its lease_ttl %.1f s: it may have given the node's "
	    "ranks away; stopping the workers (fencing) until rdzvd answers",
	    (unsigned long long)gen,
	    mono_since(now, f->heard_ms) / 1000.0, ttl / 1000.0);
	snprintf(why, sizeof(why), "fenced: rdzvd has not been heard for the "
	    "lease (%.1f s)", ttl / 1000.0);
	f->events.fenced(f->events.arg, gen, why);
}

int
fence_init(struct fence *f, struct event_base *base,
    const struct session *s, const struct progress_watch *progress,
    const struct fence_events *events)
{
	struct timeval tv = { 0, FENCE_TICK_MS * 1000 };

	f->session = s;
	f->progress = progress;
	f->events = *events;
	f->ev = event_new(base, -1, EV_PERSIST, fence_cb, f);
	if (f->ev == NULL || event_add(f->ev, &tv) != 0)
		return -1;
	return 0;
}

void
fence_free(struct fence *f)
{
	if (f->ev != NULL)
		event_free(f->ev);
	f->ev = NULL;
}
