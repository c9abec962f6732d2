/*
 * One run of `rdzv-agent join` (SPEC §4, §6), and the hub that decides.
 * The session (session.c) says what this node should run: the newest
 * assignment, nothing (stop, a failure, a refused resume) or the end
 * (closed, failed, evicted, a signal). agent_step() then makes the workers
 * (workers.c) match: it stops a set that should not run, starts the wanted
 * generation once no set runs, and ends the event loop once quitting and
 * everything has stopped. What the workers, their GPU checks and the
 * reports tell (the *_events callbacks below) is decided here too: what
 * to report, when to stop a set at once (a GPU failed under exclude), when
 * to exit (node_quit). agent_run() owns the struct agent: agent_init()
 * sets it up, agent_free() is the one teardown path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "text.h"

/* After the workers' stop timeout, how long an exit may still take:
 * the Leave's and Reports' deadlines, and some. */
#define QUIT_SLACK_MS	15000

/* ------------------------------------------------------------ decisions */

static void
on_step(void *arg)
{
	struct agent *a = arg;
	struct workers *ws = &a->ws;
	char why[192];

	/* A hung set is being dumped: it stops once that is over. */
	if (a->hang.active)
		return;
	if (ws->state == WS_RUNNING && (!a->have_want ||
	    a->want.generation != ws->generation)) {
		if (restart_keep(a))
			return;		/* kept: in-process restart */
		if (a->node.quitting)
			snprintf(why, sizeof(why), "the agent is stopping");
		else if (a->have_want)
			snprintf(why, sizeof(why), "generation %llu replaces "
			    "it", (unsigned long long)a->want.generation);
		else
			snprintf(why, sizeof(why), "%s", a->unwant_reason);
		workers_stop(ws, WS_END_STOPPED, why);
	}
	if (ws->state != WS_IDLE)
		return;		/* on_workers_ended() steps again */
	if (a->node.quitting) {
		if (!report_busy(&a->node.report))
			event_base_loopbreak(a->node.base);
		return;
	}
	if (!a->have_want || a->want.generation <= a->node.offer.started_gen)
		return;

	/* rdzvd may not have seen our new nproc yet (a GPU left out):
	 * run only what this node can, and tell it again. */
	if (a->gpucheck.policy == GPUCHECK_EXCLUDE &&
	    a->want.local_world_size > (uint32_t)a->gpucheck.n_use) {
		log_warnx("generation %llu asks for %u worker%s but this node "
		    "offers %u: waiting for a round that knows it",
		    (unsigned long long)a->want.generation,
		    a->want.local_world_size, plural(a->want.local_world_size),
		    a->node.offer.nproc);
		a->have_want = false;
		report_update(&a->node.report, true, false, true);
		return;
	}
	/* --preload: the first workers wait for the imports, which run
	 * on; forksrv.c steps again when they may go. */
	if (forksrv_hold(&a->fs))
		return;
	a->node.offer.started_gen = a->want.generation;
	a->cur = a->want;
	inproc_reset(&a->inproc);
	ws->restart_env = restart_inproc_on(a) ? a->inproc.env : NULL;
	/* Watching first: what the new workers report is theirs. */
	if (progress_start(&a->progress, a->cur.generation,
	    (int)a->cur.local_world_size,
	    a->node.session.hang_timeout_ms) != 0 ||
	    workers_start(ws, &a->cur, &a->gpucheck) != 0) {
		node_quit(&a->node, AGENT_EXIT_FAILED, true, "cannot start the "
		    "workers of generation %llu",
		    (unsigned long long)a->cur.generation);
		return;
	}
	restart_started(a);
	/* The next round gets a new master port, as torchrun's does. */
	if (a->opts->master_port == 0) {
		a->node.offer.master_port =
		    port_next((uint16_t)a->cur.master_port);
		report_update(&a->node.report, false, true, false);
	}
}

/* Decides again on the next loop turn, out of whatever callback asked:
 * no decision runs inside another. */
static void
agent_step(struct agent *a)
{
	node_step(&a->node);
}

/* The last resort of an exit that takes too long: whatever still runs
 * is killed, whatever is in flight is dropped. */
static void
on_deadline(void *arg)
{
	struct agent *a = arg;

	workers_kill(&a->ws);
}

static void
on_quitting(void *arg)
{
	struct agent *a = arg;

	a->have_want = false;
}

/* ------------------------------------------------------ session events */

/*
 * The job's preload (issue 45, docs/AGENT.md "Warm starts"): where this
 * node has no --preload of its own, the fork server starts now, when rdzvd
 * accepted the node, and imports while the node waits for the others; its
 * first workers wait for it as they do for --preload's. This node's own
 * --preload wins for this node: it was started with the agent.
 */
