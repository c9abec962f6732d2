/*
 * The rendezvous core: jobs, nodes and the agents' inputs (SPEC §2-§4).
 *
 * Every input takes the time from the daemon, changes the state, and lets
 * core_settle() (core_round.c) apply the rules of SPEC §4 to the job once,
 * so one input never causes two rounds. Joins live in core_join.c, round
 * forming, ranking and departures in core_round.c, a job's end in
 * core_end.c, operator actions in core_operator.c, restore and the
 * invariant check in core_restore.c, the plumbing in core_timer.c
 * (deadlines), core_objects.c (change tracking, removal), core_event.c (the
 * history, words) and core_outbox.c (the messages for each node). The files
 * call downward only: the plumbing, owner, end, round, core, join, hosts,
 * agent, operator.
 *
 * Choices where SPEC leaves room (docs/RENDEZVOUS.md explains them too):
 *
 * - A job's generation is that of its last completed round (0 before the
 *   first); the round being formed becomes generation + 1 when it completes.
 * - min/max in a join: one of them unset takes the other's value; both
 *   unset take the defaults. max_nodes over the per-job node limit, and a
 *   join into a job whose live nodes (participants, waiting, spares) are at
 *   the limit, get RESOURCE_EXHAUSTED. nproc is 1..65536.
 * - Joins check, in order: the rdzv_id, the request's own values, the
 *   owner, the job's state (closed, closing), min/max against the job's, the
 *   node limit. A failed job is reopened only after all of these pass; its
 *   old nodes are dropped (the store deletes them), its events are kept.
 * - Only the joining node is told WAITING when it joins an open round; the
 *   others are not re-told each arrival (that would be O(n^2) messages).
 * - An open round that falls below min_nodes again (a participant leaves or
 *   is lost) drops its last call and counts join_timeout afresh from then:
 *   it has become short of nodes again. When a loss made it short (rule
 *   13), it counts rejoin_timeout instead, or the deadline already armed
 *   if that comes sooner; rejoin_timeout 0 fails the job at once. The
 *   failure names the lost node.
 * - Losses handled in one core_advance() (leases that end together) and one
 *   input count as one failure: restart_count grows once per job per input.
 * - Any failure of the running round (a FAILED report, a lost participant)
 *   re-rounds with the live participants plus the waiting nodes and, where
 *   room is left, spares: forming a round takes in whoever is there.
 * - Closing: a participant lost before it reported fails the job (its
 *   outcome is unknown, and no new round can replace it); one that leaves or
 *   is evicted no longer blocks closing. When the job closes, its waiting
 *   and spare nodes are told CLOSED and marked left. An operator closing a
 *   job whose round is open closes it at once: no workers are running.
 * - A join that carries a token (the agent's, the same in each retry of
 *   one join) and finds a live node that a join with that token made, in
 *   the same job of the same owner, gets that node: ACCEPTED and its
 *   place, as a resume with no workers would. Tokens are kept in memory
 *   only, while the node is live: a retry is seconds after its first
 *   attempt, and after a daemon restart the retried join is a new node.
 * - Resume: a node that resumes with a generation older than the job's
 *   (it missed rounds while away) keeps its place: it gets ACCEPTED, STOP
 *   for the old workers and its current place (assignment, waiting or
 *   spare) at once, so a lagging node costs no extra round (rule 4). A
 *   generation newer than the job's was never formed: FAILED_PRECONDITION
 *   (rule 10), and the node counts as having left, since such an agent
 *   joins again as a new node (SPEC §6). The current generation, or 0 (no
 *   workers), is accepted as above, without STOP when its workers may
 *   run. A lost or left node cannot resume (FAILED_PRECONDITION); an
 *   evicted one is told EVICTED; a node of an ended job is told CLOSED or
 *   FAILED.
 * - Reports: OUTCOME_HEALTH is not fenced (GPU counts only); a repeated
 *   SUCCEEDED from a node that already succeeded is answered OK.
 * - Leases run only while a node is disconnected (reconnect_grace) or after
 *   a daemon restart (lease_ttl); a silent connection is the daemon's to
 *   detect, and it calls core_lease_lost().
 * - Messages are queued only for connected nodes; a resuming node is told
 *   its place by core_node_current().
 * - Ended jobs are removed retention after they ended, by wall time, so a
 *   daemon restart does not postpone it.
 * - An owner keeps at most max_ended_per_owner ended jobs: when one more
 *   ends, the one that ended first goes as if its retention had passed
 *   (pruned, counted in rdzvd_ended_jobs_pruned_total), so one client
 *   that creates and closes jobs in a loop cannot fill the daemon.
 * - A job keeps at most max_nodes_per_job ended nodes; older ones are
 *   dropped at the next join (the store deletes them; events remain).
 * - Open deadlines are saved as time left when the job is written;
 *   core_checkpoint() refreshes them at a clean shutdown, so after a crash
 *   a deadline may get up to one timeout more, never less.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

static int
match_job(const void *item, const void *key)
{
	return strcmp(((const struct core_job *)item)->rdzv_id, key) == 0;
}

static int
match_node(const void *item, const void *key)
{
	return ((const struct core_node *)item)->node_id ==
	    *(const uint64_t *)key;
}

static int
match_session(const void *item, const void *key)
{
	return memcmp(((const struct core_node *)item)->session_id, key,
	    CORE_SESSION_LEN) == 0;
}

void
core_config_defaults(struct core_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_nodes_per_job = 10000;
	cfg->max_jobs_per_owner = 1000;
	cfg->max_join_timeout_ms = 24ULL * 3600 * 1000;
	cfg->retention_ms = 7ULL * 24 * 3600 * 1000;
	cfg->max_ended_per_owner = 10000;
	cfg->defaults.min_nodes = 1;
	cfg->defaults.max_nodes = 1;
	cfg->defaults.last_call_timeout_ms = 30 * 1000;
	cfg->defaults.join_timeout_ms = 600 * 1000;
	cfg->defaults.max_restarts = 0;
	cfg->defaults.lease_ttl_ms = 15 * 1000;
	cfg->defaults.reconnect_grace_ms = 3 * 1000;
	cfg->defaults.rank_policy = CORE_RANK_ORDERED;
	cfg->defaults.restart = CORE_RESTART_PROCESS;
	cfg->straggler_steps = 20;
	cfg->straggler_ms = 30 * 1000;
	host_policy_defaults(&cfg->hosts);
}

struct core *
core_new(const struct core_config *cfg)
{
	struct core	*c;

	c = xcalloc(1, sizeof(*c));
	if (cfg != NULL)
		c->cfg = *cfg;
	else
		core_config_defaults(&c->cfg);
	hash_init(&c->by_id);
	hash_init(&c->by_node);
	hash_init(&c->by_session);
	hash_init(&c->by_token);
	hash_init(&c->by_owner);
	TAILQ_INIT(&c->jobs);
	TAILQ_INIT(&c->dirty_jobs);
	TAILQ_INIT(&c->dirty_nodes);
	TAILQ_INIT(&c->changed_jobs);
	TAILQ_INIT(&c->removed_jobs);
	TAILQ_INIT(&c->removed_nodes);
	TAILQ_INIT(&c->outbox);
	TAILQ_INIT(&c->settle);
	c->next_node_id = 1;
	c->next_arrival = 1;
	c->hosts = hosts_new(&c->cfg.hosts);
	return c;
}

void
core_free(struct core *c)
{
	struct core_job	*j;

	if (c == NULL)
		return;
	core_changes_clear(c);
	while ((j = TAILQ_FIRST(&c->jobs)) != NULL) {
		TAILQ_REMOVE(&c->jobs, j, entry);
		core_job_free(j);
	}
	hash_free(&c->by_id);
	hash_free(&c->by_node);
	hash_free(&c->by_session);
	hash_free(&c->by_token);
	core_owners_free(c);
	free(c->new_events);
	core_rounds_clear(c);
	free(c->new_rounds);
	free(c->refusals);
	free(c->heap);
	hosts_free(c->hosts);
	free(c);
}

void
core_changes_clear(struct core *c)
{
	struct core_job		*j;
	struct core_node	*n;

	while ((j = TAILQ_FIRST(&c->dirty_jobs)) != NULL) {
		TAILQ_REMOVE(&c->dirty_jobs, j, dirty_entry);
		j->dirty = false;
	}
	while ((n = TAILQ_FIRST(&c->dirty_nodes)) != NULL) {
		TAILQ_REMOVE(&c->dirty_nodes, n, dirty_entry);
		n->dirty = n->gpus_dirty = false;
		/* Written with the node: its step and last-seen time. */
		n->step_unsaved = false;
		n->seen_saved_ms = n->last_seen_ms;
	}
	while ((j = TAILQ_FIRST(&c->changed_jobs)) != NULL) {
		TAILQ_REMOVE(&c->changed_jobs, j, changed_entry);
		j->changed = j->steps_only = false;
	}
	while ((j = TAILQ_FIRST(&c->removed_jobs)) != NULL) {
		TAILQ_REMOVE(&c->removed_jobs, j, entry);
		core_job_free(j);
	}
	while ((n = TAILQ_FIRST(&c->removed_nodes)) != NULL) {
		TAILQ_REMOVE(&c->removed_nodes, n, entry);
		core_node_free(n);
	}
	c->n_new_events = 0;
	core_rounds_clear(c);
	hosts_changes_clear(c->hosts);
	c->refusals_dirty = false;
}

