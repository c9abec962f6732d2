/*
 * Rendezvous.Report: a generation's outcome or new GPU results. Answered
 * after the commit that holds it.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdzvd.h"
#include "rpc_int.h"
#include "text.h"

static void
answer(struct grpc_call *call, void *arg)
{
	Rdzv__V1__ReportResponse resp = RDZV__V1__REPORT_RESPONSE__INIT;
	resp.restart_count = *(uint32_t *)arg;
	grpc_call_reply(call, &resp.base);
}

void
rpc_report(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ReportRequest *req = (const Rdzv__V1__ReportRequest *)msg;
	struct core_report r = {
		.session_id = req->session_id.data,
		.generation = req->generation,
		.outcome = (enum core_outcome)req->outcome,
		.message = req->message[0] != '\0' ? req->message : NULL,
		.has_gpus = req->n_gpus > 0,
		.nproc = req->nproc,
		.master_port = req->master_port,
	};
	uint32_t *restarts;
	char err[512];

	if (rpc_session_or_finish(call, req->session_id) == NULL)
		return;
	if (req->outcome < RDZV__V1__OUTCOME__OUTCOME_SUCCEEDED ||
	    req->outcome > RDZV__V1__OUTCOME__OUTCOME_UPDATE) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT,
		    "unknown outcome %d", (int)req->outcome);
		return;
	}
	/* "hang" and "stuck" go with a failure (core_report reads them only
	 * there), "master_port", "starting" and "started" only with an
	 * update. */
	if (req->cause[0] == '\0')
		r.cause = CORE_CAUSE_WORKER;
	else if (strcmp(req->cause, "hang") == 0)
		r.cause = CORE_CAUSE_HANG;
	else if (strcmp(req->cause, "stuck") == 0)
		r.cause = CORE_CAUSE_STUCK;
	else if (strcmp(req->cause, "master_port") == 0 &&
	    req->outcome == RDZV__V1__OUTCOME__OUTCOME_UPDATE)
		r.cause = CORE_CAUSE_MASTER_PORT;
	else if (strcmp(req->cause, "starting") == 0 &&
	    req->outcome == RDZV__V1__OUTCOME__OUTCOME_UPDATE)
		r.cause = CORE_CAUSE_STARTING;
	else if (strcmp(req->cause, "started") == 0 &&
	    req->outcome == RDZV__V1__OUTCOME__OUTCOME_UPDATE)
		r.cause = CORE_CAUSE_STARTED;
	else {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "unknown cause "
		    "'%.*s' for this outcome: expected \"hang\" or \"stuck\" "
		    "with a failure, \"master_port\", \"starting\" or "
		    "\"started\" with an update, or none",
		    (int)utf8_prefix(req->cause, 64), req->cause);
		return;
	}
	/* Absent ranks name culprits (rule 17); a rank that is no member's
	 * names nobody. The list is bounded like a node's workers. */
	if (req->n_absent_ranks > CORE_NPROC_MAX) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "%zu absent "
		    "ranks; at most %d may be named", req->n_absent_ranks,
		    CORE_NPROC_MAX);
		return;
	}
	r.absent_ranks = req->absent_ranks;
	r.n_absent = (uint32_t)req->n_absent_ranks;
	struct core_gpu *gpus;
	int rc = convert_gpus(req->gpus, req->n_gpus, &gpus, &r.gpus_healthy,
	    &r.gpus_total, err, sizeof(err));
	if (rc != GRPC_OK) {
		grpc_call_finish(call, rc, "%s", err);
		return;
	}
	r.gpus = gpus;
	r.n_gpus = r.gpus_total;
	/* The workers' exits, for what is held against the host; a node
	 * has at most CORE_NPROC_MAX workers. */
	struct core_exit *exits = xcalloc(req->n_exits + 1, sizeof(*exits));
	r.n_exits = req->n_exits < CORE_NPROC_MAX ? (uint32_t)req->n_exits :
	    CORE_NPROC_MAX;
	for (uint32_t i = 0; i < r.n_exits; i++) {
		exits[i].exit_code = req->exits[i]->exit_code;
		exits[i].signal = req->exits[i]->signal;
	}
	r.exits = exits;
	restarts = xmalloc(sizeof(*restarts));
	rc = core_report(rdzvd.core, turn_now(), grpc_call_identity(call),
	    &r, restarts, err, sizeof(err));
	free(gpus);
	free(exits);
	if (rc != CORE_OK) {
		free(restarts);
		grpc_call_finish(call, rpc_status(rc), "%s", err);
		return;
	}
	turn_answer(call, answer, restarts);
}
