/* grpc_client.c: being written. */
#include "grpc.h"
