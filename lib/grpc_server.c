/* grpc_server.c: being written. */
#include "grpc.h"
