/*
 * Fuzz target for the agent's handling of what rdzvd tells it: the events
 * of the Join stream, handed to session_event() (client/agent/session.c)
 * as the stream's callback hands them, and behind it agent.c's decisions
 * (assignment_check, which refuses impossible assignments, on_assignment,
 * on_stop, the end of the session, agent_step, node_quit) and what they
 * set off in report.c and logs.c. The agent is built by agent_init() as
 * a run builds it (no GPU check; --log-dir in a private directory; its
 * rdzvd is a unix socket nobody listens on, so its Reports and Leave fail
 * at once and stay pending) and freed by agent_free().
 *
 * The workers are not forked: this file takes workers.c's place (the
 * target links the agent's sources without main.c and workers.c). A set
 * "runs" from workers_start() until the input says how it ends; a set
 * being stopped ends when the input says so, or at the end. What is
 * covered: every JoinEvent the agent may receive, interleaved with its
 * workers' ends, error files and signals. What is not: the Join stream's
 * own end (join_done: resume, refusal, retries), the connection, the
 * Health check, the GPU check and workers.c itself.
 *
 * Input layout (tests/fuzz/make_corpus_client.py writes the seeds):
 *   byte 0   bits 0-2: the workers this node offers, minus 1; bit 3:
 *            --master-port 0 (a free port each round) rather than 29500;
 *            bit 4: workers_start() fails
 *   then records, each a tag byte and what it says:
 *     tag & 3 == 0   a JoinEvent: a 2-byte big-endian length, the bytes
 *                    (one that does not decode or is not UTF-8 is
 *                    skipped: the client refuses it, lib/grpc/grpc_client.c)
 *     tag & 3 == 1   the set ends: (tag >> 2) & 3 is how (0: every worker
 *                    exits 0; 1: local rank (tag >> 4) exits 1; 2: it is
 *                    killed by SIGKILL; 3: it cannot exec); a set being
 *                    stopped ends with SIGTERM whatever the tag says
 *     tag & 3 == 2   a signal to the agent: SIGTERM, SIGINT or SIGHUP by
 *                    (tag >> 2) % 3
 *     tag & 3 == 3   (tag >> 2) & 3: 0 every worker has exec'd; 1 local
 *                    rank (tag >> 4) leaves an error file: a 2-byte
 *                    length, then its JSON; 2, 3 nothing
 *   After each record the event loop turns until it is idle. At the end
 *   the agent gets SIGTERM, its workers end, and its loop must end.
 *
 * Invariants checked (a violation aborts): workers are started only when
 * none run, for a generation above every one started before, with at
 * least one worker and no more than the node offered, ranks inside the
 * world and the node inside its group; the message of an outcome report
 * is valid UTF-8 (rdzvd refuses a Report otherwise); after SIGTERM and
 * its workers' end the agent ends its loop.
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_peer.h"
#include "agent.h"
#include "log.h"
#include "pb_strings.h"
#include "text.h"

/* Passes of the loop with nothing to do before it counts as idle: a
 * callback may arm a zero timer that the next pass runs. */
#define QUIET_TURNS	3
#define MAX_TURNS	64

static int debug;
static char dir[64], log_dir[80], sock[80];

/* What the target knows of the run, to check the agent against. */
static struct {
	uint32_t	 offered;	/* workers offered at the join */
	uint64_t	 started_gen;	/* highest generation started */
	bool		 start_fails;
} run;

/* --------------------------------------------------- workers.c's place */

int
workers_init(struct workers *ws, struct event_base *base,
    const struct agent_opts *opts, struct logs *logs,
    const struct workers_events *ev)
{
	memset(ws, 0, sizeof(*ws));
	ws->base = base;
	ws->opts = opts;
	ws->logs = logs;
	ws->ev = *ev;
	ws->state = WS_IDLE;
	ws->first_failed = -1;
	return 0;
}

