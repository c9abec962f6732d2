/*
 * Core state to protobuf-c messages and back, and nothing else: no clock, no
 * connection, no call. What a message needs from outside the core (the time,
 * when a node was last heard from) comes in as arguments. protobuf-c
 * messages point at their arrays and strings; an arena owns what a
 * conversion allocates, so a reply is built, sent and released in three
 * lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "xmalloc.h"

void *
convert_alloc(struct convert_arena *a, size_t size)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->ptrs = xreallocarray(a->ptrs, a->cap, sizeof(*a->ptrs));
	}
	return a->ptrs[a->n++] = xcalloc(1, size);
}

void
convert_free(struct convert_arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->ptrs[i]);
	free(a->ptrs);
	memset(a, 0, sizeof(*a));
}

static Rdzv__V1__JobSettings *
settings_to_pb(struct convert_arena *a, const struct core_settings *s)
{
	Rdzv__V1__JobSettings *m = convert_alloc(a, sizeof(*m));
	rdzv__v1__job_settings__init(m);
	m->min_nodes = s->min_nodes;
	m->max_nodes = s->max_nodes;
	m->last_call_timeout_ms = s->last_call_timeout_ms;
	m->join_timeout_ms = s->join_timeout_ms;
	m->max_restarts = s->max_restarts;
	m->lease_ttl_ms = s->lease_ttl_ms;
	m->reconnect_grace_ms = s->reconnect_grace_ms;
	m->rejoin_timeout_ms = s->rejoin_timeout_ms;
	m->hang_timeout_ms = s->hang_timeout_ms;
	m->rank_policy = (Rdzv__V1__RankPolicy)s->rank_policy;
	m->restart = (Rdzv__V1__RestartMode)s->restart;
	m->preload = (char *)s->preload;
	return m;
}

void
convert_event(struct convert_arena *a, const struct core_event *e,
    Rdzv__V1__Event *m)
{
	rdzv__v1__event__init(m);
	m->seq = e->seq;
	m->time_unix_ms = e->wall_ms;
	m->generation = e->generation;
	m->kind = (char *)e->kind;
	m->message = (char *)e->message;
}

static Rdzv__V1__GpuResult *
gpu_to_pb(struct convert_arena *a, const struct core_gpu *g)
{
	Rdzv__V1__GpuResult *m = convert_alloc(a, sizeof(*m));
	rdzv__v1__gpu_result__init(m);
	m->device = g->device;
	m->ok = g->ok;
	m->name = (char *)g->name;
	m->uuid = (char *)g->uuid;
	m->failed_step = (char *)g->failed_step;
	m->error = (char *)g->error;
	m->total_mem = g->total_mem;
	return m;
}

/*
 * A connected node not heard for |silent_ms| (twice the keepalive: its
 * PINGs go unanswered) is silent: its lease runs, from its last frame.
 */
static Rdzv__V1__Node *
node_to_pb(struct convert_arena *a, const struct core_node *n,
    int64_t last_seen_ms, int64_t now_ms, uint32_t silent_ms,
    const struct core_node_progress *p)
{
	Rdzv__V1__Node *m = convert_alloc(a, sizeof(*m));
	rdzv__v1__node__init(m);
	m->node_id = n->node_id;
	m->hostname = n->hostname;
	m->advertise_addr = n->advertise_addr;
	m->state = (Rdzv__V1__NodeState)n->state;
	m->group_rank = n->group_rank;
	m->base_rank = n->base_rank;
	m->nproc = n->nproc;
	m->has_rank_hint = n->has_rank_hint;
	m->rank_hint = n->rank_hint;
	m->gpus_healthy = n->gpus_healthy;
	m->gpus_total = n->gpus_total;
	if (n->n_gpus > 0) {
		m->n_gpus = n->n_gpus;
		m->gpus = convert_alloc(a, n->n_gpus * sizeof(*m->gpus));
		for (uint32_t i = 0; i < n->n_gpus; i++)
			m->gpus[i] = gpu_to_pb(a, &n->gpus[i]);
	}
	m->last_seen_unix_ms = last_seen_ms;
	m->joined_unix_ms = n->joined_ms;
	m->connected = n->connected;
	m->silent = n->connected && last_seen_ms != 0 &&
	    now_ms - last_seen_ms >= (int64_t)silent_ms;
	m->has_step = p->has_step;
	m->step = p->step;
	m->step_unix_ms = p->step_wall_ms;
	m->steps_behind = p->steps_behind;
	m->behind_ms = p->behind_ms;
	m->straggler = p->straggler;
	return m;
}

