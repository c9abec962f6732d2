/*
 * Internals of the gRPC client shared by grpc_client.c (the client object,
 * calls and their completion) and grpc_client_conn.c (one HTTP/2 connection:
 * connect, TLS, nghttp2, keepalive, GOAWAY).
 *
 * Re-entrancy. User callbacks (on_msg, done, on_closed) may cancel calls,
 * start calls or free the client, often while nghttp2 is inside
 * nghttp2_session_mem_recv. Every entry point therefore brackets its work
 * with gcli_enter()/gcli_leave(): objects that end while the client is busy
 * are only marked and queued, nghttp2_session_send runs only in the
 * outermost gcli_leave(), and finished calls, closed connections and a freed
 * client are released there, after every frame above has returned. The
 * outermost leave of grpc_client_call() must not end the new call before
 * its caller holds it: it writes the request at once through
 * gcli_conn_send_early(), which ends nothing (a failed write, an nghttp2 error
 * or a stream nghttp2 closed meanwhile are left to the loop), and leaves
 * the rest to the loop (flush_ev).
 */
#ifndef RDZV_GRPC_CLIENT_INT_H
#define RDZV_GRPC_CLIENT_INT_H

#include <sys/queue.h>
#include <netinet/in.h>

#include <event2/bufferevent.h>
#include <nghttp2/nghttp2.h>

#include "grpc.h"
#include "grpc_wire.h"

enum cconn_state {
	CCONN_CONNECTING,	/* resolving, TCP connect */
	CCONN_HANDSHAKE,	/* TLS handshake */
	CCONN_READY,		/* HTTP/2 session running */
	CCONN_CLOSED,		/* queued for release */
};

struct cconn;

/* One entry of the metadata a call ended with (grpc_ccall_trailer). */
struct ccall_trailer {
	char *key;
	char *value;
};

struct grpc_ccall {
	struct grpc_client *cli;
	struct cconn *conn;
	TAILQ_ENTRY(grpc_ccall) entry;	/* conn->calls or cli->dead_calls */

	int32_t stream_id;		/* 0 until submitted */
	uint8_t *req;			/* framed request messages */
	size_t req_len, req_off;	/* bytes queued, bytes sent */
	int open_send;			/* grpc_client_stream: more may come */
	int send_closed;		/* grpc_ccall_close_send was called */
	char *path;
	const ProtobufCMessageDescriptor *reply;
	uint32_t timeout_ms;
	uint64_t deadline_at;		/* mono_ms, 0 without a timeout */
	struct event *deadline;

	grpc_msg_fn on_msg;
	grpc_done_fn done;
	void *arg;
	ProtobufCMessage **keep;	/* grpc_unary_sync: keep the reply */

	struct grpc_reader reader;
	int http_status;		/* 0 until :status arrives */
	int content_type;		/* 0 unseen, 1 gRPC, -1 other */
	int grpc_status;		/* -1 until grpc-status arrives */
	char *grpc_message;
	struct ccall_trailer *trailers;	/* custom metadata of the end */
	size_t n_trailers;
	int stream_closed;		/* nghttp2 closed the stream */
	int fail_later;			/* the timer reports UNAVAILABLE, or
					   fail_status when it is set */
	int fail_status;		/* the credential failed (cred_fn) */
	char *fail_msg;
	char *cred;			/* the cred_key header's value */
	int finish_later;		/* the timer ends it (stream closed
					   inside gcli_conn_send_early) */
	uint32_t close_code;		/* with finish_later */
	int finished;			/* done has run or is running */
};

TAILQ_HEAD(ccall_list, grpc_ccall);

struct cconn {
	struct grpc_client *cli;
	TAILQ_ENTRY(cconn) entry;	/* cli->conns or cli->dead_conns */
	enum cconn_state state;

