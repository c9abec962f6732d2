/*
 * Training progress (docs/HEALTH.md): the step each node's workers reached
 * in the current generation, as its agent forwards it, and which nodes
 * trail the job's leading node. A step marks nothing dirty, so that it
 * never costs a commit of its own; core_progress_checkpoint() (the daemon
 * calls it every few seconds) marks the nodes whose step moved, and their
 * steps and last-seen times are written with them: after a restart the
 * straggler and hang views go on from the last checkpoint (issue 42).
 *
 * A node's lag is told two ways: in steps (the leader's step minus its
 * own) and in time (how long ago the leader passed its step). The latter
 * needs to know when the leader reached each step, so each job keeps the
 * latest rises of its leading step in a small ring.
 */
#include <stdio.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

#define ANON	"anonymous"

/* Forgets the job's leading steps: a new generation, or steps that went
 * back (a script that counts each epoch from 0). */
static void
lead_reset(struct core_job *j, uint64_t generation)
{
	j->progress_gen = generation;
	j->lead_n = j->lead_start = 0;
}

static const struct core_lead *
lead_at(const struct core_job *j, uint32_t i)
{
	return &j->lead[(j->lead_start + i) % CORE_LEAD_KEPT];
}

/* The leading step rose to |step| at |mono_ms|; the oldest rise goes
 * when the ring is full. */
static void
lead_push(struct core_job *j, uint64_t step, uint64_t mono_ms)
{
	struct core_lead	*l;

	if (j->lead_n == CORE_LEAD_KEPT) {
		j->lead_start = (j->lead_start + 1) % CORE_LEAD_KEPT;
		j->lead_n--;
	}
	l = &j->lead[(j->lead_start + j->lead_n) % CORE_LEAD_KEPT];
	l->step = step;
	l->mono_ms = mono_ms;
	j->lead_n++;
}

/*
 * Watchers hear of new steps at most once per CORE_PROGRESS_TELL_MS per
 * job: a thousand nodes each moving once a second would otherwise send
 * every watcher the whole job a thousand times a second. A step that
 * comes within the interval is told when the progress timer fires.
 */
void
core_progress_tell(struct core_job *j)
{
	struct core	*c = j->core;
	uint64_t	 now = c->now.mono_ms;

	if (j->removed || core_timer_armed(&j->progress_timer))
		return;
	if (j->progress_told_ms == 0 ||
	    now >= j->progress_told_ms + CORE_PROGRESS_TELL_MS) {
		bool was = j->changed;

		/* 0 means never told; a clock at 0 tells once more, no harm. */
		j->progress_told_ms = now;
		core_job_changed(j);
		if (!was)
			j->steps_only = true;
		return;
	}
	core_timer_set(c, &j->progress_timer,
	    j->progress_told_ms + CORE_PROGRESS_TELL_MS);
}

int
core_progress(struct core *c, struct core_now now, const char *identity,
    const uint8_t session_id[CORE_SESSION_LEN], uint64_t generation,
    uint64_t step, char *err, size_t errlen)
{
	struct core_node	*n;
	struct core_job		*j;
	bool			 moved, back;
	int			 rc;

	core_set_now(c, now);
	if ((n = core_node_by_session(c, session_id)) == NULL) {
		textf(err, errlen, "no node has this session (the daemon "
		    "forgot it, or the job was reopened or deleted); join "
		    "again");
		return CORE_NOT_FOUND;
	}
	j = n->job;
	if ((rc = core_owner_check(j, identity != NULL ? identity : ANON,
	    "report progress to", err, errlen)) != 0)
		return rc;
	if (core_job_ended(j) || (j->state != CORE_JOB_RUNNING &&
	    j->state != CORE_JOB_CLOSING) || generation != j->generation ||
	    n->state != CORE_NODE_PARTICIPANT || n->generation != generation) {
		textf(err, errlen, "job %s: generation %llu does not run on "
		    "node %llu (the job is %s in generation %llu)", j->rdzv_id,
		    (unsigned long long)generation,
		    (unsigned long long)n->node_id,
		    core_job_state_name(j->state),
		    (unsigned long long)j->generation);
		return CORE_REFUSED;
	}
	if (j->progress_gen != generation)
		lead_reset(j, generation);
	back = n->has_step && n->step_gen == generation && step < n->step;
	moved = !n->has_step || n->step_gen != generation || step != n->step;
	n->has_step = true;
	n->step_gen = generation;
	n->step = step;
	if (!moved)
		return 0;
	n->step_wall_ms = now.wall_ms;
	n->step_unsaved = true;
	if (back)
		lead_reset(j, generation);
	if (j->lead_n == 0 || step > lead_at(j, j->lead_n - 1)->step)
		lead_push(j, step, now.mono_ms);
	core_progress_tell(j);
	return 0;
}

