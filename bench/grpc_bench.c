/*
 * grpc-bench: a load generator for the transport. It opens --conns client
 * connections (grpc.h), keeps --inflight unary calls of
 * /grpc.health.v1.Health/Check running on each, and prints calls per
 * second, mean, p50 and p99 latency and, with --server-pid, the server's
 * CPU time per call from /proc/PID/stat. Health/Check does almost nothing in
 * the daemon, so the figures are the cost of the gRPC/HTTP/2 path itself.
 *
 * Each connection first completes one call (connect, SETTINGS) before the
 * measured phase starts; the run then lasts --seconds or until --calls calls
 * have completed, and every loop is bounded by a hard deadline.
 *
 * --list-jobs calls /rdzv.v1.Control/ListJobs instead, a call that
 * rdzvd's auth = munge guards, and --munge-socket PATH attaches a fresh
 * MUNGE credential from that munged to each call, as rdzvctl's --auth
 * munge does: bench/munge.sh compares the two (docs/SECURITY.md).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "bench_util.h"
#include "client.h"
#include "clock.h"
#include "endpoint.h"
#include "grpc.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"

#define CHECK_PATH	"/grpc.health.v1.Health/Check"
#define LIST_PATH	"/rdzv.v1.Control/ListJobs"
#define CALL_TIMEOUT_MS	10000

enum phase {
	PHASE_WARMUP,
	PHASE_RUN,
	PHASE_DRAIN,
};

struct bench;

/* One call slot: at most one call in flight at a time. */
struct slot {
	struct bench *b;
	struct grpc_client *cli;
	uint64_t started_ns;
	int warm;		/* this slot's warm-up call is done */
};

struct bench {
	struct event_base *base;
	struct grpc_client_opts opts;
	struct grpc_client **clients;
	struct slot *slots;
	int conns, inflight;
	double seconds;
	uint64_t max_calls;	/* 0: run for |seconds| */
	pid_t server_pid;
	int list_jobs;		/* ListJobs instead of Health/Check */

	enum phase phase;
	int warming;		/* slots whose warm-up call is out */
	int outstanding;	/* calls in flight */
	uint64_t issued, done, errors, bad_replies;
	char first_error[256];

	uint64_t *lat_us;	/* latencies of measured calls */
	size_t nlat, caplat;

	uint64_t run_start_ns, run_end_ns;
	double cpu_start, cpu_end;	/* the server's, in seconds; -1 unknown */
	struct event *stop_ev, *deadline_ev;
	int timed_out;
	int closing;		/* clients are being freed */
};

static void	slot_start(struct slot *);

static void
usage(void)
{
	fprintf(stderr, "usage: grpc-bench --server ADDR [--conns N] "
	    "[--inflight K] [--seconds S | --calls M] [--server-pid PID]\n"
	    "                  [--list-jobs] [--munge-socket PATH]\n");
	exit(2);
}

static void
maybe_finish(struct bench *b)
{
	if (b->phase == PHASE_DRAIN && b->outstanding == 0)
		event_base_loopbreak(b->base);
}

/* The measured phase ends: calls still in flight drain uncounted. */
static void
end_run(struct bench *b)
{
	if (b->phase != PHASE_RUN)
		return;
	b->phase = PHASE_DRAIN;
	b->run_end_ns = mono_ns();
	if (b->server_pid != 0)
		b->cpu_end = proc_cpu_seconds(b->server_pid);
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	end_run(b);
	maybe_finish(b);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->timed_out = 1;
	event_base_loopbreak(b->base);
}

static void
begin_run(struct bench *b)
{
	b->phase = PHASE_RUN;
	if (b->server_pid != 0)
		b->cpu_start = proc_cpu_seconds(b->server_pid);
	b->run_start_ns = mono_ns();
	if (b->max_calls == 0) {
		struct timeval tv;
		tv.tv_sec = (time_t)b->seconds;
		tv.tv_usec = (suseconds_t)((b->seconds - (double)tv.tv_sec) *
		    1e6);
		evtimer_add(b->stop_ev, &tv);
	}
	for (int i = 0; i < b->conns * b->inflight; i++)
		slot_start(&b->slots[i]);
}

static void
record(struct bench *b, uint64_t us)
{
	if (b->nlat == b->caplat) {
		size_t cap = b->caplat ? b->caplat * 2 : 65536;
		uint64_t *p = realloc(b->lat_us, cap * sizeof(*p));
		if (p == NULL)
			return;		/* keep counting, lose the sample */
		b->lat_us = p;
		b->caplat = cap;
	}
	b->lat_us[b->nlat++] = us;
}

