/*
 * The client's side of MUNGE authentication (docs/SECURITY.md): a fresh
 * credential from the node's munged for every call. Its payload is the
 * method's path and a digest of the request (credbind.h), so that
 * rdzvd can refuse a credential made for another call or request. munge_encode is a round trip to the local munged; rdzv-agent and
 * rdzvctl make few calls, so they make it in line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buildconf.h"
#include "client.h"
#include "credbind.h"

#if HAVE_MUNGE
#include <munge.h>

int
client_munge_built(void)
{
	return 1;
}

int
client_munge_cred(const char *path, const uint8_t *req, size_t req_len,
    char **value, char **errmsg, void *socket)
{
	const char	*sock = socket != NULL ? socket : CLIENT_MUNGE_SOCKET;
	munge_ctx_t	 ctx;
	munge_err_t	 e;
	char		*cred = NULL;
	char		 payload[CREDBIND_MAX];
	int		 n;

	*value = NULL;
	*errmsg = NULL;
	if ((n = credbind_payload(path, req, req_len, payload,
	    sizeof(payload))) < 0) {
		if (asprintf(errmsg, "cannot bind a MUNGE credential to %s",
		    path) < 0)
			*errmsg = NULL;
		return GRPC_INTERNAL;
	}
	if ((ctx = munge_ctx_create()) == NULL) {
		*errmsg = strdup("out of memory for a MUNGE context");
		return GRPC_INTERNAL;
	}
	if (socket != NULL && (e = munge_ctx_set(ctx, MUNGE_OPT_SOCKET,
	    (char *)socket)) != EMUNGE_SUCCESS) {
		if (asprintf(errmsg, "--munge-socket %s: %s", sock,
		    munge_strerror(e)) < 0)
			*errmsg = NULL;
		munge_ctx_destroy(ctx);
		return GRPC_INTERNAL;
	}
	e = munge_encode(&cred, ctx, payload, n);
	if (e != EMUNGE_SUCCESS) {
		/* Never a call without the credential asked for: rdzvd
		 * would take it for another identity or refuse it. */
		if (asprintf(errmsg, "cannot get a MUNGE credential from "
		    "munged at %s: %s (is munged running on this node? "
		    "--munge-socket names another socket)", sock,
		    munge_ctx_strerror(ctx) != NULL ? munge_ctx_strerror(ctx) :
		    munge_strerror(e)) < 0)
			*errmsg = NULL;
		munge_ctx_destroy(ctx);
		return GRPC_UNAUTHENTICATED;
	}
	munge_ctx_destroy(ctx);
	*value = cred;
	return 0;
}

#else

int
client_munge_built(void)
{
	return 0;
}

int
client_munge_cred(const char *path, const uint8_t *req, size_t req_len,
    char **value, char **errmsg, void *socket)
{
	*value = NULL;
	*errmsg = strdup("this rdzv was built without MUNGE");
	return GRPC_UNAUTHENTICATED;
}

#endif