/* Whether the node's step is of its job's current generation. */
static bool
step_current(const struct core_node *n)
{
	const struct core_job	*j = n->job;

	return n->has_step && n->step_gen == j->generation &&
	    j->progress_gen == j->generation && n->state ==
	    CORE_NODE_PARTICIPANT && !core_job_ended(j);
}

/* The highest current step of the job's nodes; false when none has one. */
static bool
lead_step(const struct core_job *j, uint64_t *lead)
{
	const struct core_node	*n;
	bool			 any = false;

	*lead = 0;
	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (!step_current(n))
			continue;
		if (!any || n->step > *lead)
			*lead = n->step;
		any = true;
	}
	return any;
}

/* How long ago, at |now_mono|, the leader first went past |step|: the
 * earliest kept rise above it (a lower bound when older rises are gone). */
static int64_t
behind_ms(const struct core_job *j, uint64_t step, uint64_t now_mono)
{
	for (uint32_t i = 0; i < j->lead_n; i++) {
		const struct core_lead *l = lead_at(j, i);
		if (l->step > step)
			return now_mono > l->mono_ms ?
			    (int64_t)(now_mono - l->mono_ms) : 0;
	}
	return 0;
}

void
core_node_progress(const struct core_node *n, uint64_t lead,
    struct core_now now, struct core_node_progress *p)
{
	const struct core_job		*j = n->job;
	const struct core_config	*cfg = &j->core->cfg;

	memset(p, 0, sizeof(*p));
	if (!step_current(n))
		return;
	p->has_step = true;
	p->step = n->step;
	p->step_wall_ms = n->step_wall_ms;
	if (n->step >= lead)
		return;
	p->steps_behind = lead - n->step;
	p->behind_ms = behind_ms(j, n->step, now.mono_ms);
	p->straggler = (cfg->straggler_steps > 0 &&
	    p->steps_behind > cfg->straggler_steps) ||
	    (cfg->straggler_ms > 0 &&
	    (uint64_t)p->behind_ms > cfg->straggler_ms);
}

bool
core_job_progress(const struct core_job *j, struct core_now now,
    uint64_t *lead, uint32_t *stragglers)
{
	const struct core_node		*n;
	struct core_node_progress	 p;

	*stragglers = 0;
	if (!lead_step(j, lead))
		return false;
	TAILQ_FOREACH(n, &j->nodes, entry) {
		core_node_progress(n, *lead, now, &p);
		if (p.straggler)
			(*stragglers)++;
	}
	return true;
}

size_t
core_progress_checkpoint(struct core *c, struct core_now now,
    int64_t (*seen)(const struct core_node *, struct core_now),
    int64_t seen_every_ms)
{
	struct core_job		*j;
	struct core_node	*n;
	size_t			 k = 0;

	core_set_now(c, now);
	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (core_job_ended(j))
			continue;
		TAILQ_FOREACH(n, &j->nodes, entry) {
			int64_t at = seen != NULL ? seen(n, now) :
			    n->last_seen_ms;

			if (at > n->last_seen_ms)
				n->last_seen_ms = at;
			if (!n->step_unsaved && n->last_seen_ms -
			    n->seen_saved_ms < seen_every_ms)
				continue;
			core_node_dirty(n);
			k++;
		}
	}
	return k;
}

void
core_restore_node_progress(struct core_node *n, uint64_t step,
    uint64_t step_gen, int64_t step_wall_ms, int64_t last_seen_ms)
{
	/* A record from before last-seen times were kept: its join, at
	 * least, was seen. */
	if (last_seen_ms == 0)
		last_seen_ms = n->joined_ms;
	n->last_seen_ms = n->seen_saved_ms = last_seen_ms;
	if (step_gen == 0)
		return;
	n->has_step = true;
	n->step = step;
	n->step_gen = step_gen;
	n->step_wall_ms = step_wall_ms;
}

/* After a restore: each job's leading step as far as its nodes' saved
 * steps tell; its rises before the restart are not known, so it counts
 * from |now|. */
void
core_progress_restored(struct core_job *j, struct core_now now)
{
	struct core_node	*n;
	uint64_t		 lead = 0;
	bool			 any = false;

	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (!n->has_step || n->step_gen != j->generation)
			continue;
		if (!any || n->step > lead)
			lead = n->step;
		any = true;
	}
	if (!any)
		return;
	lead_reset(j, j->generation);
	lead_push(j, lead, now.mono_ms);
}
