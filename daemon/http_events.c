/*
 * The status page's live data: /events is a server-sent event stream of
 * jobs as JSON, the current ones first, then each change after the commit
 * of the turn that made it, fed like Control.Watch (turn.c calls
 * http_events_jobs_changed next to watch_jobs_changed; nothing polls).
 * /events follows every job as a summary; /events?job=ID one job with
 * its nodes and latest events. The page builds its DOM from this data with
 * textContent, so nothing a client sent can become markup.
 *
 * A page that stops reading is dropped rather than buffered without limit.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "log.h"
#include "rdzvd.h"

#define EVENTS_MAX_CLIENTS	256
#define EVENTS_MAX_QUEUED	(1024 * 1024)	/* bytes, per client */
#define EVENTS_KEEPALIVE_S	20		/* below HTTP_TIMEOUT_S */
#define EVENTS_SHOWN		30		/* a job's latest events */

struct follower {
	struct evhttp_request		*req;
	struct evhttp_connection	*conn;
	char				*rdzv_id;	/* NULL: every job */
	TAILQ_ENTRY(follower)		 entry;
};
static TAILQ_HEAD(, follower) followers = TAILQ_HEAD_INITIALIZER(followers);
static size_t		 n_followers;
static struct event	*keepalive_ev;

size_t
http_events_count(void)
{
	return n_followers;
}

static void
follower_free(struct follower *f)
{
	TAILQ_REMOVE(&followers, f, entry);
	n_followers--;
	free(f->rdzv_id);
	free(f);
}

/*
 * The connection closed. When the client went away, evhttp has already
 * detached the unfinished request from its connection and leaves it to us
 * (libevent 2.1's evhttp_connection_incoming_fail); otherwise the request
 * is still the connection's, and goes with it.
 */
static void
follower_closed(struct evhttp_connection *conn, void *arg)
{
	struct follower *f = arg;

	if (evhttp_request_get_connection(f->req) == NULL)
		evhttp_request_free(f->req);
	follower_free(f);
}

/* Ends a follower's stream on our side. */
static void
follower_drop(struct follower *f)
{
	struct evhttp_connection *conn = f->conn;

	evhttp_connection_set_closecb(conn, NULL, NULL);
	follower_free(f);
	evhttp_connection_free(conn);
}

static void
set_str(json_t *o, const char *key, const char *s)
{
	json_object_set_new(o, key, json_string(s != NULL ? s : ""));
}

static void
set_int(json_t *o, const char *key, long long v)
{
	json_object_set_new(o, key, json_integer(v));
}

/* Keys as the proto's Node fields are named. */
static void
progress_json(json_t *o, const struct core_node *n, uint64_t lead,
    struct core_now now)
{
	struct core_node_progress p;

	core_node_progress(n, lead, now, &p);
	json_object_set_new(o, "has_step", json_boolean(p.has_step));
	set_int(o, "step", (long long)p.step);
	set_int(o, "step_unix_ms", p.step_wall_ms);
	set_int(o, "steps_behind", (long long)p.steps_behind);
	set_int(o, "behind_ms", p.behind_ms);
	json_object_set_new(o, "straggler", json_boolean(p.straggler));
}

static json_t *
node_json(const struct core_node *n, uint64_t lead, struct core_now now)
{
	json_t *o = json_object(), *gpus = json_array();

	set_int(o, "id", (long long)n->node_id);
	set_str(o, "host", n->hostname);
	set_str(o, "addr", n->advertise_addr);
	set_int(o, "group_rank", n->group_rank);
	set_int(o, "base_rank", n->base_rank);
	set_int(o, "nproc", n->nproc);
	set_str(o, "state", core_node_state_name(n->state));
	set_int(o, "gpus_healthy", n->gpus_healthy);
	set_int(o, "gpus_total", n->gpus_total);
	set_int(o, "last_seen_ms", streams_last_seen_ms(n, now));
	json_object_set_new(o, "connected", json_boolean(n->connected));
	set_str(o, "reason", n->reason);
	progress_json(o, n, lead, now);
	for (uint32_t i = 0; i < n->n_gpus; i++) {
		const struct core_gpu *g = &n->gpus[i];
		json_t *x = json_object();
		set_int(x, "device", g->device);
		json_object_set_new(x, "ok", json_boolean(g->ok));
		set_str(x, "name", g->name);
		set_str(x, "failed_step", g->failed_step);
		set_str(x, "error", g->error);
		json_array_append_new(gpus, x);
	}
	json_object_set_new(o, "gpus", gpus);
	return o;
}

