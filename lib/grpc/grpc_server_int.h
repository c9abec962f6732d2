/*
 * Internals of the gRPC server, shared by its files:
 * grpc_server_listen.c (listeners and accepting), grpc_server_limits.c
 * (who may hold a connection: per address, unproven ones), grpc_server.c
 * (connections, their deadlines, shutdown), grpc_server_h2.c (the nghttp2
 * session: requests in), grpc_server_io.c (the connections' bytes in and
 * frames out), grpc_server_mem.c and grpc_server_pool.c (a connection's
 * memory) and grpc_server_call.c (the call API: replies, streams,
 * trailers).
 *
 * Ownership: the server owns its listeners and connections; a connection
 * lives in its slab (grpc_server_mem.c), with its events and nghttp2's
 * session-long blocks, and owns its socket (a TLS connection through its
 * bufferevent, which also owns the SSL), its nghttp2 session and its
 * calls. A call lives until nghttp2 closes its stream or its connection
 * goes away; the user's view of it ends earlier, when its on-close
 * callback has run.
 */
#ifndef RDZV_GRPC_SERVER_INT_H
#define RDZV_GRPC_SERVER_INT_H

#include <sys/queue.h>
#include <sys/time.h>
#include <sys/types.h>

/* glibc's sys/queue.h lacks the BSD _SAFE iterators. */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "grpc.h"
#include "grpc_wire.h"

/* nghttp2's send callback stops at this much unsent output. */
#define GRPC_SERVER_WBUF_MAX	(64 * 1024)

static inline struct timeval
ms_tv(uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };
	return tv;
}

struct grpc_listener {
	struct grpc_server *srv;
	struct evconnlistener *evl;
	struct tls_ctx *tls;
	int unix_socket;
	char path[108];		/* unix: removed again when we stop */
	dev_t dev;
	ino_t ino;
	int port;		/* TCP: the bound port; -1 for unix */
};

enum call_state {
	CALL_RECV,		/* reading the request */
	CALL_ACTIVE,		/* handed to the handler */
	CALL_DONE,		/* finished: the rest is nghttp2's */
};

/* A packed message waiting for nghttp2 to take it. */
struct outbuf {
	STAILQ_ENTRY(outbuf) entry;
	uint8_t *buf;
	size_t len;
	size_t off;
};

struct grpc_call {
	struct grpc_conn *conn;
	TAILQ_ENTRY(grpc_call) entry;
	int32_t stream_id;
	enum call_state state;

	/* The request as its headers described it. */
	char *path;
	const struct grpc_method *method;
	int bad_method;
	int bad_content_type;
	int has_content_type;
	int has_timeout;
	uint64_t timeout_ms;
	struct event *deadline;
	char *auth_value;	/* the auth_key header (grpc_server_opts) */
	int auth_seen;		/* ... it came; only the first counts */
	size_t header_bytes;	/* the header list so far (RFC 9113 §6.5.2) */
	int unary;		/* its queue is a unary answer */
	ProtobufCMessage *held;	/* the request while authenticate runs */
	char *identity;		/* grpc_call_proceed's, or NULL */
	unsigned int auth_flags;

	struct grpc_reader reader;
	uint8_t *req;
	size_t req_len;
	int nreq;
	int discard;		/* answered early: drop further DATA */
	int remote_closed;	/* the client's END_STREAM arrived */
	int plain_http;		/* answered 405/415: let the upload end */

	/* The response. */
	int headers_sent;
	int deferred;		/* the data source said DEFERRED */
	int trailers_queued;	/* send trailers once the queue is empty */
	int status;
	char *message;		/* percent-encoded grpc-message or NULL */
	char *trailer_key[GRPC_SERVER_MAX_TRAILERS];	/* grpc_call_set_trailer */
	char *trailer_val[GRPC_SERVER_MAX_TRAILERS];
	size_t n_trailers;
	STAILQ_HEAD(, outbuf) out;

	/* The user's view. */
	int user_done;		/* on_close ran (or the user never saw it) */
	void (*on_close)(struct grpc_call *, int, void *);
	void *on_close_arg;
	void (*on_writable)(struct grpc_call *, void *);
	void *on_writable_arg;
	grpc_handler_fn on_message;	/* client streaming */
	void *on_message_arg;
	int want_writable;
};

