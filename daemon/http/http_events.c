/*
 * The status page's live data: /events is a server-sent event stream of
 * jobs, a sink of the one list of followers (follow.c) that Control.Watch
 * also is: each job is the protobuf Job of Watch as JSON (lib/base/pbjson.c,
 * the names rdzvctl -o json uses), the current ones first, then each change
 * after the commit of the turn that made it. /events follows every job as
 * a summary; /events?job=ID one job with its nodes and latest events. The
 * page builds its DOM from this data with textContent, so nothing a client
 * sent can become markup.
 *
 * Memory is bounded (docs/RDZVD.md, "Limits"): the first answer holds the
 * active jobs and the latest ended ones, at most EVENTS_SNAPSHOT_MAX jobs
 * (?ended=N asks for more or fewer ended ones), and says how many it left
 * out; each stream may hold EVENTS_STREAM_BUDGET bytes that its reader has
 * not taken, all streams together EVENTS_TOTAL_BUDGET, and a reader that
 * would pass either is dropped before its output is queued (the slowest
 * first when the total is reached). Its connection is freed on the next
 * loop turn, outside evhttp's callbacks, and its memory goes back to the
 * system when the last stream closes.
 *
 * A dropped stream holds its memory until that next turn, and one turn
 * may read many requests (clients that connect first and then all ask at
 * once): so what dropped streams still hold counts against the total too,
 * and while it is not zero no room can be made this turn: a stream that
 * would pass the total is dropped itself (its page reconnects).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "log.h"
#include "pbjson.h"
#include "http_int.h"
#include "rdzvd.h"
#include "xmalloc.h"

#define EVENTS_MAX_CLIENTS	256
#define EVENTS_STREAM_BUDGET	(1024 * 1024)	/* bytes, per stream */
#define EVENTS_TOTAL_BUDGET	(32 * 1024 * 1024) /* bytes, all streams */
#define EVENTS_SNAPSHOT_MAX	1000	/* jobs in a first answer */
#define EVENTS_ENDED_DEFAULT	100	/* ended jobs in a first answer */
#define EVENTS_KEEPALIVE_S	20	/* below the HTTP idle timeout */

struct stream {
	struct evhttp_request		*req;
	struct evhttp_connection	*conn;
	struct follower			*f;	/* NULL once dropped */
	struct event			*drop_ev;
	/* The first answer, gathered into one chunk: an evbuffer chain
	 * and a chunk header per event would cost several times the
	 * bytes counted. */
	struct evbuffer			*batch;
	/* Dropped: it hears nothing more, and its follower goes when it
	 * is freed (never while the followers are walked). */
	int				 dropped;
	size_t				 held;	/* ... what it held then */
};

static int	page_send(void *, const Rdzv__V1__Job *, int, struct core_now);
static void	page_end(void *, const char *);

static const struct follow_sink page_sink = {
	.send = page_send,
	.end = page_end,
};
static size_t		 n_streams;	/* dropped ones too, until freed */
static size_t		 held_dropped;	/* bytes the dropped ones hold */
static struct event	*keepalive_ev;

size_t
http_events_count(void)
{
	return follow_count(&page_sink);
}

static void
stream_free(struct stream *s)
{
	follow_remove(s->f);
	if (s->dropped)
		held_dropped -= s->held;
	if (s->drop_ev != NULL)
		event_free(s->drop_ev);
	free(s);
	/* The streams' buffers were the daemon's largest passing use of
	 * memory: give it back once they are all gone. */
	if (--n_streams == 0)
		malloc_trim(0);
}

/*
 * The connection closed. When the client went away, evhttp has already
 * detached the unfinished request from its connection and leaves it to us
 * (libevent 2.1's evhttp_connection_incoming_fail); otherwise the request
 * is still the connection's, and goes with it.
 */
static void
stream_closed(struct evhttp_connection *conn, void *arg)
{
	struct stream *s = arg;

	if (evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	stream_free(s);
}

/* Ends a stream on our side, now: never inside an evhttp callback of its
 * own connection. */
static void
stream_drop_now(struct stream *s)
{
	struct evhttp_connection *conn = s->conn;

	http_conn_set_closecb(conn, NULL, NULL);
	stream_free(s);
	evhttp_connection_free(conn);
}

static void
drop_cb(evutil_socket_t fd, short what, void *arg)
{
	stream_drop_now(arg);
}

/* Ends a stream on the next loop turn; it hears nothing more. */
static size_t	queued(const struct stream *);

static void
stream_drop(struct stream *s, const char *why)
{
	if (s->dropped)
		return;
	log_debug("status page %s: dropped", why);
	s->dropped = 1;
	s->held = queued(s);
	held_dropped += s->held;
	event_active(s->drop_ev, EV_TIMEOUT, 0);
}

/* Bytes written to the stream that its reader has not taken, in rdzvd: in
 * the connection's buffer (and a TLS one's beneath it, if any). */
static size_t
queued(const struct stream *s)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(s->conn);
	struct bufferevent *u;
	size_t n;

	n = s->batch != NULL ? evbuffer_get_length(s->batch) : 0;
	if (bev == NULL)
		return n;
	n += evbuffer_get_length(bufferevent_get_output(bev));
	if ((u = bufferevent_get_underlying(bev)) != NULL)
		n += evbuffer_get_length(bufferevent_get_output(u));
	return n;
}

