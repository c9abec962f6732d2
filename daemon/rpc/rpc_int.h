/*
 * daemon/rpc/'s own header, private to it: the handlers (one per file),
 * the Join streams (rpc_streams.c), what a call may reach (rpc_access.c:
 * the job, the session, the admin check, the core's results as gRPC
 * statuses). The module's public face is rpc.h.
 */
#ifndef RDZVD_RPC_INT_H
#define RDZVD_RPC_INT_H

#include "convert.h"
#include "core.h"
#include "rdzvd.h"
#include "rpc.h"

/* rpc_streams.c: the Join stream of each node, and leases of silent ones. */
void		 rpc_streams_init(void);
void		 rpc_streams_free(void);
/* Ties |call| to |node|; an older stream of the node is ended. */
void		 rpc_streams_attach(struct core_node *node,
		    struct grpc_call *call);
/* Sends one of the node's messages; ends the stream after a final one, or
 * with RESOURCE_EXHAUSTED when the node's connection is full. */
void		 rpc_streams_send(struct core_node *node,
		    const struct core_msg *msg);
/* Ends the stream of a node the core removed. */
void		 rpc_streams_forget(uint64_t node_id);
/* When the node was last heard from (wall ms): its connection, if live. */
int64_t		 rpc_streams_last_seen_ms(const struct core_node *,
		    struct core_now);


/* rpc_access.c: what a call may reach. */
/* The job named by the request, or NULL after finishing the call with
 * NOT_FOUND or INVALID_ARGUMENT. */
struct core_job	*rpc_job_or_finish(struct grpc_call *, const char *rdzv_id);
/* The session id a request carries, or NULL after finishing the call with
 * NOT_FOUND when it has not the length of rdzvd's. */
const uint8_t	*rpc_session_or_finish(struct grpc_call *,
		    ProtobufCBinaryData);
/* Replies with the job named by |rdzv_id| (a malloc'd string): the answer
 * of the operator actions, given to turn_answer. */
void		 rpc_answer_job(struct grpc_call *, void *rdzv_id);
/* 1 if the caller is one of the configured admins, or a member of
 * admin-group (SPEC §11). */
int		 rpc_caller_is_admin(struct grpc_call *);
/* The gRPC status of a core result (enum core_result): the one place the
 * core's outcomes become the protocol's. */
int		 rpc_status(int result);


/* rpc_list_hosts.c, rpc_set_host.c (docs/HEALTH.md) */
void rpc_list_hosts(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_set_host(struct grpc_call *, const ProtobufCMessage *, void *);

/* rpc_health.c */
void rpc_health_check(struct grpc_call *, const ProtobufCMessage *, void *);
void rpc_health_watch(struct grpc_call *, const ProtobufCMessage *, void *);

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
