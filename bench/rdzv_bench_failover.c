/*
 * rdzv-bench --failover: the failover figure of SPEC §14. The nodes join
 * the leader of the replicas given (--server a,b); once every node holds
 * its first assignment, that leader is killed (SIGKILL: its pid from
 * ServerInfo, so it runs on this host) and every node resumes its session
 * as rdzv-agent does: the leader a standby names in its rdzv-leader trailer,
 * else the next replica (client/common/servers.h), after a short jittered
 * pause; once every replica failed, after the agent's backoff
 * (server_backoff_next in client/common/servers.h: 100 ms doubling up to
 * 5 s, at most 1 s while a replica answers; --max-backoff shows what
 * another bound would give). A node has resumed
 * when a replica accepts it as a resume and tells it the generation it
 * held. Measured: from the kill to each node's resume.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "clock.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

#define INFO_PATH	"/rdzv.v1.Control/ServerInfo"
#define JOIN_PATH	"/rdzv.v1.Rendezvous/Join"

int
failover_prepare(struct bench *b, const char *list, char *err,
    size_t errlen)
{
	Rdzv__V1__ServerInfoRequest req = RDZV__V1__SERVER_INFO_REQUEST__INIT;
	Rdzv__V1__ServerInfoResponse *r;
	char *msg = NULL;
	int status;

	if (server_list_parse(&b->replicas, list, RDZV_DEFAULT_PORT, err,
	    errlen) != 0)
		return -1;
	if (b->replicas.n < 2) {
		snprintf(err, errlen, "--failover needs the replicas: --server "
		    "a,b");
		return -1;
	}
	status = grpc_unary_sync(&b->opts[0], INFO_PATH, &req.base,
	    &rdzv__v1__server_info_response__descriptor, 10000,
	    (ProtobufCMessage **)&r, &msg);
	if (status != GRPC_OK) {
		snprintf(err, errlen, "ServerInfo of the leader: %s (%s)",
		    msg != NULL ? msg : "", grpc_status_name(status));
		free(msg);
		return -1;
	}
	b->leader_pid = (pid_t)r->pid;
	snprintf(b->leader, sizeof(b->leader), "%s", r->advertise);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

static void
retry_in(struct agent *a, uint32_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(a->retry_ev, &tv);
}

static void
failover_join_ended(struct agent *a, int status, const char *hint)
{
	struct bench *b = a->job->b;

	if (a->resumed) {
		bench_fail(b, "%s node %d: Join ended after the resume: %s",
		    a->job->rdzv_id, a->idx, grpc_status_name(status));
		return;
	}
	if (!server_list_should_move(status)) {
		bench_fail(b, "%s node %d: resume refused: %s",
		    a->job->rdzv_id, a->idx, grpc_status_name(status));
		return;
	}
	if (a->cli != NULL && grpc_client_connected(a->cli))
		a->round_answered = 1;
	if (server_list_failed(a->sl, hint) != SERVER_MOVE_ROUND) {
		retry_in(a, server_jitter(SERVER_BACKOFF_MIN_MS));
		return;
	}
	retry_in(a, server_backoff_next(&a->backoff_ms, b->max_backoff_ms,
	    a->round_answered));
	a->round_answered = 0;
}

/* The accepted event of a resume: the same node, told it resumed. */
static void
failover_accepted(struct agent *a, const Rdzv__V1__Accepted *acc)
{
	struct bench *b = a->job->b;

	if (!acc->resumed || acc->session_id.len != a->session_len ||
	    memcmp(acc->session_id.data, a->session, a->session_len) != 0) {
		bench_fail(b, "%s node %d: accepted on %s as a new node, not "
		    "a resume", a->job->rdzv_id, a->idx,
		    server_list_current(a->sl)->name);
		return;
	}
	server_list_ok(a->sl);
	a->accepted_again = 1;
}

/* The node's place after the resume: the generation it held. */
static void
failover_assignment(struct agent *a, const Rdzv__V1__Assignment *as)
{
	struct bench *b = a->job->b;

	if (!a->accepted_again || a->resumed)
		return;
	if (as->generation != a->generation) {
		bench_fail(b, "%s node %d: generation %" PRIu64 " after the "
		    "failover, %" PRIu64 " before", a->job->rdzv_id, a->idx,
		    as->generation, a->generation);
		return;
	}
	a->resumed = 1;
	a->t_resumed = mono_us();
	if (b->n_resumed++ == 0)
		b->t_first_resumed = a->t_resumed;
	if (b->n_resumed == b->total) {
		b->t_last_resumed = a->t_resumed;
		b->phase = PHASE_DONE;
		event_base_loopbreak(b->base);
	}
}

