/*
 * auth = munge (docs/SECURITY.md): every Rendezvous and Control call
 * carries a MUNGE credential in its `rdzv-munge` header, and its caller is
 * the credential's uid, shown as the user's name. Health checks and
 * ServerInfo need none (probes, and finding the leader); ServerInfo with
 * one says who its caller is.
 *
 * munge_decode is a blocking round trip to munged, so it never runs on the
 * event loop: the server's authentication hook (grpc.h) queues the call
 * for a small pool of threads (AUTH_THREADS), and each result comes back
 * through an eventfd; then the call's handler runs, or the call ends with
 * the reason. The queue has a line per connection, served in turn, and
 * is bounded per connection, per source address and in all (auth_fair.c:
 * past a bound a call is refused with UNAVAILABLE, or one of the longest
 * line loses its place); a call whose credential munged has not decoded
 * within AUTH_TIMEOUT_MS ends with UNAVAILABLE naming munged's socket (or,
 * if it never reached a thread, saying so); its thread's answer is
 * dropped when it comes. Every call may wait
 * equally long, so the wait list is in deadline order and one timer for
 * its oldest call bounds them all.
 *
 * slurm-job-owner = check asks squeue who owns a new Slurm job, which
 * takes as long as slurmctld does (for ever, while it is down). So it has
 * a pool of its own (OWNER_THREADS), never the decoding threads: a call
 * whose credential is decoded and that starts a new job under a Slurm job
 * number waits for its owner's answer from a cache (auth_slurm.c), else
 * from the one lookup under way for that number (a flight: one squeue per
 * job however many agents ask), else from a new one, at most
 * OWNER_MAX_FLIGHTS at once and OWNER_USER_FLIGHTS for one user (the
 * caller who started it). It waits AUTH_TIMEOUT_MS more on the same
 * wait list, and what ends it names squeue. A call of a job that exists
 * already, or of any other id, never waits for squeue.
 *
 * One user's hung lookups must not hold up another's: a thread takes the
 * waiting lookup of the user with the fewest running (the oldest among
 * those), no user runs more than OWNER_USER_RUNNING at once (so threads
 * stay free for others), squeue holds a thread at most its deadline
 * (auth_slurm.c), and a lookup whose callers have all gone (their wait
 * ended, or they closed) is dropped if it has not started, and its squeue
 * killed if it has.
 */
#include <sys/eventfd.h>
#include <sys/queue.h>

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "auth_int.h"
#include "clock.h"
#include "credbind.h"
#include "log.h"
#include "rdzvd.h"
#include "text.h"
#include "xmalloc.h"

struct auth_state A = { .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER, .owner_cv = PTHREAD_COND_INITIALIZER,
    .efd = -1 };

static struct auth_job *
job_of(struct fair_item *it)
{
	return (struct auth_job *)(void *)((char *)it -
	    offsetof(struct auth_job, fair));
}

void
job_free(struct auth_job *j)
{
	if (j == NULL)
		return;
	free(j->cred);
	free(j->path);
	free(j->want);
	free(j->slurm_job);
	free(j);
}

