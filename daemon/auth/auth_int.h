/*
 * daemon/auth/'s own header, private to it: what auth.c (the event loop's
 * side: the hook, the decode queue, the wait list, the threads, the
 * deadline) shares with auth_munge.c (what a thread does for one call:
 * munge_decode and the identity, all of it blocking), with auth_owner.c
 * (Slurm job owners: squeue lookups shared fairly between users) and with
 * the credential, fairness, replay and Slurm files. The module's public
 * face is auth.h.
 */
#ifndef RDZVD_AUTH_INT_H
#define RDZVD_AUTH_INT_H

#include <sys/queue.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth.h"
#include "grpc.h"
#include "hash.h"

/* What decoding one call's credential came to. */
struct auth_result {
	int		 status;	/* GRPC_OK, or what the call ends with */
	char		 msg[512];	/* why not, for the client */
	char		 identity[256];	/* the user's name, or "uid:N" */
	unsigned int	 flags;		/* AUTH_FLAG_ADMIN */
	int		 munged_down;	/* munged did not answer: log it */
	int		 replay_forgot;	/* the replay record was full */
};

/* What squeue said of a Slurm job (auth_slurm.c). */
struct slurm_owner {
	char		 job[24];
	int		 found;		/* 0: Slurm has no such job */
	char		 uid[24];
	char		 user[256];
};

/* auth_munge.c */
/* 1 when this rdzvd has libmunge. */
int	auth_munge_built(void);
/*
 * Decodes |cred| with the munged of |socket| (NULL: the default) for a
 * call of |path|, whose payload must be |want| (credbind.h: the path
 * and a digest of the request) and which rdzvd must not have accepted
 * before (auth_replay.c); the identity is the uid's name, an admin flag
 * for a member of |admin_group| (may be NULL). Blocking: runs on a worker
 * thread. Thread-safe.
 */
void	auth_munge_decode(const char *socket, const char *admin_group,
	    const char *cred, const char *path, const char *want,
	    struct auth_result *r);
/* A round trip to munged at start (encode, decode): 0, or -1 with why. */
int	auth_munge_probe(const char *socket, char *err, size_t errlen);
/* Frees the cached admin group. */
void	auth_munge_free(void);

/* auth_cred.c */
#define AUTH_CRED_KEY_LEN	32
/*
 * Whether |text| is exactly one MUNGE credential written as munge_encode
 * writes it ("MUNGE:", padded base64 with its unused bits zero, ':', and
 * nothing else): 0 with |md| the credential's replay key (a digest of its
 * MAC and the fields before it, the same however the text was written),
 * or -1 with |why| saying what is wrong with the text. Thread-safe.
 */
int	auth_cred_key(const char *text, uint8_t md[AUTH_CRED_KEY_LEN],
	    const char **why);

/* auth_fair.c: the decode queue, one line per connection. */
#define FAIR_CONN_MAX		32	/* calls waiting per connection */
#define FAIR_SOURCE_MAX		2048	/* ... per source address */
#define FAIR_MAX		8192	/* ... in all */
#define FAIR_TIERS		3

struct fair_conn;
/* A call's place in the queue; embedded in what auth.c queues. */
struct fair_item {
	TAILQ_ENTRY(fair_item)	 entry;
	struct fair_conn	*fc;		/* NULL: in no line */
	int			 queued;	/* not popped yet */
};
struct fair {
	struct hash		 conns, srcs;
	TAILQ_HEAD(, fair_conn)	 ring[FAIR_TIERS];	/* by tier */
	size_t			 queued;
};

void	fair_init(struct fair *q);
/*
 * Queues |it| in the line of connection |key| from address |addr|: 0
 * (*evicted, when not NULL, lost its place to make room: its call is the
 * caller's to end), or -1 with |why|, the refusal for the client.
 */
int	fair_push(struct fair *q, const void *key, const char *addr,
	    struct fair_item *it, uint64_t now, struct fair_item **evicted,
	    char *why, size_t whylen);
/* The next call to decode, or NULL; fair_done() once decoded. */
struct fair_item *fair_pop(struct fair *q, uint64_t now);
/* |it| was decoded; |refused|: munged (or the payload) refused it. */
void	fair_done(struct fair *q, struct fair_item *it, int refused,
	    uint64_t now);
/* Takes |it| out of its line if it is still waiting there: 1, else 0. */
int	fair_cancel(struct fair *q, struct fair_item *it, uint64_t now);
/* Forgets every line; the items are the caller's. */
void	fair_free(struct fair *q);

/* auth_replay.c */
/*
 * Records the credential of replay key |md| (auth_cred_key), good until
 * |expires| (wall time): 0, or 1 when it is on the record already (a
 * replay), -1 out of memory. Sets *forgot when the record was full and
 * its oldest was dropped. Thread-safe.
 */
int	auth_replay_seen(const uint8_t md[AUTH_CRED_KEY_LEN], time_t expires,
	    int *forgot);
/*
 * A record shared by every replica (issue 42): |seen| is asked about each
 * credential this replica's own record does not hold, with the opaque
 * bytes the record keys it on and its expiry; it returns 1 when the
 * credential was recorded there before (a replay), 0 after recording it,
 * -1 when it cannot tell (the credential is then refused). Set before the
 * decoding threads start.
 */
void	auth_replay_share(int (*seen)(const uint8_t *rec, size_t len,
	    time_t expires, void *arg), void *arg);

/* auth_replay_etcd.c (auth_replay_etcd_start: auth.h) */
void	auth_replay_free(void);

/* auth_slurm.c */
/* 1 when |rdzv_id| is a Slurm job id (a number). */
int	auth_slurm_id(const char *rdzv_id);
/* 1 with |o| filled when squeue's answer for |job| is cached. Thread-safe. */
int	auth_slurm_cached(const char *job, struct slurm_owner *o);
/*
 * Runs squeue for |job| (bounded by its own deadline, and killed soon
 * after *cancel is set, which another thread may do) and caches the
 * answer: 0 with |o| filled, or -1 with why in |err|. Blocking: runs on
 * the owner threads (auth.c). Thread-safe.
 */
int	auth_slurm_ask(const char *job, struct slurm_owner *o,
	    const int *cancel, char *err, size_t errlen);
/* slurm-job-owner = check: whether the caller r->identity owns the job of
 * |o|; if not, r->status and r->msg say so (PERMISSION_DENIED). */
void	auth_slurm_judge(const struct slurm_owner *o, struct auth_result *r);

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
