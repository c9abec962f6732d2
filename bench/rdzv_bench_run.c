/*
 * The simulated nodes of rdzv-bench, all on one event loop.
 *
 * Each node first completes one Health/Check (connect, SETTINGS), so that
 * the Joins go out over established connections; once every node is
 * connected, every Join is sent in one loop turn. Each assignment is checked
 * against what the round must be: one generation per job, group ranks a
 * permutation, base ranks group_rank * nproc, the world size nodes * nproc.
 *
 * With --kill K, once every node holds its first assignment, K connections
 * of each job are closed at once (the nodes spread evenly over the ranks,
 * group rank 0 among them) and the run goes on until every survivor holds
 * an assignment of a round of the survivors only. Rounds in between (the
 * leases of the closed nodes ending in more than one daemon turn) are
 * counted, not failed. Every wait is bounded by --timeout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"
#include "clock.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

#define CHECK_PATH	"/grpc.health.v1.Health/Check"
#define JOIN_PATH	"/rdzv.v1.Rendezvous/Join"

void
bench_fail(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	if (b->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(b->first_error, sizeof(b->first_error), fmt, ap);
		va_end(ap);
	}
	b->phase = PHASE_DONE;
	event_base_loopbreak(b->base);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->timed_out = 1;
	event_base_loopbreak(b->base);
}

/* Whether node |idx| of a job is one of the --kill ones: every
 * (nodes / kill)-th, starting with group rank 0 (rank hints follow idx). */
static int
is_victim(const struct bench *b, int idx)
{
	int step;

	if (b->kill == 0)
		return 0;
	step = b->nodes / b->kill;
	return idx % step == 0 && idx / step < b->kill;
}

/* Closes the chosen connections; from an event, not from inside the
 * callback of the last assignment. */
static void
kill_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->phase = PHASE_KILL;
	b->t_kill = mono_us();
	for (int j = 0; j < b->jobs; j++) {
		struct job *job = &b->jobv[j];

		for (int i = 0; i < b->nodes; i++) {
			struct agent *a = &job->agents[i];

			if (!is_victim(b, i))
				continue;
			a->killed = 1;
			b->n_killed++;
			if (b->wire)
				wire_close(a);
			grpc_client_free(a->cli);
			a->cli = NULL;
		}
	}
}

static void
first_round(struct agent *a, const Rdzv__V1__Assignment *as)
{
	struct job *job = a->job;
	struct bench *b = job->b;
	uint32_t n = (uint32_t)b->nodes, p = (uint32_t)b->nproc;

	if (a->assigned) {
		bench_fail(b, "%s node %d: a second assignment (generation %"
		    PRIu64 ") before any connection was closed", job->rdzv_id,
		    a->idx, as->generation);
		return;
	}
	if (job->n_assigned == 0)
		job->generation = as->generation;
	if (as->generation != job->generation || as->group_world_size != n ||
	    as->world_size != n * p || as->local_world_size != p ||
	    as->group_rank >= n || job->rank_seen[as->group_rank] ||
	    as->base_rank != as->group_rank * p) {
		bench_fail(b, "%s node %d: inconsistent assignment: generation "
		    "%" PRIu64 " (first %" PRIu64 "), group rank %u of %u, "
		    "base rank %u, world %u, local world %u", job->rdzv_id,
		    a->idx, as->generation, job->generation, as->group_rank,
		    as->group_world_size, as->base_rank, as->world_size,
		    as->local_world_size);
		return;
	}
	job->rank_seen[as->group_rank] = 1;
	a->assigned = 1;
	a->generation = as->generation;
	a->t_assigned = mono_us();
	job->n_assigned++;
	if (++b->n_assigned < b->total)
		return;
	b->t_last_assignment = a->t_assigned;
	if (b->mode != NULL && b->mode->start != NULL)
		b->mode->start(b);
	else if (b->kill > 0)
		event_active(b->kill_ev, EV_TIMEOUT, 0);
	else {
		b->phase = PHASE_DONE;
		event_base_loopbreak(b->base);
	}
}

