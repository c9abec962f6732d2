/*
 * auth = munge (docs/SECURITY.md): every Rendezvous and Control call
 * carries a MUNGE credential in its `rdzv-munge` header, and its caller is
 * the credential's uid, shown as the user's name. Health checks and
 * ServerInfo need none (probes, and finding the leader); ServerInfo with
 * one says who its caller is.
 *
 * munge_decode is a blocking round trip to munged, so it never runs on the
 * event loop: the server's authentication hook (lib/grpc.h) queues the call
 * for a small pool of threads (AUTH_THREADS), and each result comes back
 * through an eventfd; then the call's handler runs, or the call ends with
 * the reason. The queue is bounded (AUTH_MAX_WAITING: more calls are
 * refused with UNAVAILABLE), and a call whose credential munged has not
 * decoded within AUTH_TIMEOUT_MS ends with UNAVAILABLE naming munged's
 * socket; its thread's answer is dropped when it comes. Every call may wait
 * equally long, so the wait list is in deadline order and one timer for
 * its oldest call bounds them all.
 */
#include <sys/eventfd.h>
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "auth.h"
#include "clock.h"
#include "log.h"
#include "rdzvd.h"
#include "xmalloc.h"

#define AUTH_THREADS		4
#define AUTH_MAX_WAITING	20000
#define AUTH_TIMEOUT_MS		5000
#define AUTH_SLURM_TIMEOUT_MS	12000
/* munged down is logged at most this often, unless the reason changes. */
#define AUTH_WARN_MS		10000

struct auth_job {
	TAILQ_ENTRY(auth_job)	 wait;		/* the loop's, by deadline */
	STAILQ_ENTRY(auth_job)	 queue;		/* todo or done */
	int			 waiting;	/* on the wait list */
	struct grpc_call	*call;		/* NULL once it ended */
	uint64_t		 deadline_ms;
	char			*cred;
	char			*path;
	char			*slurm_job;	/* slurm-job-owner = check */
	struct auth_result	 r;
};

TAILQ_HEAD(auth_wait, auth_job);
STAILQ_HEAD(auth_queue, auth_job);

static struct {
	int			 on;
	const char		*socket;	/* for messages */
	/* The threads' own copies: one stuck in munged when rdzvd exits
	 * must not read the freed config. Never freed. */
	char			*munge_socket;	/* NULL: the default */
	char			*admin_group;
	unsigned int		 timeout_ms;
	/* The loop's. */
	struct auth_wait	 wait;
	size_t			 n_waiting;
	struct event		*timer;
	struct event		*wake_ev;
	uint64_t		 warned_ms;
	char			 warned[512];	/* what was logged then */
	/* Shared with the threads, under mu. */
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	struct auth_queue	 todo, done;
	int			 efd;
	int			 stopping;
	pthread_t		 threads[AUTH_THREADS];
	size_t			 n_threads;
} A = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
    .efd = -1 };

static void
job_free(struct auth_job *j)
{
	if (j == NULL)
		return;
	free(j->cred);
	free(j->path);
	free(j->slurm_job);
	free(j);
}

