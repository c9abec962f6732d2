/*
 * rdzv-join-bench: N simulated agents join one job (min = max = N) over
 * their own connections, all on one event loop, and the figures of that
 * rendezvous are printed: how long from the last Join sent to the last
 * assignment received, from the first connect to the last assignment, the
 * daemon's CPU time (from /proc/PID/stat with --daemon-pid) and the number
 * of SQLite transactions the daemon committed meanwhile (from ServerInfo,
 * when the daemon reports it). These are figures, not a timed test.
 *
 * Each client first completes one Health/Check (connect, SETTINGS), so the
 * joins are sent over established connections; then every Join goes out in
 * one loop turn. The assignments are checked: one generation, world size N,
 * group ranks a permutation of 0..N-1. Every wait is bounded by --timeout.
 */
#include <sys/resource.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "bench_util.h"
#include "endpoint.h"
#include "grpc.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

#define CHECK_PATH	"/grpc.health.v1.Health/Check"
#define JOIN_PATH	"/rdzv.v1.Rendezvous/Join"
#define INFO_PATH	"/rdzv.v1.Control/ServerInfo"

enum phase {
	PHASE_CONNECT,
	PHASE_JOIN,
	PHASE_DONE,
};

struct bench;

/* One simulated agent: its own connection and Join stream. */
struct agent {
	struct bench		*b;
	int			 idx;
	struct grpc_client	*cli;
	struct grpc_ccall	*join;
	char			 hostname[32];
	int			 connected;
	uint64_t		 t_connected;	/* its Health/Check answered */
	int			 assigned;
	uint32_t		 group_rank;
};

struct bench {
	struct event_base	*base;
	struct grpc_client_opts	 opts;
	struct agent		*agents;
	int			 n;
	const char		*rdzv_id;
	pid_t			 daemon_pid;
	double			 timeout_s;

	enum phase		 phase;
	int			 n_connected, n_assigned, n_accepted;
	int			 errors;
	char			 first_error[512];
	uint64_t		 generation;
	uint32_t		 world_size;
	unsigned char		*rank_seen;

	uint64_t		 t_first_connect, t_connected, t_last_join_sent;
	uint64_t		 t_last_assignment;
	struct event		*deadline_ev;
	int			 timed_out;
	int			 closing;
};

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void
usage(void)
{
	fprintf(stderr, "usage: rdzv-join-bench --server ADDR [--nodes N] "
	    "[--id RDZV_ID] [--daemon-pid PID] [--timeout SECONDS]\n");
	exit(2);
}

/*
 * The daemon's committed transactions from ServerInfo, or -1 when it does
 * not say. The field is looked up by name so that the bench also runs
 * against a daemon (and a proto) without it.
 */
static int64_t
server_transactions(const struct grpc_client_opts *opts)
{
	Rdzv__V1__ServerInfoRequest req = RDZV__V1__SERVER_INFO_REQUEST__INIT;
	const ProtobufCMessageDescriptor *d =
	    &rdzv__v1__server_info_response__descriptor;
	const ProtobufCFieldDescriptor *f;
	ProtobufCMessage *reply = NULL;
	int64_t v = -1;

	if (grpc_unary_sync(opts, INFO_PATH, &req.base, d, 10000, &reply,
	    NULL) != GRPC_OK)
		return -1;
	f = protobuf_c_message_descriptor_get_field_by_name(d, "transactions");
	if (f != NULL && f->type == PROTOBUF_C_TYPE_UINT64)
		v = (int64_t)*(const uint64_t *)((const char *)reply +
		    f->offset);
	protobuf_c_message_free_unpacked(reply, NULL);
	return v;
}

static void
fail(struct bench *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fail(struct bench *b, const char *fmt, ...)
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

static void
on_join_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->b;
	const Rdzv__V1__JoinEvent *ev = (const Rdzv__V1__JoinEvent *)msg;
	const Rdzv__V1__Assignment *as;

	if (b->closing)
		return;
	switch (ev->event_case) {
	case RDZV__V1__JOIN_EVENT__EVENT_ACCEPTED:
		b->n_accepted++;
		return;
	case RDZV__V1__JOIN_EVENT__EVENT_WAITING:
		return;
	case RDZV__V1__JOIN_EVENT__EVENT_ASSIGNMENT:
		break;
	default:
		fail(b, "node %d: unexpected join event %d", a->idx,
		    (int)ev->event_case);
		return;
	}

	as = ev->assignment;
	if (a->assigned) {
		fail(b, "node %d: a second assignment (generation %" PRIu64
		    ")", a->idx, as->generation);
		return;
	}
	if (b->n_assigned == 0) {
		b->generation = as->generation;
		b->world_size = as->world_size;
	}
	if (as->generation != b->generation || as->world_size !=
	    (uint32_t)b->n || as->group_world_size != (uint32_t)b->n ||
	    as->group_rank >= (uint32_t)b->n || b->rank_seen[as->group_rank] ||
	    as->base_rank != as->group_rank) {
		fail(b, "node %d: inconsistent assignment: generation %" PRIu64
		    " (first %" PRIu64 "), world %u, group rank %u of %u, base "
		    "rank %u", a->idx, as->generation, b->generation,
		    as->world_size, as->group_rank, as->group_world_size,
		    as->base_rank);
		return;
	}
	b->rank_seen[as->group_rank] = 1;
	a->assigned = 1;
	a->group_rank = as->group_rank;
	if (++b->n_assigned == b->n) {
		b->t_last_assignment = now_us();
		b->phase = PHASE_DONE;
		event_base_loopbreak(b->base);
	}
}

