/*
 * Control.GetJob: one job with its nodes and its latest events.
 */
#include <errno.h>

#include "rdzvd.h"
#include "rpc_int.h"

#define DEFAULT_EVENTS 10

void
rpc_get_job(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__GetJobRequest *req = (const Rdzv__V1__GetJobRequest *)msg;
	struct core_job *job = rpc_job_or_finish(call, req->rdzv_id);
	struct convert_arena a = { 0 };

	if (job == NULL)
		return;
	struct convert_job_view view = turn_job_view(req->events ?
	    req->events : DEFAULT_EVENTS);
	Rdzv__V1__Job *m = convert_job(&a, job, turn_now(), &view);
	if (grpc_call_reply(call, &m->base) == -EMSGSIZE)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "job %s does "
		    "not fit in one message; raise --max-message", job->rdzv_id);
	convert_free(&a);
}
