/*
 * rdzv-bench: simulates N nodes per job, each with its own gRPC connection,
 * joining one or many jobs at once (min = max = N unless --min-nodes), and
 * prints the figures of those rendezvous as "name: value" lines:
 *
 * - the time from the first connect to the last assignment, and from the
 *   last Join sent to the last assignment;
 * - each node's time from its Join to its assignment, as percentiles;
 * - with --daemon-pid, the daemon's CPU time over the run and its resident
 *   memory (now, and the peak since it started) from /proc, and that peak
 *   per connected node;
 * - the store transactions the daemon committed (ServerInfo);
 * - with --kill K, the time from closing K connections of each job until
 *   every survivor holds its new assignment, also counted from the end of
 *   the reconnect grace (--grace);
 * - with --failover (and --server listing the replicas of an HA rdzvd),
 *   the time from killing the leader until every node has resumed on the
 *   new one (rdzv_bench_failover.c).
 *
 * A --server value may list the replicas of an HA rdzvd ("a,b,c", SPEC
 * §14): the nodes then all go to the one that leads, found before the run
 * as rdzv-agent finds it (a standby's leader hint, else the next).
 *
 * --client wire makes each node write the bytes lib/grpc's client would
 * write (encoded once by nghttp2, rdzv_bench_wire.c) and parse what it
 * reads with no nghttp2 session of its own: rdzvd gets the same bytes, the
 * nodes (standing for other machines) cost this one about what
 * rdzv-floor's client costs. --client grpc, the default, runs lib/grpc's
 * client per node.
 *
 * These are figures, not a timed test: they vary with the machine and its
 * load. The nodes run in rdzv_bench_run.c.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_util.h"
#include "endpoint.h"
#include "parse.h"
#include "servers.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"

#define INFO_PATH	"/rdzv.v1.Control/ServerInfo"
#define CHECK_PATH	"/grpc.health.v1.Health/Check"

static void
usage(void)
{
	fprintf(stderr, "usage: rdzv-bench --server ADDR[,ADDR...] "
	    "[--server ADDR[,ADDR...]]... "
	    "[--nodes N] [--jobs J]\n"
	    "                  [--nproc P] [--min-nodes M] [--kill K] "
	    "[--grace DURATION]\n"
	    "                  [--id PREFIX] [--daemon-pid PID] "
	    "[--timeout SECONDS]\n"
	    "                  [--phase-times] [--failover "
	    "[--max-backoff DURATION]] [--client grpc|wire]\n");
	exit(2);
}

static int
parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
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

/*
 * The replica of |list| that serves rdzv.v1.Rendezvous (the leader) into
 * |opts|->server: each is asked by Health/Check in the order of
 * client/common/servers.h until one says SERVING, or every one failed.
 * 0, or -1 with the last answer in |err|.
 */
static int
find_leader(const char *list, struct grpc_client_opts *opts, char *err,
    size_t errlen)
{
	Grpc__Health__V1__HealthCheckRequest req =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	Grpc__Health__V1__HealthCheckResponse *r;
	struct server_list sl;
	char *msg, *hint;
	int status;

	if (server_list_parse(&sl, list, RDZV_DEFAULT_PORT, err, errlen) != 0)
		return -1;
	req.service = "rdzv.v1.Rendezvous";
	/* A round visits each server once, plus as many hints: bounded. */
	for (;;) {
		opts->server = server_list_current(&sl)->ep;
		status = grpc_unary_sync_trailer(opts, CHECK_PATH, &req.base,
		    &grpc__health__v1__health_check_response__descriptor,
		    10000, (ProtobufCMessage **)&r, &msg,
		    SERVER_LEADER_TRAILER, &hint);
		if (status == GRPC_OK) {
			int serving = r->status ==
			    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
			protobuf_c_message_free_unpacked(&r->base, NULL);
			if (serving) {
				free(hint);
				return 0;
			}
			status = GRPC_UNAVAILABLE;
			free(msg);
			msg = strdup("not serving (a standby?)");
		}
		snprintf(err, errlen, "%s: %s (%s)",
		    server_list_current(&sl)->name, msg != NULL ? msg : "",
		    grpc_status_name(status));
		free(msg);
		if (server_list_failed(&sl, hint) == SERVER_MOVE_ROUND) {
			free(hint);
			return -1;
		}
		free(hint);
	}
}

static double
ms(uint64_t us)
{
	return (double)us / 1000.0;
}

/*
 * The spreads of connect times (from the first connect: a tail near 1 s or
 * 3 s means SYNs were dropped and retransmitted), of each node's Join to its
 * assignment and, after --kill, of the close to each survivor's new
 * assignment.
 */