int
workers_start(struct workers *ws, const struct assignment *asg,
    const struct gpucheck_node *g)
{
	FUZZ_ASSERT(ws->state == WS_IDLE);
	FUZZ_ASSERT(asg->local_world_size >= 1);
	FUZZ_ASSERT(asg->local_world_size <= run.offered);
	FUZZ_ASSERT((uint64_t)asg->base_rank + asg->local_world_size <=
	    asg->world_size);
	FUZZ_ASSERT(asg->group_rank < asg->group_world_size);
	FUZZ_ASSERT(asg->generation > run.started_gen);
	run.started_gen = asg->generation;
	if (run.start_fails)
		return -1;

	free(ws->w);
	if ((ws->w = calloc(asg->local_world_size, sizeof(*ws->w))) == NULL)
		abort();
	ws->n = (int)asg->local_world_size;
	ws->state = WS_RUNNING;
	ws->end = WS_END_SUCCEEDED;
	ws->generation = asg->generation;
	ws->base_rank = asg->base_rank;
	ws->arrived_us = asg->arrived_us;
	ws->alive = ws->n;
	ws->execd = 0;
	ws->first_failed = -1;
	ws->killed = false;
	for (int i = 0; i < ws->n; i++) {
		ws->w[i].ws = ws;
		ws->w[i].local_rank = i;
		ws->w[i].pipe_fd = -1;
		ws->w[i].device = gpucheck_node_device(g, i);
	}
	return 0;
}

/* Workers that were sent SIGTERM exit when the input says so. */
void
workers_stop(struct workers *ws, enum ws_end end, const char *why)
{
	if (ws->state != WS_RUNNING)
		return;
	ws->end = end;
	ws->state = WS_STOPPING;
}

void
workers_kill(struct workers *ws)
{
	if (ws->state != WS_IDLE)
		ws->killed = true;
}

void
workers_free(struct workers *ws)
{
	free(ws->w);
	ws->w = NULL;
	ws->n = 0;
}

const char *
workers_describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "ended with status %#x", status);
	return buf;
}

/* No fork server (forksrv.c, built with workers.c): the fuzzed agents
 * have no --preload, and start none for a job's preload either. */
const char *
workers_masterwait_path(void)
{
	return NULL;
}

bool
forksrv_python(const char *cmd)
{
	return false;
}

bool
forksrv_modules_ok(const char *modules)
{
	return false;
}

void
forksrv_init(struct forksrv *fs)
{
	memset(fs, 0, sizeof(*fs));
	fs->fd = -1;
}

void
forksrv_start(struct forksrv *fs, const struct agent_opts *o,
    const char *modules, const char *origin, const char *masterwait)
{
}

int
forksrv_attach(struct forksrv *fs, struct event_base *base)
{
	return 0;
}

bool
forksrv_hold(struct forksrv *fs)
{
	return false;
}

void
forksrv_free(struct forksrv *fs)
{
}

/* The set ends, as workers.c's set_ended() tells the agent. */
static void
fake_end(struct workers *ws, int how, int rank)
{
	int failed = ws->n > 0 ? rank % ws->n : 0;

	if (ws->state == WS_IDLE)
		return;
	for (int i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		w->exited = true;
		if (ws->state == WS_STOPPING)
			w->status = ws->killed ? SIGKILL : SIGTERM;
		else if (how == 0 || i != failed)
			w->status = how == 0 ? 0 : SIGTERM;
		else if (how == 1)
			w->status = 1 << 8;
		else if (how == 2)
			w->status = SIGKILL;
		else {
			w->status = 127 << 8;
			w->exec_errno = ENOENT;
		}
	}
	if (ws->state == WS_RUNNING && how != 0) {
		ws->first_failed = failed;
		ws->end = WS_END_FAILED;
	}
	ws->alive = 0;
	ws->state = WS_IDLE;
	ws->ev.ended(ws->ev.arg);
}

static void
fake_execd(struct workers *ws)
{
	if (ws->state != WS_RUNNING || ws->execd == ws->n)
		return;
	ws->execd = ws->n;
	for (int i = 0; i < ws->n; i++)
		ws->w[i].execd = true;
	ws->ev.execd(ws->ev.arg);
}

/* Local rank |rank| of the running set leaves torch's error file. */
static void
fake_error_file(struct workers *ws, int rank, const uint8_t *p, size_t len)
{
	struct worker *w;
	int fd;

	if (ws->state != WS_RUNNING || ws->n == 0)
		return;
	w = &ws->w[rank % ws->n];
	snprintf(w->error_file, sizeof(w->error_file), "%s/error-%d.json",
	    dir, w->local_rank);
	fd = open(w->error_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600);
	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, p, len) == (ssize_t)len);
	close(fd);
}

/* ------------------------------------------------------------ the run */

static void
cleanup(void)
{
	char p[sizeof(dir) + 32];

	for (int i = 0; i < 8; i++) {
		snprintf(p, sizeof(p), "%s/error-%d.json", dir, i);
		unlink(p);
	}
	rmdir(log_dir);
	rmdir(dir);
}

