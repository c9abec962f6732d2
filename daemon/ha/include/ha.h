/*
 * High availability (SPEC §14): the replica's role and the paths between
 * leader and standby (ha.c). The election on etcd (ha_elect.h) tells it
 * when to take either.
 *
 * Module daemon/ha/ (librdzvha): owns the election and the replica's role
 * changes. It calls lib/etcd/, the store (to load and drop state), the
 * core (a new one to load into), the frame (role.c, the store's settings
 * in config_store.c) and the RPC services (to start and stop serving a
 * core); the program (main.c) starts it.
 *
 * Calls: lib/base, lib/etcd, daemon/core, daemon/store, daemon/frame,
 *   daemon/rpc.
 * Called by: daemon.
 */
#ifndef RDZVD_HA_H
#define RDZVD_HA_H

#include <stddef.h>
#include <stdint.h>

/*
 * After the store is open: with SQLite, lead at once (a store that cannot
 * be loaded is fatal); with etcd, start as a standby and campaign.
 * |role_changed| (may be NULL) runs after each change of role, for what
 * only rdzvd itself has (the status page).
 */
void		 ha_start(void (*role_changed)(int leading));
/* With etcd: runs the event loop until the first campaign has an outcome
 * (leading, or a standby that knows the leader), for leader-lease and 2 s
 * at most. */
void		 ha_wait_settled(void);
/* At shutdown: campaign no more, and give up the leadership (the lease is
 * revoked, so a standby takes over at once). */
void		 ha_shutdown(void);
/* After the event loop: frees what the election holds. */
void		 ha_free(void);
/* Becomes the leader: a fresh core loaded from the store, then the
 * services. 0, or -1 with a message (the replica stays a standby). */
int		 ha_lead(char *err, size_t errlen);
/* Stops serving at once (a lost lease, a failed commit): every stream and
 * every call waiting for a commit ends with UNAVAILABLE, the core is
 * dropped, and the replica campaigns again. */
void		 ha_step_down(const char *why);
/* A failed commit (turn_out's commit_failed): SQLite exits (SPEC §9),
 * etcd steps down. */
void		 ha_commit_failed(const char *err);

#endif
