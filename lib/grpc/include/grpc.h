/*
 * gRPC over HTTP/2 on nghttp2 and libevent: a server and a client.
 *
 * Messages are protobuf-c messages. The server decodes each request with the
 * descriptor of its method-table entry and hands the handler a decoded
 * message; replies are packed from protobuf-c messages. Nothing here logs or
 * exits: functions return 0 or a negative errno, and failures of a call reach
 * its owner as a gRPC status.
 *
 * Lifetimes. A server call (struct grpc_call) lives from its handler's
 * invocation until it is finished (grpc_call_finish, grpc_call_reply) or its
 * stream or connection goes away. Whoever keeps a call pointer past the
 * handler's return must register an on-close callback; the callback is the
 * last moment the pointer is valid. A client call (struct grpc_ccall) lives
 * until its done callback has returned.
 *
 * Programs using this must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)): libevent
 * and OpenSSL write to sockets a peer may have closed, and lib/ does not
 * change a program's signal dispositions.
 *
 * Module lib/grpc/ (librdzvgrpc): owns the HTTP/2 connections, calls and the message
 * framing (grpc_wire.h). It calls lib/'s base and the libraries; every
 * program and lib/etcd/ call it.
 *
 * Calls: lib/base.
 * Called by: client/agent, client/common, client/ctl, daemon/auth,
 *   daemon/frame, daemon/rpc, lib/etcd.
 */
#ifndef RDZV_GRPC_H
#define RDZV_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>
#include <protobuf-c/protobuf-c.h>

#include "clock.h"
#include "endpoint.h"
#include "tls.h"

/* gRPC status codes (grpc/grpc doc/statuscodes.md). */
enum grpc_status {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
};

/* "OK", "NOT_FOUND", ...; "UNKNOWN_STATUS" outside the table. */
const char *grpc_status_name(int status);
/* Whether a call that failed with |status| may go through if tried again
 * (the connection, the peer's load or its answer may change); 0 or 1. */
int grpc_status_transient(int status);

/* ---------------------------------------------------------------- server */

struct grpc_server;
struct grpc_conn;
struct grpc_call;

/*
 * A method's handler. |req| is the decoded request, owned by the call and
 * freed when the handler returns (copy what you keep). A unary handler
 * answers with grpc_call_reply() or grpc_call_finish(), now or later; a
 * streaming handler sends with grpc_call_send() and ends with
 * grpc_call_finish().
 *
 * A client-streaming method's handler runs as soon as the request's headers
 * have arrived, with |req| NULL; it takes the request messages with
 * grpc_call_on_message().
 */
typedef void (*grpc_handler_fn)(struct grpc_call *call,
    const ProtobufCMessage *req, void *arg);

struct grpc_method {
	const char *path;	/* "/rdzv.v1.Control/ServerInfo" */
	const ProtobufCMessageDescriptor *request;
	int server_streaming;
	grpc_handler_fn handler;
	void *arg;
	int client_streaming;	/* the client sends any number of
				   messages (bidi when server_streaming
				   too) */
	int open;		/* anyone may call it (health, finding
				   the leader): a call of it does not
				   prove its connection (max_conns) */
};

struct grpc_server_opts {
	size_t max_message;		/* default 4 MiB (SPEC §12) */
	uint32_t max_streams;		/* per connection, default 100 */
	uint32_t max_conns;		/* default 100,000; at the cap a new
					   connection closes the oldest
					   unproven one (no authenticated
					   call yet), else it is refused */
	uint32_t max_conns_per_addr;	/* from one peer address (TCP), the
					   same way; 0: no limit */
	size_t out_cap;			/* queued output per connection before
					   grpc_call_send says -ENOBUFS and
					   grpc_call_reply RESOURCE_EXHAUSTED;
					   default 1 MiB */
	size_t out_total_cap;		/* ... of every connection together,
					   past which the one holding the most
					   is closed; default 32 MiB */
	uint32_t keepalive_ms;		/* PING a connection silent this long;
					   default 5000, 0 never */
	uint32_t preface_ms;		/* close a connection that has not
					   sent the HTTP/2 client preface
					   (after the TLS handshake) this long
					   after it was accepted; default
					   10000 */
	uint32_t idle_ms;		/* GOAWAY, then close, a connection
					   that has held no stream this long;
					   default 600000 */
	uint32_t unproven_idle_ms;	/* ... one that has made no
					   authenticated call; default
					   idle_ms */

