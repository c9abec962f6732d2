/*
 * slurm-job-owner = check, the event loop's and the owner threads' side
 * (auth.c's header comment says when a call waits for its owner): a
 * lookup (a flight) per Slurm job, shared by every call that waits for
 * it; the threads take the waiting lookup of the user with the fewest
 * running (the oldest of those), no user runs more than
 * OWNER_USER_RUNNING at once nor has more than OWNER_USER_FLIGHTS, and a
 * lookup whose callers all left is dropped, or its squeue killed.
 */
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_int.h"
#include "core.h"
#include "log.h"
#include "rdzvd.h"
#include "text.h"
#include "xmalloc.h"

/* How many lookups of |user| run now (mu held). */
static size_t
running_of(const char *user)
{
	struct flight *f;
	size_t n = 0;

	TAILQ_FOREACH(f, &A.owner_running, queue)
		n += strcmp(f->user, user) == 0;
	return n;
}

/*
 * The next lookup to run (mu held): of the user with the fewest running,
 * below OWNER_USER_RUNNING, the oldest; NULL if none may run now.
 */
static struct flight *
owner_pick(void)
{
	struct flight *f, *best = NULL;
	size_t n, best_n = OWNER_USER_RUNNING;

	TAILQ_FOREACH(f, &A.owner_todo, queue)
		if ((n = running_of(f->user)) < best_n) {
			best = f;
			best_n = n;
		}
	return best;
}

/* An owner thread: squeue for one Slurm job at a time. */
void *
owner_worker(void *arg)
{
	struct flight *f;
	uint64_t one = 1;

	pthread_mutex_lock(&A.mu);
	for (;;) {
		while (!A.stopping && (f = owner_pick()) == NULL)
			pthread_cond_wait(&A.owner_cv, &A.mu);
		if (A.stopping)
			break;
		TAILQ_REMOVE(&A.owner_todo, f, queue);
		TAILQ_INSERT_TAIL(&A.owner_running, f, queue);
		f->state = FLIGHT_RUNNING;
		pthread_mutex_unlock(&A.mu);

		f->rc = auth_slurm_ask(f->o.job, &f->o, &f->cancel, f->err,
		    sizeof(f->err));

		pthread_mutex_lock(&A.mu);
		TAILQ_REMOVE(&A.owner_running, f, queue);
		if (A.stopping) {
			/* auth_stop left it to us. */
			free(f);
			break;
		}
		f->state = FLIGHT_DONE;
		STAILQ_INSERT_TAIL(&A.owner_done, f, dentry);
		/* Another user's lookup may run now. */
		pthread_cond_broadcast(&A.owner_cv);
		if (write(A.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("auth: eventfd");
	}
	pthread_mutex_unlock(&A.mu);
	return NULL;
}

/*
 * A call stopped waiting for |f| (its wait ended, or it closed): with no
 * call left, nobody needs the answer. A lookup not started yet is
 * dropped; a running one's squeue is killed (auth_slurm.c).
 */
void
flight_left(struct flight *f)
{
	if (!TAILQ_EMPTY(&f->calls))
		return;
	pthread_mutex_lock(&A.mu);
	if (f->state == FLIGHT_QUEUED) {
		TAILQ_REMOVE(&A.owner_todo, f, queue);
		pthread_mutex_unlock(&A.mu);
		LIST_REMOVE(f, entry);
		A.n_flights--;
		free(f);
		return;
	}
	if (f->state == FLIGHT_RUNNING)
		__atomic_store_n(&f->cancel, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&A.mu);
}

/*
 * A decoded call that starts a new job under a Slurm job number: its
 * owner's answer from the cache, the flight under way, or a new flight.
 * Returns 1 when the call waits for a flight (it is the flight's now).
 */
int
owner_wait(struct auth_job *j)
{
	struct slurm_owner o;
	struct flight *f;
	size_t mine = 0;

	/* The job's owner is the core's to check once it exists. */
	if (core_job_find(rdzvd.core, j->slurm_job) != NULL)
		return 0;
	if (auth_slurm_cached(j->slurm_job, &o)) {
		auth_slurm_judge(&o, &j->r);
		return 0;
	}
	LIST_FOREACH(f, &A.flights, entry)
		if (strcmp(f->o.job, j->slurm_job) == 0)
			break;
	if (f != NULL)
		/* Wanted again: a drop asked for is called off (one that
		 * already happened ends this call with UNAVAILABLE). */
		__atomic_store_n(&f->cancel, 0, __ATOMIC_RELAXED);
	if (f == NULL)
		LIST_FOREACH(f, &A.flights, entry)
			mine += strcmp(f->user, j->r.identity) == 0;
	if (f == NULL && mine >= OWNER_USER_FLIGHTS) {
		j->r.status = GRPC_UNAVAILABLE;
		snprintf(j->r.msg, sizeof(j->r.msg), "rdzvd cannot ask Slurm "
		    "who owns job %s (slurm-job-owner = check): squeue is "
		    "already asked about %zu other Slurm jobs of %.100s, the "
		    "most one user may have asked about at once, and has not "
		    "answered (is slurmctld up?); try again", j->slurm_job,
		    mine, j->r.identity);
		return 0;
	}
	if (f == NULL && A.n_flights >= OWNER_MAX_FLIGHTS) {
		j->r.status = GRPC_UNAVAILABLE;
		snprintf(j->r.msg, sizeof(j->r.msg), "rdzvd cannot ask Slurm "
		    "who owns job %s (slurm-job-owner = check): squeue is "
		    "already asked about %zu other Slurm jobs and has not "
		    "answered (is slurmctld up?); try again", j->slurm_job,
		    A.n_flights);
		return 0;
	}
	if (f == NULL) {
		f = xcalloc(1, sizeof(*f));
		textcpy(f->o.job, sizeof(f->o.job), j->slurm_job);
		textcpy(f->user, sizeof(f->user), j->r.identity);
		TAILQ_INIT(&f->calls);
		LIST_INSERT_HEAD(&A.flights, f, entry);
		A.n_flights++;
		pthread_mutex_lock(&A.mu);
		f->state = FLIGHT_QUEUED;
		TAILQ_INSERT_TAIL(&A.owner_todo, f, queue);
		pthread_cond_signal(&A.owner_cv);
		pthread_mutex_unlock(&A.mu);
	}
	j->flight = f;
	TAILQ_INSERT_TAIL(&f->calls, j, fentry);
	wait_add(j);
	return 1;
}

/* squeue answered (or failed) for one Slurm job: every call waiting for
 * it goes on or ends. */
void
flight_done(struct flight *f)
{
	struct auth_job *j;

	LIST_REMOVE(f, entry);
	A.n_flights--;
	while ((j = TAILQ_FIRST(&f->calls)) != NULL) {
		TAILQ_REMOVE(&f->calls, j, fentry);
		j->flight = NULL;
		unwait(j);
		if (f->rc == 0) {
			auth_slurm_judge(&f->o, &j->r);
		} else {
			j->r.status = GRPC_UNAVAILABLE;
			snprintf(j->r.msg, sizeof(j->r.msg), "rdzvd cannot ask "
			    "Slurm who owns job %s (slurm-job-owner = check): "
			    "%s", f->o.job, f->err);
		}
		decided(j);
		job_free(j);
	}
	free(f);
}
