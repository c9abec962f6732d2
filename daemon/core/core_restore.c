/*
 * Rebuilding the core from the store after a daemon restart (SPEC §4 rule
 * 11), and the check of every invariant the rest of the core keeps, which
 * the tests run after each step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"
#include "errf.h"

struct core_job *
core_restore_job(struct core *c, const char *rdzv_id, const char *owner)
{
	char	err[CORE_REASON_MAX];

	if (rdzv_id_check(rdzv_id, err, sizeof(err)) != 0 ||
	    core_job_find(c, rdzv_id) != NULL)
		return NULL;
	return core_job_new(c, rdzv_id, owner != NULL ? owner : "anonymous");
}

struct core_node *
core_restore_node(struct core *c, struct core_job *j, uint64_t node_id,
    const uint8_t session_id[CORE_SESSION_LEN], const char *hostname,
    const char *advertise_addr)
{
	if (node_id == 0 || core_node_find(c, node_id) != NULL ||
	    core_node_by_session(c, session_id) != NULL)
		return NULL;
	return core_node_new(j, node_id, session_id, hostname, advertise_addr);
}

static int
match_token(const void *item, const void *key)
{
	return memcmp(((const struct core_node *)item)->join_token, key,
	    CORE_TOKEN_LEN) == 0;
}

void
core_restore_node_token(struct core_node *n,
    const uint8_t token[CORE_TOKEN_LEN])
{
	struct core	*c = n->job->core;
	uint64_t	 hv = hash_bytes(token, CORE_TOKEN_LEN);

	if (n->has_token || hash_find(&c->by_token, hv, match_token, token) !=
	    NULL)
		return;
	memcpy(n->join_token, token, CORE_TOKEN_LEN);
	if (hash_insert(&c->by_token, hv, n) != 0)
		return;		/* out of memory: the node has no token */
	n->has_token = true;
}

static int
arrival_cmp(const void *a, const void *b)
{
	const struct core_node	*x = *(struct core_node *const *)a;
	const struct core_node	*y = *(struct core_node *const *)b;

	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	return x->node_id < y->node_id ? -1 : x->node_id > y->node_id;
}

/* Nodes in arrival order, counters, and the round from the group ranks. */
static int
restore_job_finish(struct core_job *j, char *err, size_t errlen)
{
	struct core_node	**v, *n;
	uint32_t		  i, k = 0, base = 0;

	if (j->state < CORE_JOB_WAITING || j->state > CORE_JOB_FAILED)
		return errf(-1, err, errlen, "job %s: bad state %d", j->rdzv_id,
		    (int)j->state);
	if (j->settings.min_nodes < 1 ||
	    j->settings.min_nodes > j->settings.max_nodes)
		return errf(-1, err, errlen, "job %s: bad min/max nodes %u:%u",
		    j->rdzv_id, j->settings.min_nodes, j->settings.max_nodes);
	v = xcalloc(j->n_nodes, sizeof(*v));
	TAILQ_FOREACH(n, &j->nodes, entry)
		v[k++] = n;
	qsort(v, k, sizeof(*v), arrival_cmp);
	TAILQ_INIT(&j->nodes);
	TAILQ_INIT(&j->ended);
	memset(j->n_state, 0, sizeof(j->n_state));
	free(j->round);
	j->round = NULL;
	j->round_n = j->round_cap = 0;
	for (i = 0; i < k; i++) {
		n = v[i];
		TAILQ_INSERT_TAIL(&j->nodes, n, entry);
		if (n->state < CORE_NODE_PARTICIPANT ||
		    n->state >= CORE_NODE_NSTATES) {
			free(v);
			return errf(-1, err, errlen, "job %s: node %llu has bad "
			    "state %d", j->rdzv_id,
			    (unsigned long long)n->node_id, (int)n->state);
		}
		j->n_state[n->state]++;
		n->in_ended = !core_node_live(n);
		if (n->in_ended)
			TAILQ_INSERT_TAIL(&j->ended, n, ended_entry);
		if (n->group_rank >= 0)
			j->round_n++;
	}
	if (j->state == CORE_JOB_WAITING)
		j->round_n = 0;
	j->round_cap = j->round_n;
	j->round = xcalloc(j->round_cap, sizeof(*j->round));
	for (i = 0; i < k; i++) {
		n = v[i];
		if (n->group_rank < 0)
			continue;
		if (j->state == CORE_JOB_WAITING) {
			n->group_rank = -1;
			n->generation = 0;
			continue;
		}
		if ((uint32_t)n->group_rank >= j->round_n ||
		    j->round[n->group_rank] != NULL) {
			free(v);
			return errf(-1, err, errlen, "job %s: group ranks of "
			    "generation %llu are not 0..%u", j->rdzv_id,
			    (unsigned long long)j->generation, j->round_n - 1);
		}
		j->round[n->group_rank] = n;
	}
	free(v);
	for (i = 0; i < j->round_n; i++) {
		n = j->round[i];
		if (n->base_rank != base)
			return errf(-1, err, errlen, "job %s: node %llu has base "
			    "rank %u, not %u", j->rdzv_id,
			    (unsigned long long)n->node_id, n->base_rank, base);
		base += n->nproc;
	}
	j->world_size = base;
	if (j->round_n > 0) {
		textcpy(j->master_addr, sizeof(j->master_addr),
		    j->round[0]->advertise_addr);
		j->master_port = j->round[0]->master_port;
	}
	return 0;
}

