/*
 * The node's session on rdzvd (SPEC §6, docs/PROTOCOL.md): a Health/Check
 * that proves rdzvd is there and gives us the address it sees us from,
 * then the Join stream, which carries every change of the node's place.
 * A lost stream leaves the workers alone: the agent reconnects with
 * exponential backoff and jitter (100 ms to 5 s) and resumes with its
 * session_id and the generation it runs. A refused resume makes it a new
 * node. Before it ever joined, it gives up after --connect-timeout (exit 3);
 * after, after --reconnect-timeout. What the stream brings and how the
 * session ends go to the agent (session_events), which decides.
 *
 * With several servers (the replicas of an HA rdzvd, SPEC §14) a failed
 * attempt moves by the rule of client/common/servers.h: to the leader a
 * standby named in its rdzv-leader trailer, else to the next server, each
 * after a short jitter; the exponential backoff grows only once every
 * server has failed, and stays under a second while some server answers
 * (a standby: a leader is elected within its lease). Reaching another server is a resume like any other:
 * the same session, the same generation, the workers untouched.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "node.h"
#include "workers.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"
#include "log.h"
#include "names.h"
#include "text.h"

#define CHECK_TIMEOUT_MS	5000

static void	connect_check(struct session *);
static void	send_join(struct session *);
static void	join_or_wait(struct session *);
static void	failed_attempt(struct session *, int, const char *,
		    const char *);
static void	on_closed(struct grpc_client *, int, const char *, void *);

bool
session_connected(const struct session *s)
{
	return s->state == SESSION_JOINED && s->id_len > 0;
}

/* The server the session is on, or tries next. */
const char *
session_server(const struct session *s)
{
	return server_list_current(&s->servers)->name;
}

/* The end: the agent exits with |status| and |fmt|'s message. */
static void
end(struct session *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
end(struct session *s, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->state = SESSION_ENDED;
	waiting_over(s);
	s->ev.ended(s->ev.arg, status, msg);
}

/*
 * The next attempt goes to another server: a client for it. The old one's
 * calls end CANCELLED as it goes, so reports in flight wait for the resume
 * (report.c); s->cli already names the new client when their callbacks
 * run.
 */
static int
switch_client(struct session *s)
{
	struct grpc_client *old = s->cli, *cli;

	s->gopts.server = server_list_current(&s->servers)->ep;
	cli = grpc_client_new(event_get_base(s->retry_ev), &s->gopts,
	    on_closed, s);
	if (cli == NULL)
		return -1;
	s->cli = cli;
	s->moved = false;
	grpc_client_free(old);
	return 0;
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->quitting)
		return;
	if (s->moved && switch_client(s) != 0) {
		failed_attempt(s, GRPC_INTERNAL, "out of memory for a client",
		    NULL);
		return;
	}
	if (s->id_len > 0)
		send_join(s);
	else
		connect_check(s);
}

/*
 * Where the next attempt goes after a failure with |status| and the
 * leader hint |hint| (NULL: none), logged when it is another server.
 * Returns the move; ROUND when the list is one server.
 */
static enum server_move
choose_server(struct session *s, int status, const char *hint)
{
	enum server_move move;
	char from[sizeof(s->servers.s[0].name)];

	if (!server_list_should_move(status))
		return SERVER_MOVE_ROUND;
	snprintf(from, sizeof(from), "%s", session_server(s));
	move = server_list_failed(&s->servers, hint);
	if (hint != NULL && move != SERVER_MOVE_HINT)
		log_debug("rdzvd at %s names %s as its leader; not followed "
		    "(bad, or followed enough this round)", from, hint);
	if (strcmp(from, session_server(s)) == 0)
		return move;
	s->moved = true;
	if (move == SERVER_MOVE_HINT)
		log_info("following leader hint %s from rdzvd at %s",
		    session_server(s), from);
	else if (s->backoff_ms == 0)
		log_info("trying rdzvd at %s next", session_server(s));
	else
		log_debug("trying rdzvd at %s next", session_server(s));
	return move;
}

/* A connection attempt or the stream failed: try again after a backoff,
 * or give up once the bound has passed. */
