/*
 * Module daemon/auth/ (librdzvauth): who a caller is when auth = munge
 * (docs/SECURITY.md): the uid of the MUNGE credential each call carries,
 * decoded off the event loop, shown as the user's name; Slurm job owners.
 * The frame's main.c starts and stops it; the RPC handlers read the flag
 * it gives an admin. Its internals are in auth_int.h.
 *
 * Calls: lib/base, lib/grpc, lib/etcd, daemon/core, daemon/frame.
 * Called by: daemon, daemon/rpc.
 */
#ifndef RDZVD_AUTH_H
#define RDZVD_AUTH_H

#include "grpc.h"

/* The admin flag grpc_call_proceed gives a member of admin-group. */
#define AUTH_FLAG_ADMIN	0x1u
/* Sets the server's authentication hook when auth = munge and starts the
 * decoding threads; exits with a message when they cannot start. */
void		 auth_start(struct grpc_server_opts *);
/* Stops the threads; calls still waiting end with UNAVAILABLE. */
void		 auth_stop(void);
/* With an etcd store: the record of credentials seen (against replay) is
 * shared by the replicas, on etcd under PREFIX/replay/. */
void		 auth_replay_etcd_start(const char *endpoints,
		    const char *prefix, const char *ca, const char *cert,
		    const char *key);

#endif