/*
 * Rule 11: leases of live nodes run lease_ttl from now, so agents have
 * time to reconnect; open deadlines resume with the time they had left;
 * retention counts in wall time.
 */
int
core_restore_finish(struct core *c, struct core_now now,
    uint64_t next_node_id, char *err, size_t errlen)
{
	struct core_job		*j;
	struct core_node	*n;
	uint64_t		 max_id = 0, max_arrival = 0;
	int64_t			 left;

	core_set_now(c, now);
	/* Kept refusals were restored with their time left. */
	for (size_t i = 0; i < c->n_refusals; i++)
		c->refusals[i].until_ms += now.mono_ms;
	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (restore_job_finish(j, err, errlen) != 0)
			return -1;
		core_progress_restored(j, now);
		if (j->state == CORE_JOB_WAITING ||
		    j->state == CORE_JOB_RUNNING) {
			if (j->last_call_left_ms >= 0)
				core_timer_set(c, &j->last_call, now.mono_ms +
				    (uint64_t)j->last_call_left_ms);
			if (j->join_left_ms >= 0 &&
			    j->state == CORE_JOB_WAITING)
				core_timer_set(c, &j->join_deadline,
				    now.mono_ms + (uint64_t)j->join_left_ms);
		}
		if (core_job_ended(j)) {
			left = j->ended_ms + (int64_t)c->cfg.retention_ms -
			    now.wall_ms;
			core_timer_set(c, &j->retention, now.mono_ms +
			    (uint64_t)(left > 0 ? left : 0));
		}
		TAILQ_FOREACH(n, &j->nodes, entry) {
			if (n->node_id > max_id)
				max_id = n->node_id;
			if (n->arrival > max_arrival)
				max_arrival = n->arrival;
			n->connected = false;
			if (core_node_live(n) && !core_job_ended(j))
				core_timer_set(c, &n->lease, now.mono_ms +
				    j->settings.lease_ttl_ms);
		}
	}
	c->next_node_id = next_node_id > max_id ? next_node_id : max_id + 1;
	c->next_arrival = max_arrival + 1;
	core_owners_restore(c);
	/* Whatever the saved state left undecided is decided now. */
	TAILQ_FOREACH(j, &c->jobs, entry)
		core_settle(j);
	return 0;
}

/* Each node of the job: its own, indexed, in arrival order, leased only
 * while it may come back, and in the round at its rank. Counts them by
 * state into |cnt| and in all into |*nn|. */
static int
check_nodes(const struct core *c, const struct core_job *j, uint32_t *cnt,
    uint32_t *nn, char *err, size_t errlen)
{
	const struct core_node	*n;
	uint64_t		 arrival = 0;
	bool			 ended = core_job_ended(j);

	TAILQ_FOREACH(n, &j->nodes, entry) {
		(*nn)++;
		if (n->job != j || n->removed || n->state < 1 ||
		    n->state >= CORE_NODE_NSTATES)
			return errf(-1, err, errlen, "job %s: node %llu bad",
			    j->rdzv_id, (unsigned long long)n->node_id);
		cnt[n->state]++;
		if (core_node_find(c, n->node_id) != n ||
		    core_node_by_session(c, n->session_id) != n)
			return errf(-1, err, errlen, "job %s: node %llu not "
			    "indexed", j->rdzv_id,
			    (unsigned long long)n->node_id);
		if (n->arrival <= arrival)
			return errf(-1, err, errlen, "job %s: nodes not in "
			    "arrival order", j->rdzv_id);
		arrival = n->arrival;
		if (core_timer_armed(&n->lease) && (!core_node_live(n) ||
		    n->connected || ended))
			return errf(-1, err, errlen, "job %s: node %llu has a "
			    "lease it should not", j->rdzv_id,
			    (unsigned long long)n->node_id);
		if (n->group_rank >= 0 && ((uint32_t)n->group_rank >=
		    j->round_n || j->round[n->group_rank] != n))
			return errf(-1, err, errlen, "job %s: node %llu group "
			    "rank %d not in the round", j->rdzv_id,
			    (unsigned long long)n->node_id, n->group_rank);
	}
	return 0;
}

