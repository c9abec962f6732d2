/*
 * Talking to rdzvd: one unary call per command, errors turned into the exit
 * statuses of SPEC §8 and into one line on stderr that names the server and
 * the cause, and says what to check when rdzvd cannot be reached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pb_strings.h"
#include "rdzvctl.h"
#include "text.h"

/* How long a call may take once connected; the connect timeout comes on
 * top. rdzvd answers Control calls from memory, so this is generous. */
#define CALL_TIMEOUT_MS		10000

/* What RDZVCTL_TEST_NOW_MS makes every instant rdzvd sent: this long ago. */
#define FIXED_AGO_MS		90000

int
ctl_exit_for(int status)
{
	switch (status) {
	case GRPC_OK:
		return CTL_EXIT_OK;
	case GRPC_NOT_FOUND:
		return CTL_EXIT_NOT_FOUND;
	case GRPC_PERMISSION_DENIED:
	case GRPC_UNAUTHENTICATED:
		return CTL_EXIT_DENIED;
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
		return CTL_EXIT_UNAVAILABLE;
	case GRPC_INVALID_ARGUMENT:
		return CTL_EXIT_USAGE;
	default:
		return CTL_EXIT_ERROR;
	}
}

/* A connection that never came up: tell the operator where to look. */
static const char *
hint_for(int status, const char *msg)
{
	if (status == GRPC_DEADLINE_EXCEEDED)
		return " (is rdzvd overloaded or stopped? --server)";
	/* rdzvd's own munged is down: rdzvd said so, naming it. */
	if (status != GRPC_UNAVAILABLE || strstr(msg, "munged") != NULL)
		return "";
	/* A typo in the name, not a stopped rdzvd. */
	if (strstr(msg, "cannot resolve") != NULL)
		return " (the host name does not resolve: check --server)";
	if (strstr(msg, "refused") != NULL ||
	    strstr(msg, "No such file") != NULL ||
	    strstr(msg, "no such file") != NULL ||
	    strstr(msg, "timed out") != NULL ||
	    strstr(msg, "unreachable") != NULL)
		return " (is rdzvd running? --server)";
	return "";
}

int
ctl_fail(struct ctl *ctl, int status, const char *message)
{
	const char	*msg = message != NULL && *message != '\0' ? message :
			    grpc_status_name(status);
	size_t		 n = strlen(ctl->server);
	char		 buf[1024];

	if (status == GRPC_DEADLINE_EXCEEDED) {
		snprintf(buf, sizeof(buf), "no answer within %u ms",
		    ctl->client.connect_timeout_ms + CALL_TIMEOUT_MS);
		msg = buf;
	} else {
		/* The message may carry what a client sent. */
		vis_buf(buf, sizeof(buf), msg);
		msg = buf;
	}
	/* The transport's messages already start with the server. */
	if (n > 0 && strncmp(msg, ctl->server, n) == 0 && msg[n] == ':')
		fprintf(stderr, "rdzvctl: %s%s\n", msg, hint_for(status, msg));
	else
		fprintf(stderr, "rdzvctl: %s: %s%s\n", ctl->server, msg,
		    hint_for(status, msg));
	return ctl_exit_for(status);
}

int
ctl_client_opts(struct ctl *ctl, struct grpc_client_opts *o,
    struct tls_ctx **tls)
{
	const struct server_entry *cur;
	char	err[512];

	if (client_opts_grpc(&ctl->client, o, tls, err, sizeof(err)) != 0 ||
	    (ctl->servers.n == 0 && client_opts_servers(&ctl->client,
	    &ctl->servers, err, sizeof(err)) != 0)) {
		tls_free(*tls);
		*tls = NULL;
		fprintf(stderr, "rdzvctl: %s\n", err);
		return CTL_EXIT_USAGE;
	}
	cur = server_list_current(&ctl->servers);
	o->server = cur->ep;
	snprintf(ctl->server, sizeof(ctl->server), "%s", cur->name);
	return CTL_EXIT_OK;
}

/* A server's failure, kept to be told if every server fails. */
struct failure {
	int	 status;
	char	 server[300];
	char	*msg;
};