	/*
	 * Unix listeners' socket files: their mode when unix_mode is not 0
	 * (else what the umask leaves), and their group unix_gid when
	 * unix_set_gid. Both are set before the socket listens, so no
	 * client connects under other permissions.
	 */
	unsigned int unix_mode;
	int unix_set_gid;
	gid_t unix_gid;

	/*
	 * What the transport did and why, for the program's log (lib/ does
	 * not log). Each may be NULL and none may call into the server.
	 *
	 * conn_closed runs once per connection as it closes, with the
	 * peer ("10.0.0.5:41234", "[::1]:41234", "unix") and why ("the peer
	 * closed the connection", "HTTP/2: Received bad client magic byte
	 * string", ...).
	 *
	 * tls_failed runs, before conn_closed, for a TLS connection that
	 * ends before its handshake completed or whose handshake left it
	 * unusable (no ALPN h2, no client certificate), with the same
	 * reason. A peer that closed without sending a byte (a port probe)
	 * is not a failed handshake.
	 *
	 * accept_paused runs when accepting a connection failed with the
	 * errno |err| (EMFILE: out of descriptors). Accepting pauses
	 * instead of spinning on a listener that stays readable, and
	 * resumes as soon as one of the server's connections closes, or
	 * after |pause_ms| when none does.
	 *
	 * accept_blocked tells when new clients stop being served and when
	 * they are again, once each per episode. |why| is the errno of a
	 * failed accept (the clients wait in the listen backlog), or 0
	 * when max_conns connections are open (new ones are closed at
	 * once). It runs with |ended| 0 at the first failure of an
	 * episode, and with |ended| 1 when the episode is over (a
	 * connection was accepted, or one closed below max_conns), with
	 * how long it lasted and how many accepts failed or connections
	 * were refused in it.
	 */
	void (*conn_closed)(const char *peer, const char *reason, void *arg);
	void (*tls_failed)(const char *peer, const char *reason, void *arg);
	void (*accept_paused)(int err, uint32_t pause_ms, void *arg);
	void (*accept_blocked)(int why, int ended, uint64_t ms,
	    uint64_t count, void *arg);
	/* conn_refused runs for a connection refused by
	 * max_conns_per_addr, with the peer and what its client was told. */
	void (*conn_refused)(const char *peer, const char *why, void *arg);
	/*
	 * call_ended runs once per call that reached a method, when its
	 * status is decided, with the method's path (NULL: none matched)
	 * and the status (CANCELLED when the client or the connection went
	 * away first): for counting calls by method and code.
	 */
	void (*call_ended)(const char *path, int status, void *arg);
	void *cb_arg;			/* for all of them */

	/*
	 * Authentication beyond the transport's identity (rdzvd's MUNGE).
	 * With |authenticate| set, the handler of a unary or
	 * server-streaming call does not run when its request is whole:
	 * |authenticate| runs first, with the value of the request header
	 * |auth_key| (a lowercase name; NULL when the call carries none, ""
	 * when it is longer than GRPC_MAX_AUTH_VALUE). It ends the call
	 * (grpc_call_finish) or lets it go on (grpc_call_proceed), then or
	 * later from the event loop; meanwhile the call is the program's as
	 * a handler's would be, and grpc_call_on_close tells when it ends
	 * first (the client went away, its deadline passed). Client-streaming
	 * methods (reflection) are not passed through it. |auth_arg| is its
	 * argument.
	 */
	const char *auth_key;
	void (*authenticate)(struct grpc_call *call, const char *value,
	    void *auth_arg);
	void *auth_arg;
};
#define GRPC_MAX_AUTH_VALUE	8192

/*
 * Creates a server on |base| that dispatches to |methods| (the table is not
 * copied and must outlive the server). |opts| may be NULL for the defaults.
 */
struct grpc_server *grpc_server_new(struct event_base *base,
    const struct grpc_method *methods, size_t n_methods,
    const struct grpc_server_opts *opts);

/*
 * Listens on |ep|. With |tls| (not NULL) connections are TLS with ALPN h2
 * and, when the context asks for client certificates, the certificate's
 * subject becomes the caller's identity; without it, cleartext HTTP/2 with
 * prior knowledge. Unix sockets give "uid:N" as identity, cleartext TCP
 * "anonymous". May be called several times. Returns 0 or -errno.
 */
int grpc_server_listen(struct grpc_server *srv, const struct endpoint *ep,
    struct tls_ctx *tls);