struct total {
	size_t		 bytes;
	struct stream	*slowest;
	size_t		 slowest_bytes;
};

static void
add_total(void *arg, void *ctx)
{
	struct stream *s = arg;
	struct total *t = ctx;
	size_t n;

	if (s->dropped)
		return;
	n = queued(s);
	t->bytes += n;
	if (t->slowest == NULL || n > t->slowest_bytes) {
		t->slowest = s;
		t->slowest_bytes = n;
	}
}

/*
 * Room for |len| more bytes on |s|: within its budget, and within the total
 * (with what dropped streams still hold) once the slowest reader is
 * dropped. 0, or -1 after dropping |s|. The total is counted again only
 * when what was queued since the last count could pass it: it only ever
 * overestimates.
 */
static int
make_room(struct stream *s, size_t len)
{
	static size_t counted, added;
	size_t mine = queued(s);

	if (mine + len > EVENTS_STREAM_BUDGET) {
		stream_drop(s, "does not keep up with the changes");
		return -1;
	}
	/* A reader that keeps up holds nothing here: no need to count. */
	if (mine == 0 || counted + added + held_dropped + len <=
	    EVENTS_TOTAL_BUDGET) {
		added += len;
		return 0;
	}
	for (;;) {
		struct total t = { 0 };
		follow_foreach(&page_sink, add_total, &t);
		counted = t.bytes;
		added = 0;
		if (t.bytes + held_dropped + len <= EVENTS_TOTAL_BUDGET ||
		    t.slowest == NULL) {
			added = len;
			return 0;
		}
		/* Dropping frees nothing before the next turn. */
		if (held_dropped > 0 && t.slowest != s) {
			stream_drop(s, "would pass the event streams' memory "
			    "while dropped streams still held theirs");
			return -1;
		}
		stream_drop(t.slowest, "read least while the event streams' "
		    "memory was full");
		if (t.slowest == s)
			return -1;
	}
}

