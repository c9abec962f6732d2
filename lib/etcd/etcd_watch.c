/*
 * Watches of a key or a prefix, each on a Watch stream of its own
 * (lib/etcd/etcd.h). When the stream's member fails the watch is created again
 * on the next member from the revision after the last event delivered.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "etcd_int.h"

/* A stream that ended is opened again after a pause (when every member
 * refuses at once, no pause would spin), doubling from the first to the
 * most; the watch ends when none could be created for GIVE_UP_MS and
 * every member was tried (an etcd restarting takes a second or two). */
#define REOPEN_MS	200
#define REOPEN_MAX_MS	1000
#define GIVE_UP_MS	5000

struct etcd_watch {
	struct etcd *ec;
	TAILQ_ENTRY(etcd_watch) entry;
	uint8_t *key;
	size_t klen;
	uint8_t *end;			/* range end; NULL for one key */
	size_t endlen;
	int prev_kv;
	int64_t next_rev;		/* where a new stream starts; 0: now */
	int created_once;

	struct grpc_ccall *cc;
	size_t member;
	int closing;			/* we are cancelling cc ourselves */
	struct event *reopen;
	size_t fails;			/* streams ended before created */
	uint64_t first_fail;		/* mono_ms of the first of them */
	uint32_t pause_ms;
	char last_err[256];

	etcd_watch_event_fn on_event;
	void (*on_created)(struct etcd_watch *, int64_t, void *);
	etcd_watch_end_fn on_end;
	void *arg;
	int busy;			/* inside a user callback */
	int dead;			/* freed while busy */
	int ended;
};

static void	watch_open(struct etcd_watch *);

static void
watch_free_mem(struct etcd_watch *w)
{
	if (w->reopen != NULL)
		event_free(w->reopen);
	free(w->key);
	free(w->end);
	free(w);
}

static void
watch_hold(struct etcd_watch *w)
{
	w->busy++;
}

/* Returns 1 when the watch was freed meanwhile (it is gone now). */
static int
watch_release(struct etcd_watch *w)
{
	if (--w->busy == 0 && w->dead) {
		watch_free_mem(w);
		return 1;
	}
	return w->dead;
}

static void
stream_close(struct etcd_watch *w)
{
	struct grpc_ccall *cc = w->cc;

	if (cc == NULL)
		return;
	w->cc = NULL;
	w->closing = 1;
	grpc_ccall_cancel(cc);
	w->closing = 0;
}

static void
watch_end(struct etcd_watch *w, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
watch_end(struct etcd_watch *w, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (w->ended)
		return;
	w->ended = 1;
	stream_close(w);
	event_del(w->reopen);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (w->on_end != NULL) {
		watch_hold(w);
		w->on_end(w, status, msg, w->arg);
		watch_release(w);
	}
}

static void
watch_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Etcdserverpb__WatchResponse *r =
	    (const Etcdserverpb__WatchResponse *)msg;
	struct etcd_watch *w = arg;
	int64_t hrev = r->header != NULL ? r->header->revision : 0;

	watch_hold(w);
	if (r->created) {
		w->fails = 0;
		w->pause_ms = 0;
		if (w->next_rev == 0)
			w->next_rev = hrev + 1;
		if (!w->created_once) {
			w->created_once = 1;
			if (w->on_created != NULL)
				w->on_created(w, hrev, w->arg);
			if (w->dead)
				goto out;
		}
	}
	if (r->canceled || r->compact_revision > 0) {
		if (r->compact_revision > 0)
			watch_end(w, GRPC_OUT_OF_RANGE, "etcd: watch of %.*s "
			    "from revision %" PRId64 ": compacted up to "
			    "revision %" PRId64, (int)w->klen, w->key,
			    w->next_rev, r->compact_revision);
		else
			watch_end(w, GRPC_FAILED_PRECONDITION, "etcd: watch "
			    "of %.*s cancelled by etcd%s%s", (int)w->klen,
			    w->key, r->cancel_reason != NULL &&
			    *r->cancel_reason != '\0' ? ": " : "",
			    r->cancel_reason != NULL ? r->cancel_reason : "");
		goto out;
	}
	for (size_t i = 0; i < r->n_events && !w->dead && !w->ended; i++) {
		const Mvccpb__Event *ev = r->events[i];
		int64_t rev = ev->kv != NULL ? ev->kv->mod_revision : hrev;
		if (rev + 1 > w->next_rev)
			w->next_rev = rev + 1;
		if (w->on_event != NULL)
			w->on_event(w, ev, rev, w->arg);
	}
out:
	watch_release(w);
}