int
ctl_call(struct ctl *ctl, const char *method, const ProtobufCMessage *req,
    const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply)
{
	struct grpc_client_opts	 o;
	struct tls_ctx		*tls = NULL;
	struct failure		 failed[2 * SERVER_LIST_MAX];
	enum server_move	 move = SERVER_MOVE_ROUND;
	char			 path[128], *msg = NULL, *hint = NULL;
	int			 rc, status;
	size_t			 n_failed = 0;

	*reply = NULL;
	if ((rc = ctl_client_opts(ctl, &o, &tls)) != CTL_EXIT_OK)
		return rc;
	snprintf(path, sizeof(path), "/rdzv.v1.Control/%s", method);
	server_list_ok(&ctl->servers);
	/* Each server fails at most twice a round (once with a hint): the
	 * round's end stops the loop before |failed| is full. */
	for (;;) {
		o.server = server_list_current(&ctl->servers)->ep;
		snprintf(ctl->server, sizeof(ctl->server), "%s",
		    server_list_current(&ctl->servers)->name);
		status = grpc_unary_sync_trailer(&o, path, req, reply_desc,
		    o.connect_timeout_ms + CALL_TIMEOUT_MS, reply, &msg,
		    SERVER_LEADER_TRAILER, &hint);
		if (status == GRPC_OK || !server_list_should_move(status) ||
		    n_failed == sizeof(failed) / sizeof(failed[0]))
			break;
		failed[n_failed].status = status;
		snprintf(failed[n_failed].server, sizeof(failed[0].server),
		    "%s", ctl->server);
		failed[n_failed++].msg = msg;
		msg = NULL;
		move = server_list_failed(&ctl->servers, hint);
		if (move == SERVER_MOVE_HINT)
			log_info("following leader hint %s from %s",
			    server_list_current(&ctl->servers)->name,
			    ctl->server);
		free(hint);
		hint = NULL;
		if (move == SERVER_MOVE_ROUND)
			break;
	}
	tls_free(tls);
	free(hint);
	if (status == GRPC_OK) {
		server_list_ok(&ctl->servers);
		rc = CTL_EXIT_OK;
		ctl_received(ctl, *reply);
	} else if (move == SERVER_MOVE_ROUND && n_failed > 0) {
		/* Every server failed: each says why. */
		for (size_t i = 0; i < n_failed; i++) {
			snprintf(ctl->server, sizeof(ctl->server), "%s",
			    failed[i].server);
			rc = ctl_fail(ctl, failed[i].status, failed[i].msg);
		}
	} else if (status == GRPC_NOT_FOUND && ctl->quiet_not_found)
		rc = CTL_EXIT_NOT_FOUND;
	else
		rc = ctl_fail(ctl, status, msg);
	for (size_t i = 0; i < n_failed; i++)
		free(failed[i].msg);
	free(msg);
	return rc;
}

int
ctl_get_job(struct ctl *ctl, const char *rdzv_id, uint32_t events,
    Rdzv__V1__Job **job)
{
	Rdzv__V1__GetJobRequest	 req = RDZV__V1__GET_JOB_REQUEST__INIT;

	req.rdzv_id = (char *)rdzv_id;
	req.events = events;
	return ctl_call(ctl, "GetJob", &req.base, &rdzv__v1__job__descriptor,
	    (ProtobufCMessage **)job);
}

/* ------------------------------------------------------------ test clock */

static int64_t
fixed(const struct ctl *ctl, int64_t t)
{
	return t != 0 ? ctl->now_ms - FIXED_AGO_MS : 0;
}

static void
fix_job(struct ctl *ctl, Rdzv__V1__Job *j)
{
	if (j == NULL)
		return;
	j->created_unix_ms = fixed(ctl, j->created_unix_ms);
	j->updated_unix_ms = fixed(ctl, j->updated_unix_ms);
	j->ended_unix_ms = fixed(ctl, j->ended_unix_ms);
	/* A deadline shows as if it had just been armed. */
	if (j->last_call_in_ms >= 0 && j->settings != NULL)
		j->last_call_in_ms = j->settings->last_call_timeout_ms;
	if (j->join_timeout_in_ms >= 0 && j->settings != NULL)
		j->join_timeout_in_ms = j->settings->join_timeout_ms;
	for (size_t i = 0; i < j->n_nodes; i++) {
		j->nodes[i]->last_seen_unix_ms = fixed(ctl,
		    j->nodes[i]->last_seen_unix_ms);
		j->nodes[i]->joined_unix_ms = fixed(ctl,
		    j->nodes[i]->joined_unix_ms);
	}
	for (size_t i = 0; i < j->n_events; i++)
		j->events[i]->time_unix_ms = fixed(ctl,
		    j->events[i]->time_unix_ms);
}

/*
 * Golden tests cannot depend on when they ran: every instant becomes "90 s
 * before RDZVCTL_TEST_NOW_MS" and every remaining time its full timeout.
 * Applied to what rdzvd sent, so all the formatting code still runs.
 */
