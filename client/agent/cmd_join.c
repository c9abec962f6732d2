/*
 * `rdzv-agent join`: its options (SPEC §6). Every option is also an RDZV_*
 * environment variable; flags win over variables, variables over the
 * scheduler's values (sched.c), those over the defaults. The run itself is
 * agent.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "parse.h"

#define JOIN_HELP							\
"usage: rdzv-agent join --id ID [options] -- CMD [ARGS...]\n"		\
"\n"									\
"Joins job ID on rdzvd and runs CMD as each of this node's workers, with\n" \
"the environment torchrun gives them; restarts them on every new round.\n" \
"Each option is also an environment variable (--nnodes: RDZV_NNODES, ...);\n" \
"flags win.\n"								\
"\n"									\
"  --id ID                       the job (default $SLURM_JOB_ID,\n"	\
"                                $PBS_JOBID)\n"				\
"  --nnodes MIN[:MAX]            nodes (default the scheduler's count,\n" \
"                                else 1)\n"				\
"  --nproc-per-node N|gpu|auto   workers on this node (default\n"	\
"                                $SLURM_GPUS_ON_NODE, else 1)\n"	\
"  --node-rank N                 rank hint, nodes are ordered by it\n"	\
"                                (default $SLURM_NODEID, or the PBS node\n" \
"                                index)\n"				\
"  --max-restarts N              failures the job survives (default 0)\n" \
"  --attempt N                   the scheduler's run of the job, from 1:\n" \
"                                a later one reopens it even after it\n" \
"                                closed (default $SLURM_RESTART_COUNT + 1)\n" \
"  --last-call DURATION          wait for more nodes once MIN joined (30s)\n" \
"  --join-timeout DURATION       fail if MIN nodes do not join (600s)\n" \
"  --rejoin-timeout DURATION     wait this long for a lost node's\n"	\
"                                replacement (default the join timeout;\n" \
"                                0 in a fixed Slurm or PBS allocation)\n" \
"  --lease-ttl DURATION          silent connection ends a node (15s)\n" \
"  --reconnect-grace DURATION    closed connection ends a node (3s)\n" \
"  --role NAME                   ROLE_NAME of the workers (default)\n"	\
"  --host NAME                   this host's name for rdzvd's host records\n" \
"                                (default $SLURMD_NODENAME, else hostname)\n" \
"  --advertise-addr ADDR         MASTER_ADDR if this node is rank 0\n"	\
"                                (default: our address towards rdzvd)\n" \
"  --master-port PORT            MASTER_PORT if this node is rank 0\n"	\
"                                (default: a free port, new each round)\n" \
"  --log-dir DIR                 worker logs: DIR/GEN/LOCAL_RANK/ (default\n" \
"                                a new directory in $TMPDIR or /tmp)\n"	\
"  --tee                         copy worker output here, as [rank N]: line\n" \
"  --gpucheck off|warn|exclude|strict\n"				\
"                                GPU check (default exclude with gpu or\n" \
"                                auto, else off; also --health-check)\n" \
"  --gpucheck-timeout DURATION   kill a GPU check after this (60s; also\n" \
"                                --health-timeout)\n"			\
"  --stop-timeout DURATION       SIGKILL workers this long after SIGTERM\n" \
"                                (30s)\n"				\
"  --rank-policy ordered|stable\n"					\
"                                new rounds keep survivors' ranks (stable)\n" \
"                                or re-sort by node rank (ordered, default)\n" \
"  --restart in-process|process\n"					\
"                                on a new round, hand the running workers\n" \
"                                their new assignment (rdzv.elastic) instead\n" \
"                                of restarting them (process; the job's\n" \
"                                setting also turns it on)\n"		\
"  --preload MODULES             import these (e.g. torch,numpy) in a python\n" \
"                                started with the agent, and fork each\n" \
"                                worker from it: no import at each start\n" \
"                                (python workers only; docs/AGENT.md)\n" \
"  --hang-timeout DURATION       fail the node when its workers report no\n" \
"                                progress for this long (default off;\n" \
"                                the job's setting wins)\n"		\
"  --reconnect-timeout DURATION  give up on a lost rdzvd after this (600s)\n" \
"  --log-level LEVEL             error, warn, info or debug (info)\n"	\
"  -v, --verbose                 --log-level debug\n"			\
CLIENT_OPTIONS_HELP							\
RDZV_EXIT_HELP

static void
join_usage(FILE *f)
{
	help_text(f, JOIN_HELP);
}

typedef int (*setter_fn)(struct agent_opts *, const char *, char *, size_t);

/*
 * An option, its variable, and the older names of both that are still
 * accepted (the GPU check's options were --health-*): scripts written for
 * them keep working. A flag given twice, under either name, takes the last
 * value; of the two variables the new one wins.
 */