static void
setup_once(void)
{

	if (dir[0] != '\0')
		return;
	debug = fuzz_peer_start("rdzv-agent-fuzz", dir, sizeof(dir));
	snprintf(log_dir, sizeof(log_dir), "%s/logs", dir);
	snprintf(sock, sizeof(sock), "unix:%s/rdzvd.sock", dir);
	atexit(cleanup);
}

/* Turns the loop until it is idle. 1 when the agent ended it. */
static int
turn(struct agent *a)
{
	int quiet = 0;

	for (int t = 0; t < MAX_TURNS && quiet < QUIET_TURNS; t++) {
		event_base_loop(a->node.base, EVLOOP_NONBLOCK);
		if (event_base_got_break(a->node.base))
			return 1;
		if (event_base_get_num_events(a->node.base,
		    EVENT_BASE_COUNT_ACTIVE) > 0)
			quiet = 0;
		else
			quiet++;
	}
	return 0;
}

static void
check(const struct agent *a)
{
	const struct outcome_report *r = &a->node.report.outcome;

	if (r->pending)
		FUZZ_ASSERT(utf8_valid(r->message, strlen(r->message)));
}

static size_t
take_len(const uint8_t *p, size_t len, size_t *off)
{
	size_t n;

	if (len - *off < 2) {
		*off = len;
		return 0;
	}
	n = (size_t)p[*off] << 8 | p[*off + 1];
	*off += 2;
	if (n > len - *off)
		n = len - *off;
	return n;
}

static void
join_event(struct agent *a, const uint8_t *p, size_t len)
{
	Rdzv__V1__JoinEvent *ev;
	char path[128];

	if ((ev = rdzv__v1__join_event__unpack(NULL, len, p)) == NULL)
		return;
	if (pb_utf8_check(&ev->base, path, sizeof(path)) == 0)
		session_event(&a->node.session, ev);
	rdzv__v1__join_event__free_unpacked(ev, NULL);
}

/* The records of the input, until the agent ends its loop. 1 then. */
static int
records(struct agent *a, const uint8_t *p, size_t len)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	size_t off = 0, n;

	while (off < len) {
		uint8_t tag = p[off++];
		switch (tag & 3) {
		case 0:
			n = take_len(p, len, &off);
			join_event(a, p + off, n);
			off += n;
			break;
		case 1:
			fake_end(&a->ws, (tag >> 2) & 3, tag >> 4);
			break;
		case 2:
			raise(sigs[(tag >> 2) % 3]);
			break;
		case 3:
			if (((tag >> 2) & 3) == 0)
				fake_execd(&a->ws);
			else if (((tag >> 2) & 3) == 1) {
				n = take_len(p, len, &off);
				fake_error_file(&a->ws, tag >> 4, p + off, n);
				off += n;
			}
			break;
		}
		check(a);
		if (turn(a))
			return 1;
		check(a);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[] = { (char *)"/bin/true", NULL };
	struct agent_opts o;
	struct agent a;
	int ended;

	if (size < 1 || size > 256 * 1024)
		return 0;
	setup_once();

	/* cmd_join.c's defaults, then what a test's agent is given. */
	memset(&o, 0, sizeof(o));
	o.client.server = sock;
	o.client.connect_timeout_ms = 10000;
	o.id = "job-1";
	o.nproc_mode = NPROC_FIXED;
	o.nproc = 1 + (data[0] & 7);
	o.nproc_set = true;
	o.role = "default";
	o.gpucheck.policy = GPUCHECK_OFF;
	o.gpucheck.timeout_ms = AGENT_GPUCHECK_TIMEOUT_MS;
	o.stop_timeout_ms = AGENT_STOP_TIMEOUT_MS;
	o.reconnect_timeout_ms = AGENT_RECONNECT_MS;
	o.master_port = data[0] & 8 ? 0 : 29500;
	o.log_dir = log_dir;
	o.argv = argv;
	o.argc = 1;
	memset(&run, 0, sizeof(run));
	run.offered = o.nproc;
	run.start_fails = (data[0] & 16) != 0;

	FUZZ_ASSERT(agent_init(&a, &o) == 0);
	FUZZ_ASSERT(a.node.offer.nproc == o.nproc);
	ended = records(&a, data + 1, size - 1);

	/* The operator stops the agent; its workers stop; it exits. */
	if (!ended) {
		raise(SIGTERM);
		ended = turn(&a);
	}
	for (int i = 0; i < 4 && !ended; i++) {
		fake_end(&a.ws, 0, 0);
		ended = turn(&a);
	}
	FUZZ_ASSERT(ended);
	if (debug)
		fprintf(stderr, "fuzz: the agent exits with %d\n",
		    a.node.exit_status);
	agent_free(&a);
	return 0;
}