static void
watch_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct etcd_watch *w = arg;
	struct etcd *ec = w->ec;

	if (w->closing)
		return;
	w->cc = NULL;
	if (w->ended || w->dead)
		return;
	snprintf(w->last_err, sizeof(w->last_err), "%s: %s",
	    grpc_status_name(status), message != NULL ? message : "ended");
	if (status != GRPC_OK && status != GRPC_UNAVAILABLE) {
		watch_end(w, status, "etcd: watch of %.*s: %s", (int)w->klen,
		    w->key, message != NULL ? message : "ended");
		return;
	}
	etcd_member_failed(ec, w->member);
	uint64_t now = mono_ms();
	if (w->fails++ == 0)
		w->first_fail = now;
	if (w->fails > ec->n_members && mono_since(now, w->first_fail) >= GIVE_UP_MS) {
		watch_end(w, GRPC_UNAVAILABLE, "etcd: watch of %.*s: no member "
		    "could carry it for %d s; the last: %s", (int)w->klen,
		    w->key, GIVE_UP_MS / 1000, w->last_err);
		return;
	}
	w->pause_ms = w->pause_ms == 0 ? REOPEN_MS :
	    (w->pause_ms * 2 > REOPEN_MAX_MS ? REOPEN_MAX_MS : w->pause_ms * 2);
	struct timeval tv = { w->pause_ms / 1000,
	    (w->pause_ms % 1000) * 1000 };
	evtimer_add(w->reopen, &tv);
}

static void
watch_open(struct etcd_watch *w)
{
	Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
	Etcdserverpb__WatchCreateRequest cr =
	    ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
	struct grpc_client *cli;

	cr.key.data = w->key;
	cr.key.len = w->klen;
	if (w->end != NULL) {
		cr.range_end.data = w->end;
		cr.range_end.len = w->endlen;
	}
	cr.start_revision = w->next_rev;
	cr.prev_kv = w->prev_kv != 0;
	req.request_union_case =
	    ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	req.create_request = &cr;
	if ((cli = etcd_member_client(w->ec, &w->member)) != NULL)
		w->cc = grpc_client_stream(cli, ETCD_PATH_WATCH, &req.base,
		    &etcdserverpb__watch_response__descriptor, 0, watch_msg,
		    watch_done, w);
	if (w->cc == NULL) {
		/* Out of memory: try again later, as after a failure. */
		struct timeval tv = { 0, REOPEN_MS * 1000 };
		evtimer_add(w->reopen, &tv);
	}
}

static void
reopen_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_watch *w = arg;

	if (w->cc == NULL && !w->ended)
		watch_open(w);
}

struct etcd_watch *
etcd_watch_new(struct etcd *ec, const struct etcd_watch_opts *opts,
    etcd_watch_event_fn on_event,
    void (*on_created)(struct etcd_watch *w, int64_t revision, void *arg),
    etcd_watch_end_fn on_end, void *arg)
{
	struct etcd_watch *w;

	if (ec == NULL || ec->own_base || opts == NULL || opts->key == NULL ||
	    (*opts->key == '\0' && !opts->prefix)) {
		errno = EINVAL;
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->ec = ec;
	w->on_event = on_event;
	w->on_created = on_created;
	w->on_end = on_end;
	w->arg = arg;
	w->prev_kv = opts->prev_kv;
	w->next_rev = opts->start_revision > 0 ? opts->start_revision : 0;
	w->klen = strlen(opts->key);
	if ((w->key = malloc(w->klen + 1)) == NULL ||
	    (w->reopen = evtimer_new(ec->base, reopen_cb, w)) == NULL)
		goto nomem;
	memcpy(w->key, opts->key, w->klen + 1);
	if (opts->prefix) {
		if ((w->end = malloc(w->klen + 1)) == NULL)
			goto nomem;
		w->endlen = etcd_prefix_end(w->key, w->klen, w->end);
		if (w->klen == 0) {
			/* Every key: from "\0". */
			w->key[0] = '\0';
			w->klen = 1;
		}
	}
	TAILQ_INSERT_TAIL(&ec->watches, w, entry);
	watch_open(w);
	return w;
nomem:
	watch_free_mem(w);
	errno = ENOMEM;
	return NULL;
}

void
etcd_watch_free(struct etcd_watch *w)
{
	if (w == NULL || w->dead)
		return;
	TAILQ_REMOVE(&w->ec->watches, w, entry);
	w->on_event = NULL;
	w->on_created = NULL;
	w->on_end = NULL;
	w->ended = 1;
	stream_close(w);
	event_del(w->reopen);
	if (w->busy > 0)
		w->dead = 1;
	else
		watch_free_mem(w);
}

void
etcd_watch_drop_all(struct etcd *ec)
{
	struct etcd_watch *w;

	while ((w = TAILQ_FIRST(&ec->watches)) != NULL)
		etcd_watch_free(w);
}
