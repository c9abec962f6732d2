/*
 * How rdzv-agent and rdzvctl reach rdzvd: the --server and TLS options,
 * their RDZV_* environment variables, and the gRPC client options they make.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define DEFAULT_CONNECT_TIMEOUT_MS	10000

/* An environment variable, NULL when unset or empty. */
static const char *
env(const char *name)
{
	const char	*v = getenv(name);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* --auth's value; |what| names where it came from in the message. */
static int
set_auth(struct client_opts *o, const char *v, const char *what, char *err,
    size_t errlen)
{
	if (strcmp(v, "none") == 0) {
		o->auth = CLIENT_AUTH_NONE;
		return 0;
	}
	if (strcmp(v, "munge") != 0) {
		snprintf(err, errlen, "%s%s: not an authentication (none or "
		    "munge)", what, v);
		return -1;
	}
	if (!client_munge_built()) {
		snprintf(err, errlen, "%s%s: this rdzv was built without MUNGE "
		    "(build it with libmunge-dev installed)", what, v);
		return -1;
	}
	o->auth = CLIENT_AUTH_MUNGE;
	return 0;
}

int
client_opts_init(struct client_opts *o, char *err, size_t errlen)
{
	const char	*v;
	uint64_t	 ms;

	memset(o, 0, sizeof(*o));
	o->server = (v = env("RDZV_SERVER")) != NULL ? v :
	    CLIENT_DEFAULT_SERVER;
	o->tls_ca = env("RDZV_TLS_CA");
	o->tls_cert = env("RDZV_TLS_CERT");
	o->tls_key = env("RDZV_TLS_KEY");
	o->server_name = env("RDZV_TLS_SERVER_NAME");
	o->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	o->munge_socket = env("RDZV_MUNGE_SOCKET");
	if ((v = env("RDZV_AUTH")) != NULL && set_auth(o, v, "RDZV_AUTH=",
	    err, errlen) != 0)
		return -1;
	if ((v = env("RDZV_CONNECT_TIMEOUT")) == NULL)
		return 0;
	if (parse_duration(v, 1000, &ms) != 0 || ms == 0 || ms > UINT32_MAX) {
		snprintf(err, errlen, "RDZV_CONNECT_TIMEOUT=%s is not a "
		    "duration above 0 (try 10, 10s or 500ms)", v);
		return -1;
	}
	o->connect_timeout_ms = (uint32_t)ms;
	return 0;
}

int
client_opts_take(struct client_opts *o, int ch, const char *arg, char *err,
    size_t errlen)
{
	uint64_t	ms;

	switch (ch) {
	case CLIENT_OPT_SERVER:
		o->server = arg;
		return 1;
	case CLIENT_OPT_TLS_CA:
		o->tls_ca = arg;
		return 1;
	case CLIENT_OPT_TLS_CERT:
		o->tls_cert = arg;
		return 1;
	case CLIENT_OPT_TLS_KEY:
		o->tls_key = arg;
		return 1;
	case CLIENT_OPT_TLS_SERVER_NAME:
		o->server_name = arg;
		return 1;
	case CLIENT_OPT_CONNECT_TIMEOUT:
		if (parse_duration(arg, 1000, &ms) != 0 || ms == 0 ||
		    ms > UINT32_MAX) {
			snprintf(err, errlen, "--connect-timeout: '%s' is not "
			    "a duration above 0 (try 10, 10s or 500ms)", arg);
			return -1;
		}
		o->connect_timeout_ms = (uint32_t)ms;
		return 1;
	case CLIENT_OPT_AUTH:
		return set_auth(o, arg, "--auth ", err, errlen) == 0 ? 1 : -1;
	case CLIENT_OPT_MUNGE_SOCKET:
		o->munge_socket = arg;
		return 1;
	default:
		return 0;
	}
}

int
client_opts_servers(const struct client_opts *o, struct server_list *sl,
    char *err, size_t errlen)
{
	char	 e[512];

	if (server_list_parse(sl, o->server, RDZV_DEFAULT_PORT, e,
	    sizeof(e)) != 0) {
		snprintf(err, errlen, "--server %s: %s", o->server, e);
		return -1;
	}
	if (o->tls_ca == NULL && o->tls_cert == NULL)
		return 0;
	for (size_t i = 0; i < sl->n; i++) {
		if (sl->s[i].ep.kind == ENDPOINT_UNIX) {
			snprintf(err, errlen, "--server %s: TLS is for TCP "
			    "servers; a unix socket (%s) is cleartext",
			    o->server, sl->s[i].name);
			return -1;
		}
	}
	return 0;
}

int
client_opts_grpc(const struct client_opts *o, struct grpc_client_opts *out,
    struct tls_ctx **tls, char *err, size_t errlen)
{
	struct server_list sl;
	struct tls_opts	 t;

	memset(out, 0, sizeof(*out));
	*tls = NULL;
	if (client_opts_servers(o, &sl, err, errlen) != 0)
		return -1;
	out->server = sl.s[0].ep;
	if ((o->tls_cert == NULL) != (o->tls_key == NULL)) {
		snprintf(err, errlen, "--tls-cert and --tls-key go together: "
		    "only %s was given", o->tls_cert != NULL ? "--tls-cert" :
		    "--tls-key");
		return -1;
	}
	if (o->tls_ca != NULL || o->tls_cert != NULL) {
		memset(&t, 0, sizeof(t));
		t.ca = o->tls_ca;
		t.cert = o->tls_cert;
		t.key = o->tls_key;
		if (tls_client_new(&t, tls, err, errlen) != 0)
			return -1;
	}
	out->tls = *tls;
	out->server_name = o->server_name;
	out->connect_timeout_ms = o->connect_timeout_ms;
	if (o->auth == CLIENT_AUTH_MUNGE) {
		out->cred_key = CLIENT_MUNGE_HEADER;
		out->cred_fn = client_munge_cred;
		out->cred_arg = (void *)o->munge_socket;
	}
	return 0;
}