struct core_job *
core_job_find(const struct core *c, const char *rdzv_id)
{
	if (rdzv_id == NULL)
		return NULL;
	return hash_find(&c->by_id, hash_bytes(rdzv_id, strlen(rdzv_id)),
	    match_job, rdzv_id);
}

struct core_node *
core_node_find(const struct core *c, uint64_t node_id)
{
	return hash_find(&c->by_node, hash_u64(node_id), match_node,
	    &node_id);
}

struct core_node *
core_node_by_session(const struct core *c,
    const uint8_t session_id[CORE_SESSION_LEN])
{
	if (session_id == NULL)
		return NULL;
	return hash_find(&c->by_session,
	    hash_bytes(session_id, CORE_SESSION_LEN), match_session,
	    session_id);
}

/* Inputs may arrive with a monotonic time a little behind the last one. */
void
core_set_now(struct core *c, struct core_now now)
{
	if (now.mono_ms < c->now.mono_ms)
		now.mono_ms = c->now.mono_ms;
	c->now = now;
}

int
core_owner_check(const struct core_job *j, const char *identity, const char *what,
    char *err, size_t errlen)
{
	if (strcmp(j->owner, identity) == 0)
		return 0;
	textf(err, errlen, "job %s belongs to %s; %s may not %s it",
	    j->rdzv_id, j->owner, identity, what);
	return CORE_DENIED;
}

