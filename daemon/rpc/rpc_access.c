/*
 * What a call may reach: the job its request names (or the NOT_FOUND or
 * INVALID_ARGUMENT that ends it), the node its session_id names, and
 * whether its caller is one of the configured admins or a member of
 * admin-group (SPEC §11, auth.c). The operator actions answer with the
 * job they changed from here, after the commit.
 */
#include "auth.h"
#include "rdzvd.h"
#include "rpc_int.h"

int
rpc_caller_is_admin(struct grpc_call *call)
{
	return (grpc_call_auth_flags(call) & AUTH_FLAG_ADMIN) != 0 ||
	    config_is_admin(&rdzvd.cfg, grpc_call_identity(call));
}

struct core_job *
rpc_job_or_finish(struct grpc_call *call, const char *rdzv_id)
{
	struct core_job *job;
	char err[512];

	if (rdzv_id_check(rdzv_id, err, sizeof(err)) != 0) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "%s", err);
		return NULL;
	}
	if ((job = core_job_find(rdzvd.core, rdzv_id)) == NULL)
		grpc_call_finish(call, GRPC_NOT_FOUND, "job %s not found",
		    rdzv_id);
	return job;
}

const uint8_t *
rpc_session_or_finish(struct grpc_call *call, ProtobufCBinaryData id)
{
	if (id.len == CORE_SESSION_LEN)
		return id.data;
	grpc_call_finish(call, GRPC_NOT_FOUND, "no node has this session_id "
	    "(%zu bytes; rdzvd's have %d)", id.len, CORE_SESSION_LEN);
	return NULL;
}

void
rpc_answer_job(struct grpc_call *call, void *rdzv_id)
{
	struct core_job *job = rpc_job_or_finish(call, rdzv_id);
	struct convert_job_view view = turn_job_view(10);
	struct convert_arena a = { 0 };

	if (job == NULL)
		return;
	grpc_call_reply(call, &convert_job(&a, job, turn_now(), &view)->base);
	convert_free(&a);
}

int
rpc_status(int result)
{
	switch ((enum core_result)result) {
	case CORE_OK:
		return GRPC_OK;
	case CORE_INVALID:
		return GRPC_INVALID_ARGUMENT;
	case CORE_NOT_FOUND:
		return GRPC_NOT_FOUND;
	case CORE_DENIED:
		return GRPC_PERMISSION_DENIED;
	case CORE_REFUSED:
		return GRPC_FAILED_PRECONDITION;
	case CORE_LIMIT:
		return GRPC_RESOURCE_EXHAUSTED;
	case CORE_ERROR:
		break;
	}
	return GRPC_INTERNAL;
}