/* A job as the page shows it; with its settings, nodes and events when
 * |detail|. */
static json_t *
job_json(const struct core_job *j, struct core_now now, int detail,
    int removed)
{
	const struct core_settings *s = &j->settings;
	json_t *o = json_object();

	set_str(o, "id", j->rdzv_id);
	json_object_set_new(o, "removed", json_boolean(removed));
	set_int(o, "now_ms", now.wall_ms);
	set_str(o, "state", core_job_state_name(j->state));
	set_str(o, "owner", j->owner);
	set_str(o, "reason", j->reason);
	set_int(o, "generation", (long long)j->generation);
	set_int(o, "nodes", j->n_state[CORE_NODE_PARTICIPANT] +
	    j->n_state[CORE_NODE_WAITING] + j->n_state[CORE_NODE_SPARE]);
	set_int(o, "min_nodes", s->min_nodes);
	set_int(o, "max_nodes", s->max_nodes);
	set_int(o, "world_size", j->world_size);
	set_int(o, "restarts", j->restart_count);
	set_int(o, "max_restarts", s->max_restarts);
	set_int(o, "created_ms", j->created_ms);
	set_int(o, "attempt", j->attempt);
	if (!detail)
		return o;

	json_t *st = json_object(), *nodes = json_array(), *evs = json_array();
	set_int(st, "last_call_timeout_ms", s->last_call_timeout_ms);
	set_int(st, "join_timeout_ms", s->join_timeout_ms);
	set_int(st, "lease_ttl_ms", s->lease_ttl_ms);
	set_int(st, "reconnect_grace_ms", s->reconnect_grace_ms);
	set_int(st, "rejoin_timeout_ms", s->rejoin_timeout_ms);
	set_int(st, "hang_timeout_ms", s->hang_timeout_ms);
	json_object_set_new(o, "settings", st);
	set_str(o, "master", j->master_addr);
	set_int(o, "master_port", j->master_port);
	set_int(o, "round_nodes", j->round_n);

	const struct core_node *n;
	uint64_t lead;
	uint32_t stragglers;
	bool has_lead = core_job_progress(j, now, &lead, &stragglers);
	json_object_set_new(o, "has_lead_step", json_boolean(has_lead));
	set_int(o, "lead_step", (long long)lead);
	set_int(o, "stragglers", stragglers);
	TAILQ_FOREACH(n, &j->nodes, entry)
		json_array_append_new(nodes, node_json(n, lead, now));
	TAILQ_FOREACH(n, &j->ended, ended_entry)
		json_array_append_new(nodes, node_json(n, lead, now));
	json_object_set_new(o, "node_list", nodes);

	uint32_t from = j->events_n > EVENTS_SHOWN ? j->events_n -
	    EVENTS_SHOWN : 0;
	for (uint32_t i = j->events_n; i-- > from; ) {
		const struct core_event *e = core_job_event(j, i);
		json_t *x = json_object();
		set_int(x, "seq", (long long)e->seq);
		set_int(x, "wall_ms", e->wall_ms);
		set_str(x, "kind", e->kind);
		set_str(x, "message", e->message);
		json_array_append_new(evs, x);
	}
	json_object_set_new(o, "events", evs);
	return o;
}

/*
 * Queues one job as an event; 0, or -1 after dropping the follower. The
 * first answer (|limit| 0) is every job at once, bounded by what rdzvd
 * holds; only later changes are held to EVENTS_MAX_QUEUED, and that
 * outside evhttp's callbacks, where freeing the connection is safe.
 */
static int
send_job(struct follower *f, const struct core_job *j, struct core_now now,
    int removed, int limit)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(f->conn);
	struct evbuffer *b;
	json_t *o;
	char *s;

	if (limit && bev != NULL &&
	    evbuffer_get_length(bufferevent_get_output(bev)) >
	    EVENTS_MAX_QUEUED) {
		log_debug("status page does not keep up with the changes: "
		    "dropped");
		follower_drop(f);
		return -1;
	}
	o = job_json(j, now, f->rdzv_id != NULL, removed);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL || (b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	/* JSON has no raw newline, so it is one data line. */
	evbuffer_add_printf(b, "event: job\ndata: %s\n\n", s);
	free(s);
	evhttp_send_reply_chunk(f->req, b);
	evbuffer_free(b);
	return 0;
}

/*
 * The replica's role first (SPEC §14): a standby holds no jobs, and its
 * page says whose page to open instead. A change of role ends every stream
 * (http_pages_reset), so the page reconnects and hears the new one.
 */