static void
failed_attempt(struct session *s, int status, const char *msg,
    const char *hint)
{
	const struct agent_opts *o = s->opts;
	uint64_t now = mono_ms(), limit;
	struct timeval tv;
	uint32_t ms;
	char list[1024];

	snprintf(s->last_error, sizeof(s->last_error), "%s (%s)",
	    msg != NULL && *msg != '\0' ? msg : "no message",
	    grpc_status_name(status));
	if (s->quitting)
		return;
	/*
	 * Once a join went to an rdzvd that answered, rdzvd was reached: a
	 * failure now is one of a slow rdzvd (a commit past our keepalive)
	 * as much as of a lost one, and the join may be committed; the
	 * retries (same token) get the reconnect bound, not the connect one.
	 */
	limit = s->ever_joined || s->join_sent ? o->reconnect_timeout_ms :
	    o->client.connect_timeout_ms;
	if (s->trying_since == 0) {
		s->trying_since = now;
		if (s->ever_joined)
			log_warnx("lost rdzvd at %s: %s; the workers keep "
			    "running while the agent reconnects",
			    session_server(s), s->last_error);
		else
			log_info("rdzvd at %s: %s; retrying for %.0f s",
			    session_server(s), s->last_error,
			    limit / 1000.0);
	} else {
		log_debug("rdzvd at %s: %s", session_server(s),
		    s->last_error);
	}
	if (mono_since(now, s->trying_since) >= limit) {
		/* A name that does not resolve is a typo, not a stopped
		 * rdzvd. */
		end(s, AGENT_EXIT_UNREACHABLE, "cannot reach rdzvd at %s for "
		    "%.0f s: %s; %s (--server, RDZV_SERVER)",
		    server_list_format(&s->servers, list, sizeof(list)),
		    mono_since(now, s->trying_since) / 1000.0, s->last_error,
		    strstr(s->last_error, "cannot resolve") != NULL ?
		    "the host name does not resolve: check it" :
		    strstr(s->last_error, "RESOURCE_EXHAUSTED") != NULL ?
		    "rdzvd stayed at that limit" : "is it running there?");
		return;
	}
	if (s->cli != NULL && grpc_client_connected(s->cli))
		s->round_answered = true;
	if (choose_server(s, status, hint) != SERVER_MOVE_ROUND)
		ms = server_jitter(SERVER_BACKOFF_MIN_MS);
	else {
		ms = server_backoff_next(&s->backoff_ms, SERVER_BACKOFF_MAX_MS,
		    s->round_answered);
		s->round_answered = false;
	}
	if (now + ms > s->trying_since + limit)
		ms = (uint32_t)(s->trying_since + limit - now);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	s->state = SESSION_RETRY;
	evtimer_add(s->retry_ev, &tv);
}

/* rdzvd said no to a new Join: nothing to retry. */
static void
refused(struct session *s, int status, const char *msg)
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
	end(s, code, "rdzvd refused to join job %s: %s (%s)", s->opts->id,
	    msg != NULL ? msg : "no reason given", grpc_status_name(status));
}

/* ------------------------------------------------------------ Health */

static void
check_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Grpc__Health__V1__HealthCheckResponse *r =
	    (const Grpc__Health__V1__HealthCheckResponse *)msg;
	struct session *s = arg;

	s->check_serving = r->status ==
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
}

static void
check_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct session *s = arg;
	const char *hint = grpc_ccall_trailer(cc, SERVER_LEADER_TRAILER);

	s->call = NULL;
	if (s->quitting || s->state == SESSION_ENDED)
		return;
	if (status == GRPC_OK && !s->check_serving && hint != NULL) {
		failed_attempt(s, GRPC_UNAVAILABLE, "rdzvd is a standby",
		    hint);
		return;
	}
	if (status == GRPC_OK && !s->check_serving) {
		/*
		 * A standby (SPEC §14) or a daemon shutting down. The Join
		 * goes there anyway, on the connection just made: a standby
		 * refuses it naming its leader, a daemon going away
		 * refuses it too, and either refusal moves on.
		 */
		log_debug("rdzvd at %s is not serving; asking it to join "
		    "anyway, for its leader hint", session_server(s));
	} else if (status == GRPC_UNIMPLEMENTED || status == GRPC_NOT_FOUND) {
		refused(s, GRPC_UNIMPLEMENTED, msg);
		return;
	} else if (status != GRPC_OK) {
		failed_attempt(s, status, msg, hint);
		return;
	}
	join_or_wait(s);
}

