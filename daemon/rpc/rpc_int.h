/*
 * Module daemon/rpc/: the gRPC services rdzvd serves (SPEC §10), one
 * handler per file and the table of them (rpc_services.c), the Join
 * streams and the leases of silent connections (rpc_streams.c), what a
 * call may reach (rpc_access.c: the job, the session, the admin check, the
 * core's results as gRPC statuses) and core state as protobuf
 * (rpc_convert.c). It calls the core, the frame (turn, follow, role) and
 * lib/grpc/; the frame calls it only through rdzvd_methods and the
 * stream hooks. Included by rdzvd.h, whose types it uses.
 */
#ifndef RDZVD_RPC_H
#define RDZVD_RPC_H

/* rpc_streams.c: the Join stream of each node, and leases of silent ones. */
void		 streams_init(void);
void		 streams_free(void);
/* Ties |call| to |node|; an older stream of the node is ended. */
void		 streams_attach(struct core_node *node, struct grpc_call *call);
/* Sends one of the node's messages; ends the stream after a final one, or
 * with RESOURCE_EXHAUSTED when the node's connection is full. */
void		 streams_send(struct core_node *node, const struct core_msg *msg);
/* Ends the stream of a node the core removed. */
void		 streams_forget(uint64_t node_id);
size_t		 streams_count(void);
/* When the node was last heard from (wall ms): its connection, if live. */
int64_t		 streams_last_seen_ms(const struct core_node *,
		    struct core_now);
/* Ends every stream with UNAVAILABLE, |why| and the leader hint, without
 * counting it as a disconnect (shutdown, stepping down): the node keeps
 * its place and resumes when a leader serves again. */
void		 streams_shutdown(const char *why);

/* rpc_watch.c: Control.Watch, a sink of follow.c. */
/* Ends every Watch with UNAVAILABLE, |why| and the leader hint. */
void		 watch_end_all(const char *why);

/* rpc_convert.c: core state to protobuf messages and back; no clock, no
 * connection. An arena owns every allocation a conversion makes; arena_free
 * releases them together. */
struct arena {
	void		**ptrs;
	size_t		  n, cap;
};
void		*arena_alloc(struct arena *, size_t);
void		 arena_free(struct arena *);
/* When a node was last heard from (wall ms), which only its connection
 * knows: streams_last_seen_ms. */
typedef int64_t	(*last_seen_fn)(const struct core_node *, struct core_now);
/* The job with its nodes when |last_seen| is given, a summary when it is
 * NULL; |events|: that many latest events. */
Rdzv__V1__Job	*job_to_pb(struct arena *, const struct core_job *,
		    struct core_now, last_seen_fn last_seen, uint32_t events);
void		 event_to_pb(struct arena *, const struct core_event *,
		    Rdzv__V1__Event *);
/* Fills |ev| from |msg| for |node|; allocations in |a|. */
void		 msg_to_pb(struct arena *, const struct core_node *,
		    const struct core_msg *, Rdzv__V1__JoinEvent *ev);
Rdzv__V1__Host	*host_to_pb(struct arena *, const struct host *,
		    struct core_now, uint64_t window_ms);
/* A node's GPU results as the core keeps them (*out: free it), counted into
 * healthy/total. 0, or INVALID_ARGUMENT with a message. */
#define GPUS_MAX	64
int		 gpus_from_pb(Rdzv__V1__GpuResult **, size_t,
		    struct core_gpu **out, uint32_t *healthy,
		    uint32_t *total, char *err, size_t errlen);

/* rpc_access.c: what a call may reach. */
/* The job named by the request, or NULL after finishing the call with
 * NOT_FOUND or INVALID_ARGUMENT. */
struct core_job	*job_or_finish(struct grpc_call *, const char *rdzv_id);
/* The session id a request carries, or NULL after finishing the call with
 * NOT_FOUND when it has not the length of rdzvd's. */
const uint8_t	*session_or_finish(struct grpc_call *, ProtobufCBinaryData);
/* Replies with the job named by |rdzv_id| (a malloc'd string): the answer
 * of the operator actions, given to turn_answer. */
void		 answer_job(struct grpc_call *, void *rdzv_id);
/* 1 if the caller is one of the configured admins, or a member of
 * admin-group (SPEC §11). */
int		 caller_is_admin(struct grpc_call *);
/* The gRPC status of a core result (enum core_result): the one place the
 * core's outcomes become the protocol's. */
int		 rpc_status(int result);

/* rpc_services.c */
extern const struct grpc_method rdzvd_methods[];
extern const size_t rdzvd_n_methods;
/* The core's settings from rdzvd's, and the transport's (limits and
 * deadlines; the callbacks are the caller's). */
void		 services_core_config(struct core_config *);
void		 services_server_opts(struct grpc_server_opts *);
/* Once the core is loaded: the clock, the turn, the streams, a first turn
 * for restored deadlines. services_stop() undoes it. */
void		 services_start(void (*commit_failed)(const char *err));
void		 services_stop(void);
/* Stops serving the core (ha.c's step-down): every Watch and Join stream
 * and every call waiting for a commit ends with UNAVAILABLE and |why|;
 * the turn and the streams go, the clock stays. services_start() serves
 * a new core again. */
void		 services_step_down(const char *why);

/* rpc_list_hosts.c, rpc_set_host.c (docs/HEALTH.md) */
void rpc_list_hosts(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_set_host(struct grpc_call *, const ProtobufCMessage *, void *);

/* rpc_health.c */
void rpc_health_check(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_health_watch(struct grpc_call *, const ProtobufCMessage *, void *);
/* Tells every Watch caller the new status and, when |final|, ends them. */
void health_set_serving(int serving, int final);
/* The role changed (ha.c): Rendezvous and Control serve on a leader only;
 * their Watch callers hear the new status. */
void health_role_changed(void);

/* rpc_reflection.c: ServerReflectionInfo, v1 and v1alpha alike (a
 * client-streaming method). */
void rpc_reflection_info(struct grpc_call *, const ProtobufCMessage *, void *);

/* rpc_*.c: one handler per file. */
void rpc_server_info(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_join(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_report(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_leave(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_progress(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_list_jobs(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_get_job(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_watch(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_close_job(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_abort_job(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_evict_node(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_list_events(struct grpc_call *, const ProtobufCMessage *, void *);

#endif
