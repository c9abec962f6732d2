/*
 * The rendezvous core: jobs, nodes and the agents' inputs (SPEC §2-§4).
 *
 * Every input takes the time from the daemon, changes the state, and lets
 * core_settle() (core_round.c) apply the rules of SPEC §4 to the job once,
 * so one input never causes two rounds. Round forming and ranking live in
 * core_round.c, operator actions and the clock in core_ops.c, restore and
 * the invariant check in core_restore.c.
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

#define CORE_INTERNAL
#include "core.h"
#include "text.h"
#include "grpc.h"

#define ANON	"anonymous"

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

static int
match_token(const void *item, const void *key)
{
	return memcmp(((const struct core_node *)item)->join_token, key,
	    CORE_TOKEN_LEN) == 0;
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
	return GRPC_PERMISSION_DENIED;
}

struct core_job *
core_job_new(struct core *c, const char *rdzv_id, const char *owner)
{
	struct core_job	*j;

	j = xcalloc(1, sizeof(*j));
	textf(j->rdzv_id, sizeof(j->rdzv_id), "%s", rdzv_id);
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

/* Takes a node out of every index and list; it is freed with the turn. */
static void
node_unlink(struct core_node *n)
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

/*
 * A join re-sent by an agent that gave up waiting for the first answer
 * (a slow commit held rdzvd past its keepalive): the node its first
 * attempt made, while that node still has a place in the same job of the
 * same owner; else NULL, and the join makes a new node.
 */
static struct core_node *
join_retry_node(struct core *c, const struct core_join *req,
    const char *identity)
{
	struct core_node	*n;

	if (!req->has_token)
		return NULL;
	n = hash_find(&c->by_token, hash_bytes(req->join_token,
	    CORE_TOKEN_LEN), match_token, req->join_token);
	if (n == NULL)
		return NULL;
	if (strcmp(n->job->rdzv_id, req->rdzv_id) != 0 ||
	    strcmp(n->job->owner, identity) != 0 || !core_node_live(n) ||
	    core_job_ended(n->job)) {
		core_node_forget_token(n);
		return NULL;
	}
	return n;
}

/* The retried join gets the node as if it had resumed with no workers. */
static void
join_retry_answer(struct core_node *n, struct core_now now)
{
	struct core	*c = n->job->core;

	n->connected = true;
	n->last_seen_ms = now.wall_ms;
	core_timer_clear(c, &n->lease);
	core_msg_drop(c, n);
	core_job_changed(n->job);
	core_event_add(n->job, "join", "node %s (node %llu): its join was "
	    "sent again (the first answer came too late for it); it keeps "
	    "its place as %s", n->hostname, (unsigned long long)n->node_id,
	    core_node_state_name(n->state));
	core_queue_accepted(n, false);
	core_tell_current(n, true);
}

/*
 * Rule 12: a failed job is reopened by a new join, and any ended or ending
 * job by a join of a later attempt (a scheduler requeue). The generation
 * keeps counting; the old attempt's nodes go.
 */
static void
job_reopen(struct core_job *j, uint32_t attempt)
{
	const char		*after = j->state == CORE_JOB_FAILED ?
				    "the failure" : "a requeue";
	struct core		*c = j->core;
	struct core_node	*n;

	core_round_clear(j);
	core_owner_job_unended(j);
	while ((n = TAILQ_FIRST(&j->nodes)) != NULL) {
		TAILQ_REMOVE(&j->nodes, n, entry);
		node_unlink(n);
		TAILQ_INSERT_TAIL(&c->removed_nodes, n, entry);
	}
	TAILQ_INIT(&j->ended);
	j->n_nodes = 0;
	memset(j->n_state, 0, sizeof(j->n_state));
	core_timer_clear(c, &j->retention);
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	j->rejoin_lost[0] = '\0';
	j->attempt = attempt > j->attempt ? attempt : j->attempt + 1;
	j->restart_count = 0;
	j->state = CORE_JOB_WAITING;
	j->ended_ms = 0;
	textf(j->reason, sizeof(j->reason), "attempt %u: round %llu is "
	    "open", j->attempt, (unsigned long long)j->generation + 1);
	core_event_add(j, "reopened", "attempt %u starts after %s; "
	    "generations continue after %llu", j->attempt, after,
	    (unsigned long long)j->generation);
}

/*
 * An elastic job that runs for weeks sees nodes come and go: beyond
 * max_nodes_per_job ended nodes, the oldest are dropped (the store deletes
 * them; the events keep their story). Nodes of the round stay.
 */
