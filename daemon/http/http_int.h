/*
 * daemon/http/'s own header, private to it: what its files share (the
 * reply, the connections, /hosts, the API, the event streams). The
 * module's public face is http.h.
 */
#ifndef RDZVD_HTTP_INT_H
#define RDZVD_HTTP_INT_H

#include <stddef.h>

#include "convert.h"
#include "core.h"
#include "http.h"

struct evhttp_request;

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
