/*
 * /api/events?job=ID[&after=SEQ][&limit=N]: a job's event history as JSON,
 * for the status page's timeline (docs/OPERATIONS.md, "The timeline"). The
 * core keeps only a job's latest CORE_EVENTS_KEPT events in memory; the
 * store holds them all, and this reads them the way Control.ListEvents
 * does, from what the last turn committed. An answer holds at most
 * API_EVENTS_MAX events, oldest first, and says whether more follow
 * ("more": ask again with after= the last seq). Each event is the
 * rdzv.v1.Event of ListEvents with the proto's field names; the page puts
 * every string in the DOM as text. Read-only, like the rest.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "pbjson.h"
#include "rdzv_id.h"
#include "http_int.h"
#include "rdzvd.h"
#include "store.h"

#define API_EVENTS_MAX		10000	/* events in one answer */

struct collect {
	struct convert_arena	*a;
	json_t		*list;
	uint32_t	 n;
	uint32_t	 cap;	/* one more than asked: is there more? */
};

static int
collect(const struct core_event *e, void *arg)
{
	struct collect *c = arg;
	Rdzv__V1__Event m;

	if (++c->n == c->cap)
		return 1;
	/* convert_event points into the event, which the store reuses: the
	 * JSON is made before the next row is read. */
	convert_event(c->a, e, &m);
	json_array_append_new(c->list, pbjson_message(&m.base));
	return 0;
}

/* A decimal number within [0, max] in |v|; 0, or -1. */
static int
number(const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;

	if (*v < '0' || *v > '9')
		return -1;
	*out = strtoull(v, &end, 10);
	return *end != '\0' || *out > max ? -1 : 0;
}

static void
reply_json(struct evhttp_request *req, int code, const char *reason,
    json_t *doc)
{
	struct evbuffer *b;
	char *text = pbjson_dumps(doc, JSON_COMPACT);

	json_decref(doc);
	if (text == NULL || (b = evbuffer_new()) == NULL) {
		free(text);
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add(b, text, strlen(text));
	free(text);
	http_reply(req, code, reason, "application/json", b);
	evbuffer_free(b);
}

static void
reply_error(struct evhttp_request *req, int code, const char *reason,
    const char *msg)
{
	reply_json(req, code, reason, json_pack("{s:s}", "error", msg));
}

void
http_api_events_request(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq	 q;
	const char		*query, *job, *v;
	unsigned long long	 after = 0, limit = API_EVENTS_MAX;
	struct convert_arena		 a = { 0 };
	char			 err[512], msg[700];
	json_t			*doc;

	if (http_request_check(req) != 0)
		return;
	TAILQ_INIT(&q);
	query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	if (query == NULL || evhttp_parse_query_str(query, &q) != 0 ||
	    (job = evhttp_find_header(&q, "job")) == NULL) {
		evhttp_clear_headers(&q);
		reply_error(req, HTTP_BADREQUEST, "Bad Request", "/api/events "
		    "needs job=ID, and takes after=SEQ and limit=N (1 to "
		    "10000)");
		return;
	}
	err[0] = '\0';
	if (rdzv_id_check(job, err, sizeof(err)) != 0 ||
	    ((v = evhttp_find_header(&q, "after")) != NULL &&
	    number(v, UINT64_MAX, &after) != 0) ||
	    ((v = evhttp_find_header(&q, "limit")) != NULL &&
	    (number(v, API_EVENTS_MAX, &limit) != 0 || limit == 0))) {
		snprintf(msg, sizeof(msg), "/api/events: %s", err[0] != '\0' ?
		    err : "after=SEQ is a number, limit=N is 1 to 10000");
		evhttp_clear_headers(&q);
		reply_error(req, HTTP_BADREQUEST, "Bad Request", msg);
		return;
	}
	if (rdzvd.standby || rdzvd.store == NULL) {
		snprintf(msg, sizeof(msg), "this rdzvd is a standby; the leader "
		    "is %s", rdzvd.leader[0] != '\0' ? rdzvd.leader :
		    "not known");
		evhttp_clear_headers(&q);
		reply_error(req, 503, "Service Unavailable", msg);
		return;
	}
	if (core_job_find(rdzvd.core, job) == NULL) {
		snprintf(msg, sizeof(msg), "job %s not found", job);
		evhttp_clear_headers(&q);
		reply_error(req, HTTP_NOTFOUND, "Not Found", msg);
		return;
	}
	struct collect c = { &a, json_array(), 0, (uint32_t)limit + 1 };
	int rc = store_events(rdzvd.store, job, after, c.cap, collect, &c,
	    err, sizeof(err));
	evhttp_clear_headers(&q);
	convert_free(&a);
	if (rc != 0) {
		json_decref(c.list);
		reply_error(req, HTTP_INTERNAL, "Internal Server Error", err);
		return;
	}
	doc = json_object();
	json_object_set_new(doc, "events", c.list);
	json_object_set_new(doc, "more", json_boolean(c.n == c.cap));
	json_object_set_new(doc, "now_unix_ms",
	    json_integer(turn_now().wall_ms));
	reply_json(req, HTTP_OK, "OK", doc);
}
