/*
 * The end of an event-loop turn, and the commit pipeline (docs/RDZVD.md).
 * Every RPC handler and timer feeds the core and calls turn_schedule(); the
 * flush event runs at the lowest priority, so it runs once after everything
 * that arrived in this turn was handled. It writes all of the turn's
 * changes into one transaction (group commit: ten thousand joins are one
 * fsync, not ten thousand), and only once that transaction is durable
 * hands the output to the consumers registered at start (the Join streams,
 * and the followers of job changes: Watch and the status page, follow.c)
 * and answers unary calls (SPEC §9: nothing is acknowledged before it is
 * durable). A failed commit ends the daemon's service: memory and the
 * store must not disagree. With SQLite it exits; on etcd it steps down
 * (ha.c), and the turn's output goes nowhere: a standby that wins loads
 * what was committed.
 *
 * The durable half of the commit (SQLite's COMMIT: the WAL's write and
 * fsync; etcd's Txns) runs on a thread of its own, beside the loop (issue
 * 42): the rows are written (the Txns built) on the loop, where the core
 * is, and the thread is handed only what reads nothing of the core. Meanwhile the loop keeps serving: health,
 * metrics, the page, new connections, and reads, which answer from the
 * last committed state (committed.c; a read of something the commit in
 * flight changed waits for it). What would change the core is held
 * (turn_hold): the calls that write (joins, reports, leaves, operator
 * actions), a stream's end, the core's timers, the lease sweep; they
 * gather while the commit is in flight and, when it is durable and its
 * output is out, run in the order they came, as the next group. The
 * core thus never moves while its changes are on their way to the disk,
 * which is what lets the output of a turn go out after its commit without
 * copying it. The durable half never waits behind reads: the thread does
 * not go through the loop, and the loop's completion event runs at the
 * highest priority. The flush that starts a commit still runs at the
 * lowest priority, after the turn's other events, so a flood of reads can
 * still delay its start; bounding that is not done here (issue 43).
 *
 * turn.c is the hub: the handlers and the stream table call it, and it
 * reaches the streams, the followers and the metrics only through struct
 * turn_out, so that no two of these files call each other in a loop. It
 * also times the commit.
 */
#include <sys/eventfd.h>
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "rdzvd.h"
#include "store.h"

#define TURN_PRIORITY	2	/* the lowest of event_base_priority_init(3) */
#define DONE_PRIORITY	0	/* the highest: a durable commit goes out first */
/* A commit in flight this long makes /readyz say the store is slow, and a
 * line in the log. */
#define COMMIT_SLOW_MS	1000
/*
 * The progress checkpoint (core_progress_checkpoint): every CKPT_MS the
 * nodes whose step moved are written, and those last seen CKPT_SEEN_MS or
 * more after what was written, so that a restart (even kill -9) loses at
 * most that much of the straggler and hang views, at the cost of a row
 * per moving node every few seconds rather than a commit per step.
 */
#define CKPT_MS		5000
#define CKPT_SEEN_MS	60000
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
static struct event	*ckpt_ev;
static struct answers	 answers = TAILQ_HEAD_INITIALIZER(answers);
static uint64_t		 timer_at = UINT64_MAX;
static bool		 advance_held;	/* the timer fired while sealed */

/*
 * The commit thread: it waits for an open transaction (go), ends it
 * (store_commit_end) and says so through an eventfd. The loop touches the
 * store only while the thread is idle.
 */
static struct {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	bool		 started, go, done, stop;
	int		 rc;
	char		 err[512];
	int		 efd;
	struct event	*done_ev;
	struct event	*slow_ev;
	bool		 in_flight;	/* sealed: go given, done not seen */
	uint64_t	 t0;		/* mono us of the turn's flush */
	bool		 slow_said;
} ct = { .efd = -1 };

struct core_now
turn_now(void)
{
	return (struct core_now){
		.mono_ms = stall_clock_ms(),
		.wall_ms = wall_ms(),
	};
}

int64_t
turn_last_seen(const struct core_node *node, struct core_now now)
{
	return out.last_seen != NULL ? out.last_seen(node, now) :
	    node->last_seen_ms;
}