/* An assignment after the connections were closed: of the survivors'
 * round, or of a round in between. */
static void
later_round(struct agent *a, const Rdzv__V1__Assignment *as)
{
	struct job *job = a->job;
	struct bench *b = job->b;
	uint32_t n = (uint32_t)job->n_survivors, p = (uint32_t)b->nproc;

	if (a->reassigned || as->generation <= a->generation) {
		bench_fail(b, "%s node %d: assignment of generation %" PRIu64
		    " after holding generation %" PRIu64 "%s", job->rdzv_id,
		    a->idx, as->generation, a->generation, a->reassigned ?
		    " of the survivors' round" : "");
		return;
	}
	a->generation = as->generation;
	if (as->group_world_size > n) {
		/* Not every closed node was lost yet. */
		b->n_interim++;
		return;
	}
	if (job->n_reassigned == 0)
		job->final_generation = as->generation;
	if (as->generation != job->final_generation ||
	    as->group_world_size != n || as->world_size != n * p ||
	    as->group_rank >= n || job->final_rank_seen[as->group_rank] ||
	    as->base_rank != as->group_rank * p) {
		bench_fail(b, "%s node %d: inconsistent assignment after the "
		    "close: generation %" PRIu64 " (first %" PRIu64 "), "
		    "group rank %u of %u (expected %u), base rank %u",
		    job->rdzv_id, a->idx, as->generation,
		    job->final_generation, as->group_rank,
		    as->group_world_size, n, as->base_rank);
		return;
	}
	job->final_rank_seen[as->group_rank] = 1;
	a->reassigned = 1;
	a->t_reassigned = mono_us();
	job->n_reassigned++;
	if (++b->n_reassigned == b->n_survivors) {
		b->t_last_reassignment = a->t_reassigned;
		b->phase = PHASE_DONE;
		event_base_loopbreak(b->base);
	}
}

void
bench_join_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	bench_join_event(arg, (const Rdzv__V1__JoinEvent *)msg);
}

void
bench_join_event(struct agent *a, const Rdzv__V1__JoinEvent *ev)
{
	struct bench *b = a->job->b;
	const char *why = NULL;

	if (b->closing || a->killed || b->phase == PHASE_DONE)
		return;
	switch (ev->event_case) {
	case RDZV__V1__JOIN_EVENT__EVENT_ACCEPTED:
		if (b->phase == PHASE_FAILOVER) {
			b->mode->accepted(a, ev->accepted);
			return;
		}
		b->n_accepted++;
		if (ev->accepted->session_id.len <= sizeof(a->session)) {
			memcpy(a->session, ev->accepted->session_id.data,
			    ev->accepted->session_id.len);
			a->session_len = ev->accepted->session_id.len;
		}
		return;
	case RDZV__V1__JOIN_EVENT__EVENT_WAITING:
	case RDZV__V1__JOIN_EVENT__EVENT_STOP:
		return;
	case RDZV__V1__JOIN_EVENT__EVENT_ASSIGNMENT:
		if (b->phase == PHASE_FAILOVER)
			b->mode->assignment(a, ev->assignment);
		else if (b->phase == PHASE_KILL)
			later_round(a, ev->assignment);
		else
			first_round(a, ev->assignment);
		return;
	case RDZV__V1__JOIN_EVENT__EVENT_CLOSED:
		why = ev->closed->reason;
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_FAILED:
		why = ev->failed->reason;
		break;
	case RDZV__V1__JOIN_EVENT__EVENT_EVICTED:
		why = ev->evicted->reason;
		break;
	default:
		break;
	}
	bench_fail(b, "%s node %d: unexpected join event %d%s%s",
	    a->job->rdzv_id, a->idx, (int)ev->event_case,
	    why != NULL ? ": " : "", why != NULL ? why : "");
}

