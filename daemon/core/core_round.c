/*
 * Rounds: applying SPEC §4 to a job after an input (core_settle), forming
 * and ranking rounds (core_end.c ends jobs). Forming a round is one pass
 * over the job's nodes and one sort; everything else here is O(1) per
 * input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

/*
 * Ends a node's part in its job (left, lost, evicted) and notes for
 * core_settle() what that means for the job's round. Whatever the way it
 * went, a participant that goes is a departure for rule 13: a round left
 * short of min_nodes waits rejoin_timeout for a replacement, or with 0
 * fails now, naming the node and how it went.
 */
void
core_node_end(struct core_node *n, enum core_node_state st,
    const char *reason)
{
	struct core_job	*j = n->job;
	bool		 was_participant = n->state == CORE_NODE_PARTICIPANT;
	char		 gone[CORE_REASON_MAX];

	if (reason == NULL)
		reason = "no reason given";
	core_node_set_state(n, st);
	core_node_set_reason(n, reason);
	if (!was_participant || (j->state != CORE_JOB_RUNNING &&
	    j->state != CORE_JOB_CLOSING && j->state != CORE_JOB_WAITING))
		return;
	textf(gone, sizeof(gone), "node %.*s (node %llu) %s (%.*s)",
	    (int)utf8_prefix(n->hostname, 64), n->hostname,
	    (unsigned long long)n->node_id, st == CORE_NODE_LOST ?
	    "was lost" : st == CORE_NODE_EVICTED ? "was evicted" : "left",
	    (int)utf8_prefix(reason, 140), reason);
	if (j->state != CORE_JOB_CLOSING && j->pend_gone[0] == '\0')
		memcpy(j->pend_gone, gone, sizeof(gone));
	if (st == CORE_NODE_LOST) {
		/* A loss names the failure, even after a report. */
		if (!j->pend_loss)
			memcpy(j->pend_reason, gone, sizeof(gone));
		/* In an open round a loss fails nothing; it only starts the
		 * wait for a replacement (rule 13). */
		j->pend_loss = true;
		if (j->state != CORE_JOB_WAITING)
			j->pend_failure = true;
	} else if (j->state == CORE_JOB_RUNNING) {
		if (!j->pend_failure && !j->pend_change)
			memcpy(j->pend_reason, gone, sizeof(gone));
		j->pend_change = true;
	}
}

/*
 * Rule 2's order: rank hint ascending (nodes without one last), hostname,
 * join time, then arrival and node id so that the order is total.
 */
static int
rank_cmp(const void *a, const void *b)
{
	const struct core_node	*x = *(struct core_node *const *)a;
	const struct core_node	*y = *(struct core_node *const *)b;
	int			 r;

	if (x->has_rank_hint != y->has_rank_hint)
		return x->has_rank_hint ? -1 : 1;
	if (x->has_rank_hint && x->rank_hint != y->rank_hint)
		return x->rank_hint < y->rank_hint ? -1 : 1;
	if ((r = strcmp(x->hostname, y->hostname)) != 0)
		return r;
	if (x->joined_ms != y->joined_ms)
		return x->joined_ms < y->joined_ms ? -1 : 1;
	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	if (x->node_id != y->node_id)
		return x->node_id < y->node_id ? -1 : 1;
	return 0;
}

/* The round in effect ends: its members hold no assignment any more. */
void
core_round_clear(struct core_job *j)
{
	struct core_node	*n;
	uint32_t		 i;

	core_repeat_round_cleared(j);
	for (i = 0; i < j->round_n; i++) {
		n = j->round[i];
		n->prev_rank = n->group_rank;
		n->group_rank = -1;
		n->base_rank = 0;
		n->generation = 0;
		core_node_dirty(n);
	}
	j->round_n = 0;
	j->world_size = 0;
	j->master_addr[0] = '\0';
	j->master_port = 0;
}

static void
round_reserve(struct core_job *j, uint32_t n)
{
	if (n <= j->round_cap)
		return;
	free(j->round);
	j->round_cap = n < 16 ? 16 : n;
	j->round = xcalloc(j->round_cap, sizeof(*j->round));
}

/*
 * Rule 4's members, into j->round (as scratch): the live participants,
 * then waiting nodes, then spares, in arrival order, up to max_nodes. They
 * all become participants; waiting nodes left over become spares.
 */
