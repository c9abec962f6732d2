/*
 * Control.EvictNode: that agent stops its workers and exits; the job
 * re-rounds as for a planned leave (SPEC §4 rule 9).
 */
#include <stdlib.h>
#include <string.h>

#include "rdzvd.h"
#include "rpc_int.h"

void
rpc_evict_node(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__EvictNodeRequest *req =
	    (const Rdzv__V1__EvictNodeRequest *)msg;
	char err[512];

	int rc = core_evict(rdzvd.core, turn_now(), grpc_call_identity(call),
	    rpc_caller_is_admin(call), req->rdzv_id, req->node_id,
	    req->reason[0] != '\0' ? req->reason : "evicted by an operator",
	    err, sizeof(err));
	if (rc != CORE_OK) {
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	turn_answer(call, rpc_answer_job, xstrdup(req->rdzv_id));
}
