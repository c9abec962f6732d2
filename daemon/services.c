/*
 * Every RPC rdzvd serves, in one table (tmux's cmd.c lists its commands the
 * same way). Each handler lives in a file named after it.
 */
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzvd.h"

#define HEALTH "/grpc.health.v1.Health/"
#define CONTROL "/rdzv.v1.Control/"

const struct grpc_method rdzvd_methods[] = {
	{ HEALTH "Check", &grpc__health__v1__health_check_request__descriptor,
	    0, rpc_health_check, NULL },
	{ HEALTH "Watch", &grpc__health__v1__health_check_request__descriptor,
	    1, rpc_health_watch, NULL },
	{ CONTROL "ServerInfo", &rdzv__v1__server_info_request__descriptor,
	    0, rpc_server_info, NULL },
};

const size_t rdzvd_n_methods = sizeof(rdzvd_methods) /
    sizeof(rdzvd_methods[0]);
