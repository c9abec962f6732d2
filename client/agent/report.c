/*
 * What the agent tells rdzvd after its Join: the outcome of a generation's
 * workers (Report SUCCEEDED/FAILED, fenced by generation), changes of its
 * offer (Report UPDATE: nproc, master port, GPU results) and a planned
 * Leave. Outcomes and updates must arrive: they wait for the session while
 * the stream is down and are sent again after the resume.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent.h"
#include "log.h"

#define REPORT_TIMEOUT_MS	10000
#define REPORT_RETRY_MS		1000

static void	send_outcome(struct agent *);
static void	send_update(struct agent *);

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	report_flush(arg);
}

/* A call failed: keep it pending when it may go through later. Returns
 * true when it stays pending. */
static bool
keep(struct agent *a, int status, const char *what, const char *msg)
{
	struct timeval tv = { REPORT_RETRY_MS / 1000,
	    (REPORT_RETRY_MS % 1000) * 1000 };

	if (!grpc_status_transient(status)) {
		log_info("%s: rdzvd ignored it: %s (%s)", what,
		    msg != NULL ? msg : "", grpc_status_name(status));
		return false;
	}
	if (a->quitting)
		return false;
	log_debug("%s: %s (%s); trying again", what, msg != NULL ? msg : "",
	    grpc_status_name(status));
	/* A lost connection resends after the resume; a slow rdzvd gets
	 * another try. */
	if (session_connected(a))
		evtimer_add(a->report_retry_ev, &tv);
	return true;
}

static void
outcome_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ReportResponse *r =
	    (const Rdzv__V1__ReportResponse *)msg;
	struct agent *a = arg;

	log_debug("generation %llu reported; the job's restart count is %u",
	    (unsigned long long)a->outcome.generation, r->restart_count);
}

static void
outcome_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct agent *a = arg;
	struct outcome_report *r = &a->outcome;
	char what[64];

	r->cc = NULL;
	snprintf(what, sizeof(what), "report of generation %llu",
	    (unsigned long long)r->generation);
	if (r->pending) {
		if (status == GRPC_OK || !keep(a, status, what, msg)) {
			if (r->seq == r->sent_seq)
				r->pending = false;
			report_flush(a);
		} else
			r->sent_seq = 0;	/* after a resume or a second */
	}
	/* An exiting agent may have waited for this call. */
	agent_step(a);
}

/*
 * Queues the outcome of the set of workers that just ended, with each
 * worker's exit. A newer outcome replaces one not yet sent.
 */
void
report_outcome(struct agent *a, Rdzv__V1__Outcome outcome,
    const char *message)
{
	struct outcome_report *r = &a->outcome;
	const struct workers *ws = &a->ws;

	free(r->exits);
	r->exits = calloc((size_t)ws->n, sizeof(*r->exits));
	if (r->exits == NULL && ws->n > 0)
		fatalx("out of memory");
	r->n_exits = ws->n;
	for (int i = 0; i < ws->n; i++) {
		const struct worker *w = &ws->w[i];
		Rdzv__V1__WorkerExit *e = &r->exits[i];

		rdzv__v1__worker_exit__init(e);
		e->local_rank = (uint32_t)w->local_rank;
		if (WIFEXITED(w->status)) {
			e->exit_code = WEXITSTATUS(w->status);
		} else {
			e->exit_code = -1;
			e->signal = WIFSIGNALED(w->status) ?
			    WTERMSIG(w->status) : 0;
		}
	}
	snprintf(r->message, sizeof(r->message), "%s", message);
	r->generation = ws->generation;
	r->outcome = outcome;
	r->pending = true;
	r->seq++;
	report_flush(a);
}

static void
send_outcome(struct agent *a)
{
	struct outcome_report *r = &a->outcome;
	Rdzv__V1__ReportRequest req = RDZV__V1__REPORT_REQUEST__INIT;
	Rdzv__V1__WorkerExit **ptrs;

	if ((ptrs = calloc((size_t)r->n_exits + 1, sizeof(*ptrs))) == NULL)
		fatalx("out of memory");
	for (int i = 0; i < r->n_exits; i++)
		ptrs[i] = &r->exits[i];
	req.session_id.data = a->session_id;
	req.session_id.len = a->session_len;
	req.generation = r->generation;
	req.outcome = r->outcome;
	req.n_exits = (size_t)r->n_exits;
	req.exits = ptrs;
	req.message = r->message;
	r->sent_seq = r->seq;
	r->cc = grpc_client_call(a->cli, "/rdzv.v1.Rendezvous/Report",
	    &req.base, &rdzv__v1__report_response__descriptor,
	    REPORT_TIMEOUT_MS, outcome_msg, outcome_done, a);
	free(ptrs);
}

