/*
 * The end of an event-loop turn. Every RPC handler and timer feeds the core
 * and calls turn_schedule(); the flush event runs at the lowest priority, so
 * it runs once after everything that arrived in this turn was handled. It
 * writes all of the turn's changes in one transaction (group commit: ten
 * thousand joins are one fsync, not ten thousand), and only then hands the
 * output to the consumers registered at start (the Join streams, and the
 * followers of job changes: Watch and the status page, follow.c) and
 * answers unary calls (SPEC §9: nothing is acknowledged before it is
 * durable). A failed commit ends the daemon's service: memory and the
 * store must not disagree. With SQLite it exits; on etcd it steps down
 * (ha.c), and the turn's output goes nowhere: a standby that wins loads
 * what was committed.
 *
 * turn.c is the hub: the handlers and the stream table call it, and it
 * reaches the streams, the followers and the metrics only through struct
 * turn_out, so that no two of these files call each other in a loop. It
 * also times the commit.
 */
#include <stdlib.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "rdzvd.h"
#include "store.h"

#define TURN_PRIORITY	2	/* the lowest of event_base_priority_init(3) */
/*
 * libevent runs a priority only while no higher one has work, so a loop
 * kept busy with reads (priority 1) would never commit: every new job
 * would wait for as long as some client kept sending. A flush scheduled
 * this long ago runs from a timer at the highest priority instead,
 * whatever the read load.
 */
#define TURN_MAX_DELAY_MS	20
#define TURN_DUE_PRIORITY	0
/*
 * Deadlines fire this much late, so that those falling close together are
 * handled in one turn: a rack that drops a hundred connections within a few
 * milliseconds loses its nodes when their leases end "at the same moment"
 * (SPEC §4 rule 5), one failure and one new round, rather than a round for
 * each turn in which some of those connections happened to close. Against
 * deadlines of seconds it is nothing.
 */
#define TIMER_SLACK_MS	50

struct answer {
	struct grpc_call	*call;
	void			(*fn)(struct grpc_call *, void *);
	void			*arg;
	TAILQ_ENTRY(answer)	 entry;
};
TAILQ_HEAD(answers, answer);

static struct turn_out	 out;
static struct event	*flush_ev;
static struct event	*due_ev;	/* the flush's deadline */
static struct event	*timer_ev;
static struct answers	 answers = TAILQ_HEAD_INITIALIZER(answers);
static uint64_t		 timer_at = UINT64_MAX;

struct core_now
turn_now(void)
{
	return (struct core_now){
		.mono_ms = stall_clock_ms(),
		.wall_ms = wall_ms(),
	};
}

static void
answer_gone(struct grpc_call *call, int cancelled, void *arg)
{
	struct answer *a = arg;
	TAILQ_REMOVE(&answers, a, entry);
	free(a->arg);
	free(a);
}

void
turn_answer(struct grpc_call *call, void (*fn)(struct grpc_call *, void *),
    void *arg)
{
	struct answer *a = xcalloc(1, sizeof(*a));
	a->call = call;
	a->fn = fn;
	a->arg = arg;
	TAILQ_INSERT_TAIL(&answers, a, entry);
	grpc_call_on_close(call, answer_gone, a);
	turn_schedule();
}

void
turn_schedule(void)
{
	struct timeval tv = { 0, TURN_MAX_DELAY_MS * 1000 };

	if (!event_pending(flush_ev, EV_TIMEOUT, NULL)) {
		event_active(flush_ev, EV_TIMEOUT, 0);
		evtimer_add(due_ev, &tv);
	}
}

static void
arm_timer(void)
{
	uint64_t at = core_next_deadline(rdzvd.core), now = stall_clock_ms();

	if (at == timer_at)
		return;
	timer_at = at;
	if (at == UINT64_MAX) {
		event_del(timer_ev);
		return;
	}
	uint64_t in = (at > now ? at - now : 0) + TIMER_SLACK_MS;
	struct timeval tv = { (time_t)(in / 1000), (suseconds_t)(in % 1000) * 1000 };
	event_add(timer_ev, &tv);
}

