/*
 * Every RPC rdzvd serves, in one table (tmux's cmd.c lists its commands the
 * same way). Each handler lives in a file named after it.
 */
#include "grpc/health/v1/health.pb-c.h"
#include "rdzvd.h"

#define HEALTH "/grpc.health.v1.Health/"
#define RDZV "/rdzv.v1.Rendezvous/"
#define CONTROL "/rdzv.v1.Control/"
#define REQ(name) &rdzv__v1__##name##__descriptor

const struct grpc_method rdzvd_methods[] = {
	{ HEALTH "Check", &grpc__health__v1__health_check_request__descriptor,
	    0, rpc_health_check, NULL },
	{ HEALTH "Watch", &grpc__health__v1__health_check_request__descriptor,
	    1, rpc_health_watch, NULL },

	{ RDZV "Join", REQ(join_request), 1, rpc_join, NULL },
	{ RDZV "Report", REQ(report_request), 0, rpc_report, NULL },
	{ RDZV "Leave", REQ(leave_request), 0, rpc_leave, NULL },

	{ CONTROL "ListJobs", REQ(list_jobs_request), 0, rpc_list_jobs, NULL },
	{ CONTROL "GetJob", REQ(get_job_request), 0, rpc_get_job, NULL },
	{ CONTROL "Watch", REQ(watch_request), 1, rpc_watch, NULL },
	{ CONTROL "CloseJob", REQ(close_job_request), 0, rpc_close_job, NULL },
	{ CONTROL "AbortJob", REQ(abort_job_request), 0, rpc_abort_job, NULL },
	{ CONTROL "EvictNode", REQ(evict_node_request), 0, rpc_evict_node,
	    NULL },
	{ CONTROL "ListEvents", REQ(list_events_request), 0, rpc_list_events,
	    NULL },
	{ CONTROL "ServerInfo", REQ(server_info_request), 0, rpc_server_info,
	    NULL },
};

const size_t rdzvd_n_methods = sizeof(rdzvd_methods) /
    sizeof(rdzvd_methods[0]);