struct setting {
	const char	*name;		/* the long option */
	const char	*env;
	int		 has_arg;
	setter_fn	 set;
	const char	*alias;		/* an older long option, or NULL */
	const char	*alias_env;	/* an older variable, or NULL */
};

/* A job id as rdzvd accepts it (SPEC §2). */
static int
set_id(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (rdzv_id_check(v, err, len) != 0)
		return -1;
	o->id = v;
	return 0;
}

static int
parse_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long n;

	if (*v == '\0' || !isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > max)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

static int
set_nnodes(struct agent_opts *o, const char *v, char *err, size_t len)
{
	char buf[64], *colon;
	uint32_t min, max;

	snprintf(buf, sizeof(buf), "%s", v);
	if ((colon = strchr(buf, ':')) != NULL)
		*colon = '\0';
	if (parse_u32(buf, 1, 10000000, &min) != 0 || (colon != NULL &&
	    parse_u32(colon + 1, 1, 10000000, &max) != 0)) {
		snprintf(err, len, "expected MIN or MIN:MAX, counts of nodes "
		    "from 1 (e.g. 4 or 2:4)");
		return -1;
	}
	if (colon == NULL)
		max = min;
	if (min > max) {
		snprintf(err, len, "MIN is larger than MAX");
		return -1;
	}
	o->min_nodes = min;
	o->max_nodes = max;
	return 0;
}

static int
set_nproc(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (strcmp(v, "gpu") == 0) {
		o->nproc_mode = NPROC_GPU;
	} else if (strcmp(v, "auto") == 0) {
		o->nproc_mode = NPROC_AUTO;
	} else if (parse_u32(v, 1, 65536, &o->nproc) == 0) {
		o->nproc_mode = NPROC_FIXED;
	} else {
		snprintf(err, len, "expected a number of workers from 1 to "
		    "65536, 'gpu' or 'auto'");
		return -1;
	}
	o->nproc_set = true;
	return 0;
}

static int
set_node_rank(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (parse_u32(v, 0, UINT32_MAX, &o->node_rank) != 0) {
		snprintf(err, len, "expected a number from 0");
		return -1;
	}
	o->has_node_rank = true;
	return 0;
}

static int
set_max_restarts(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (parse_u32(v, 0, 1000000, &o->max_restarts) != 0) {
		snprintf(err, len, "expected a number from 0");
		return -1;
	}
	return 0;
}

/*
 * The run of a requeued batch job (rule 12): Slurm exports its count, PBS
 * keeps it in the job's run_count attribute, which only qstat shows, so
 * deploy/pbs/train.pbs passes it here.
 */
static int
set_attempt(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (parse_u32(v, 1, UINT32_MAX, &o->attempt) != 0) {
		snprintf(err, len, "expected the scheduler's run of the job, a "
		    "number from 1 (1 for the first run, 2 after one requeue)");
		return -1;
	}
	return 0;
}

static int
duration(const char *v, uint32_t *out, bool zero_ok, char *err, size_t len)
{
	uint64_t ms;

	if (parse_duration(v, 1000, &ms) != 0 || ms > UINT32_MAX ||
	    (ms == 0 && !zero_ok)) {
		snprintf(err, len, "expected a duration such as 30, 30s, "
		    "500ms or 5m%s", zero_ok ? "" : ", above 0");
		return -1;
	}
	*out = (uint32_t)ms;
	return 0;
}

