/*
 * Control.ListHosts: what rdzvd remembers of each host across jobs
 * (docs/HEALTH.md), by name: what `rdzvctl hosts` shows. Anyone may read
 * it, as anyone may list jobs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdzvd.h"
#include "rpc_int.h"

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(const struct host *const *)a)->name,
	    (*(const struct host *const *)b)->name);
}

void
rpc_list_hosts(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ListHostsRequest *req =
	    (const Rdzv__V1__ListHostsRequest *)msg;
	Rdzv__V1__ListHostsResponse resp = RDZV__V1__LIST_HOSTS_RESPONSE__INIT;
	const struct hosts *hs = rdzvd.core->hosts;
	struct core_now now = turn_now();
	struct convert_arena a = { 0 };
	const struct host **v, *h;
	size_t n = 0;

	if (req->state < 0 || req->state > RDZV__V1__HOST_STATE__HOST_STATE_QUARANTINED) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "unknown host "
		    "state %d", (int)req->state);
		return;
	}
	v = convert_alloc(&a, (hs->n + 1) * sizeof(*v));
	TAILQ_FOREACH(h, &hs->all, entry)
		if (req->state == 0 || (int)h->state == (int)req->state)
			v[n++] = h;
	qsort(v, n, sizeof(*v), by_name);
	resp.hosts = convert_alloc(&a, (n + 1) * sizeof(*resp.hosts));
	for (size_t i = 0; i < n; i++)
		resp.hosts[resp.n_hosts++] = hook_host_to_pb(&a, v[i],
		    now);
	if (grpc_call_reply(call, &resp.base) == -EMSGSIZE)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "%zu hosts do "
		    "not fit in one message; raise --max-message", n);
	convert_free(&a);
}