static void
print_spreads(const struct bench *b)
{
	uint64_t *t;
	size_t n;

	if ((t = calloc((size_t)b->total, sizeof(*t))) == NULL)
		return;
	n = 0;
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++) {
			const struct agent *a = &b->jobv[j].agents[i];
			if (a->connected)
				t[n++] = a->t_connected - b->t_first_connect;
		}
	bench_print_spread("connect p50/p90/p99/max:", t, n);
	n = 0;
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++) {
			const struct agent *a = &b->jobv[j].agents[i];
			if (a->assigned)
				t[n++] = a->t_assigned - a->t_join_sent;
		}
	bench_print_spread("join to assignment p50/p90/p99/max:", t, n);
	n = 0;
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++) {
			const struct agent *a = &b->jobv[j].agents[i];
			if (a->reassigned)
				t[n++] = a->t_reassigned - b->t_kill;
		}
	bench_print_spread("close to new assignment p50/p90/p99/max:", t, n);
	free(t);
}

/* What is read outside the nodes' callbacks, before and after the run. */
struct figures {
	double		 cpu0, cpu1;	/* the daemon's; -1 unknown */
	double		 self0, self1;	/* this process's */
	uint64_t	 rss0, rss, peak;	/* the daemon's, KiB; 0 unknown */
	int64_t		 tx0, tx1;	/* SQLite transactions; -1 unknown */
};

/* CPU seconds as "total ms (connect X, rest Y)"; |mid| may be -1. */
static void
print_cpu(const char *name, double t0, double mid, double t1)
{
	printf("%-22s %.1f ms", name, (t1 - t0) * 1000.0);
	if (mid >= t0 && mid <= t1)
		printf(" (connect %.1f, join and after %.1f)",
		    (mid - t0) * 1000.0, (t1 - mid) * 1000.0);
	printf("\n");
}