void
turn_flush(void)
{
	struct core *c = rdzvd.core;
	struct core_node *node;
	struct core_msg msg;
	struct answer *a;
	char err[512];

	uint64_t txns = store_transactions(rdzvd.store), t0 = mono_us();
	struct core_now now;

	if (store_commit(rdzvd.store, c, err, sizeof(err)) != 0) {
		/* This turn (and its flush event) are gone afterwards. */
		out.commit_failed(err);
		return;
	}
	if (store_transactions(rdzvd.store) != txns && out.committed != NULL)
		out.committed(mono_us() - t0);

	while (core_outbox_pop(c, &node, &msg))
		out.send(node, &msg);
	if (c->hosts->n_changes > 0 && out.hosts_changed != NULL)
		out.hosts_changed(c->hosts);
	now = turn_now();
	out.jobs_changed(c, now);
	if (out.turn_done != NULL)
		out.turn_done(c, now);

	/* Nodes the core dropped lose their streams. */
	TAILQ_FOREACH(node, &c->removed_nodes, entry)
		out.node_removed(node->node_id);
	struct core_job *job;
	TAILQ_FOREACH(job, &c->removed_jobs, entry)
		TAILQ_FOREACH(node, &job->nodes, entry)
			out.node_removed(node->node_id);
	core_changes_clear(c);

	/* Answering finishes the call, whose close callback unlinks it. */
	while ((a = TAILQ_FIRST(&answers)) != NULL) {
		TAILQ_REMOVE(&answers, a, entry);
		grpc_call_on_close(a->call, NULL, NULL);
		a->fn(a->call, a->arg);
		free(a->arg);
		free(a);
	}
	arm_timer();
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	event_del(due_ev);
	turn_flush();
}

/* The flush waited TURN_MAX_DELAY_MS behind reads: it runs now. */
static void
due_cb(evutil_socket_t fd, short what, void *arg)
{
	event_del(flush_ev);
	turn_flush();
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	timer_at = UINT64_MAX;
	core_advance(rdzvd.core, turn_now());
	turn_schedule();
}

void
turn_init(const struct turn_out *o)
{
	out = *o;
	flush_ev = event_new(rdzvd.base, -1, 0, flush_cb, NULL);
	timer_ev = evtimer_new(rdzvd.base, timer_cb, NULL);
	due_ev = evtimer_new(rdzvd.base, due_cb, NULL);
	if (flush_ev == NULL || timer_ev == NULL || due_ev == NULL)
		fatalx("turn_init: cannot create events");
	event_priority_set(flush_ev, TURN_PRIORITY);
	event_priority_set(due_ev, TURN_DUE_PRIORITY);
	arm_timer();
}

void
turn_abandon(const char *why)
{
	struct answer *a;

	while ((a = TAILQ_FIRST(&answers)) != NULL) {
		TAILQ_REMOVE(&answers, a, entry);
		grpc_call_on_close(a->call, NULL, NULL);
		role_hint(a->call);
		grpc_call_finish(a->call, GRPC_UNAVAILABLE, "%s", why);
		free(a->arg);
		free(a);
	}
}

void
turn_free(void)
{
	struct answer *a;

	while ((a = TAILQ_FIRST(&answers)) != NULL) {
		TAILQ_REMOVE(&answers, a, entry);
		grpc_call_on_close(a->call, NULL, NULL);
		free(a->arg);
		free(a);
	}
	if (flush_ev != NULL)
		event_free(flush_ev);
	if (timer_ev != NULL)
		event_free(timer_ev);
	if (due_ev != NULL)
		event_free(due_ev);
	flush_ev = timer_ev = due_ev = NULL;
	timer_at = UINT64_MAX;
}
