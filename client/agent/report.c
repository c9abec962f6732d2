/*
 * What the agent tells rdzvd after its Join: the outcome of a generation's
 * workers (Report SUCCEEDED/FAILED, fenced by generation), changes of its
 * offer (Report UPDATE: nproc, master port, GPU results), whether its
 * workers are starting (Report UPDATE "starting"/"started") and a planned
 * Leave. Outcomes and updates must arrive: they wait for the session while
 * the stream is down and are sent again after the resume (the agent calls
 * report_flush() once the session is back). The calls go on the session's
 * client; when one ends the agent hears of it (report_events.done).
 *
 * The node's training step goes by Progress (docs/HEALTH.md): only the
 * latest, at most once per PROGRESS_EVERY_MS, and never waited for; rdzvd
 * keeps it in memory, so the latest is sent again after a resume.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "node.h"
#include "workers.h"
#include "log.h"

#define REPORT_TIMEOUT_MS	10000
#define REPORT_RETRY_MS		1000
#define PROGRESS_EVERY_MS	1000
#define PROGRESS_TIMEOUT_MS	5000

static void	send_outcome(struct report *);
static void	send_update(struct report *);
static void	send_start(struct report *);

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	report_flush(arg);
}

static void
done(struct report *r)
{
	r->ev.done(r->ev.arg);
}

/* A call failed: keep it pending when it may go through later. Returns
 * true when it stays pending. */
static bool
keep(struct report *rp, int status, const char *what, const char *msg)
{
	struct timeval tv = { REPORT_RETRY_MS / 1000,
	    (REPORT_RETRY_MS % 1000) * 1000 };

	if (!grpc_status_transient(status)) {
		log_info("%s: rdzvd ignored it: %s (%s)", what,
		    msg != NULL ? msg : "", grpc_status_name(status));
		return false;
	}
	if (rp->quitting)
		return false;
	log_debug("%s: %s (%s); trying again", what, msg != NULL ? msg : "",
	    grpc_status_name(status));
	/* A lost connection resends after the resume; a slow rdzvd gets
	 * another try. */
	if (session_connected(rp->session))
		evtimer_add(rp->retry_ev, &tv);
	return true;
}

static void
outcome_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ReportResponse *r =
	    (const Rdzv__V1__ReportResponse *)msg;
	struct report *rp = arg;

	log_debug("generation %llu reported; the job's restart count is %u",
	    (unsigned long long)rp->outcome.generation, r->restart_count);
}

static void
outcome_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct report *rp = arg;
	struct outcome_report *r = &rp->outcome;
	char what[64];

	r->cc = NULL;
	snprintf(what, sizeof(what), "report of generation %llu",
	    (unsigned long long)r->generation);
	if (r->pending) {
		if (status == GRPC_OK || !keep(rp, status, what, msg)) {
			if (r->seq == r->sent_seq)
				r->pending = false;
			report_flush(rp);
		} else
			r->sent_seq = 0;	/* after a resume or a second */
	}
	done(rp);
}

/*
 * Queues the outcome of the set of workers of generation |gen| that just
 * ended, with each worker's exit: status[i] is local rank i's wait status.
 * A newer outcome replaces one not yet sent.
 */
static void
outcome_queue(struct report *rp, uint64_t gen, Rdzv__V1__Outcome outcome,
    const int *status, int n, const char *message, const char *cause,
    const uint32_t *absent, size_t n_absent)
{
	struct outcome_report *r = &rp->outcome;

	free(r->absent);
	r->absent = NULL;
	r->n_absent = 0;
	if (n_absent > 0) {
		r->absent = xcalloc(n_absent, sizeof(*r->absent));
		memcpy(r->absent, absent, n_absent * sizeof(*r->absent));
		r->n_absent = n_absent;
	}
	free(r->exits);
	r->exits = xcalloc((size_t)n, sizeof(*r->exits));
	r->n_exits = n;
	for (int i = 0; i < n; i++) {
		Rdzv__V1__WorkerExit *e = &r->exits[i];

		rdzv__v1__worker_exit__init(e);
		e->local_rank = (uint32_t)i;
		if (WIFEXITED(status[i])) {
			e->exit_code = WEXITSTATUS(status[i]);
		} else {
			e->exit_code = -1;
			e->signal = WIFSIGNALED(status[i]) ?
			    WTERMSIG(status[i]) : 0;
		}
	}
	snprintf(r->message, sizeof(r->message), "%s", message);
	r->generation = gen;
	r->outcome = outcome;
	r->cause = cause;
	r->pending = true;
	r->seq++;
	report_flush(rp);
}

