/*
 * The hub's part of a hang (docs/HEALTH.md, SPEC §4 rule 17), beside
 * agent.c: whose hang it is when no worker of this node made progress for
 * the job's hang timeout, and what this node does about it. What can be
 * learnt of the workers' stacks, and the workers' process state, is
 * hang.c's.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "agent.h"
#include "clock.h"
#include "log.h"

/* What a hang report says: how long, since which step. */
static void
hang_message(const struct agent *a, char *buf, size_t len)
{
	const struct progress_watch *p = &a->progress;

	snprintf(buf, len, "no worker made progress for %.1f s since step "
	    "%llu (hang timeout %.1f s)", (double)mono_since(mono_us(),
	    p->moved_us) / 1e6, (unsigned long long)p->step,
	    p->hang_ms / 1000.0);
}

/* The hang is reported; this node's workers first give their stacks
 * (hang.c), then stop. on_step() waits for the dump, even for a new
 * generation. */
static void
hang_stop(struct agent *a, const char *msg, bool culprit)
{
	a->hung_gen = a->ws.generation;
	report_hang(&a->node.report, a->ws.generation, msg, culprit);
	hang_dump(&a->hang, &a->ws);
}

/*
 * No worker made progress for the job's hang timeout (docs/HEALTH.md).
 * When every worker of a job waits for one (a stopped process, a stuck
 * driver), every node's hang timer runs out together, and only the
 * culprit's node must pay (SPEC §4 rule 17). A node one of whose workers
 * is stopped or in uninterruptible sleep is that culprit: it reports at
 * once ("stuck"), rdzvd loses it and forms the next round without it, and
 * its workers stop. A node whose workers only wait is a bystander: it
 * gives the culprit's node HANG_BYSTANDER_MS to report first; if a newer
 * round comes meanwhile its hang was someone else's and it says nothing.
 * Otherwise it reports the hang itself (no node had a stopped worker: a
 * deadlock that looks like waiting), and rdzvd restarts the job.
 */
#define HANG_BYSTANDER_MS	1000

void
hung_found(void *arg)
{
	struct agent *a = arg;
	const struct progress_watch *p = &a->progress;
	char msg[AGENT_MESSAGE_MAX + 1], state = 0;
	uint32_t grace = p->hang_ms / 2 < HANG_BYSTANDER_MS ? p->hang_ms / 2 :
	    HANG_BYSTANDER_MS;
	struct timeval tv = { grace / 1000, (grace % 1000) * 1000 };
	int lr;

	if (a->ws.state != WS_RUNNING || a->node.quitting)
		return;
	hang_message(a, msg, sizeof(msg));
	if ((lr = hang_culprit(&a->ws, &state)) >= 0) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, "; local rank %d (pid %d) "
		    "is %s", lr, (int)a->ws.w[lr].pid, state == 'D' ?
		    "in uninterruptible sleep (D)" : "stopped (T)");
		log_error("generation %llu: hung, and the hang is this "
		    "node's: %s; reported to rdzvd, dumping the workers' "
		    "stacks, then stopping them",
		    (unsigned long long)a->ws.generation, msg);
		hang_stop(a, msg, true);
		return;
	}
	log_warnx("generation %llu: %s, but no worker of this node is "
	    "stopped: waiting %.1f s for the node whose worker hangs to be "
	    "found before reporting", (unsigned long long)a->ws.generation,
	    msg, grace / 1000.0);
	a->bystander_gen = a->ws.generation;
	evtimer_add(a->bystander_ev, &tv);
}

/* The culprit's node did not report the hang in time, or nothing showed
 * which node it is: this node reports it. */
static void
bystander_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	char msg[AGENT_MESSAGE_MAX + 1];
	uint64_t gen = a->bystander_gen;

	a->bystander_gen = 0;
	if (gen == 0 || a->ws.state != WS_RUNNING || a->node.quitting ||
	    a->ws.generation != gen || a->hung_gen == gen ||
	    (a->have_want && a->want.generation > gen))
		return;		/* a newer round came: the hang was not ours */
	hang_message(a, msg, sizeof(msg));
	if (restart_inproc_on(a) && inproc_ready(&a->inproc)) {
		/* Kept workers take the next round as soon as the worker
		 * that holds them is gone; one that hangs itself does not
		 * take it and is restarted as a process (restart.c). */
		log_error("generation %llu: hung: %s; reported to rdzvd; the "
		    "workers are kept for the next round",
		    (unsigned long long)gen, msg);
		report_hang(&a->node.report, gen, msg, false);
		return;
	}
	log_error("generation %llu: hung: %s; no node's worker was found "
	    "stopped; reported to rdzvd, dumping the workers' stacks, then "
	    "stopping them", (unsigned long long)gen, msg);
	hang_stop(a, msg, false);
}

int
hung_init(struct agent *a)
{
	a->bystander_ev = evtimer_new(a->node.base, bystander_cb, a);
	return a->bystander_ev != NULL ? 0 : -1;
}

void
hung_free(struct agent *a)
{
	if (a->bystander_ev != NULL)
		event_free(a->bystander_ev);
	a->bystander_ev = NULL;
}
