/*
 * The store's etcd settings as the election and ServerInfo use them
 * (ha_etcd.c).
 */
#ifndef RDZVD_HA_ETCD_H
#define RDZVD_HA_ETCD_H

#include <stddef.h>
#include <stdint.h>

struct etcd_opts;

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