static void
update_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct agent *a = arg;
	struct update_report *u = &a->update;

	u->cc = NULL;
	if (u->pending) {
		if (status == GRPC_OK || !keep(a, status, "update of this "
		    "node's offer", msg)) {
			/* What changed meanwhile still goes. */
			if (u->seq == u->sent_seq) {
				u->pending = false;
				u->nproc = u->master_port = u->gpucheck = false;
			}
			report_flush(a);
		} else
			u->sent_seq = 0;	/* after a resume or a second */
	}
	agent_step(a);
}

/* The node's offer changed: a->nproc, a->offer_port or the GPU results. */
void
report_update(struct agent *a, bool nproc, bool master_port, bool gpucheck)
{
	struct update_report *u = &a->update;

	u->nproc |= nproc;
	u->master_port |= master_port;
	u->gpucheck |= gpucheck;
	u->seq++;
	u->pending = true;
	report_flush(a);
}

static void
send_update(struct agent *a)
{
	struct update_report *u = &a->update;
	Rdzv__V1__ReportRequest req = RDZV__V1__REPORT_REQUEST__INIT;
	struct gpucheck_pb gpb = { 0 };

	req.session_id.data = a->session_id;
	req.session_id.len = a->session_len;
	req.generation = a->started_gen;
	req.outcome = RDZV__V1__OUTCOME__OUTCOME_UPDATE;
	if (u->nproc)
		req.nproc = a->nproc;
	if (u->master_port)
		req.master_port = a->offer_port;
	if (u->gpucheck) {
		if (gpucheck_pb_new(&a->gpucheck, &gpb) != 0)
			fatalx("out of memory");
		req.n_gpus = gpb.n;
		req.gpus = gpb.ptrs;
	}
	u->sent_seq = u->seq;
	log_debug("update: nproc %u, master port %u, %zu GPU results",
	    req.nproc, req.master_port, req.n_gpus);
	u->cc = grpc_client_call(a->cli, "/rdzv.v1.Rendezvous/Report",
	    &req.base, &rdzv__v1__report_response__descriptor,
	    REPORT_TIMEOUT_MS, NULL, update_done, a);
	gpucheck_pb_free(&gpb);
}

/* Sends what is pending, when the session is up. An exiting agent
 * reports no outcome, but still its GPU results. */
void
report_flush(struct agent *a)
{
	if (!session_connected(a))
		return;
	if (a->outcome.pending && a->outcome.cc == NULL && !a->quitting &&
	    a->outcome.seq != a->outcome.sent_seq)
		send_outcome(a);
	if (a->update.pending && a->update.cc == NULL &&
	    a->update.seq != a->update.sent_seq)
		send_update(a);
}

/* The session is gone (a refused resume): what it would have said is
 * moot; a new Join carries the node's offer. */
void
report_forget(struct agent *a)
{
	a->outcome.pending = false;
	a->update.pending = false;
	a->update.nproc = a->update.master_port = a->update.gpucheck = false;
	if (a->outcome.cc != NULL)
		grpc_ccall_cancel(a->outcome.cc);
	if (a->update.cc != NULL)
		grpc_ccall_cancel(a->update.cc);
}

static void
leave_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct agent *a = arg;

	a->leave_cc = NULL;
	a->left = true;
	if (status == GRPC_OK)
		log_info("left job %s", a->opts->id);
	else
		log_warnx("leaving job %s: %s (%s)", a->opts->id,
		    msg != NULL ? msg : "", grpc_status_name(status));
	agent_step(a);
}

/* A planned leave (SPEC §4 rule 8): the job re-rounds without us. */
void
report_leave(struct agent *a, const char *reason)
{
	Rdzv__V1__LeaveRequest req = RDZV__V1__LEAVE_REQUEST__INIT;

	if (a->session_len == 0 || a->left || a->leave_cc != NULL)
		return;
	req.session_id.data = a->session_id;
	req.session_id.len = a->session_len;
	req.reason = (char *)reason;
	a->leave_cc = grpc_client_call(a->cli, "/rdzv.v1.Rendezvous/Leave",
	    &req.base, &rdzv__v1__leave_response__descriptor,
	    AGENT_LEAVE_TIMEOUT_MS, NULL, leave_done, a);
	if (a->leave_cc == NULL)
		a->left = true;
}

/* Whether calls are in flight that an exiting agent waits for (each is
 * bounded by its deadline). */
bool
report_busy(const struct agent *a)
{
	return a->leave_cc != NULL || a->update.cc != NULL ||
	    a->outcome.cc != NULL;
}

int
report_init(struct agent *a)
{
	a->report_retry_ev = evtimer_new(a->base, retry_cb, a);
	return a->report_retry_ev != NULL ? 0 : -1;
}

/* After the client is gone (its calls were cancelled). */
void
report_free(struct agent *a)
{
	if (a->report_retry_ev != NULL)
		event_free(a->report_retry_ev);
	a->report_retry_ev = NULL;
	free(a->outcome.exits);
	a->outcome.exits = NULL;
}
