/*
 * Control.Watch: the current state of the matching jobs, then every change,
 * sent after the commit of the turn that made it; a sink of the one list of
 * followers (follow.c). Watching one job includes its nodes; watching all
 * sends summaries. A watcher that stops reading is dropped with
 * RESOURCE_EXHAUSTED rather than buffered without limit.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "rdzvd.h"
#include "rpc_int.h"
#include "xmalloc.h"

struct watcher {
	struct grpc_call	*call;
	struct follower		*f;
};

static int	watch_send(void *, const Rdzv__V1__Job *, int, struct core_now);
static void	watch_end(void *, const char *);

static const struct follow_sink watch_sink = {
	.send = watch_send,
	.end = watch_end,
};

static void
watcher_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct watcher *w = arg;

	follow_remove(w->f);
	free(w);
}

/* Sends one job; 0, or -1 after ending the watcher's call. */
static int
watch_send(void *arg, const Rdzv__V1__Job *job, int removed,
    struct core_now now)
{
	struct watcher *w = arg;
	Rdzv__V1__WatchEvent ev = RDZV__V1__WATCH_EVENT__INIT;

	ev.job = (Rdzv__V1__Job *)job;
	ev.removed = removed;
	int rc = grpc_call_send(w->call, &ev.base);
	if (rc == 0)
		return 0;
	/* Finishing runs watcher_closed, which frees w. */
	grpc_call_finish(w->call, GRPC_RESOURCE_EXHAUSTED, "%s",
	    rc == -ENOBUFS ? "this watcher does not keep up with the changes; "
	    "watch again" : "a job does not fit in one message");
	return -1;
}

static void
watch_end(void *arg, const char *why)
{
	struct watcher *w = arg;
	struct grpc_call *call = w->call;

	/* Forgotten here, not by watcher_closed: the list is being walked. */
	grpc_call_on_close(call, NULL, NULL);
	follow_remove(w->f);
	free(w);
	role_hint(call);
	grpc_call_finish(call, GRPC_UNAVAILABLE, "%s", why);
}

void
rpc_watch(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__WatchRequest *req = (const Rdzv__V1__WatchRequest *)msg;
	const struct follow_limits lim = {
		.max = SIZE_MAX,
		.ended_max = req->all ? SIZE_MAX : 0,
	};
	struct follow_left left;
	struct watcher *w;
	char err[512];

	if (req->rdzv_id[0] != '\0' &&
	    rdzv_id_check(req->rdzv_id, err, sizeof(err)) != 0) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "%s", err);
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->call = call;
	/* Watching one job includes its nodes. */
	w->f = follow_add(&watch_sink, w, req->rdzv_id[0] != '\0' ?
	    req->rdzv_id : NULL, req->rdzv_id[0] != '\0' ? FOLLOW_NODES :
	    FOLLOW_SUMMARY);
	grpc_call_on_close(call, watcher_closed, w);
	follow_snapshot(w->f, turn_now(), &lim, &left);
}

void
rpc_watch_end_all(const char *why)
{
	follow_end_all(&watch_sink, why);
}
