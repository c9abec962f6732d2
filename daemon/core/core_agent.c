/*
 * The agents' inputs after their join: resume, report, leave, and the ends
 * of connections and leases (SPEC §4 rules 5 to 8, 10 and 11). Each one
 * changes the node and lets core_settle() decide what that means for the
 * job.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

#define ANON	"anonymous"

static int
session_node(struct core *c, const char *identity,
    const uint8_t *session_id, const char *what, struct core_node **np,
    char *err, size_t errlen)
{
	struct core_node	*n;

	if ((n = core_node_by_session(c, session_id)) == NULL) {
		textf(err, errlen, "no node has this session (the daemon "
		    "forgot it, or the job was reopened or deleted); join "
		    "again");
		return CORE_NOT_FOUND;
	}
	*np = n;
	return core_owner_check(n->job, identity != NULL ? identity : ANON, what,
	    err, errlen);
}

/*
 * A generation rdzvd never formed: the agent's state cannot be ours. It is
 * refused (rule 10), and since such an agent stops its workers and joins
 * again as a new node (SPEC §6), the old node counts as having left
 * (planned, no restart) instead of being lost later.
 */
static int
resume_refuse_unknown(struct core_node *n, uint64_t generation, char *err,
    size_t errlen)
{
	struct core_job	*j = n->job;
	char		 why[CORE_REASON_MAX];

	textf(err, errlen, "job %s: generation %llu is unknown; the current "
	    "generation is %llu", j->rdzv_id, (unsigned long long)generation,
	    (unsigned long long)j->generation);
	textf(why, sizeof(why), "resumed with generation %llu; the "
	    "current one is %llu", (unsigned long long)generation,
	    (unsigned long long)j->generation);
	core_event_add(j, "left", "node %s (node %llu) %s: it stops its "
	    "workers and joins again", n->hostname,
	    (unsigned long long)n->node_id, why);
	core_node_end(n, CORE_NODE_LEFT, why);
	/* It joins again at once as a new node: not a departure that rule
	 * 13's rejoin_timeout (0 in a fixed allocation) should fail on. */
	j->pend_gone[0] = '\0';
	core_settle(j);
	return CORE_REFUSED;
}

int
core_resume(struct core *c, struct core_now now, const char *identity,
    const char *rdzv_id, const uint8_t session_id[CORE_SESSION_LEN],
    uint64_t generation, struct core_node **nodep, char *err, size_t errlen)
{
	struct core_node	*n;
	struct core_job		*j;
	struct core_msg		 m;
	int			 rc;

	core_set_now(c, now);
	if ((rc = session_node(c, identity, session_id, "resume in", &n, err,
	    errlen)) != 0)
		return rc;
	j = n->job;
	if (rdzv_id != NULL && *rdzv_id != '\0' &&
	    strcmp(rdzv_id, j->rdzv_id) != 0) {
		textf(err, errlen, "job %s has no node with this session; "
		    "join again", rdzv_id);
		return CORE_NOT_FOUND;
	}
	if (!core_job_ended(j) && (n->state == CORE_NODE_LEFT ||
	    n->state == CORE_NODE_LOST)) {
		textf(err, errlen, "job %s: node %llu %s (%s); join again "
		    "as a new node", j->rdzv_id,
		    (unsigned long long)n->node_id,
		    n->state == CORE_NODE_LOST ? "was lost" : "left",
		    n->reason != NULL ? n->reason : "no reason");
		return CORE_REFUSED;
	}
	/*
	 * An older generation is what a node that missed rounds while away
	 * holds: it keeps its place and is told STOP and its current place
	 * below (SPEC §4 rule 4), costing the job no round.
	 */
	if (!core_job_ended(j) && core_node_live(n) &&
	    generation > j->generation)
		return resume_refuse_unknown(n, generation, err, errlen);

	n->connected = true;
	n->last_seen_ms = now.wall_ms;
	core_timer_clear(c, &n->lease);
	core_job_changed(j);
	core_queue_accepted(n, true);
	/* Rule 11: the current generation keeps its workers running. */
	if (core_node_live(n) && !core_job_ended(j) && generation != 0 &&
	    !(n->group_rank >= 0 && n->generation == generation)) {
		core_msg_init(&m, CORE_MSG_STOP);
		m.u.stop.generation = generation;
		textf(m.reason, sizeof(m.reason), "generation %llu no "
		    "longer runs on this node", (unsigned long long)generation);
		core_msg_queue(n, &m);
	}
	core_tell_current(n, true);
	if (j->held_failure)
		core_settle(j);		/* the failure it held counts now */
	if (nodep != NULL)
		*nodep = n;
	return 0;
}

