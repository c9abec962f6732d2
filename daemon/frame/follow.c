/*
 * One list of the followers of job changes. Control.Watch (rpc_watch.c) and
 * the status page's event streams (http_events.c) are two sinks of it:
 * after each commit (turn_out.jobs_changed) every changed or removed job
 * becomes a protobuf Job once per level of detail that someone follows,
 * by convert_job, and each follower that matches gets that message; a sink
 * only encodes and sends it (protobuf for Watch, JSON for the page). So the
 * two see the same jobs at the same moments in the same words.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "rdzvd.h"
#include "xmalloc.h"

/* A job's latest events on the page's view of one job. */
#define FOLLOW_EVENTS_SHOWN	30

struct follower {
	const struct follow_sink *sink;
	void			*arg;
	char			*rdzv_id;	/* NULL: every job */
	enum follow_detail	 detail;
	TAILQ_ENTRY(follower)	 entry;
};
static TAILQ_HEAD(, follower) followers = TAILQ_HEAD_INITIALIZER(followers);

struct follower *
follow_add(const struct follow_sink *sink, void *arg, const char *rdzv_id,
    enum follow_detail detail)
{
	struct follower *f;

	f = xcalloc(1, sizeof(*f));
	f->rdzv_id = rdzv_id != NULL ? xstrdup(rdzv_id) : NULL;
	f->sink = sink;
	f->arg = arg;
	f->detail = detail;
	TAILQ_INSERT_TAIL(&followers, f, entry);
	return f;
}

void
follow_remove(struct follower *f)
{
	if (f == NULL)
		return;
	TAILQ_REMOVE(&followers, f, entry);
	free(f->rdzv_id);
	free(f);
}

size_t
follow_count(const struct follow_sink *sink)
{
	struct follower *f;
	size_t n = 0;

	TAILQ_FOREACH(f, &followers, entry)
		n += f->sink == sink;
	return n;
}

void
follow_end_all(const struct follow_sink *sink, const char *why)
{
	struct follower *f, *next;

	for (f = TAILQ_FIRST(&followers); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		if (f->sink == sink)
			sink->end(f->arg, why);	/* removes f */
	}
}

void
follow_foreach(const struct follow_sink *sink, void (*fn)(void *, void *),
    void *ctx)
{
	struct follower *f;

	TAILQ_FOREACH(f, &followers, entry)
		if (f->sink == sink)
			fn(f->arg, ctx);
}

static int
matches(const struct follower *f, const struct core_job *j)
{
	return f->rdzv_id == NULL || strcmp(f->rdzv_id, j->rdzv_id) == 0;
}

static Rdzv__V1__Job *
to_pb(struct convert_arena *a, const struct core_job *j, struct core_now now,
    enum follow_detail d)
{
	struct convert_job_view view = turn_job_view(d == FOLLOW_EVENTS ?
	    FOLLOW_EVENTS_SHOWN : 0);

	if (d == FOLLOW_SUMMARY)
		view.last_seen = NULL;
	return convert_job(a, j, now, &view);
}

/* Latest ended first. */
static int
by_ended_desc(const void *x, const void *y)
{
	const struct core_job *a = *(struct core_job *const *)x;
	const struct core_job *b = *(struct core_job *const *)y;

	return (a->ended_ms < b->ended_ms) - (a->ended_ms > b->ended_ms);
}

static int
send_one(struct follower *f, const struct core_job *j, struct core_now now)
{
	struct convert_arena a = { 0 };
	int rc;

	rc = f->sink->send(f->arg, to_pb(&a, j, now, f->detail), 0, now);
	convert_free(&a);
	return rc;
}

int
follow_snapshot(struct follower *f, struct core_now now,
    const struct follow_limits *lim, struct follow_left *left)
{
	struct core_job *j, **ended = NULL;
	size_t n_ended = 0, cap = 0, sent = 0, i;
	int rc = 0;

	memset(left, 0, sizeof(*left));
	TAILQ_FOREACH(j, &rdzvd.core->jobs, entry) {
		if (!matches(f, j))
			continue;
		if (core_job_ended(j) && f->rdzv_id == NULL) {
			if (lim->ended_max == 0)
				continue;
			if (n_ended == cap) {
				cap = cap ? cap * 2 : 64;
				ended = xreallocarray(ended, cap,
				    sizeof(*ended));
			}
			ended[n_ended++] = j;
			continue;
		}
		if (sent >= lim->max) {
			left->active++;
			continue;
		}
		if ((rc = send_one(f, j, now)) != 0)
			goto out;
		sent++;
	}
	/* The ones that ended last: what an operator looks for. */
	if (n_ended > 0)
		qsort(ended, n_ended, sizeof(*ended), by_ended_desc);
	for (i = 0; i < n_ended; i++) {
		if (i >= lim->ended_max || sent >= lim->max) {
			left->ended = n_ended - i;
			break;
		}
		if ((rc = send_one(f, ended[i], now)) != 0)
			goto out;
		sent++;
	}
out:
	free(ended);
	return rc;
}

/*
 * Each changed and removed job is converted once per level of detail that
 * a matching follower wants, then sent to each in turn. A sink may end its
 * follower while sending (a reader that does not keep up), never another.
 */
static void
changed_one(const struct core_job *j, int removed, struct core_now now)
{
	Rdzv__V1__Job *pb[FOLLOW_NDETAIL] = { NULL };
	struct follower *f, *next;
	struct convert_arena a = { 0 };

	for (f = TAILQ_FIRST(&followers); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		if (!matches(f, j))
			continue;
		/* New steps show only with the nodes (docs/HEALTH.md). */
		if (j->steps_only && !removed && f->detail == FOLLOW_SUMMARY)
			continue;
		if (pb[f->detail] == NULL)
			pb[f->detail] = to_pb(&a, j, now, f->detail);
		f->sink->send(f->arg, pb[f->detail], removed, now);
	}
	convert_free(&a);
}

void
follow_jobs_changed(const struct core *c, struct core_now now)
{
	struct core_job *j;

	if (TAILQ_EMPTY(&followers))
		return;
	TAILQ_FOREACH(j, &c->changed_jobs, changed_entry)
		if (!j->removed)
			changed_one(j, 0, now);
	TAILQ_FOREACH(j, &c->removed_jobs, entry)
		changed_one(j, 1, now);
}
