/*
 * The node's session on rdzvd (SPEC §6, docs/PROTOCOL.md): a Health/Check
 * that proves rdzvd is there and gives us the address it sees us from,
 * then the Join stream, which carries every change of the node's place.
 * A lost stream leaves the workers alone: the agent reconnects with
 * exponential backoff and jitter (100 ms to 5 s) and resumes with its
 * session_id and the generation it runs. A refused resume makes it a new
 * node. Before it ever joined, it gives up after --connect-timeout (exit 3);
 * after, after --reconnect-timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "agent.h"
#include "grpc/health/v1/health.pb-c.h"
#include "log.h"
#include "names.h"

#define BACKOFF_MIN_MS		100
#define BACKOFF_MAX_MS		5000
#define CHECK_TIMEOUT_MS	5000

static void	connect_check(struct agent *);
static void	send_join(struct agent *);

bool
session_connected(const struct agent *a)
{
	return a->sstate == SESSION_JOINED && a->session_len > 0;
}

static uint32_t
jitter(uint32_t ms)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)mono_us();
	return ms / 2 + r % (ms / 2 + 1);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	if (a->quitting)
		return;
	if (a->session_len > 0)
		send_join(a);
	else
		connect_check(a);
}

/* A connection attempt or the stream failed: try again after a backoff,
 * or give up once the bound has passed. */
static void
failed_attempt(struct agent *a, int status, const char *msg)
{
	uint64_t now = mono_ms(), limit;
	struct timeval tv;
	uint32_t ms;

	snprintf(a->last_error, sizeof(a->last_error), "%s (%s)",
	    msg != NULL && *msg != '\0' ? msg : "no message",
	    grpc_status_name(status));
	if (a->quitting)
		return;
	limit = a->ever_joined ? a->opts->reconnect_timeout_ms :
	    a->opts->client.connect_timeout_ms;
	if (a->trying_since == 0) {
		a->trying_since = now;
		if (a->ever_joined)
			log_warnx("lost rdzvd at %s: %s; the workers keep "
			    "running while the agent reconnects",
			    a->opts->client.server, a->last_error);
		else
			log_info("rdzvd at %s: %s; retrying for %.0f s",
			    a->opts->client.server, a->last_error,
			    limit / 1000.0);
	} else {
		log_debug("rdzvd at %s: %s", a->opts->client.server,
		    a->last_error);
	}
	if (now - a->trying_since >= limit) {
		a->sstate = SESSION_ENDED;
		agent_quit(a, AGENT_EXIT_UNREACHABLE, false, "cannot reach "
		    "rdzvd at %s for %.0f s: %s; is it running there? "
		    "(--server, RDZV_SERVER)", a->opts->client.server,
		    (now - a->trying_since) / 1000.0, a->last_error);
		return;
	}
	a->backoff_ms = a->backoff_ms == 0 ? BACKOFF_MIN_MS :
	    a->backoff_ms * 2;
	if (a->backoff_ms > BACKOFF_MAX_MS)
		a->backoff_ms = BACKOFF_MAX_MS;
	ms = jitter(a->backoff_ms);
	if (now + ms > a->trying_since + limit)
		ms = (uint32_t)(a->trying_since + limit - now);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	a->sstate = SESSION_RETRY;
	evtimer_add(a->retry_ev, &tv);
}

/* rdzvd said no to a new Join: nothing to retry. */
static void
refused(struct agent *a, int status, const char *msg)
{
	int code;

	switch (status) {
	case GRPC_INVALID_ARGUMENT:
		code = AGENT_EXIT_USAGE;
		break;
	case GRPC_UNIMPLEMENTED:
		code = AGENT_EXIT_UNREACHABLE;
		msg = "it does not serve rdzv.v1.Rendezvous: is this rdzvd?";
		break;
	default:
		code = AGENT_EXIT_REFUSED;
		break;
	}
	a->sstate = SESSION_ENDED;
	agent_quit(a, code, false, "rdzvd refused to join job %s: %s (%s)",
	    a->opts->id, msg != NULL ? msg : "no reason given",
	    grpc_status_name(status));
}

/* ------------------------------------------------------------ Health */

static void
check_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Grpc__Health__V1__HealthCheckResponse *r =
	    (const Grpc__Health__V1__HealthCheckResponse *)msg;
	struct agent *a = arg;

	a->check_serving = r->status ==
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
}

