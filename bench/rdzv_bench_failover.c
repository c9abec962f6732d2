/*
 * rdzv-bench --failover: once every node holds its assignment, the leader
 * (--daemon-pid) is killed with SIGKILL and every node resumes, as
 * rdzv-agent does (client/agent/session.c), on whichever replica of
 * --server's list leads next: its session id and generation in a new
 * Join, on the leader a standby names (rdzv-leader) or else the next
 * replica. The figure is the time from the kill until every node's resume
 * was accepted; a resume refused, a node taken as new or a generation
 * handed out anew fails the run (SPEC §4 rule 11, §14).
 *
 * The nodes share one chooser: the first node to find the current server
 * gone moves it for all, and a node whose server is no longer the current
 * one just goes to the current one. A node backs off (100 ms doubling to
 * 5 s, jittered, as the agent) only while the shared choice stays where it
 * failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "rdzv_bench.h"

#define JOIN_PATH	"/rdzv.v1.Rendezvous/Join"
#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000

/* Half of |ms| to all of it. */
static uint32_t
jitter(uint32_t ms)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)mono_us();
	return ms / 2 + r % (ms / 2 + 1);
}

/* The resume: the node's session and the generation it holds. */
static void
send_resume(struct agent *a)
{
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;
	struct bench *b = a->job->b;

	req.rdzv_id = a->job->rdzv_id;
	req.session_id.data = a->sid;
	req.session_id.len = a->sid_len;
	req.generation = a->generation;
	a->join = grpc_client_call(a->cli, JOIN_PATH, &req.base,
	    &rdzv__v1__join_event__descriptor, 0, bench_join_cb,
	    bench_join_done, a);
	if (a->join == NULL)
		bench_fail(b, "%s node %d: cannot start the resume",
		    a->job->rdzv_id, a->idx);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->job->b;
	struct grpc_client_opts o = b->opts[0];

	if (b->phase != PHASE_FAILOVER)
		return;
	if (a->srv != b->list.cur) {
		grpc_client_free(a->cli);
		a->srv = b->list.cur;
		o.server = b->list.s[a->srv].ep;
		if ((a->cli = grpc_client_new(b->base, &o, NULL, NULL)) ==
		    NULL) {
			bench_fail(b, "%s node %d: cannot create a client",
			    a->job->rdzv_id, a->idx);
			return;
		}
	}
	send_resume(a);
}

/* All nodes hold their assignment: the leader goes. */
void
failover_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->phase = PHASE_FAILOVER;
	b->t_failover = mono_us();
	if (kill(b->daemon_pid, SIGKILL) != 0) {
		bench_fail(b, "--failover: cannot kill rdzvd (pid %ld): %s",
		    (long)b->daemon_pid, strerror(errno));
		return;
	}
	/* Whoever starts a replacement waits for this line. */
	printf("killed the leader %s (pid %ld)\n",
	    b->list.s[b->list.cur].name, (long)b->daemon_pid);
	fflush(stdout);
}

/* A node's Join stream ended during the failover: try again, where the
 * shared choice says. */
void
failover_lost(struct agent *a, int status, const char *hint)
{
	struct bench *b = a->job->b;
	struct timeval tv;
	uint32_t ms;

	if (status == GRPC_NOT_FOUND || status == GRPC_FAILED_PRECONDITION ||
	    status == GRPC_PERMISSION_DENIED) {
		bench_fail(b, "%s node %d: resume refused by %s: %s",
		    a->job->rdzv_id, a->idx, b->list.s[a->srv].name,
		    grpc_status_name(status));
		return;
	}
	if (a->resumed) {
		a->resumed = 0;
		b->n_resumed--;
	}
	if (!a->lost_once) {
		a->lost_once = 1;
		b->n_lost++;
	}
	if (a->srv == b->list.cur && server_list_should_move(status))
		(void)server_list_failed(&b->list, hint);
	if (a->srv != b->list.cur) {
		ms = jitter(BACKOFF_MIN_MS);
	} else {
		a->backoff_ms = a->backoff_ms == 0 ? BACKOFF_MIN_MS :
		    a->backoff_ms * 2;
		if (a->backoff_ms > BACKOFF_MAX_MS)
			a->backoff_ms = BACKOFF_MAX_MS;
		ms = jitter(a->backoff_ms);
	}
	if (a->retry_ev == NULL &&
	    (a->retry_ev = evtimer_new(b->base, retry_cb, a)) == NULL) {
		bench_fail(b, "out of memory for a timer");
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(a->retry_ev, &tv);
}

void
failover_accepted(struct agent *a, const Rdzv__V1__Accepted *acc)
{
	struct bench *b = a->job->b;

	if (!acc->resumed) {
		bench_fail(b, "%s node %d: %s took it as a new node after the "
		    "failover", a->job->rdzv_id, a->idx,
		    b->list.s[a->srv].name);
		return;
	}
	if (a->resumed)
		return;
	a->resumed = 1;
	a->backoff_ms = 0;
	a->t_resumed = mono_us();
	server_list_ok(&b->list);
	if (++b->n_resumed == b->total && b->n_lost == b->total) {
		b->t_last_resume = a->t_resumed;
		b->phase = PHASE_DONE;
		event_base_loopbreak(b->base);
	}
}

/* A resumed node gets its assignment again: the same generation. */
void
failover_assignment(struct agent *a, const Rdzv__V1__Assignment *as)
{
	if (as->generation != a->generation)
		bench_fail(a->job->b, "%s node %d: generation %" PRIu64 " after "
		    "the failover; it held %" PRIu64, a->job->rdzv_id, a->idx,
		    as->generation, a->generation);
}