static void
on_join_done(struct grpc_ccall *cc, int status, const char *message,
    void *arg)
{
	struct agent *a = arg;

	a->join = NULL;
	if (a->b->closing)
		return;
	fail(a->b, "node %d: Join ended: %s%s%s", a->idx,
	    grpc_status_name(status), message != NULL ? ": " : "",
	    message != NULL ? message : "");
}

static void
send_joins(struct bench *b)
{
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;

	b->phase = PHASE_JOIN;
	req.rdzv_id = (char *)b->rdzv_id;
	req.min_nodes = req.max_nodes = (uint32_t)b->n;
	req.last_call_timeout_ms = 60000;
	req.advertise_addr = "127.0.0.1";
	req.master_port = 29500;
	req.nproc = 1;
	req.has_rank_hint = 1;
	req.agent_version = "rdzv-join-bench";
	for (int i = 0; i < b->n; i++) {
		struct agent *a = &b->agents[i];

		req.hostname = a->hostname;
		req.rank_hint = (uint32_t)i;
		a->join = grpc_client_call(a->cli, JOIN_PATH, &req.base,
		    &rdzv__v1__join_event__descriptor, 0, on_join_msg,
		    on_join_done, a);
		if (a->join == NULL) {
			fail(b, "node %d: cannot start Join: %s", i,
			    strerror(errno));
			return;
		}
	}
	b->t_last_join_sent = now_us();
}

static void
on_check_done(struct grpc_ccall *cc, int status, const char *message,
    void *arg)
{
	struct agent *a = arg;
	struct bench *b = a->b;

	if (b->closing)
		return;
	if (status != GRPC_OK) {
		fail(b, "node %d: connect (Health/Check): %s%s%s", a->idx,
		    grpc_status_name(status), message != NULL ? ": " : "",
		    message != NULL ? message : "");
		return;
	}
	a->connected = 1;
	a->t_connected = now_us();
	if (++b->n_connected == b->n) {
		b->t_connected = now_us();
		send_joins(b);
	}
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			fprintf(stderr, "rdzv-join-bench: setrlimit: %s\n",
			    strerror(errno));
	}
}

static double
ms(uint64_t from, uint64_t to)
{
	return (double)(to - from) / 1000.0;
}

static int
cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * Prints when the agents' connections were ready, as percentiles from the
 * first connect: a tail near 1 s or 3 s means SYNs were dropped (a listen
 * queue overflowed) and retransmitted.
 */