struct grpc_conn {
	struct gsrv_slab *slab;		/* holds this struct (grpc_server_mem.c) */
	struct grpc_server *srv;
	TAILQ_ENTRY(grpc_conn) entry;
	struct grpc_listener *listener;
	struct bufferevent *bev;	/* TLS only */
	int fd;				/* cleartext: the socket, else -1 */
	struct event *rev;		/* cleartext: readable (persistent) */
	struct event *wev;		/* cleartext: writable, made when a
					   write first left output behind */
	struct evbuffer *out;		/* cleartext: output the socket did
					   not take yet; NULL until then */
	int send_blocked;		/* nghttp2 stopped at the output limit */
	nghttp2_session *h2;
	TAILQ_ENTRY(grpc_conn) flush_entry;	/* on the server's flush list */
	int flush_queued;
	struct event *timer;		/* its deadlines' one timer */
	uint64_t timer_due_ms;		/* when it fires; 0: not pending */
	uint64_t idle_due_ms;		/* the preface deadline, then the
					   idle one */
	uint64_t keepalive_due_ms;	/* 0: no keepalive */
	TAILQ_HEAD(, grpc_call) calls;

	char *identity;		/* in the slab or malloc's */
	char peer[48];		/* INET6_ADDRSTRLEN, or "unix" */
	uint16_t peer_port;	/* TCP; 0 on a unix socket */
	char *local;		/* NULL until asked for */
	char *close_reason;	/* why the session ended (a GOAWAY), or
				   the first close asked for while in_h2;
				   malloc'd, NULL until then */
	uint64_t last_seen_ms;
	uint64_t idle_since_ms;		/* when its last stream closed */
	uint64_t reset_tokens;		/* streams the client may still
					   reset, in thousandths */
	uint64_t reset_ms;		/* when they were last counted */
	uint64_t refused_tokens;	/* calls authentication may still
					   refuse, in thousandths */
	uint64_t refused_ms;		/* when they were last counted */
	int preface_done;		/* the client's SETTINGS arrived */
	int idle_goaway;		/* GOAWAY sent for being idle */
	size_t queued;		/* packed bytes not yet taken by nghttp2
				   (grpc_server_out.c counts them) */
	uint64_t out_progress_ms;	/* nghttp2 last took some, or they
					   began to wait */
	size_t unary_queued;	/* ... of those, unary answers' */
	int out_dying;		/* closed at the end of the turn to free
				   the output budget */
	int want_writable;	/* some call got -ENOBUFS */
	int in_h2;		/* inside nghttp2_session_{mem_recv,send} */
	int close_pending;	/* gsrv_conn_close asked while in_h2 */
	int closed;
	int draining;		/* close once the output is written */
	int goaway_sent;
	/* grpc_server_limits.c */
	int proven;		/* an authenticated call reached a handler */
	int on_unproven;	/* ... else it is on the server's list */
	TAILQ_ENTRY(grpc_conn) unproven_entry;
	int addr_counted;	/* counted against its peer address */
};

struct grpc_server {
	struct event_base *base;
	const struct grpc_method *methods;
	size_t n_methods;
	struct grpc_server_opts opts;

	struct grpc_listener **listeners;
	size_t n_listeners;
	struct event *accept_ev;	/* re-enables accepting after EMFILE */
	int accept_paused;		/* the listeners wait for accept_ev or
					   a connection to close */
	int accept_err;			/* accepting has failed with this
					   since accept_failed_ms,
					   accept_failures times; 0 when the
					   last accept succeeded */
	uint64_t accept_failed_ms;
	uint64_t accept_failures;
	uint64_t full_ms;		/* max_conns refused a connection
					   first at this time, full_refused
					   times since; 0 when not full */
	uint64_t full_refused;

	TAILQ_HEAD(, grpc_conn) conns;
	TAILQ_HEAD(, grpc_conn) flushq;	/* connections with output to
					   write at the end of the turn */
	struct event *flush_ev;		/* writes them */
	uint8_t *stage;			/* cleartext frames on their way to
					   one connection's socket
					   (GRPC_SERVER_WBUF_MAX bytes and
					   a frame) */
	size_t stage_len, stage_cap;
	struct grpc_conn *stage_owner;	/* whose they are */
	size_t n_conns;
	size_t out_total;		/* every connection's queued */
	size_t out_released;		/* let go since the last trim */
	uint64_t out_evicted;		/* closed for the budget */
	TAILQ_HEAD(, grpc_conn) unproven;	/* oldest first */
	struct gsrv_addrs *addrs;	/* connections per peer address */
	uint64_t evicted;		/* closed to make room */
	struct gsrv_slabs *slabs;	/* the connections' memory */
	nghttp2_session_callbacks *h2_cbs;	/* every session's */
	nghttp2_option *h2_opt;

