/*
 * The life of the core's objects: change tracking (the rows the store
 * writes this turn, the jobs followers see changed), node states and their
 * counters, freeing, and taking nodes and jobs out of every index. Nothing
 * here decides anything about a job; core.c and core_round.c do.
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
 * Dirty objects are rows the store must write this turn; changed jobs are
 * what Control.Watch streams are told about. A node's change changes its
 * job's view but not its job's row.
 */
void
core_job_changed(struct core_job *j)
{
	j->steps_only = false;
	if (j->changed || j->removed)
		return;
	j->changed = true;
	TAILQ_INSERT_TAIL(&j->core->changed_jobs, j, changed_entry);
}

void
core_job_dirty(struct core_job *j)
{
	struct core	*c = j->core;

	if (j->removed)
		return;
	j->updated_ms = c->now.wall_ms;
	j->last_call_left_ms = core_job_last_call_in(j, c->now);
	j->join_left_ms = core_job_join_timeout_in(j, c->now);
	if (!j->dirty) {
		j->dirty = true;
		TAILQ_INSERT_TAIL(&c->dirty_jobs, j, dirty_entry);
	}
	core_job_changed(j);
}

void
core_node_dirty(struct core_node *n)
{
	if (n->removed)
		return;
	if (!n->dirty) {
		n->dirty = true;
		TAILQ_INSERT_TAIL(&n->job->core->dirty_nodes, n, dirty_entry);
	}
	core_job_changed(n->job);
}

bool
core_node_live(const struct core_node *n)
{
	return n->state == CORE_NODE_PARTICIPANT ||
	    n->state == CORE_NODE_WAITING || n->state == CORE_NODE_SPARE;
}

bool
core_job_ended(const struct core_job *j)
{
	return j->state == CORE_JOB_CLOSED || j->state == CORE_JOB_FAILED;
}

/* Keeps the job's per-state counters right; leases only for live nodes. */
void
core_node_set_state(struct core_node *n, enum core_node_state st)
{
	struct core_job	*j = n->job;

	if (n->state == st)
		return;
	assert(j->n_state[n->state] > 0);
	j->n_state[n->state]--;
	j->n_state[st]++;
	n->state = st;
	if (!core_node_live(n)) {
		core_timer_clear(j->core, &n->lease);
		if (!n->in_ended) {
			TAILQ_INSERT_TAIL(&j->ended, n, ended_entry);
			n->in_ended = true;
		}
	}
	core_node_dirty(n);
}

void
core_settle_later(struct core_job *j)
{
	if (j->settling || j->removed)
		return;
	j->settling = true;
	TAILQ_INSERT_TAIL(&j->core->settle, j, settle_entry);
}

/* Settles, once each, the jobs core_settle_later() collected. */
void
core_settle_due(struct core *c)
{
	struct core_job	*j;

	while ((j = TAILQ_FIRST(&c->settle)) != NULL) {
		TAILQ_REMOVE(&c->settle, j, settle_entry);
		j->settling = false;
		core_settle(j);
	}
}


/* Frees a node that is no longer indexed or linked anywhere but its job. */
void
core_node_free(struct core_node *n)
{
	struct core_qmsg *m, *next;

	if (n == NULL)
		return;
	for (m = n->out_head; m != NULL; m = next) {
		next = m->next;
		free(m);
	}
	free(n->hostname);
	free(n->advertise_addr);
	free(n->reason);
	free(n->gpus);
	free(n);
}

void
core_job_free(struct core_job *j)
{
	struct core_node	*n;

	if (j == NULL)
		return;
	while ((n = TAILQ_FIRST(&j->nodes)) != NULL) {
		TAILQ_REMOVE(&j->nodes, n, entry);
		core_node_free(n);
	}
	free(j->round);
	free(j->events);
	free(j->owner);
	free(j);
}

void
core_node_set_reason(struct core_node *n, const char *reason)
{
	free(n->reason);
	n->reason = reason == NULL ? NULL : xstrdup(reason);
}

bool
core_node_set_gpus(struct core_node *n, const struct core_gpu *gpus,
    uint32_t count)
{
	if (count == n->n_gpus && (count == 0 ||
	    memcmp(n->gpus, gpus, count * sizeof(*gpus)) == 0))
		return false;
	free(n->gpus);
	n->gpus = NULL;
	n->n_gpus = count;
	if (count > 0) {
		n->gpus = xreallocarray(NULL, count, sizeof(*gpus));
		memcpy(n->gpus, gpus, count * sizeof(*gpus));
	}
	return true;
}


/* The node no longer answers to its join token (it ended, or went). */
void
core_node_forget_token(struct core_node *n)
{
	struct core	*c = n->job->core;

	if (!n->has_token)
		return;
	hash_remove(&c->by_token, hash_bytes(n->join_token, CORE_TOKEN_LEN),
	    n);
	n->has_token = false;
}

/* Takes a node out of every index and list; it is freed with the turn. */
void
core_node_unlink(struct core_node *n)
{
	struct core	*c = n->job->core;

	hash_remove(&c->by_node, hash_u64(n->node_id), n);
	hash_remove(&c->by_session, hash_bytes(n->session_id,
	    CORE_SESSION_LEN), n);
	core_node_forget_token(n);
	if (n->dirty) {
		TAILQ_REMOVE(&c->dirty_nodes, n, dirty_entry);
		n->dirty = false;
	}
	core_msg_drop(c, n);
	core_timer_clear(c, &n->lease);
	n->removed = true;
}

/* The job is reopened or removed: no longer one of the owner's ended. */
void
core_owner_job_unended(struct core_job *j)
{
	if (!j->in_owner_ended)
		return;
	TAILQ_REMOVE(&j->own->ended, j, owner_entry);
	j->in_owner_ended = false;
	j->own->n_ended--;
}

/* Retention: the job goes from memory; the store deletes its rows. */
void
core_job_remove(struct core_job *j)
{
	struct core		*c = j->core;
	struct core_node	*n;
	size_t			 i, k;

	hash_remove(&c->by_id, hash_bytes(j->rdzv_id, strlen(j->rdzv_id)), j);
	core_owner_job_unended(j);
	TAILQ_REMOVE(&c->jobs, j, entry);
	c->n_jobs--;
	TAILQ_FOREACH(n, &j->nodes, entry)
		core_node_unlink(n);
	if (j->dirty)
		TAILQ_REMOVE(&c->dirty_jobs, j, dirty_entry);
	if (j->changed)
		TAILQ_REMOVE(&c->changed_jobs, j, changed_entry);
	if (j->settling)
		TAILQ_REMOVE(&c->settle, j, settle_entry);
	j->dirty = j->changed = j->settling = false;
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	core_timer_clear(c, &j->retention);
	core_timer_clear(c, &j->progress_timer);
	for (i = k = 0; i < c->n_new_events; i++) {
		if (c->new_events[i].job != j)
			c->new_events[k++] = c->new_events[i];
	}
	c->n_new_events = k;
	for (i = k = 0; i < c->n_new_rounds; i++) {
		if (c->new_rounds[i].job != j)
			c->new_rounds[k++] = c->new_rounds[i];
		else
			free(c->new_rounds[i].members);
	}
	c->n_new_rounds = k;
	j->removed = true;
	TAILQ_INSERT_TAIL(&c->removed_jobs, j, entry);
}

void
core_checkpoint(struct core *c, struct core_now now)
{
	struct core_job	*j;

	core_set_now(c, now);
	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (core_timer_armed(&j->last_call) ||
		    core_timer_armed(&j->join_deadline))
			core_job_dirty(j);
	}
}