static uint32_t
round_collect(struct core_job *j)
{
	static const enum core_node_state order[] = {
		CORE_NODE_PARTICIPANT, CORE_NODE_WAITING, CORE_NODE_SPARE,
	};
	struct core_node	*n;
	uint32_t		 k = 0, max = j->settings.max_nodes, live;
	size_t			 i;

	live = j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE];
	round_reserve(j, live < max ? live : max);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		TAILQ_FOREACH(n, &j->nodes, entry) {
			if (n->state != order[i])
				continue;
			if (k < max)
				j->round[k++] = n;
			else if (n->state != CORE_NODE_SPARE)
				core_node_set_state(n, CORE_NODE_SPARE);
		}
	}
	for (i = 0; i < k; i++)
		core_node_set_state(j->round[i], CORE_NODE_PARTICIPANT);
	return k;
}

static void
fill_assignment(const struct core_node *n, struct core_assignment *a)
{
	const struct core_job	*j = n->job;

	memset(a, 0, sizeof(*a));
	a->generation = n->generation;
	a->group_rank = (uint32_t)n->group_rank;
	a->group_world_size = j->round_n;
	a->base_rank = n->base_rank;
	a->local_world_size = n->nproc;
	a->world_size = j->world_size;
	textcpy(a->master_addr, sizeof(a->master_addr), j->master_addr);
	a->master_port = j->master_port;
	a->restart_count = j->restart_count;
	a->max_restarts = j->settings.max_restarts;
}

/* The round j just formed, for the store's history. */
static void
round_record(struct core_job *j)
{
	struct core		*c = j->core;
	struct core_round	*r;
	uint32_t		 i;

	if (c->n_new_rounds == c->new_rounds_cap) {
		c->new_rounds_cap = c->new_rounds_cap == 0 ? 16 :
		    c->new_rounds_cap * 2;
		c->new_rounds = xreallocarray(c->new_rounds,
		    c->new_rounds_cap, sizeof(*c->new_rounds));
	}
	r = &c->new_rounds[c->n_new_rounds++];
	r->job = j;
	r->generation = j->generation;
	r->world_size = j->world_size;
	textcpy(r->master_addr, sizeof(r->master_addr), j->master_addr);
	r->master_port = j->master_port;
	r->restart_count = j->restart_count;
	r->n = j->round_n;
	r->members = xcalloc(r->n, sizeof(*r->members));
	for (i = 0; i < r->n; i++) {
		r->members[i].node_id = j->round[i]->node_id;
		r->members[i].group_rank = i;
		r->members[i].base_rank = j->round[i]->base_rank;
		r->members[i].nproc = j->round[i]->nproc;
	}
}

void
core_rounds_clear(struct core *c)
{
	size_t	i;

	for (i = 0; i < c->n_new_rounds; i++)
		free(c->new_rounds[i].members);
	c->n_new_rounds = 0;
}

/*
 * Rule 16: with rank policy stable, a member that held group rank r < k in
 * the last round keeps it; the others (new members, and those whose rank
 * is past the smaller world) take the free places in rule 2's order, so a
 * spare takes exactly the place of the node it replaces and only what
 * must move moves. An event says who took whose place.
 */