Rdzv__V1__Job *
convert_job(struct convert_arena *a, const struct core_job *j,
    struct core_now now, const struct convert_job_view *view)
{
	uint32_t events = view->events;
	Rdzv__V1__Job *m = convert_alloc(a, sizeof(*m));
	rdzv__v1__job__init(m);
	m->rdzv_id = (char *)j->rdzv_id;
	m->owner = j->owner;
	m->state = (Rdzv__V1__JobState)j->state;
	m->reason = (char *)j->reason;
	m->settings = settings_to_pb(a, &j->settings);
	m->generation = j->generation;
	m->restart_count = j->restart_count;
	m->world_size = j->world_size;
	m->master_addr = (char *)j->master_addr;
	m->master_port = j->master_port;
	m->participants = j->n_state[CORE_NODE_PARTICIPANT];
	m->waiting = j->n_state[CORE_NODE_WAITING];
	m->spares = j->n_state[CORE_NODE_SPARE];
	m->created_unix_ms = j->created_ms;
	m->updated_unix_ms = j->updated_ms;
	m->ended_unix_ms = j->ended_ms;
	m->last_call_in_ms = core_job_last_call_in(j, now);
	m->join_timeout_in_ms = core_job_join_timeout_in(j, now);
	m->attempt = j->attempt;
	m->held_failure = (char *)j->held_reason;	/* "" when none */
	/* With the nodes only: a list of jobs does not walk every node. */
	if (view->last_seen != NULL)
		m->has_lead_step = core_job_progress(j, now, &m->lead_step,
		    &m->stragglers);

	if (view->last_seen != NULL && j->n_nodes > 0) {
		const struct core_node *n;
		struct core_node_progress p;
		m->nodes = convert_alloc(a, j->n_nodes * sizeof(*m->nodes));
		TAILQ_FOREACH(n, &j->nodes, entry) {
			core_node_progress(n, m->lead_step, now, &p);
			m->nodes[m->n_nodes++] = node_to_pb(a, n,
			    view->last_seen(n, now), now.wall_ms,
			    view->silent_ms, &p);
		}
	}
	if (events > j->events_n)
		events = j->events_n;
	if (events > 0) {
		Rdzv__V1__Event *ev = convert_alloc(a, events * sizeof(*ev));
		m->events = convert_alloc(a, events * sizeof(*m->events));
		for (uint32_t i = 0; i < events; i++) {
			convert_event(a,
			    core_job_event(j, j->events_n - events + i),
			    &ev[i]);
			m->events[m->n_events++] = &ev[i];
		}
	}
	return m;
}