void
bench_join_done(struct grpc_ccall *cc, int status, const char *message,
    void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->job->b;

	a->join = NULL;
	if (b->closing || a->killed || b->phase == PHASE_DONE)
		return;
	if (b->phase == PHASE_FAILOVER) {
		b->mode->join_ended(a, status, grpc_ccall_trailer(cc,
		    SERVER_LEADER_TRAILER));
		return;
	}
	bench_join_ended(a, status, message);
}

void
bench_join_ended(struct agent *a, int status, const char *message)
{
	struct bench *b = a->job->b;

	if (b->closing || a->killed || b->phase == PHASE_DONE)
		return;
	bench_fail(b, "%s node %d: Join ended: %s%s%s", a->job->rdzv_id,
	    a->idx, grpc_status_name(status), message != NULL ? ": " : "",
	    message != NULL ? message : "");
}

static void
send_joins(struct bench *b)
{
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;

	b->phase = PHASE_JOIN;
	req.min_nodes = (uint32_t)b->min_nodes;
	req.max_nodes = (uint32_t)b->nodes;
	req.last_call_timeout_ms = 60000;
	req.reconnect_grace_ms = b->grace_ms;
	/* Every loss may end in its own daemon turn and count once. */
	req.max_restarts = (uint32_t)b->kill;
	req.advertise_addr = "127.0.0.1";
	req.master_port = 29500;
	req.nproc = (uint32_t)b->nproc;
	req.has_rank_hint = 1;
	req.agent_version = "rdzv-bench";
	for (int j = 0; j < b->jobs; j++) {
		struct job *job = &b->jobv[j];

		req.rdzv_id = job->rdzv_id;
		for (int i = 0; i < b->nodes; i++) {
			struct agent *a = &job->agents[i];

			req.hostname = a->hostname;
			req.rank_hint = (uint32_t)i;
			a->t_join_sent = mono_us();
			if (b->wire) {
				if (wire_join(a, &req) != 0)
					return;
				continue;
			}
			a->join = grpc_client_call(a->cli, JOIN_PATH,
			    &req.base, &rdzv__v1__join_event__descriptor, 0,
			    bench_join_msg, bench_join_done, a);
			if (a->join == NULL) {
				bench_fail(b, "%s node %d: cannot start Join: "
				    "%s", job->rdzv_id, i, strerror(errno));
				return;
			}
		}
	}
	b->t_last_join_sent = mono_us();
}

static void
on_check_done(struct grpc_ccall *cc, int status, const char *message,
    void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->job->b;

	if (b->closing || b->phase == PHASE_DONE)
		return;
	if (status != GRPC_OK) {
		bench_fail(b, "%s node %d: connect (Health/Check): %s%s%s",
		    a->job->rdzv_id, a->idx, grpc_status_name(status),
		    message != NULL ? ": " : "", message != NULL ? message : "");
		return;
	}
	bench_connected(a);
}

void
bench_connected(struct agent *a)
{
	struct bench *b = a->job->b;

	if (b->closing || b->phase == PHASE_DONE)
		return;
	a->connected = 1;
	a->t_connected = mono_us();
	if (++b->n_connected == b->total) {
		b->t_connected = a->t_connected;
		b->self_cpu_connected = self_cpu_seconds();
		b->cpu_connected = b->daemon_pid != 0 ?
		    proc_cpu_seconds(b->daemon_pid) : -1;
		send_joins(b);
	}
}

