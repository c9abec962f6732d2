/*
 * grpc.health.v1.Health (grpc/grpc doc/health-checking.md). The empty service
 * name and each of rdzvd's services are known; Watch streams the current
 * status, then every change until shutdown. Rendezvous and Control are the
 * leader's (SPEC §14): NOT_SERVING on a standby. The rest, and the empty
 * name (the process), serve on every replica: a standby answers ServerInfo,
 * Health and reflection, and points clients to the leader.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "rdzvd.h"
#include "rpc_int.h"

static const char *const known[] = {
	"", "rdzv.v1.Rendezvous", "rdzv.v1.Control", "grpc.health.v1.Health",
	"grpc.reflection.v1.ServerReflection",
	"grpc.reflection.v1alpha.ServerReflection",
};

/* The services of the leader only. */
static const char *const leaders[] = {
	"rdzv.v1.Rendezvous", "rdzv.v1.Control",
};

/* What a service's status depends on. */
enum kind { UNKNOWN, PROCESS, LEADER };

struct watcher {
	struct grpc_call	*call;
	enum kind		 kind;
	int			 sent;	/* the status last sent */
	struct watcher		*next;
};
static struct watcher *watchers;
static uint32_t n_watchers;

static enum kind
kind_of(const char *service)
{
	for (size_t i = 0; i < sizeof(leaders) / sizeof(leaders[0]); i++)
		if (strcmp(service, leaders[i]) == 0)
			return LEADER;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(service, known[i]) == 0)
			return PROCESS;
	return UNKNOWN;
}

static Grpc__Health__V1__HealthCheckResponse__ServingStatus
status_of(enum kind kind)
{
	if (kind == UNKNOWN)
		return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
	return rdzvd.serving && (kind != LEADER || !rdzvd.standby) ?
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING :
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

static int
send_status(struct watcher *w)
{
	Grpc__Health__V1__HealthCheckResponse resp =
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	resp.status = status_of(w->kind);
	w->sent = resp.status;
	return grpc_call_send(w->call, &resp.base);
}

void
rpc_health_check(struct grpc_call *call, const ProtobufCMessage *msg,
    void *arg)
{
	const Grpc__Health__V1__HealthCheckRequest *req =
	    (const Grpc__Health__V1__HealthCheckRequest *)msg;

	enum kind kind = kind_of(req->service);

	if (kind == UNKNOWN) {
		grpc_call_finish(call, GRPC_NOT_FOUND, "unknown service '%s'",
		    req->service);
		return;
	}
	Grpc__Health__V1__HealthCheckResponse resp =
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	resp.status = status_of(kind);
	grpc_call_reply(call, &resp.base);
}

static void
watch_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct watcher **wp;

	for (wp = &watchers; *wp != NULL; wp = &(*wp)->next) {
		if ((*wp)->call == call) {
			struct watcher *w = *wp;
			*wp = w->next;
			free(w);
			n_watchers--;
			return;
		}
	}
}

void
rpc_health_watch(struct grpc_call *call, const ProtobufCMessage *msg,
    void *arg)
{
	const Grpc__Health__V1__HealthCheckRequest *req =
	    (const Grpc__Health__V1__HealthCheckRequest *)msg;
	struct watcher *w;

	/* Watch needs no credential and lasts: each holds a stream and,
	 * often, a connection. */
	if (n_watchers >= rdzvd.cfg.max_health_watchers) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "rdzvd: "
		    "max-health-watchers (%u) Health/Watch streams are open "
		    "already; use Health/Check, or try again later",
		    rdzvd.cfg.max_health_watchers);
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	w->call = call;
	w->kind = kind_of(req->service);
	w->next = watchers;
	watchers = w;
	n_watchers++;
	grpc_call_on_close(call, watch_closed, NULL);
	if (send_status(w) != 0)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED,
		    "cannot queue the health status");
}

void
rpc_health_set_serving(int serving, int final)
{
	rdzvd.serving = serving;
	/* Finishing a call runs watch_closed, which unlinks it: walk a copy
	 * of the next pointer. */
	for (struct watcher *w = watchers, *next; w != NULL; w = next) {
		next = w->next;
		if (w->sent != (int)status_of(w->kind))
			send_status(w);
		if (final)
			grpc_call_finish(w->call, GRPC_UNAVAILABLE,
			    "rdzvd is shutting down");
	}
}

void
rpc_health_role_changed(void)
{
	rpc_health_set_serving(rdzvd.serving, 0);
}