static void
job_prune(struct core_job *j)
{
	struct core		*c = j->core;
	struct core_node	*n;
	uint32_t		 live;

	for (;;) {
		live = j->n_state[CORE_NODE_PARTICIPANT] +
		    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE];
		if (j->n_nodes - live <= c->cfg.max_nodes_per_job ||
		    (n = TAILQ_FIRST(&j->ended)) == NULL || n->group_rank >= 0)
			return;
		TAILQ_REMOVE(&j->ended, n, ended_entry);
		n->in_ended = false;
		TAILQ_REMOVE(&j->nodes, n, entry);
		j->n_nodes--;
		j->n_state[n->state]--;
		node_unlink(n);
		TAILQ_INSERT_TAIL(&c->removed_nodes, n, entry);
	}
}

static void
settings_fill(struct core_settings *s, const struct core_settings *d)
{
	if (s->min_nodes == 0 && s->max_nodes == 0) {
		s->min_nodes = d->min_nodes;
		s->max_nodes = d->max_nodes;
	}
#define FILL(f) do { if (s->f == 0) s->f = d->f; } while (0)
	FILL(last_call_timeout_ms);
	FILL(join_timeout_ms);
	FILL(lease_ttl_ms);
	FILL(reconnect_grace_ms);
	FILL(hang_timeout_ms);
#undef FILL
	if (s->max_restarts == 0)
		s->max_restarts = d->max_restarts;
	/* Rule 13: by default a lost node may be replaced for as long as a
	 * missing one may join. */
	if (!s->has_rejoin_timeout) {
		s->has_rejoin_timeout = true;
		s->rejoin_timeout_ms = s->join_timeout_ms;
	}
}

/*
 * Queues what the node must be told now. After a join, only when settling
 * told it nothing (a completed round already sent the assignment).
 */
void
core_tell_current(struct core_node *n, bool always)
{
	struct core_msg	 cur, *m;

	if (!always && n->out_tail != NULL &&
	    n->out_tail->kind != CORE_MSG_ACCEPTED)
		return;
	core_node_current(n, &cur);
	m = core_msg_queue(n, cur.kind);
	m->u = cur.u;
	memcpy(m->reason, cur.reason, sizeof(m->reason));
}

void
core_queue_accepted(struct core_node *n, bool resumed)
{
	struct core_msg	*m;

	m = core_msg_queue(n, CORE_MSG_ACCEPTED);
	m->u.accepted.node_id = n->node_id;
	memcpy(m->u.accepted.session_id, n->session_id, CORE_SESSION_LEN);
	m->u.accepted.settings = n->job->settings;
	m->u.accepted.resumed = resumed;
	m->u.accepted.attempt = n->job->attempt;
}