#define DURATION_SETTER(fn, field)					\
static int								\
fn(struct agent_opts *o, const char *v, char *err, size_t len)		\
{									\
	return duration(v, &o->field, false, err, len);			\
}
DURATION_SETTER(set_last_call, last_call_ms)
DURATION_SETTER(set_join_timeout, join_timeout_ms)
DURATION_SETTER(set_lease_ttl, lease_ttl_ms)
DURATION_SETTER(set_reconnect_grace, reconnect_grace_ms)
DURATION_SETTER(set_gpucheck_timeout, gpucheck.timeout_ms)
DURATION_SETTER(set_reconnect_timeout, reconnect_timeout_ms)

/* A rejoin timeout of 0 fails the job as soon as a node is lost (rule 13). */
static int
set_rejoin_timeout(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (duration(v, &o->rejoin_timeout_ms, true, err, len) != 0)
		return -1;
	o->has_rejoin_timeout = true;
	return 0;
}

/* A hang timeout of 0 is none (the default). */
static int
set_hang_timeout(struct agent_opts *o, const char *v, char *err, size_t len)
{
	return duration(v, &o->hang_timeout_ms, true, err, len);
}

/* --restart in-process|process (SPEC §4 rule 15, docs/RECOVERY.md). */
static int
set_restart(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (strcmp(v, "in-process") == 0)
		o->restart_inproc = true;
	else if (strcmp(v, "process") == 0)
		o->restart_inproc = false;
	else {
		snprintf(err, len, "--restart must be in-process or process, "
		    "not \"%s\"", v);
		return -1;
	}
	return 0;
}

/* --rank-policy ordered|stable (SPEC §4 rule 16). */
static int
set_rank_policy(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (strcmp(v, "ordered") == 0)
		o->rank_policy = RDZV__V1__RANK_POLICY__RANK_POLICY_ORDERED;
	else if (strcmp(v, "stable") == 0)
		o->rank_policy = RDZV__V1__RANK_POLICY__RANK_POLICY_STABLE;
	else {
		snprintf(err, len, "--rank-policy must be ordered or stable, "
		    "not \"%s\"", v);
		return -1;
	}
	return 0;
}

/* A stop timeout of 0 sends SIGKILL at once. */
static int
set_stop_timeout(struct agent_opts *o, const char *v, char *err, size_t len)
{
	return duration(v, &o->stop_timeout_ms, true, err, len);
}

static int
set_role(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (*v == '\0' || strlen(v) > 64) {
		snprintf(err, len, "a role has 1 to 64 characters");
		return -1;
	}
	o->role = v;
	return 0;
}

/* Printable ASCII without spaces: what schedulers and hostnames use, and
 * what an operator can type back into `rdzvctl host clear`. */
static int
set_host(struct agent_opts *o, const char *v, char *err, size_t len)
{
	size_t n = strlen(v);

	for (size_t i = 0; i < n; i++)
		if (v[i] <= ' ' || v[i] >= 0x7f)
			n = 0;
	if (n == 0 || n > 255) {
		snprintf(err, len, "a host name has 1 to 255 printable "
		    "characters without spaces");
		return -1;
	}
	o->host = v;
	return 0;
}

/*
 * --advertise-addr becomes the other nodes' MASTER_ADDR: a name that does
 * not resolve here would have every worker retry it until the job is
 * aborted, so it is refused at the start.
 */
static int
advertise_check(const char *addr, char *err, size_t len)
{
	struct addrinfo hints, *res = NULL;
	int rc;

	if (addr == NULL)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(addr, NULL, &hints, &res)) != 0) {
		snprintf(err, len, "--advertise-addr %s: %s; the other nodes' "
		    "workers could not reach it as MASTER_ADDR (give an address "
		    "or a name that resolves)", addr, gai_strerror(rc));
		return -1;
	}
	freeaddrinfo(res);
	return 0;
}

static int
set_advertise(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (*v == '\0' || strlen(v) > 255) {
		snprintf(err, len, "an address has 1 to 255 characters");
		return -1;
	}
	o->advertise_addr = v;
	return 0;
}

