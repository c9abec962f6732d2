/*
 * `rdzv-agent coproc`: a node of a job for a launcher that runs the
 * workers itself (torchrun through python/rdzv, docs/TORCHRUN.md). It
 * joins with join's options and keeps the lease exactly as `join` does
 * (session.c: server lists, HA leaders, TLS, backoff, the checks on what
 * rdzvd says; report.c: reports and the Leave), but starts no worker:
 * what the session brings goes to stdout as one JSON object a line, and
 * what the launcher has to say comes on stdin the same way (docs/AGENT.md
 * lists both). stdout carries nothing else; the log goes to stderr.
 *
 * stdin's end means the launcher is gone (killed): the node ends without a
 * Leave, so rdzvd sees it lost, as it would see a killed agent. A signal
 * (SIGINT, SIGTERM, SIGHUP) is a planned departure: Leave, then exit.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "agent.h"
#include "log.h"
#include "rdzv/v1/control.pb-c.h"
#include "text.h"

#define COPROC_LINE_MAX		4096	/* one command */
#define COPROC_CLOSE_TIMEOUT_MS	10000
#define COPROC_QUIT_MS		(AGENT_LEAVE_TIMEOUT_MS + 5000)

#define COPROC_HELP							\
"usage: rdzv-agent coproc --id ID [options]\n"				\
"\n"									\
"Joins job ID on rdzvd for a launcher that runs this node's workers\n"	\
"itself (torchrun's rendezvous backend `rdzv`, docs/TORCHRUN.md) and keeps\n" \
"the node's lease. It starts no worker: every assignment, stop and the\n" \
"end of the job go to stdout as JSON lines; the launcher reports its\n"	\
"workers' outcome, leaves or closes the job with JSON lines on stdin\n"	\
"(docs/AGENT.md). The end of stdin ends the node without a Leave.\n"	\
"\n"									\
"It takes the options of `rdzv-agent join --help` that concern the job\n" \
"and rdzvd (the worker options do nothing here), and:\n"		\
"\n"									\
"  --id ID                       the job (default $SLURM_JOB_ID,\n"	\
"                                $PBS_JOBID)\n"				\
"  --nproc-per-node N            the launcher's workers on this node: a\n" \
"                                number (default 1)\n"			\
"\n"									\
"It exits with the job's outcome once the job ended, 1 when the launcher\n" \
"went away.\n"								\
RDZV_EXIT_HELP

static void
coproc_usage(FILE *f)
{
	help_text(f, COPROC_HELP);
}

struct coproc {
	struct node		 node;		/* the loop, the session */
	struct agent_opts	*opts;
	struct gpucheck_node	 gpucheck;	/* none: an empty GPU list */
	struct event		*in_ev;		/* stdin */
	struct evbuffer		*in;
	uint64_t		 gen;		/* the newest assignment */
	struct grpc_ccall	*close_cc;
};

/* One line of stdout; takes ownership of |o|. A launcher that no longer
 * reads is gone. */
static void
emit(struct coproc *c, json_t *o)
{
	char *s;

	if (o == NULL)
		fatalx("out of memory");
	s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (s == NULL)
		fatalx("out of memory");
	if (printf("%s\n", s) < 0 || fflush(stdout) != 0) {
		if (!c->node.quitting)
			node_quit(&c->node, AGENT_EXIT_FAILED, false,
			    "cannot write to the launcher: %s",
			    strerror(errno));
	}
	free(s);
}

/* Exits once nothing is in flight any more (each call has a deadline). */
static void
on_step(void *arg)
{
	struct coproc *c = arg;

	if (c->node.quitting && !report_busy(&c->node.report) &&
	    c->close_cc == NULL)
		event_base_loopbreak(c->node.base);
}

static void
step(struct coproc *c)
{
	node_step(&c->node);
}

/* The launcher is not heard any more once the exit is decided. */
static void
on_quitting(void *arg)
{
	struct coproc *c = arg;

	if (c->in_ev != NULL)
		event_del(c->in_ev);
}

/* ------------------------------------------------------ session events */

static void
on_joined(void *arg)
{
	struct coproc *c = arg;

	report_flush(&c->node.report);
	emit(c, json_pack("{s:s, s:I, s:s}", "event", "joined", "node_id",
	    (json_int_t)c->node.session.node_id, "server",
	    session_server(&c->node.session)));
}