static void
connect_check(struct session *s)
{
	Grpc__Health__V1__HealthCheckRequest req =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;

	s->state = SESSION_CONNECT;
	req.service = (char *)"rdzv.v1.Rendezvous";
	s->check_serving = false;
	s->call = grpc_client_call(s->cli, "/grpc.health.v1.Health/Check",
	    &req.base, &grpc__health__v1__health_check_response__descriptor,
	    s->opts->client.connect_timeout_ms + CHECK_TIMEOUT_MS, check_msg,
	    check_done, s);
	if (s->call == NULL)
		failed_attempt(s, GRPC_INTERNAL, "cannot start a call", NULL);
}

/* ------------------------------------------------------ a spare's wait */

/*
 * A node ranked past max_nodes in a larger Slurm allocation (sched.c: the
 * fifth node of `--nodes 5` with `--nnodes 4`) is the allocation's spare.
 * It lets the others form the first round before it joins, so that which
 * node is the spare follows node order rather than whose Join came last.
 * It watches the job (Control/Watch: no polling) until a round runs or the
 * job has ended, for the last-call timeout at most (should a node of the
 * round be slow or missing, this one takes its place then), and joins.
 */
static bool
spare_by_order(const struct session *s)
{
	const struct agent_opts *o = s->opts;

	return s->id_len == 0 && !s->spare_done && !s->ever_joined &&
	    o->spare_by_order;
}

static void
spare_join(struct session *s, const char *why)
{
	struct grpc_ccall *cc = s->call;

	s->spare_done = true;
	if (s->spare_ev != NULL)
		event_del(s->spare_ev);
	s->call = NULL;
	if (cc != NULL)
		grpc_ccall_cancel(cc);
	log_info("node rank hint %u is past max_nodes %u: joining as the "
	    "spare by node order after %s", s->opts->node_rank,
	    s->opts->max_nodes, why);
	send_join(s);
}

static void
spare_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__WatchEvent *ev = (const Rdzv__V1__WatchEvent *)msg;
	struct session *s = arg;
	const Rdzv__V1__Job *j = ev->job;

	if (s->call != cc || j == NULL)
		return;
	if (j->state == RDZV__V1__JOB_STATE__JOB_STATE_RUNNING)
		spare_join(s, "the others formed the round");
	else if (j->state != RDZV__V1__JOB_STATE__JOB_STATE_WAITING)
		spare_join(s, "the job stopped forming rounds");
}

static void
spare_done_cb(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct session *s = arg;

	if (s->call != cc)
		return;		/* spare_join() cancelled it */
	s->call = NULL;
	if (s->quitting || s->state == SESSION_ENDED)
		return;
	log_debug("watching job %s before joining: %s", s->opts->id,
	    msg != NULL ? msg : grpc_status_name(status));
	spare_join(s, "its watch ended");
}

static void
spare_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->quitting || s->state == SESSION_ENDED)
		return;
	spare_join(s, "the last-call timeout");
}

static void
join_or_wait(struct session *s)
{
	Rdzv__V1__WatchRequest req = RDZV__V1__WATCH_REQUEST__INIT;
	uint32_t ms = s->opts->last_call_ms > 0 ? s->opts->last_call_ms :
	    30000;
	struct timeval tv = { (time_t)(ms / 1000),
			      (suseconds_t)(ms % 1000) * 1000 };

	if (!spare_by_order(s)) {
		send_join(s);
		return;
	}
	evtimer_add(s->spare_ev, &tv);
	req.rdzv_id = (char *)s->opts->id;
	s->state = SESSION_JOIN;
	s->call = grpc_client_call(s->cli, "/rdzv.v1.Control/Watch",
	    &req.base, &rdzv__v1__watch_event__descriptor, 0, spare_msg,
	    spare_done_cb, s);
	if (s->call == NULL) {
		spare_join(s, "no watch");
		return;
	}
	log_info("node rank hint %u is past max_nodes %u: this node is the "
	    "spare by node order; it joins once the others formed the round, "
	    "or in %u s at most", s->opts->node_rank, s->opts->max_nodes,
	    ms / 1000);
}

