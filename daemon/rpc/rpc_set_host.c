/*
 * Control.SetHost: an admin clears or quarantines a host (docs/HEALTH.md);
 * a quarantine evicts the host's live nodes from every job. Answered with
 * the host's record after the commit that holds the change.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdzvd.h"

static void
answer(struct grpc_call *call, void *name)
{
	const struct host *h = hosts_find(rdzvd.core->hosts, name);
	struct arena a = { 0 };

	if (h == NULL) {
		grpc_call_finish(call, GRPC_NOT_FOUND, "host %s is gone",
		    (const char *)name);
		return;
	}
	grpc_call_reply(call, &host_to_pb(&a, h, turn_now(),
	    rdzvd.core->hosts->policy.crash_window_ms)->base);
	arena_free(&a);
}

void
rpc_set_host(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__SetHostRequest *req =
	    (const Rdzv__V1__SetHostRequest *)msg;
	char err[512];
	char *name;
	int rc;

	rc = core_host_set(rdzvd.core, turn_now(), grpc_call_identity(call),
	    caller_is_admin(call), req->host, (enum host_state)req->state,
	    req->reason, err, sizeof(err));
	if (rc != GRPC_OK) {
		grpc_call_finish(call, rc, "%s", err);
		return;
	}
	name = xstrdup(req->host);
	turn_answer(call, answer, name);
}
