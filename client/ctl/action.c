/*
 * What the operator's actions share (close, abort, evict; SPEC §4 rule 9):
 * each is one call that answers with the job as the action left it, which
 * is then printed, and abort and evict take the same --reason.
 */
#include <stdio.h>

#include "rdzvctl.h"

const struct option action_longopts[] = {
	{ "reason", required_argument, NULL, 'r' },
	{ NULL, 0, NULL, 0 },
};

int
action_option(struct ctl *ctl, int ch, const char *arg)
{
	if (ch != 'r')
		return -1;
	ctl->reason = arg;
	return 0;
}

int
action_run(struct ctl *ctl, const char *method, const ProtobufCMessage *req,
    const char *done)
{
	Rdzv__V1__Job	*job;
	int		 rc;

	if ((rc = ctl_call(ctl, method, req, &rdzv__v1__job__descriptor,
	    (ProtobufCMessage **)&job)) != CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON)
		rc = json_emit(json_job(job, true), false);
	else {
		if (done != NULL)
			printf("job %s: %s\n", job->rdzv_id, done);
		printf("job %s: %s%s%s\n", job->rdzv_id,
		    job_state_name(job->state), job->reason[0] ? ": " : "",
		    job->reason);
	}
	protobuf_c_message_free_unpacked(&job->base, NULL);
	return rc;
}
