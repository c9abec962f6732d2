/*
 * The store as configured: its kind, its text, its etcd members and client
 * options, for the election and ServerInfo (config_store.c).
 */
#ifndef RDZVD_CONFIG_STORE_H
#define RDZVD_CONFIG_STORE_H

#include <stddef.h>
#include <stdint.h>

struct etcd_opts;

/* The store's kind: 1 for etcd. */
int		 config_store_is_etcd(void);
/* The etcd members in order ("" past the last), for ServerInfo. */
#define CONFIG_MAX_ETCD_ENDPOINTS	16
const char	*config_etcd_endpoint(size_t i);
/* The store as configured: "sqlite:PATH" or "etcd://.../PREFIX". */
void		 config_store_text(char *buf, size_t len);
/* The client options of the store's members and TLS files, and the
 * prefix of the leader keys ("PREFIX/leader/"). 0, or -1 with a message. */
int		 config_etcd_opts(struct etcd_opts *o, char *prefix,
		    size_t prefixlen, char *err, size_t errlen);

#endif
