/*
 * Module daemon/rpc/ (librdzvrpc): the gRPC services rdzvd serves (SPEC
 * §10), one handler per file and the table of them (rpc_services.c), the
 * Join streams and the leases of silent connections (rpc_streams.c), what
 * a call may reach (rpc_access.c). It feeds the core through the frame's
 * turn and hands the turn its consumers (rpc_services_start): the streams,
 * the followers, the counters. Its internals are in rpc_int.h.
 *
 * Calls: lib/base, lib/grpc, proto, daemon/core, daemon/store,
 *   daemon/convert, daemon/auth, daemon/frame.
 * Called by: daemon, daemon/ha.
 */
#ifndef RDZVD_RPC_H
#define RDZVD_RPC_H

#include <stddef.h>

#include "core.h"
#include "grpc.h"

/* rpc_services.c: the methods served, for the server and the counters. */
extern const struct grpc_method rpc_methods[];
extern const size_t rpc_n_methods;
/* The core's settings from rdzvd's, and the transport's (limits and
 * deadlines; the callbacks are the caller's). */
void		 rpc_services_core_config(struct core_config *);
void		 rpc_services_server_opts(struct grpc_server_opts *);
/* Once the core is loaded: the clock, the turn, the streams, a first turn
 * for restored deadlines. rpc_services_stop() undoes it. */
void		 rpc_services_start(void (*commit_failed)(const char *err));
void		 rpc_services_stop(void);
/* Stops serving the core (ha.c's step-down): every Watch and Join stream
 * and every call waiting for a commit ends with UNAVAILABLE and |why|;
 * the turn and the streams go, the clock stays. rpc_services_start()
 * serves a new core again. */
void		 rpc_services_step_down(const char *why);

/* rpc_streams.c: the open Join streams (/metrics). */
size_t		 rpc_streams_count(void);
/* Ends every stream with UNAVAILABLE, |why| and the leader hint, without
 * counting it as a disconnect (shutdown, stepping down): the node keeps
 * its place and resumes when a leader serves again. */
void		 rpc_streams_shutdown(const char *why);

/* rpc_watch.c: ends every Control.Watch with UNAVAILABLE, |why| and the
 * leader hint. */
void		 rpc_watch_end_all(const char *why);

/* rpc_health.c: tells every Health.Watch caller the new status and, when
 * |final|, ends them. */
void		 rpc_health_set_serving(int serving, int final);
/* The role changed (ha.c): Rendezvous and Control serve on a leader only;
 * their Watch callers hear the new status. */
void		 rpc_health_role_changed(void);

#endif