static int
set_master_port(struct agent_opts *o, const char *v, char *err, size_t len)
{
	uint32_t port;

	if (parse_u32(v, 1, 65535, &port) != 0) {
		snprintf(err, len, "expected a port from 1 to 65535");
		return -1;
	}
	o->master_port = (uint16_t)port;
	return 0;
}

static int
set_log_dir(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (*v == '\0' || strlen(v) > 400) {
		snprintf(err, len, "a directory of 1 to 400 characters");
		return -1;
	}
	o->log_dir = v;
	return 0;
}

/* --tee takes no value; RDZV_TEE is 1/0, true/false, yes/no. */
static int
set_tee(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (v == NULL || strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
	    strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0) {
		o->tee = true;
	} else if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 ||
	    strcasecmp(v, "no") == 0 || strcasecmp(v, "off") == 0) {
		o->tee = false;
	} else {
		snprintf(err, len, "expected 1 or 0");
		return -1;
	}
	return 0;
}

/* --preload: module names, comma-separated, as `import` takes them (and
 * as rdzvd takes a job's: it is the job's setting when this node creates
 * the job). */
static int
set_preload(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (!forksrv_modules_ok(v)) {
		snprintf(err, len, "expected module names (letters, digits, "
		    "'_' and '.') separated by commas, such as torch,numpy, "
		    "%d bytes at most", FORKSRV_MODULES_MAX);
		return -1;
	}
	o->preload = v;
	return 0;
}

static int
set_gpucheck(struct agent_opts *o, const char *v, char *err, size_t len)
{
	if (gpucheck_policy_parse(v, &o->gpucheck.policy) != 0) {
		snprintf(err, len, "expected off, warn, exclude or strict");
		return -1;
	}
	o->gpucheck_set = true;
	return 0;
}

static int
set_log_level(struct agent_opts *o, const char *v, char *err, size_t len)
{
	int level = log_level_parse(v);

	if (level < 0) {
		snprintf(err, len, "expected error, warn, info or debug");
		return -1;
	}
	log_set_level((enum log_level)level);
	return 0;
}

static int
set_verbose(struct agent_opts *o, const char *v, char *err, size_t len)
{
	log_set_level(LOG_LEVEL_DEBUG);
	return 0;
}

static const struct setting settings[] = {
	{ "id", "RDZV_ID", required_argument, set_id },
	{ "nnodes", "RDZV_NNODES", required_argument, set_nnodes },
	{ "nproc-per-node", "RDZV_NPROC_PER_NODE", required_argument,
	    set_nproc },
	{ "node-rank", "RDZV_NODE_RANK", required_argument, set_node_rank },
	{ "max-restarts", "RDZV_MAX_RESTARTS", required_argument,
	    set_max_restarts },
	{ "attempt", "RDZV_ATTEMPT", required_argument, set_attempt },
	{ "last-call", "RDZV_LAST_CALL", required_argument, set_last_call },
	{ "join-timeout", "RDZV_JOIN_TIMEOUT", required_argument,
	    set_join_timeout },
	{ "rejoin-timeout", "RDZV_REJOIN_TIMEOUT", required_argument,
	    set_rejoin_timeout },
	{ "lease-ttl", "RDZV_LEASE_TTL", required_argument, set_lease_ttl },
	{ "reconnect-grace", "RDZV_RECONNECT_GRACE", required_argument,
	    set_reconnect_grace },
	{ "role", "RDZV_ROLE", required_argument, set_role },
	{ "host", "RDZV_HOST", required_argument, set_host },
	{ "advertise-addr", "RDZV_ADVERTISE_ADDR", required_argument,
	    set_advertise },
	{ "master-port", "RDZV_MASTER_PORT", required_argument,
	    set_master_port },
	{ "log-dir", "RDZV_LOG_DIR", required_argument, set_log_dir },
	{ "tee", "RDZV_TEE", no_argument, set_tee },
	{ "gpucheck", "RDZV_GPUCHECK", required_argument, set_gpucheck,
	    "health-check", "RDZV_HEALTH_CHECK" },
	{ "gpucheck-timeout", "RDZV_GPUCHECK_TIMEOUT", required_argument,
	    set_gpucheck_timeout, "health-timeout", "RDZV_HEALTH_TIMEOUT" },
	{ "stop-timeout", "RDZV_STOP_TIMEOUT", required_argument,
	    set_stop_timeout },
	{ "restart", "RDZV_RESTART", required_argument, set_restart },
	{ "rank-policy", "RDZV_RANK_POLICY", required_argument,
	    set_rank_policy },
	{ "reconnect-timeout", "RDZV_RECONNECT_TIMEOUT", required_argument,
	    set_reconnect_timeout },
	{ "hang-timeout", "RDZV_HANG_TIMEOUT", required_argument,
	    set_hang_timeout },
	{ "preload", "RDZV_PRELOAD", required_argument, set_preload },
	{ "log-level", "RDZV_LOG_LEVEL", required_argument, set_log_level },
	{ "verbose", NULL, no_argument, set_verbose },
};
#define N_SETTINGS	(sizeof(settings) / sizeof(settings[0]))