static int
join_validate(const struct core *c, const struct core_join *req,
    struct core_settings *s, char *err, size_t errlen)
{
	if (rdzv_id_check(req->rdzv_id, err, errlen) != 0)
		return GRPC_INVALID_ARGUMENT;
	if (req->nproc < 1 || req->nproc > CORE_NPROC_MAX) {
		textf(err, errlen, "job %s: nproc must be 1 to %d, not %u "
		    "(--nproc-per-node)", req->rdzv_id, CORE_NPROC_MAX,
		    req->nproc);
		return GRPC_INVALID_ARGUMENT;
	}
	if ((req->hostname != NULL && strlen(req->hostname) > CORE_STR_MAX) ||
	    (req->advertise_addr != NULL &&
	    strlen(req->advertise_addr) > CORE_STR_MAX)) {
		textf(err, errlen, "job %s: hostname and advertise address "
		    "must be at most %d bytes", req->rdzv_id, CORE_STR_MAX);
		return GRPC_INVALID_ARGUMENT;
	}
	/* Workers get it as MASTER_PORT: a port no socket can have is
	 * refused here rather than handed to every node of the round. */
	if (req->master_port > 65535) {
		textf(err, errlen, "job %s: master_port %u is not a TCP port "
		    "(1 to 65535)", req->rdzv_id, req->master_port);
		return GRPC_INVALID_ARGUMENT;
	}
	*s = req->settings;
	if (s->min_nodes == 0)
		s->min_nodes = s->max_nodes;
	if (s->max_nodes == 0)
		s->max_nodes = s->min_nodes;
	if (s->min_nodes > s->max_nodes) {
		textf(err, errlen, "job %s: min_nodes %u is more than "
		    "max_nodes %u (--nnodes %u:%u)", req->rdzv_id,
		    s->min_nodes, s->max_nodes, s->min_nodes, s->max_nodes);
		return GRPC_INVALID_ARGUMENT;
	}
	if (s->max_nodes > c->cfg.max_nodes_per_job) {
		textf(err, errlen, "job %s: max_nodes %u is over the limit "
		    "of %u nodes per job", req->rdzv_id, s->max_nodes,
		    c->cfg.max_nodes_per_job);
		return GRPC_RESOURCE_EXHAUSTED;
	}
	/* A join timeout keeps a job that may never form: it is bounded, or
	 * one client could hold jobs for weeks. */
	if (s->join_timeout_ms > c->cfg.max_join_timeout_ms) {
		char t[32], max[32];
		core_fmt_secs(t, sizeof(t), s->join_timeout_ms);
		core_fmt_secs(max, sizeof(max), c->cfg.max_join_timeout_ms);
		textf(err, errlen, "job %s: join timeout %s is over this "
		    "rdzvd's limit of %s (max-join-timeout); ask for less "
		    "(--join-timeout)", req->rdzv_id, t, max);
		return GRPC_INVALID_ARGUMENT;
	}
	if (s->has_rejoin_timeout &&
	    s->rejoin_timeout_ms > c->cfg.max_join_timeout_ms) {
		char t[32], max[32];
		core_fmt_secs(t, sizeof(t), s->rejoin_timeout_ms);
		core_fmt_secs(max, sizeof(max), c->cfg.max_join_timeout_ms);
		textf(err, errlen, "job %s: rejoin timeout %s is over this "
		    "rdzvd's limit of %s (max-join-timeout); ask for less "
		    "(--rejoin-timeout)", req->rdzv_id, t, max);
		return GRPC_INVALID_ARGUMENT;
	}
	if (s->hang_timeout_ms > c->cfg.max_join_timeout_ms) {
		char t[32], max[32];
		core_fmt_secs(t, sizeof(t), s->hang_timeout_ms);
		core_fmt_secs(max, sizeof(max), c->cfg.max_join_timeout_ms);
		textf(err, errlen, "job %s: hang timeout %s is over this "
		    "rdzvd's limit of %s (max-join-timeout); ask for less "
		    "(--hang-timeout)", req->rdzv_id, t, max);
		return GRPC_INVALID_ARGUMENT;
	}
	return 0;
}

/* A new job counts against its owner's jobs that have not ended. */
static int
owner_has_room(const struct core *c, const char *identity, char *err,
    size_t errlen)
{
	const struct core_job	*j;
	uint32_t		 n = 0;

	TAILQ_FOREACH(j, &c->jobs, entry)
		if (!core_job_ended(j) && strcmp(j->owner, identity) == 0)
			n++;
	if (n < c->cfg.max_jobs_per_owner)
		return 0;
	textf(err, errlen, "%s has %u jobs that have not ended, the limit "
	    "per identity (max-jobs-per-identity); close some (rdzvctl "
	    "close) or let them end", identity, n);
	return GRPC_RESOURCE_EXHAUSTED;
}

/* A join of a later run of the job than the one that ended or is ending:
 * the scheduler requeued it (rule 12). */
static bool
requeued(const struct core_job *j, uint32_t attempt)
{
	return attempt > j->attempt && (j->state == CORE_JOB_CLOSED ||
	    j->state == CORE_JOB_CLOSING);
}

/* The checks a join into an existing job must pass (SPEC §3, §11, §12). */
static int
join_existing(const struct core *c, const struct core_job *j,
    const char *identity, const struct core_settings *s, uint32_t attempt,
    char *err, size_t errlen)
{
	char	t[64];
	int	rc;
	uint32_t live;

	if ((rc = core_owner_check(j, identity, "join", err, errlen)) != 0)
		return rc;
	/* A later run of the job reopens it instead (core_join). */
	if (j->state == CORE_JOB_CLOSED && !requeued(j, attempt)) {
		core_fmt_wall(t, sizeof(t), j->ended_ms);
		textf(err, errlen, "job %s closed at %s; use a new --id",
		    j->rdzv_id, t);
		return GRPC_FAILED_PRECONDITION;
	}
	if (j->state == CORE_JOB_CLOSING && !requeued(j, attempt)) {
		textf(err, errlen, "job %s is closing (%s) and takes no "
		    "new nodes; use a new --id", j->rdzv_id, j->reason);
		return GRPC_FAILED_PRECONDITION;
	}
	if (s->min_nodes != 0 && s->min_nodes != j->settings.min_nodes) {
		textf(err, errlen, "job %s: min_nodes is %u but this node "
		    "asked for %u (--nnodes %u:%u)", j->rdzv_id,
		    j->settings.min_nodes, s->min_nodes, s->min_nodes,
		    s->max_nodes);
		return GRPC_INVALID_ARGUMENT;
	}
	if (s->max_nodes != 0 && s->max_nodes != j->settings.max_nodes) {
		textf(err, errlen, "job %s: max_nodes is %u but this node "
		    "asked for %u (--nnodes %u:%u)", j->rdzv_id,
		    j->settings.max_nodes, s->max_nodes, s->min_nodes,
		    s->max_nodes);
		return GRPC_INVALID_ARGUMENT;
	}
	live = j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE];
	if (j->state != CORE_JOB_FAILED && live >= c->cfg.max_nodes_per_job) {
		textf(err, errlen, "job %s has %u nodes, the limit per job",
		    j->rdzv_id, live);
		return GRPC_RESOURCE_EXHAUSTED;
	}
	return 0;
}

