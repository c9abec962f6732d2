/*
 * Join (SPEC §4 rules 1, 3 and 12): a new node's place in its job, the job
 * created or reopened on the way, a retried join answered with the node
 * its first attempt made, and the checks a join must pass first (settings,
 * ownership, the owner's room, the host's state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

#define ANON	"anonymous"

static int
match_token(const void *item, const void *key)
{
	return memcmp(((const struct core_node *)item)->join_token, key,
	    CORE_TOKEN_LEN) == 0;
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
		core_node_unlink(n);
		TAILQ_INSERT_TAIL(&c->removed_nodes, n, entry);
	}
	TAILQ_INIT(&j->ended);
	j->n_nodes = 0;
	memset(j->n_state, 0, sizeof(j->n_state));
	core_timer_clear(c, &j->retention);
	core_timer_clear(c, &j->last_call);
	core_timer_clear(c, &j->join_deadline);
	j->rejoin_lost[0] = '\0';
	j->n_refused = 0;
	j->refusal_failed = false;
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
		core_node_unlink(n);
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
	FILL(rank_policy);
	FILL(restart);
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

/* A timeout a join asks for over max-join-timeout: true, with the error. */
static bool
over_limit(const struct core *c, const struct core_join *req,
    const char *what, const char *flag, uint64_t ms, char *err,
    size_t errlen)
{
	char t[32], max[32];

	if (ms <= c->cfg.max_join_timeout_ms)
		return false;
	core_fmt_secs(t, sizeof(t), ms);
	core_fmt_secs(max, sizeof(max), c->cfg.max_join_timeout_ms);
	textf(err, errlen, "job %s: %s %s is over this rdzvd's limit of %s "
	    "(max-join-timeout); ask for less (%s)", req->rdzv_id, what, t,
	    max, flag);
	return true;
}

/* A byte a Python module name may have: ASCII letters, digits, '_'. */
static bool
ident_byte(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || ch == '_';
}

/* Whether the bytes from |a| up to |b| are printable ASCII: what a message
 * may quote as it is. */
static bool
printable(const char *a, const char *b)
{
	for (; a < b; a++)
		if ((unsigned char)*a < 0x20 || (unsigned char)*a > 0x7e)
			return false;
	return true;
}

/* Why byte |q| of a module name that starts at |name| and ends before
 * |end| is not one; NULL where it may be there. */
static const char *
preload_byte_bad(const char *name, const char *q, const char *end)
{
	unsigned char	ch = (unsigned char)*q;
	bool		part_start = q == name || q[-1] == '.';

	if (ch == '.')
		return part_start || q + 1 == end ?
		    "a '.' must be between two parts" : NULL;
	if (!ident_byte(ch))
		return "it has a character other than letters, digits, '_' "
		    "and '.'";
	if (part_start && ch >= '0' && ch <= '9')
		return "a part starts with a digit";
	return NULL;
}

/*
 * Issue 45: a job's preload is a list of module names the agents pass to
 * `import` in their fork server: names separated by commas, each of dotted
 * parts of letters, digits and '_' that do not start with a digit. It is
 * checked here, before any agent imports it, so that a typo is refused to
 * the one who made it and not found by every node in turn. The message
 * quotes what it can print as it is, and names the rest by position.
 */
static int
preload_check(const struct core_join *req, char *err, size_t errlen)
{
	const char	*p = req->preload, *name, *end, *why;
	size_t		 len = strlen(p);
	unsigned	 k = 0;

	if (len > CORE_PRELOAD_MAX) {
		textf(err, errlen, "job %s: preload is %zu bytes, over the "
		    "limit of %d; preload fewer modules (--preload)",
		    req->rdzv_id, len, CORE_PRELOAD_MAX);
		return -1;
	}
	for (name = p;; name = end + 1) {
		k++;
		if ((end = strchr(name, ',')) == NULL)
			end = p + len;
		if (end == name) {
			textf(err, errlen, "job %s: preload \"%s\": module "
			    "name %u is empty; give names separated by single "
			    "commas, such as torch,numpy (--preload)",
			    req->rdzv_id, printable(p, p + len) ? p : "?", k);
			return -1;
		}
		for (const char *q = name; q < end; q++) {
			if ((why = preload_byte_bad(name, q, end)) == NULL)
				continue;
			if (!printable(q, q + 1))
				textf(err, errlen, "job %s: preload module name "
				    "%u has byte 0x%02x, which no module name "
				    "has; give names of letters, digits, '_' "
				    "and '.', such as torch,numpy (--preload)",
				    req->rdzv_id, k, (unsigned char)*q);
			else if (!printable(name, end))
				textf(err, errlen, "job %s: preload module name "
				    "%u is not a module name (%s); give names "
				    "of letters, digits, '_' and '.', separated "
				    "by commas, such as torch,numpy (--preload)",
				    req->rdzv_id, k, why);
			else
				textf(err, errlen, "job %s: preload module name "
				    "\"%.*s\" is not a module name (%s); give "
				    "names of letters, digits, '_' and '.', "
				    "separated by commas, such as torch,numpy "
				    "(--preload)", req->rdzv_id,
				    (int)(end - name), name, why);
			return -1;
		}
		if (*end == '\0')
			return 0;
	}
}