static void
on_assignment(void *arg, const Rdzv__V1__Assignment *pb)
{
	struct coproc *c = arg;
	char why[256];

	if (c->node.quitting)
		return;
	if (assignment_check(c->opts->id, c->node.offer.nproc, c->gen, pb, why,
	    sizeof(why)) != 0) {
		node_quit(&c->node, AGENT_EXIT_PROTOCOL, true,
		    "protocol error from %s: %s",
		    session_server(&c->node.session), why);
		return;
	}
	if (pb->generation <= c->gen)
		return;		/* a resume repeats it */
	if (port_master_taken(&c->node, pb))
		return;		/* a new round comes, with a new port */
	c->gen = pb->generation;
	c->node.offer.started_gen = pb->generation;
	assignment_log(pb);
	emit(c, json_pack("{s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:s, s:i, "
	    "s:i, s:i}", "event", "assignment",
	    "generation", (json_int_t)pb->generation,
	    "group_rank", (int)pb->group_rank,
	    "group_world_size", (int)pb->group_world_size,
	    "base_rank", (int)pb->base_rank,
	    "local_world_size", (int)pb->local_world_size,
	    "world_size", (int)pb->world_size,
	    "master_addr", pb->master_addr,
	    "master_port", (int)pb->master_port,
	    "restart_count", (int)pb->restart_count,
	    "max_restarts", (int)pb->max_restarts));
	/* The next round's store gets a new port, as torch's own rounds do
	 * (pytorch#135712: a reused store hands out stale values). */
	if (c->opts->master_port == 0) {
		c->node.offer.master_port = port_next(
		    (uint16_t)pb->master_port);
		report_update(&c->node.report, false, true, false);
	}
}

static void
on_stop(void *arg, uint64_t gen, const char *why)
{
	struct coproc *c = arg;

	log_info("generation %llu: rdzvd says stop: %s",
	    (unsigned long long)gen, why);
	emit(c, json_pack("{s:s, s:I, s:s}", "event", "stop", "generation",
	    (json_int_t)gen, "reason", why != NULL ? why : ""));
}

static uint64_t
on_resume_generation(void *arg)
{
	return ((struct coproc *)arg)->gen;
}

static void
on_resume_refused(void *arg, uint64_t node_id, const char *why)
{
	struct coproc *c = arg;

	log_warnx("resume of node id %llu refused (%s): joining again",
	    (unsigned long long)node_id, why != NULL ? why : "no reason given");
	report_forget(&c->node.report);
	emit(c, json_pack("{s:s, s:I, s:s}", "event", "rejoin", "node_id",
	    (json_int_t)node_id, "reason", why != NULL ? why : ""));
}

static void
on_session_ended(void *arg, int status, const char *msg)
{
	struct coproc *c = arg;

	emit(c, json_pack("{s:s, s:i, s:s}", "event", "ended", "status",
	    status, "message", msg));
	node_quit(&c->node, status, false, "%s", msg);
}

static const struct session_events session_events = {
	.joined = on_joined,
	.assignment = on_assignment,
	.stop = on_stop,
	.resume_refused = on_resume_refused,
	.ended = on_session_ended,
	.resume_generation = on_resume_generation,
};


/* --------------------------------------------------------- commands */

static void
close_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	struct coproc *c = arg;

	c->close_cc = NULL;
	if (status != GRPC_OK)
		log_warnx("closing job %s: %s (%s)", c->opts->id,
		    msg != NULL ? msg : "", grpc_status_name(status));
	emit(c, json_pack("{s:s, s:b, s:s}", "event", "closed", "ok",
	    status == GRPC_OK, "message", status == GRPC_OK ? "" :
	    msg != NULL ? msg : grpc_status_name(status)));
	step(c);
}

/* The launcher closes the job (torch's set_closed): no new rounds. */
static const char *
close_job(struct coproc *c)
{
	Rdzv__V1__CloseJobRequest req = RDZV__V1__CLOSE_JOB_REQUEST__INIT;

	if (!session_connected(&c->node.session))
		return "not connected to rdzvd; try again";
	if (c->close_cc != NULL)
		return NULL;
	req.rdzv_id = (char *)c->opts->id;
	c->close_cc = grpc_client_call(c->node.session.cli,
	    "/rdzv.v1.Control/CloseJob", &req.base, &rdzv__v1__job__descriptor,
	    COPROC_CLOSE_TIMEOUT_MS, NULL, close_done, c);
	return c->close_cc == NULL ? "cannot start the call" : NULL;
}

