/*
 * Ending a job, closed or failed: its deadlines stop, its retention starts,
 * its owner counts it ended, and every agent still in it is told. The rules
 * decide when (core_round.c, and an operator's action in core_operator.c).
 */
#include <string.h>

#include "core_int.h"
#include "text.h"

static void
job_end(struct core_job *j, enum core_job_state st, const char *reason)
{
	struct core	*c = j->core;

	j->state = st;
	textcpy(j->reason, sizeof(j->reason), reason);
	j->ended_ms = c->now.wall_ms;
	j->rejoin_lost[0] = '\0';
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	core_timer_set(c, &j->retention, c->now.mono_ms + c->cfg.retention_ms);
	core_job_dirty(j);
	core_owner_job_ended(j);
}

/* Every agent is told; live nodes end with the job. */
void
core_job_fail(struct core_job *j, const char *reason)
{
	struct core_node	*n;
	struct core_msg		 m;

	job_end(j, CORE_JOB_FAILED, reason);
	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (!core_node_live(n) && n->state != CORE_NODE_SUCCEEDED)
			continue;
		if (core_node_live(n))
			core_node_set_state(n, CORE_NODE_FAILED);
		core_msg_init(&m, CORE_MSG_FAILED);
		textcpy(m.reason, sizeof(m.reason), reason);
		core_msg_queue(n, &m);
	}
	core_event_add(j, "failed", "%s", reason);
}

void
core_job_close(struct core_job *j, const char *reason)
{
	struct core_node	*n;
	struct core_msg		 m;

	job_end(j, CORE_JOB_CLOSED, reason);
	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (!core_node_live(n) && n->state != CORE_NODE_SUCCEEDED)
			continue;
		if (core_node_live(n)) {
			core_node_set_state(n, CORE_NODE_LEFT);
			core_node_set_reason(n, "the job closed");
		}
		core_msg_init(&m, CORE_MSG_CLOSED);
		textcpy(m.reason, sizeof(m.reason), reason);
		core_msg_queue(n, &m);
	}
	core_event_add(j, "closed", "%s", reason);
}
