/*
 * Control.Watch: the current state of the matching jobs, then every change,
 * sent after the commit of the turn that made it. Watching one job includes
 * its nodes; watching all sends summaries. A watcher that stops reading is
 * dropped with RESOURCE_EXHAUSTED rather than buffered without limit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "log.h"
#include "rdzvd.h"

struct watcher {
	struct grpc_call	*call;
	char			*rdzv_id;	/* NULL: every job */
	int			 all;
	TAILQ_ENTRY(watcher)	 entry;
};
static TAILQ_HEAD(, watcher) watchers = TAILQ_HEAD_INITIALIZER(watchers);

static void
watcher_free(struct watcher *w)
{
	TAILQ_REMOVE(&watchers, w, entry);
	free(w->rdzv_id);
	free(w);
}

static void
watcher_closed(struct grpc_call *call, int cancelled, void *arg)
{
	watcher_free(arg);
}

/* Sends one job; 0, or -1 after ending the watcher's call. */
static int
send_job(struct watcher *w, const struct core_job *job, struct core_now now,
    int removed)
{
	Rdzv__V1__WatchEvent ev = RDZV__V1__WATCH_EVENT__INIT;
	struct arena a = { 0 };

	/* Watching one job includes its nodes. */
	ev.job = job_to_pb(&a, job, now, w->rdzv_id != NULL ?
	    streams_last_seen_ms : NULL, 0);
	ev.removed = removed;
	int rc = grpc_call_send(w->call, &ev.base);
	arena_free(&a);
	if (rc == 0)
		return 0;
	/* Finishing runs watcher_closed, which frees w. */
	grpc_call_finish(w->call, GRPC_RESOURCE_EXHAUSTED, "%s",
	    rc == -ENOBUFS ? "this watcher does not keep up with the changes; "
	    "watch again" : "a job does not fit in one message");
	return -1;
}

static int
matches(const struct watcher *w, const struct core_job *job)
{
	return w->rdzv_id == NULL || strcmp(w->rdzv_id, job->rdzv_id) == 0;
}

void
rpc_watch(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__WatchRequest *req = (const Rdzv__V1__WatchRequest *)msg;
	struct core_now now = turn_now();
	struct watcher *w;
	struct core_job *job;
	char err[512];

	if (req->rdzv_id[0] != '\0' &&
	    rdzv_id_check(req->rdzv_id, err, sizeof(err)) != 0) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "%s", err);
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("rpc_watch");
	w->call = call;
	w->all = req->all;
	if (req->rdzv_id[0] != '\0' && (w->rdzv_id = strdup(req->rdzv_id)) == NULL)
		fatal("rpc_watch");
	TAILQ_INSERT_TAIL(&watchers, w, entry);
	grpc_call_on_close(call, watcher_closed, w);

	TAILQ_FOREACH(job, &rdzvd.core->jobs, entry) {
		if (!matches(w, job) || (!w->all && w->rdzv_id == NULL &&
		    core_job_ended(job)))
			continue;
		if (send_job(w, job, now, 0) != 0)
			return;
	}
}

/* Called after each commit: the jobs that changed or were removed. */
void
watch_jobs_changed(const struct core *c, struct core_now now)
{
	struct watcher *w, *next;
	struct core_job *job;

	for (w = TAILQ_FIRST(&watchers); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		int gone = 0;
		TAILQ_FOREACH(job, &c->changed_jobs, changed_entry) {
			/* New steps show only with the nodes. */
			if (job->steps_only && w->rdzv_id == NULL)
				continue;
			if (!gone && matches(w, job) && !job->removed)
				gone = send_job(w, job, now, 0) != 0;
		}
		TAILQ_FOREACH(job, &c->removed_jobs, entry)
			if (!gone && matches(w, job))
				gone = send_job(w, job, now, 1) != 0;
	}
}

void
watch_end_all(const char *why)
{
	struct watcher *w;

	while ((w = TAILQ_FIRST(&watchers)) != NULL) {
		role_hint(w->call);
		grpc_call_finish(w->call, GRPC_UNAVAILABLE, "%s", why);
		/* watcher_closed freed it; be sure. */
		if (TAILQ_FIRST(&watchers) == w) {
			grpc_call_on_close(w->call, NULL, NULL);
			watcher_free(w);
		}
	}
}
