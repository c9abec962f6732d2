/*
 * Between auth.c (the event loop's side of MUNGE authentication: the hook,
 * the queue, the threads, the deadline) and auth_munge.c (what a thread
 * does for one call: munge_decode and the identity, all of it blocking).
 *
 * Module daemon/auth/: owns who a caller is under auth = munge (credentials
 * decoded off the loop, Slurm job owners). It calls libmunge and lib/grpc/'s
 * server hook; the frame (main.c) starts it and the RPC handlers read the
 * identity it set.
 */
#ifndef RDZVD_AUTH_H
#define RDZVD_AUTH_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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
 * call of |path|, whose payload must be |want| (lib/credbind.h: the path
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

/* auth_replay_etcd.c: the shared record on an etcd store, under
 * PREFIX/replay/. */
void	auth_replay_etcd_start(const char *endpoints, const char *prefix,
	    const char *ca, const char *cert, const char *key);
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

#endif