static void
on_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct slot *s = arg;
	const Grpc__Health__V1__HealthCheckResponse *r =
	    (const Grpc__Health__V1__HealthCheckResponse *)msg;

	if (!s->b->list_jobs && r->status !=
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING)
		s->b->bad_replies++;
}

static void
on_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct slot *s = arg;
	struct bench *b = s->b;
	uint64_t end = mono_ns();

	b->outstanding--;
	if (b->closing)
		return;
	if (status != GRPC_OK) {
		if (b->errors++ == 0)
			snprintf(b->first_error, sizeof(b->first_error),
			    "%s: %s", grpc_status_name(status),
			    message != NULL ? message : "");
	}

	if (!s->warm) {
		s->warm = 1;
		if (--b->warming == 0) {
			if (b->errors != 0) {
				/* The server is not answering: stop. */
				b->phase = PHASE_DRAIN;
				event_base_loopbreak(b->base);
				return;
			}
			begin_run(b);
		}
		return;
	}

	if (b->phase == PHASE_RUN || (b->phase == PHASE_DRAIN &&
	    end <= b->run_end_ns)) {
		b->done++;
		record(b, (end - s->started_ns) / 1000);
	}
	if (b->phase == PHASE_RUN && b->max_calls != 0 &&
	    b->done >= b->max_calls)
		end_run(b);
	if (b->phase == PHASE_RUN)
		slot_start(s);
	maybe_finish(b);
}