/* Allocates the jobs and the nodes' clients; nothing connects yet. */
int
bench_setup(struct bench *b)
{
	int k = 0;

	b->total = b->nodes * b->jobs;
	if (b->min_nodes == 0)
		b->min_nodes = b->nodes - b->kill;
	if ((b->base = event_base_new()) == NULL ||
	    (b->jobv = calloc((size_t)b->jobs, sizeof(*b->jobv))) == NULL ||
	    (b->deadline_ev = evtimer_new(b->base, deadline_cb, b)) == NULL ||
	    (b->kill_ev = event_new(b->base, -1, 0, kill_cb, b)) == NULL)
		return -ENOMEM;
	for (int j = 0; j < b->jobs; j++) {
		struct job *job = &b->jobv[j];

		job->b = b;
		job->idx = j;
		if (b->jobs == 1)
			snprintf(job->rdzv_id, sizeof(job->rdzv_id), "%s",
			    b->id_prefix);
		else
			snprintf(job->rdzv_id, sizeof(job->rdzv_id), "%s-%d",
			    b->id_prefix, j);
		job->agents = calloc((size_t)b->nodes, sizeof(*job->agents));
		job->rank_seen = calloc((size_t)b->nodes, 1);
		job->final_rank_seen = calloc((size_t)b->nodes, 1);
		if (job->agents == NULL || job->rank_seen == NULL ||
		    job->final_rank_seen == NULL)
			return -ENOMEM;
		for (int i = 0; i < b->nodes; i++) {
			struct agent *a = &job->agents[i];

			a->job = job;
			a->idx = i;
			snprintf(a->hostname, sizeof(a->hostname),
			    "bench-%05d", i);
			/* Spread the connections over the servers given
			 * (the wire client spreads them alike). */
			if (!b->wire && (a->cli = grpc_client_new(b->base,
			    &b->opts[k++ % b->n_servers], NULL, NULL)) == NULL)
				return -errno;
			if (!is_victim(b, i))
				job->n_survivors++;
		}
		b->n_survivors += job->n_survivors;
	}
	if (b->wire)
		return wire_setup(b);
	if (b->mode != NULL && b->mode->setup != NULL)
		return b->mode->setup(b);
	return 0;
}

/* Connects every node, then lets the joins (and the kill) run until done,
 * failed or past --timeout. */
void
bench_run(struct bench *b)
{
	Grpc__Health__V1__HealthCheckRequest check =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct timeval limit;

	limit.tv_sec = (time_t)b->timeout_s;
	limit.tv_usec = (suseconds_t)((b->timeout_s - (double)limit.tv_sec) *
	    1e6);
	evtimer_add(b->deadline_ev, &limit);

	check.service = "";
	b->t_first_connect = mono_us();
	if (b->wire)
		wire_start(b);
	for (int j = 0; j < b->jobs && !b->wire && b->phase == PHASE_CONNECT;
	    j++) {
		for (int i = 0; i < b->nodes && b->phase == PHASE_CONNECT;
		    i++) {
			struct agent *a = &b->jobv[j].agents[i];

			if (grpc_client_call(a->cli, CHECK_PATH, &check.base,
			    &grpc__health__v1__health_check_response__descriptor,
			    (uint32_t)(b->timeout_s * 1000), NULL,
			    on_check_done, a) == NULL)
				bench_fail(b, "node %d: cannot start a call: "
				    "%s", i, strerror(errno));
		}
	}
	if (b->phase != PHASE_DONE)
		event_base_dispatch(b->base);
}

/* Closes every connection: streams still open are cancelled, uncounted. */
void
bench_teardown(struct bench *b)
{
	b->closing = 1;
	if (b->mode != NULL && b->mode->teardown != NULL)
		b->mode->teardown(b);
	if (b->wire)
		wire_teardown(b);
	for (int j = 0; b->jobv != NULL && j < b->jobs; j++) {
		struct job *job = &b->jobv[j];

		for (int i = 0; job->agents != NULL && i < b->nodes; i++)
			grpc_client_free(job->agents[i].cli);
		free(job->agents);
		free(job->rank_seen);
		free(job->final_rank_seen);
	}
	free(b->jobv);
	if (b->kill_ev != NULL)
		event_free(b->kill_ev);
	if (b->deadline_ev != NULL)
		event_free(b->deadline_ev);
	if (b->base != NULL)
		event_base_free(b->base);
}