static int
join_validate(const struct core *c, const struct core_join *req,
    struct core_settings *s, char *err, size_t errlen)
{
	if (rdzv_id_check(req->rdzv_id, err, errlen) != 0)
		return CORE_INVALID;
	if (req->nproc < 1 || req->nproc > CORE_NPROC_MAX) {
		textf(err, errlen, "job %s: nproc must be 1 to %d, not %u "
		    "(--nproc-per-node)", req->rdzv_id, CORE_NPROC_MAX,
		    req->nproc);
		return CORE_INVALID;
	}
	if ((req->hostname != NULL && strlen(req->hostname) > CORE_STR_MAX) ||
	    (req->advertise_addr != NULL &&
	    strlen(req->advertise_addr) > CORE_STR_MAX)) {
		textf(err, errlen, "job %s: hostname and advertise address "
		    "must be at most %d bytes", req->rdzv_id, CORE_STR_MAX);
		return CORE_INVALID;
	}
	/* Workers get it as MASTER_PORT: a port no socket can have is
	 * refused here rather than handed to every node of the round. */
	if (req->master_port > 65535) {
		textf(err, errlen, "job %s: master_port %u is not a TCP port "
		    "(1 to 65535)", req->rdzv_id, req->master_port);
		return CORE_INVALID;
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
		return CORE_INVALID;
	}
	if (s->max_nodes > c->cfg.max_nodes_per_job) {
		textf(err, errlen, "job %s: max_nodes %u is over the limit "
		    "of %u nodes per job", req->rdzv_id, s->max_nodes,
		    c->cfg.max_nodes_per_job);
		return CORE_LIMIT;
	}
	/* A join timeout keeps a job that may never form: it is bounded, or
	 * one client could hold jobs for weeks; so are the other two. */
	if (over_limit(c, req, "join timeout", "--join-timeout",
	    s->join_timeout_ms, err, errlen) ||
	    (s->has_rejoin_timeout && over_limit(c, req, "rejoin timeout",
	    "--rejoin-timeout", s->rejoin_timeout_ms, err, errlen)) ||
	    over_limit(c, req, "hang timeout", "--hang-timeout",
	    s->hang_timeout_ms, err, errlen))
		return CORE_INVALID;
	if (s->rank_policy > CORE_RANK_STABLE || s->restart >
	    CORE_RESTART_IN_PROCESS) {
		textf(err, errlen, "job %s: unknown %s %u (--rank-policy "
		    "ordered|stable, --restart process|in-process)",
		    req->rdzv_id, s->rank_policy > CORE_RANK_STABLE ?
		    "rank_policy" : "restart", s->rank_policy > CORE_RANK_STABLE ?
		    s->rank_policy : s->restart);
		return CORE_INVALID;
	}
	/* The preload comes from req->preload alone, checked; "" is unset,
	 * as protobuf has it. */
	s->preload[0] = '\0';
	if (req->preload != NULL && req->preload[0] != '\0') {
		if (preload_check(req, err, errlen) != 0)
			return CORE_INVALID;
		textf(s->preload, sizeof(s->preload), "%s", req->preload);
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
	return CORE_LIMIT;
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
		return CORE_REFUSED;
	}
	if (j->state == CORE_JOB_CLOSING && !requeued(j, attempt)) {
		textf(err, errlen, "job %s is closing (%s) and takes no "
		    "new nodes; use a new --id", j->rdzv_id, j->reason);
		return CORE_REFUSED;
	}
	if (s->min_nodes != 0 && s->min_nodes != j->settings.min_nodes) {
		textf(err, errlen, "job %s: min_nodes is %u but this node "
		    "asked for %u (--nnodes %u:%u)", j->rdzv_id,
		    j->settings.min_nodes, s->min_nodes, s->min_nodes,
		    s->max_nodes);
		return CORE_INVALID;
	}
	if (s->max_nodes != 0 && s->max_nodes != j->settings.max_nodes) {
		textf(err, errlen, "job %s: max_nodes is %u but this node "
		    "asked for %u (--nnodes %u:%u)", j->rdzv_id,
		    j->settings.max_nodes, s->max_nodes, s->min_nodes,
		    s->max_nodes);
		return CORE_INVALID;
	}
	live = j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE];
	if (j->state != CORE_JOB_FAILED && live >= c->cfg.max_nodes_per_job) {
		textf(err, errlen, "job %s has %u nodes, the limit per job",
		    j->rdzv_id, live);
		return CORE_LIMIT;
	}
	return 0;
}