/* The ended list holds exactly the nodes that are not live, and the job's
 * counters agree with the nodes counted. */
static int
check_counts(const struct core_job *j, const uint32_t *cnt, uint32_t nn,
    char *err, size_t errlen)
{
	const struct core_node	*n;
	uint32_t		 i = 0;

	TAILQ_FOREACH(n, &j->ended, ended_entry) {
		if (!n->in_ended || core_node_live(n) || n->job != j)
			return errf(-1, err, errlen, "job %s: ended list wrong",
			    j->rdzv_id);
		i++;
	}
	if (i != nn - cnt[CORE_NODE_PARTICIPANT] - cnt[CORE_NODE_WAITING] -
	    cnt[CORE_NODE_SPARE])
		return errf(-1, err, errlen, "job %s: %u nodes in the ended list",
		    j->rdzv_id, i);
	if (nn != j->n_nodes ||
	    memcmp(cnt, j->n_state, sizeof(j->n_state)) != 0)
		return errf(-1, err, errlen, "job %s: node counters wrong",
		    j->rdzv_id);
	return 0;
}

/* The round: ranks in order, base ranks the prefix sums of nproc, one
 * generation, the world size their sum, and the master rank 0's. */
static int
check_round(const struct core_job *j, char *err, size_t errlen)
{
	const struct core_node	*n;
	uint32_t		 base = 0;

	for (uint32_t i = 0; i < j->round_n; i++) {
		n = j->round[i];
		if (n->job != j || n->group_rank != (int32_t)i ||
		    n->base_rank != base || n->generation != j->generation)
			return errf(-1, err, errlen, "job %s: round member %u "
			    "wrong (rank %d base %u/%u gen %llu/%llu)",
			    j->rdzv_id, i, n->group_rank, n->base_rank, base,
			    (unsigned long long)n->generation,
			    (unsigned long long)j->generation);
		base += n->nproc;
	}
	if (base != j->world_size)
		return errf(-1, err, errlen, "job %s: world size %u, not %u",
		    j->rdzv_id, j->world_size, base);
	if (j->round_n > 0 && (strcmp(j->master_addr,
	    j->round[0]->advertise_addr) != 0 ||
	    j->master_port != j->round[0]->master_port))
		return errf(-1, err, errlen, "job %s: master is not rank 0's",
		    j->rdzv_id);
	return 0;
}

/* What each job state allows of its nodes by state and of its timers. */
static int
check_state(const struct core_job *j, const uint32_t *cnt, char *err,
    size_t errlen)
{
	uint32_t p, w, s, min, max;

	p = cnt[CORE_NODE_PARTICIPANT];
	w = cnt[CORE_NODE_WAITING];
	s = cnt[CORE_NODE_SPARE];
	min = j->settings.min_nodes;
	max = j->settings.max_nodes;
	switch (j->state) {
	case CORE_JOB_WAITING:
		if (j->round_n != 0 || w != 0 || s != 0 || p >= max ||
		    core_timer_armed(&j->last_call) != (p >= min) ||
		    core_timer_armed(&j->join_deadline) != (p < min) ||
		    core_timer_armed(&j->retention))
			return errf(-1, err, errlen, "job %s: open round wrong "
			    "(p %u w %u s %u)", j->rdzv_id, p, w, s);
		break;
	case CORE_JOB_RUNNING:
		/* While a failure is held, waiting nodes wait for it. */
		if (j->round_n == 0 || p != j->round_n || p < min ||
		    p + w > max || (s > 0 && p + w != max) ||
		    (!j->held_failure &&
		    core_timer_armed(&j->last_call) != (w > 0)) ||
		    core_timer_armed(&j->join_deadline) ||
		    core_timer_armed(&j->retention))
			return errf(-1, err, errlen, "job %s: running round wrong "
			    "(p %u w %u s %u round %u)", j->rdzv_id, p, w, s,
			    j->round_n);
		for (uint32_t i = 0; i < j->round_n; i++) {
			if (j->round[i]->state != CORE_NODE_PARTICIPANT)
				return errf(-1, err, errlen, "job %s: round member "
				    "not a participant", j->rdzv_id);
		}
		break;
	case CORE_JOB_CLOSING:
		if (j->round_n == 0 || p == 0 ||
		    core_timer_armed(&j->last_call) ||
		    core_timer_armed(&j->join_deadline))
			return errf(-1, err, errlen, "job %s: closing wrong",
			    j->rdzv_id);
		break;
	case CORE_JOB_CLOSED:
	case CORE_JOB_FAILED:
		if (p + w + s != 0 || !core_timer_armed(&j->retention) ||
		    core_timer_armed(&j->last_call) ||
		    core_timer_armed(&j->join_deadline))
			return errf(-1, err, errlen, "job %s: ended job wrong",
			    j->rdzv_id);
		break;
	default:
		return errf(-1, err, errlen, "job %s: bad state", j->rdzv_id);
	}
	return 0;
}

