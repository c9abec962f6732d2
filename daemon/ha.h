/*
 * High availability (SPEC §14): the replica's role, the paths between
 * leader and standby (ha.c), and the election on etcd (ha_elect.c).
 */
#ifndef RDZVD_HA_H
#define RDZVD_HA_H

#include <stddef.h>
#include <stdint.h>

struct etcd_opts;
struct grpc_call;

/* ha.c */
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

/* ha_elect.c: the campaign on etcd. */
/* Starts campaigning (an etcd store only). */
void		 ha_elect_start(void);
/* Campaigns again after stepping down. */
void		 ha_elect_again(void);
/* While leading: the advertised address of the replica whose key comes
 * after ours, which leads when we no longer do ("": none known). */
const char	*ha_elect_successor(void);
/* 1 once the first campaign has an outcome (or failed). */
int		 ha_elect_settled(void);
/* Campaigns no more; revokes our lease. */
void		 ha_elect_stop(void);
/* ha_elect_stop(), then frees the client (after the event loop). */
void		 ha_elect_free(void);

/* ha_etcd.c: the store's etcd settings, as the election uses them. */
/* The store's kind: 1 for etcd. */
int		 ha_store_is_etcd(void);
/* The etcd members in order ("" past the last), for ServerInfo. */
#define HA_MAX_ENDPOINTS	16
const char	*ha_etcd_endpoint(size_t i);
/* The store as configured: "sqlite:PATH" or "etcd://.../PREFIX". */
void		 ha_store_text(char *buf, size_t len);
/* The client options of the store's members and TLS files, and the
 * prefix of the leader keys ("PREFIX/leader/"). 0, or -1 with a message. */
int		 ha_etcd_conf(struct etcd_opts *o, char *prefix,
		    size_t prefixlen, char *err, size_t errlen);
/* Revokes lease |id| and waits for the answer (a second at most). */
void		 ha_etcd_revoke(int64_t id);

#endif