static void
print_connect_spread(const struct bench *b)
{
	uint64_t *t;
	int n = 0;

	if ((t = calloc((size_t)b->n, sizeof(*t))) == NULL)
		return;
	for (int i = 0; i < b->n; i++)
		if (b->agents[i].connected)
			t[n++] = b->agents[i].t_connected - b->t_first_connect;
	if (n > 0) {
		qsort(t, (size_t)n, sizeof(*t), cmp_u64);
		printf("connect p50/p99/max:   %.1f / %.1f / %.1f ms\n",
		    (double)t[n / 2] / 1000.0,
		    (double)t[(size_t)((double)(n - 1) * 0.99)] / 1000.0,
		    (double)t[n - 1] / 1000.0);
	}
	free(t);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 'a' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "id", required_argument, NULL, 'i' },
		{ "daemon-pid", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Grpc__Health__V1__HealthCheckRequest check =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct bench b;
	const char *server = NULL;
	char err[256], idbuf[64], *end;
	double cpu0 = -1, cpu1 = -1;
	int64_t tx0, tx1;
	struct rlimit rl;
	int ch, rc = 0;

	signal(SIGPIPE, SIG_IGN);
	memset(&b, 0, sizeof(b));
	b.n = 1000;
	b.timeout_s = 120;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			server = optarg;
			break;
		case 'n':
			b.n = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || b.n < 1 || b.n > 100000)
				usage();
			break;
		case 'i':
			b.rdzv_id = optarg;
			break;
		case 'p':
			b.daemon_pid = (pid_t)strtol(optarg, &end, 10);
			if (*end != '\0' || b.daemon_pid <= 0)
				usage();
			break;
		case 't':
			b.timeout_s = strtod(optarg, &end);
			if (*end != '\0' || !(b.timeout_s > 0 &&
			    b.timeout_s <= 3600))
				usage();
			break;
		default:
			usage();
		}
	}
	if (server == NULL || optind != argc)
		usage();
	if (endpoint_parse(server, RDZV_DEFAULT_PORT, &b.opts.server, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "rdzv-join-bench: --server %s\n", err);
		return 2;
	}
	if (b.rdzv_id == NULL) {
		snprintf(idbuf, sizeof(idbuf), "join-bench-%ld-%lld",
		    (long)getpid(), (long long)time(NULL));
		b.rdzv_id = idbuf;
	}
	b.opts.connect_timeout_ms = (uint32_t)(b.timeout_s * 1000);

	/* One descriptor per agent, plus a few. */
	raise_nofile();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur !=
	    RLIM_INFINITY && (rlim_t)b.n + 32 > rl.rlim_cur) {
		fprintf(stderr, "rdzv-join-bench: %d nodes need more than the "
		    "%llu open files allowed (ulimit -n)\n", b.n,
		    (unsigned long long)rl.rlim_cur);
		return 1;
	}

	if ((b.base = event_base_new()) == NULL ||
	    (b.agents = calloc((size_t)b.n, sizeof(*b.agents))) == NULL ||
	    (b.rank_seen = calloc((size_t)b.n, 1)) == NULL ||
	    (b.deadline_ev = evtimer_new(b.base, deadline_cb, &b)) == NULL) {
		fprintf(stderr, "rdzv-join-bench: out of memory\n");
		return 1;
	}
	for (int i = 0; i < b.n; i++) {
		struct agent *a = &b.agents[i];

		a->b = &b;
		a->idx = i;
		snprintf(a->hostname, sizeof(a->hostname), "bench-%05d", i);
		if ((a->cli = grpc_client_new(b.base, &b.opts, NULL,
		    NULL)) == NULL) {
			fprintf(stderr, "rdzv-join-bench: grpc_client_new: "
			    "%s\n", strerror(errno));
			return 1;
		}
	}

	tx0 = server_transactions(&b.opts);
	if (b.daemon_pid != 0)
		cpu0 = proc_cpu_seconds(b.daemon_pid);

	struct timeval limit;
	limit.tv_sec = (time_t)b.timeout_s;
	limit.tv_usec = (suseconds_t)((b.timeout_s - (double)limit.tv_sec) *
	    1e6);
	evtimer_add(b.deadline_ev, &limit);

	/* Connect every agent: one Health/Check each. */
	check.service = "";
	b.t_first_connect = now_us();
	for (int i = 0; i < b.n && b.phase == PHASE_CONNECT; i++) {
		if (grpc_client_call(b.agents[i].cli, CHECK_PATH, &check.base,
		    &grpc__health__v1__health_check_response__descriptor,
		    (uint32_t)(b.timeout_s * 1000), NULL, on_check_done,
		    &b.agents[i]) == NULL)
			fail(&b, "node %d: cannot start a call: %s", i,
			    strerror(errno));
	}
	if (b.phase != PHASE_DONE)
		event_base_dispatch(b.base);

	if (b.daemon_pid != 0)
		cpu1 = proc_cpu_seconds(b.daemon_pid);
	tx1 = server_transactions(&b.opts);

	/* Streams still open are cancelled, uncounted. */
	b.closing = 1;
	for (int i = 0; i < b.n; i++)
		grpc_client_free(b.agents[i].cli);

	if (b.timed_out) {
		fprintf(stderr, "rdzv-join-bench: gave up after %.0f s: %d of "
		    "%d connected, %d accepted, %d assigned\n", b.timeout_s,
		    b.n_connected, b.n, b.n_accepted, b.n_assigned);
		rc = 1;
	}
	if (b.errors != 0) {
		fprintf(stderr, "rdzv-join-bench: %s\n", b.first_error);
		rc = 1;
	}

	printf("server:                %s\n", server);
	printf("job:                   %s\n", b.rdzv_id);
	printf("nodes:                 %d\n", b.n);
	printf("assigned:              %d\n", b.n_assigned);
	if (rc == 0) {
		printf("generation:            %" PRIu64 "\n", b.generation);
		printf("world size:            %u\n", b.world_size);
		printf("connect all:           %.1f ms\n",
		    ms(b.t_first_connect, b.t_connected));
		print_connect_spread(&b);
		printf("last join to last assignment: %.1f ms\n",
		    ms(b.t_last_join_sent, b.t_last_assignment));
		printf("first connect to last assignment: %.1f ms\n",
		    ms(b.t_first_connect, b.t_last_assignment));
	}
	if (b.daemon_pid != 0) {
		if (cpu0 < 0 || cpu1 < 0)
			printf("daemon cpu:            unknown (cannot read "
			    "/proc/%ld/stat)\n", (long)b.daemon_pid);
		else
			printf("daemon cpu:            %.1f ms\n",
			    (cpu1 - cpu0) * 1000.0);
	}
	if (tx0 >= 0 && tx1 >= 0)
		printf("sqlite transactions:   %" PRId64 "\n", tx1 - tx0);
	else
		printf("sqlite transactions:   unknown (ServerInfo does not "
		    "report them)\n");

	event_free(b.deadline_ev);
	event_base_free(b.base);
	free(b.rank_seen);
	free(b.agents);
	return rc;
}