static const char *
do_report(struct coproc *c, json_t *cmd)
{
	const char *outcome = NULL, *message = "";
	json_int_t gen = 0;
	Rdzv__V1__Outcome oc;

	if (json_unpack(cmd, "{s:I, s:s, s?:s}", "generation", &gen,
	    "outcome", &outcome, "message", &message) != 0)
		return "report needs \"generation\" (a number) and "
		    "\"outcome\" (\"succeeded\" or \"failed\")";
	if (strcmp(outcome, "succeeded") == 0)
		oc = RDZV__V1__OUTCOME__OUTCOME_SUCCEEDED;
	else if (strcmp(outcome, "failed") == 0)
		oc = RDZV__V1__OUTCOME__OUTCOME_FAILED;
	else
		return "outcome is \"succeeded\" or \"failed\"";
	if (gen <= 0 || (uint64_t)gen > c->gen)
		return "generation is not one this node was assigned";
	log_info("generation %lld: the launcher reports %s%s%s", (long long)gen,
	    outcome, *message ? ": " : "", message);
	report_outcome(&c->node.report, (uint64_t)gen, oc, NULL, 0, message);
	return NULL;
}

/*
 * The launcher's store could not bind the master port of |generation| on
 * this node (the rare race the held port leaves: another program listens
 * on it). As port_master_taken() does before a round: a new port,
 * and a new round that counts no restart.
 */
static const char *
do_port_taken(struct coproc *c, json_t *cmd)
{
	json_int_t gen = 0;

	if (json_unpack(cmd, "{s:I}", "generation", &gen) != 0)
		return "port_taken needs \"generation\" (a number)";
	if (gen <= 0 || (uint64_t)gen != c->gen)
		return "generation is not the one this node was assigned last";
	if (c->opts->master_port != 0)
		return "the master port is fixed (--master-port): no other "
		    "can be offered";
	c->node.offer.master_port = port_next(0);
	log_warnx("generation %lld: the launcher cannot bind its master port "
	    "(taken on this host); offering port %u and asking rdzvd for a "
	    "new round, with no restart counted", (long long)gen,
	    c->node.offer.master_port);
	report_port_taken(&c->node.report, (uint64_t)gen);
	return NULL;
}

/* One command line; a bad one is answered with an error line and the
 * node goes on. */
static void
command(struct coproc *c, const char *line)
{
	json_error_t jerr;
	json_t *cmd;
	const char *name = NULL, *reason = "the launcher leaves", *err = NULL;

	if ((cmd = json_loads(line, 0, &jerr)) == NULL) {
		err = "not a JSON object";
	} else if (json_unpack(cmd, "{s:s}", "cmd", &name) != 0) {
		err = "no \"cmd\"";
	} else if (strcmp(name, "report") == 0) {
		err = do_report(c, cmd);
	} else if (strcmp(name, "leave") == 0) {
		json_unpack(cmd, "{s?:s}", "reason", &reason);
		node_quit(&c->node, AGENT_EXIT_OK, true, "leaving job %s: %s",
		    c->opts->id, reason);
	} else if (strcmp(name, "close") == 0) {
		err = close_job(c);
	} else if (strcmp(name, "port_taken") == 0) {
		err = do_port_taken(c, cmd);
	} else {
		err = "unknown command; the commands are report, leave, close "
		    "and port_taken";
	}
	if (err != NULL) {
		log_warnx("from the launcher: %s: %.200s", err, line);
		emit(c, json_pack("{s:s, s:s}", "event", "error", "message",
		    err));
	}
	json_decref(cmd);
}

static void
stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	struct coproc *c = arg;
	char *line;
	size_t n;
	int rc;

	rc = evbuffer_read(c->in, fd, COPROC_LINE_MAX);
	if (rc < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	while (!c->node.quitting && (line = evbuffer_readln(c->in, &n,
	    EVBUFFER_EOL_LF)) != NULL) {
		command(c, line);
		free(line);
	}
	if (!c->node.quitting && evbuffer_get_length(c->in) > COPROC_LINE_MAX) {
		node_quit(&c->node, AGENT_EXIT_USAGE, true, "a command line "
		    "of more than %d bytes from the launcher", COPROC_LINE_MAX);
		return;
	}
	if (rc <= 0 && !c->node.quitting)
		node_quit(&c->node, AGENT_EXIT_FAILED, false, "the launcher "
		    "is gone (%s): ending without a Leave",
		    rc == 0 ? "end of stdin" : strerror(errno));
}