static void
slot_start(struct slot *s)
{
	struct bench *b = s->b;
	Grpc__Health__V1__HealthCheckRequest req =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	Rdzv__V1__ListJobsRequest list = RDZV__V1__LIST_JOBS_REQUEST__INIT;
	struct grpc_ccall *cc;

	if (b->max_calls != 0 && s->warm && b->issued >= b->max_calls)
		return;
	req.service = "";
	s->started_ns = mono_ns();
	b->outstanding++;
	if (s->warm)
		b->issued++;
	if (b->list_jobs)
		cc = grpc_client_call(s->cli, LIST_PATH, &list.base,
		    &rdzv__v1__list_jobs_response__descriptor, CALL_TIMEOUT_MS,
		    on_msg, on_done, s);
	else
		cc = grpc_client_call(s->cli, CHECK_PATH, &req.base,
		    &grpc__health__v1__health_check_response__descriptor,
		    CALL_TIMEOUT_MS, on_msg, on_done, s);
	if (cc == NULL) {
		b->outstanding--;
		if (b->errors++ == 0)
			snprintf(b->first_error, sizeof(b->first_error),
			    "cannot start a call: %s", strerror(errno));
		if (b->phase == PHASE_RUN)
			end_run(b);
		b->phase = PHASE_DRAIN;
		maybe_finish(b);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 'a' },
		{ "conns", required_argument, NULL, 'c' },
		{ "inflight", required_argument, NULL, 'k' },
		{ "seconds", required_argument, NULL, 's' },
		{ "calls", required_argument, NULL, 'n' },
		{ "server-pid", required_argument, NULL, 'p' },
		{ "list-jobs", no_argument, NULL, 'L' },
		{ "munge-socket", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b;
	const char *server = NULL;
	char err[256], *end;
	int ch, seconds_given = 0;

	memset(&b, 0, sizeof(b));
	b.conns = 1;
	b.inflight = 1;
	b.seconds = 3;
	b.cpu_start = b.cpu_end = -1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			server = optarg;
			break;
		case 'c':
			b.conns = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || b.conns < 1 || b.conns > 10000)
				usage();
			break;
		case 'k':
			b.inflight = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || b.inflight < 1 || b.inflight > 1000)
				usage();
			break;
		case 's':
			b.seconds = strtod(optarg, &end);
			if (*end != '\0' || !(b.seconds > 0 && b.seconds <= 3600))
				usage();
			seconds_given = 1;
			break;
		case 'n':
			b.max_calls = strtoull(optarg, &end, 10);
			if (*end != '\0' || b.max_calls == 0)
				usage();
			break;
		case 'p':
			b.server_pid = (pid_t)strtol(optarg, &end, 10);
			if (*end != '\0' || b.server_pid <= 0)
				usage();
			break;
		case 'L':
			b.list_jobs = 1;
			break;
		case 'M':
			if (!client_munge_built()) {
				fprintf(stderr, "grpc-bench: --munge-socket: "
				    "built without MUNGE\n");
				return 2;
			}
			b.opts.cred_key = CLIENT_MUNGE_HEADER;
			b.opts.cred_fn = client_munge_cred;
			b.opts.cred_arg = optarg;
			break;
		default:
			usage();
		}
	}
	if (server == NULL || optind != argc || (seconds_given &&
	    b.max_calls != 0))
		usage();
	if (endpoint_parse(server, RDZV_DEFAULT_PORT, &b.opts.server, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "grpc-bench: --server %s\n", err);
		return 2;
	}

	if ((b.base = event_base_new()) == NULL) {
		fprintf(stderr, "grpc-bench: event_base_new failed\n");
		return 1;
	}
	b.clients = calloc((size_t)b.conns, sizeof(*b.clients));
	b.slots = calloc((size_t)b.conns * (size_t)b.inflight,
	    sizeof(*b.slots));
	b.stop_ev = evtimer_new(b.base, stop_cb, &b);
	b.deadline_ev = evtimer_new(b.base, deadline_cb, &b);
	if (b.clients == NULL || b.slots == NULL || b.stop_ev == NULL ||
	    b.deadline_ev == NULL) {
		fprintf(stderr, "grpc-bench: out of memory\n");
		return 1;
	}
	for (int i = 0; i < b.conns; i++) {
		b.clients[i] = grpc_client_new(b.base, &b.opts, NULL, NULL);
		if (b.clients[i] == NULL) {
			fprintf(stderr, "grpc-bench: grpc_client_new: %s\n",
			    strerror(errno));
			return 1;
		}
	}
	for (int i = 0; i < b.conns * b.inflight; i++) {
		b.slots[i].b = &b;
		b.slots[i].cli = b.clients[i % b.conns];
	}

	/* A hard bound on the whole run: warm-up, the run, the drain. */
	struct timeval limit = { (time_t)b.seconds + 30, 0 };
	if (b.max_calls != 0)
		limit.tv_sec = 600;
	evtimer_add(b.deadline_ev, &limit);

	/* Warm up: one call per connection, then the measured phase. */
	b.warming = b.conns;
	for (int i = b.conns; i < b.conns * b.inflight; i++)
		b.slots[i].warm = 1;
	for (int i = 0; i < b.conns; i++)
		slot_start(&b.slots[i]);
	event_base_dispatch(b.base);
	end_run(&b);

	/* Calls still in flight (after a timeout) end here, uncounted. */
	b.closing = 1;
	for (int i = 0; i < b.conns; i++)
		grpc_client_free(b.clients[i]);

	int rc = 0;
	if (b.timed_out) {
		fprintf(stderr, "grpc-bench: gave up: the run did not end in "
		    "time (%d calls still in flight)\n", b.outstanding);
		rc = 1;
	}
	if (b.errors != 0) {
		fprintf(stderr, "grpc-bench: %" PRIu64 " calls failed; first: "
		    "%s\n", b.errors, b.first_error);
		rc = 1;
	}
	if (b.bad_replies != 0) {
		fprintf(stderr, "grpc-bench: %" PRIu64 " replies were not "
		    "SERVING\n", b.bad_replies);
		rc = 1;
	}

	double secs = b.run_start_ns != 0 ?
	    (double)(b.run_end_ns - b.run_start_ns) / 1e9 : 0;
	double sum = 0;
	for (size_t i = 0; i < b.nlat; i++)
		sum += (double)b.lat_us[i];
	qsort(b.lat_us, b.nlat, sizeof(*b.lat_us), cmp_u64);

	printf("server:          %s\n", server);
	printf("call:            %s%s\n", b.list_jobs ? LIST_PATH :
	    CHECK_PATH, b.opts.cred_fn != NULL ? " with a MUNGE credential" :
	    "");
	printf("connections:     %d\n", b.conns);
	printf("inflight:        %d per connection\n", b.inflight);
	printf("calls:           %" PRIu64 "\n", b.done);
	printf("seconds:         %.3f\n", secs);
	printf("calls/s:         %.1f\n", secs > 0 ? (double)b.done / secs : 0);
	printf("latency mean:    %.1f us\n", b.nlat ? sum / (double)b.nlat : 0);
	printf("latency p50:     %" PRIu64 " us\n",
	    percentile(b.lat_us, b.nlat, 0.50));
	printf("latency p99:     %" PRIu64 " us\n",
	    percentile(b.lat_us, b.nlat, 0.99));
	if (b.server_pid != 0) {
		if (b.cpu_start < 0 || b.cpu_end < 0)
			printf("server cpu/call: unknown (cannot read "
			    "/proc/%ld/stat)\n", (long)b.server_pid);
		else
			printf("server cpu/call: %.1f us\n", b.done ?
			    (b.cpu_end - b.cpu_start) * 1e6 / (double)b.done :
			    0);
	}
	if (b.done == 0 && rc == 0)
		rc = 1;

	event_free(b.stop_ev);
	event_free(b.deadline_ev);
	event_base_free(b.base);
	free(b.lat_us);
	free(b.slots);
	free(b.clients);
	return rc;
}
