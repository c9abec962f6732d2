/*
 * Module daemon/http/: the HTTP listener (SPEC §15) on evhttp: /metrics,
 * /healthz and /readyz, the status page and its server-sent events, /hosts,
 * and the connections' limits. It calls the frame (metrics, follow, role)
 * and the core (read only); main.c starts and stops it. Included by
 * rdzvd.h, whose types it uses.
 */
#ifndef RDZVD_HTTP_H
#define RDZVD_HTTP_H

struct evhttp_request;
/* http.c: the HTTP listener: /metrics, /healthz, /readyz, the page. */
/* Listens on http-listen unless it is none; 0, or -1 when the default
 * address is taken (logged; an address asked for is fatal). */
int		 http_start(void);
void		 http_stop(void);
/* Ends the status page's event streams, which then connect again: they
 * show the core they started on, and the role changed (ha.c). */
void		 http_pages_reset(void);

/* http_reply.c: what every HTTP handler answers with. */
/* Sends |body| with the headers every answer carries. */
void		 http_reply(struct evhttp_request *, int code,
		    const char *reason, const char *type, struct evbuffer *);
/* |text| and a newline as text/plain. */
void		 http_reply_text(struct evhttp_request *, int code,
		    const char *reason, const char *text);
/* Refuses (400) what evhttp lets through in a request's path; 0, or -1
 * after answering. Every handler calls it first. */
int		 http_request_check(struct evhttp_request *);

/* http_conn.c: the HTTP listener's connections: the cap, the request
 * deadline, the check of each request head, pausing on accept errors. */
struct evhttp;
struct evhttp_bound_socket;
struct tls_ctx;
void		 http_conn_start(struct evhttp *, struct evhttp_bound_socket *,
		    struct tls_ctx *);
void		 http_conn_stop(void);
size_t		 http_conn_count(void);
/* http-max-connections as in force. */
size_t		 http_conn_max(void);
/* The one close callback of an HTTP connection is http_conn.c's: another
 * file hears of the end through it (NULL |cb|: no longer). */
struct evhttp_connection;
void		 http_conn_set_closecb(struct evhttp_connection *,
		    void (*cb)(struct evhttp_connection *, void *), void *arg);

/* http_hosts.c: /hosts, the page's view of host memory. */
void		 http_hosts_request(struct evhttp_request *, void *);

/* http_api.c: /api/events, a job's event history for the timeline. */
void		 http_api_events_request(struct evhttp_request *, void *);

/* http_events.c: the status page's server-sent events, a sink of
 * follow.c. */
void		 http_events_start(void);
void		 http_events_stop(void);
void		 http_events_request(struct evhttp_request *, void *);
/* Ends every event stream (a change of role, or the listener stops): the
 * page's EventSource connects again. */
void		 http_events_end_all(void);
size_t		 http_events_count(void);

#endif