static void
on_signal(void *arg, int sig)
{
	struct coproc *c = arg;

	node_quit(&c->node, 128 + sig, true, "%s: leaving job %s",
	    strsignal(sig), c->opts->id);
}

/* ------------------------------------------------------------ lifetime */

static void
coproc_free(struct coproc *c)
{
	node_close(&c->node);
	if (c->in_ev != NULL)
		event_free(c->in_ev);
	if (c->in != NULL)
		evbuffer_free(c->in);
	node_free(&c->node);
}

static int
coproc_setup(struct coproc *c, char *err, size_t len)
{
	const struct node_hooks hooks = { .step = on_step, .quitting =
	    on_quitting, .signal = on_signal, .arg = c };
	struct session_events sev = session_events;

	sev.arg = c;
	if (node_setup(&c->node, c->opts, &hooks, &sev, COPROC_QUIT_MS, err,
	    len) != 0)
		return -1;
	if ((c->in = evbuffer_new()) == NULL) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	/* stdin must be something the loop can wait on: a pipe or a
	 * socket, as a launcher gives it. */
	if (evutil_make_socket_nonblocking(STDIN_FILENO) != 0 ||
	    (c->in_ev = event_new(c->node.base, STDIN_FILENO, EV_READ |
	    EV_PERSIST, stdin_cb, c)) == NULL || event_add(c->in_ev, NULL) !=
	    0) {
		snprintf(err, len, "stdin must be a pipe or a socket from the "
		    "launcher");
		return -1;
	}
	return 0;
}

static int
coproc_run(struct agent_opts *o)
{
	struct coproc c;
	char err[512];
	int rc;

	memset(&c, 0, sizeof(c));
	c.opts = o;
	node_names(&c.node, NULL);
	c.gpucheck.policy = GPUCHECK_OFF;
	c.node.offer.gpus = &c.gpucheck;
	c.node.offer.nproc = o->nproc;
	c.node.offer.master_port = o->master_port != 0 ? o->master_port :
	    port_next(0);
	if (coproc_setup(&c, err, sizeof(err)) != 0) {
		fprintf(stderr, "rdzv-agent coproc: %s\n", err);
		coproc_free(&c);
		return AGENT_EXIT_USAGE;
	}
	log_info("job %s: joining through %s as %s for a launcher with %u "
	    "worker%s", o->id, o->client.server, c.node.offer.hostname,
	    c.node.offer.nproc, plural(c.node.offer.nproc));
	rc = node_run(&c.node);
	coproc_free(&c);
	return rc;
}

static int
cmd_coproc(int argc, char **argv)
{
	struct agent_opts o;
	char err[512];
	int rc;

	rc = join_options(&o, argc, argv, coproc_usage, err, sizeof(err));
	if (rc > 0)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "rdzv-agent coproc: %s\n", err);
		return AGENT_EXIT_USAGE;
	}
	if (o.id == NULL) {
		fprintf(stderr, "rdzv-agent coproc: no job id: give --id ID "
		    "(or RDZV_ID)\n");
		return AGENT_EXIT_USAGE;
	}
	if (o.argc > 0) {
		fprintf(stderr, "rdzv-agent coproc: runs no command ('%s'): "
		    "the launcher runs the workers\n", o.argv[0]);
		return AGENT_EXIT_USAGE;
	}
	/* The launcher starts its workers itself: nothing to fork them from
	 * (docs/AGENT.md). A site-wide RDZV_PRELOAD must not stop torchrun.
	 * It is still the job's setting if this node creates the job, as
	 * the other settings are (issue 45). */
	if (o.preload != NULL)
		log_warnx("coproc: --preload %s is not used on this node: the "
		    "launcher starts the workers itself", o.preload);
	if (o.nproc_mode != NPROC_FIXED && o.nproc_mode != NPROC_SLURM) {
		fprintf(stderr, "rdzv-agent coproc: --nproc-per-node must be "
		    "the number of the launcher's workers, not gpu or auto\n");
		return AGENT_EXIT_USAGE;
	}
	return coproc_run(&o);
}

const struct cmd_entry cmd_coproc_entry = {
	.name = "coproc",
	.usage = "coproc --id ID [options]\n"
	    "        join a job for a launcher that runs the workers itself\n"
	    "        (torchrun): JSON lines on stdin and stdout",
	.exec = cmd_coproc,
	.help = coproc_usage,
};