void
report_outcome(struct report *rp, uint64_t gen, Rdzv__V1__Outcome outcome,
    const int *status, int n, const char *message)
{
	outcome_queue(rp, gen, outcome, status, n, message, NULL, NULL, 0);
}

/* A kept worker's failure of generation |gen|, naming the global ranks
 * its meeting waited for in vain (none: n_absent 0). */
void
report_absent(struct report *rp, uint64_t gen, const char *message,
    const uint32_t *absent, size_t n_absent)
{
	outcome_queue(rp, gen, RDZV__V1__OUTCOME__OUTCOME_FAILED, NULL, 0,
	    message, NULL, absent, n_absent);
}

/* Generation |gen| hung (docs/HEALTH.md): a failure without exits, sent
 * while its workers are still being dumped and stopped. With |culprit|,
 * one of this node's own workers is stopped: the hang is this node's
 * (cause "stuck", rule 17). */
void
report_hang(struct report *rp, uint64_t gen, const char *message,
    bool culprit)
{
	outcome_queue(rp, gen, RDZV__V1__OUTCOME__OUTCOME_FAILED, NULL, 0,
	    message, culprit ? "stuck" : "hang", NULL, 0);
}

static void
send_outcome(struct report *rp)
{
	const struct session *s = rp->session;
	struct outcome_report *r = &rp->outcome;
	Rdzv__V1__ReportRequest req = RDZV__V1__REPORT_REQUEST__INIT;
	Rdzv__V1__WorkerExit **ptrs;

	ptrs = xcalloc((size_t)r->n_exits + 1, sizeof(*ptrs));
	for (int i = 0; i < r->n_exits; i++)
		ptrs[i] = &r->exits[i];
	req.session_id.data = (uint8_t *)s->id;
	req.session_id.len = s->id_len;
	req.generation = r->generation;
	req.outcome = r->outcome;
	req.n_exits = (size_t)r->n_exits;
	req.exits = ptrs;
	req.message = r->message;
	req.cause = (char *)(r->cause != NULL ? r->cause : "");
	req.absent_ranks = r->absent;
	req.n_absent_ranks = r->n_absent;
	r->sent_seq = r->seq;
	r->cc = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Report",
	    &req.base, &rdzv__v1__report_response__descriptor,
	    REPORT_TIMEOUT_MS, outcome_msg, outcome_done, rp);
	free(ptrs);
}

static void
update_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct report *rp = arg;
	struct update_report *u = &rp->update;

	u->cc = NULL;
	if (u->pending) {
		if (status == GRPC_OK || !keep(rp, status, "update of this "
		    "node's offer", msg)) {
			/* What changed meanwhile still goes. */
			if (u->seq == u->sent_seq) {
				u->pending = false;
				u->nproc = u->master_port = u->gpucheck = false;
				u->port_taken_gen = 0;
			}
			report_flush(rp);
		} else
			u->sent_seq = 0;	/* after a resume or a second */
	}
	done(rp);
}

/* The node's offer changed: its nproc, its master port or its GPU
 * results. The update sends the offer's values when it goes. */
void
report_update(struct report *rp, bool nproc, bool master_port,
    bool gpucheck)
{
	struct update_report *u = &rp->update;

	u->nproc |= nproc;
	u->master_port |= master_port;
	u->gpucheck |= gpucheck;
	u->seq++;
	u->pending = true;
	report_flush(rp);
}

void
report_port_taken(struct report *rp, uint64_t generation)
{
	rp->update.port_taken_gen = generation;
	report_update(rp, false, true, false);
}

static void
send_update(struct report *rp)
{
	const struct session *s = rp->session;
	const struct offer *o = rp->offer;
	struct update_report *u = &rp->update;
	Rdzv__V1__ReportRequest req = RDZV__V1__REPORT_REQUEST__INIT;
	struct gpucheck_pb gpb = { 0 };

	req.session_id.data = (uint8_t *)s->id;
	req.session_id.len = s->id_len;
	req.generation = o->started_gen;
	req.outcome = RDZV__V1__OUTCOME__OUTCOME_UPDATE;
	if (u->nproc)
		req.nproc = o->nproc;
	if (u->master_port)
		req.master_port = o->master_port;
	if (u->port_taken_gen != 0) {
		req.generation = u->port_taken_gen;
		req.cause = "master_port";
	}
	if (u->gpucheck) {
		if (gpucheck_pb_new(o->gpus, &gpb) != 0)
			fatalx("out of memory");
		req.n_gpus = gpb.n;
		req.gpus = gpb.ptrs;
	}
	u->sent_seq = u->seq;
	log_debug("update: nproc %u, master port %u, %zu GPU results",
	    req.nproc, req.master_port, req.n_gpus);
	u->cc = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Report",
	    &req.base, &rdzv__v1__report_response__descriptor,
	    REPORT_TIMEOUT_MS, NULL, update_done, rp);
	gpucheck_pb_free(&gpb);
}

