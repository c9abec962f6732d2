/*
 * Control.ListJobs: every active job, or every job with `all`, as
 * summaries (no nodes, no events): what `rdzvctl status` shows.
 */
#include <errno.h>

#include "rdzvd.h"

void
rpc_list_jobs(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ListJobsRequest *req =
	    (const Rdzv__V1__ListJobsRequest *)msg;
	Rdzv__V1__ListJobsResponse resp = RDZV__V1__LIST_JOBS_RESPONSE__INIT;
	struct core_now now = turn_now();
	struct arena a = { 0 };
	struct core_job *job;

	resp.jobs = arena_alloc(&a, rdzvd.core->n_jobs * sizeof(*resp.jobs));
	TAILQ_FOREACH(job, &rdzvd.core->jobs, entry)
		if (req->all || !core_job_ended(job))
			resp.jobs[resp.n_jobs++] = job_to_pb(&a, job, now,
			    NULL, 0);
	if (grpc_call_reply(call, &resp.base) == -EMSGSIZE)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "%zu jobs do not "
		    "fit in one message; raise --max-message", resp.n_jobs);
	arena_free(&a);
}
