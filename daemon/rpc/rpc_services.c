/*
 * Every RPC rdzvd serves, in one table (tmux's cmd.c lists its commands the
 * same way), each handler in a file named after it; and how the services
 * start around the core: its settings, the clock, where a turn's output
 * goes. main.c and the HTTP/2 fuzz target both start them here.
 */
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rdzvd.h"
#include "rpc_int.h"

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
/*
 * While a commit is in flight the core is sealed (turn.c): a call that
 * would change it waits (turn_hold) and runs when the commit is durable,
 * with the next group.
 */
#define WRITES(fn)							\
GATED(fn)								\
static void								\
writes_##fn(struct grpc_call *call, const ProtobufCMessage *req, void *arg) \
{									\
	if (turn_sealed()) {						\
		turn_hold(call, writes_##fn, req, arg);			\
		return;							\
	}								\
	gated_##fn(call, req, arg);					\
}
WRITES(rpc_join)
WRITES(rpc_report)
WRITES(rpc_leave)
WRITES(rpc_progress)
WRITES(rpc_close_job)
WRITES(rpc_abort_job)
WRITES(rpc_evict_node)
WRITES(rpc_set_host)
/* ListJobs answers from the last committed state (committed.c). */
GATED(rpc_list_jobs)

/*
 * Reads that show what the core holds wait while it holds something not
 * yet durable for them: a job with uncommitted changes (GetJob), the
 * events in the store, which the commit thread holds (ListEvents), hosts
 * with uncommitted changes (ListHosts), the first answer of a Watch.
 */
static bool
job_uncommitted(const char *rdzv_id)
{
	const struct core_job *j = core_job_find(rdzvd.core, rdzv_id);
	const struct core_node *n;

	if (j == NULL)
		return false;
	if (j->dirty)
		return true;
	TAILQ_FOREACH(n, &j->nodes, entry)
		if (n->dirty)
			return true;
	return false;
}

static bool
reads_wait(const char *path, const ProtobufCMessage *req)
{
	const struct core *c = rdzvd.core;

	if (rdzvd.standby)
		return false;
	if (path[0] == 'g')		/* GetJob */
		return job_uncommitted(((const Rdzv__V1__GetJobRequest *)
		    req)->rdzv_id);
	if (path[0] == 'e')		/* ListEvents */
		return turn_sealed() || job_uncommitted(
		    ((const Rdzv__V1__ListEventsRequest *)req)->rdzv_id);
	if (path[0] == 'h')		/* ListHosts */
		return !TAILQ_EMPTY(&c->hosts->dirty);
	/* Watch */
	return turn_sealed() || !TAILQ_EMPTY(&c->dirty_jobs) ||
	    !TAILQ_EMPTY(&c->dirty_nodes);
}

#define READS(fn, kind)							\
GATED(fn)								\
static void								\
reads_##fn(struct grpc_call *call, const ProtobufCMessage *req, void *arg) \
{									\
	if (reads_wait(kind, req)) {					\
		turn_hold_read(call, reads_##fn, req, arg);		\
		return;							\
	}								\
	gated_##fn(call, req, arg);					\
}
READS(rpc_get_job, "g")
READS(rpc_watch, "w")
READS(rpc_list_events, "e")
READS(rpc_list_hosts, "h")

const struct grpc_method rpc_methods[] = {
	/* Open ones (the last 1) need no credential, and a call of them
	 * does not prove its connection (grpc.h, max_conns). */
	{ HEALTH "Check", &grpc__health__v1__health_check_request__descriptor,
	    0, rpc_health_check, NULL, 0, 1 },
	{ HEALTH "Watch", &grpc__health__v1__health_check_request__descriptor,
	    1, rpc_health_watch, NULL, 0, 1 },

	{ RDZV "Join", REQ(join_request), 1, writes_rpc_join, NULL },
	{ RDZV "Report", REQ(report_request), 0, writes_rpc_report, NULL },
	{ RDZV "Leave", REQ(leave_request), 0, writes_rpc_leave, NULL },
	{ RDZV "Progress", REQ(progress_request), 0, writes_rpc_progress,
	    NULL },

	{ CONTROL "ListJobs", REQ(list_jobs_request), 0, gated_rpc_list_jobs,
	    NULL },
	{ CONTROL "GetJob", REQ(get_job_request), 0, reads_rpc_get_job, NULL },
	{ CONTROL "Watch", REQ(watch_request), 1, reads_rpc_watch, NULL },
	{ CONTROL "CloseJob", REQ(close_job_request), 0, writes_rpc_close_job,
	    NULL },
	{ CONTROL "AbortJob", REQ(abort_job_request), 0, writes_rpc_abort_job,
	    NULL },
	{ CONTROL "EvictNode", REQ(evict_node_request), 0,
	    writes_rpc_evict_node, NULL },
	{ CONTROL "ListEvents", REQ(list_events_request), 0,
	    reads_rpc_list_events, NULL },
	{ CONTROL "ListHosts", REQ(list_hosts_request), 0,
	    reads_rpc_list_hosts, NULL },
	{ CONTROL "SetHost", REQ(set_host_request), 0, writes_rpc_set_host,
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

const size_t rpc_n_methods = sizeof(rpc_methods) /
    sizeof(rpc_methods[0]);

void
rpc_services_core_config(struct core_config *cc)
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
rpc_services_server_opts(struct grpc_server_opts *so)
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
rpc_services_start(void (*commit_failed)(const char *err))
{
	struct turn_out out = {
		.send = rpc_streams_send,
		.jobs_changed = follow_jobs_changed,
		.node_removed = rpc_streams_forget,
		.committed = metrics_commit,
		.turn_done = turn_done,
		.hosts_changed = hook_hosts_changed,
		.commit_failed = commit_failed,
		.last_seen = rpc_streams_last_seen_ms,
	};

	stall_init();
	turn_init(&out);
	rpc_streams_init();
	/* Restored deadlines and leases need the timer armed. */
	turn_schedule();
}

void
rpc_services_step_down(const char *why)
{
	rpc_watch_end_all(why);
	rpc_streams_shutdown(why);
	turn_abandon(why);
	rpc_streams_free();
	turn_free();
}

void
rpc_services_stop(void)
{
	rpc_streams_free();
	turn_free();
	stall_free();
}