static void
print_report(const struct bench *b, int ok, const struct figures *f)
{
	char addr[300];

	printf("server:               ");
	for (int i = 0; i < b->n_servers; i++) {
		endpoint_format(&b->opts[i].server, addr, sizeof(addr));
		printf(" %s", addr);
		if (strchr(b->servers[i], ',') != NULL)
			printf(" (leader of %s)", b->servers[i]);
	}
	printf("\n");
	printf("client:                %s\n", b->wire ? "wire" : "grpc");
	printf("jobs:                  %d\n", b->jobs);
	printf("nodes per job:         %d\n", b->nodes);
	printf("nproc:                 %d\n", b->nproc);
	printf("connections:           %d\n", b->total);
	printf("assigned:              %d\n", b->n_assigned);
	if (ok) {
		printf("generation:            %" PRIu64 "\n",
		    b->jobv[0].generation);
		printf("world size:            %d\n", b->nodes * b->nproc);
		printf("connect all:           %.1f ms\n",
		    ms(b->t_connected - b->t_first_connect));
		print_spreads(b);
		printf("last join to last assignment: %.1f ms\n",
		    ms(b->t_last_assignment - b->t_last_join_sent));
		printf("first connect to last assignment: %.1f ms\n",
		    ms(b->t_last_assignment - b->t_first_connect));
	}
	if (ok && b->phase_times) {
		/* For perf report --time with perf record -k monotonic. */
		printf("phase times (CLOCK_MONOTONIC): first connect %.6f, all "
		    "connected %.6f, joins sent %.6f, last assignment %.6f",
		    b->t_first_connect / 1e6, b->t_connected / 1e6,
		    b->t_last_join_sent / 1e6, b->t_last_assignment / 1e6);
		if (b->kill > 0)
			printf(", close %.6f, last new assignment %.6f",
			    b->t_kill / 1e6, b->t_last_reassignment / 1e6);
		printf("\n");
	}
	if (ok && b->kill > 0) {
		double close_ms = ms(b->t_last_reassignment - b->t_kill);

		printf("closed connections:    %d\n", b->n_killed);
		printf("survivors reassigned:  %d\n", b->n_reassigned);
		printf("rounds in between:     %d assignments\n", b->n_interim);
		printf("final generation:      %" PRIu64 "\n",
		    b->jobv[0].final_generation);
		printf("reconnect grace:       %.1f ms\n", (double)b->grace_ms);
		printf("close to last new assignment: %.1f ms\n", close_ms);
		printf("grace to last new assignment: %.1f ms\n",
		    close_ms - (double)b->grace_ms);
	}
	if (ok && b->failover)
		failover_report(b);
	if (f->tx0 >= 0 && f->tx1 >= 0)
		printf("store transactions:    %" PRId64 "\n", f->tx1 - f->tx0);
	else
		printf("store transactions:    unknown (ServerInfo does not "
		    "report them)\n");
	print_cpu("bench cpu:", f->self0, ok ? b->self_cpu_connected : -1,
	    f->self1);
	if (b->daemon_pid == 0)
		return;
	if (f->cpu0 < 0 || f->cpu1 < 0)
		printf("daemon cpu:            unknown (cannot read "
		    "/proc/%ld/stat)\n", (long)b->daemon_pid);
	else
		print_cpu("daemon cpu:", f->cpu0, ok ? b->cpu_connected : -1,
		    f->cpu1);
	if (f->peak == 0) {
		printf("daemon rss:            unknown (cannot read "
		    "/proc/%ld/status)\n", (long)b->daemon_pid);
		return;
	}
	printf("daemon rss before:     %" PRIu64 " KiB\n", f->rss0);
	printf("daemon rss:            %" PRIu64 " KiB\n", f->rss);
	printf("daemon peak rss:       %" PRIu64 " KiB\n", f->peak);
	printf("daemon peak rss per node: %.1f KiB\n",
	    (double)f->peak / (double)b->total);
	printf("daemon rss added per node: %.1f KiB\n",
	    (double)(f->peak > f->rss0 ? f->peak - f->rss0 : 0) /
	    (double)b->total);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 'a' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "nproc", required_argument, NULL, 'P' },
		{ "min-nodes", required_argument, NULL, 'm' },
		{ "kill", required_argument, NULL, 'k' },
		{ "grace", required_argument, NULL, 'g' },
		{ "id", required_argument, NULL, 'i' },
		{ "daemon-pid", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "phase-times", no_argument, NULL, 'T' },
		{ "failover", no_argument, NULL, 'F' },
		{ "max-backoff", required_argument, NULL, 'B' },
		{ "client", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b;
	char err[1024], idbuf[64], *end;
	struct figures f = { .cpu0 = -1, .cpu1 = -1 };
	uint64_t grace = 0, backoff = 0, nofile;
	int ch, pid, rc = 0;

	signal(SIGPIPE, SIG_IGN);
	memset(&b, 0, sizeof(b));
	b.nodes = 1000;
	b.jobs = 1;
	b.nproc = 1;
	b.timeout_s = 120;
	b.max_backoff_ms = 5000;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			if (b.n_servers == BENCH_MAX_SERVERS) {
				fprintf(stderr, "rdzv-bench: at most %d "
				    "--server\n", BENCH_MAX_SERVERS);
				return 2;
			}
			b.servers[b.n_servers++] = optarg;
			break;
		case 'n':
			if (parse_int(optarg, 1, 100000, &b.nodes) != 0)
				usage();
			break;
		case 'j':
			if (parse_int(optarg, 1, 100000, &b.jobs) != 0)
				usage();
			break;
		case 'P':
			if (parse_int(optarg, 1, 65536, &b.nproc) != 0)
				usage();
			break;
		case 'm':
			if (parse_int(optarg, 1, 100000, &b.min_nodes) != 0)
				usage();
			break;
		case 'k':
			if (parse_int(optarg, 0, 100000, &b.kill) != 0)
				usage();
			break;
		case 'g':
			if (parse_duration(optarg, 1000, &grace) != 0 ||
			    grace > UINT32_MAX) {
				fprintf(stderr, "rdzv-bench: --grace %s: not "
				    "a duration (e.g. 500ms, 2s)\n", optarg);
				return 2;
			}
			b.grace_ms = (uint32_t)grace;
			break;
		case 'T':
			b.phase_times = 1;
			break;
		case 'F':
			b.failover = 1;
			break;
		case 'B':
			if (parse_duration(optarg, 1000, &backoff) != 0 ||
			    backoff < 100 || backoff > 60000) {
				fprintf(stderr, "rdzv-bench: --max-backoff %s: "
				    "100ms to 60s\n", optarg);
				return 2;
			}
			b.max_backoff_ms = (uint32_t)backoff;
			break;
		case 'C':
			if (strcmp(optarg, "wire") != 0 &&
			    strcmp(optarg, "grpc") != 0) {
				fprintf(stderr, "rdzv-bench: --client %s: grpc "
				    "or wire\n", optarg);
				return 2;
			}
			b.wire = strcmp(optarg, "wire") == 0;
			break;
		case 'i':
			b.id_prefix = optarg;
			break;
		case 'p':
			if (parse_int(optarg, 1, INT32_MAX, &pid) != 0)
				usage();
			b.daemon_pid = (pid_t)pid;
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
	if (b.n_servers == 0 || optind != argc)
		usage();
	if (b.kill >= b.nodes) {
		fprintf(stderr, "rdzv-bench: --kill %d: must leave survivors "
		    "of the %d nodes of a job\n", b.kill, b.nodes);
		return 2;
	}
	if (b.min_nodes > b.nodes || b.min_nodes > b.nodes - b.kill) {
		fprintf(stderr, "rdzv-bench: --min-nodes %d: must be at most "
		    "the nodes (%d) less --kill (%d), so the survivors form a "
		    "round\n", b.min_nodes, b.nodes, b.kill);
		return 2;
	}
	if (b.failover && b.wire) {
		fprintf(stderr, "rdzv-bench: --failover runs with --client "
		    "grpc only (the wire client does not reconnect)\n");
		return 2;
	}
	for (int i = 0; i < b.n_servers; i++) {
		b.opts[i].connect_timeout_ms = (uint32_t)(b.timeout_s * 1000);
		if (strchr(b.servers[i], ',') == NULL) {
			if (endpoint_parse(b.servers[i], RDZV_DEFAULT_PORT,
			    &b.opts[i].server, err, sizeof(err)) != 0) {
				fprintf(stderr, "rdzv-bench: --server %s\n",
				    err);
				return 2;
			}
		} else if (find_leader(b.servers[i], &b.opts[i], err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "rdzv-bench: --server %s: no replica "
			    "leads: %s\n", b.servers[i], err);
			return 1;
		}
	}
	if (b.failover && (b.n_servers != 1 || b.kill > 0 ||
	    strchr(b.servers[0], ',') == NULL)) {
		fprintf(stderr, "rdzv-bench: --failover needs one --server "
		    "listing the replicas (a,b) and no --kill\n");
		return 2;
	}
	if (b.failover && failover_prepare(&b, b.servers[0], err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "rdzv-bench: --failover: %s\n", err);
		return 1;
	}
	if (b.failover)
		b.mode = &failover_mode;
	if (b.id_prefix == NULL) {
		snprintf(idbuf, sizeof(idbuf), "bench-%ld-%lld",
		    (long)getpid(), (long long)time(NULL));
		b.id_prefix = idbuf;
	}

	/* One descriptor per node, plus a few. */
	nofile = raise_nofile();
	if ((uint64_t)b.nodes * (uint64_t)b.jobs + 32 > nofile) {
		fprintf(stderr, "rdzv-bench: %d connections need more than the "
		    "%" PRIu64 " open files allowed; raise ulimit -n (as root: "
		    "ulimit -Hn)\n", b.nodes * b.jobs, nofile);
		return 1;
	}
	if (bench_setup(&b) != 0) {
		fprintf(stderr, "rdzv-bench: cannot set up %d nodes: %s\n",
		    b.total, strerror(errno));
		return 1;
	}

	f.tx0 = server_transactions(&b.opts[0]);
	if (b.daemon_pid != 0) {
		f.cpu0 = proc_cpu_seconds(b.daemon_pid);
		proc_rss_kib(b.daemon_pid, &f.rss0, &f.peak);
	}
	f.self0 = self_cpu_seconds();
	bench_run(&b);
	f.self1 = self_cpu_seconds();
	if (b.daemon_pid != 0) {
		f.cpu1 = proc_cpu_seconds(b.daemon_pid);
		proc_rss_kib(b.daemon_pid, &f.rss, &f.peak);
	}
	f.tx1 = server_transactions(&b.opts[0]);

	if (b.timed_out) {
		fprintf(stderr, "rdzv-bench: gave up after %.0f s: %d of %d "
		    "connected, %d accepted, %d assigned", b.timeout_s,
		    b.n_connected, b.total, b.n_accepted, b.n_assigned);
		if (b.phase == PHASE_KILL)
			fprintf(stderr, ", %d of %d survivors reassigned",
			    b.n_reassigned, b.n_survivors);
		if (b.phase == PHASE_FAILOVER)
			fprintf(stderr, ", %d of %d resumed after the leader "
			    "was killed", b.n_resumed, b.total);
		fprintf(stderr, "\n");
		rc = 1;
	}
	if (b.errors != 0) {
		fprintf(stderr, "rdzv-bench: %s\n", b.first_error);
		rc = 1;
	}
	print_report(&b, rc == 0, &f);
	bench_teardown(&b);
	return rc;
}