/* The port a TCP listener is bound to (after listening on port 0), or -1. */
int grpc_server_port(const struct grpc_server *srv, size_t listener);

/*
 * Stops accepting, sends GOAWAY on every connection and lets in-flight calls
 * finish; |done| runs once the last connection is gone or |timeout_ms|
 * passed (then remaining connections are closed). Streams still open get
 * UNAVAILABLE when the timeout forces them.
 */
void grpc_server_shutdown(struct grpc_server *srv, uint32_t timeout_ms,
    void (*done)(void *arg), void *arg);

/* Closes everything at once. Accepts NULL. */
void grpc_server_free(struct grpc_server *srv);

/* Open connections, for ServerInfo. */
size_t grpc_server_conn_count(const struct grpc_server *srv);
/* max_conns as in force. */
uint32_t grpc_server_max_conns(const struct grpc_server *srv);

/* Sends |msg| on a call. Returns 0, -ENOBUFS when the connection has
 * out_cap bytes queued (nothing was queued: wait for the writable callback),
 * -EMSGSIZE over max_message, -EPIPE when the call is finished. */
int grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg);

/* Sends |msg| and finishes with OK: the answer of a unary call. */
int grpc_call_reply(struct grpc_call *call, const ProtobufCMessage *msg);

/* Finishes the call with |status| and a printf-style message (may be NULL).
 * Messages already queued are sent first. The call is gone afterwards. */