static int
check_job(const struct core *c, const struct core_job *j, size_t *nnodes,
    char *err, size_t errlen)
{
	uint32_t cnt[CORE_NODE_NSTATES] = { 0 }, nn = 0;

	if (core_job_find(c, j->rdzv_id) != j || j->core != c || j->removed)
		return errf(-1, err, errlen, "job %s: not indexed", j->rdzv_id);
	if (check_nodes(c, j, cnt, &nn, err, errlen) != 0)
		return -1;
	*nnodes += nn;
	if (check_counts(j, cnt, nn, err, errlen) != 0 ||
	    check_round(j, err, errlen) != 0)
		return -1;
	if (j->restart_count > j->settings.max_restarts + 1 ||
	    (j->state != CORE_JOB_FAILED &&
	    j->restart_count > j->settings.max_restarts))
		return errf(-1, err, errlen, "job %s: restart count %u of max %u",
		    j->rdzv_id, j->restart_count, j->settings.max_restarts);
	return check_state(j, cnt, err, errlen);
}

/* Every ended job is on its owner's list, once, in the order they ended;
 * no owner keeps more than the bound. */
static int
check_owners(const struct core *c, char *err, size_t errlen)
{
	const struct core_job	*j, *prev;
	const struct core_owner	*o;
	uint32_t		 n, ended = 0, listed = 0;

	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (j->own == NULL || strcmp(j->own->name, j->owner) != 0)
			return errf(-1, err, errlen, "job %s: owner record",
			    j->rdzv_id);
		if (core_job_ended(j) != j->in_owner_ended)
			return errf(-1, err, errlen, "job %s: %s but %son its "
			    "owner's ended list", j->rdzv_id,
			    core_job_state_name(j->state),
			    j->in_owner_ended ? "" : "not ");
		ended += core_job_ended(j);
	}
	for (size_t i = 0; i < c->by_owner.cap; i++) {
		if ((o = c->by_owner.slots[i].item) == NULL)
			continue;
		n = 0;
		prev = NULL;
		TAILQ_FOREACH(j, &o->ended, owner_entry) {
			if (j->own != o || (prev != NULL &&
			    prev->ended_ms > j->ended_ms))
				return errf(-1, err, errlen, "owner %s: ended "
				    "list out of order at %s", o->name,
				    j->rdzv_id);
			prev = j;
			n++;
		}
		if (n != o->n_ended || (c->cfg.max_ended_per_owner > 0 &&
		    n > c->cfg.max_ended_per_owner))
			return errf(-1, err, errlen, "owner %s: %u ended jobs "
			    "listed, %u counted, bound %u", o->name, n,
			    o->n_ended, c->cfg.max_ended_per_owner);
		listed += n;
	}
	if (listed != ended)
		return errf(-1, err, errlen, "%u ended jobs, %u on owners' "
		    "lists", ended, listed);
	return 0;
}

int
core_check(const struct core *c, char *err, size_t errlen)
{
	const struct core_job	*j;
	const struct core_timer	*t;
	size_t			 nnodes = 0, i;
	uint32_t		 njobs = 0;

	TAILQ_FOREACH(j, &c->jobs, entry) {
		njobs++;
		if (check_job(c, j, &nnodes, err, errlen) != 0)
			return -1;
	}
	if (njobs != c->n_jobs || c->by_id.n != njobs ||
	    c->by_node.n != nnodes || c->by_session.n != nnodes)
		return errf(-1, err, errlen, "indexes disagree with lists: jobs "
		    "%u/%u/%zu nodes %zu/%zu/%zu", njobs, c->n_jobs,
		    c->by_id.n, nnodes, c->by_node.n, c->by_session.n);
	for (i = 0; i < c->heap_n; i++) {
		t = c->heap[i];
		if (t->idx != i || (i > 0 && c->heap[(i - 1) / 2]->at > t->at))
			return errf(-1, err, errlen, "timer heap broken at %zu", i);
	}
	if (!TAILQ_EMPTY(&c->settle))
		return errf(-1, err, errlen, "jobs left unsettled");
	return check_owners(c, err, errlen);
}