static void
round_stable(struct core_job *j, uint32_t k)
{
	struct core_node	**slot, **gone, *n;
	char			 moved[CORE_REASON_MAX] = "";
	uint32_t		 i, f = 0, kept = 0, told = 0;
	size_t			 len = 0;

	slot = xcalloc(k, sizeof(*slot));
	gone = xcalloc(k, sizeof(*gone));
	TAILQ_FOREACH(n, &j->nodes, entry)
		if (!core_node_live(n) && n->prev_rank >= 0 &&
		    (uint32_t)n->prev_rank < k)
			gone[n->prev_rank] = n;
	for (i = 0; i < k; i++) {
		n = j->round[i];
		if (n->prev_rank >= 0 && (uint32_t)n->prev_rank < k &&
		    slot[n->prev_rank] == NULL) {
			slot[n->prev_rank] = n;
			kept++;
		}
	}
	for (i = 0; i < k; i++) {
		n = j->round[i];
		if (n->prev_rank >= 0 && (uint32_t)n->prev_rank < k &&
		    slot[n->prev_rank] == n)
			continue;
		while (slot[f] != NULL)
			f++;
		slot[f] = n;
		if (told++ < 3 && len < sizeof(moved)) {
			len += (size_t)textf(moved + len, sizeof(moved) - len,
			    "; node %.*s (node %llu) takes group rank %u%s%.*s"
			    "%s", (int)utf8_prefix(n->hostname, 32), n->hostname,
			    (unsigned long long)n->node_id, f,
			    gone[f] != NULL ? " of node " : "",
			    gone[f] != NULL ? (int)utf8_prefix(gone[f]->hostname,
			    32) : 0, gone[f] != NULL ? gone[f]->hostname : "",
			    gone[f] != NULL ? " (gone)" : "");
		}
	}
	memcpy(j->round, slot, k * sizeof(*slot));
	free(slot);
	free(gone);
	if (kept > 0)
		core_event_add(j, "ranks", "rank policy stable: %u of %u "
		    "node%s keep%s their ranks%s", kept, k, plural(k),
		    kept == 1 ? "s" : "", moved);
}

/* Rule 2: the k members in j->round become generation + 1. */
static void
round_complete(struct core_job *j, uint32_t k)
{
	struct core		*c = j->core;
	struct core_node	*n;
	struct core_msg		 m;
	uint32_t		 i, base = 0;

	j->generation++;
	qsort(j->round, k, sizeof(*j->round), rank_cmp);
	if (j->settings.rank_policy == CORE_RANK_STABLE)
		round_stable(j, k);
	for (i = 0; i < k; i++) {
		n = j->round[i];
		core_node_set_state(n, CORE_NODE_PARTICIPANT);
		n->group_rank = (int32_t)i;
		n->base_rank = base;
		n->generation = j->generation;
		base += n->nproc;
		if (n->port_offer != 0) {
			/* The fresh port it offered since its last round. */
			n->master_port = n->port_offer;
			n->port_offer = 0;
		}
		core_node_dirty(n);
	}
	j->round_n = k;
	j->world_size = base;
	textcpy(j->master_addr, sizeof(j->master_addr),
	    j->round[0]->advertise_addr);
	j->master_port = j->round[0]->master_port;
	j->state = CORE_JOB_RUNNING;
	j->reason[0] = '\0';
	j->rejoin_lost[0] = '\0';
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	core_event_add(j, "round", "generation %llu: %u node%s, world size "
	    "%u, master %s:%u, restart %u of max %u",
	    (unsigned long long)j->generation, k, plural(k), base,
	    j->master_addr, j->master_port, j->restart_count,
	    j->settings.max_restarts);
	for (i = 0; i < k; i++) {
		n = j->round[i];
		if (!n->connected)
			continue;
		core_msg_init(&m, CORE_MSG_ASSIGNMENT);
		fill_assignment(n, &m.u.assignment);
		core_msg_queue(n, &m);
	}
	round_record(j);
}

static void	fail_rejoin_now(struct core_job *, const char *, uint32_t);

static void
fail_join_timeout(struct core_job *j)
{
	char	t[32], why[CORE_REASON_MAX];

	if (j->rejoin_lost[0] != '\0' && j->settings.rejoin_timeout_ms == 0) {
		/* The settle time after a leave has passed (rejoin_arm). */
		fail_rejoin_now(j, j->rejoin_lost,
		    j->n_state[CORE_NODE_PARTICIPANT]);
		return;
	}
	if (j->rejoin_lost[0] != '\0') {
		/* Rule 13: name the node that was not replaced. */
		core_fmt_secs(t, sizeof(t), j->settings.rejoin_timeout_ms);
		textf(why, sizeof(why), "rejoin timeout: %s, and no node "
		    "replaced it within %s (%u of min %u node%s)",
		    j->rejoin_lost, t, j->n_state[CORE_NODE_PARTICIPANT],
		    j->settings.min_nodes, plural(j->settings.min_nodes));
	} else {
		core_fmt_secs(t, sizeof(t), j->settings.join_timeout_ms);
		textf(why, sizeof(why), "join timeout: %u of %u required "
		    "nodes joined within %s",
		    j->n_state[CORE_NODE_PARTICIPANT], j->settings.min_nodes, t);
	}
	core_job_fail(j, why);
}