static void
gpus_update(struct core_node *n, const struct core_report *r)
{
	uint32_t	healthy = r->gpus_healthy, total = r->gpus_total;

	if (core_node_set_gpus(n, r->gpus, r->n_gpus)) {
		n->gpus_dirty = true;
		core_node_dirty(n);
	}
	if (n->gpus_healthy == healthy && n->gpus_total == total)
		return;
	n->gpus_healthy = healthy;
	n->gpus_total = total;
	core_node_dirty(n);
	core_event_add(n->job, "health", "node %s (node %llu): %u of %u GPU%s "
	    "healthy", n->hostname, (unsigned long long)n->node_id, healthy,
	    total, plural(total));
}

/* Rule 10: only the current generation's participants report outcomes. */
static int
report_fence(const struct core_node *n, const struct core_report *r,
    char *err, size_t errlen)
{
	const struct core_job	*j = n->job;

	if (core_job_ended(j)) {
		textf(err, errlen, "job %s has %s: %s", j->rdzv_id,
		    core_job_state_name(j->state), j->reason);
		return CORE_REFUSED;
	}
	if (r->generation > j->generation) {
		textf(err, errlen, "job %s: generation %llu has not been "
		    "formed; the current generation is %llu", j->rdzv_id,
		    (unsigned long long)r->generation,
		    (unsigned long long)j->generation);
		return CORE_REFUSED;
	}
	if (r->generation != j->generation || j->state == CORE_JOB_WAITING) {
		textf(err, errlen, "job %s: generation %llu is stale; the "
		    "current generation is %llu%s", j->rdzv_id,
		    (unsigned long long)r->generation,
		    (unsigned long long)j->generation,
		    j->state == CORE_JOB_WAITING ? " and a new round is "
		    "forming" : "");
		return CORE_REFUSED;
	}
	if (n->state != CORE_NODE_PARTICIPANT || n->generation != r->generation) {
		textf(err, errlen, "job %s: node %llu is %s, not a "
		    "participant of generation %llu", j->rdzv_id,
		    (unsigned long long)n->node_id,
		    core_node_state_name(n->state),
		    (unsigned long long)r->generation);
		return CORE_REFUSED;
	}
	return 0;
}

/*
 * The master port of the running round was taken on its host before rank
 * 0's store could bind it (another program listens on it): no worker of
 * that round can start, through nobody's fault. It re-rounds at once with
 * the node's new port, as a planned change: no restart is counted and the
 * job does not fail. Only the round's own master may say so, and only of
 * the generation that runs; anything else is stale and only the new port
 * is kept.
 */
static void
port_taken(struct core_node *n, const struct core_report *r)
{
	struct core_job	*j = n->job;

	if (j->state != CORE_JOB_RUNNING || n->state != CORE_NODE_PARTICIPANT ||
	    n->generation != r->generation || j->generation != r->generation ||
	    j->round_n == 0 || j->round[0] != n || r->master_port == 0 ||
	    r->master_port == j->master_port)
		return;
	core_event_add(j, "master_port", "node %s (node %llu) found master "
	    "port %u of generation %llu taken on its host; a new round on "
	    "port %u, no restart counted", n->hostname,
	    (unsigned long long)n->node_id, j->master_port,
	    (unsigned long long)r->generation, r->master_port);
	if (!j->pend_failure && !j->pend_change)
		textf(j->pend_reason, sizeof(j->pend_reason), "master port %u "
		    "was taken on node %s (node %llu)", j->master_port,
		    n->hostname, (unsigned long long)n->node_id);
	j->pend_change = true;
	core_settle(j);
}