static void
preload_job(struct agent *a)
{
	const char *job = a->node.session.job_preload;

	if (a->opts->preload != NULL) {
		if (job[0] != '\0' && strcmp(job, a->opts->preload) != 0 &&
		    !a->fs.job_told) {
			log_info("job %s preloads %s; this node preloads %s "
			    "(--preload wins for its own node)", a->opts->id,
			    job, a->opts->preload);
			a->fs.job_told = true;
		}
		return;
	}
	if (job[0] == '\0' || a->fs.state != FS_OFF)
		return;
	if (!forksrv_python(a->opts->argv[0])) {
		if (!a->fs.job_told)
			log_info("job %s preloads %s, but this node's workers "
			    "are not a python (%s): they start by exec",
			    a->opts->id, job, a->opts->argv[0]);
		a->fs.job_told = true;
		return;
	}
	log_info("job %s preloads %s: starting the fork server", a->opts->id,
	    job);
	forksrv_start(&a->fs, a->opts, job, "the job's preload",
	    workers_masterwait_path());
}

static void
on_joined(void *arg)
{
	struct agent *a = arg;

	netif_choose(a);
	preload_job(a);
	/* rdzvd keeps steps in memory only: after a resume (perhaps on a
	 * restarted or another rdzvd) it hears the latest again. */
	if (a->progress.has_step)
		report_progress(&a->node.report, a->progress.generation,
		    a->progress.step);
	report_flush(&a->node.report);
}

static void
on_assignment(void *arg, const Rdzv__V1__Assignment *pb)
{
	struct agent *a = arg;
	struct assignment *w = &a->want;
	uint64_t now = mono_us();
	char why[256];

	if (a->node.quitting)
		return;
	if (assignment_check(a->opts->id, a->nproc_joined, a->gen_seen, pb,
	    why, sizeof(why)) != 0) {
		node_quit(&a->node, AGENT_EXIT_PROTOCOL, true,
		    "protocol error from %s: %s",
		    session_server(&a->node.session), why);
		return;
	}
	a->gen_seen = pb->generation;
	if (pb->generation <= a->node.offer.started_gen || (a->have_want &&
	    pb->generation <= w->generation)) {
		log_debug("generation %llu: already have it",
		    (unsigned long long)pb->generation);
		return;
	}
	if (port_master_taken(&a->node, pb))
		return;		/* a new round comes, with a new port */
	memset(w, 0, sizeof(*w));
	w->generation = pb->generation;
	w->group_rank = pb->group_rank;
	w->group_world_size = pb->group_world_size;
	w->base_rank = pb->base_rank;
	w->local_world_size = pb->local_world_size;
	w->world_size = pb->world_size;
	snprintf(w->master_addr, sizeof(w->master_addr), "%s",
	    pb->master_addr);
	w->master_port = pb->master_port;
	w->restart_count = pb->restart_count;
	w->max_restarts = pb->max_restarts;
	w->arrived_us = now;
	a->have_want = true;
	assignment_log(pb);
	if (w->local_world_size == 0) {
		log_warnx("generation %llu gives this node no worker; ignored",
		    (unsigned long long)w->generation);
		a->have_want = false;
	}
	agent_step(a);
}

static void
on_stop(void *arg, uint64_t gen, const char *why)
{
	struct agent *a = arg;

	log_info("generation %llu: rdzvd says stop: %s",
	    (unsigned long long)gen, why);
	if (a->have_want && a->want.generation <= gen) {
		a->have_want = false;
		snprintf(a->unwant_reason, sizeof(a->unwant_reason), "rdzvd "
		    "said stop: %s", why);
	}
	agent_step(a);
}

/* The generation a resume names: the one we run or are about to. */
static uint64_t
on_resume_generation(void *arg)
{
	struct agent *a = arg;

	return a->have_want ? a->want.generation : 0;
}

static void
on_resume_refused(void *arg, uint64_t node_id, const char *why)
{
	struct agent *a = arg;

	log_warnx("resume of node id %llu refused (%s): stopping the workers "
	    "and joining again", (unsigned long long)node_id,
	    why != NULL ? why : "no reason given");
	report_forget(&a->node.report);
	a->have_want = false;
	snprintf(a->unwant_reason, sizeof(a->unwant_reason), "this node "
	    "joins again");
	agent_step(a);
}

/* The job ended, or this node's part in it: nothing to leave. */
static void
on_session_ended(void *arg, int status, const char *msg)
{
	struct agent *a = arg;

	node_quit(&a->node, status, false, "%s", msg);
}