static void
check_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct agent *a = arg;

	a->call = NULL;
	if (a->quitting || a->sstate == SESSION_ENDED)
		return;
	if (status == GRPC_OK && !a->check_serving) {
		failed_attempt(a, GRPC_UNAVAILABLE, "rdzvd is not serving "
		    "(shutting down?)");
		return;
	}
	if (status == GRPC_UNIMPLEMENTED || status == GRPC_NOT_FOUND) {
		refused(a, GRPC_UNIMPLEMENTED, msg);
		return;
	}
	if (status != GRPC_OK) {
		failed_attempt(a, status, msg);
		return;
	}
	send_join(a);
}

static void
connect_check(struct agent *a)
{
	Grpc__Health__V1__HealthCheckRequest req =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;

	a->sstate = SESSION_CONNECT;
	req.service = (char *)"rdzv.v1.Rendezvous";
	a->check_serving = false;
	a->call = grpc_client_call(a->cli, "/grpc.health.v1.Health/Check",
	    &req.base, &grpc__health__v1__health_check_response__descriptor,
	    a->opts->client.connect_timeout_ms + CHECK_TIMEOUT_MS, check_msg,
	    check_done, a);
	if (a->call == NULL)
		failed_attempt(a, GRPC_INTERNAL, "cannot start a call");
}

/* ------------------------------------------------------------- Join */

static void
on_accepted(struct agent *a, const Rdzv__V1__Accepted *acc)
{
	const Rdzv__V1__JobSettings *s = acc->settings;

	if (acc->session_id.len == 0 || acc->session_id.len >
	    sizeof(a->session_id)) {
		log_warnx("rdzvd sent a session id of %zu bytes; ignored",
		    acc->session_id.len);
	} else {
		memcpy(a->session_id, acc->session_id.data,
		    acc->session_id.len);
		a->session_len = acc->session_id.len;
	}
	if (acc->resumed)
		log_info("resumed as node %llu of job %s",
		    (unsigned long long)acc->node_id, a->opts->id);
	else
		log_info("joined job %s as node %llu (attempt %u)",
		    a->opts->id, (unsigned long long)acc->node_id,
		    acc->attempt);
	if (s != NULL)
		log_debug("job %s: nodes %u:%u, last call %u ms, join timeout "
		    "%u ms, max restarts %u, lease %u ms, reconnect grace %u "
		    "ms", a->opts->id, s->min_nodes, s->max_nodes,
		    s->last_call_timeout_ms, s->join_timeout_ms,
		    s->max_restarts, s->lease_ttl_ms, s->reconnect_grace_ms);
	a->node_id = acc->node_id;
	a->sstate = SESSION_JOINED;
	a->ever_joined = true;
	a->trying_since = 0;
	a->backoff_ms = 0;
	report_flush(a);
}