/*
 * Rule 13: k of min_nodes remain after the departure in |lost| (a node
 * lost, left or evicted), and with rejoin_timeout 0 no replacement can
 * come (a fixed allocation), so the job fails now, naming the node and how
 * it went, instead of idling the survivors.
 */
static void
fail_rejoin_now(struct core_job *j, const char *lost, uint32_t k)
{
	char	why[CORE_REASON_MAX];

	textf(why, sizeof(why), "%.*s; %u of min %u node%s remain and "
	    "rejoin_timeout is 0, so no node can replace it",
	    (int)utf8_prefix(lost, 180), lost, k, j->settings.min_nodes,
	    plural(j->settings.min_nodes));
	core_job_fail(j, why);
}

/*
 * Rule 13 for a round short of nodes after the departure in |lost|: wait
 * rejoin_timeout for a replacement, or less if a deadline that comes
 * sooner is armed already. With rejoin_timeout 0 a loss fails now, and a
 * leave or an eviction after CORE_LEAVE_SETTLE_MS unless every node goes
 * meanwhile (scancel). |loss|: the departure is a lost node.
 */
static void
rejoin_arm(struct core_job *j, const char *lost, bool loss)
{
	struct core	*c = j->core;
	uint64_t	 at = c->now.mono_ms + j->settings.rejoin_timeout_ms;

	if (j->settings.rejoin_timeout_ms == 0 && loss) {
		fail_rejoin_now(j, lost, j->n_state[CORE_NODE_PARTICIPANT]);
		return;
	}
	if (j->settings.rejoin_timeout_ms == 0)
		at = c->now.mono_ms + CORE_LEAVE_SETTLE_MS;
	if (j->rejoin_lost[0] == '\0')
		textcpy(j->rejoin_lost, sizeof(j->rejoin_lost), lost);
	if (!core_timer_armed(&j->join_deadline) || j->join_deadline.at > at)
		core_timer_set(c, &j->join_deadline, at);
	core_job_dirty(j);
}

/*
 * Rule 1 for an open round. |lost| names a participant that went in this
 * input, and how (rule 13), or is NULL; |loss|: it was lost.
 */
static void
round_open_settle(struct core_job *j, bool lc_due, bool join_due,
    const char *lost, bool loss)
{
	struct core	*c = j->core;
	uint32_t	 p = j->n_state[CORE_NODE_PARTICIPANT];

	if (p >= j->settings.max_nodes || (p >= j->settings.min_nodes &&
	    lc_due)) {
		round_complete(j, round_collect(j));
		return;
	}
	if (p >= j->settings.min_nodes) {
		/* Later joins do not push the last call back. */
		if (core_timer_armed(&j->last_call) &&
		    !core_timer_armed(&j->join_deadline))
			return;
		core_timer_clear(c, &j->join_deadline);
		j->rejoin_lost[0] = '\0';
		if (!core_timer_armed(&j->last_call))
			core_timer_set(c, &j->last_call, c->now.mono_ms +
			    j->settings.last_call_timeout_ms);
		core_job_dirty(j);
		return;
	}
	if (core_timer_armed(&j->last_call) || lc_due) {
		core_timer_clear(c, &j->last_call);
		core_job_dirty(j);
	}
	if (join_due)
		fail_join_timeout(j);
	else if (lost != NULL)
		rejoin_arm(j, lost, loss);
	else if (!core_timer_armed(&j->join_deadline)) {
		core_timer_set(c, &j->join_deadline, c->now.mono_ms +
		    j->settings.join_timeout_ms);
		core_job_dirty(j);
	}
}

/*
 * A leave or an eviction with rejoin_timeout 0 (a fixed allocation) fails
 * the job after CORE_LEAVE_SETTLE_MS (rejoin_arm): the job's reason and
 * what its waiting nodes are told say so, rather than "waiting for 1
 * more". |fails| gets the nodes' words, or "" when this is no such case.
 */