/*
 * The node's workers start as new processes, or all of them reached
 * rdzv.elastic (or the set ended). Only the change counts: a repeated
 * "starting" does not move the start, so a node cannot stretch rule 17's
 * allowance by saying it again. The generation its workers came up in is
 * kept: that round formed while they were starting, and its meeting may
 * have given up on them just before they arrived (the report of it can
 * come after "started"); the next round is their first meeting. In
 * memory only, nothing to save: after a daemon restart the node counts as
 * not starting.
 */
void
core_node_starting(struct core_node *n, bool starting)
{
	uint64_t	now = n->job->core->now.mono_ms;

	if (starting && !n->starting) {
		n->starting_ms = now;
		n->started_gen = 0;
	} else if (!starting && n->starting) {
		n->started_ms = now;
		n->started_gen = n->job->generation;
	}
	n->starting = starting;
}

/*
 * The node's offer changed. A fresh master port is kept for the next
 * round. Fewer workers (a GPU failed its worker's check) change the world
 * of a running job, so it re-rounds at once, as a planned change: every
 * node restarts its workers, no restart is counted.
 */
static void
offer_update(struct core_node *n, const struct core_report *r)
{
	struct core_job	*j = n->job;

	if (r->master_port != 0 && r->master_port != n->port_offer) {
		n->port_offer = r->master_port;
		core_node_dirty(n);
	}
	if (r->cause == CORE_CAUSE_MASTER_PORT)
		port_taken(n, r);
	else if (r->cause == CORE_CAUSE_STARTING ||
	    r->cause == CORE_CAUSE_STARTED)
		core_node_starting(n, r->cause == CORE_CAUSE_STARTING);
	if (r->nproc == 0 || r->nproc == n->nproc)
		return;
	/* A round that cannot be re-formed keeps the nproc it was made with
	 * (its ranks are prefix sums of them). */
	if (n->state == CORE_NODE_PARTICIPANT && j->state != CORE_JOB_RUNNING &&
	    j->state != CORE_JOB_WAITING)
		return;
	core_event_add(j, "nproc", "node %s (node %llu) now runs %u worker%s "
	    "(was %u)", n->hostname, (unsigned long long)n->node_id, r->nproc,
	    plural(r->nproc), n->nproc);
	n->nproc = r->nproc;
	core_node_dirty(n);
	if (n->state != CORE_NODE_PARTICIPANT || j->state != CORE_JOB_RUNNING)
		return;
	if (!j->pend_failure && !j->pend_change)
		textf(j->pend_reason, sizeof(j->pend_reason), "node %s "
		    "(node %llu) now runs %u worker%s", n->hostname,
		    (unsigned long long)n->node_id, n->nproc,
		    plural(n->nproc));
	j->pend_change = true;
	core_settle(j);
}

/*
 * Rule 14: a loss that is certain ends the node at once. When |by|
 * reports a failure of the running generation, the collectives of its
 * workers broke; a member of that round whose connection has closed is
 * the reason, not a network blip, so it is lost now instead of at the end
 * of its reconnect grace, and the failure and the loss count once (rule
 * 5). A member away for another reason (the lease a daemon restart gave
 * it) is still waited for: the failure is held (core_settle). A blip
 * that comes back later resumes a lost node and is refused (rule 10): its
 * agent joins again as a new node.
 */
static void
lose_closed_members(struct core_node *by, uint64_t generation)
{
	struct core_job		*j = by->job;
	struct core_node	*m;
	char			 why[CORE_REASON_MAX];
	uint32_t		 i;

	if (j->state != CORE_JOB_RUNNING)
		return;
	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m == by || m->state != CORE_NODE_PARTICIPANT ||
		    m->connected || !m->lease_grace ||
		    !core_timer_armed(&m->lease))
			continue;
		core_timer_clear(j->core, &m->lease);
		textf(why, sizeof(why), "its connection closed and node "
		    "%.*s (node %llu) reported a failure of generation %llu",
		    (int)utf8_prefix(by->hostname, 64), by->hostname,
		    (unsigned long long)by->node_id,
		    (unsigned long long)generation);
		core_event_add(j, "lost", "node %s (node %llu) was lost: %s",
		    m->hostname, (unsigned long long)m->node_id, why);
		core_node_end(m, CORE_NODE_LOST, why);
		j->cause_gen = generation;
	}
}