void
convert_msg(struct convert_arena *a, const struct core_node *node,
    const struct core_msg *msg, Rdzv__V1__JoinEvent *ev)
{
	rdzv__v1__join_event__init(ev);
	switch (msg->kind) {
	case CORE_MSG_ACCEPTED: {
		Rdzv__V1__Accepted *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__accepted__init(m);
		m->node_id = msg->u.accepted.node_id;
		m->session_id.data = (uint8_t *)msg->u.accepted.session_id;
		m->session_id.len = CORE_SESSION_LEN;
		m->settings = settings_to_pb(a, &msg->u.accepted.settings);
		m->resumed = msg->u.accepted.resumed;
		m->attempt = msg->u.accepted.attempt;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_ACCEPTED;
		ev->accepted = m;
		break;
	}
	case CORE_MSG_WAITING: {
		Rdzv__V1__Waiting *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__waiting__init(m);
		m->state = (Rdzv__V1__NodeState)msg->u.waiting.state;
		m->participants = msg->u.waiting.participants;
		m->min_nodes = msg->u.waiting.min_nodes;
		m->max_nodes = msg->u.waiting.max_nodes;
		m->fails_in_ms = msg->u.waiting.fails_in_ms;
		m->reason = (char *)msg->reason;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_WAITING;
		ev->waiting = m;
		break;
	}
	case CORE_MSG_ASSIGNMENT: {
		const struct core_assignment *s = &msg->u.assignment;
		Rdzv__V1__Assignment *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__assignment__init(m);
		m->rdzv_id = (char *)node->job->rdzv_id;
		m->generation = s->generation;
		m->group_rank = s->group_rank;
		m->group_world_size = s->group_world_size;
		m->base_rank = s->base_rank;
		m->local_world_size = s->local_world_size;
		m->world_size = s->world_size;
		m->master_addr = (char *)s->master_addr;
		m->master_port = s->master_port;
		m->restart_count = s->restart_count;
		m->max_restarts = s->max_restarts;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_ASSIGNMENT;
		ev->assignment = m;
		break;
	}
	case CORE_MSG_STOP: {
		Rdzv__V1__Stop *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__stop__init(m);
		m->generation = msg->u.stop.generation;
		m->reason = (char *)msg->reason;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_STOP;
		ev->stop = m;
		break;
	}
	case CORE_MSG_CLOSED: {
		Rdzv__V1__Closed *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__closed__init(m);
		m->reason = (char *)msg->reason;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_CLOSED;
		ev->closed = m;
		break;
	}
	case CORE_MSG_FAILED: {
		Rdzv__V1__Failed *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__failed__init(m);
		m->reason = (char *)msg->reason;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_FAILED;
		ev->failed = m;
		break;
	}
	case CORE_MSG_EVICTED: {
		Rdzv__V1__Evicted *m = convert_alloc(a, sizeof(*m));
		rdzv__v1__evicted__init(m);
		m->reason = (char *)msg->reason;
		ev->event_case = RDZV__V1__JOIN_EVENT__EVENT_EVICTED;
		ev->evicted = m;
		break;
	}
	case CORE_MSG_LEFT:
	case CORE_MSG_LOST:
		break;		/* no event: rpc_streams.c ends the stream */
	}
}

int
convert_gpus(Rdzv__V1__GpuResult **gpus, size_t n, struct core_gpu **out,
    uint32_t *healthy, uint32_t *total, char *err, size_t errlen)
{
	struct core_gpu *g;

	*out = NULL;
	*healthy = *total = 0;
	if (n == 0)
		return 0;
	if (n > CONVERT_GPUS_MAX) {
		snprintf(err, errlen, "%zu GPU results; a node has at most %d",
		    n, CONVERT_GPUS_MAX);
		return -1;
	}
	g = xcalloc(n, sizeof(*g));
	for (size_t i = 0; i < n; i++) {
		g[i].device = gpus[i]->device;
		g[i].ok = gpus[i]->ok;
		snprintf(g[i].name, sizeof(g[i].name), "%s", gpus[i]->name);
		snprintf(g[i].uuid, sizeof(g[i].uuid), "%s", gpus[i]->uuid);
		snprintf(g[i].failed_step, sizeof(g[i].failed_step), "%s",
		    gpus[i]->failed_step);
		snprintf(g[i].error, sizeof(g[i].error), "%s",
		    gpus[i]->error);
		g[i].total_mem = gpus[i]->total_mem;
		if (g[i].ok)
			(*healthy)++;
	}
	*total = (uint32_t)n;
	*out = g;
	return 0;
}

/* A host record as Control.ListHosts and SetHost return it; |window_ms|
 * is the policy's crash window, for the crashes that still count. */
Rdzv__V1__Host *
convert_host(struct convert_arena *a, const struct host *h,
    struct core_now now, uint64_t window_ms)
{
	Rdzv__V1__Host *m = convert_alloc(a, sizeof(*m));

	rdzv__v1__host__init(m);
	m->name = h->name;
	m->state = (Rdzv__V1__HostState)h->state;
	m->reason = (char *)h->reason;
	m->since_unix_ms = h->since_ms;
	m->updated_unix_ms = h->updated_ms;
	m->crashes = h->crashes;
	m->gpu_failures = h->gpu_failures;
	for (uint32_t i = 0; i < h->n_crash; i++)
		if (now.wall_ms - h->crash_ms[i] < (int64_t)window_ms)
			m->recent_crashes++;
	m->gpus = convert_alloc(a, (h->n_gpus + 1) * sizeof(*m->gpus));
	for (uint32_t i = 0; i < h->n_gpus; i++)
		m->gpus[m->n_gpus++] = gpu_to_pb(a, &h->gpus[i]);
	return m;
}