struct core_job *
core_job_new(struct core *c, const char *rdzv_id, const char *owner)
{
	struct core_job	*j;

	j = xcalloc(1, sizeof(*j));
	textcpy(j->rdzv_id, sizeof(j->rdzv_id), rdzv_id);
	j->owner = xstrdup(owner);
	j->own = core_owner_get(c, owner);
	j->core = c;
	j->state = CORE_JOB_WAITING;
	j->attempt = 1;
	j->last_call_left_ms = j->join_left_ms = -1;
	TAILQ_INIT(&j->nodes);
	TAILQ_INIT(&j->ended);
	core_timer_init(&j->last_call, CORE_TIMER_LAST_CALL, j);
	core_timer_init(&j->join_deadline, CORE_TIMER_JOIN, j);
	core_timer_init(&j->retention, CORE_TIMER_RETENTION, j);
	core_timer_init(&j->progress_timer, CORE_TIMER_PROGRESS, j);
	if (hash_insert(&c->by_id, hash_bytes(rdzv_id, strlen(rdzv_id)),
	    j) != 0)
		abort();
	TAILQ_INSERT_TAIL(&c->jobs, j, entry);
	c->n_jobs++;
	return j;
}

struct core_node *
core_node_new(struct core_job *j, uint64_t node_id,
    const uint8_t session_id[CORE_SESSION_LEN], const char *hostname,
    const char *addr)
{
	struct core	*c = j->core;
	struct core_node *n;

	n = xcalloc(1, sizeof(*n));
	n->node_id = node_id;
	memcpy(n->session_id, session_id, CORE_SESSION_LEN);
	n->job = j;
	n->hostname = xstrdup(hostname);
	n->advertise_addr = xstrdup(addr);
	n->group_rank = -1;
	n->prev_rank = -1;
	n->state = CORE_NODE_WAITING;
	core_timer_init(&n->lease, CORE_TIMER_LEASE, n);
	if (hash_insert(&c->by_node, hash_u64(node_id), n) != 0 ||
	    hash_insert(&c->by_session, hash_bytes(session_id,
	    CORE_SESSION_LEN), n) != 0)
		abort();
	TAILQ_INSERT_TAIL(&j->nodes, n, entry);
	j->n_nodes++;
	j->n_state[n->state]++;
	if (node_id >= c->next_node_id)
		c->next_node_id = node_id + 1;
	return n;
}

/*
 * Queues what the node must be told now. After a join, only when settling
 * told it nothing (a completed round already sent the assignment).
 */
void
core_tell_current(struct core_node *n, bool always)
{
	struct core_msg	 cur;

	if (!always && n->out_tail != NULL &&
	    n->out_tail->kind != CORE_MSG_ACCEPTED)
		return;
	if (!n->connected || n->removed)
		return;
	core_node_current(n, &cur);
	core_msg_queue(n, &cur);
}

void
core_queue_accepted(struct core_node *n, bool resumed)
{
	struct core_msg	 m;

	core_msg_init(&m, CORE_MSG_ACCEPTED);
	m.u.accepted.node_id = n->node_id;
	memcpy(m.u.accepted.session_id, n->session_id, CORE_SESSION_LEN);
	m.u.accepted.settings = n->job->settings;
	m.u.accepted.resumed = resumed;
	m.u.accepted.attempt = n->job->attempt;
	core_msg_queue(n, &m);
}

