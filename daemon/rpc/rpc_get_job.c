/*
 * Control.GetJob: one job with its nodes and its latest events.
 */
#include <errno.h>

#include "rdzvd.h"

#define DEFAULT_EVENTS 10

void
rpc_get_job(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__GetJobRequest *req = (const Rdzv__V1__GetJobRequest *)msg;
	struct core_job *job = job_or_finish(call, req->rdzv_id);
	struct arena a = { 0 };

	if (job == NULL)
		return;
	Rdzv__V1__Job *m = job_to_pb(&a, job, turn_now(),
	    streams_last_seen_ms, req->events ? req->events : DEFAULT_EVENTS);
	if (grpc_call_reply(call, &m->base) == -EMSGSIZE)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "job %s does "
		    "not fit in one message; raise --max-message", job->rdzv_id);
	arena_free(&a);
}