static const struct session_events session_events = {
	.joined = on_joined,
	.assignment = on_assignment,
	.stop = on_stop,
	.resume_refused = on_resume_refused,
	.ended = on_session_ended,
	.resume_generation = on_resume_generation,
};

/* ------------------------------------------------------ workers events */

/* The message a FAILED report carries: the first failed worker's error
 * file, else any failed worker's, else its exit status and the last line
 * it wrote to stderr. */
static void
failure_message(struct agent *a, char *buf, size_t len)
{
	const struct workers *ws = &a->ws;
	const struct worker *first = NULL;
	char how[64], last[200];

	if (ws->first_failed >= 0)
		first = &ws->w[ws->first_failed];
	if (first != NULL && logs_error_message(first->error_file, buf, len))
		return;
	for (int i = 0; i < ws->n; i++) {
		const struct worker *w = &ws->w[i];
		if (w->exited && w->status != 0 &&
		    logs_error_message(w->error_file, buf, len))
			return;
	}
	if (first == NULL) {
		snprintf(buf, len, "a worker failed");
		return;
	}
	if (first->exec_errno != 0)
		textf(last, sizeof(last), ": %s", strerror(first->exec_errno));
	else if (!logs_stderr_tail(first->error_file, "; its last line on "
	    "stderr: ", last, sizeof(last)))
		last[0] = '\0';
	textf(buf, len, "rank %u (local rank %d) %s%s", ws->base_rank +
	    (uint32_t)first->local_rank, first->local_rank,
	    workers_describe_status(first->status, how, sizeof(how)), last);
}

/* The outcome of the set that ended, with each worker's exit. */
static void
tell_outcome(struct agent *a, Rdzv__V1__Outcome outcome, const char *msg)
{
	const struct workers *ws = &a->ws;
	int *status;

	status = xcalloc((size_t)ws->n + 1, sizeof(*status));
	for (int i = 0; i < ws->n; i++)
		status[i] = ws->w[i].status;
	report_outcome(&a->node.report, ws->generation, outcome, status, ws->n,
	    msg);
	free(status);
}

/*
 * A worker's GPU check result. A failure under exclude stops the set at
 * once, not on the next step: the worker's own exit, which follows, must
 * find the set ending for its GPU rather than count as a failed worker.
 */
static void
on_worker_checked(void *arg, const struct worker *w,
    const struct gpucheck_result *r)
{
	struct agent *a = arg;
	char desc[512];

	switch (gpucheck_node_worker(&a->gpucheck, a->ws.generation,
	    w->local_rank, r, desc, sizeof(desc))) {
	case GPUCHECK_DO_NOTHING:
		break;
	case GPUCHECK_DO_REPORT:
		report_update(&a->node.report, false, false, true);
		break;
	case GPUCHECK_DO_LEAVE:
		/* rdzvd shows the failure, though the node leaves. */
		report_update(&a->node.report, false, false, true);
		node_quit(&a->node, AGENT_EXIT_FAILED, true,
		    "GPU check failed: %s (--health-check strict: leaving "
		    "the job)", desc);
		break;
	case GPUCHECK_DO_STOP:
		workers_stop(&a->ws, WS_END_GPUCHECK, "a GPU failed its check");
		break;
	}
}

/* Every worker exec'd: now there is time for the next one's files. */
static void
on_workers_execd(void *arg)
{
	struct agent *a = arg;

	event_active(a->prepare_ev, EV_TIMEOUT, 0);
}

/*
 * GPUs that failed under exclude leave the node's offer once their set
 * ended: rdzvd re-rounds on the new nproc (no restart counted), and the
 * next assignment runs without them.
 */
static void
offer_fewer_gpus(struct agent *a)
{
	int left = gpucheck_node_ended(&a->gpucheck);

	if (left < 0)
		return;
	if (left == 0) {
		node_quit(&a->node, AGENT_EXIT_FAILED, true, "no GPU of "
		    "this node passes the check any more: leaving the job");
		return;
	}
	a->node.offer.nproc = (uint32_t)left;
	log_info("offering %d worker%s from now on (CUDA_VISIBLE_DEVICES=%s)",
	    left, plural(left), a->gpucheck.visible);
	report_update(&a->node.report, true, false, true);
}