/* A job's first join makes it, with the join's settings and the
 * daemon's defaults for what the join left out. */
static struct core_job *
job_create(struct core *c, struct core_now now, const char *rdzv_id,
    const char *identity, struct core_settings *s)
{
	struct core_job *j;

	j = core_job_new(c, rdzv_id, identity);
	settings_fill(s, &c->cfg.defaults);
	j->settings = *s;
	j->created_ms = now.wall_ms;
	textf(j->reason, sizeof(j->reason), "round 1 is open");
	core_event_add(j, "created", "created by %s: nodes %u:%u, "
	    "max_restarts %u", identity, s->min_nodes, s->max_nodes,
	    s->max_restarts);
	return j;
}

/* Rule 1 and rule 3: an open round takes a new node in; else it waits for
 * the next round, or it is a spare. */
static enum core_node_state
joined_state(const struct core_job *j)
{
	if (j->state == CORE_JOB_WAITING &&
	    j->n_state[CORE_NODE_PARTICIPANT] < j->settings.max_nodes)
		return CORE_NODE_PARTICIPANT;
	if (j->state == CORE_JOB_RUNNING &&
	    j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] < j->settings.max_nodes)
		return CORE_NODE_WAITING;
	return CORE_NODE_SPARE;
}

/* The joining node, as the join describes it, indexed by its token. */
static struct core_node *
node_create(struct core *c, struct core_now now, struct core_job *j,
    const struct core_join *req)
{
	/* Before the node exists: core_node_new() counts it waiting. */
	enum core_node_state	 st = joined_state(j);
	struct core_node	*n;

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
	return n;
}

int
core_join(struct core *c, struct core_now now, const struct core_join *req,
    struct core_node **nodep, char *err, size_t errlen)
{
	const char		*identity;
	struct core_settings	 s;
	struct core_job		*j;
	struct core_node	*n;
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
	if ((rc = core_join_host(c, req, &host_from, err, errlen)) != 0) {
		core_join_refused(c, req, identity, err);
		return rc;
	}
	j = core_job_find(c, req->rdzv_id);
	if (j != NULL &&
	    ((rc = join_existing(c, j, identity, &s, req->attempt, err,
	    errlen)) != 0 || (rc = core_refused_late(j, req, err,
	    errlen)) != 0))
		return rc;
	if (j == NULL && (rc = owner_has_room(c, identity, err, errlen)) != 0)
		return rc;
	if (core_node_by_session(c, req->session_id) != NULL) {
		textf(err, errlen, "job %s: session id collision; retry",
		    req->rdzv_id);
		return CORE_ERROR;
	}

	if (j == NULL)
		j = job_create(c, now, req->rdzv_id, identity, &s);
	else if (j->state == CORE_JOB_FAILED || requeued(j, req->attempt))
		job_reopen(j, req->attempt);
	n = node_create(c, now, j, req);
	core_host_changed(c, host_from, j);

	core_queue_accepted(n, false);
	core_settle(j);
	core_tell_current(n, false);
	if (j->n_nodes == 1)
		core_refusals_take(j, req->attempt);
	job_prune(j);
	if (nodep != NULL)
		*nodep = n;
	return 0;
}