/* A report's fields the core cannot take, named; 0 when it can. */
static int
report_check(const struct core_job *j, const struct core_report *r,
    char *err, size_t errlen)
{
	if (r->outcome != CORE_OUTCOME_SUCCEEDED &&
	    r->outcome != CORE_OUTCOME_FAILED &&
	    r->outcome != CORE_OUTCOME_UPDATE) {
		textf(err, errlen, "job %s: unknown outcome %d", j->rdzv_id,
		    (int)r->outcome);
		return CORE_INVALID;
	}
	if (r->outcome == CORE_OUTCOME_UPDATE && r->master_port > 65535) {
		textf(err, errlen, "job %s: master_port %u is not a TCP port "
		    "(1 to 65535)", j->rdzv_id, r->master_port);
		return CORE_INVALID;
	}
	if (r->outcome == CORE_OUTCOME_UPDATE && r->nproc > CORE_NPROC_MAX) {
		textf(err, errlen, "job %s: nproc must be 1 to %d, not %u",
		    j->rdzv_id, CORE_NPROC_MAX, r->nproc);
		return CORE_INVALID;
	}
	return 0;
}

/* Rule 7: a node's workers all exited 0, and the first success starts
 * closing. */
static void
report_succeeded(struct core_node *n, const struct core_report *r)
{
	struct core_job	*j = n->job;

	core_node_set_state(n, CORE_NODE_SUCCEEDED);
	core_event_add(j, "succeeded", "node %s (node %llu): every worker of "
	    "generation %llu exited 0", n->hostname,
	    (unsigned long long)n->node_id, (unsigned long long)r->generation);
	if (j->state == CORE_JOB_RUNNING) {
		j->state = CORE_JOB_CLOSING;
		textf(j->reason, sizeof(j->reason), "node %s (node %llu) "
		    "succeeded; no new rounds", n->hostname,
		    (unsigned long long)n->node_id);
		core_timer_clear(j->core, &j->last_call);
		core_event_add(j, "closing", "%s", j->reason);
	}
}

/*
 * Rule 6; or, while closing, rule 7's failure. A hang counts as any
 * failure; only its words and event kind differ. When the report names the
 * failure's culprits (rule 17), their loss is the failure, not the report.
 */
static void
report_failed(struct core_node *n, struct core_now now,
    const struct core_report *r)
{
	struct core_job	*j = n->job;
	bool		 hang = r->cause == CORE_CAUSE_HANG ||
			    r->cause == CORE_CAUSE_STUCK;
	char		 what[CORE_REASON_MAX];

	textf(what, sizeof(what), "node %s (node %llu) %s in generation "
	    "%llu%s%s", n->hostname, (unsigned long long)n->node_id,
	    hang ? "hung" : "reported a worker failure",
	    (unsigned long long)r->generation,
	    r->message != NULL && *r->message != '\0' ? ": " : "",
	    r->message != NULL ? r->message : "");
	core_event_add(j, hang ? "hang" : "failure", "%s", what);
	n->reported_killed = false;
	for (uint32_t i = 0; i < r->n_exits; i++)
		if (r->exits[i].signal == SIGKILL)
			n->reported_killed = true;
	if (core_culprits(n, r) == 0) {
		if (!j->pend_failure)
			textcpy(j->pend_reason, sizeof(j->pend_reason), what);
		j->pend_plain = (!j->pend_failure || j->pend_plain) && !hang &&
		    !n->reported_killed;
		j->pend_failure = true;
	}
	n->reported_gen = j->failed_gen = r->generation;
	j->failed_mono_ms = now.mono_ms;
	lose_closed_members(n, r->generation);
}