/* ------------------------------------------------------------- Join */

/*
 * A join as a new node starts: its token, kept for every retry of this
 * join until rdzvd accepts it, lets rdzvd answer a retry with the node
 * the first attempt made (a commit slower than our keepalive) instead of
 * making a second one.
 */
static void
new_join_token(struct session *s)
{
	size_t got = 0;

	while (got < sizeof(s->join_token)) {
		ssize_t n = getrandom(s->join_token + got,
		    sizeof(s->join_token) - got, 0);
		if (n < 0 && errno != EINTR)
			fatal("getrandom for a join token");
		if (n > 0)
			got += (size_t)n;
	}
}

static void
on_accepted(struct session *s, const Rdzv__V1__Accepted *acc)
{
	const Rdzv__V1__JobSettings *js = acc->settings;
	const char *id = s->opts->id;

	if (acc->session_id.len == 0 || acc->session_id.len >
	    sizeof(s->id)) {
		log_warnx("rdzvd sent a session id of %zu bytes; ignored",
		    acc->session_id.len);
	} else {
		memcpy(s->id, acc->session_id.data, acc->session_id.len);
		s->id_len = acc->session_id.len;
	}
	if (acc->resumed)
		log_info("resumed as node id %llu of job %s on rdzvd at %s",
		    (unsigned long long)acc->node_id, id, session_server(s));
	else
		log_info("joined job %s as node id %llu (attempt %u) on "
		    "rdzvd at %s", id, (unsigned long long)acc->node_id,
		    acc->attempt, session_server(s));
	if (js != NULL)
		log_debug("job %s: nodes %u:%u, last call %u ms, join timeout "
		    "%u ms, rejoin timeout %u ms, max restarts %u, lease %u "
		    "ms, reconnect grace %u ms", id, js->min_nodes,
		    js->max_nodes, js->last_call_timeout_ms,
		    js->join_timeout_ms, js->rejoin_timeout_ms,
		    js->max_restarts, js->lease_ttl_ms,
		    js->reconnect_grace_ms);
	/* The job's hang timeout wins over ours, as its other settings do. */
	if (js != NULL) {
		if (s->opts->hang_timeout_ms != 0 && !s->hang_warned &&
		    js->hang_timeout_ms != s->opts->hang_timeout_ms) {
			log_warnx("job %s: the job's hang timeout is %.1f s "
			    "(0: off), not the %.1f s of --hang-timeout: the "
			    "job's settings win", id,
			    js->hang_timeout_ms / 1000.0,
			    s->opts->hang_timeout_ms / 1000.0);
			s->hang_warned = true;
		}
		s->hang_timeout_ms = js->hang_timeout_ms;
		s->lease_ttl_ms = js->lease_ttl_ms;
		s->job_restart_inproc = js->restart ==
		    RDZV__V1__RESTART_MODE__RESTART_MODE_IN_PROCESS;
		/* rdzvd bounds it; a longer one is not cut into another. */
		if (js->preload != NULL &&
		    strlen(js->preload) >= sizeof(s->job_preload)) {
			log_warnx("job %s: rdzvd sent a preload of %zu bytes; "
			    "ignored", id, strlen(js->preload));
			s->job_preload[0] = '\0';
		} else {
			snprintf(s->job_preload, sizeof(s->job_preload), "%s",
			    js->preload != NULL ? js->preload : "");
		}
	}
	s->node_id = acc->node_id;
	s->state = SESSION_JOINED;
	s->ever_joined = true;
	server_list_ok(&s->servers);
	s->trying_since = 0;
	s->backoff_ms = 0;
	s->ev.joined(s->ev.arg);
}

/* What one event of the Join stream means. The stream's callback below
 * is its caller; tests/fuzz/fuzz_agent.c hands it events directly. */