static void
settle_ahead(struct core_job *j, const char *gone, bool loss, uint32_t k,
    char fails[CORE_REASON_MAX])
{
	char	t[32];
	size_t	n;

	fails[0] = '\0';
	if (gone == NULL || loss || j->settings.rejoin_timeout_ms != 0)
		return;
	core_fmt_secs(t, sizeof(t), CORE_LEAVE_SETTLE_MS);
	n = strlen(j->reason);
	textf(j->reason + n, sizeof(j->reason) - n, "; the job fails in %s "
	    "unless a node joins: rejoin_timeout is 0", t);
	textf(fails, CORE_REASON_MAX, "round %llu: %u of min %u node%s; the "
	    "job fails in %s: %.*s and rejoin_timeout is 0, so no node can "
	    "replace it", (unsigned long long)j->generation + 1, k,
	    j->settings.min_nodes, plural(j->settings.min_nodes), t,
	    (int)utf8_prefix(gone, 200), gone);
}

/*
 * Rules 4 and 5: a new round from whoever is there. With enough nodes it
 * completes at once (a higher generation, no rejoin); else the round stays
 * open and the members of the stopped round are told to stop and wait, or,
 * after a loss no node may replace (rule 13), the job fails. |gone|: the
 * participant that went in this input and how, or NULL (a failure or a
 * change that took nobody away); |loss|: it was lost.
 */
static void
reround(struct core_job *j, const char *why, const char *gone, bool loss)
{
	struct core		*c = j->core;
	struct core_node	*n;
	struct core_msg		 m;
	uint32_t		 live, k, i;
	char			 fails[CORE_REASON_MAX];

	live = j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE];
	k = live < j->settings.max_nodes ? live : j->settings.max_nodes;
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	if (k >= j->settings.min_nodes && k > 0) {
		core_round_clear(j);
		round_complete(j, round_collect(j));
		return;
	}
	if (gone != NULL && loss && j->settings.rejoin_timeout_ms == 0) {
		fail_rejoin_now(j, gone, k);
		return;
	}

	for (i = 0; i < j->round_n; i++) {
		n = j->round[i];
		if (n->state != CORE_NODE_PARTICIPANT)
			continue;
		core_msg_init(&m, CORE_MSG_STOP);
		m.u.stop.generation = n->generation;
		textf(m.reason, sizeof(m.reason), "%s; too few nodes "
		    "remain (%u of min %u)", why, k, j->settings.min_nodes);
		core_msg_queue(n, &m);
	}
	core_round_clear(j);
	k = round_collect(j);
	j->state = CORE_JOB_WAITING;
	textf(j->reason, sizeof(j->reason), "round %llu is open: %u of "
	    "min %u node%s (%s)", (unsigned long long)j->generation + 1, k,
	    j->settings.min_nodes, plural(j->settings.min_nodes), why);
	settle_ahead(j, gone, loss, k, fails);
	core_event_add(j, "waiting", "%s", j->reason);
	for (i = 0; i < k; i++)
		core_msg_waiting(j->round[i], fails[0] != '\0' ? fails : NULL);
	round_open_settle(j, false, false, gone, loss);
}

/*
 * Holds a failure (reason) or lets go of it (NULL). The report behind it
 * was answered, so the store keeps it like any other job state (SPEC §9).
 */
static void
held_set(struct core_job *j, const char *reason)
{
	if (reason == NULL && !j->held_failure)
		return;
	j->held_failure = reason != NULL;
	textcpy(j->held_reason, sizeof(j->held_reason),
	    reason != NULL ? reason : "");
	core_job_dirty(j);
}

/* The member of the current round whose connection is gone, if any. */
static struct core_node *
round_away(const struct core_job *j)
{
	uint32_t	i;

	for (i = 0; i < j->round_n; i++)
		if (j->round[i]->state == CORE_NODE_PARTICIPANT &&
		    !j->round[i]->connected)
			return j->round[i];
	return NULL;
}

/*
 * When a node dies, its peers' workers fail at once (their collectives
 * lose a member) and their agents report FAILED while the dead node is
 * still within its reconnect grace. Counting that report and then the
 * loss would be two restarts for one event, and would name the wrong
 * cause. So a reported failure waits while a member of the round is away:
 * its loss then counts once, naming it (rule 5); once no member is away
 * (it resumed; after a daemon restart, every member resumed) the report
 * counts (rule 6). A planned change still re-rounds meanwhile; waiting
 * nodes are taken in when the failure is settled. True when nothing is to
 * be done now.
 */