int
core_report(struct core *c, struct core_now now, const char *identity,
    const struct core_report *r, uint32_t *restart_count, char *err,
    size_t errlen)
{
	struct core_node	*n;
	struct core_job		*j;
	int			 rc;

	core_set_now(c, now);
	if ((rc = session_node(c, identity, r->session_id, "report to", &n,
	    err, errlen)) != 0)
		return rc;
	j = n->job;
	if ((rc = report_check(j, r, err, errlen)) != 0)
		return rc;
	if (r->has_gpus)
		gpus_update(n, r);
	if (restart_count != NULL)
		*restart_count = j->restart_count;
	if (r->outcome == CORE_OUTCOME_UPDATE) {
		offer_update(n, r);
		core_report_host(n, r);
		return 0;
	}
	if (r->outcome == CORE_OUTCOME_SUCCEEDED &&
	    n->state == CORE_NODE_SUCCEEDED && n->generation == r->generation)
		return 0;
	if ((rc = report_fence(n, r, err, errlen)) != 0)
		return rc;
	if (r->outcome == CORE_OUTCOME_SUCCEEDED)
		report_succeeded(n, r);
	else
		report_failed(n, now, r);
	/* Before the round is settled, so that a host quarantined by this
	 * report is left out of the next one. */
	core_report_host(n, r);
	core_settle(j);
	if (restart_count != NULL)
		*restart_count = j->restart_count;
	return 0;
}

int
core_leave(struct core *c, struct core_now now, const char *identity,
    const uint8_t session_id[CORE_SESSION_LEN], const char *reason,
    char *err, size_t errlen)
{
	struct core_node	*n;
	struct core_msg		 m;
	int			 rc;

	core_set_now(c, now);
	if ((rc = session_node(c, identity, session_id, "leave", &n, err,
	    errlen)) != 0)
		return rc;
	if (!core_node_live(n) || core_job_ended(n->job))
		return 0;
	if (reason == NULL || *reason == '\0')
		reason = "planned leave";
	core_event_add(n->job, "left", "node %s (node %llu) left: %s",
	    n->hostname, (unsigned long long)n->node_id, reason);
	/* Its Join stream ends too, once the leave is committed. */
	core_msg_init(&m, CORE_MSG_LEFT);
	core_msg_queue(n, &m);
	core_node_end(n, CORE_NODE_LEFT, reason);
	core_settle(n->job);
	return 0;
}

/*
 * Rule 14 in the other order: a report of a failure of generation g came
 * first and formed g + 1 with every member, then a member's connection
 * closed. The round it holds will not start without it (its peers wait
 * for it at the round's meeting), so within reconnect_grace of that
 * report it is lost at once. A member that did not report the failure
 * itself, while no cause of it was found yet, is most likely the one whose
 * death broke g's collectives: the failure counted already, and this is a
 * change (a round without it), not a second restart. A member that did
 * report it, or any member once the cause was found (lost with the
 * report), died after the first fault, during the recovery (SPEC §4 rule
 * 15's second failure): a fault of its own, counted once more. But a
 * member whose report was of its own worker killed (SIGKILL: the node was
 * killed, its agent a moment later) is the same death, not a second one.
 */
static void
lose_after_failure(struct core_node *n)
{
	struct core_job	*j = n->job;
	char		 why[CORE_REASON_MAX];
	bool		 reporter = n->reported_gen == j->failed_gen;
	bool		 second = (reporter && !n->reported_killed) ||
	    (!reporter && j->cause_gen == j->failed_gen);

	if (j->state != CORE_JOB_RUNNING || n->state != CORE_NODE_PARTICIPANT ||
	    j->failed_gen == 0 || j->generation != j->failed_gen + 1 ||
	    n->generation != j->generation ||
	    j->core->now.mono_ms > j->failed_mono_ms +
	    j->settings.reconnect_grace_ms)
		return;
	core_timer_clear(j->core, &n->lease);
	if (reporter && n->reported_killed)
		textf(why, sizeof(why), "its connection closed just after it "
		    "reported its own worker killed in generation %llu (the "
		    "same death)", (unsigned long long)j->failed_gen);
	else
		textf(why, sizeof(why), "its connection closed just after %s "
		    "failure of generation %llu%s", reporter ? "its own report "
		    "of a" : "a", (unsigned long long)j->failed_gen, second ?
		    " (a second fault, during the recovery)" : reporter ? "" :
		    " was reported");
	core_event_add(j, "lost", "node %s (node %llu) was lost: %s",
	    n->hostname, (unsigned long long)n->node_id, why);
	core_node_end(n, CORE_NODE_LOST, why);
	if (!second) {
		j->pend_failure = j->pend_loss = false;
		j->pend_change = true;
	}
	core_settle(j);
}

