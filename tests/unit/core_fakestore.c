/* The fake store of the core's tests (core_fakestore.h). */
#include "core_fakestore.h"

void *
fs_grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap == 0 ? 64 : *cap * 2;
	if ((p = realloc(p, *cap * size)) == NULL)
		abort();
	return p;
}

struct fs_job *
fs_job_find(struct fakestore *fs, const char *id)
{
	size_t	i;

	for (i = 0; i < fs->njobs; i++)
		if (strcmp(fs->jobs[i].id, id) == 0)
			return &fs->jobs[i];
	return NULL;
}

struct fs_node *
fs_node_find(struct fakestore *fs, uint64_t node_id)
{
	if (node_id >= fs->capnodes || !fs->nodes[node_id].used)
		return NULL;
	return &fs->nodes[node_id];
}

struct fs_node *
fs_node_add(struct fakestore *fs, uint64_t node_id)
{
	size_t	cap = fs->capnodes;

	if (node_id >= cap) {
		while (node_id >= cap)
			cap = cap == 0 ? 64 : cap * 2;
		fs->nodes = realloc(fs->nodes, cap * sizeof(*fs->nodes));
		if (fs->nodes == NULL)
			abort();
		memset(fs->nodes + fs->capnodes, 0,
		    (cap - fs->capnodes) * sizeof(*fs->nodes));
		fs->capnodes = cap;
	}
	memset(&fs->nodes[node_id], 0, sizeof(fs->nodes[node_id]));
	fs->nodes[node_id].used = true;
	fs->nnodes++;
	return &fs->nodes[node_id];
}

void
fs_node_delete(struct fakestore *fs, struct fs_node *fn)
{
	if (fn != NULL && fn->used) {
		fn->used = false;
		fs->nnodes--;
	}
}

void
fs_commit(struct fakestore *fs, struct core *c)
{
	struct core_job		*j;
	struct core_node	*n;
	struct fs_job		*fj;
	struct fs_node		*fn;
	size_t			 i;

	fs->commits++;
	TAILQ_FOREACH(j, &c->removed_jobs, entry) {
		if ((fj = fs_job_find(fs, j->rdzv_id)) != NULL)
			*fj = fs->jobs[--fs->njobs];
		for (i = 0; i < fs->capnodes; i++)
			if (fs->nodes[i].used &&
			    strcmp(fs->nodes[i].job, j->rdzv_id) == 0)
				fs_node_delete(fs, &fs->nodes[i]);
	}
	TAILQ_FOREACH(n, &c->removed_nodes, entry)
		fs_node_delete(fs, fs_node_find(fs, n->node_id));
	TAILQ_FOREACH(j, &c->dirty_jobs, dirty_entry) {
		if ((fj = fs_job_find(fs, j->rdzv_id)) == NULL) {
			fs->jobs = fs_grow(fs->jobs, &fs->capjobs, fs->njobs,
			    sizeof(*fs->jobs));
			fj = &fs->jobs[fs->njobs++];
			memset(fj, 0, sizeof(*fj));
		}
		snprintf(fj->id, sizeof(fj->id), "%s", j->rdzv_id);
		snprintf(fj->owner, sizeof(fj->owner), "%s", j->owner);
		fj->s = j->settings;
		fj->state = j->state;
		memcpy(fj->reason, j->reason, sizeof(fj->reason));
		fj->held = j->held_failure;
		memcpy(fj->held_reason, j->held_reason,
		    sizeof(fj->held_reason));
		memcpy(fj->rejoin_lost, j->rejoin_lost,
		    sizeof(fj->rejoin_lost));
		fj->generation = j->generation;
		fj->restart_count = j->restart_count;
		fj->attempt = j->attempt;
		fj->created = j->created_ms;
		fj->updated = j->updated_ms;
		fj->ended = j->ended_ms;
		fj->lc_left = j->last_call_left_ms;
		fj->join_left = j->join_left_ms;
		fs->rows++;
	}
	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry) {
		if ((fn = fs_node_find(fs, n->node_id)) == NULL)
			fn = fs_node_add(fs, n->node_id);
		fn->node_id = n->node_id;
		memcpy(fn->session, n->session_id, CORE_SESSION_LEN);
		snprintf(fn->job, sizeof(fn->job), "%s", n->job->rdzv_id);
		snprintf(fn->host, sizeof(fn->host), "%s", n->hostname);
		snprintf(fn->addr, sizeof(fn->addr), "%s", n->advertise_addr);
		fn->master_port = n->master_port;
		fn->port_offer = n->port_offer;
		fn->nproc = n->nproc;
		fn->has_hint = n->has_rank_hint;
		fn->rank_hint = n->rank_hint;
		fn->state = n->state;
		fn->group_rank = n->group_rank;
		fn->base_rank = n->base_rank;
		fn->generation = n->generation;
		fn->arrival = n->arrival;
		fn->joined = n->joined_ms;
		fn->gpus_h = n->gpus_healthy;
		fn->gpus_t = n->gpus_total;
		fn->has_reason = n->reason != NULL;
		snprintf(fn->reason, sizeof(fn->reason), "%s",
		    n->reason != NULL ? n->reason : "");
		fs->rows++;
	}
	for (i = 0; i < c->n_new_events; i++) {
		fj = fs_job_find(fs, c->new_events[i].job->rdzv_id);
		if (fj == NULL || c->new_events[i].seq != fj->event_seq + 1)
			fs->bad_seq++;
		if (fj != NULL)
			fj->event_seq = c->new_events[i].seq;
	}
	fs->next_node_id = c->next_node_id;
}

