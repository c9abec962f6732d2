/*
 * rdzvctl close ID: no new rounds; the running workers finish and the job
 * closes when they are done, or at once when no round runs (SPEC §4 rule 9).
 */
#include "rdzvctl.h"

static int
close_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__CloseJobRequest	req = RDZV__V1__CLOSE_JOB_REQUEST__INIT;

	req.rdzv_id = argv[0];
	return action_run(ctl, "CloseJob", &req.base, NULL);
}

const struct ctl_cmd cmd_close_entry = {
	.name = "close",
	.args = "ID",
	.summary = "no new rounds; running workers finish, the job closes",
	.min_args = 1,
	.max_args = 1,
	.exec = close_exec,
};
