/*
 * Control.ListEvents: a job's event history from the database, which keeps
 * more than the latest events the core holds in memory.
 */
#include "rdzvd.h"
#include "rpc_int.h"
#include "store.h"

#define DEFAULT_LIMIT	100
#define MAX_LIMIT	10000

struct collect {
	struct convert_arena		 *a;
	Rdzv__V1__ListEventsResponse *resp;
	uint32_t		  cap;
};

static int
collect(const struct core_event *e, void *arg)
{
	struct collect *c = arg;
	Rdzv__V1__Event *m = convert_alloc(c->a, sizeof(*m));

	/* The store reuses its row buffer: copy the strings. */
	struct core_event *copy = convert_alloc(c->a, sizeof(*copy));
	*copy = *e;
	convert_event(c->a, copy, m);
	c->resp->events[c->resp->n_events++] = m;
	return c->resp->n_events == c->cap;
}

void
rpc_list_events(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ListEventsRequest *req =
	    (const Rdzv__V1__ListEventsRequest *)msg;
	Rdzv__V1__ListEventsResponse resp = RDZV__V1__LIST_EVENTS_RESPONSE__INIT;
	struct convert_arena a = { 0 };
	char err[512];

	if (rpc_job_or_finish(call, req->rdzv_id) == NULL)
		return;
	uint32_t limit = req->limit ? req->limit : DEFAULT_LIMIT;
	if (limit > MAX_LIMIT)
		limit = MAX_LIMIT;
	struct collect c = { &a, &resp, limit };
	resp.events = convert_alloc(&a, limit * sizeof(*resp.events));
	if (store_events(rdzvd.store, req->rdzv_id, req->after_seq, limit,
	    collect, &c, err, sizeof(err)) != 0)
		grpc_call_finish(call, GRPC_INTERNAL, "%s", err);
	else
		grpc_call_reply(call, &resp.base);
	convert_free(&a);
}