struct core *
fs_restore(struct fakestore *fs, const struct core_config *cfg,
    struct core_now now, char *err, size_t errlen)
{
	struct core		*c = core_new(cfg);
	struct core_job		*j;
	struct core_node	*n;
	struct fs_job		*fj;
	struct fs_node		*fn;
	size_t			 i;

	for (i = 0; i < fs->njobs; i++) {
		fj = &fs->jobs[i];
		if ((j = core_restore_job(c, fj->id, fj->owner)) == NULL) {
			snprintf(err, errlen, "restore job %s", fj->id);
			core_free(c);
			return NULL;
		}
		j->settings = fj->s;
		j->state = fj->state;
		memcpy(j->reason, fj->reason, sizeof(j->reason));
		j->held_failure = fj->held;
		memcpy(j->held_reason, fj->held_reason,
		    sizeof(j->held_reason));
		memcpy(j->rejoin_lost, fj->rejoin_lost,
		    sizeof(j->rejoin_lost));
		j->generation = fj->generation;
		j->restart_count = fj->restart_count;
		j->attempt = fj->attempt;
		j->created_ms = fj->created;
		j->updated_ms = fj->updated;
		j->ended_ms = fj->ended;
		j->event_seq = fj->event_seq;
		j->last_call_left_ms = fj->lc_left;
		j->join_left_ms = fj->join_left;
	}
	for (i = 0; i < fs->capnodes; i++) {
		fn = &fs->nodes[i];
		if (!fn->used)
			continue;
		j = core_job_find(c, fn->job);
		if (j == NULL || (n = core_restore_node(c, j, fn->node_id,
		    fn->session, fn->host, fn->addr)) == NULL) {
			snprintf(err, errlen, "restore node %llu",
			    (unsigned long long)fn->node_id);
			core_free(c);
			return NULL;
		}
		n->master_port = fn->master_port;
		n->nproc = fn->nproc;
		n->has_rank_hint = fn->has_hint;
		n->rank_hint = fn->rank_hint;
		n->state = fn->state;
		n->group_rank = fn->group_rank;
		n->base_rank = fn->base_rank;
		n->generation = fn->generation;
		n->arrival = fn->arrival;
		n->joined_ms = fn->joined;
		n->gpus_healthy = fn->gpus_h;
		n->gpus_total = fn->gpus_t;
		n->port_offer = fn->port_offer;
		if (fn->has_reason)
			core_node_set_reason(n, fn->reason);
	}
	if (core_restore_finish(c, now, fs->next_node_id, err, errlen) != 0) {
		core_free(c);
		return NULL;
	}
	return c;
}

void
fs_free(struct fakestore *fs)
{
	free(fs->jobs);
	free(fs->nodes);
	memset(fs, 0, sizeof(*fs));
}
