/*
 * What rdzv-agent and rdzvctl share: how they find and reach rdzvd.
 *
 * --server HOST:PORT | unix:PATH, or a comma-separated list of them (the
 * replicas of an HA rdzvd, SPEC §14; servers.h says which one is used),
 * and the TLS files, each also taken from the environment (RDZV_SERVER,
 * RDZV_TLS_CA, RDZV_TLS_CERT, RDZV_TLS_KEY, RDZV_TLS_SERVER_NAME; flags
 * win). Giving any TLS file turns TLS on; a client without TLS files talks
 * cleartext HTTP/2 (SPEC §6, §10, §13). --auth munge (RDZV_AUTH) attaches
 * a fresh MUNGE credential to every call, from the munged of
 * --munge-socket (RDZV_MUNGE_SOCKET; docs/SECURITY.md).
 *
 * client.c (the options), servers.c (the list and the leader), munge.c
 * (the credential) and names.c (the protocol's names as users read them).
 *
 * Calls: lib/base, lib/grpc, proto.
 * Called by: client/agent, client/ctl.
 */
#ifndef RDZV_CLIENT_H
#define RDZV_CLIENT_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc.h"
#include "parse.h"
#include "servers.h"
#include "xmalloc.h"

#define CLIENT_DEFAULT_SERVER	"127.0.0.1:29400"

/* getopt_long values of the shared options; keep program options below. */
enum {
	CLIENT_OPT_SERVER = 0x1000,
	CLIENT_OPT_TLS_CA,
	CLIENT_OPT_TLS_CERT,
	CLIENT_OPT_TLS_KEY,
	CLIENT_OPT_TLS_SERVER_NAME,
	CLIENT_OPT_CONNECT_TIMEOUT,
	CLIENT_OPT_AUTH,
	CLIENT_OPT_MUNGE_SOCKET,
};

/* How a client proves who it is beyond TLS. */
enum client_auth {
	CLIENT_AUTH_NONE,
	CLIENT_AUTH_MUNGE,
};

/* The request header that carries the MUNGE credential. */
#define CLIENT_MUNGE_HEADER	"rdzv-munge"
/* libmunge's default socket, for messages. */
#define CLIENT_MUNGE_SOCKET	"/run/munge/munge.socket.2"

/* Spliced into a program's struct option table. */
#define CLIENT_LONG_OPTIONS						\
	{ "server", required_argument, NULL, CLIENT_OPT_SERVER },	\
	{ "tls-ca", required_argument, NULL, CLIENT_OPT_TLS_CA },	\
	{ "tls-cert", required_argument, NULL, CLIENT_OPT_TLS_CERT },	\
	{ "tls-key", required_argument, NULL, CLIENT_OPT_TLS_KEY },	\
	{ "tls-server-name", required_argument, NULL,			\
	    CLIENT_OPT_TLS_SERVER_NAME },				\
	{ "connect-timeout", required_argument, NULL,			\
	    CLIENT_OPT_CONNECT_TIMEOUT },				\
	{ "auth", required_argument, NULL, CLIENT_OPT_AUTH },		\
	{ "munge-socket", required_argument, NULL,			\
	    CLIENT_OPT_MUNGE_SOCKET }

/* One line each, for a program's --help. */
#define CLIENT_OPTIONS_HELP						\
	"  --server HOST:PORT|unix:PATH[,...]  rdzvd to use, or its\n"	\
	"                                replicas (RDZV_SERVER, default\n" \
	"                                " CLIENT_DEFAULT_SERVER ")\n"	\
	"  --tls-ca FILE                 verify rdzvd against this CA\n"	\
	"  --tls-cert FILE --tls-key FILE  client certificate (mTLS)\n"	\
	"  --tls-server-name NAME        name to verify (default: host)\n" \
	"  --connect-timeout DURATION    give up connecting after this (10s;\n" \
	"                                a plain number is seconds)\n"	\
	"  --auth none|munge             attach a MUNGE credential to each\n" \
	"                                call (RDZV_AUTH, default none)\n" \
	"  --munge-socket PATH           munged's socket (RDZV_MUNGE_SOCKET,\n" \
	"                                default " CLIENT_MUNGE_SOCKET ")\n"

struct client_opts {
	const char	*server;	/* as given */
	const char	*tls_ca;
	const char	*tls_cert;
	const char	*tls_key;
	const char	*server_name;
	uint32_t	 connect_timeout_ms;
	enum client_auth auth;
	const char	*munge_socket;	/* NULL: libmunge's default */
};

/*
 * The defaults, then the environment. 0, or -1 with a message naming the
 * variable when RDZV_CONNECT_TIMEOUT is not a duration or RDZV_AUTH not
 * none or munge.
 */
int	client_opts_init(struct client_opts *, char *err, size_t errlen);

/*
 * Takes one getopt_long result. Returns 1 when |ch| was a shared option
 * (applied), 0 when it is not one, -1 on a bad value (message in err).
 */
int	client_opts_take(struct client_opts *, int ch, const char *arg,
	    char *err, size_t errlen);

/*
 * Fills |out| for grpc_client_new()/grpc_unary_sync(): the first server of
 * the list (set out->server to another entry to use that one), a TLS
 * context created when asked for (*tls, to tls_free() after the client).
 * 0, or -1 with a message naming the bad value or file.
 */
int	client_opts_grpc(const struct client_opts *,
	    struct grpc_client_opts *out, struct tls_ctx **tls,
	    char *err, size_t errlen);

/* munge.c: the MUNGE credential of a call, a grpc_client_opts.cred_fn
 * whose argument is the socket path (NULL: libmunge's default). */
int	client_munge_cred(const char *path, const uint8_t *req,
	    size_t req_len, char **value, char **errmsg, void *socket);
/* 1 when this build has libmunge. */
int	client_munge_built(void);

/*
 * The server list of --server (RDZV_SERVER), each entry checked against
 * the TLS options (a unix socket is cleartext). 0, or -1 with a message
 * naming the bad entry.
 */
int	client_opts_servers(const struct client_opts *, struct server_list *,
	    char *err, size_t errlen);

#endif