void
session_event(struct session *s, const Rdzv__V1__JoinEvent *ev)
{
	const char *id = s->opts->id;

	if (s->state == SESSION_ENDED)
		return;
	switch (ev->event_case) {
	case RDZV__V1__JOIN_EVENT__EVENT_ACCEPTED:
		on_accepted(s, ev->accepted);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_WAITING:
		log_info("job %s: waiting as %s: %u of %u:%u node%s%s%s", id,
		    node_state_name(ev->waiting->state),
		    ev->waiting->participants, ev->waiting->min_nodes,
		    ev->waiting->max_nodes, plural(ev->waiting->max_nodes),
		    *ev->waiting->reason ? "; " : "",
		    ev->waiting->reason);
		waiting_news(s, ev->waiting);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_ASSIGNMENT:
		waiting_over(s);
		s->ev.assignment(s->ev.arg, ev->assignment);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_STOP:
		s->ev.stop(s->ev.arg, ev->stop->generation, ev->stop->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_CLOSED:
		end(s, AGENT_EXIT_OK, "job %s closed: %s", id,
		    ev->closed->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_FAILED:
		end(s, AGENT_EXIT_FAILED, "job %s failed: %s", id,
		    ev->failed->reason);
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_EVICTED:
		end(s, AGENT_EXIT_REFUSED, "evicted from job %s: %s", id,
		    ev->evicted->reason);
		break;
	default:
		log_debug("job %s: unknown event %d ignored", id,
		    (int)ev->event_case);
		break;
	}
}

static void
join_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	session_event(arg, (const Rdzv__V1__JoinEvent *)msg);
}

static void
join_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct session *s = arg;
	bool joined = s->state == SESSION_JOINED;
	bool resuming = s->id_len > 0;
	uint64_t node_id = s->node_id;
	const char *hint = grpc_ccall_trailer(cc, SERVER_LEADER_TRAILER);

	s->call = NULL;
	if (s->quitting || s->state == SESSION_ENDED)
		return;
	if (status == GRPC_OK) {
		/* Ended without closed/failed/evicted: resume. */
		failed_attempt(s, GRPC_UNAVAILABLE, "rdzvd ended the stream",
		    hint);
		return;
	}
	if (resuming && (status == GRPC_NOT_FOUND ||
	    status == GRPC_FAILED_PRECONDITION)) {
		/* A new node from now on. */
		s->id_len = 0;
		s->node_id = 0;
		new_join_token(s);
		s->ev.resume_refused(s->ev.arg, node_id, msg);
		connect_check(s);
		return;
	}
	/* A limit rdzvd has reached (the jobs of an identity, which every
	 * TCP client shares under `auth none`; its connections) is a busy
	 * server, not a refusal: retried as any other, its words kept. */
	if (!joined && !grpc_status_transient(status) &&
	    status != GRPC_RESOURCE_EXHAUSTED) {
		refused(s, status, msg);
		return;
	}
	failed_attempt(s, status, msg, hint);
}

static void
send_join(struct session *s)
{
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;
	const struct agent_opts *o = s->opts;
	const struct offer *of = s->offer;
	struct gpucheck_pb gpb = { 0 };
	const char *addr;

	req.rdzv_id = (char *)o->id;
	if (s->id_len > 0) {
		req.session_id.data = s->id;
		req.session_id.len = s->id_len;
		req.generation = s->ev.resume_generation(s->ev.arg);
		log_debug("resuming node %llu with generation %llu",
		    (unsigned long long)s->node_id,
		    (unsigned long long)req.generation);
	} else {
		req.min_nodes = o->min_nodes;
		req.max_nodes = o->max_nodes;
		req.last_call_timeout_ms = o->last_call_ms;
		req.join_timeout_ms = o->join_timeout_ms;
		req.max_restarts = o->max_restarts;
		req.lease_ttl_ms = o->lease_ttl_ms;
		req.reconnect_grace_ms = o->reconnect_grace_ms;
		req.has_rejoin_timeout = o->has_rejoin_timeout;
		req.rejoin_timeout_ms = o->rejoin_timeout_ms;
		req.hang_timeout_ms = o->hang_timeout_ms;
		req.rank_policy = (Rdzv__V1__RankPolicy)o->rank_policy;
		if (o->restart_inproc)
			req.restart =
			    RDZV__V1__RESTART_MODE__RESTART_MODE_IN_PROCESS;
		/* Our --preload is the job's if this join creates it. */
		if (o->preload != NULL)
			req.preload = (char *)o->preload;
		req.hostname = (char *)of->hostname;
		/* Where rdzvd sees us from is the interface that reaches
		 * the cluster; over a unix socket, our host name. */
		addr = o->advertise_addr;
		if (addr == NULL && (addr = grpc_client_local_addr(s->cli)) !=
		    NULL && strcmp(addr, "unix") == 0)
			addr = of->machine;
		req.advertise_addr = (char *)(addr != NULL ? addr : "");
		req.master_port = of->master_port;
		req.nproc = of->nproc;
		req.has_rank_hint = o->has_node_rank;
		req.rank_hint = o->node_rank;
		req.attempt = o->attempt;
		req.allocation_nodes = o->allocation_nodes;
		req.join_token.data = s->join_token;
		req.join_token.len = sizeof(s->join_token);
		req.role = (char *)o->role;
		req.agent_version = (char *)RDZV_VERSION;
		if (gpucheck_pb_new(of->gpus, &gpb) != 0)
			fatalx("out of memory");
		req.n_gpus = gpb.n;
		req.gpus = gpb.ptrs;
		log_debug("joining job %s as %s (%s), %u worker%s, master "
		    "port %u", o->id, of->hostname, req.advertise_addr,
		    of->nproc, plural(of->nproc), of->master_port);
	}
	s->state = SESSION_JOIN;
	s->call = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Join",
	    &req.base, &rdzv__v1__join_event__descriptor, 0, join_msg,
	    join_done, s);
	gpucheck_pb_free(&gpb);
	if (s->call == NULL)
		failed_attempt(s, GRPC_INTERNAL, "cannot start the Join call",
		    NULL);
	else if (s->id_len == 0 && s->check_serving)
		s->join_sent = true;
}