struct convert_job_view
turn_job_view(uint32_t events)
{
	return (struct convert_job_view){
		.last_seen = turn_last_seen,
		.silent_ms = 2 * rdzvd.cfg.keepalive_ms,
		.events = events,
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

/* The output of a turn whose commit is durable (or that had nothing to
 * write), then the calls held meanwhile. */
static void
deliver(void)
{
	struct core *c = rdzvd.core;
	struct core_node *node;
	struct core_msg msg;
	struct answer *a;
	struct core_now now;

	while (core_outbox_pop(c, &node, &msg))
		out.send(node, &msg);
	if (c->hosts->n_changes > 0 && out.hosts_changed != NULL)
		out.hosts_changed(c->hosts);
	now = turn_now();
	out.jobs_changed(c, now);
	if (out.turn_done != NULL)
		out.turn_done(c, now);
	committed_turn(c);

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
	turn_release();
	if (advance_held) {
		advance_held = false;
		core_advance(c, turn_now());
		turn_schedule();
	}
}

/* The end of a commit that ran on the thread, on the loop. */
static void
ended(int rc, const char *err)
{
	uint64_t took = mono_us() - ct.t0;

	ct.in_flight = false;
	event_del(ct.slow_ev);
	/* A slow commit counts for no deadline and no lease (stall.c). */
	stall_commit_took(took / 1000);
	if (ct.slow_said)
		log_warnx("store %s: the commit that was slow ended after "
		    "%llu ms%s", store_path(rdzvd.store),
		    (unsigned long long)(took / 1000), rc == 0 ? "" :
		    ", and failed");
	ct.slow_said = false;
	if (rc != 0) {
		/* This turn (and its flush event) are gone afterwards. */
		out.commit_failed(err);
		return;
	}
	if (out.committed != NULL)
		out.committed(took);
	deliver();
}

static void *
commit_thread(void *arg)
{
	char err[sizeof(ct.err)];

	pthread_mutex_lock(&ct.mu);
	for (;;) {
		while (!ct.go && !ct.stop)
			pthread_cond_wait(&ct.cv, &ct.mu);
		if (ct.stop)
			break;
		ct.go = false;
		pthread_mutex_unlock(&ct.mu);
		err[0] = '\0';
		int rc = store_commit_end(rdzvd.store, err, sizeof(err));
		pthread_mutex_lock(&ct.mu);
		ct.rc = rc;
		memcpy(ct.err, err, sizeof(err));
		ct.done = true;
		pthread_cond_broadcast(&ct.cv);
		/* The loop's wakeup. eventfd_write, not write(): a test's
		 * fault injection (libfiu) fails every write() of the
		 * process, and this one must still wake the loop to stop. */
		(void)eventfd_write(ct.efd, 1);
	}
	pthread_mutex_unlock(&ct.mu);
	return NULL;
}

/* Takes the thread's result; false while it has none. */
static bool
take_result(int *rc, char *err, size_t errlen)
{
	bool done;

	pthread_mutex_lock(&ct.mu);
	if ((done = ct.done)) {
		ct.done = false;
		*rc = ct.rc;
		snprintf(err, errlen, "%s", ct.err);
	}
	pthread_mutex_unlock(&ct.mu);
	return done;
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	eventfd_t n;
	char err[sizeof(ct.err)];
	int rc;

	(void)eventfd_read(ct.efd, &n);
	if (ct.in_flight && take_result(&rc, err, sizeof(err)))
		ended(rc, err);
}

static void
slow_cb(evutil_socket_t fd, short what, void *arg)
{
	ct.slow_said = true;
	log_warnx("store %s: a commit has been in flight for %llu ms: the "
	    "disk is slow. rdzvd keeps serving health, metrics and reads "
	    "(from the last committed state); joins, reports and operator "
	    "actions wait for the commit", store_path(rdzvd.store),
	    (unsigned long long)turn_commit_age_ms());
}

static void
commit_thread_start(void)
{
	if (ct.started)
		return;
	if ((ct.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		fatal("turn: eventfd");
	pthread_mutex_init(&ct.mu, NULL);
	pthread_cond_init(&ct.cv, NULL);
	if (pthread_create(&ct.th, NULL, commit_thread, NULL) != 0)
		fatalx("turn: cannot start the commit thread");
	ct.started = true;
}

/* Hands the open transaction to the thread: the core is sealed until it
 * ends. */
static void
hand_off(uint64_t t0)
{
	struct timeval tv = { COMMIT_SLOW_MS / 1000,
	    (COMMIT_SLOW_MS % 1000) * 1000 };

	ct.in_flight = true;
	ct.t0 = t0;
	event_add(ct.slow_ev, &tv);
	pthread_mutex_lock(&ct.mu);
	ct.go = true;
	pthread_cond_signal(&ct.cv);
	pthread_mutex_unlock(&ct.mu);
}

/*
 * The turn's changes go to the store: handed to the commit thread, or
 * delivered at once when nothing needed writing. Run by the flush event
 * when the loop is idle, or by its deadline when reads keep it busy
 * (issue 43: a read flood must not hold a commit back).
 */
static void
flush_begin(void)
{
	struct core *c = rdzvd.core;
	char err[512];
	int rc;

	/* Sealed: what the turn did waits for the commit's end, which
	 * schedules the flush again. */
	if (ct.in_flight)
		return;
	uint64_t txns = store_transactions(rdzvd.store), t0 = mono_us();
	if ((rc = store_commit_begin(rdzvd.store, c, err, sizeof(err))) < 0) {
		out.commit_failed(err);
		return;
	}
	if (rc == 1) {
		hand_off(t0);
		return;
	}
	/* Durable already: nothing to write, or a backend that commits
	 * whole on the loop. */
	if (store_transactions(rdzvd.store) != txns && out.committed != NULL)
		out.committed(mono_us() - t0);
	deliver();
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	event_del(due_ev);
	flush_begin();
}

/* The flush waited TURN_MAX_DELAY_MS behind reads: it runs now. */
static void
due_cb(evutil_socket_t fd, short what, void *arg)
{
	event_del(flush_ev);
	flush_begin();
}

/* Waits for the commit in flight, if any, and handles its end. */
static void
wait_in_flight(void)
{
	char err[sizeof(ct.err)];
	int rc;

	if (!ct.in_flight)
		return;
	pthread_mutex_lock(&ct.mu);
	while (!ct.done)
		pthread_cond_wait(&ct.cv, &ct.mu);
	pthread_mutex_unlock(&ct.mu);
	if (take_result(&rc, err, sizeof(err)))
		ended(rc, err);
}

void
turn_settle(const char *why)
{
	wait_in_flight();
	turn_refuse_held(why);
}

void
turn_flush(void)
{
	struct core *c = rdzvd.core;
	char err[512];
	int rc;

	wait_in_flight();
	/* Every step and last-seen time not yet written (shutting down). */
	if (!rdzvd.standby)
		core_progress_checkpoint(c, turn_now(), out.last_seen, 1);
	uint64_t txns = store_transactions(rdzvd.store), t0 = mono_us();
	rc = store_commit_begin(rdzvd.store, c, err, sizeof(err));
	if (rc == 1)
		rc = store_commit_end(rdzvd.store, err, sizeof(err));
	if (rc != 0) {
		out.commit_failed(err);
		return;
	}
	if (store_transactions(rdzvd.store) != txns && out.committed != NULL)
		out.committed(mono_us() - t0);
	deliver();
}

bool
turn_sealed(void)
{
	return ct.in_flight;
}

uint64_t
turn_commit_age_ms(void)
{
	return ct.in_flight ? (mono_us() - ct.t0) / 1000 : 0;
}

bool
turn_store_slow(void)
{
	return turn_commit_age_ms() >= COMMIT_SLOW_MS;
}

static void
ckpt_cb(evutil_socket_t fd, short what, void *arg)
{
	/* Sealed: the next tick does it. */
	if (ct.in_flight || rdzvd.standby)
		return;
	if (core_progress_checkpoint(rdzvd.core, turn_now(), out.last_seen,
	    CKPT_SEEN_MS) > 0)
		turn_schedule();
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	timer_at = UINT64_MAX;
	if (ct.in_flight) {
		advance_held = true;
		return;
	}
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
	/* The thread and its eventfd are the process's; the events are of
	 * this base (a fuzz target makes a base per input). */
	commit_thread_start();
	ct.done_ev = event_new(rdzvd.base, ct.efd, EV_READ | EV_PERSIST,
	    done_cb, NULL);
	ct.slow_ev = evtimer_new(rdzvd.base, slow_cb, NULL);
	if (ct.done_ev == NULL || ct.slow_ev == NULL ||
	    event_priority_set(ct.done_ev, DONE_PRIORITY) != 0 ||
	    event_add(ct.done_ev, NULL) != 0)
		fatalx("turn_init: cannot create events");
	committed_load(rdzvd.core);
	{
		struct timeval tv = { CKPT_MS / 1000, 0 };

		ckpt_ev = event_new(rdzvd.base, -1, EV_PERSIST, ckpt_cb, NULL);
		if (ckpt_ev == NULL || event_add(ckpt_ev, &tv) != 0)
			fatalx("turn_init: cannot create events");
	}
	arm_timer();
}

void
turn_abandon(const char *why)
{
	struct answer *a;

	turn_refuse_held(why);
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

	/* The thread may hold the store: let it end first. Its output has
	 * nowhere to go any more (the streams are gone). */
	if (ct.in_flight) {
		pthread_mutex_lock(&ct.mu);
		while (!ct.done)
			pthread_cond_wait(&ct.cv, &ct.mu);
		ct.done = false;
		pthread_mutex_unlock(&ct.mu);
		ct.in_flight = false;
		event_del(ct.slow_ev);
	}
	turn_refuse_held("rdzvd is shutting down; try again when it is back");
	committed_free();
	advance_held = false;
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
	if (ckpt_ev != NULL)
		event_free(ckpt_ev);
	if (ct.done_ev != NULL)
		event_free(ct.done_ev);
	if (ct.slow_ev != NULL)
		event_free(ct.slow_ev);
	if (due_ev != NULL)
		event_free(due_ev);
	flush_ev = timer_ev = ckpt_ev = ct.done_ev = ct.slow_ev = due_ev = NULL;
	timer_at = UINT64_MAX;
}
