/*
 * Rendezvous.Progress: the step a node's workers reached (docs/HEALTH.md).
 * Kept in memory only, so it is answered at once: there is nothing to make
 * durable, and the turn it schedules commits nothing (it only tells the
 * watchers, at most once a second per job).
 */
#include "rdzvd.h"
#include "rpc_int.h"

void
rpc_progress(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ProgressRequest *req =
	    (const Rdzv__V1__ProgressRequest *)msg;
	Rdzv__V1__ProgressResponse resp = RDZV__V1__PROGRESS_RESPONSE__INIT;
	const uint8_t *session = rpc_session_or_finish(call, req->session_id);
	char err[512];

	if (session == NULL)
		return;
	int rc = core_progress(rdzvd.core, turn_now(),
	    grpc_call_identity(call), session, req->generation, req->step,
	    err, sizeof(err));
	if (rc != CORE_OK) {
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	grpc_call_reply(call, &resp.base);
	turn_schedule();
}
