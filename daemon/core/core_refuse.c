/*
 * A join refused because its host is quarantined (core_join_host) is part
 * of its job's story: the job's events name the host and the reason. And
 * a job of a fixed allocation (rejoin_timeout 0: nothing replaces a node
 * that does not come) whose allocation, less the refused nodes, cannot
 * make min_nodes fails at once, naming the host, as a clean leave fails
 * it (rule 13), instead of the other nodes waiting out the join timeout.
 *
 * The refused node may be the first of its job to reach rdzvd: then the
 * refusal is kept (in memory, for the join timeout) and taken by the job
 * when its first node creates it. And since the other nodes of the
 * allocation may still be on their way when the job fails, a job failed
 * by a refusal refuses their joins too (same attempt), instead of being
 * reopened by them (rule 12) and waiting for a node that will not come.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"
#include "xmalloc.h"

/*
 * Whether the job can no longer make min_nodes: a fixed allocation of
 * |alloc| nodes (0: not in one, so a node may still come) of which
 * n_refused were refused.
 */
static bool
refusal_dooms(const struct core_job *j, uint32_t alloc)
{
	if (j->state != CORE_JOB_WAITING || alloc == 0 ||
	    j->settings.rejoin_timeout_ms != 0)
		return false;
	return alloc < j->n_refused ||
	    alloc - j->n_refused < j->settings.min_nodes;
}

/* Records one refusal in |j|, and fails it when it cannot form. */
static void
refusal_record(struct core_job *j, const char *why, uint32_t alloc)
{
	char	fail[CORE_REASON_MAX];

	j->n_refused++;
	core_event_add(j, "refused", "%s", why);
	if (!refusal_dooms(j, alloc))
		return;
	textf(fail, sizeof(fail), "%.*s; %u of the allocation's %u node%s "
	    "can join, fewer than min %u, and rejoin_timeout is 0, so no "
	    "node can replace %s", (int)utf8_prefix(why, 300), why,
	    alloc > j->n_refused ? alloc - j->n_refused : 0, alloc,
	    plural(alloc), j->settings.min_nodes,
	    j->n_refused == 1 ? "it" : "them");
	j->refusal_failed = true;
	core_job_fail(j, fail);
}

/* Drops the kept refusals past their time, and the one at |i|. */
static void
refusals_prune(struct core *c, size_t drop)
{
	size_t	i, k = 0;

	for (i = 0; i < c->n_refusals; i++) {
		if (i == drop || c->refusals[i].until_ms <= c->now.mono_ms) {
			c->refusals_dirty = true;
			continue;
		}
		if (k != i)
			c->refusals[k] = c->refusals[i];
		k++;
	}
	c->n_refusals = k;
}

void
core_join_refused(struct core *c, const struct core_join *req,
    const char *identity, const char *why)
{
	struct core_job		*j = core_job_find(c, req->rdzv_id);
	struct core_refusal	*r;
	char			 msg[CORE_REASON_MAX], scratch[256];
	uint64_t		 keep;

	textf(msg, sizeof(msg), "a join from host %.*s was refused: %s",
	    (int)utf8_prefix(req->hostname, 64), req->hostname, why);
	if (j != NULL && !core_job_ended(j)) {
		/* Only a node that may join the job tells in it. */
		if (core_owner_check(j, identity, "join", scratch,
		    sizeof(scratch)) == 0)
			refusal_record(j, msg, req->allocation_nodes);
		return;
	}
	/* Its job has no node yet (or an ended one that a later join
	 * reopens): kept for it. */
	refusals_prune(c, SIZE_MAX);
	if (c->n_refusals == CORE_REFUSALS_MAX)
		refusals_prune(c, 0);	/* the oldest goes */
	if (c->n_refusals == c->refusals_cap) {
		c->refusals_cap = c->refusals_cap ? c->refusals_cap * 2 : 8;
		c->refusals = xreallocarray(c->refusals, c->refusals_cap,
		    sizeof(*c->refusals));
	}
	r = &c->refusals[c->n_refusals++];
	memset(r, 0, sizeof(*r));
	textcpy(r->rdzv_id, sizeof(r->rdzv_id), req->rdzv_id);
	textcpy(r->identity, sizeof(r->identity), identity);
	textcpy(r->why, sizeof(r->why), msg);
	r->allocation_nodes = req->allocation_nodes;
	r->attempt = req->attempt;
	keep = req->settings.join_timeout_ms != 0 ?
	    req->settings.join_timeout_ms : c->cfg.defaults.join_timeout_ms;
	r->until_ms = c->now.mono_ms + keep;
	c->refusals_dirty = true;
}

void
core_restore_refusal(struct core *c, const struct core_refusal *r,
    uint64_t left_ms)
{
	if (left_ms == 0 || c->n_refusals == CORE_REFUSALS_MAX)
		return;
	if (c->n_refusals == c->refusals_cap) {
		c->refusals_cap = c->refusals_cap ? c->refusals_cap * 2 : 8;
		c->refusals = xreallocarray(c->refusals, c->refusals_cap,
		    sizeof(*c->refusals));
	}
	/* Time left until core_restore_finish() knows the clock. */
	c->refusals[c->n_refusals] = *r;
	c->refusals[c->n_refusals].until_ms = left_ms;
	c->n_refusals++;
}

uint64_t
core_refusal_left(const struct core_refusal *r, struct core_now now)
{
	return r->until_ms > now.mono_ms ? r->until_ms - now.mono_ms : 0;
}

void
core_refusals_take(struct core_job *j, uint32_t attempt)
{
	struct core	*c = j->core;
	size_t		 i = 0;

	refusals_prune(c, SIZE_MAX);
	while (i < c->n_refusals && !core_job_ended(j)) {
		struct core_refusal r = c->refusals[i];

		/* Another run's refusal (before a requeue) is not this
		 * one's. */
		if (strcmp(r.rdzv_id, j->rdzv_id) != 0 ||
		    strcmp(r.identity, j->owner) != 0 || r.attempt != attempt) {
			i++;
			continue;
		}
		refusals_prune(c, i);
		refusal_record(j, r.why, r.allocation_nodes);
	}
}

int
core_refused_late(const struct core_job *j, const struct core_join *req,
    char *err, size_t errlen)
{
	const struct core	*c = j->core;
	uint64_t		 keep = j->settings.join_timeout_ms;

	if (j->state != CORE_JOB_FAILED || !j->refusal_failed ||
	    req->allocation_nodes == 0)
		return 0;
	/* A later run of the allocation (a requeue) reopens it. */
	if (req->attempt > j->attempt)
		return 0;
	if (req->attempt == 0 && c->now.wall_ms - j->ended_ms >= (int64_t)keep)
		return 0;
	textf(err, errlen, "job %s failed: %s", j->rdzv_id, j->reason);
	return CORE_REFUSED;
}
