/*
 * The hub's part of in-process restart (SPEC §4 rule 15,
 * docs/RECOVERY.md), beside agent.c: when a newer assignment may be handed
 * to the running workers instead of stopping them, what a kept worker's
 * failure means, and what happens to a set that does not take its
 * assignment in time. The restart socket itself is inproc.c's.
 */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "log.h"

/* Whether this node restarts its workers in-process: its flag, or the
 * job's setting (rdzvd's Accepted says). */
bool
restart_inproc_on(const struct agent *a)
{
	return a->opts->restart_inproc || a->node.session.job_restart_inproc;
}

/* Said once per run: this node's workers restart as processes. */
static void
unkept(struct agent *a, const char *why)
{
	if (a->inproc_warned)
		return;
	a->inproc_warned = true;
	log_warnx("in-process restart: %s; restarting the workers as new "
	    "processes, as without --restart in-process", why);
}

#define NO_API	"not every worker takes assignments through rdzv.elastic " \
		"(docs/RECOVERY.md)"

/* A set ended under in-process restart: if its workers never spoke to
 * the restart socket, say so (once). It is not starting any more. */
void
restart_ended(struct agent *a)
{
	if (restart_inproc_on(a) && a->ws.end == WS_END_FAILED &&
	    a->inproc.hellos < a->ws.n)
		unkept(a, NO_API);
	report_starting(&a->node.report, a->ws.generation, false);
}

/*
 * A new set of workers just started as new processes. Under in-process
 * restart the other nodes' kept workers are at the round's meeting within
 * moments, while these import torch first: rdzvd hears that they are
 * starting, so that the meeting missing them does not lose this node
 * (SPEC §4 rule 17), until every one said hello (restart_hello) or the
 * set ended (restart_ended).
 */
void
restart_started(struct agent *a)
{
	if (restart_inproc_on(a))
		report_starting(&a->node.report, a->ws.generation, true);
}

/* A worker said hello: once all of them did, the set is up. */
static void
restart_hello(struct agent *a)
{
	if (a->ws.state == WS_RUNNING && a->ws.n > 0 &&
	    a->inproc.hellos >= a->ws.n)
		report_starting(&a->node.report, a->ws.generation, false);
}

/*
 * The running set is to give way to a->want. Under in-process restart,
 * when every worker said hello on the restart socket and the node runs as
 * many workers as before, each is handed its new assignment and kept:
 * true. A set still starting (inproc_starting) is waited for: true too,
 * and the question comes again. Else false, and the set is stopped and
 * started again as without the flag; a set whose workers do not use
 * rdzv.elastic is told once.
 */
bool
restart_keep(struct agent *a)
{
	struct workers *ws = &a->ws;
	struct env_worker ew = { .run_id = a->opts->id, .role = a->opts->role,
	    .visible = "", .progress = a->progress.env,
	    .restart = a->inproc.env };

	if (!restart_inproc_on(a) || ws->state != WS_RUNNING ||
	    a->node.quitting || !a->have_want ||
	    a->want.generation <= ws->generation || a->hang.active)
		return false;
	if (a->want.local_world_size != (uint32_t)ws->n) {
		unkept(a, "the number of workers changes");
		return false;
	}
	if (!inproc_ready(&a->inproc)) {
		/* Workers started as new processes that have not reached
		 * rdzv.elastic yet are waited for, up to the stop timeout
		 * from their start: they take the newest round when they do
		 * (unless a set never did: then it is not waited for). */
		if (!a->inproc_warned && inproc_starting(&a->inproc,
		    a->opts->stop_timeout_ms)) {
			if (a->start_wait_gen != a->want.generation)
				log_info("generation %llu: waiting for the "
				    "workers started for generation %llu to "
				    "reach rdzv.elastic (up to %.1f s from "
				    "their start) rather than restart them",
				    (unsigned long long)a->want.generation,
				    (unsigned long long)ws->generation,
				    a->opts->stop_timeout_ms / 1000.0);
			a->start_wait_gen = a->want.generation;
			return true;	/* decided again at ready() */
		}
		unkept(a, NO_API);
		return false;
	}
	if (inproc_hand(&a->inproc, &a->want, ew, a->opts->stop_timeout_ms) !=
	    0) {
		log_warnx("generation %llu: cannot hand the assignment to "
		    "every worker; restarting them as new processes",
		    (unsigned long long)a->want.generation);
		return false;
	}
	log_info("generation %llu: handed to the %d running worker%s "
	    "(ranks %u to %u of %u); they have %.1f s to take it",
	    (unsigned long long)a->want.generation, ws->n,
	    ws->n == 1 ? "" : "s", a->want.base_rank,
	    a->want.base_rank + a->want.local_world_size - 1,
	    a->want.world_size, a->opts->stop_timeout_ms / 1000.0);
	a->kept_from = a->node.offer.started_gen;
	a->node.offer.started_gen = a->want.generation;
	a->cur = a->want;
	ws->generation = a->want.generation;
	ws->base_rank = a->want.base_rank;
	ws->arrived_us = a->want.arrived_us;
	if (progress_start(&a->progress, a->cur.generation,
	    (int)a->cur.local_world_size, a->node.session.hang_timeout_ms) != 0)
		log_warnx("generation %llu: cannot watch progress",
		    (unsigned long long)a->cur.generation);
	/* The next round gets a new master port, as after a start. */
	if (a->opts->master_port == 0) {
		a->node.offer.master_port =
		    port_next((uint16_t)a->cur.master_port);
		report_update(&a->node.report, false, true, false);
	}
	return true;
}