static bool
hold_failure(struct core_job *j, bool *failure, bool loss, bool change,
    char reason[CORE_REASON_MAX])
{
	struct core_node	*away;

	if (*failure && loss) {
		held_set(j, NULL);
		return false;
	}
	away = round_away(j);
	if (*failure && away != NULL) {
		if (!j->held_failure) {
			held_set(j, reason);
			core_event_add(j, "held", "the failure waits for node "
			    "%s (node %llu), away, to resume or be lost",
			    away->hostname, (unsigned long long)away->node_id);
		}
		*failure = false;
	}
	if (!j->held_failure)
		return false;
	if (away != NULL)
		return !change;
	*failure = true;
	memcpy(reason, j->held_reason, CORE_REASON_MAX);
	held_set(j, NULL);
	return false;
}

/*
 * Rule 13: no waiting for nobody. A job whose nodes have all gone (scancel,
 * a requeue) ends now, not at its join timeout.
 */
static void
fail_all_gone(struct core_job *j)
{
	uint32_t lost = j->n_state[CORE_NODE_LOST];
	uint32_t evicted = j->n_state[CORE_NODE_EVICTED];
	const struct core_node *last = TAILQ_LAST(&j->ended, core_nodes);
	char why[CORE_REASON_MAX + 64];

	if (j->held_failure)
		held_set(j, NULL);	/* nobody is away any more */
	if (lost == 0 && evicted == 0) {
		core_job_fail(j, "cancelled: every node left");
		return;
	}
	textf(why, sizeof(why), "every node has gone (%u left, %u lost, %u "
	    "evicted); last, node %s (node %llu) was %s: %s",
	    j->n_state[CORE_NODE_LEFT], lost, evicted,
	    last != NULL ? last->hostname : "?",
	    last != NULL ? (unsigned long long)last->node_id : 0,
	    last != NULL ? core_node_state_name(last->state) : "?",
	    last != NULL && last->reason != NULL ? last->reason :
	    "no reason recorded");
	core_job_fail(j, why);
}

/*
 * A running job: a failure restarts it or, past max_restarts, fails it
 * (rules 5 and 6); a change re-rounds it; waiting nodes make one new round
 * (rule 3). |reason| is the caller's, hold_failure() may rewrite it.
 */
static void
round_running_settle(struct core_job *j, bool failure, bool change,
    bool loss, bool plain, bool lc_due, char *reason, const char *gone)
{
	struct core	*c = j->core;
	char		 why[CORE_REASON_MAX + 64];
	uint32_t	 p = j->n_state[CORE_NODE_PARTICIPANT];
	uint32_t	 w = j->n_state[CORE_NODE_WAITING];

	if (hold_failure(j, &failure, loss, change, reason))
		return;
	if (failure && !loss && core_repeat_of_failure(j, plain, reason)) {
		reround(j, reason, gone, false);
		j->failure_round_ms = c->now.mono_ms;
		j->failure_gen = j->generation;
		j->failure_gen_carry = false;
	} else if (failure) {
		core_repeat_counted(j);
		j->restart_count++;
		core_job_dirty(j);
		if (j->restart_count > j->settings.max_restarts) {
			textf(why, sizeof(why), "%s; restart %u exceeds "
			    "max_restarts %u", reason, j->restart_count,
			    j->settings.max_restarts);
			core_job_fail(j, why);
		} else {
			reround(j, reason, gone, loss);
			j->failure_round_ms = c->now.mono_ms;
			j->failure_gen = j->generation;
		}
		j->failure_gen_carry = false;
	} else if (change) {
		reround(j, reason, gone, false);
		if (j->failure_gen_carry)
			j->failure_gen = j->generation;
		j->failure_gen_carry = false;
	} else if (w > 0) {
		if (p + w >= j->settings.max_nodes || lc_due) {
			textf(why, sizeof(why), "%u waiting node%s taken in",
			    w, plural(w));
			reround(j, why, NULL, false);
		} else if (!core_timer_armed(&j->last_call)) {
			core_timer_set(c, &j->last_call, c->now.mono_ms +
			    j->settings.last_call_timeout_ms);
			core_job_dirty(j);
		}
	} else if (core_timer_armed(&j->last_call) || lc_due) {
		/* Nobody waits any more. A last call that fired just now is
		 * cleared as well: the saved time left must not bring it back
		 * after a restart. */
		core_timer_clear(c, &j->last_call);
		core_job_dirty(j);
	}
}