static int
opts_defaults(struct agent_opts *o, char *err, size_t len)
{
	memset(o, 0, sizeof(*o));
	if (client_opts_init(&o->client, err, len) != 0)
		return -1;
	o->nproc_mode = NPROC_FIXED;
	o->nproc = 1;
	o->role = "default";
	o->gpucheck.policy = GPUCHECK_OFF;
	o->gpucheck.timeout_ms = AGENT_GPUCHECK_TIMEOUT_MS;
	o->stop_timeout_ms = AGENT_STOP_TIMEOUT_MS;
	o->reconnect_timeout_ms = AGENT_RECONNECT_MS;
	return 0;
}

/* The RDZV_* variables, before the flags. */
static int
opts_env(struct agent_opts *o, char *err, size_t len)
{
	char why[256];

	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *name = s->env, *v = NULL;

		if (name != NULL)
			v = getenv(name);
		if ((v == NULL || *v == '\0') && s->alias_env != NULL)
			v = getenv(name = s->alias_env);
		if (v == NULL || *v == '\0')
			continue;
		if (s->set(o, v, why, sizeof(why)) != 0) {
			snprintf(err, len, "%s=%s: %s", name, v, why);
			return -1;
		}
	}
	return 0;
}

static int
opts_flags(struct agent_opts *o, int argc, char **argv,
    void (*usage)(FILE *), char *err, size_t len)
{
	struct option longopts[2 * N_SETTINGS + 16];
	const struct option client_longopts[] = { CLIENT_LONG_OPTIONS };
	size_t n = 0;
	char why[256];
	int ch, rc, idx;

	for (size_t i = 0; i < N_SETTINGS; i++) {
		longopts[n++] = (struct option){ settings[i].name,
		    settings[i].has_arg, NULL, (int)i + 1 };
		if (settings[i].alias != NULL)
			longopts[n++] = (struct option){ settings[i].alias,
			    settings[i].has_arg, NULL, (int)i + 1 };
	}
	for (size_t i = 0; i < sizeof(client_longopts) /
	    sizeof(client_longopts[0]); i++)
		longopts[n++] = client_longopts[i];
	longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n] = (struct option){ NULL, 0, NULL, 0 };

	opterr = 0;
	optind = 1;
	/* "+": stop at the command, whose own options are not ours. */
	while ((ch = getopt_long(argc, argv, "+:hv", longopts, &idx)) != -1) {
		const char *opt = argv[optind - 1];

		if (ch == 'h') {
			usage(stdout);
			return 1;
		}
		if (ch == 'v') {
			log_set_level(LOG_LEVEL_DEBUG);
			continue;
		}
		if (ch == '?') {
			if (optopt >= 1 && optopt <= (int)N_SETTINGS)
				snprintf(err, len, "--%s takes no value",
				    settings[optopt - 1].name);
			else if (optopt > 0 && optopt < 128 && isalnum(optopt))
				snprintf(err, len, "unknown option '-%c'; see "
				    "'rdzv-agent join --help'", optopt);
			else
				snprintf(err, len, "unknown option '%s'; see "
				    "'rdzv-agent join --help'", opt);
			return -1;
		}
		if (ch == ':') {
			snprintf(err, len, "%s needs a value; see "
			    "'rdzv-agent join --help'", opt);
			return -1;
		}
		if (ch >= 1 && ch <= (int)N_SETTINGS) {
			const struct setting *s = &settings[ch - 1];
			/* The error names the option as it was given. */
			if (s->set(o, optarg, why, sizeof(why)) != 0) {
				snprintf(err, len, "--%s %s: %s",
				    longopts[idx].name, optarg, why);
				return -1;
			}
			continue;
		}
		rc = client_opts_take(&o->client, ch, optarg, err, len);
		if (rc < 0)
			return -1;
	}
	o->argc = argc - optind;
	o->argv = argv + optind;
	return 0;
}