/* The set of workers ended: report what that means. */
static void
on_workers_ended(void *arg)
{
	struct agent *a = arg;
	const struct workers *ws = &a->ws;
	bool current = a->have_want && a->want.generation == ws->generation;
	char msg[AGENT_MESSAGE_MAX + 1];

	event_active(a->prepare_ev, EV_TIMEOUT, 0);
	progress_stop(&a->progress);
	offer_fewer_gpus(a);
	restart_ended(a);
	if (a->node.quitting || !current) {
		agent_step(a);
		return;
	}
	/* A hung set was reported when the hang was found; whatever its
	 * workers did while being dumped and stopped is moot. */
	if (a->hung_gen == ws->generation) {
		a->have_want = false;
		agent_step(a);
		return;
	}
	switch (ws->end) {
	case WS_END_SUCCEEDED:
		if (ws->n == 1)
			log_info("generation %llu: its worker exited 0; "
			    "waiting for the job to close",
			    (unsigned long long)ws->generation);
		else
			log_info("generation %llu: all %d workers exited 0; "
			    "waiting for the job to close",
			    (unsigned long long)ws->generation, ws->n);
		tell_outcome(a, RDZV__V1__OUTCOME__OUTCOME_SUCCEEDED, "");
		break;
	case WS_END_FAILED:
		a->have_want = false;
		if (a->inproc_failed == ws->generation)
			break;		/* a kept worker told it (restart.c) */
		failure_message(a, msg, sizeof(msg));
		log_info("generation %llu failed: %s; reported to rdzvd",
		    (unsigned long long)ws->generation, msg);
		tell_outcome(a, RDZV__V1__OUTCOME__OUTCOME_FAILED, msg);
		break;
	case WS_END_GPUCHECK:
	case WS_END_STOPPED:
	case WS_END_HANG:
		a->have_want = false;
		break;
	}
	agent_step(a);
}

/* ----------------------------------------------------- progress events */

/* The node's step moved: rdzvd hears of it (rate-limited). */
static void
on_progress_moved(void *arg, uint64_t gen, uint64_t step)
{
	struct agent *a = arg;

	log_debug("generation %llu: step %llu", (unsigned long long)gen,
	    (unsigned long long)step);
	report_progress(&a->node.report, gen, step);
}

/* The hung workers' stacks were dumped: now they stop. */
static void
on_hang_dumped(void *arg)
{
	struct agent *a = arg;

	workers_stop(&a->ws, WS_END_HANG, "no worker made progress");
	agent_step(a);
}

static const struct progress_events progress_events = {
	.moved = on_progress_moved,
	.hung = hung_found,
};

/* ------------------------------------------------------- fence events */

/* What fencing may stop: the workers that run as wanted. */
static uint64_t
on_fence_running(void *arg)
{
	struct agent *a = arg;

	if (a->ws.state != WS_RUNNING || a->node.quitting || !a->have_want ||
	    a->want.generation != a->ws.generation)
		return 0;
	return a->ws.generation;
}

/* rdzvd cannot have heard from this node for the lease (fence.c): the
 * workers of |gen| stop until it answers. */
static void
on_fenced(void *arg, uint64_t gen, const char *why)
{
	struct agent *a = arg;

	snprintf(a->unwant_reason, sizeof(a->unwant_reason), "%s", why);
	/* Their generation lost its workers here: if rdzvd still holds it
	 * when it hears us again, that is a failure of it (a new round),
	 * not a node that waits idle in it; if not, the report is stale. */
	report_outcome(&a->node.report, gen,
	    RDZV__V1__OUTCOME__OUTCOME_FAILED, NULL, 0, a->unwant_reason);
	a->have_want = false;
	agent_step(a);
}

static const struct fence_events fence_events = {
	.running = on_fence_running,
	.fenced = on_fenced,
};

static const struct workers_events workers_events = {
	.checked = on_worker_checked,
	.execd = on_workers_execd,
	.ended = on_workers_ended,
};

/* The next generation's log files, made while nothing waits for them. */
static void
prepare_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	if (!a->node.quitting)
		logs_prepare(&a->logs, (int)a->node.offer.nproc);
}

/* ------------------------------------------------------------- signals */

static void
on_signal(void *arg, int sig)
{
	struct agent *a = arg;

	if (a->signals++ > 0) {
		log_warnx("%s again: killing the workers now",
		    strsignal(sig));
		workers_kill(&a->ws);
		return;
	}
	node_quit(&a->node, 128 + sig, true, "%s: stopping the workers and "
	    "leaving job %s", strsignal(sig), a->opts->id);
}

/* ------------------------------------------------------------ lifetime */