static void *
worker(void *arg)
{
	const char *sock = A.munge_socket;
	const char *group = A.admin_group;
	struct auth_job *j;
	uint64_t one = 1;

	pthread_mutex_lock(&A.mu);
	for (;;) {
		while (!A.stopping && STAILQ_EMPTY(&A.todo))
			pthread_cond_wait(&A.cv, &A.mu);
		if (A.stopping)
			break;
		j = STAILQ_FIRST(&A.todo);
		STAILQ_REMOVE_HEAD(&A.todo, queue);
		pthread_mutex_unlock(&A.mu);

		auth_munge_decode(sock, group, j->cred, j->path, &j->r);
		if (j->r.status == GRPC_OK && j->slurm_job != NULL)
			auth_slurm_check(j->slurm_job, &j->r);

		pthread_mutex_lock(&A.mu);
		if (A.stopping) {
			/* The loop is gone: nobody waits for it. */
			job_free(j);
			break;
		}
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

static void
unwait(struct auth_job *j)
{
	if (!j->waiting)
		return;
	TAILQ_REMOVE(&A.wait, j, wait);
	j->waiting = 0;
	A.n_waiting--;
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

	while ((j = TAILQ_FIRST(&A.wait)) != NULL && j->deadline_ms <= now) {
		unwait(j);
		if (j->call == NULL)
			continue;
		snprintf(msg, sizeof(msg), "rdzvd cannot decode MUNGE "
		    "credentials: munged at %s did not answer within %u ms%s",
		    A.socket, A.timeout_ms, j->slurm_job != NULL ? " (with "
		    "squeue for slurm-job-owner = check)" : "");
		munged_down(msg);
		grpc_call_finish(j->call, GRPC_UNAVAILABLE, "%s", msg);
	}
	timer_arm();
}

/* The threads' answers: each call goes on to its handler or ends. */
static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct auth_queue done = STAILQ_HEAD_INITIALIZER(done);
	struct auth_job *j;
	struct grpc_call *call;
	uint64_t n;

	if (read(A.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("auth: eventfd");
	pthread_mutex_lock(&A.mu);
	STAILQ_CONCAT(&done, &A.done);
	pthread_mutex_unlock(&A.mu);
	while ((j = STAILQ_FIRST(&done)) != NULL) {
		STAILQ_REMOVE_HEAD(&done, queue);
		int was_waiting = j->waiting;
		unwait(j);
		if ((call = j->call) != NULL && was_waiting) {
			j->call = NULL;
			if (j->r.status == GRPC_OK) {
				grpc_call_proceed(call, j->r.identity,
				    j->r.flags);
			} else {
				if (j->r.munged_down)
					munged_down(j->r.msg);
				log_debug("auth: %s from %s refused: %s",
				    j->path, grpc_call_peer(call), j->r.msg);
				grpc_call_finish(call, j->r.status, "%s",
				    j->r.msg);
			}
		}
		job_free(j);
	}
	timer_arm();
}

/* The call ended while its credential was being decoded. */
static void
call_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct auth_job *j = arg;

	j->call = NULL;
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

static void
authenticate(struct grpc_call *call, const char *cred, void *arg)
{
	const char *path = grpc_call_path(call);
	const Rdzv__V1__JoinRequest *jr;
	struct auth_job *j;

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
	if (A.n_waiting >= AUTH_MAX_WAITING) {
		grpc_call_finish(call, GRPC_UNAVAILABLE, "rdzvd: %zu calls "
		    "already wait for munged at %s to decode their "
		    "credentials; try again", A.n_waiting, A.socket);
		return;
	}
	j = xcalloc(1, sizeof(*j));
	j->cred = xstrdup(cred);
	j->path = xstrdup(path);
	if (rdzvd.cfg.slurm_job_owner && (jr = slurm_join(call, path)) != NULL)
		j->slurm_job = xstrdup(jr->rdzv_id);
	j->call = call;
	j->deadline_ms = mono_ms() + A.timeout_ms;
	j->waiting = 1;
	TAILQ_INSERT_TAIL(&A.wait, j, wait);
	A.n_waiting++;
	grpc_call_on_close(call, call_closed, j);
	pthread_mutex_lock(&A.mu);
	STAILQ_INSERT_TAIL(&A.todo, j, queue);
	pthread_cond_signal(&A.cv);
	pthread_mutex_unlock(&A.mu);
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
	/* squeue has a deadline of its own, within this one. */
	A.timeout_ms = rdzvd.cfg.slurm_job_owner ? AUTH_SLURM_TIMEOUT_MS :
	    AUTH_TIMEOUT_MS;
	if (rdzvd.cfg.munge_socket != NULL)
		A.munge_socket = xstrdup(rdzvd.cfg.munge_socket);
	if (rdzvd.cfg.admin_group != NULL)
		A.admin_group = xstrdup(rdzvd.cfg.admin_group);
	A.socket = A.munge_socket != NULL ? A.munge_socket :
	    "/run/munge/munge.socket.2";
	TAILQ_INIT(&A.wait);
	STAILQ_INIT(&A.todo);
	STAILQ_INIT(&A.done);
	if ((A.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		fatal("auth: eventfd");
	A.wake_ev = event_new(rdzvd.base, A.efd, EV_READ | EV_PERSIST,
	    done_cb, NULL);
	A.timer = evtimer_new(rdzvd.base, timer_cb, NULL);
	if (A.wake_ev == NULL || A.timer == NULL)
		fatalx("auth: out of memory");
	event_add(A.wake_ev, NULL);
	for (size_t i = 0; i < AUTH_THREADS; i++) {
		int rc = pthread_create(&A.threads[i], NULL, worker, NULL);
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
	struct auth_job *j;

	if (!A.on)
		return;
	pthread_mutex_lock(&A.mu);
	A.stopping = 1;
	pthread_cond_broadcast(&A.cv);
	/* The threads write to it only while not stopping. */
	close(A.efd);
	A.efd = -1;
	while ((j = STAILQ_FIRST(&A.todo)) != NULL) {
		STAILQ_REMOVE_HEAD(&A.todo, queue);
		job_free(j);
	}
	while ((j = STAILQ_FIRST(&A.done)) != NULL) {
		STAILQ_REMOVE_HEAD(&A.done, queue);
		job_free(j);
	}
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
	A.on = 0;
}
