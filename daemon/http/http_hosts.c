/*
 * /hosts: the status page's view of host memory (docs/HEALTH.md) as JSON:
 * how many hosts are in each state, and every host that is not ok, by
 * name. The page polls it; on a cluster of thousands of hosts the ok ones
 * are only counted. Each host is the rdzv.v1.Host that Control.ListHosts
 * returns, with the proto's field names, as the page's jobs are. Read-only,
 * like the rest of the HTTP listener.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "pbjson.h"
#include "http_int.h"
#include "rdzvd.h"

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(const struct host *const *)a)->name,
	    (*(const struct host *const *)b)->name);
}

void
http_hosts_request(struct evhttp_request *req, void *arg)
{
	const struct hosts	*hs = rdzvd.core->hosts;
	struct core_now		 now = turn_now();
	const struct host	**v, *h;
	json_t			*doc, *counts, *list;
	struct evbuffer		*b;
	struct convert_arena		 a = { 0 };
	char			*text;
	size_t			 n = 0;

	if (http_request_check(req) != 0)
		return;
	v = xcalloc(hs->n + 1, sizeof(*v));
	TAILQ_FOREACH(h, &hs->all, entry)
		if (h->state != HOST_OK)
			v[n++] = h;
	qsort(v, n, sizeof(*v), by_name);
	doc = json_object();
	counts = json_object();
	list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, pbjson_message(&hook_host_to_pb(&a,
		    v[i], now)->base));
	for (int s = HOST_OK; s <= HOST_QUARANTINED; s++)
		json_object_set_new(counts, host_state_name((enum host_state)s),
		    json_integer(hs->n_state[s]));
	json_object_set_new(doc, "now_unix_ms", json_integer(now.wall_ms));
	json_object_set_new(doc, "counts", counts);
	json_object_set_new(doc, "hosts", list);
	text = pbjson_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	convert_free(&a);
	free(v);
	if (text == NULL || (b = evbuffer_new()) == NULL) {
		free(text);
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add(b, text, strlen(text));
	free(text);
	http_reply(req, HTTP_OK, "OK", "application/json", b);
	evbuffer_free(b);
}