static int
setup(struct agent *a, char *err, size_t len)
{
	const struct node_hooks hooks = { .step = on_step, .quitting =
	    on_quitting, .deadline = on_deadline, .signal = on_signal,
	    .arg = a };
	struct session_events sev = session_events;
	struct workers_events wev = workers_events;
	struct progress_events pev = progress_events;
	struct inproc_events iev = restart_events;
	struct fence_events fev = fence_events;

	sev.arg = wev.arg = pev.arg = iev.arg = fev.arg = a;
	if (node_setup(&a->node, a->opts, &hooks, &sev,
	    a->opts->stop_timeout_ms + QUIT_SLACK_MS, err, len) != 0)
		return -1;
	if ((a->prepare_ev = event_new(a->node.base, -1, 0, prepare_cb, a)) ==
	    NULL) {
		snprintf(err, len, "cannot create the event loop");
		return -1;
	}
	if (workers_init(&a->ws, a->node.base, a->opts, &a->logs, &wev) != 0 ||
	    hang_init(&a->hang, a->node.base, on_hang_dumped, a) != 0 ||
	    hung_init(a) != 0 || fence_init(&a->fence, a->node.base,
	    &a->node.session, &a->progress, &fev) != 0) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	if (logs_init(&a->logs, a->opts->log_dir, a->opts->id, err, len) != 0)
		return -1;
	/* The workers' progress socket lives with their logs. */
	if (progress_init(&a->progress, a->node.base, a->logs.dir, &pev, err,
	    len) != 0)
		return -1;
	a->ws.progress_env = a->progress.env;
	a->ws.ifname = a->ifname;
	/* So is the socket of in-process restart (restart.c). */
	return inproc_init(&a->inproc, a->node.base, a->logs.dir, &a->ws, &iev,
	    err, len) != 0 ? -1 : 0;
}

/* The workers held for the fork server's imports may start. */
static void
on_forksrv_ready(void *arg)
{
	struct agent *a = arg;

	agent_step(a);
}

/* The one teardown path: accepts a half-built agent. */
void
agent_free(struct agent *a)
{
	node_close(&a->node);
	workers_free(&a->ws);
	forksrv_free(&a->fs);
	hang_free(&a->hang);
	hung_free(a);
	free(a->absent);
	a->absent = NULL;
	fence_free(&a->fence);
	progress_free(&a->progress);
	inproc_free(&a->inproc);
	if (a->prepare_ev != NULL)
		event_free(a->prepare_ev);
	gpucheck_node_free(&a->gpucheck);
	logs_free(&a->logs);
	node_free(&a->node);
}

/*
 * A run up to its event loop: the GPUs checked, the offer made, the loop,
 * the session, the reports, the workers and the logs set up, nothing
 * started. 0, or the exit status of a run that cannot start (then nothing
 * is left to free). tests/fuzz/fuzz_agent.c starts its agents here.
 */
int
agent_init(struct agent *a, struct agent_opts *o)
{
	char err[512];
	int rc;

	memset(a, 0, sizeof(*a));
	a->progress.fd = a->hang.pipe_fd = a->inproc.fd = -1;
	a->opts = o;
	node_names(&a->node, o->host);
	a->node.offer.gpus = &a->gpucheck;
	/* The imports of --preload run from now on, beside the GPU check
	 * and the rendezvous. */
	forksrv_init(&a->fs);
	forksrv_start(&a->fs, o, o->preload, "--preload",
	    workers_masterwait_path());
	a->fs.ready = on_forksrv_ready;
	a->fs.arg = a;
	a->ws.fs = &a->fs;
	/* The GPUs are checked before anything else: the node joins with
	 * the workers it can run (SPEC §7). */
	rc = gpucheck_node_plan(o, &a->gpucheck, &a->node.offer.nproc);
	if (rc != 0) {
		gpucheck_node_free(&a->gpucheck);
		forksrv_free(&a->fs);
		return rc;
	}
	a->nproc_joined = a->node.offer.nproc;
	if (setup(a, err, sizeof(err)) != 0 ||
	    (forksrv_attach(&a->fs, a->node.base) != 0 &&
	    snprintf(err, sizeof(err), "out of memory") > 0)) {
		fprintf(stderr, "rdzv-agent: %s\n", err);
		agent_free(a);
		return AGENT_EXIT_USAGE;
	}
	a->node.offer.master_port = o->master_port != 0 ? o->master_port :
	    port_next(0);
	return 0;
}

int
agent_run(struct agent_opts *o)
{
	struct agent a;
	int rc;

	if ((rc = agent_init(&a, o)) != 0)
		return rc;
	log_info("job %s: joining through %s as %s with %u worker%s: %s%s",
	    o->id, o->client.server, a.node.offer.hostname, a.node.offer.nproc,
	    plural(a.node.offer.nproc), o->argv[0],
	    o->argc > 1 ? " ..." : "");
	event_active(a.prepare_ev, EV_TIMEOUT, 0);
	rc = node_run(&a.node);
	agent_free(&a);
	return rc;
}