/*
 * Whether the workers' command can be run, as execvpe() will look for it:
 * a command that is not there is a mistake to report now, not a worker
 * failure for every round.
 */
static int
command_check(const char *cmd, char *err, size_t len)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (strchr(cmd, '/') != NULL) {
		if (access(cmd, X_OK) == 0)
			return 0;
		snprintf(err, len, "cannot run %s: %s", cmd, strerror(errno));
		return -1;
	}
	if (path == NULL)
		path = "/bin:/usr/bin";
	while (*path != '\0') {
		size_t n = strcspn(path, ":");
		struct stat st;

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? path : ".",
		    cmd);
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(buf, X_OK) == 0)
			return 0;
		path += n;
		if (*path == ':')
			path++;
	}
	snprintf(err, len, "cannot run %s: not found in $PATH", cmd);
	return -1;
}

/*
 * The defaults, the RDZV_* variables, the flags (up to the command) and
 * the scheduler's values, in that order of weakness; `coproc` (cmd_coproc.c)
 * takes the same options. 0; 1 when --help printed |usage|; -1 with the
 * bad value named in |err|.
 */
int
join_options(struct agent_opts *o, int argc, char **argv,
    void (*usage)(FILE *), char *err, size_t len)
{
	int rc;

	if ((rc = opts_defaults(o, err, len)) == 0 &&
	    (rc = opts_env(o, err, len)) == 0)
		rc = opts_flags(o, argc, argv, usage, err, len);
	if (rc == 0)
		sched_defaults(o);
	return rc;
}

static int
cmd_join(int argc, char **argv)
{
	struct agent_opts o;
	char err[512];
	int rc;

	rc = join_options(&o, argc, argv, join_usage, err, sizeof(err));
	if (rc > 0)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "rdzv-agent join: %s\n", err);
		return AGENT_EXIT_USAGE;
	}
	if (o.id == NULL) {
		fprintf(stderr, "rdzv-agent join: no job id: give --id ID "
		    "(or RDZV_ID; under Slurm or PBS the job's id is used)\n");
		return AGENT_EXIT_USAGE;
	}
	if (o.argc == 0) {
		fprintf(stderr, "rdzv-agent join: no command to run: give it "
		    "after --, e.g. rdzv-agent join --id %s -- python3 "
		    "train.py\n", o.id);
		return AGENT_EXIT_USAGE;
	}
	if (command_check(o.argv[0], err, sizeof(err)) != 0 ||
	    advertise_check(o.advertise_addr, err, sizeof(err)) != 0) {
		fprintf(stderr, "rdzv-agent join: %s\n", err);
		return AGENT_EXIT_USAGE;
	}
	if (o.preload != NULL && !forksrv_python(o.argv[0])) {
		fprintf(stderr, "rdzv-agent join: --preload %s: the workers' "
		    "command must be a python (python3 script.py ARGS or "
		    "python3 -m MODULE ARGS), not %s\n", o.preload, o.argv[0]);
		return AGENT_EXIT_USAGE;
	}
	/* The GPU check's default follows the use of GPUs (SPEC §7). */
	if (!o.gpucheck_set)
		o.gpucheck.policy = o.nproc_mode == NPROC_FIXED ? GPUCHECK_OFF :
		    GPUCHECK_EXCLUDE;
	return agent_run(&o);
}

const struct cmd_entry cmd_join_entry = {
	.name = "join",
	.usage = "join --id ID [options] -- CMD [ARGS...]\n"
	    "        join a job and run its workers on this node",
	.exec = cmd_join,
	.help = join_usage,
};