static void *
worker(void *arg)
{
	const char *sock = A.munge_socket;
	const char *group = A.admin_group;
	struct fair_item *it = NULL;
	struct auth_job *j;
	uint64_t one = 1;

	pthread_mutex_lock(&A.mu);
	for (;;) {
		while (!A.stopping && (it = fair_pop(&A.fair, mono_ms())) ==
		    NULL)
			pthread_cond_wait(&A.cv, &A.mu);
		if (A.stopping)
			break;
		j = job_of(it);
		pthread_mutex_unlock(&A.mu);

		auth_munge_decode(sock, group, j->cred, j->path, j->want,
		    &j->r);

		pthread_mutex_lock(&A.mu);
		if (A.stopping) {
			/* The loop is gone: nobody waits for it. */
			job_free(j);
			break;
		}
		/* A line whose credentials munged refuses waits behind the
		 * others from now on. */
		fair_done(&A.fair, &j->fair, j->r.status ==
		    GRPC_UNAUTHENTICATED, mono_ms());
		STAILQ_INSERT_TAIL(&A.done, j, queue);
		if (write(A.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("auth: eventfd");
	}
	pthread_mutex_unlock(&A.mu);
	return NULL;
}

/* Arms the timer for the oldest call still waiting. */
static void
timer_arm(void)
{
	struct auth_job *j = TAILQ_FIRST(&A.wait);
	uint64_t now = mono_ms();
	struct timeval tv = { 0, 0 };

	if (j == NULL) {
		evtimer_del(A.timer);
		return;
	}
	if (j->deadline_ms > now) {
		tv.tv_sec = (time_t)((j->deadline_ms - now) / 1000);
		tv.tv_usec = (suseconds_t)((j->deadline_ms - now) % 1000) * 1000;
	}
	evtimer_add(A.timer, &tv);
}

void
unwait(struct auth_job *j)
{
	if (!j->waiting)
		return;
	TAILQ_REMOVE(&A.wait, j, wait);
	j->waiting = 0;
	A.n_waiting--;
}

/* Waits AUTH_TIMEOUT_MS from now: later than every call already waiting,
 * so the list stays in deadline order. */
void
wait_add(struct auth_job *j)
{
	j->deadline_ms = mono_ms() + AUTH_TIMEOUT_MS;
	j->waiting = 1;
	TAILQ_INSERT_TAIL(&A.wait, j, wait);
	A.n_waiting++;
}

static void
munged_down(const char *msg)
{
	uint64_t now = mono_ms();

	if (A.warned_ms != 0 && now - A.warned_ms < AUTH_WARN_MS &&
	    strcmp(A.warned, msg) == 0)
		return;
	A.warned_ms = now;
	snprintf(A.warned, sizeof(A.warned), "%s", msg);
	log_warnx("auth: %s; calls are refused with UNAVAILABLE until it "
	    "answers", msg);
}

/* Calls munged has not answered in time end; their threads' answers are
 * dropped when they come (done_cb). */
static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = mono_ms();
	struct auth_job *j;
	char msg[512];
	int queued;

	while ((j = TAILQ_FIRST(&A.wait)) != NULL && j->deadline_ms <= now) {
		unwait(j);
		if (j->flight != NULL) {
			struct flight *f = j->flight;

			/* Waiting for squeue; the loop owns it. */
			TAILQ_REMOVE(&f->calls, j, fentry);
			j->flight = NULL;
			flight_left(f);
			if (j->call != NULL)
				grpc_call_finish(j->call, GRPC_UNAVAILABLE,
				    "rdzvd cannot ask Slurm who owns job %s "
				    "(slurm-job-owner = check): squeue did not "
				    "answer within %u ms (is slurmctld up?)",
				    j->slurm_job, AUTH_TIMEOUT_MS);
			job_free(j);
			continue;
		}
		pthread_mutex_lock(&A.mu);
		queued = fair_cancel(&A.fair, &j->fair, now);
		pthread_mutex_unlock(&A.mu);
		if (queued) {
			/* It never reached munged: other calls were ahead. */
			struct grpc_call *call = j->call;

			j->call = NULL;
			if (call != NULL) {
				grpc_call_on_close(call, NULL, NULL);
				grpc_call_finish(call, GRPC_UNAVAILABLE,
				    "rdzvd: this call waited %u ms for a "
				    "thread to decode its MUNGE credential, "
				    "behind other clients' calls; try again",
				    A.timeout_ms);
			}
			job_free(j);
			continue;
		}
		if (j->call == NULL)
			continue;
		snprintf(msg, sizeof(msg), "rdzvd cannot decode MUNGE "
		    "credentials: munged at %s did not answer within %u ms",
		    A.socket, A.timeout_ms);
		munged_down(msg);
		grpc_call_finish(j->call, GRPC_UNAVAILABLE, "%s", msg);
	}
	timer_arm();
}

/*
 * A refused call is logged (at debug level), but at most AUTH_LOG_PER_S a
 * second, then how many more were: a flood of bad credentials must not
 * cost a log line each, nor stall the loop on a slow log.
 */
static void
refusal_log(const char *path, const char *peer, const char *msg)
{
	uint64_t now = mono_ms();

	if (now - A.log_ms >= 1000) {
		if (A.log_dropped > 0)
			log_debug("auth: %zu more calls refused in the last "
			    "second (not logged one by one)", A.log_dropped);
		A.log_ms = now;
		A.log_n = A.log_dropped = 0;
	}
	if (A.log_n++ < AUTH_LOG_PER_S)
		log_debug("auth: %s from %s refused: %s", path, peer, msg);
	else
		A.log_dropped++;
}

/* A call's authentication is over: it goes on to its handler or ends. */
void
decided(struct auth_job *j)
{
	struct grpc_call *call = j->call;

	if (call == NULL)
		return;
	j->call = NULL;
	if (j->r.status == GRPC_OK) {
		grpc_call_proceed(call, j->r.identity, j->r.flags);
		return;
	}
	if (j->r.munged_down)
		munged_down(j->r.msg);
	refusal_log(j->path, grpc_call_peer(call), j->r.msg);
	grpc_call_finish(call, j->r.status, "%s", j->r.msg);
}

/* The threads' answers: each call goes on to its handler or ends. */
static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct auth_queue done = STAILQ_HEAD_INITIALIZER(done);
	struct flight_queue fdone = STAILQ_HEAD_INITIALIZER(fdone);
	struct auth_job *j;
	struct flight *f;
	uint64_t n;

	if (read(A.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("auth: eventfd");
	pthread_mutex_lock(&A.mu);
	STAILQ_CONCAT(&done, &A.done);
	STAILQ_CONCAT(&fdone, &A.owner_done);
	pthread_mutex_unlock(&A.mu);
	while ((f = STAILQ_FIRST(&fdone)) != NULL) {
		STAILQ_REMOVE_HEAD(&fdone, dentry);
		flight_done(f);
	}
	while ((j = STAILQ_FIRST(&done)) != NULL) {
		STAILQ_REMOVE_HEAD(&done, queue);
		int was_waiting = j->waiting;
		unwait(j);
		if (j->r.replay_forgot && (A.replay_warned_ms == 0 ||
		    mono_ms() - A.replay_warned_ms >= AUTH_REPLAY_WARN_MS)) {
			A.replay_warned_ms = mono_ms();
			log_warnx("auth: rdzvd's record of accepted MUNGE "
			    "credentials is full of unexpired ones; the "
			    "oldest are forgotten (munged still refuses their "
			    "replay unless it restarted)");
		}
		if (j->call == NULL || !was_waiting) {
			job_free(j);
			continue;
		}
		if (j->r.status == GRPC_OK && j->slurm_job != NULL &&
		    owner_wait(j))
			continue;
		decided(j);
		job_free(j);
	}
	timer_arm();
}

/* The call ended while its credential waited to be decoded (it leaves
 * the queue), was being decoded (the thread's answer is dropped when it
 * comes), or while it waited for squeue (the loop's: it stops waiting
 * now). */
static void
call_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct auth_job *j = arg;
	struct flight *f = j->flight;
	int queued;

	j->call = NULL;
	pthread_mutex_lock(&A.mu);
	queued = fair_cancel(&A.fair, &j->fair, mono_ms());
	pthread_mutex_unlock(&A.mu);
	if (queued) {
		unwait(j);
		job_free(j);
		return;
	}
	if (f == NULL)
		return;
	TAILQ_REMOVE(&f->calls, j, fentry);
	j->flight = NULL;
	unwait(j);
	job_free(j);
	flight_left(f);
}

/*
 * The paths anyone may call: probes, and finding the leader. ServerInfo
 * also tells the caller who it is, so a credential it carries is decoded
 * like any other.
 */
static int
open_path(const char *path, const char *cred)
{
	return strncmp(path, "/grpc.health.v1.Health/", 23) == 0 ||
	    (strcmp(path, "/rdzv.v1.Control/ServerInfo") == 0 && cred == NULL);
}

/* A Join that starts a node under a Slurm job's number: the one call
 * slurm-job-owner = check asks Slurm about (auth_slurm.c). */
static const Rdzv__V1__JoinRequest *
slurm_join(struct grpc_call *call, const char *path)
{
	const Rdzv__V1__JoinRequest *jr;

	if (strcmp(path, "/rdzv.v1.Rendezvous/Join") != 0 ||
	    (jr = (const Rdzv__V1__JoinRequest *)grpc_call_request(call)) ==
	    NULL)
		return NULL;
	return jr->session_id.len == 0 && auth_slurm_id(jr->rdzv_id) ? jr :
	    NULL;
}

/* A waiting call lost its place in the queue to another client's. */
static void
evict(struct auth_job *j)
{
	struct grpc_call *call = j->call;

	unwait(j);
	j->call = NULL;
	if (call != NULL) {
		grpc_call_on_close(call, NULL, NULL);
		grpc_call_finish(call, GRPC_UNAVAILABLE, "rdzvd dropped this "
		    "call, which waited for munged to decode its credential, "
		    "to make room for other clients' calls: its connection had "
		    "the most calls waiting (or sent credentials munged "
		    "refused); try again");
	}
	job_free(j);
}

static void
authenticate(struct grpc_call *call, const char *cred, void *arg)
{
	const char *path = grpc_call_path(call);
	const Rdzv__V1__JoinRequest *jr;
	struct auth_job *j;
	char want[CREDBIND_MAX];
	uint8_t key[AUTH_CRED_KEY_LEN];
	const char *why = NULL;
	struct fair_item *lost = NULL;
	const uint8_t *bytes;
	size_t len;
	int n, rc;

	if (open_path(path, cred)) {
		grpc_call_proceed(call, NULL, 0);
		return;
	}
	if (cred == NULL) {
		grpc_call_finish(call, GRPC_UNAUTHENTICATED, "rdzvd requires "
		    "a MUNGE credential on each call (auth = munge) and this "
		    "call carried none: run the client with --auth munge (or "
		    "RDZV_AUTH=munge) on a node where munged runs");
		return;
	}
	/* munged would take many texts for one credential; rdzvd takes the
	 * one munge_encode writes, so that none of the others passes for a
	 * new credential (auth_cred.c), and a header that is no credential
	 * at all never reaches munged's queue. */
	if (auth_cred_key(cred, key, &why) != 0) {
		grpc_call_finish(call, GRPC_UNAUTHENTICATED, "rdzvd refuses "
		    "this call's rdzv-munge header: %s; it must be exactly "
		    "one MUNGE credential as munge_encode writes it "
		    "(\"MUNGE:\", base64, ':')", why);
		return;
	}
	bytes = grpc_call_request_bytes(call, &len);
	if ((n = credbind_payload(path, bytes, len, want, sizeof(want))) <
	    0) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "rdzvd cannot "
		    "digest this %s request", path);
		return;
	}
	/* Whole before a thread may take it. */
	j = xcalloc(1, sizeof(*j));
	j->cred = xstrdup(cred);
	j->path = xstrdup(path);
	j->want = xstrdup(want);
	if (rdzvd.cfg.slurm_job_owner && (jr = slurm_join(call, path)) != NULL)
		j->slurm_job = xstrdup(jr->rdzv_id);
	j->call = call;
	pthread_mutex_lock(&A.mu);
	rc = fair_push(&A.fair, grpc_call_conn(call), grpc_call_peer(call),
	    &j->fair, mono_ms(), &lost, A.msg, sizeof(A.msg));
	if (rc == 0)
		pthread_cond_signal(&A.cv);
	pthread_mutex_unlock(&A.mu);
	if (lost != NULL)
		evict(job_of(lost));
	if (rc != 0) {
		job_free(j);
		grpc_call_finish(call, GRPC_UNAVAILABLE, "%s", A.msg);
		return;
	}
	/* The thread touches neither: its answer comes back on the loop. */
	wait_add(j);
	grpc_call_on_close(call, call_closed, j);
	if (!evtimer_pending(A.timer, NULL))
		timer_arm();
}

