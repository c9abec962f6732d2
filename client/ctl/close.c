/*
 * rdzvctl close ID: no new rounds; the running workers finish and the job
 * closes when they are done, or at once when no round runs (SPEC §4 rule 9).
 */
#include <stdio.h>

#include "rdzvctl.h"

/* What close, abort and evict print: the job as the action left it. */
int
action_print(struct ctl *ctl, Rdzv__V1__Job *job)
{
	int	rc = CTL_EXIT_OK;

	if (ctl->output == CTL_OUTPUT_JSON)
		rc = json_emit(json_job(job, true), false);
	else
		printf("job %s: %s%s%s\n", job->rdzv_id,
		    fmt_job_state(job->state), job->reason[0] ? ": " : "",
		    job->reason);
	protobuf_c_message_free_unpacked(&job->base, NULL);
	return rc;
}

static int
close_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__CloseJobRequest	 req =
	    RDZV__V1__CLOSE_JOB_REQUEST__INIT;
	Rdzv__V1__Job			*job;
	int				 rc;

	req.rdzv_id = argv[0];
	if ((rc = ctl_call(ctl, "CloseJob", &req.base,
	    &rdzv__v1__job__descriptor, (ProtobufCMessage **)&job)) !=
	    CTL_EXIT_OK)
		return rc;
	return action_print(ctl, job);
}

const struct ctl_cmd cmd_close_entry = {
	.name = "close",
	.args = "ID",
	.summary = "no new rounds; running workers finish, the job closes",
	.min_args = 1,
	.max_args = 1,
	.exec = close_exec,
};