	struct addrinfo *ai;		/* TCP: resolved addresses */
	struct addrinfo *ai_next;	/* next one to try */
	int last_errno;
	int fd;				/* until a bufferevent owns it (TLS);
					   cleartext: for the connection's
					   life */
	struct event *start_ev;		/* resolves on the next loop turn */
	struct event *connect_ev;	/* writable during connect */
	struct event *connect_timer;	/* connect + handshake deadline */

	struct bufferevent *bev;	/* TLS: owns fd and SSL once created */
	struct event *rev;		/* cleartext: readable (persistent) */
	struct event *wev;		/* cleartext: writable, when a write
					   left output behind */
	struct evbuffer *out;		/* cleartext: output not yet written */
	int send_blocked;		/* nghttp2 stopped at OUTPUT_HIGH */
	int early;			/* inside gcli_conn_send_early */
	int write_errno;		/* gcli_conn_send_early's failed write,
					   for gcli_conn_flush to report */
	nghttp2_session *h2;
	struct event *ka_ev;		/* keepalive PING interval */
	struct event *ka_timeout;	/* PING ACK deadline */
	int ping_outstanding;
	int got_data;			/* the server has sent something */

	int goaway;			/* no new streams on it */
	int32_t goaway_last;
	char local[INET6_ADDRSTRLEN];	/* empty until asked for */

	struct ccall_list calls;	/* live calls, submitted or waiting */
};

TAILQ_HEAD(cconn_list, cconn);

struct grpc_client {
	struct event_base *base;
	struct grpc_client_opts opts;	/* server_name points at ours */
	char *server_name;
	char peer[300];			/* "host:port" for messages */
	char authority[300];

	void (*on_closed)(struct grpc_client *, int, const char *, void *);
	void *arg;

	struct cconn *conn;		/* where new calls go; NULL: connect */
	struct cconn_list conns;	/* live, including draining */
	struct cconn_list dead_conns;
	struct ccall_list dead_calls;

	int busy;			/* gcli_enter depth */
	int flush_later;		/* this leave: flush_ev sends */
	struct event *flush_ev;		/* sends from the loop */
	int dead;			/* grpc_client_free was called */
	unsigned int cb_gen;		/* bumped before each user callback */
	uint64_t last_seen_ms;		/* mono_ms of the last bytes read */
};

/*
 * Internal names shared between the client's files start with gcli_ (the
 * server's with gsrv_), so that they cannot meet a program's own names.
 */

/* grpc_client.c */
void	gcli_enter(struct grpc_client *);
void	gcli_leave(struct grpc_client *);
void	gcli_call_complete(struct grpc_ccall *, int, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
void	gcli_call_fail_later(struct grpc_ccall *);
void	gcli_call_header(struct grpc_ccall *, const uint8_t *, size_t,
	    const uint8_t *, size_t);
void	gcli_call_trailer(struct grpc_ccall *, const uint8_t *, size_t,
	    const uint8_t *, size_t);
void	gcli_call_finish_stream(struct grpc_ccall *, uint32_t);
int	gcli_call_feed(struct grpc_ccall *, const uint8_t *, size_t);
struct grpc_ccall *gcli_call_find(struct cconn *, int32_t);

/* grpc_client_send.c */
void	gcli_call_resume(struct grpc_ccall *);

/* grpc_client_connect.c */
struct cconn *gcli_conn_new(struct grpc_client *);
const char *gcli_conn_local(struct cconn *);
uint64_t gcli_conn_acked_ms(struct cconn *);

/* grpc_client_conn.c */
void	gcli_conn_free(struct cconn *);
void	gcli_conn_close(struct cconn *, int, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
int	gcli_conn_submit(struct cconn *, struct grpc_ccall *);
void	gcli_conn_flush(struct cconn *);
int	gcli_conn_send_early(struct cconn *);
void	gcli_conn_ready(struct cconn *);
void	gcli_conn_read_cb(struct bufferevent *, void *);
void	gcli_conn_write_cb(struct bufferevent *, void *);
void	gcli_conn_raw_write_cb(evutil_socket_t, short, void *);
int	gcli_conn_feed(struct cconn *, const uint8_t *, size_t, size_t *);

#endif
