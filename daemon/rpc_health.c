/*
 * grpc.health.v1.Health (grpc/grpc doc/health-checking.md). The empty service
 * name and each of rdzvd's services are known; Watch streams the current
 * status, then every change until shutdown.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "rdzvd.h"

static const char *const known[] = {
	"", "rdzv.v1.Rendezvous", "rdzv.v1.Control", "grpc.health.v1.Health",
	"grpc.reflection.v1.ServerReflection",
	"grpc.reflection.v1alpha.ServerReflection",
};

struct watcher {
	struct grpc_call	*call;
	int			 known;
	struct watcher		*next;
};
static struct watcher *watchers;

static int
is_known(const char *service)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(service, known[i]) == 0)
			return 1;
	return 0;
}

static Grpc__Health__V1__HealthCheckResponse__ServingStatus
status_of(int known_service)
{
	if (!known_service)
		return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
	return rdzvd.serving ?
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING :
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

static int
send_status(struct grpc_call *call, int known_service)
{
	Grpc__Health__V1__HealthCheckResponse resp =
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	resp.status = status_of(known_service);
	return grpc_call_send(call, &resp.base);
}

void
rpc_health_check(struct grpc_call *call, const ProtobufCMessage *msg,
    void *arg)
{
	const Grpc__Health__V1__HealthCheckRequest *req =
	    (const Grpc__Health__V1__HealthCheckRequest *)msg;

	if (!is_known(req->service)) {
		grpc_call_finish(call, GRPC_NOT_FOUND, "unknown service '%s'",
		    req->service);
		return;
	}
	Grpc__Health__V1__HealthCheckResponse resp =
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	resp.status = status_of(1);
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
	struct watcher *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	w->call = call;
	w->known = is_known(req->service);
	w->next = watchers;
	watchers = w;
	grpc_call_on_close(call, watch_closed, NULL);
	if (send_status(call, w->known) != 0)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED,
		    "cannot queue the health status");
}

void
health_set_serving(int serving, int final)
{
	rdzvd.serving = serving;
	/* Finishing a call runs watch_closed, which unlinks it: walk a copy
	 * of the next pointer. */
	for (struct watcher *w = watchers, *next; w != NULL; w = next) {
		next = w->next;
		send_status(w->call, w->known);
		if (final)
			grpc_call_finish(w->call, GRPC_UNAVAILABLE,
			    "rdzvd is shutting down");
	}
}
