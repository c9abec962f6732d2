/*
 * Operator actions (SPEC §4 rule 9, §11): close, abort, evict, each
 * checked against the caller's identity.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

/* The owner of a job, or an admin, may act on it (SPEC §11). */
static int
operator_job(struct core *c, const char *identity, bool is_admin,
    const char *rdzv_id, const char *verb, struct core_job **jp, char *err,
    size_t errlen)
{
	struct core_job	*j;

	if (identity == NULL)
		identity = "anonymous";
	if ((j = core_job_find(c, rdzv_id)) == NULL) {
		textf(err, errlen, "job %s not found", rdzv_id != NULL ?
		    rdzv_id : "");
		return CORE_NOT_FOUND;
	}
	if (!is_admin && strcmp(j->owner, identity) != 0) {
		textf(err, errlen, "job %s belongs to %s; %s may not %s it "
		    "(only its owner or an admin may)", j->rdzv_id, j->owner,
		    identity, verb);
		return CORE_DENIED;
	}
	*jp = j;
	return 0;
}

/* No new rounds; running workers finish (rule 9, then rule 7). */
int
core_close(struct core *c, struct core_now now, const char *identity,
    bool is_admin, const char *rdzv_id, char *err, size_t errlen)
{
	struct core_job	*j;
	char		 why[CORE_REASON_MAX];
	int		 rc;

	core_set_now(c, now);
	if ((rc = operator_job(c, identity, is_admin, rdzv_id, "close", &j,
	    err, errlen)) != 0)
		return rc;
	if (identity == NULL)
		identity = "anonymous";
	switch (j->state) {
	case CORE_JOB_CLOSED:
	case CORE_JOB_CLOSING:
		return 0;
	case CORE_JOB_FAILED:
		textf(err, errlen, "job %s already failed: %s", j->rdzv_id,
		    j->reason);
		return CORE_REFUSED;
	case CORE_JOB_WAITING:
		/* No workers run while a round is open: close at once. */
		textf(why, sizeof(why), "closed by %s before round %llu "
		    "completed", identity, (unsigned long long)j->generation +
		    1);
		core_job_close(j, why);
		return 0;
	case CORE_JOB_RUNNING:
		j->state = CORE_JOB_CLOSING;
		textf(j->reason, sizeof(j->reason), "closed by %s: no new "
		    "rounds; running workers finish", identity);
		core_timer_clear(c, &j->last_call);
		core_event_add(j, "closing", "%s", j->reason);
		core_settle(j);
		return 0;
	}
	return 0;
}

int
core_abort(struct core *c, struct core_now now, const char *identity,
    bool is_admin, const char *rdzv_id, const char *reason, char *err,
    size_t errlen)
{
	struct core_job	*j;
	char		 why[CORE_REASON_MAX];
	int		 rc;

	core_set_now(c, now);
	if ((rc = operator_job(c, identity, is_admin, rdzv_id, "abort", &j,
	    err, errlen)) != 0)
		return rc;
	if (core_job_ended(j)) {
		textf(err, errlen, "job %s already %s: %s", j->rdzv_id,
		    core_job_state_name(j->state), j->reason);
		return CORE_REFUSED;
	}
	textf(why, sizeof(why), "aborted by %s: %s",
	    identity != NULL ? identity : "anonymous",
	    reason != NULL && *reason != '\0' ? reason : "no reason given");
	core_job_fail(j, why);
	return 0;
}

int
core_evict(struct core *c, struct core_now now, const char *identity,
    bool is_admin, const char *rdzv_id, uint64_t node_id, const char *reason,
    char *err, size_t errlen)
{
	struct core_job		*j;
	struct core_node	*n;
	struct core_msg		 m;
	char			 why[CORE_REASON_MAX];
	int			 rc;

	core_set_now(c, now);
	if ((rc = operator_job(c, identity, is_admin, rdzv_id, "evict from",
	    &j, err, errlen)) != 0)
		return rc;
	if ((n = core_node_find(c, node_id)) == NULL || n->job != j) {
		textf(err, errlen, "job %s has no node %llu", j->rdzv_id,
		    (unsigned long long)node_id);
		return CORE_NOT_FOUND;
	}
	if (core_job_ended(j) || !core_node_live(n)) {
		textf(err, errlen, "job %s: node %llu is already %s",
		    j->rdzv_id, (unsigned long long)node_id,
		    core_job_ended(j) ? core_job_state_name(j->state) :
		    core_node_state_name(n->state));
		return CORE_REFUSED;
	}
	textf(why, sizeof(why), "evicted by %s: %s",
	    identity != NULL ? identity : "anonymous",
	    reason != NULL && *reason != '\0' ? reason : "no reason given");
	core_msg_init(&m, CORE_MSG_EVICTED);
	textcpy(m.reason, sizeof(m.reason), why);
	core_msg_queue(n, &m);
	core_event_add(j, "evicted", "node %s (node %llu) %s", n->hostname,
	    (unsigned long long)n->node_id, why);
	core_node_end(n, CORE_NODE_EVICTED, why);
	core_settle(j);
	return 0;
}