void grpc_call_finish(struct grpc_call *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Custom trailing metadata of a call, such as rdzvd's `rdzv-leader` hint on
 * UNAVAILABLE: sent with the status when the call is finished (in the
 * trailers, or in a Trailers-Only response). |key| is a lowercase header
 * name (a-z, 0-9, '-', '_', '.'), neither reserved ("grpc-*", ":*") nor
 * binary ("*-bin"); |value| is printable ASCII. Setting a key again
 * replaces its value. Returns 0, -EINVAL for a bad key or value, -E2BIG
 * past GRPC_SERVER_MAX_TRAILERS keys, -ENOMEM, or -EPIPE when the call is
 * finished.
 */
#define GRPC_SERVER_MAX_TRAILERS	4
int grpc_call_set_trailer(struct grpc_call *call, const char *key,
    const char *value);

/* |cb| runs exactly once when the call ends for any reason: finished by the
 * server, cancelled by the client (RST_STREAM), deadline, connection closed.
 * |cancelled| is 0 when the server finished it. The call pointer is invalid
 * after |cb| returns. Replaces an earlier callback. */
void grpc_call_on_close(struct grpc_call *call,
    void (*cb)(struct grpc_call *call, int cancelled, void *arg), void *arg);

/*
 * A client-streaming call: |cb| runs with each request message as it
 * arrives (decoded with the method's descriptor, freed when |cb| returns),
 * then once with |msg| NULL when the client has ended its side of the
 * stream. Messages arriving while no callback is set are dropped. A message
 * that cannot be decoded, or one over max_message, ends the call (the
 * on-close callback runs with |cancelled| 1).
 */
void grpc_call_on_message(struct grpc_call *call, grpc_handler_fn cb,
    void *arg);

/* |cb| runs when the connection's queued output falls below half of out_cap
 * after a grpc_call_send returned -ENOBUFS. */
void grpc_call_on_writable(struct grpc_call *call,
    void (*cb)(struct grpc_call *call, void *arg), void *arg);

/*
 * Runs the handler of a call that grpc_server_opts.authenticate holds,
 * as |identity| (copied; NULL keeps the transport's) with |flags| (the
 * program's, for grpc_call_auth_flags). The on-close callback set during
 * authentication is dropped first. Does nothing for a call that has
 * ended. Returns 0, or -ENOMEM after ending the call with INTERNAL.
 */
int grpc_call_proceed(struct grpc_call *call, const char *identity,
    unsigned int flags);

/* The decoded request of a call that grpc_server_opts.authenticate holds,
 * or NULL once its handler has run. */
const ProtobufCMessage *grpc_call_request(const struct grpc_call *call);
/* ... and its bytes as they came (the message, without the gRPC frame
 * prefix), or NULL with *len 0 once its handler has run. */
const uint8_t *grpc_call_request_bytes(const struct grpc_call *call,
    size_t *len);

/* The flags grpc_call_proceed gave the call; 0 without. */
unsigned int grpc_call_auth_flags(const struct grpc_call *call);

/* The caller's identity (SPEC §11): what grpc_call_proceed said, else the
 * certificate subject, "uid:N" or "anonymous". Valid for the life of the
 * call. */
const char *grpc_call_identity(const struct grpc_call *call);

/* The peer's address as text ("127.0.0.1", "::1", "unix"). */
const char *grpc_call_peer(const struct grpc_call *call);

/* The address of our side of the connection. */
const char *grpc_call_local(const struct grpc_call *call);

/* The call's method path. */
const char *grpc_call_path(const struct grpc_call *call);

/* The connection a call arrived on: stable while the call lives; use it to
 * tie leases to connections. */
struct grpc_conn *grpc_call_conn(const struct grpc_call *call);

/* Monotonic time (ms, CLOCK_MONOTONIC) the connection last received a frame. */
uint64_t grpc_conn_last_seen_ms(const struct grpc_conn *conn);

/* --------------------------------------------------------------- client */

struct grpc_client;
struct grpc_ccall;

struct grpc_client_opts {
	struct endpoint server;
	struct tls_ctx *tls;		/* NULL: cleartext prior knowledge */
	const char *server_name;	/* SNI and verification; default host */
	uint32_t connect_timeout_ms;	/* default 5000 */
	uint32_t keepalive_ms;		/* send PING this often; 0 never */
	uint32_t keepalive_timeout_ms;	/* no PING ACK this long: close;
					   default 2 * keepalive_ms */
	size_t max_message;		/* default 4 MiB */

	/*
	 * A credential for each call (rdzv's MUNGE): with |cred_fn| set,
	 * every call started carries the request header |cred_key| (a
	 * lowercase name) with a value cred_fn makes for it, a fresh one
	 * per call. cred_fn returns 0 with *value (malloc'd; the client frees
	 * it), or a gRPC status (UNAUTHENTICATED, UNAVAILABLE) with *errmsg
	 * (malloc'd or NULL): the call then ends with that status from the
	 * event loop, and nothing is sent. PINGs carry none. |req| and
	 * |req_len| are the request message's bytes (NULL and 0 for a
	 * stream started without one), which the credential may bind.
	 */
	const char *cred_key;
	int (*cred_fn)(const char *path, const uint8_t *req, size_t req_len,
	    char **value, char **errmsg, void *cred_arg);
	void *cred_arg;
};

/*
 * Creates a client. It connects on the first call and reconnects on a later
 * call after the connection failed; it does not retry calls. |on_closed|
 * (may be NULL) runs when an established or attempted connection ends, with
 * -errno or a negative GRPC error and why, for the program's log, as the
 * server's conn_closed has it ("127.0.0.1:7400: connection refused",
 * "...: the server sent GOAWAY"; never NULL, valid during the call only);
 * the calls on it have already been completed with UNAVAILABLE.
 */
struct grpc_client *grpc_client_new(struct event_base *base,
    const struct grpc_client_opts *opts,
    void (*on_closed)(struct grpc_client *cli, int err, const char *reason,
    void *arg), void *arg);

/* Closes the connection; calls in flight complete with CANCELLED first.
 * Accepts NULL. */
void grpc_client_free(struct grpc_client *cli);

/* Called with each message of a server stream (and the one reply of a
 * unary call). |msg| is freed when the callback returns. */
typedef void (*grpc_msg_fn)(struct grpc_ccall *cc, const ProtobufCMessage *msg,
    void *arg);

/* Called once when the call ends: the trailers' status and message (the
 * message may be NULL). */
typedef void (*grpc_done_fn)(struct grpc_ccall *cc, int status,
    const char *message, void *arg);

/*
 * Starts a call of |path| with |req|; replies are decoded with |reply|.
 * Unary and server-streaming calls alike: |on_msg| sees each message, |done|
 * the end. |timeout_ms| (0: none) is sent as grpc-timeout and enforced
 * locally. Returns the call, or NULL with errno set; a call that cannot be
 * started because the connection failed still returns a call and completes
 * with UNAVAILABLE from the event loop. |done| never runs before this
 * returns. Called outside the client's callbacks on a connection that is
 * up, the request is written before this returns; a write that fails, and
 * what the socket does not take, are handled from the event loop.
 */
struct grpc_ccall *grpc_client_call(struct grpc_client *cli, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply,
    uint32_t timeout_ms, grpc_msg_fn on_msg, grpc_done_fn done, void *arg);

/*
 * The value of the trailing metadata |key| (lower case, "rdzv-leader") the
 * server ended the call with, or NULL when it sent none. A trailers-only
 * response (a call refused before any reply) counts: its metadata is the
 * trailers. The reserved headers (grpc-status, grpc-message, ":...") are
 * not metadata. Valid inside the done callback; a call that failed here
 * (no connection, a deadline) has none. At most GRPC_MAX_TRAILERS entries
 * of up to GRPC_MAX_TRAILER_LEN bytes each are kept; longer values and
 * further entries are dropped.
 */
#define GRPC_MAX_TRAILERS	16
#define GRPC_MAX_TRAILER_LEN	1024
const char *grpc_ccall_trailer(const struct grpc_ccall *cc, const char *key);

/*
 * Starts a call whose request side stays open: a client-streaming or bidi
 * method (etcd's Lease.KeepAlive and Watch). |req| is the first request
 * message or NULL for none; send more with grpc_ccall_send() and end the
 * request side with grpc_ccall_close_send(). Replies, the end and the
 * timeout are as for grpc_client_call().
 */
struct grpc_ccall *grpc_client_stream(struct grpc_client *cli,
    const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply, uint32_t timeout_ms,
    grpc_msg_fn on_msg, grpc_done_fn done, void *arg);

/*
 * Queues one more request message on a call started with
 * grpc_client_stream(); it goes out from the event loop, in order, as
 * HTTP/2 flow control allows. Returns 0, -EINVAL (not such a call),
 * -EMSGSIZE over max_message, -EPIPE when the request side is closed or the
 * call has ended (its done callback has run or will run), -ENOMEM. The done
 * callback never runs inside this.
 */
int grpc_ccall_send(struct grpc_ccall *cc, const ProtobufCMessage *msg);

/* Ends the request side (END_STREAM after what is queued); the replies go
 * on until the server ends the call. Returns 0, -EINVAL or -EPIPE as
 * grpc_ccall_send. */
int grpc_ccall_close_send(struct grpc_ccall *cc);

/* Cancels a call (RST_STREAM CANCEL); its done callback runs with CANCELLED
 * before this returns. */
void grpc_ccall_cancel(struct grpc_ccall *cc);

/* Keeps a unary call's reply past its callbacks: the first message goes
 * into *|keep| (the caller frees it with protobuf_c_message_free_unpacked)
 * instead of being freed after on_message (as grpc_unary_sync does). */
void grpc_ccall_keep_reply(struct grpc_ccall *cc, ProtobufCMessage **keep);

/* Local address of the client's established connection ("10.0.0.5"), or
 * NULL when not connected. The agent advertises it (SPEC §6). */
const char *grpc_client_local_addr(const struct grpc_client *cli);

/* 1 when the connection is established. */
int grpc_client_connected(const struct grpc_client *cli);

/* When (mono_ms) any connection of the client last read bytes from the
 * server, 0 never: the agent's measure of how long rdzvd may not have
 * heard it either (its PINGs are answered at once). */
uint64_t grpc_client_last_seen_ms(const struct grpc_client *cli);

/* When (mono_ms) the server's kernel last acknowledged bytes of the
 * established connection (TCP_INFO), 0 when not connected or unknown: the
 * path to the server's host works even while its process is stopped. */
uint64_t grpc_client_acked_ms(const struct grpc_client *cli);

/*
 * Runs one unary call to completion on a private event loop: for the CLI
 * tools. On success *reply is the decoded message (free it with
 * protobuf_c_message_free_unpacked). Returns the gRPC status; *errmsg (may
 * be NULL) gets a malloc'd message the caller frees.
 */
int grpc_unary_sync(const struct grpc_client_opts *opts, const char *path,
    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
    uint32_t timeout_ms, ProtobufCMessage **reply, char **errmsg);

/*
 * grpc_unary_sync that also brings back the trailing metadata |key|:
 * *trailer (may be NULL) gets a malloc'd copy of its value, or NULL when
 * the server sent none (see grpc_ccall_trailer). A standby rdzvd names its
 * leader this way ("rdzv-leader") when it refuses a call.
 */
int grpc_unary_sync_trailer(const struct grpc_client_opts *opts,
    const char *path, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply_desc, uint32_t timeout_ms,
    ProtobufCMessage **reply, char **errmsg, const char *key,
    char **trailer);

#endif
