/*
 * What auth.c (the decode queue, the wait list, the hook) and
 * auth_owner.c (Slurm job owners: squeue lookups shared fairly between
 * users) share. Private to daemon/auth/.
 */
#ifndef RDZVD_AUTH_INT_H
#define RDZVD_AUTH_INT_H

#include <sys/queue.h>

#include <pthread.h>
#include <stdint.h>

#include "auth.h"
#include "grpc.h"

#define AUTH_THREADS		4
/* Refused calls logged one by one per second (refusal_log). */
#define AUTH_LOG_PER_S		20
#define AUTH_TIMEOUT_MS		5000
/* Owner lookups: squeue runs at most this many at once, for at most this
 * many Slurm jobs in all (running and queued). */
#define OWNER_THREADS		4
#define OWNER_MAX_FLIGHTS	64
/* One user's share: lookups running at once, and in all. */
#define OWNER_USER_RUNNING	(OWNER_THREADS / 2)
#define OWNER_USER_FLIGHTS	16
/* The replay record being full is logged at most this often. */
#define AUTH_REPLAY_WARN_MS	60000
/* munged down is logged at most this often, unless the reason changes. */
#define AUTH_WARN_MS		10000

struct flight;

struct auth_job {
	TAILQ_ENTRY(auth_job)	 wait;		/* the loop's, by deadline */
	struct fair_item	 fair;		/* its line (auth_fair.c) */
	STAILQ_ENTRY(auth_job)	 queue;		/* done */
	int			 waiting;	/* on the wait list */
	struct grpc_call	*call;		/* NULL once it ended */
	uint64_t		 deadline_ms;
	char			*cred;
	char			*path;
	char			*want;		/* the payload it must carry */
	char			*slurm_job;	/* slurm-job-owner = check */
	struct flight		*flight;	/* waits for its owner */
	TAILQ_ENTRY(auth_job)	 fentry;	/* ... on its list */
	struct auth_result	 r;
};

TAILQ_HEAD(auth_wait, auth_job);
STAILQ_HEAD(auth_queue, auth_job);

enum flight_state { FLIGHT_QUEUED, FLIGHT_RUNNING, FLIGHT_DONE };

/* One squeue for one Slurm job, and the calls waiting for its answer. */
struct flight {
	LIST_ENTRY(flight)	 entry;		/* the loop's */
	TAILQ_ENTRY(flight)	 queue;		/* owner todo or running */
	STAILQ_ENTRY(flight)	 dentry;	/* owner done */
	TAILQ_HEAD(, auth_job)	 calls;		/* the loop's */
	char			 user[256];	/* who started it */
	enum flight_state	 state;		/* under mu */
	int			 cancel;	/* atomic: nobody waits */
	struct slurm_owner	 o;		/* the thread's until done */
	int			 rc;
	char			 err[400];
};
TAILQ_HEAD(flight_list, flight);
STAILQ_HEAD(flight_queue, flight);

struct auth_state {
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
	char			 msg[512];	/* a refusal being made */
	uint64_t		 log_ms;	/* refusal_log's second */
	size_t			 log_n, log_dropped;
	uint64_t		 replay_warned_ms;
	LIST_HEAD(, flight)	 flights;
	size_t			 n_flights;
	/* Shared with the threads, under mu. */
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	pthread_cond_t		 owner_cv;
	struct fair		 fair;		/* to decode */
	struct auth_queue	 done;
	struct flight_list	 owner_todo, owner_running;
	struct flight_queue	 owner_done;
	int			 efd;
	int			 stopping;
	pthread_t		 threads[AUTH_THREADS + OWNER_THREADS];
	size_t			 n_threads;
};
/* auth.c's, the one instance; A in both files. */
extern struct auth_state auth_state;
#define A auth_state

/* auth.c */
void	job_free(struct auth_job *j);
void	unwait(struct auth_job *j);
void	wait_add(struct auth_job *j);
void	decided(struct auth_job *j);

/* auth_owner.c */
void	*owner_worker(void *arg);
void	 flight_left(struct flight *f);
int	 owner_wait(struct auth_job *j);
void	 flight_done(struct flight *f);

#endif
