/*
 * Each connected node's outbox: the messages the core queues for it (its
 * assignment, waiting, stop, the end) until the daemon sends them after
 * the turn's commit.
 */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core_int.h"
#include "text.h"
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

/* How long until the job's join (or rejoin) timeout fails it; 0 when
 * none is armed. Agents say it while they wait (docs/AGENT.md). */
uint32_t
core_fails_in(const struct core_job *j)
{
	uint64_t now = j->core->now.mono_ms;

	if (!core_timer_armed(&j->join_deadline) || j->join_deadline.at <= now)
		return 0;
	return j->join_deadline.at - now > UINT32_MAX ? UINT32_MAX :
	    (uint32_t)(j->join_deadline.at - now);
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
	m.u.waiting.fails_in_ms = core_fails_in(j);
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