/* ----------------------------------------------------------- lifetime */

static void
on_closed(struct grpc_client *cli, int err, const char *reason, void *arg)
{
	struct session *s = arg;

	s->close_err = err;
	log_debug("connection to rdzvd closed: %s", reason);
}

/* The session joins with |offer|'s values and tells the agent what
 * happens through |ev|. */
int
session_init(struct session *s, struct event_base *base,
    const struct agent_opts *opts, const struct offer *offer,
    const struct session_events *ev, char *err, size_t errlen)
{
	s->opts = opts;
	s->offer = offer;
	s->ev = *ev;
	if (client_opts_servers(&opts->client, &s->servers, err, errlen) != 0 ||
	    client_opts_grpc(&opts->client, &s->gopts, &s->tls, err,
	    errlen) != 0)
		return -1;
	/* Our PINGs find a dead rdzvd or network even while nothing is
	 * said; rdzvd accepts them at any rate. Three to a lease at least,
	 * so that an answered one shows we can still be heard (fencing,
	 * agent.c). */
	s->gopts.keepalive_ms = 5000;
	if (opts->lease_ttl_ms != 0 && opts->lease_ttl_ms / 3 < 5000)
		s->gopts.keepalive_ms = opts->lease_ttl_ms / 3 < 500 ? 500 :
		    opts->lease_ttl_ms / 3;
	s->cli = grpc_client_new(base, &s->gopts, on_closed, s);
	s->retry_ev = evtimer_new(base, retry_cb, s);
	s->spare_ev = evtimer_new(base, spare_timeout_cb, s);
	if (s->cli == NULL || s->retry_ev == NULL || s->spare_ev == NULL ||
	    waiting_init(s, base) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void
session_start(struct session *s)
{
	s->trying_since = 0;
	s->backoff_ms = 0;
	new_join_token(s);
	connect_check(s);
}

/* The agent is exiting: no more attempts, and what is still in flight
 * ends without consequence. */
void
session_quit(struct session *s)
{
	s->quitting = true;
	if (s->retry_ev != NULL)
		event_del(s->retry_ev);
	if (s->spare_ev != NULL)
		event_del(s->spare_ev);
	waiting_over(s);
}

/* Cancels what is in flight (its callbacks find the session ended) and
 * frees the client. */
void
session_free(struct session *s)
{
	s->quitting = true;
	s->state = SESSION_ENDED;
	if (s->retry_ev != NULL)
		event_free(s->retry_ev);
	s->retry_ev = NULL;
	if (s->spare_ev != NULL)
		event_free(s->spare_ev);
	s->spare_ev = NULL;
	waiting_free(s);
	grpc_client_free(s->cli);
	s->cli = NULL;
	tls_free(s->tls);
	s->tls = NULL;
}
