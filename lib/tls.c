/* tls.c: being written. */
#include "grpc.h"