void
core_disconnect(struct core *c, struct core_now now, struct core_node *n)
{
	core_set_now(c, now);
	if (n == NULL || n->removed || !n->connected)
		return;
	n->connected = false;
	n->last_seen_ms = now.wall_ms;
	core_msg_drop(c, n);
	core_job_changed(n->job);
	if (core_node_live(n) && !core_job_ended(n->job)) {
		core_timer_set(c, &n->lease, now.mono_ms +
		    n->job->settings.reconnect_grace_ms);
		n->lease_grace = true;
		lose_after_failure(n);
	}
}

/*
 * Ends |n|'s lease for *|silent_ms| of silence (NULL: unknown); true when
 * its job must settle. A participant silent since before the current
 * round formed after a failure (its peers' collective broke on it first,
 * or it went in the same switch event as a node lost a sweep earlier) was
 * part of that failure: its loss re-rounds but is not counted again (SPEC
 * §4 rule 13).
 */
static bool
lease_lost_one(struct core_node *n, const uint64_t *silent_ms)
{
	struct core_job	*j;
	char		 t[32], why[CORE_REASON_MAX];
	bool		 counted, was_pending;
	uint64_t	 now;

	if (n == NULL || n->removed)
		return false;
	j = n->job;
	n->connected = false;
	core_msg_drop(j->core, n);
	if (!core_node_live(n) || core_job_ended(j))
		return false;
	now = j->core->now.mono_ms;
	counted = silent_ms != NULL && n->state == CORE_NODE_PARTICIPANT &&
	    j->state == CORE_JOB_RUNNING && j->failure_round_ms != 0 &&
	    *silent_ms <= now && now - *silent_ms <= j->failure_round_ms;
	core_fmt_secs(t, sizeof(t), j->settings.lease_ttl_ms);
	textf(why, sizeof(why), "its connection was silent for its whole "
	    "lease, lease_ttl %s%s", t, counted ? ", since before the failure "
	    "that formed this round" : "");
	core_event_add(j, "lost", "node %s (node %llu) was lost: %s",
	    n->hostname, (unsigned long long)n->node_id, why);
	was_pending = j->pend_failure;
	core_node_end(n, CORE_NODE_LOST, why);
	if (counted && !was_pending) {
		j->pend_failure = false;
		j->pend_change = true;
	}
	return true;
}

/*
 * Leases that end in one sweep are one event for each job (SPEC §4 rule
 * 13): every node ends first, then each touched job settles once, so a
 * switch that takes two nodes costs one restart and one round without
 * either of them.
 */
void
core_leases_lost(struct core *c, struct core_now now,
    struct core_node *const *nodes, const uint64_t *silent_ms, size_t n)
{
	core_set_now(c, now);
	for (size_t i = 0; i < n; i++) {
		if (nodes[i] == NULL)
			continue;
		if (lease_lost_one(nodes[i], silent_ms != NULL ? &silent_ms[i] :
		    NULL))
			core_settle_later(nodes[i]->job);
	}
	core_settle_due(c);
}

void
core_lease_lost(struct core *c, struct core_now now, struct core_node *n)
{
	core_leases_lost(c, now, &n, NULL, 1);
}

/*
 * A lease timer fired: the node did not come back in time. The reason says
 * which limit ran out: the reconnect grace after its connection closed, or
 * the lease that a daemon restart gave it.
 */
void
core_lease_expired(struct core_node *n)
{
	char	t[32], why[CORE_REASON_MAX];

	if (!core_node_live(n) || core_job_ended(n->job))
		return;
	if (n->lease_grace) {
		core_fmt_secs(t, sizeof(t),
		    n->job->settings.reconnect_grace_ms);
		textf(why, sizeof(why), "its connection closed and it did "
		    "not reconnect within reconnect_grace %s", t);
	} else {
		core_fmt_secs(t, sizeof(t), n->job->settings.lease_ttl_ms);
		textf(why, sizeof(why), "it did not reconnect within "
		    "lease_ttl %s after rdzvd restarted or failed over", t);
	}
	core_event_add(n->job, "lost", "node %s (node %llu) was lost: %s",
	    n->hostname, (unsigned long long)n->node_id, why);
	core_node_end(n, CORE_NODE_LOST, why);
	core_settle_later(n->job);
}
