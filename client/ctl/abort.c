/*
 * rdzvctl abort ID [--reason TEXT]: every agent stops its workers now and
 * the job fails with "aborted by <identity>: <reason>" (SPEC §4 rule 9).
 */
#include <stdio.h>

#include "rdzvctl.h"

static int
abort_option(struct ctl *ctl, int ch, const char *arg)
{
	if (ch != 'r')
		return -1;
	ctl->reason = arg;
	return 0;
}

static int
abort_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__AbortJobRequest	 req =
	    RDZV__V1__ABORT_JOB_REQUEST__INIT;
	Rdzv__V1__Job			*job;
	int				 rc;

	req.rdzv_id = argv[0];
	req.reason = (char *)(ctl->reason != NULL ? ctl->reason : "");
	if ((rc = ctl_call(ctl, "AbortJob", &req.base,
	    &rdzv__v1__job__descriptor, (ProtobufCMessage **)&job)) !=
	    CTL_EXIT_OK)
		return rc;
	return action_print(ctl, job);
}

static const struct option abort_longopts[] = {
	{ "reason", required_argument, NULL, 'r' },
	{ NULL, 0, NULL, 0 },
};

const struct ctl_cmd cmd_abort_entry = {
	.name = "abort",
	.args = "ID",
	.summary = "every agent stops its workers now; the job fails",
	.help =
	    "  -r, --reason TEXT             why, for the agents and the log\n",
	.shortopts = "r:",
	.longopts = abort_longopts,
	.min_args = 1,
	.max_args = 1,
	.option = abort_option,
	.exec = abort_exec,
};
