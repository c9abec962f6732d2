/*
 * The protocol's states by name (names.h).
 */
#include "names.h"
#include "rdzv/v1/types.pb-c.h"

const char *
job_state_name(int state)
{
	switch (state) {
	case RDZV__V1__JOB_STATE__JOB_STATE_WAITING:
		return "waiting";
	case RDZV__V1__JOB_STATE__JOB_STATE_RUNNING:
		return "running";
	case RDZV__V1__JOB_STATE__JOB_STATE_CLOSING:
		return "closing";
	case RDZV__V1__JOB_STATE__JOB_STATE_CLOSED:
		return "closed";
	case RDZV__V1__JOB_STATE__JOB_STATE_FAILED:
		return "failed";
	default:
		return "unknown";
	}
}

const char *
node_state_name(int state)
{
	switch (state) {
	case RDZV__V1__NODE_STATE__NODE_STATE_PARTICIPANT:
		return "participant";
	case RDZV__V1__NODE_STATE__NODE_STATE_WAITING:
		return "waiting";
	case RDZV__V1__NODE_STATE__NODE_STATE_SPARE:
		return "spare";
	case RDZV__V1__NODE_STATE__NODE_STATE_SUCCEEDED:
		return "succeeded";
	case RDZV__V1__NODE_STATE__NODE_STATE_LEFT:
		return "left";
	case RDZV__V1__NODE_STATE__NODE_STATE_LOST:
		return "lost";
	case RDZV__V1__NODE_STATE__NODE_STATE_EVICTED:
		return "evicted";
	case RDZV__V1__NODE_STATE__NODE_STATE_FAILED:
		return "failed";
	default:
		return "unknown";
	}
}

const char *
hook_state_name(int s)
{
	switch (s) {
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_QUEUED:
		return "queued";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_RUNNING:
		return "running";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_EXITED:
		return "exited";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_SIGNALED:
		return "signaled";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_KILLED:
		return "killed";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_NOT_STARTED:
		return "not_started";
	case RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_DROPPED:
		return "dropped";
	}
	return "unknown";
}
