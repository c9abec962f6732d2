/*
 * Rendezvous.Leave: a planned leave (SPEC §4 rule 8). Answered after the
 * commit that holds it.
 */
#include "rdzvd.h"
#include "rpc_int.h"

static void
answer(struct grpc_call *call, void *arg)
{
	Rdzv__V1__LeaveResponse resp = RDZV__V1__LEAVE_RESPONSE__INIT;
	grpc_call_reply(call, &resp.base);
}

void
rpc_leave(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__LeaveRequest *req = (const Rdzv__V1__LeaveRequest *)msg;
	const uint8_t *session = rpc_session_or_finish(call, req->session_id);
	char err[512];

	if (session == NULL)
		return;
	int rc = core_leave(rdzvd.core, turn_now(), grpc_call_identity(call),
	    session, req->reason[0] != '\0' ? req->reason :
	    "the agent was told to stop", err, sizeof(err));
	if (rc != CORE_OK) {
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	turn_answer(call, answer, NULL);
}
