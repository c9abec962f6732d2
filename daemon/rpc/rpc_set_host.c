/*
 * Control.SetHost: an admin clears or quarantines a host (docs/HEALTH.md);
 * a quarantine evicts the host's live nodes from every job. Answered with
 * the host's record after the commit that holds the change, and, for a
 * quarantine that runs the on-quarantine command, once that run ended or
 * HOOK_REPLY_WAIT_MS passed (the record then says it still runs): what
 * rdzvctl prints is what the scheduler was told to do, not only what
 * rdzvd did.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "log.h"
#include "rdzvd.h"
#include "rpc_int.h"
#include "text.h"

/* Well within rdzvctl's call timeout (10 s); a drain takes a second. */
#define HOOK_REPLY_WAIT_MS	5000

struct waiting {
	struct grpc_call	*call;
	char			 host[HOST_NAME_MAX_LEN + 1];
	struct event		*timer;
	TAILQ_ENTRY(waiting)	 entry;
};
static TAILQ_HEAD(, waiting) waits = TAILQ_HEAD_INITIALIZER(waits);

static void
reply(struct grpc_call *call, const char *name)
{
	const struct host *h = hosts_find(rdzvd.core->hosts, name);
	struct convert_arena a = { 0 };

	if (h == NULL) {
		grpc_call_finish(call, GRPC_NOT_FOUND, "host %s is gone", name);
		return;
	}
	grpc_call_reply(call, &hook_host_to_pb(&a, h, turn_now())->base);
	convert_free(&a);
}

static void
waiting_free(struct waiting *w)
{
	TAILQ_REMOVE(&waits, w, entry);
	if (w->timer != NULL)
		event_free(w->timer);
	free(w);
}

/* The caller went away (or rdzvd stops serving): nothing to answer. */
static void
waiting_gone(struct grpc_call *call, int cancelled, void *arg)
{
	waiting_free(arg);
}

static void
waiting_answer(struct waiting *w)
{
	struct grpc_call *call = w->call;
	char host[sizeof(w->host)];

	textcpy(host, sizeof(host), w->host);
	grpc_call_on_close(call, NULL, NULL);
	waiting_free(w);
	reply(call, host);
}

static void
waiting_timeout(evutil_socket_t fd, short what, void *arg)
{
	waiting_answer(arg);
}

/* hook.c: a run ended; its host's waiting callers are answered. */
static void
hook_ended(const char *host)
{
	struct waiting *w, *next;

	for (w = TAILQ_FIRST(&waits); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (strcmp(w->host, host) == 0)
			waiting_answer(w);
	}
}

static void
answer(struct grpc_call *call, void *name)
{
	struct waiting *w;
	struct timeval tv = { HOOK_REPLY_WAIT_MS / 1000,
			      (HOOK_REPLY_WAIT_MS % 1000) * 1000 };

	if (!hook_pending(name)) {
		reply(call, name);
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->call = call;
	textcpy(w->host, sizeof(w->host), name);
	w->timer = evtimer_new(rdzvd.base, waiting_timeout, w);
	if (w->timer == NULL)
		fatalx("SetHost: cannot create a timer");
	TAILQ_INSERT_TAIL(&waits, w, entry);
	evtimer_add(w->timer, &tv);
	grpc_call_on_close(call, waiting_gone, w);
	hook_on_end(hook_ended);
}

void
rpc_set_host(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__SetHostRequest *req =
	    (const Rdzv__V1__SetHostRequest *)msg;
	char err[512];
	char *name;
	int rc;

	rc = core_host_set(rdzvd.core, turn_now(), grpc_call_identity(call),
	    rpc_caller_is_admin(call), req->host, (enum host_state)req->state,
	    req->reason, err, sizeof(err));
	if (rc != CORE_OK) {
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	name = xstrdup(req->host);
	turn_answer(call, answer, name);
}