static void
join_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__JoinEvent *ev = (const Rdzv__V1__JoinEvent *)msg;
	struct agent *a = arg;
	const char *id = a->opts->id;

	if (a->sstate == SESSION_ENDED)
		return;
	switch (ev->event_case) {
	case RDZV__V1__JOIN_EVENT__EVENT_ACCEPTED:
		on_accepted(a, ev->accepted);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_WAITING:
		log_info("job %s: waiting as %s: %u of %u:%u nodes%s%s", id,
		    node_state_name(ev->waiting->state),
		    ev->waiting->participants, ev->waiting->min_nodes,
		    ev->waiting->max_nodes, *ev->waiting->reason ? "; " : "",
		    ev->waiting->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_ASSIGNMENT:
		agent_assignment(a, ev->assignment);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_STOP:
		agent_stop_generation(a, ev->stop->generation,
		    ev->stop->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_CLOSED:
		a->sstate = SESSION_ENDED;
		agent_quit(a, AGENT_EXIT_OK, false, "job %s closed: %s", id,
		    ev->closed->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_FAILED:
		a->sstate = SESSION_ENDED;
		agent_quit(a, AGENT_EXIT_FAILED, false, "job %s failed: %s",
		    id, ev->failed->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_EVICTED:
		a->sstate = SESSION_ENDED;
		agent_quit(a, AGENT_EXIT_REFUSED, false, "evicted from job %s: "
		    "%s", id, ev->evicted->reason);
		break;
	default:
		log_debug("job %s: unknown event %d ignored", id,
		    (int)ev->event_case);
		break;
	}
}

static void
join_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct agent *a = arg;
	bool joined = a->sstate == SESSION_JOINED;
	bool resuming = a->session_len > 0;

	a->call = NULL;
	if (a->quitting || a->sstate == SESSION_ENDED)
		return;
	if (status == GRPC_OK) {
		/* Ended without closed/failed/evicted: resume. */
		failed_attempt(a, GRPC_UNAVAILABLE, "rdzvd ended the stream");
		return;
	}
	if (resuming && (status == GRPC_NOT_FOUND ||
	    status == GRPC_FAILED_PRECONDITION)) {
		agent_resume_refused(a, msg);
		connect_check(a);
		return;
	}
	if (!joined && !grpc_status_transient(status)) {
		refused(a, status, msg);
		return;
	}
	failed_attempt(a, status, msg);
}

static void
send_join(struct agent *a)
{
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;
	const struct agent_opts *o = a->opts;
	struct gpucheck_pb gpb = { 0 };
	const char *addr;

	req.rdzv_id = (char *)o->id;
	if (a->session_len > 0) {
		req.session_id.data = a->session_id;
		req.session_id.len = a->session_len;
		req.generation = agent_resume_generation(a);
		log_debug("resuming node %llu with generation %llu",
		    (unsigned long long)a->node_id,
		    (unsigned long long)req.generation);
	} else {
		req.min_nodes = o->min_nodes;
		req.max_nodes = o->max_nodes;
		req.last_call_timeout_ms = o->last_call_ms;
		req.join_timeout_ms = o->join_timeout_ms;
		req.max_restarts = o->max_restarts;
		req.lease_ttl_ms = o->lease_ttl_ms;
		req.reconnect_grace_ms = o->reconnect_grace_ms;
		req.hostname = a->hostname;
		/* Where rdzvd sees us from is the interface that reaches
		 * the cluster; over a unix socket, our host name. */
		addr = o->advertise_addr;
		if (addr == NULL && (addr = grpc_client_local_addr(a->cli)) !=
		    NULL && strcmp(addr, "unix") == 0)
			addr = a->hostname;
		req.advertise_addr = (char *)(addr != NULL ? addr : "");
		req.master_port = a->offer_port;
		req.nproc = a->nproc;
		req.has_rank_hint = o->has_node_rank;
		req.rank_hint = o->node_rank;
		req.role = (char *)o->role;
		req.agent_version = (char *)RDZV_VERSION;
		if (gpucheck_pb_new(&a->gpucheck, &gpb) != 0)
			fatalx("out of memory");
		req.n_gpus = gpb.n;
		req.gpus = gpb.ptrs;
		log_debug("joining job %s as %s (%s), %u workers, master port "
		    "%u", o->id, a->hostname, req.advertise_addr, a->nproc,
		    a->offer_port);
	}
	a->sstate = SESSION_JOIN;
	a->call = grpc_client_call(a->cli, "/rdzv.v1.Rendezvous/Join",
	    &req.base, &rdzv__v1__join_event__descriptor, 0, join_msg,
	    join_done, a);
	gpucheck_pb_free(&gpb);
	if (a->call == NULL)
		failed_attempt(a, GRPC_INTERNAL, "cannot start the Join call");
}

/* ----------------------------------------------------------- lifetime */

static void
on_closed(struct grpc_client *cli, int err, void *arg)
{
	log_debug("connection to rdzvd closed (%d)", err);
}

int
session_init(struct agent *a, char *err, size_t errlen)
{
	if (client_opts_grpc(&a->opts->client, &a->gopts, &a->tls, err,
	    errlen) != 0)
		return -1;
	/* Our PINGs find a dead rdzvd or network even while nothing is
	 * said; rdzvd accepts them at any rate. */
	a->gopts.keepalive_ms = 5000;
	a->cli = grpc_client_new(a->base, &a->gopts, on_closed, a);
	a->retry_ev = evtimer_new(a->base, retry_cb, a);
	if (a->cli == NULL || a->retry_ev == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void
session_start(struct agent *a)
{
	a->trying_since = 0;
	a->backoff_ms = 0;
	connect_check(a);
}

/* Cancels what is in flight; the callbacks see a->quitting. */
void
session_free(struct agent *a)
{
	if (a->retry_ev != NULL)
		event_free(a->retry_ev);
	a->retry_ev = NULL;
	grpc_client_free(a->cli);
	a->cli = NULL;
	tls_free(a->tls);
	a->tls = NULL;
}