static void
send_role(struct follower *f)
{
	struct evbuffer *b;
	json_t *o;
	char *s;

	o = json_pack("{s:s, s:s}", "role", role_name(), "leader",
	    rdzvd.leader);
	if (o == NULL || (s = json_dumps(o, JSON_COMPACT)) == NULL ||
	    (b = evbuffer_new()) == NULL)
		fatalx("out of memory");
	json_decref(o);
	evbuffer_add_printf(b, "event: role\ndata: %s\n\n", s);
	free(s);
	evhttp_send_reply_chunk(f->req, b);
	evbuffer_free(b);
}

static int
matches(const struct follower *f, const struct core_job *j)
{
	return f->rdzv_id == NULL || strcmp(f->rdzv_id, j->rdzv_id) == 0;
}

void
http_events_request(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq q, *h = evhttp_request_get_output_headers(req);
	const char *job = NULL, *query;
	struct core_now now = turn_now();
	struct core_job *j;
	struct follower *f;
	char err[512];

	/* A HEAD would hold a stream open with nothing to send it. */
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "Use GET");
		return;
	}
	TAILQ_INIT(&q);
	query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	if (query != NULL && evhttp_parse_query_str(query, &q) == 0)
		job = evhttp_find_header(&q, "job");
	if (job != NULL && rdzv_id_check(job, err, sizeof(err)) != 0) {
		evhttp_clear_headers(&q);
		evhttp_send_error(req, HTTP_BADREQUEST, NULL);
		return;
	}
	if (n_followers >= EVENTS_MAX_CLIENTS) {
		evhttp_clear_headers(&q);
		evhttp_send_error(req, 503, "Too many status pages are open");
		return;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (job != NULL && (f->rdzv_id = strdup(job)) == NULL))
		fatal("http_events_request");
	evhttp_clear_headers(&q);
	f->req = req;
	f->conn = evhttp_request_get_connection(req);
	TAILQ_INSERT_TAIL(&followers, f, entry);
	n_followers++;
	evhttp_connection_set_closecb(f->conn, follower_closed, f);

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-store");
	metrics_http_request();
	evhttp_send_reply_start(req, HTTP_OK, "OK");
	send_role(f);
	if (f->rdzv_id != NULL && core_job_find(rdzvd.core, f->rdzv_id) ==
	    NULL) {
		struct evbuffer *b = evbuffer_new();
		if (b == NULL)
			fatalx("out of memory");
		evbuffer_add_printf(b, "event: missing\ndata: {}\n\n");
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
		return;
	}
	TAILQ_FOREACH(j, &rdzvd.core->jobs, entry)
		if (matches(f, j))
			send_job(f, j, now, 0, 0);
}

void
http_events_jobs_changed(const struct core *c, struct core_now now)
{
	struct follower *f, *next;
	struct core_job *j;

	for (f = TAILQ_FIRST(&followers); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		int gone = 0;
		TAILQ_FOREACH(j, &c->changed_jobs, changed_entry) {
			/* New steps show only in a job's detail. */
			if (j->steps_only && f->rdzv_id == NULL)
				continue;
			if (!gone && matches(f, j) && !j->removed)
				gone = send_job(f, j, now, 0, 1) != 0;
		}
		TAILQ_FOREACH(j, &c->removed_jobs, entry)
			if (!gone && matches(f, j))
				gone = send_job(f, j, now, 1, 1) != 0;
	}
}

/* A comment now and then keeps idle streams inside the HTTP timeout and
 * tells a page its connection is alive. */
static void
keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
	struct follower *f;
	struct evbuffer *b;

	TAILQ_FOREACH(f, &followers, entry) {
		if ((b = evbuffer_new()) == NULL)
			fatalx("out of memory");
		evbuffer_add_printf(b, ": alive\n\n");
		evhttp_send_reply_chunk(f->req, b);
		evbuffer_free(b);
	}
}

void
http_events_init(void)
{
	struct timeval tv = { EVENTS_KEEPALIVE_S, 0 };

	keepalive_ev = event_new(rdzvd.base, -1, EV_PERSIST, keepalive_cb,
	    NULL);
	if (keepalive_ev == NULL || event_add(keepalive_ev, &tv) != 0)
		fatalx("cannot create the status page's keepalive timer");
}

void
http_events_free(void)
{
	struct follower *f;

	while ((f = TAILQ_FIRST(&followers)) != NULL)
		follower_drop(f);
	if (keepalive_ev != NULL)
		event_free(keepalive_ev);
	keepalive_ev = NULL;
}