/* A try: a new connection to the current replica, a Join that resumes. */
static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->job->b;
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;
	struct grpc_client_opts o = b->opts[0];

	if (b->phase != PHASE_FAILOVER)
		return;
	grpc_client_free(a->cli);
	o.server = server_list_current(a->sl)->ep;
	if ((a->cli = grpc_client_new(b->base, &o, NULL, NULL)) == NULL) {
		bench_fail(b, "node %d: cannot make a client: %s", a->idx,
		    strerror(errno));
		return;
	}
	req.rdzv_id = a->job->rdzv_id;
	req.session_id.data = a->session;
	req.session_id.len = a->session_len;
	req.generation = a->generation;
	req.hostname = a->hostname;
	req.agent_version = "rdzv-bench";
	b->resume_tries++;
	a->join = grpc_client_call(a->cli, JOIN_PATH, &req.base,
	    &rdzv__v1__join_event__descriptor, 0, bench_join_msg,
	    bench_join_done, a);
	if (a->join == NULL)
		bench_fail(b, "%s node %d: cannot start Join: %s",
		    a->job->rdzv_id, a->idx, strerror(errno));
}

/* Every node holds its first assignment: kill the leader. */
static void
kill_leader_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->phase = PHASE_FAILOVER;
	b->t_failover = mono_us();
	if (kill(b->leader_pid, SIGKILL) != 0)
		bench_fail(b, "cannot kill the leader (pid %ld): %s",
		    (long)b->leader_pid, strerror(errno));
}

static int
failover_setup(struct bench *b)
{
	if ((b->failover_ev = event_new(b->base, -1, 0, kill_leader_cb,
	    b)) == NULL)
		return -ENOMEM;
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++) {
			struct agent *a = &b->jobv[j].agents[i];

			a->sl = malloc(sizeof(*a->sl));
			a->retry_ev = evtimer_new(b->base, retry_cb, a);
			if (a->sl == NULL || a->retry_ev == NULL)
				return -ENOMEM;
			*a->sl = b->replicas;
			/* The leader, where the nodes joined, is the
			 * current one; its failure moves them on. */
			while (strcmp(server_list_current(a->sl)->name,
			    b->leader) != 0 && server_list_failed(a->sl,
			    NULL) != SERVER_MOVE_ROUND)
				;
			server_list_ok(a->sl);
		}
	return 0;
}

static void
failover_start(struct bench *b)
{
	event_active(b->failover_ev, EV_TIMEOUT, 0);
}

static void
failover_teardown(struct bench *b)
{
	for (int j = 0; b->jobv != NULL && j < b->jobs; j++)
		for (int i = 0; b->jobv[j].agents != NULL && i < b->nodes;
		    i++) {
			struct agent *a = &b->jobv[j].agents[i];

			if (a->retry_ev != NULL)
				event_free(a->retry_ev);
			free(a->sl);
		}
	if (b->failover_ev != NULL)
		event_free(b->failover_ev);
}

void
failover_report(const struct bench *b)
{
	uint64_t *t;
	size_t n = 0;

	printf("failover: leader killed:  pid %ld (%s)\n",
	    (long)b->leader_pid, b->leader);
	printf("failover: nodes resumed:  %d\n", b->n_resumed);
	printf("failover: resume tries:   %" PRIu64 " (backoff up to %u ms)\n",
	    b->resume_tries, b->max_backoff_ms);
	printf("failover: kill to first resume: %.1f ms\n",
	    (double)(b->t_first_resumed - b->t_failover) / 1000.0);
	printf("failover: kill to last resume: %.1f ms\n",
	    (double)(b->t_last_resumed - b->t_failover) / 1000.0);
	if ((t = calloc((size_t)b->total, sizeof(*t))) == NULL)
		return;
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++)
			if (b->jobv[j].agents[i].resumed)
				t[n++] = b->jobv[j].agents[i].t_resumed -
				    b->t_failover;
	bench_print_spread("kill to resume p50/p90/p99/max:", t, n);
	free(t);
}

const struct bench_mode failover_mode = {
	.setup = failover_setup,
	.start = failover_start,
	.accepted = failover_accepted,
	.assignment = failover_assignment,
	.join_ended = failover_join_ended,
	.teardown = failover_teardown,
};