/* Queues one event; 0, or -1 after dropping the stream. */
static int
emit(struct stream *s, const char *event, const char *data)
{
	struct evbuffer *b;
	size_t len = strlen(data) + 32;

	if (s->dropped || make_room(s, len) != 0)
		return -1;
	if (s->batch != NULL)
		b = s->batch;
	else if ((b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	/* JSON has no raw newline, so it is one data line. */
	if (event != NULL)
		evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", event, data);
	else
		evbuffer_add_printf(b, "%s", data);
	if (b == s->batch)
		return 0;
	evhttp_send_reply_chunk(s->req, b);
	evbuffer_free(b);
	return 0;
}

static int
emit_json(struct stream *s, const char *event, json_t *o)
{
	char *text;
	int rc;

	if (o == NULL || (text = pbjson_dumps(o, JSON_COMPACT)) == NULL)
		fatalx("out of memory");
	json_decref(o);
	rc = emit(s, event, text);
	free(text);
	return rc;
}

/* A job as Control.Watch's WatchEvent says it, and the server's clock. */
static int
page_send(void *arg, const Rdzv__V1__Job *job, int removed,
    struct core_now now)
{
	struct stream *s = arg;
	json_t *o, *j;

	/* Dropped, it stays a follower until freed: it costs nothing. */
	if (s->dropped)
		return -1;
	o = json_object();
	j = pbjson_message(&job->base);
	if (o == NULL || j == NULL)
		fatalx("out of memory");
	json_object_set_new(o, "job", j);
	json_object_set_new(o, "removed", json_boolean(removed));
	json_object_set_new(o, "now_unix_ms", json_integer(now.wall_ms));
	return emit_json(arg, "job", o);
}

/* A change of role or the listener stopping: not inside an evhttp callback
 * of the stream, so it ends at once. */
static void
page_end(void *arg, const char *why)
{
	stream_drop_now(arg);
}

/*
 * The replica's role first (SPEC §14): a standby holds no jobs, and its
 * page says whose page to open instead. A change of role ends every stream
 * (http_pages_reset), so the page reconnects and hears the new one.
 */
static int
send_role(struct stream *s)
{
	return emit_json(s, "role", json_pack("{s:s, s:s}", "role",
	    role_name(), "leader", rdzvd.leader));
}

/* ?job=ID and ?ended=N; 0, or -1 after answering 400. */
static int
parse_query(struct evhttp_request *req, char **job, size_t *ended)
{
	struct evkeyvalq q;
	const char *query, *v;
	char err[512], *end;
	unsigned long n;
	int rc = 0;

	*job = NULL;
	*ended = EVENTS_ENDED_DEFAULT;
	TAILQ_INIT(&q);
	query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0)
		rc = -1;
	if (rc == 0 && (v = evhttp_find_header(&q, "job")) != NULL) {
		if (rdzv_id_check(v, err, sizeof(err)) != 0)
			rc = -1;
		else
			*job = xstrdup(v);
	}
	if (rc == 0 && (v = evhttp_find_header(&q, "ended")) != NULL) {
		n = strtoul(v, &end, 10);
		if (*v < '0' || *v > '9' || *end != '\0' ||
		    n > EVENTS_SNAPSHOT_MAX)
			rc = -1;
		else
			*ended = n;
	}
	evhttp_clear_headers(&q);
	if (rc != 0) {
		free(*job);
		*job = NULL;
		evhttp_send_error(req, HTTP_BADREQUEST, "job=ID (a valid job id) "
		    "or ended=N (0 to 1000)");
	}
	return rc;
}

void
http_events_request(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct core_now now = turn_now();
	struct follow_limits lim = { .max = EVENTS_SNAPSHOT_MAX };
	struct follow_left left;
	struct stream *s;
	char *job, more[128];

	if (http_request_check(req) != 0)
		return;
	/* A HEAD would hold a stream open with nothing to send it. */
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "Use GET");
		return;
	}
	if (parse_query(req, &job, &lim.ended_max) != 0)
		return;
	/* Streams never make room for new connections (http_conn.c): half
	 * of the connections stay for probes and pages. */
	if (n_streams >= EVENTS_MAX_CLIENTS ||
	    n_streams >= http_conn_max() / 2) {
		free(job);
		evhttp_send_error(req, 503, "Too many status pages are open");
		return;
	}
	s = xcalloc(1, sizeof(*s));
	if ((s->drop_ev = evtimer_new(rdzvd.base, drop_cb, s)) == NULL)
		fatalx("http_events_request: cannot create an event");
	n_streams++;
	s->req = req;
	s->conn = evhttp_request_get_connection(req);
	/* One job's page shows its nodes and latest events. */
	s->f = follow_add(&page_sink, s, job, job != NULL ? FOLLOW_EVENTS :
	    FOLLOW_SUMMARY);
	http_conn_set_closecb(s->conn, stream_closed, s);

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-store");
	metrics_http_request();
	evhttp_send_reply_start(req, HTTP_OK, "OK");
	if ((s->batch = evbuffer_new()) == NULL)
		fatalx("out of memory");
	if (send_role(s) != 0)
		goto out;
	if (job != NULL && core_job_find(rdzvd.core, job) == NULL) {
		emit(s, "missing", "{}");
		goto out;
	}
	if (follow_snapshot(s->f, now, &lim, &left) != 0 || s->dropped)
		goto out;
	/* What the first answer left out, for the page to say so. */
	if (left.active > 0 || left.ended > 0) {
		snprintf(more, sizeof(more), "{\"active\":%zu,\"ended\":%zu}",
		    left.active, left.ended);
		emit(s, "more", more);
	}
out:
	/* Dropped or not: a stream dropped is freed on the next turn. */
	if (!s->dropped)
		evhttp_send_reply_chunk(req, s->batch);
	evbuffer_free(s->batch);
	s->batch = NULL;
	free(job);
}

/* A comment now and then keeps idle streams inside the HTTP timeout and
 * tells a page its connection is alive. */
static void
keepalive_one(void *arg, void *ctx)
{
	struct stream *s = arg;

	/* Not emit(): no stream may go from the list while it is walked. */
	if (s->dropped || queued(s) + 16 > EVENTS_STREAM_BUDGET)
		return;
	struct evbuffer *b = evbuffer_new();
	if (b == NULL)
		fatalx("out of memory");
	evbuffer_add_printf(b, ": alive\n\n");
	evhttp_send_reply_chunk(s->req, b);
	evbuffer_free(b);
}

static void
keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
	follow_foreach(&page_sink, keepalive_one, NULL);
}

void
http_events_start(void)
{
	struct timeval tv = { EVENTS_KEEPALIVE_S, 0 };

	keepalive_ev = event_new(rdzvd.base, -1, EV_PERSIST, keepalive_cb,
	    NULL);
	if (keepalive_ev == NULL || event_add(keepalive_ev, &tv) != 0)
		fatalx("cannot create the status page's keepalive timer");
}

void
http_events_end_all(void)
{
	follow_end_all(&page_sink, "the role changed");
}

void
http_events_stop(void)
{
	http_events_end_all();
	if (keepalive_ev != NULL)
		event_free(keepalive_ev);
	keepalive_ev = NULL;
}
