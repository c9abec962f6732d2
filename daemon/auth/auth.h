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

#include <stddef.h>

/* What decoding one call's credential came to. */
struct auth_result {
	int		 status;	/* GRPC_OK, or what the call ends with */
	char		 msg[512];	/* why not, for the client */
	char		 identity[256];	/* the user's name, or "uid:N" */
	unsigned int	 flags;		/* AUTH_FLAG_ADMIN */
	int		 munged_down;	/* munged did not answer: log it */
};

/* auth_munge.c */
/* 1 when this rdzvd has libmunge. */
int	auth_munge_built(void);
/*
 * Decodes |cred| with the munged of |socket| (NULL: the default) for a
 * call of |path|, which its payload must name; the identity is the uid's
 * name, an admin flag for a member of |admin_group| (may be NULL).
 * Blocking: runs on a worker thread. Thread-safe.
 */
void	auth_munge_decode(const char *socket, const char *admin_group,
	    const char *cred, const char *path, struct auth_result *r);
/* A round trip to munged at start (encode, decode): 0, or -1 with why. */
int	auth_munge_probe(const char *socket, char *err, size_t errlen);
/* Frees the cached admin group. */
void	auth_munge_free(void);

/* auth_slurm.c */
/* 1 when |rdzv_id| is a Slurm job id (a number). */
int	auth_slurm_id(const char *rdzv_id);
/*
 * slurm-job-owner = check: whether the caller r->identity owns Slurm job
 * |job|; if not, r->status and r->msg say so (PERMISSION_DENIED, or
 * UNAVAILABLE when squeue cannot tell). Blocking: runs on a worker thread.
 */
void	auth_slurm_check(const char *job, struct auth_result *r);

#endif