/*
 * Applies the rules to a job after an input or a deadline: once, whatever
 * happened, so simultaneous changes make one round.
 */
void
core_settle(struct core_job *j)
{
	struct core	*c = j->core;
	char		 reason[CORE_REASON_MAX], why[CORE_REASON_MAX + 64];
	char		 gone_buf[CORE_REASON_MAX];
	const char	*gone = NULL;
	bool		 failure = j->pend_failure, change = j->pend_change;
	bool		 loss = j->pend_loss, plain = j->pend_plain;
	bool		 lc_due, join_due;

	memcpy(reason, j->pend_reason, sizeof(reason));
	if (j->pend_gone[0] != '\0') {
		memcpy(gone_buf, j->pend_gone, sizeof(gone_buf));
		gone = gone_buf;
	}
	j->pend_failure = j->pend_change = j->pend_loss = false;
	j->pend_plain = false;
	j->pend_reason[0] = j->pend_gone[0] = '\0';
	lc_due = j->fired_last_call || (core_timer_armed(&j->last_call) &&
	    j->last_call.at <= c->now.mono_ms);
	join_due = j->fired_join || (core_timer_armed(&j->join_deadline) &&
	    j->join_deadline.at <= c->now.mono_ms);
	j->fired_last_call = j->fired_join = false;
	if (j->removed)
		return;
	if (j->held_failure && j->state != CORE_JOB_RUNNING) {
		/* Rule 7: a failure held as the job began closing fails it. */
		if (j->state == CORE_JOB_CLOSING && !failure) {
			failure = true;
			memcpy(reason, j->held_reason, sizeof(reason));
		}
		held_set(j, NULL);
	}
	if ((j->state == CORE_JOB_WAITING || j->state == CORE_JOB_RUNNING) &&
	    j->n_state[CORE_NODE_PARTICIPANT] + j->n_state[CORE_NODE_WAITING] +
	    j->n_state[CORE_NODE_SPARE] == 0) {
		fail_all_gone(j);
		return;
	}

	switch (j->state) {
	case CORE_JOB_WAITING:
		round_open_settle(j, lc_due, join_due, gone, loss);
		break;
	case CORE_JOB_RUNNING:
		round_running_settle(j, failure, change, loss, plain, lc_due,
		    reason, gone);
		break;
	case CORE_JOB_CLOSING:
		/* Rule 7. */
		if (failure) {
			textf(why, sizeof(why), "%s while the job was "
			    "closing", reason);
			core_job_fail(j, why);
		} else if (j->n_state[CORE_NODE_PARTICIPANT] == 0)
			core_job_close(j, "every participant finished");
		break;
	case CORE_JOB_CLOSED:
	case CORE_JOB_FAILED:
		break;
	}
}

void
core_node_current(const struct core_node *n, struct core_msg *m)
{
	const struct core_job	*j = n->job;

	memset(m, 0, sizeof(*m));
	if (j->state == CORE_JOB_CLOSED || j->state == CORE_JOB_FAILED) {
		m->kind = j->state == CORE_JOB_CLOSED ? CORE_MSG_CLOSED :
		    CORE_MSG_FAILED;
		textcpy(m->reason, sizeof(m->reason), j->reason);
	} else if (n->state == CORE_NODE_EVICTED) {
		m->kind = CORE_MSG_EVICTED;
		textcpy(m->reason, sizeof(m->reason),
		    n->reason != NULL ? n->reason : "evicted");
	} else if (n->state == CORE_NODE_PARTICIPANT && n->group_rank >= 0 &&
	    n->generation == j->generation) {
		m->kind = CORE_MSG_ASSIGNMENT;
		fill_assignment(n, &m->u.assignment);
	} else {
		m->kind = CORE_MSG_WAITING;
		m->u.waiting.state = n->state;
		m->u.waiting.participants = j->n_state[CORE_NODE_PARTICIPANT];
		m->u.waiting.min_nodes = j->settings.min_nodes;
		m->u.waiting.max_nodes = j->settings.max_nodes;
		m->u.waiting.fails_in_ms = core_fails_in(j);
		core_waiting_reason(n, m->reason, sizeof(m->reason));
	}
}