void
auth_start(struct grpc_server_opts *so)
{
	char err[512];

	if (rdzvd.cfg.auth != AUTH_MUNGE)
		return;
	A.on = 1;
	A.timeout_ms = AUTH_TIMEOUT_MS;
	if (rdzvd.cfg.munge_socket != NULL)
		A.munge_socket = xstrdup(rdzvd.cfg.munge_socket);
	if (rdzvd.cfg.admin_group != NULL)
		A.admin_group = xstrdup(rdzvd.cfg.admin_group);
	A.socket = A.munge_socket != NULL ? A.munge_socket :
	    "/run/munge/munge.socket.2";
	TAILQ_INIT(&A.wait);
	fair_init(&A.fair);
	STAILQ_INIT(&A.done);
	TAILQ_INIT(&A.owner_todo);
	TAILQ_INIT(&A.owner_running);
	STAILQ_INIT(&A.owner_done);
	LIST_INIT(&A.flights);
	if ((A.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		fatal("auth: eventfd");
	A.wake_ev = event_new(rdzvd.base, A.efd, EV_READ | EV_PERSIST,
	    done_cb, NULL);
	A.timer = evtimer_new(rdzvd.base, timer_cb, NULL);
	if (A.wake_ev == NULL || A.timer == NULL)
		fatalx("auth: out of memory");
	event_add(A.wake_ev, NULL);
	for (size_t i = 0; i < AUTH_THREADS + (rdzvd.cfg.slurm_job_owner ?
	    OWNER_THREADS : 0); i++) {
		int rc = pthread_create(&A.threads[i], NULL, i < AUTH_THREADS ?
		    worker : owner_worker, NULL);
		if (rc != 0)
			fatalx("auth: cannot start a thread: %s", strerror(rc));
		A.n_threads++;
	}
	/* munged may come up after us (it is refused until then), but an
	 * operator should hear of it now. */
	if (auth_munge_probe(rdzvd.cfg.munge_socket, err, sizeof(err)) != 0)
		log_warnx("auth = munge: %s; calls are refused with UNAVAILABLE "
		    "until munged answers", err);
	else
		log_info("auth = munge: munged at %s answers%s%s", A.socket,
		    rdzvd.cfg.admin_group != NULL ? "; admin-group " : "",
		    rdzvd.cfg.admin_group != NULL ? rdzvd.cfg.admin_group : "");
	so->auth_key = "rdzv-munge";
	so->authenticate = authenticate;
	so->auth_arg = NULL;
}

/* After grpc_server_free: no call is left to hear of its job. */
void
auth_stop(void)
{
	struct fair_item *it;
	struct auth_job *j;
	struct flight *f;

	if (!A.on)
		return;
	pthread_mutex_lock(&A.mu);
	A.stopping = 1;
	pthread_cond_broadcast(&A.cv);
	pthread_cond_broadcast(&A.owner_cv);
	/* The threads write to it only while not stopping. */
	close(A.efd);
	A.efd = -1;
	while ((it = fair_pop(&A.fair, 0)) != NULL) {
		fair_done(&A.fair, it, 0, 0);
		job_free(job_of(it));
	}
	/* Jobs in the threads' hands are theirs to free. */
	fair_free(&A.fair);
	while ((j = STAILQ_FIRST(&A.done)) != NULL) {
		STAILQ_REMOVE_HEAD(&A.done, queue);
		job_free(j);
	}
	/* Flights: their calls are the loop's; a flight in a thread's hands
	 * (on neither queue) is the thread's to free. */
	LIST_FOREACH(f, &A.flights, entry)
		while ((j = TAILQ_FIRST(&f->calls)) != NULL) {
			TAILQ_REMOVE(&f->calls, j, fentry);
			job_free(j);
		}
	while ((f = TAILQ_FIRST(&A.owner_todo)) != NULL) {
		TAILQ_REMOVE(&A.owner_todo, f, queue);
		free(f);
	}
	while ((f = STAILQ_FIRST(&A.owner_done)) != NULL) {
		STAILQ_REMOVE_HEAD(&A.owner_done, dentry);
		free(f);
	}
	LIST_INIT(&A.flights);
	A.n_flights = 0;
	pthread_mutex_unlock(&A.mu);
	/* A thread inside munge_decode frees its job when it returns; one
	 * stuck on a hung munged is left behind rather than waited for. */
	for (size_t i = 0; i < A.n_threads; i++)
		pthread_detach(A.threads[i]);
	TAILQ_INIT(&A.wait);
	A.n_waiting = 0;
	event_free(A.wake_ev);
	event_free(A.timer);
	A.wake_ev = A.timer = NULL;
	auth_munge_free();
	auth_replay_free();
	A.on = 0;
}
