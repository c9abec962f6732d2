/* gRPC status names and classes. */
#include "grpc.h"

static const char *const status_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *
grpc_status_name(int status)
{
	if (status < 0 || (size_t)status >= sizeof(status_names) /
	    sizeof(status_names[0]))
		return "UNKNOWN_STATUS";
	return status_names[status];
}

int
grpc_status_transient(int status)
{
	switch (status) {
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
	case GRPC_CANCELLED:
	case GRPC_INTERNAL:
	case GRPC_UNKNOWN:
	case GRPC_ABORTED:
		return 1;
	default:
		return 0;
	}
}
