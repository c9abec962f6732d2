/*
 * Every RPC rdzvd serves, in one table (tmux's cmd.c lists its commands the
 * same way), each handler in a file named after it; and how the services
 * start around the core: its settings, the clock, where a turn's output
 * goes. main.c and the HTTP/2 fuzz target both start them here.
 */
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rdzvd.h"

#define HEALTH "/grpc.health.v1.Health/"
#define RDZV "/rdzv.v1.Rendezvous/"
#define CONTROL "/rdzv.v1.Control/"
#define REFLECTION(v) "/grpc.reflection." v ".ServerReflection/"
#define REFLECTION_REQ \
	&grpc__reflection__v1__server_reflection_request__descriptor
#define REQ(name) &rdzv__v1__##name##__descriptor

/*
 * The gate of a standby (SPEC §14): Rendezvous and Control calls are the
 * leader's, and a standby ends them with UNAVAILABLE and the leader's
 * address, before anything reaches its (empty) core. ServerInfo, Health and
 * reflection are every replica's own.
 */
#define GATED(fn)							\
static void								\
gated_##fn(struct grpc_call *call, const ProtobufCMessage *req, void *arg) \
{									\
	if (rdzvd.standby) {						\
		role_refuse(call);					\
		return;							\
	}								\
	fn(call, req, arg);						\
}
GATED(rpc_join)
GATED(rpc_report)
GATED(rpc_leave)
GATED(rpc_progress)
GATED(rpc_list_jobs)
GATED(rpc_get_job)
GATED(rpc_watch)
GATED(rpc_close_job)
GATED(rpc_abort_job)
GATED(rpc_evict_node)
GATED(rpc_list_events)
GATED(rpc_list_hosts)
GATED(rpc_set_host)

const struct grpc_method rdzvd_methods[] = {
	/* Open ones (the last 1) need no credential, and a call of them
	 * does not prove its connection (grpc.h, max_conns). */
	{ HEALTH "Check", &grpc__health__v1__health_check_request__descriptor,
	    0, rpc_health_check, NULL, 0, 1 },
	{ HEALTH "Watch", &grpc__health__v1__health_check_request__descriptor,
	    1, rpc_health_watch, NULL, 0, 1 },

	{ RDZV "Join", REQ(join_request), 1, gated_rpc_join, NULL },
	{ RDZV "Report", REQ(report_request), 0, gated_rpc_report, NULL },
	{ RDZV "Leave", REQ(leave_request), 0, gated_rpc_leave, NULL },
	{ RDZV "Progress", REQ(progress_request), 0, gated_rpc_progress,
	    NULL },

	{ CONTROL "ListJobs", REQ(list_jobs_request), 0, gated_rpc_list_jobs,
	    NULL },
	{ CONTROL "GetJob", REQ(get_job_request), 0, gated_rpc_get_job, NULL },
	{ CONTROL "Watch", REQ(watch_request), 1, gated_rpc_watch, NULL },
	{ CONTROL "CloseJob", REQ(close_job_request), 0, gated_rpc_close_job,
	    NULL },
	{ CONTROL "AbortJob", REQ(abort_job_request), 0, gated_rpc_abort_job,
	    NULL },
	{ CONTROL "EvictNode", REQ(evict_node_request), 0,
	    gated_rpc_evict_node, NULL },
	{ CONTROL "ListEvents", REQ(list_events_request), 0,
	    gated_rpc_list_events, NULL },
	{ CONTROL "ListHosts", REQ(list_hosts_request), 0,
	    gated_rpc_list_hosts, NULL },
	{ CONTROL "SetHost", REQ(set_host_request), 0, gated_rpc_set_host,
	    NULL },
	/* Every replica answers: role, leader, store (SPEC §14). */
	{ CONTROL "ServerInfo", REQ(server_info_request), 0, rpc_server_info,
	    NULL, 0, 1 },

	/* Bidirectional: each request message is a question (v1alpha's
	 * messages are v1's on the wire). */
	{ REFLECTION("v1") "ServerReflectionInfo", REFLECTION_REQ, 1,
	    rpc_reflection_info, NULL, 1, 1 },
	{ REFLECTION("v1alpha") "ServerReflectionInfo", REFLECTION_REQ, 1,
	    rpc_reflection_info, NULL, 1, 1 },
};

const size_t rdzvd_n_methods = sizeof(rdzvd_methods) /
    sizeof(rdzvd_methods[0]);

void
services_core_config(struct core_config *cc)
{
	core_config_defaults(cc);
	cc->max_nodes_per_job = rdzvd.cfg.max_nodes_per_job;
	cc->max_jobs_per_owner = rdzvd.cfg.max_jobs_per_identity;
	cc->max_ended_per_owner = rdzvd.cfg.max_ended_jobs_per_identity;
	cc->max_join_timeout_ms = rdzvd.cfg.max_join_timeout_ms;
	cc->retention_ms = (uint64_t)rdzvd.cfg.retention_s * 1000;
	cc->straggler_steps = rdzvd.cfg.straggler_steps;
	cc->straggler_ms = rdzvd.cfg.straggler_ms;
	cc->hosts.gpu_failure = (enum host_gpu_action)rdzvd.cfg.host_gpu_failure;
	cc->hosts.suspect_crashes = rdzvd.cfg.host_suspect_crashes;
	cc->hosts.quarantine_crashes = rdzvd.cfg.host_quarantine_crashes;
	cc->hosts.crash_window_ms = rdzvd.cfg.host_crash_window_ms;
}

void
services_server_opts(struct grpc_server_opts *so)
{
	*so = (struct grpc_server_opts){
		.max_message = rdzvd.cfg.max_message,
		.max_streams = rdzvd.cfg.max_streams,
		.max_conns = rdzvd.cfg.max_conns,
		.keepalive_ms = rdzvd.cfg.keepalive_ms,
		.preface_ms = rdzvd.cfg.preface_timeout_ms,
		.idle_ms = rdzvd.cfg.idle_timeout_ms,
		.max_conns_per_addr = rdzvd.cfg.max_conns_per_addr,
		.unproven_idle_ms = rdzvd.cfg.unauth_idle_timeout_ms,
		.unix_mode = rdzvd.cfg.unix_mode,
		.unix_set_gid = rdzvd.cfg.unix_group != NULL,
		.unix_gid = rdzvd.cfg.unix_gid,
	};
}

/* What a turn changed goes to the counters and, a line per job event that
 * matters, to the log. */
static void
turn_done(const struct core *c, struct core_now now)
{
	metrics_turn(c, now);
	joblog_turn(c, now);
}

void
services_start(void (*commit_failed)(const char *err))
{
	struct turn_out out = {
		.send = streams_send,
		.jobs_changed = follow_jobs_changed,
		.node_removed = streams_forget,
		.committed = metrics_commit,
		.turn_done = turn_done,
		.hosts_changed = hook_hosts_changed,
		.commit_failed = commit_failed,
	};

	stall_init();
	turn_init(&out);
	streams_init();
	/* Restored deadlines and leases need the timer armed. */
	turn_schedule();
}

void
services_step_down(const char *why)
{
	watch_end_all(why);
	streams_shutdown(why);
	turn_abandon(why);
	streams_free();
	turn_free();
}

void
services_stop(void)
{
	streams_free();
	turn_free();
	stall_free();
}