static void
start_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct report *rp = arg;
	struct start_report *st = &rp->start;

	st->cc = NULL;
	if (st->pending) {
		if (status == GRPC_OK || !keep(rp, status, "report of the "
		    "workers' start", msg)) {
			if (st->seq == st->sent_seq)
				st->pending = false;
			report_flush(rp);
		} else
			st->sent_seq = 0;	/* after a resume or a second */
	}
	done(rp);
}

/*
 * Under in-process restart the other nodes' kept workers meet a round at
 * once, and a node whose workers start as new processes (they import
 * torch first) would miss that meeting and be lost for it. rdzvd excuses
 * it while it says so (SPEC §4 rule 17), within a start-up allowance.
 * Only a change goes; a newer state replaces one not yet sent. An rdzvd
 * that does not know the causes refuses them (INVALID_ARGUMENT): nothing
 * more is tried, and it counts the node absent as it always did.
 */
void
report_starting(struct report *rp, uint64_t generation, bool starting)
{
	struct start_report *st = &rp->start;

	if (st->starting == starting)
		return;
	st->starting = starting;
	st->generation = generation;
	st->seq++;
	st->pending = true;
	report_flush(rp);
}

static void
send_start(struct report *rp)
{
	const struct session *s = rp->session;
	struct start_report *st = &rp->start;
	Rdzv__V1__ReportRequest req = RDZV__V1__REPORT_REQUEST__INIT;

	req.session_id.data = (uint8_t *)s->id;
	req.session_id.len = s->id_len;
	req.generation = st->generation;
	req.outcome = RDZV__V1__OUTCOME__OUTCOME_UPDATE;
	req.cause = st->starting ? "starting" : "started";
	st->sent_seq = st->seq;
	log_debug("generation %llu: the workers %s",
	    (unsigned long long)st->generation, st->starting ? "are starting" :
	    "started");
	st->cc = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Report",
	    &req.base, &rdzv__v1__report_response__descriptor,
	    REPORT_TIMEOUT_MS, NULL, start_done, rp);
}

static void	progress_flush(struct report *);

static void
progress_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct report *rp = arg;
	struct progress_report *p = &rp->progress;

	p->cc = NULL;
	if (status == GRPC_UNIMPLEMENTED) {
		log_info("rdzvd at %s keeps no training progress (an older "
		    "rdzvd): steps are not forwarded",
		    session_server(rp->session));
		p->unsupported = true;
		return;
	}
	/* A step lost to a hiccup goes again, unless a newer one waits. A
	 * step of a generation that a new round superseded meanwhile
	 * (FAILED_PRECONDITION) is expected after every round: dropped
	 * quietly. */
	if (status != GRPC_OK && status != GRPC_FAILED_PRECONDITION) {
		log_debug("progress: %s (%s)", msg != NULL ? msg : "",
		    grpc_status_name(status));
		if (grpc_status_transient(status))
			p->pending = true;
	}
	progress_flush(rp);
}

static void
progress_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	progress_flush(arg);
}

static void
progress_flush(struct report *rp)
{
	const struct session *s = rp->session;
	struct progress_report *p = &rp->progress;
	Rdzv__V1__ProgressRequest req = RDZV__V1__PROGRESS_REQUEST__INIT;
	uint64_t now = mono_us(), next;

	if (!p->pending || p->cc != NULL || p->unsupported || rp->quitting ||
	    !session_connected(s))
		return;
	next = p->sent_us + PROGRESS_EVERY_MS * 1000ULL;
	if (p->sent && now < next) {
		struct timeval tv = { (time_t)((next - now) / 1000000),
		    (suseconds_t)((next - now) % 1000000) };
		if (!evtimer_pending(p->timer, NULL))
			evtimer_add(p->timer, &tv);
		return;
	}
	req.session_id.data = (uint8_t *)s->id;
	req.session_id.len = s->id_len;
	req.generation = p->generation;
	req.step = p->step;
	p->pending = false;
	p->sent = true;
	p->sent_us = now;
	p->cc = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Progress",
	    &req.base, &rdzv__v1__progress_response__descriptor,
	    PROGRESS_TIMEOUT_MS, NULL, progress_done, rp);
}

