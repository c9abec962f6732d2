/*
 * Control.AbortJob: every agent stops its workers now; the job fails with
 * "aborted by <identity>: <reason>" (SPEC §4 rule 9).
 */
#include <stdlib.h>
#include <string.h>

#include "rdzvd.h"
#include "rpc_int.h"

void
rpc_abort_job(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__AbortJobRequest *req =
	    (const Rdzv__V1__AbortJobRequest *)msg;
	char err[512];

	int rc = core_abort(rdzvd.core, turn_now(), grpc_call_identity(call),
	    rpc_caller_is_admin(call), req->rdzv_id, req->reason[0] != '\0' ?
	    req->reason : "no reason given", err, sizeof(err));
	if (rc != CORE_OK) {
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	turn_answer(call, rpc_answer_job, xstrdup(req->rdzv_id));
}
