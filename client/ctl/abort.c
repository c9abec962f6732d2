/*
 * rdzvctl abort ID [--reason TEXT]: every agent stops its workers now and
 * the job fails with "aborted by <identity>: <reason>" (SPEC §4 rule 9).
 */
#include "rdzvctl.h"

static int
abort_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__AbortJobRequest	req = RDZV__V1__ABORT_JOB_REQUEST__INIT;

	req.rdzv_id = argv[0];
	req.reason = (char *)(ctl->reason != NULL ? ctl->reason : "");
	return action_run(ctl, "AbortJob", &req.base, NULL);
}

const struct ctl_cmd cmd_abort_entry = {
	.name = "abort",
	.args = "ID",
	.summary = "every agent stops its workers now; the job fails",
	.help =
	    "  -r, --reason TEXT             why, for the agents and the log\n",
	.shortopts = "r:",
	.longopts = action_longopts,
	.min_args = 1,
	.max_args = 1,
	.option = action_option,
	.exec = abort_exec,
};