static void
fix_times(struct ctl *ctl, ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d;

	if (!ctl->fixed_times || m == NULL)
		return;
	d = m->descriptor;
	if (d == &rdzv__v1__job__descriptor) {
		fix_job(ctl, (Rdzv__V1__Job *)m);
	} else if (d == &rdzv__v1__watch_event__descriptor) {
		fix_job(ctl, ((Rdzv__V1__WatchEvent *)m)->job);
	} else if (d == &rdzv__v1__list_jobs_response__descriptor) {
		Rdzv__V1__ListJobsResponse *r = (Rdzv__V1__ListJobsResponse *)m;
		for (size_t i = 0; i < r->n_jobs; i++)
			fix_job(ctl, r->jobs[i]);
	} else if (d == &rdzv__v1__list_events_response__descriptor) {
		Rdzv__V1__ListEventsResponse *r =
		    (Rdzv__V1__ListEventsResponse *)m;
		for (size_t i = 0; i < r->n_events; i++)
			r->events[i]->time_unix_ms = fixed(ctl,
			    r->events[i]->time_unix_ms);
	} else if (d == &rdzv__v1__list_hosts_response__descriptor) {
		Rdzv__V1__ListHostsResponse *r = (Rdzv__V1__ListHostsResponse *)m;
		for (size_t i = 0; i < r->n_hosts; i++) {
			r->hosts[i]->since_unix_ms = fixed(ctl,
			    r->hosts[i]->since_unix_ms);
			r->hosts[i]->updated_unix_ms = fixed(ctl,
			    r->hosts[i]->updated_unix_ms);
		}
	} else if (d == &rdzv__v1__host__descriptor) {
		Rdzv__V1__Host *h = (Rdzv__V1__Host *)m;
		h->since_unix_ms = fixed(ctl, h->since_unix_ms);
		h->updated_unix_ms = fixed(ctl, h->updated_unix_ms);
	} else if (d == &rdzv__v1__server_info_response__descriptor) {
		Rdzv__V1__ServerInfoResponse *r =
		    (Rdzv__V1__ServerInfoResponse *)m;
		r->uptime_ms = FIXED_AGO_MS;
		r->started_unix_ms = fixed(ctl, r->started_unix_ms);
	}
}

/* ------------------------------------------------------ text from rdzvd */

/*
 * A string of a reply, escaped for a terminal: a hostname or a reason is
 * whatever a client sent, and "\e]0;...\a" or a "\n" in one must not
 * retitle the operator's window or forge a line. A string that needs no
 * escape is left alone (protobuf-c's empty default is static).
 */
static int
vis_string(char **s, const struct pb_path *path, void *arg)
{
	char	*e;

	if ((e = vis_dup(*s)) == NULL)
		fatal("escaping a reply");
	if (strcmp(e, *s) == 0) {
		free(e);
		return 0;
	}
	free(*s);
	*s = e;
	return 0;
}

void
ctl_received(struct ctl *ctl, ProtobufCMessage *m)
{
	if (m == NULL)
		return;
	fix_times(ctl, m);
	if (ctl->output != CTL_OUTPUT_JSON)
		pb_strings_walk(m, vis_string, NULL);
}

Rdzv__V1__Job *
ctl_job_copy(const Rdzv__V1__Job *j)
{
	size_t		 len = rdzv__v1__job__get_packed_size(j);
	uint8_t		*buf = xmalloc(len);
	Rdzv__V1__Job	*copy;

	rdzv__v1__job__pack(j, buf);
	if ((copy = rdzv__v1__job__unpack(NULL, len, buf)) == NULL)
		fatalx("cannot copy job %s", j->rdzv_id);
	free(buf);
	return copy;
}

struct grpc_ccall *
ctl_watch_start(struct grpc_client *cli, const char *rdzv_id, bool all,
    grpc_msg_fn on_msg, grpc_done_fn on_done, void *arg)
{
	Rdzv__V1__WatchRequest	 req = RDZV__V1__WATCH_REQUEST__INIT;
	struct grpc_ccall	*cc;

	req.rdzv_id = (char *)(rdzv_id != NULL ? rdzv_id : "");
	req.all = all;
	cc = grpc_client_call(cli, "/rdzv.v1.Control/Watch", &req.base,
	    &rdzv__v1__watch_event__descriptor, 0, on_msg, on_done, arg);
	if (cc == NULL)
		fatal("cannot start rdzv.v1.Control/Watch");
	return cc;
}

void
ctl_watch_end(struct grpc_ccall **ccp, struct event_base *base)
{
	struct grpc_ccall	*cc = *ccp;

	/* Cleared first: the done callback that cancelling runs sees that
	 * its call was ended on purpose. */
	if (cc != NULL) {
		*ccp = NULL;
		grpc_ccall_cancel(cc);
	}
	if (base != NULL)
		event_base_loopbreak(base);
}
