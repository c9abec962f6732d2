/*
 * rdzvd's internal interfaces, grouped by the file that defines them.
 */
#ifndef RDZVD_H
#define RDZVD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "endpoint.h"
#include "grpc.h"

#define RDZVD_MAX_LISTEN 16
#define RDZVD_MAX_ADMINS 64

/* config.c */
struct config {
	char		*file;		/* the config file read, or NULL */
	struct endpoint	 listen[RDZVD_MAX_LISTEN];
	size_t		 n_listen;
	char		*db;
	char		*tls_cert;
	char		*tls_key;
	char		*tls_ca;
	int		 insecure;
	int		 log_level;
	char		*admins[RDZVD_MAX_ADMINS];
	size_t		 n_admins;
	size_t		 max_message;
	uint32_t	 max_streams;
	uint32_t	 max_conns;
	uint32_t	 max_nodes_per_job;
	uint32_t	 retention_s;
	uint32_t	 keepalive_ms;
	uint32_t	 shutdown_timeout_ms;
	int		 check_only;
};

/* Fills |cfg| from the defaults, the config file and |argv|, in that order
 * of precedence (flags win). Exits 2 with a message on bad input. */
void config_load(struct config *cfg, int argc, char **argv);
/* Checks the combination of settings; returns 0 or -1 with a message in
 * |err|. */
int config_validate(const struct config *cfg, char *err, size_t errlen);
void config_print(const struct config *cfg, FILE *f);
void config_free(struct config *cfg);
/* The default database path of SPEC §9 into |buf|. */
void config_default_db(char *buf, size_t len);
int config_is_admin(const struct config *cfg, const char *identity);

/* main.c */
struct rdzvd {
	struct event_base	*base;
	struct grpc_server	*srv;
	struct config		 cfg;
	struct tls_ctx		*tls;
	uint64_t		 started_mono_ms;
	int64_t			 started_wall_ms;
	int			 serving;	/* health: SERVING or not */
	char			 listeners[RDZVD_MAX_LISTEN][300];
	size_t			 n_listeners;
};
extern struct rdzvd rdzvd;

/* services.c */
extern const struct grpc_method rdzvd_methods[];
extern const size_t rdzvd_n_methods;

/* rpc_health.c */
void rpc_health_check(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_health_watch(struct grpc_call *, const ProtobufCMessage *, void *);
/* Tells every Watch caller the new status and, when |final|, ends them. */
void health_set_serving(int serving, int final);

/* rpc_server_info.c */
void rpc_server_info(struct grpc_call *, const ProtobufCMessage *, void *);

#endif