	int shutting_down;
	int forcing;			/* the shutdown timeout passed */
	struct event *goaway_ev;	/* final GOAWAY after the notice */
	struct event *shutdown_ev;	/* the shutdown timeout */
	struct event *done_ev;
	void (*done)(void *);
	void *done_arg;
};

/*
 * Internal names shared between the server's files start with gsrv_ (the
 * client's with gcli_), so that they cannot meet a program's own names.
 */

/* grpc_server_listen.c */
void	gsrv_listeners_free(struct grpc_server *);
/* A connection closed: accept again if paused, note room below max_conns. */
void	gsrv_listen_conn_gone(struct grpc_server *);

/* grpc_server_limits.c */
/* 0 to serve a new connection (its peer known), else -1 with why; may
 * close an unproven connection of its address to make room. */
int	gsrv_limits_admit(struct grpc_conn *, char *why, size_t whylen);
/* Closes the oldest unproven connection (of |addr| when not NULL) saying
 * |why|: 0, or -1 when there is none. */
int	gsrv_limits_make_room(struct grpc_server *, const char *addr,
	    const char *why);
/* Writes SETTINGS and a GOAWAY saying |why| on a cleartext socket (not a
 * TLS one) and closes it. */
void	gsrv_limits_refuse(int fd, int tls, const char *why);
uint32_t gsrv_limits_addr_count(const struct grpc_server *, const char *);
void	gsrv_limits_added(struct grpc_conn *);
void	gsrv_limits_proven(struct grpc_conn *);
void	gsrv_limits_refused(struct grpc_conn *);
void	gsrv_limits_removed(struct grpc_conn *);
void	gsrv_limits_free(struct grpc_server *);

/* grpc_server.c */
/* Makes the connection of an accepted socket, which it takes (closed on
 * failure). */
void	gsrv_conn_new(struct grpc_listener *, evutil_socket_t,
	    struct sockaddr *);
