/*
 * /hosts: the status page's view of host memory (docs/HEALTH.md) as JSON:
 * how many hosts are in each state, and every host that is not ok, by
 * name. The page polls it; on a cluster of thousands of hosts the ok ones
 * are only counted. Read-only, like the rest of the HTTP listener.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "rdzvd.h"

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(const struct host *const *)a)->name,
	    (*(const struct host *const *)b)->name);
}

static json_t *
host_json(const struct host *h, struct core_now now, uint64_t window_ms)
{
	json_t		*o = json_object();
	uint32_t	 recent = 0, ok = 0;

	for (uint32_t i = 0; i < h->n_crash; i++)
		if (now.wall_ms - h->crash_ms[i] < (int64_t)window_ms)
			recent++;
	for (uint32_t i = 0; i < h->n_gpus; i++)
		ok += h->gpus[i].ok;
	/* json_string refuses what is not UTF-8; rdzvd only keeps UTF-8. */
	json_object_set_new(o, "name", json_string(h->name));
	json_object_set_new(o, "state", json_string(host_state_name(h->state)));
	json_object_set_new(o, "reason", json_string(h->reason));
	json_object_set_new(o, "since_ms", json_integer(h->since_ms));
	json_object_set_new(o, "crashes", json_integer(h->crashes));
	json_object_set_new(o, "recent_crashes", json_integer(recent));
	json_object_set_new(o, "gpus_ok", json_integer(ok));
	json_object_set_new(o, "gpus_total", json_integer(h->n_gpus));
	return o;
}

void
http_hosts_request(struct evhttp_request *req, void *arg)
{
	const struct hosts	*hs = rdzvd.core->hosts;
	struct core_now		 now = turn_now();
	const struct host	**v, *h;
	json_t			*doc = json_object(), *counts = json_object();
	json_t			*list = json_array();
	struct evbuffer		*b = evbuffer_new();
	char			*text;
	size_t			 n = 0;

	if ((v = calloc(hs->n + 1, sizeof(*v))) == NULL || b == NULL) {
		free(v);
		if (b != NULL)
			evbuffer_free(b);
		json_decref(doc);
		json_decref(counts);
		json_decref(list);
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	TAILQ_FOREACH(h, &hs->all, entry)
		if (h->state != HOST_OK)
			v[n++] = h;
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, host_json(v[i], now,
		    hs->policy.crash_window_ms));
	for (int s = HOST_OK; s <= HOST_QUARANTINED; s++)
		json_object_set_new(counts, host_state_name((enum host_state)s),
		    json_integer(hs->n_state[s]));
	json_object_set_new(doc, "now_ms", json_integer(now.wall_ms));
	json_object_set_new(doc, "counts", counts);
	json_object_set_new(doc, "hosts", list);
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	free(v);
	if (text == NULL) {
		evbuffer_free(b);
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add(b, text, strlen(text));
	free(text);
	http_reply(req, HTTP_OK, "OK", "application/json", b);
	evbuffer_free(b);
}