/* A kept worker's train function failed: its generation failed, once. */
static void
on_failed(void *arg, uint64_t gen, int local_rank, const char *msg)
{
	struct agent *a = arg;
	struct workers *ws = &a->ws;
	char m[AGENT_MESSAGE_MAX + 1];

	if (a->node.quitting || ws->state != WS_RUNNING ||
	    gen != ws->generation || a->inproc_failed == gen)
		return;
	a->inproc_failed = gen;
	snprintf(m, sizeof(m), "rank %u (local rank %d, kept): %s",
	    ws->base_rank + (uint32_t)local_rank, local_rank,
	    msg[0] != '\0' ? msg : "its train function failed");
	log_info("generation %llu failed: %s; reported to rdzvd, the "
	    "workers wait for the next round", (unsigned long long)gen, m);
	if (a->absent_gen == gen)
		report_absent(&a->node.report, gen, m, a->absent,
		    a->n_absent);
	else
		report_absent(&a->node.report, gen, m, NULL, 0);
}

/* A kept worker's meeting of |gen| waited in vain for |ranks|: kept for
 * the failure report that follows (rule 17). */
static void
on_absent(void *arg, uint64_t gen, const uint32_t *ranks, size_t n)
{
	struct agent *a = arg;

	if (gen != a->ws.generation || a->inproc_failed == gen)
		return;
	free(a->absent);
	a->absent = xcalloc(n, sizeof(*a->absent));
	memcpy(a->absent, ranks, n * sizeof(*a->absent));
	a->n_absent = n;
	a->absent_gen = gen;
	log_info("generation %llu: the workers' meeting waited in vain for "
	    "%zu rank%s (first %u): their nodes took no part in the round",
	    (unsigned long long)gen, n, n == 1 ? "" : "s", ranks[0]);
}

/*
 * The set did not take generation |gen| within the stop timeout (a worker
 * stuck in a collective): it is stopped and started again as new
 * processes, as without in-process restart.
 */
static void
on_late(void *arg, uint64_t gen)
{
	struct agent *a = arg;
	struct workers *ws = &a->ws;

	if (ws->state != WS_RUNNING || ws->generation != gen)
		return;
	log_warnx("generation %llu: a worker did not take its assignment "
	    "within %.1f s; restarting the workers as new processes",
	    (unsigned long long)gen, a->opts->stop_timeout_ms / 1000.0);
	/* Not the wanted generation any more: once stopped, it starts. */
	a->node.offer.started_gen = a->kept_from;
	ws->generation = a->kept_from;
	workers_stop(ws, WS_END_STOPPED, "it did not take the new round");
	node_step(&a->node);
}

/* A worker said hello, or a starting set's wait ended: decide again. */
static void
on_ready(void *arg)
{
	struct agent *a = arg;

	restart_hello(a);
	node_step(&a->node);
}

const struct inproc_events restart_events = {
	.failed = on_failed,
	.late = on_late,
	.absent = on_absent,
	.ready = on_ready,
};