/* The one teardown path; |reason| goes to conn_closed (grpc.h). */
void	gsrv_conn_close(struct grpc_conn *, const char *reason);
/* gsrv_conn_close with a printf-style reason. */
void	gsrv_conn_closef(struct grpc_conn *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* gsrv_conn_close of a TLS connection whose handshake failed: tls_failed
 * (grpc.h) hears of it first. */
void	gsrv_conn_tls_fail(struct grpc_conn *, const char *reason);
/* Keeps the first reason given (printf-style) for the close to come. */
void	gsrv_conn_reason(struct grpc_conn *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* Arms the connection's timer for its earliest deadline (idle_due_ms,
 * keepalive_due_ms), unless it is due sooner already. */
void	gsrv_conn_timer_arm(struct grpc_conn *);
void	gsrv_conn_schedule_flush(struct grpc_conn *);
size_t	gsrv_conn_queued(const struct grpc_conn *);

/* grpc_server_out.c: output held for clients that do not read. */
#define OUT_STALL_MS	20000	/* none of it taken: the connection closes */
void	gsrv_out_add(struct grpc_call *, size_t);
void	gsrv_out_sub(struct grpc_call *, size_t, int sent);
/* 0: |call| may queue more; -1 with why (for the client) if not. */
int	gsrv_out_room(struct grpc_call *call, char *why, size_t whylen);
/* -1 when it closed |c| for a stall; else *due, the next check (0: none). */
int	gsrv_out_stalled(struct grpc_conn *c, uint64_t now, uint64_t *due);
/* Bytes of the connection's own output not written yet. */
size_t	gsrv_conn_unwritten(const struct grpc_conn *);
struct evbuffer *gsrv_conn_output(const struct grpc_conn *);
const char *gsrv_conn_local(struct grpc_conn *);
void	gsrv_conn_check_writable(struct grpc_conn *);

/* grpc_server_mem.c */
/*
 * What is not handed out is off limits to ASan and to valgrind's memcheck,
 * as malloc's free memory is: a connection used after its close, or a
 * block read before it was written, is found in slabs too.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)	ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n)	ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define DEFINED(p, n)	((void)(p), (void)(n))
#elif defined(__has_include) && __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define POISON(p, n)	((void)VALGRIND_MAKE_MEM_NOACCESS((p), (n)))
#define UNPOISON(p, n)	((void)VALGRIND_MAKE_MEM_UNDEFINED((p), (n)))
#define DEFINED(p, n)	((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
#else
#define POISON(p, n)	((void)(p), (void)(n))
#define UNPOISON(p, n)	((void)(p), (void)(n))
#define DEFINED(p, n)	((void)(p), (void)(n))
#endif

/*
 * Small blocks of nghttp2's that come and go while a session runs, from
 * the server's free lists (grpc_server_pool.c). _alloc and _calloc return
 * NULL when out of memory; _release takes NULL.
 */
struct gsrv_pool;
struct gsrv_pool *gsrv_pool_new(void);
void	gsrv_pool_free(struct gsrv_pool *);
void	*gsrv_pool_alloc(struct gsrv_pool *, size_t);
void	*gsrv_pool_calloc(struct gsrv_pool *, size_t);
void	*gsrv_pool_realloc(struct gsrv_pool *, void *, size_t);
void	gsrv_pool_release(struct gsrv_pool *, void *);

/* A connection's slab (NULL when out of memory); gsrv_slab_free gives it
 * back with every block in it. */
struct gsrv_slab *gsrv_slab_new(struct grpc_server *);
void	gsrv_slab_free(struct grpc_server *, struct gsrv_slab *);
/* Unmaps the slabs' memory; every connection must be gone. */
void	gsrv_slabs_free(struct grpc_server *);
/* Bytes mapped for slabs, and a slab's bytes taken (for tests). */
size_t	gsrv_slabs_mapped(const struct grpc_server *);
size_t	gsrv_slab_used(const struct gsrv_slab *);
/* A block of the slab, 16-byte aligned, or NULL once it is full or its
 * nghttp2 session was made (the block would come after the frame
 * buffer); zalloc clears it. */
void	*gsrv_slab_alloc(struct gsrv_slab *, size_t);
void	*gsrv_slab_zalloc(struct gsrv_slab *, size_t);
/* A copy in the slab, else malloc's (NULL when out of memory); release
 * frees it if it is malloc's (NULL is fine). */
char	*gsrv_slab_strdup(struct gsrv_slab *, const char *);
void	gsrv_slab_release(struct gsrv_slab *, void *);
/* nghttp2_session_server_new3 with the session's blocks in the slab. */
int	gsrv_slab_h2_server_new(struct gsrv_slab *, nghttp2_session **,
	    const nghttp2_session_callbacks *, void *,
	    const nghttp2_option *);
/* An event in the slab (else event_new's); _free deletes it. */
struct event *gsrv_slab_event(struct gsrv_slab *, struct event_base *,
	    evutil_socket_t, short, event_callback_fn, void *);
void	gsrv_slab_event_free(struct gsrv_slab *, struct event *);

/* grpc_server_h2.c */
int	gsrv_h2_session_new(struct grpc_conn *);
/* Frees what gsrv_h2_session_new made once for every session. */
void	gsrv_h2_free(struct grpc_server *);
void	gsrv_h2_goaway(struct grpc_conn *, int);

/* grpc_server_io.c */
/* Hands nghttp2's frames to the socket; may close the connection. */
void	gsrv_conn_flush(struct grpc_conn *);
/* nghttp2's send callback. */
ssize_t	gsrv_send_cb(nghttp2_session *, const uint8_t *, size_t, int, void *);
/* Forgets what the connection has in the server's staging buffer. */
void	gsrv_stage_drop(struct grpc_conn *);
void	gsrv_conn_read_cb(struct bufferevent *, void *);
void	gsrv_conn_write_cb(struct bufferevent *, void *);
void	gsrv_conn_event_cb(struct bufferevent *, short, void *);
void	gsrv_conn_raw_read_cb(evutil_socket_t, short, void *);
void	gsrv_conn_raw_write_cb(evutil_socket_t, short, void *);

/* grpc_server_call.c */
struct grpc_call *gsrv_call_new(struct grpc_conn *, int32_t);
void	gsrv_call_free(struct grpc_call *);
void	gsrv_call_end(struct grpc_call *, int, const char *);
void	gsrv_call_respond_http(struct grpc_call *, const char *);
void	gsrv_call_notify_close(struct grpc_call *, int);
void	gsrv_call_dispatch(struct grpc_call *);
/* Client streaming: the handler, at the request's headers. */
void	gsrv_call_start(struct grpc_call *);
/* Client streaming: one request message, or the end (NULL). */
void	gsrv_call_deliver(struct grpc_call *, const uint8_t *, size_t);
void	gsrv_call_arm_deadline(struct grpc_call *);

#endif