/* The node's workers of generation |gen| reached |step|. */
void
report_progress(struct report *rp, uint64_t gen, uint64_t step)
{
	struct progress_report *p = &rp->progress;

	p->generation = gen;
	p->step = step;
	p->pending = true;
	progress_flush(rp);
}

/* Sends what is pending, when the session is up. An exiting agent
 * reports no outcome, but still its GPU results. */
void
report_flush(struct report *rp)
{
	if (!session_connected(rp->session))
		return;
	progress_flush(rp);
	if (rp->outcome.pending && rp->outcome.cc == NULL && !rp->quitting &&
	    rp->outcome.seq != rp->outcome.sent_seq)
		send_outcome(rp);
	if (rp->update.pending && rp->update.cc == NULL &&
	    rp->update.seq != rp->update.sent_seq)
		send_update(rp);
	if (rp->start.pending && rp->start.cc == NULL && !rp->quitting &&
	    rp->start.seq != rp->start.sent_seq)
		send_start(rp);
}

/* The session is gone (a refused resume): what it would have said is
 * moot; a new Join carries the node's offer. */
void
report_forget(struct report *rp)
{
	struct update_report *u = &rp->update;

	rp->outcome.pending = false;
	rp->progress.pending = false;
	if (rp->progress.cc != NULL)
		grpc_ccall_cancel(rp->progress.cc);
	u->pending = false;
	u->nproc = u->master_port = u->gpucheck = false;
	u->port_taken_gen = 0;
	rp->start.pending = rp->start.starting = false;
	if (rp->outcome.cc != NULL)
		grpc_ccall_cancel(rp->outcome.cc);
	if (u->cc != NULL)
		grpc_ccall_cancel(u->cc);
	if (rp->start.cc != NULL)
		grpc_ccall_cancel(rp->start.cc);
}

static void
leave_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct report *rp = arg;

	rp->leave_cc = NULL;
	rp->left = true;
	if (status == GRPC_OK)
		log_info("left job %s", rp->job_id);
	else
		log_warnx("leaving job %s: %s (%s)", rp->job_id,
		    msg != NULL ? msg : "", grpc_status_name(status));
	done(rp);
}

/* A planned leave (SPEC §4 rule 8): the job re-rounds without us. */
void
report_leave(struct report *rp, const char *reason)
{
	const struct session *s = rp->session;
	Rdzv__V1__LeaveRequest req = RDZV__V1__LEAVE_REQUEST__INIT;

	if (s->id_len == 0 || rp->left || rp->leave_cc != NULL)
		return;
	req.session_id.data = (uint8_t *)s->id;
	req.session_id.len = s->id_len;
	req.reason = (char *)reason;
	rp->leave_cc = grpc_client_call(s->cli, "/rdzv.v1.Rendezvous/Leave",
	    &req.base, &rdzv__v1__leave_response__descriptor,
	    AGENT_LEAVE_TIMEOUT_MS, NULL, leave_done, rp);
	if (rp->leave_cc == NULL)
		rp->left = true;
}

/* The agent is exiting: no outcome is sent any more (updates and the
 * Leave still are) and nothing failed is tried again. */
void
report_quit(struct report *rp)
{
	rp->quitting = true;
}

/* Whether calls are in flight that an exiting agent waits for (each is
 * bounded by its deadline). */
bool
report_busy(const struct report *rp)
{
	return rp->leave_cc != NULL || rp->update.cc != NULL ||
	    rp->outcome.cc != NULL;
}

/* The calls go on |s|'s client, with |o|'s values; |ev| tells the agent
 * when one ended. */
int
report_init(struct report *rp, struct event_base *base,
    const struct session *s, const struct offer *o, const char *job_id,
    const struct report_events *ev)
{
	rp->session = s;
	rp->offer = o;
	rp->job_id = job_id;
	rp->ev = *ev;
	rp->retry_ev = evtimer_new(base, retry_cb, rp);
	rp->progress.timer = evtimer_new(base, progress_timer_cb, rp);
	return rp->retry_ev != NULL && rp->progress.timer != NULL ? 0 : -1;
}

/* After the client is gone (its calls were cancelled). */
void
report_free(struct report *rp)
{
	if (rp->retry_ev != NULL)
		event_free(rp->retry_ev);
	rp->retry_ev = NULL;
	if (rp->progress.timer != NULL)
		event_free(rp->progress.timer);
	rp->progress.timer = NULL;
	free(rp->outcome.exits);
	rp->outcome.exits = NULL;
	free(rp->outcome.absent);
	rp->outcome.absent = NULL;
	rp->outcome.n_absent = 0;
}
