/*
 * The core's plumbing: allocation, the timer heap, change tracking, the
 * event history and the per-node outboxes. Nothing here decides anything
 * about a job; core.c and core_round.c do.
 */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CORE_INTERNAL
#include "core.h"
#include "text.h"

/* ---------------------------------------------------------------- timers */

/*
 * One binary min-heap holds every armed deadline (last calls, join
 * timeouts, retention, leases), so the daemon arms a single timer and
 * core_advance() pops only what is due.
 */
void
core_timer_init(struct core_timer *t, int kind, void *owner)
{
	t->at = 0;
	t->idx = SIZE_MAX;
	t->kind = kind;
	t->owner = owner;
}

bool
core_timer_armed(const struct core_timer *t)
{
	return t->idx != SIZE_MAX;
}

static void
heap_swap(struct core *c, size_t a, size_t b)
{
	struct core_timer	*t = c->heap[a];

	c->heap[a] = c->heap[b];
	c->heap[b] = t;
	c->heap[a]->idx = a;
	c->heap[b]->idx = b;
}

static void
heap_up(struct core *c, size_t i)
{
	while (i > 0 && c->heap[(i - 1) / 2]->at > c->heap[i]->at) {
		heap_swap(c, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void
heap_down(struct core *c, size_t i)
{
	size_t	l, r, m;

	for (;;) {
		l = 2 * i + 1;
		r = l + 1;
		m = i;
		if (l < c->heap_n && c->heap[l]->at < c->heap[m]->at)
			m = l;
		if (r < c->heap_n && c->heap[r]->at < c->heap[m]->at)
			m = r;
		if (m == i)
			return;
		heap_swap(c, i, m);
		i = m;
	}
}

void
core_timer_clear(struct core *c, struct core_timer *t)
{
	size_t	i = t->idx;

	if (i == SIZE_MAX)
		return;
	assert(i < c->heap_n && c->heap[i] == t);
	c->heap_n--;
	if (i != c->heap_n) {
		c->heap[i] = c->heap[c->heap_n];
		c->heap[i]->idx = i;
		heap_down(c, i);
		heap_up(c, i);
	}
	t->idx = SIZE_MAX;
	t->at = 0;
}

void
core_timer_set(struct core *c, struct core_timer *t, uint64_t at)
{
	if (core_timer_armed(t)) {
		assert(t->idx < c->heap_n && c->heap[t->idx] == t);
		t->at = at;
		heap_down(c, t->idx);
		heap_up(c, t->idx);
		return;
	}
	if (c->heap_n == c->heap_cap) {
		c->heap_cap = c->heap_cap == 0 ? 64 : c->heap_cap * 2;
		c->heap = xreallocarray(c->heap, c->heap_cap,
		    sizeof(*c->heap));
	}
	t->at = at;
	t->idx = c->heap_n;
	c->heap[c->heap_n++] = t;
	heap_up(c, t->idx);
}

struct core_timer *
core_timer_top(const struct core *c)
{
	return c->heap_n == 0 ? NULL : c->heap[0];
}

static int64_t
timer_in(const struct core_timer *t, struct core_now now)
{
	if (!core_timer_armed(t))
		return -1;
	return t->at > now.mono_ms ? (int64_t)(t->at - now.mono_ms) : 0;
}

int64_t
core_job_last_call_in(const struct core_job *j, struct core_now now)
{
	return timer_in(&j->last_call, now);
}

int64_t
core_job_join_timeout_in(const struct core_job *j, struct core_now now)
{
	return timer_in(&j->join_deadline, now);
}

/* ------------------------------------------------------- change tracking */

/*
 * Dirty objects are rows the store must write this turn; changed jobs are
 * what Control.Watch streams are told about. A node's change changes its
 * job's view but not its job's row.
 */
void
core_job_changed(struct core_job *j)
{
	j->steps_only = false;
	if (j->changed || j->removed)
		return;
	j->changed = true;
	TAILQ_INSERT_TAIL(&j->core->changed_jobs, j, changed_entry);
}

void
core_job_dirty(struct core_job *j)
{
	struct core	*c = j->core;

	if (j->removed)
		return;
	j->updated_ms = c->now.wall_ms;
	j->last_call_left_ms = core_job_last_call_in(j, c->now);
	j->join_left_ms = core_job_join_timeout_in(j, c->now);
	if (!j->dirty) {
		j->dirty = true;
		TAILQ_INSERT_TAIL(&c->dirty_jobs, j, dirty_entry);
	}
	core_job_changed(j);
}

void
core_node_dirty(struct core_node *n)
{
	if (n->removed)
		return;
	if (!n->dirty) {
		n->dirty = true;
		TAILQ_INSERT_TAIL(&n->job->core->dirty_nodes, n, dirty_entry);
	}
	core_job_changed(n->job);
}

bool
core_node_live(const struct core_node *n)
{
	return n->state == CORE_NODE_PARTICIPANT ||
	    n->state == CORE_NODE_WAITING || n->state == CORE_NODE_SPARE;
}

bool
core_job_ended(const struct core_job *j)
{
	return j->state == CORE_JOB_CLOSED || j->state == CORE_JOB_FAILED;
}

/* Keeps the job's per-state counters right; leases only for live nodes. */
void
core_node_set_state(struct core_node *n, enum core_node_state st)
{
	struct core_job	*j = n->job;

	if (n->state == st)
		return;
	assert(j->n_state[n->state] > 0);
	j->n_state[n->state]--;
	j->n_state[st]++;
	n->state = st;
	if (!core_node_live(n)) {
		core_timer_clear(j->core, &n->lease);
		if (!n->in_ended) {
			TAILQ_INSERT_TAIL(&j->ended, n, ended_entry);
			n->in_ended = true;
		}
	}
	core_node_dirty(n);
}

void
core_settle_later(struct core_job *j)
{
	if (j->settling || j->removed)
		return;
	j->settling = true;
	TAILQ_INSERT_TAIL(&j->core->settle, j, settle_entry);
}

/* Settles, once each, the jobs core_settle_later() collected. */
void
core_settle_due(struct core *c)
{
	struct core_job	*j;

	while ((j = TAILQ_FIRST(&c->settle)) != NULL) {
		TAILQ_REMOVE(&c->settle, j, settle_entry);
		j->settling = false;
		core_settle(j);
	}
}

/* ---------------------------------------------------------------- events */

/*
 * An event goes to the job's ring of the latest CORE_EVENTS_KEPT and to the
 * turn's new events, which the store appends to the job's full history.
 */
void
core_event_add(struct core_job *j, const char *kind, const char *fmt, ...)
{
	struct core		*c = j->core;
	struct core_event	*e;
	va_list			 ap;

	if (j->removed)
		return;
	if (c->n_new_events == c->new_events_cap) {
		c->new_events_cap = c->new_events_cap == 0 ? 64 :
		    c->new_events_cap * 2;
		c->new_events = xreallocarray(c->new_events,
		    c->new_events_cap, sizeof(*c->new_events));
	}
	e = &c->new_events[c->n_new_events++];
	memset(e, 0, sizeof(*e));
	e->seq = ++j->event_seq;
	e->wall_ms = c->now.wall_ms;
	e->generation = j->generation;
	textcpy(e->kind, sizeof(e->kind), kind);
	va_start(ap, fmt);
	vtextf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	e->job = j;
	core_restore_event(j, e);
	core_job_dirty(j);
}

void
core_restore_event(struct core_job *j, const struct core_event *e)
{
	struct core_event	*slot;

	if (j->events_n < CORE_EVENTS_KEPT) {
		if (j->events_n == j->events_cap) {
			j->events_cap = j->events_cap == 0 ? 8 :
			    j->events_cap * 2;
			if (j->events_cap > CORE_EVENTS_KEPT)
				j->events_cap = CORE_EVENTS_KEPT;
			j->events = xreallocarray(j->events,
			    j->events_cap, sizeof(*j->events));
		}
		slot = &j->events[j->events_n++];
	} else {
		slot = &j->events[j->events_start];
		j->events_start = (j->events_start + 1) % CORE_EVENTS_KEPT;
	}
	*slot = *e;
	slot->job = NULL;
	if (e->seq > j->event_seq)
		j->event_seq = e->seq;
}

const struct core_event *
core_job_event(const struct core_job *j, uint32_t i)
{
	if (i >= j->events_n)
		return NULL;
	if (j->events_n < CORE_EVENTS_KEPT)
		return &j->events[i];
	return &j->events[(j->events_start + i) % CORE_EVENTS_KEPT];
}

/* -------------------------------------------------------------- messages */

/*
 * Messages are queued only for connected nodes: a node that is away is told
 * its place by core_node_current() when it resumes.
 */
void
core_msg_init(struct core_msg *m, enum core_msg_kind kind)
{
	memset(m, 0, sizeof(*m));
	m->kind = kind;
}

/* The bytes of m->u that its kind uses. */
static size_t
msg_u_len(const struct core_msg *m)
{
	switch (m->kind) {
	case CORE_MSG_ACCEPTED:
		return sizeof(m->u.accepted);
	case CORE_MSG_WAITING:
		return sizeof(m->u.waiting);
	case CORE_MSG_ASSIGNMENT:
		return offsetof(struct core_assignment, master_addr) +
		    strnlen(m->u.assignment.master_addr,
		    sizeof(m->u.assignment.master_addr) - 1) + 1;
	case CORE_MSG_STOP:
		return sizeof(m->u.stop);
	default:
		return 0;
	}
}

void
core_msg_queue(struct core_node *n, const struct core_msg *msg)
{
	struct core_qmsg	*m;
	size_t			 ulen, rlen;

	if (!n->connected || n->removed)
		return;
	ulen = msg_u_len(msg);
	rlen = strnlen(msg->reason, sizeof(msg->reason) - 1);
	m = xmalloc(sizeof(*m) + ulen + rlen + 1);
	m->next = NULL;
	m->kind = msg->kind;
	m->u_len = (uint16_t)ulen;
	memcpy(m->data, &msg->u, ulen);
	memcpy(m->data + ulen, msg->reason, rlen);
	m->data[ulen + rlen] = '\0';
	if (ulen > 0 && msg->kind == CORE_MSG_ASSIGNMENT)
		m->data[ulen - 1] = '\0';	/* master_addr's end */
	if (n->out_tail == NULL) {
		n->out_head = m;
		TAILQ_INSERT_TAIL(&n->job->core->outbox, n, out_entry);
	} else
		n->out_tail->next = m;
	n->out_tail = m;
	n->out_n++;
}

void
core_msg_waiting(struct core_node *n, const char *reason)
{
	struct core_job	*j = n->job;
	struct core_msg	 m;

	if (!n->connected || n->removed)
		return;
	core_msg_init(&m, CORE_MSG_WAITING);
	m.u.waiting.state = n->state;
	m.u.waiting.participants = j->n_state[CORE_NODE_PARTICIPANT];
	m.u.waiting.min_nodes = j->settings.min_nodes;
	m.u.waiting.max_nodes = j->settings.max_nodes;
	if (reason != NULL)
		textcpy(m.reason, sizeof(m.reason), reason);
	else
		core_waiting_reason(n, m.reason, sizeof(m.reason));
	core_msg_queue(n, &m);
}

void
core_msg_drop(struct core *c, struct core_node *n)
{
	struct core_qmsg *m, *next;

	if (n->out_head == NULL)
		return;
	for (m = n->out_head; m != NULL; m = next) {
		next = m->next;
		free(m);
	}
	n->out_head = n->out_tail = NULL;
	n->out_n = 0;
	TAILQ_REMOVE(&c->outbox, n, out_entry);
}

bool
core_outbox_pop(struct core *c, struct core_node **nodep,
    struct core_msg *msg)
{
	struct core_node	*n;
	struct core_qmsg	*m;

	if ((n = TAILQ_FIRST(&c->outbox)) == NULL)
		return false;
	m = n->out_head;
	n->out_head = m->next;
	if (n->out_head == NULL) {
		n->out_tail = NULL;
		TAILQ_REMOVE(&c->outbox, n, out_entry);
	}
	n->out_n--;
	core_msg_init(msg, m->kind);
	memcpy(&msg->u, m->data, m->u_len);
	/* core_msg_queue kept less than sizeof(msg->reason) of it. */
	memcpy(msg->reason, m->data + m->u_len,
	    strlen(m->data + m->u_len) + 1);
	free(m);
	*nodep = n;
	return true;
}

/* ------------------------------------------------------------ formatting */

/* "600 s", or "1.5 s" for durations that are not whole seconds. */
void
core_waiting_reason(const struct core_node *n, char *buf, size_t len)
{
	const struct core_job	*j = n->job;
	uint32_t		 p = j->n_state[CORE_NODE_PARTICIPANT];
	char			 t[32];

	switch (n->state) {
	case CORE_NODE_PARTICIPANT:
		if (p < j->settings.min_nodes)
			textf(buf, len, "round %llu: %u of min %u node%s "
			    "joined; waiting for %u more",
			    (unsigned long long)j->generation + 1, p,
			    j->settings.min_nodes, plural(j->settings.min_nodes),
			    j->settings.min_nodes - p);
		else {
			core_fmt_secs(t, sizeof(t), (uint64_t)
			    core_job_last_call_in(j, j->core->now));
			textf(buf, len, "round %llu: %u node%s joined; it "
			    "completes at %u node%s or in %s (last call)",
			    (unsigned long long)j->generation + 1, p,
			    plural(p), j->settings.max_nodes,
			    plural(j->settings.max_nodes), t);
		}
		break;
	case CORE_NODE_WAITING:
		textf(buf, len, "generation %llu is running; the next "
		    "round takes this node in", (unsigned long long)
		    j->generation);
		break;
	case CORE_NODE_SPARE:
		textf(buf, len, "the job has max_nodes (%u) node%s; spare "
		    "until one goes", j->settings.max_nodes,
		    plural(j->settings.max_nodes));
		break;
	case CORE_NODE_SUCCEEDED:
		textf(buf, len, "this node succeeded; %u other node%s still "
		    "running", p, p == 1 ? " is" : "s are");
		break;
	default:
		textf(buf, len, "node is %s%s%s", core_node_state_name(
		    n->state), n->reason != NULL ? ": " : "",
		    n->reason != NULL ? n->reason : "");
		break;
	}
}

void
core_fmt_secs(char *buf, size_t len, uint64_t ms)
{
	if (ms % 1000 == 0)
		textf(buf, len, "%llu s", (unsigned long long)(ms / 1000));
	else
		textf(buf, len, "%.3g s", (double)ms / 1000.0);
}

/* UTC, ISO 8601: what a user can compare with the scheduler's logs. */
void
core_fmt_wall(char *buf, size_t len, int64_t wall_ms)
{
	struct tm	tm;
	time_t		t = (time_t)(wall_ms / 1000);

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		textf(buf, len, "%lld ms", (long long)wall_ms);
}

const char *
core_job_state_name(enum core_job_state st)
{
	switch (st) {
	case CORE_JOB_WAITING:
		return "waiting";
	case CORE_JOB_RUNNING:
		return "running";
	case CORE_JOB_CLOSING:
		return "closing";
	case CORE_JOB_CLOSED:
		return "closed";
	case CORE_JOB_FAILED:
		return "failed";
	}
	return "unknown";
}

const char *
core_node_state_name(enum core_node_state st)
{
	static const char *const names[CORE_NODE_NSTATES] = {
		"unknown", "participant", "waiting", "spare", "succeeded",
		"left", "lost", "evicted", "failed",
	};

	if ((unsigned)st >= CORE_NODE_NSTATES)
		return "unknown";
	return names[st];
}

const char *
core_msg_kind_name(enum core_msg_kind k)
{
	static const char *const names[] = {
		"none", "accepted", "waiting", "assignment", "stop", "closed",
		"failed", "evicted", "left",
	};

	if ((unsigned)k >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[k];
}

/* --------------------------------------------------------------- freeing */

/* Frees a node that is no longer indexed or linked anywhere but its job. */
void
core_node_free(struct core_node *n)
{
	struct core_qmsg *m, *next;

	if (n == NULL)
		return;
	for (m = n->out_head; m != NULL; m = next) {
		next = m->next;
		free(m);
	}
	free(n->hostname);
	free(n->advertise_addr);
	free(n->reason);
	free(n->gpus);
	free(n);
}

void
core_job_free(struct core_job *j)
{
	struct core_node	*n;

	if (j == NULL)
		return;
	while ((n = TAILQ_FIRST(&j->nodes)) != NULL) {
		TAILQ_REMOVE(&j->nodes, n, entry);
		core_node_free(n);
	}
	free(j->round);
	free(j->events);
	free(j->owner);
	free(j);
}

void
core_node_set_reason(struct core_node *n, const char *reason)
{
	free(n->reason);
	n->reason = reason == NULL ? NULL : xstrdup(reason);
}

bool
core_node_set_gpus(struct core_node *n, const struct core_gpu *gpus,
    uint32_t count)
{
	if (count == n->n_gpus && (count == 0 ||
	    memcmp(n->gpus, gpus, count * sizeof(*gpus)) == 0))
		return false;
	free(n->gpus);
	n->gpus = NULL;
	n->n_gpus = count;
	if (count > 0) {
		n->gpus = xreallocarray(NULL, count, sizeof(*gpus));
		memcpy(n->gpus, gpus, count * sizeof(*gpus));
	}
	return true;
}

/* ------------------------------------------------------------ removal */

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

/* Takes a node out of every index and list; it is freed with the turn. */
void
core_node_unlink(struct core_node *n)
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

/* The job is reopened or removed: no longer one of the owner's ended. */
void
core_owner_job_unended(struct core_job *j)
{
	if (!j->in_owner_ended)
		return;
	TAILQ_REMOVE(&j->own->ended, j, owner_entry);
	j->in_owner_ended = false;
	j->own->n_ended--;
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
		core_node_unlink(n);
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