int
core_join(struct core *c, struct core_now now, const struct core_join *req,
    struct core_node **nodep, char *err, size_t errlen)
{
	const char		*identity;
	struct core_settings	 s;
	struct core_job		*j;
	struct core_node	*n;
	enum core_node_state	 st;
	size_t			 host_from;
	int			 rc;

	core_set_now(c, now);
	identity = req->identity != NULL ? req->identity : ANON;
	if ((rc = join_validate(c, req, &s, err, errlen)) != 0)
		return rc;
	/* A retry of a join that made its node already: the host was
	 * checked then. */
	if ((n = join_retry_node(c, req, identity)) != NULL) {
		join_retry_answer(n, now);
		if (nodep != NULL)
			*nodep = n;
		return 0;
	}
	if ((rc = core_join_host(c, req, &host_from, err, errlen)) != 0)
		return rc;
	j = core_job_find(c, req->rdzv_id);
	if (j != NULL &&
	    (rc = join_existing(c, j, identity, &s, req->attempt, err,
	    errlen)) != 0)
		return rc;
	if (j == NULL && (rc = owner_has_room(c, identity, err, errlen)) != 0)
		return rc;
	if (core_node_by_session(c, req->session_id) != NULL) {
		textf(err, errlen, "job %s: session id collision; retry",
		    req->rdzv_id);
		return GRPC_INTERNAL;
	}

	if (j == NULL) {
		j = core_job_new(c, req->rdzv_id, identity);
		settings_fill(&s, &c->cfg.defaults);
		j->settings = s;
		j->created_ms = now.wall_ms;
		textf(j->reason, sizeof(j->reason), "round 1 is open");
		core_event_add(j, "created", "created by %s: nodes %u:%u, "
		    "max_restarts %u", identity, s.min_nodes, s.max_nodes,
		    s.max_restarts);
	} else if (j->state == CORE_JOB_FAILED || requeued(j, req->attempt))
		job_reopen(j, req->attempt);

	/* Rule 1 and rule 3: an open round takes it in; else wait or spare. */
	if (j->state == CORE_JOB_WAITING &&
	    j->n_state[CORE_NODE_PARTICIPANT] < j->settings.max_nodes)
		st = CORE_NODE_PARTICIPANT;
	else if (j->state == CORE_JOB_RUNNING &&
	    j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] < j->settings.max_nodes)
		st = CORE_NODE_WAITING;
	else
		st = CORE_NODE_SPARE;
	n = core_node_new(j, c->next_node_id, req->session_id, req->hostname,
	    req->advertise_addr);
	core_node_set_state(n, st);
	n->master_port = req->master_port;
	n->nproc = req->nproc;
	n->has_rank_hint = req->has_rank_hint;
	n->rank_hint = req->has_rank_hint ? req->rank_hint : 0;
	n->arrival = c->next_arrival++;
	n->joined_ms = n->last_seen_ms = now.wall_ms;
	n->connected = true;
	if (req->has_token) {
		n->has_token = true;
		memcpy(n->join_token, req->join_token, CORE_TOKEN_LEN);
		if (hash_insert(&c->by_token, hash_bytes(n->join_token,
		    CORE_TOKEN_LEN), n) != 0)
			abort();
	}
	n->gpus_healthy = req->gpus_healthy;
	n->gpus_total = req->gpus_total;
	n->gpus_dirty = core_node_set_gpus(n, req->gpus, req->n_gpus);
	core_node_dirty(n);
	core_event_add(j, "join", "node %s (node %llu) joined as %s: nproc "
	    "%u%s", n->hostname, (unsigned long long)n->node_id,
	    core_node_state_name(n->state), n->nproc,
	    n->has_rank_hint ? "" : ", no rank hint");

	core_host_changed(c, host_from, j);

	core_queue_accepted(n, false);
	core_settle(j);
	core_tell_current(n, false);
	job_prune(j);
	if (nodep != NULL)
		*nodep = n;
	return 0;
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
		node_unlink(n);
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
