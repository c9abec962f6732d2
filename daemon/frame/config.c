/*
 * rdzvd's settings: embedded defaults, then /etc/rdzv/rdzvd.conf (or
 * --config FILE) as `key = value` lines named like the long options, then the
 * command line (SPEC §13). One table describes every setting, so the file and
 * the flags cannot drift apart.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "buildconf.h"
#include "exitcodes.h"
#include "helpfmt.h"
#include "log.h"
#include "parse.h"
#include "rdzvd.h"
#include "store.h"

#define DEFAULT_CONFIG "/etc/rdzv/rdzvd.conf"

enum kind { K_STR, K_BOOL, K_LISTEN, K_ADMIN, K_SIZE, K_U32, K_DURATION_S,
    K_DURATION_MS, K_LOGLEVEL, K_MODE, K_GROUP, K_HTTP, K_CHOICE };

/*
 * A number's bounds are in its unit (bytes, a count, milliseconds, a file
 * mode); 0 and 0 means none. They keep a value from working against its
 * purpose: a keepalive of 0 would also switch off the TLS handshake
 * deadline, a message over 2 GiB cannot be a protobuf, a socket mode
 * below 0600 would lock out its owner.
 */
struct setting {
	const char	*name;
	enum kind	 kind;
	size_t		 off;
	const char	*help;
	uint64_t	 min, max;
};

#define OFF(f) offsetof(struct config, f)
#define KIB	1024ULL
#define SEC	1000ULL
#define DAY	(86400 * SEC)
static const struct setting settings[] = {
	{ "listen", K_LISTEN, 0, "ADDR:PORT or unix:PATH (repeatable)" },
	{ "http-listen", K_HTTP, 0, "ADDR:PORT for /metrics, probes and "
	    "the status page, or none" },
	{ "http-max-connections", K_U32, OFF(http_max_conns),
	    "open HTTP connections (at most a quarter of the open-file "
	    "limit)", 1, 1000000 },
	{ "http-request-timeout", K_DURATION_MS, OFF(http_request_timeout_ms),
	    "close an HTTP connection whose request head is not complete by "
	    "then", 100, 600 * SEC },
	{ "db", K_STR, OFF(db), "SQLite database path (the same as "
	    "--store sqlite:PATH)" },
	{ "store", K_STR, OFF(store), "sqlite:PATH or "
	    "etcd://HOST:PORT[,HOST:PORT...]/PREFIX" },
	{ "etcd-ca", K_STR, OFF(etcd_ca), "CA of the etcd members' "
	    "certificates (PEM): TLS to etcd" },
	{ "etcd-cert", K_STR, OFF(etcd_cert), "client certificate for etcd "
	    "(PEM)" },
	{ "etcd-key", K_STR, OFF(etcd_key), "client private key for etcd "
	    "(PEM)" },
	{ "tls-cert", K_STR, OFF(tls_cert), "server certificate (PEM)" },
	{ "tls-key", K_STR, OFF(tls_key), "server private key (PEM)" },
	{ "tls-ca", K_STR, OFF(tls_ca), "CA for client certificates (mTLS)" },
	{ "insecure", K_BOOL, OFF(insecure),
	    "allow cleartext on non-loopback addresses" },
	{ "log-level", K_LOGLEVEL, OFF(log_level), "error|warn|info|debug" },
	{ "admin", K_ADMIN, 0, "identity allowed to act on every job "
	    "(repeatable)" },
	{ "admin-group", K_STR, OFF(admin_group), "group whose members may "
	    "act on every job (with auth = munge)" },
	{ "auth", K_CHOICE, OFF(auth), "none|munge: who a call comes from "
	    "beyond TLS" },
	{ "slurm-job-owner", K_CHOICE, OFF(slurm_job_owner), "off|check: "
	    "numeric job ids only from the Slurm job's owner (munge)" },
	{ "munge-socket", K_STR, OFF(munge_socket), "munged's socket "
	    "(auth = munge)" },
	{ "max-message", K_SIZE, OFF(max_message), "largest message, bytes",
	    4 * KIB, 2048 * KIB * KIB - 1 },
	{ "max-streams", K_U32, OFF(max_streams),
	    "concurrent streams per connection", 1, 100000 },
	{ "max-connections", K_U32, OFF(max_conns), "open connections",
	    1, 10000000 },
	{ "max-nodes-per-job", K_U32, OFF(max_nodes_per_job),
	    "nodes in one job", 1, 1000000 },
	{ "max-jobs-per-identity", K_U32, OFF(max_jobs_per_identity),
	    "jobs not ended that one identity may own", 1, 10000000 },
	{ "max-ended-jobs-per-identity", K_U32,
	    OFF(max_ended_jobs_per_identity), "ended jobs kept per "
	    "identity; the oldest go first", 1, 10000000 },
	{ "max-join-timeout", K_DURATION_MS, OFF(max_join_timeout_ms),
	    "the longest join timeout a job may ask for", SEC, 30 * DAY },
	{ "retention", K_DURATION_S, OFF(retention_s),
	    "how long ended jobs stay visible", 0, 3650 * DAY },
	{ "straggler-steps", K_U32, OFF(straggler_steps),
	    "a node more than this many steps behind the job's leader is a "
	    "straggler (0: off)", 0, UINT32_MAX },
	{ "straggler-seconds", K_DURATION_MS, OFF(straggler_ms),
	    "a node that passes a step more than this long after the job's "
	    "leader is a straggler (0: off)", 0, 30 * DAY },
	{ "keepalive", K_DURATION_MS, OFF(keepalive_ms),
	    "PING a silent connection after this", 100, 3600 * SEC },
	{ "preface-timeout", K_DURATION_MS, OFF(preface_timeout_ms),
	    "close a connection that has not begun HTTP/2 by then",
	    SEC, 600 * SEC },
	{ "idle-timeout", K_DURATION_MS, OFF(idle_timeout_ms),
	    "close a connection that has held no stream this long",
	    SEC, 7 * DAY },
	/* Who may hold connections (issue 36, docs/SECURITY.md). */
	{ "max-connections-per-address", K_U32, OFF(max_conns_per_addr),
	    "open gRPC connections from one source address; past it its "
	    "oldest unauthenticated one is closed, else the new one is "
	    "refused (0: no limit)", 0, 10000000 },
	{ "unauthenticated-idle-timeout", K_DURATION_MS,
	    OFF(unauth_idle_timeout_ms), "close a connection that has held "
	    "no stream this long and made no authenticated call",
	    SEC, 7 * DAY },
	{ "max-health-watchers", K_U32, OFF(max_health_watchers),
	    "open grpc.health.v1.Health/Watch streams", 1, 10000000 },
	{ "unix-mode", K_MODE, OFF(unix_mode),
	    "mode of unix socket files (octal)", 0600, 0777 },
	{ "unix-group", K_GROUP, OFF(unix_group),
	    "group of unix socket files (name or number)" },
	{ "shutdown-timeout", K_DURATION_MS, OFF(shutdown_timeout_ms),
	    "how long calls may finish after SIGTERM", 0, 3600 * SEC },
	{ "advertise", K_STR, OFF(advertise), "HOST:PORT other replicas "
	    "send clients to (HA)" },
	{ "leader-lease", K_DURATION_MS, OFF(leader_lease_ms),
	    "a replica's etcd lease; a dead leader's lasts this long (HA)",
	    2 * SEC, 600 * SEC },
	{ "host-gpu-failure", K_CHOICE, OFF(host_gpu_failure), "ignore|"
	    "suspect|quarantine: what a failed GPU check makes its host" },
	{ "host-suspect-crashes", K_U32, OFF(host_suspect_crashes),
	    "worker crashes within host-crash-window that make a host "
	    "suspect (0: never)", 0, HOST_CRASHES_KEPT },
	{ "host-quarantine-crashes", K_U32, OFF(host_quarantine_crashes),
	    "worker crashes within host-crash-window that quarantine a host "
	    "(0: never)", 0, HOST_CRASHES_KEPT },
	{ "host-crash-window", K_DURATION_MS, OFF(host_crash_window_ms),
	    "how long a worker crash counts against its host", SEC,
	    30 * DAY },
	{ "on-quarantine", K_STR, OFF(on_quarantine), "command run as "
	    "COMMAND HOST REASON when a host is quarantined" },
	{ "on-quarantine-timeout", K_DURATION_MS, OFF(on_quarantine_timeout_ms),
	    "kill the on-quarantine command after this", SEC, 3600 * SEC },
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static void
usage(FILE *f)
{
	fprintf(f, "usage: rdzvd [--config FILE] [--listen ADDR:PORT | "
	    "unix:PATH]...\n"
	    "             [--store SPEC | --db PATH]\n"
	    "             [--tls-cert FILE --tls-key FILE [--tls-ca FILE]] "
	    "[--insecure]\n"
	    "             [--http-listen ADDR:PORT | none] [--log-level LEVEL]\n"
	    "             [--check-config]\n"
	    "       rdzvd --migrate-store FROM TO\n\nsettings "
	    "(also as `key = value` lines in the config file):\n");
	for (size_t i = 0; i < N_SETTINGS; i++) {
		char opt[64];

		snprintf(opt, sizeof(opt), "--%s", settings[i].name);
		help_item(f, opt, settings[i].help);
	}
	fputs(RDZV_EXIT_HELP, f);
}

/* Whether |v| (parsed from |val|) is outside the setting's bounds; if so
 * the message says which bound, in the setting's unit. */
static int
out_of_bounds(const struct setting *st, uint64_t v, const char *val,
    char *err, size_t errlen)
{
	uint64_t	 bound;
	const char	*unit;

	if (st->min == 0 && st->max == 0)
		return 0;
	if (v >= st->min && v <= st->max)
		return 0;
	bound = v < st->min ? st->min : st->max;
	unit = st->kind == K_SIZE ? " bytes" : "";
	if (st->kind == K_DURATION_S || st->kind == K_DURATION_MS) {
		/* Durations in seconds where they are whole. */
		unit = bound % SEC == 0 ? "s" : "ms";
		if (bound % SEC == 0)
			bound /= SEC;
	}
	snprintf(err, errlen, st->kind == K_MODE ? "%s: %s is %s the %s of "
	    "%04llo%s" : "%s: %s is %s the %s of %llu%s", st->name, val,
	    v < st->min ? "below" : "above", v < st->min ? "minimum" :
	    "maximum", (unsigned long long)bound, unit);
	return 1;
}

/* A group by name, or by number when no group has that name. */
static int
set_group(struct config *cfg, const char *val, char *err, size_t errlen)
{
	struct group *gr = getgrnam(val);
	unsigned long v;
	char *end;

	if (gr != NULL)
		cfg->unix_gid = gr->gr_gid;
	else {
		errno = 0;
		v = strtoul(val, &end, 10);
		if (errno != 0 || *end != '\0' || end == val || *val == '-' ||
		    v >= (gid_t)-1) {
			snprintf(err, errlen, "unix-group: no group '%s'", val);
			return -1;
		}
		cfg->unix_gid = (gid_t)v;
	}
	free(cfg->unix_group);
	cfg->unix_group = xstrdup(val);
	return 0;
}

/*
 * Where the setting being applied comes from: 1 the config file, 2 the
 * command line. db and store name the same thing; a flag for one wins over
 * the file's other, and both at one level must agree (config_validate).
 */
static int set_level = 1;

/* What apply()'s helpers return for a value they cannot read, so that one
 * message says so for every kind. */
#define BAD_VALUE 1

/* A string setting; the store's settings print empty when unset
 * (--check-config), so read back, empty is unset again. */
static int
set_str(struct config *cfg, const struct setting *st, const char *val)
{
	char **p = (char **)((char *)cfg + st->off);

	free(*p);
	if (st->off == OFF(store))
		cfg->store_given = 0;
	if (*val == '\0' && (st->off == OFF(store) ||
	    st->off == OFF(admin_group) ||
	    st->off == OFF(munge_socket) ||
	    st->off == OFF(etcd_ca) || st->off == OFF(etcd_cert) ||
	    st->off == OFF(etcd_key))) {
		*p = NULL;
		return 0;
	}
	*p = xstrdup(val);
	if (st->off == OFF(db))
		cfg->db_given = set_level;
	if (st->off == OFF(store))
		cfg->store_given = set_level;
	return 0;
}

/* A flag given bare (val NULL) is true. */
static int
set_bool(int *p, const char *val)
{
	if (val == NULL || strcasecmp(val, "true") == 0 ||
	    strcasecmp(val, "yes") == 0 || strcmp(val, "1") == 0)
		*p = 1;
	else if (strcasecmp(val, "false") == 0 ||
	    strcasecmp(val, "no") == 0 || strcmp(val, "0") == 0)
		*p = 0;
	else
		return BAD_VALUE;
	return 0;
}

static int
add_listen(struct config *cfg, const char *val, char *err, size_t errlen)
{
	if (cfg->n_listen == RDZVD_MAX_LISTEN) {
		snprintf(err, errlen, "listen: at most %d listeners",
		    RDZVD_MAX_LISTEN);
		return -1;
	}
	if (endpoint_parse(val, RDZV_DEFAULT_PORT,
	    &cfg->listen[cfg->n_listen], err, errlen) != 0)
		return -1;
	cfg->n_listen++;
	return 0;
}

static int
add_admin(struct config *cfg, const char *val, char *err, size_t errlen)
{
	if (cfg->n_admins == RDZVD_MAX_ADMINS) {
		snprintf(err, errlen, "admin: at most %d admins",
		    RDZVD_MAX_ADMINS);
		return -1;
	}
	cfg->admins[cfg->n_admins++] = xstrdup(val);
	return 0;
}

/* A number in the setting's unit (bytes, a count, milliseconds, a file
 * mode), as out_of_bounds() checks it. */
static int
parse_number(const struct setting *st, const char *val, uint64_t *v)
{
	unsigned long ul;
	size_t sz;
	char *end;

	switch (st->kind) {
	case K_SIZE:
		if (parse_size(val, &sz) != 0 || sz == 0)
			return BAD_VALUE;
		*v = sz;
		return 0;
	case K_U32:
		errno = 0;
		ul = strtoul(val, &end, 10);
		/* 0 only where the bounds start at it ("0: never"). */
		if (errno != 0 || *end != '\0' || end == val ||
		    (ul == 0 && st->min != 0) || ul > UINT32_MAX || *val == '-')
			return BAD_VALUE;
		*v = ul;
		return 0;
	case K_DURATION_S:
		return parse_duration(val, 1000, v) != 0 ? BAD_VALUE : 0;
	case K_DURATION_MS:
		if (parse_duration(val, 1, v) != 0 || *v > UINT32_MAX)
			return BAD_VALUE;
		return 0;
	case K_MODE:
		errno = 0;
		ul = strtoul(val, &end, 8);
		if (errno != 0 || *end != '\0' || end == val || *val == '-' ||
		    *val == '+' || *val == ' ')
			return BAD_VALUE;
		*v = ul;
		return 0;
	default:
		return BAD_VALUE;
	}
}

/* A number read, checked against its bounds, and stored in the field's
 * own type (seconds for K_DURATION_S, which is read in milliseconds). */
static int
set_number(struct config *cfg, const struct setting *st, const char *val,
    char *err, size_t errlen)
{
	char *field = (char *)cfg + st->off;
	uint64_t v;

	if (parse_number(st, val, &v) != 0)
		return BAD_VALUE;
	if (out_of_bounds(st, v, val, err, errlen))
		return -1;
	switch (st->kind) {
	case K_SIZE:
		*(size_t *)field = (size_t)v;
		break;
	case K_DURATION_S:
		*(uint32_t *)field = (uint32_t)(v / 1000);
		break;
	case K_MODE:
		*(unsigned int *)field = (unsigned int)v;
		break;
	default:
		*(uint32_t *)field = (uint32_t)v;
		break;
	}
	return 0;
}

/* The value's index in the setting's help, "a|b: ...". */
static int
set_choice(struct config *cfg, const struct setting *st, const char *val)
{
	int i = 0;

	for (const char *h = st->help; *h != ':' && *h != '\0'; i++) {
		size_t n = strcspn(h, "|:");
		if (strlen(val) == n && strncmp(h, val, n) == 0) {
			*(int *)((char *)cfg + st->off) = i;
			return 0;
		}
		h += n + (h[n] == '|');
	}
	return BAD_VALUE;
}

static int
set_http_listen(struct config *cfg, const char *val, char *err,
    size_t errlen)
{
	cfg->http_given = 1;
	if (strcasecmp(val, "none") == 0) {
		cfg->http_off = 1;
		return 0;
	}
	if (endpoint_parse(val, RDZVD_HTTP_PORT, &cfg->http_listen,
	    err, errlen) != 0)
		return -1;
	if (cfg->http_listen.kind != ENDPOINT_TCP) {
		snprintf(err, errlen, "http-listen: %s is not ADDR:PORT "
		    "(or none)", val);
		return -1;
	}
	cfg->http_off = 0;
	return 0;
}

/* One setting from the file or a flag; on error |err| names the setting. */
static int
apply(struct config *cfg, const struct setting *st, const char *val,
    char *err, size_t errlen)
{
	int lvl, rc = BAD_VALUE;

	switch (st->kind) {
	case K_STR:
		rc = set_str(cfg, st, val);
		break;
	case K_BOOL:
		rc = set_bool((int *)((char *)cfg + st->off), val);
		break;
	case K_LISTEN:
		rc = add_listen(cfg, val, err, errlen);
		break;
	case K_ADMIN:
		rc = add_admin(cfg, val, err, errlen);
		break;
	case K_SIZE:
	case K_U32:
	case K_DURATION_S:
	case K_DURATION_MS:
	case K_MODE:
		rc = set_number(cfg, st, val, err, errlen);
		break;
	case K_LOGLEVEL:
		if ((lvl = log_level_parse(val)) >= 0) {
			*(int *)((char *)cfg + st->off) = lvl;
			rc = 0;
		}
		break;
	case K_GROUP:
		rc = set_group(cfg, val, err, errlen);
		break;
	case K_CHOICE:
		rc = set_choice(cfg, st, val);
		break;
	case K_HTTP:
		rc = set_http_listen(cfg, val, err, errlen);
		break;
	}
	if (rc != BAD_VALUE)
		return rc;
	snprintf(err, errlen, "%s: invalid value '%s'", st->name,
	    val != NULL ? val : "");
	return -1;
}

static const struct setting *
find_setting(const char *name)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

struct file_ctx {
	struct config	*cfg;
	char		 err[512];	/* the first error */
};

/* Returning 0 makes ini_parse report this line as its first error line. */
static int
file_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct file_ctx *fc = arg;
	const struct setting *st = find_setting(name);
	char err[512];

	if (section[0] != '\0')
		snprintf(err, sizeof(err), "sections are not used ([%s])",
		    section);
	else if (st == NULL)
		snprintf(err, sizeof(err), "unknown setting '%s'", name);
	else if (apply(fc->cfg, st, value, err, sizeof(err)) == 0)
		return 1;
	if (fc->err[0] == '\0')
		snprintf(fc->err, sizeof(fc->err), "%s", err);
	return 0;
}

int
config_read_file(struct config *cfg, const char *file, char *err,
    size_t errlen)
{
	struct file_ctx fc = { .cfg = cfg };
	int rc;

	errno = 0;
	rc = ini_parse(file, file_handler, &fc);
	if (rc < 0) {
		snprintf(err, errlen, "config %s: %s", file, rc == -1 ?
		    strerror(errno != 0 ? errno : ENOENT) : "out of memory");
		return -1;
	}
	if (rc > 0) {
		snprintf(err, errlen, "%s:%d: %s", file, rc,
		    fc.err[0] != '\0' ? fc.err : "not a `key = value` line");
		return rc;
	}
	free(cfg->file);
	cfg->file = xstrdup(file);
	return 0;
}

void
config_default_db(char *buf, size_t len)
{
	const char *dir = getenv("STATE_DIRECTORY");
	if (dir != NULL && *dir != '\0') {
		/* systemd may pass several, colon-separated: take the first. */
		snprintf(buf, len, "%.*s/rdzv.db", (int)strcspn(dir, ":"), dir);
	} else if (geteuid() == 0) {
		snprintf(buf, len, "/var/lib/rdzv/rdzv.db");
	} else if ((dir = getenv("XDG_STATE_HOME")) != NULL && *dir != '\0') {
		snprintf(buf, len, "%s/rdzv/rdzv.db", dir);
	} else {
		const char *home = getenv("HOME");
		snprintf(buf, len, "%s/.local/state/rdzv/rdzv.db",
		    home != NULL ? home : ".");
	}
}

static void
defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->log_level = LOG_LEVEL_INFO;
	cfg->max_message = 4 * 1024 * 1024;
	cfg->max_streams = 100;
	cfg->max_conns = 100000;
	cfg->http_max_conns = 1024;
	cfg->http_request_timeout_ms = 10 * 1000;
	cfg->max_nodes_per_job = 10000;
	cfg->max_jobs_per_identity = 1000;
	cfg->max_ended_jobs_per_identity = 10000;
	cfg->max_join_timeout_ms = 86400 * 1000;
	cfg->retention_s = 7 * 86400;
	cfg->straggler_steps = 20;
	cfg->straggler_ms = 30 * 1000;
	cfg->keepalive_ms = 5000;
	cfg->preface_timeout_ms = 10 * 1000;
	cfg->idle_timeout_ms = 600 * 1000;
	/* Who may hold connections (issue 36). */
	cfg->max_conns_per_addr = 1024;
	cfg->unauth_idle_timeout_ms = 30 * 1000;
	cfg->max_health_watchers = 1024;
	cfg->shutdown_timeout_ms = 5000;
	cfg->leader_lease_ms = 5000;
	{
		struct host_policy hp;

		host_policy_defaults(&hp);
		cfg->host_gpu_failure = (int)hp.gpu_failure;
		cfg->host_suspect_crashes = hp.suspect_crashes;
		cfg->host_quarantine_crashes = hp.quarantine_crashes;
		cfg->host_crash_window_ms = (uint32_t)hp.crash_window_ms;
	}
	cfg->on_quarantine_timeout_ms = 60 * 1000;
	endpoint_parse("127.0.0.1", RDZVD_HTTP_PORT, &cfg->http_listen, NULL,
	    0);
}

/* Every setting as a long option (its code 1000 + its index), then the
 * options that are not settings. */
static void
fill_longopts(struct option *longopts)
{
	size_t n = 0;

	for (size_t i = 0; i < N_SETTINGS; i++)
		longopts[n++] = (struct option){ settings[i].name,
		    settings[i].kind == K_BOOL ? no_argument : required_argument,
		    NULL, 1000 + (int)i };
	longopts[n++] = (struct option){ "config", required_argument, NULL, 'c' };
	longopts[n++] = (struct option){ "check-config", no_argument, NULL, 'C' };
	longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n++] = (struct option){ "version", no_argument, NULL, 'V' };
	longopts[n++] = (struct option){ "migrate-store", required_argument,
	    NULL, 'M' };
	longopts[n] = (struct option){ 0 };
}

/* First pass: only --config, --check-config, --help, --version, then the
 * file they name (or the default one, which may be missing). */
static void
read_file_first(struct config *cfg, int argc, char **argv,
    const struct option *longopts)
{
	const char *file = NULL;
	int explicit_file = 0, opt;
	char err[512];

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":c:hV", longopts, NULL)) != -1) {
		if (opt == 'c') {
			file = optarg;
			explicit_file = 1;
		} else if (opt == 'C') {
			cfg->check_only = 1;
		} else if (opt == 'h') {
			usage(stdout);
			exit(0);
		} else if (opt == 'V') {
			printf("rdzvd %s\n", RDZV_VERSION);
			exit(0);
		}
	}
	if (file == NULL && access(DEFAULT_CONFIG, F_OK) == 0)
		file = DEFAULT_CONFIG;
	if (file != NULL) {
		int rc = config_read_file(cfg, file, err, sizeof(err));
		if (rc > 0 || (rc < 0 && explicit_file)) {
			fprintf(stderr, "rdzvd: %s\n", err);
			exit(2);
		}
	}
}

/* One line, as rdzv-agent and rdzvctl say it: the help is a flag away. */
static void
bad_option(int opt, int argc, char **argv)
{
	const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] :
	    "?";

	if (opt == ':')
		fprintf(stderr, "rdzvd: option '%s' needs a value; see 'rdzvd "
		    "--help'\n", bad);
	else
		fprintf(stderr, "rdzvd: unknown option '%s'; see 'rdzvd "
		    "--help'\n", bad);
	exit(2);
}

/* Second pass: flags win over the file; a list given by flags replaces the
 * file's list. */
static void
apply_flags(struct config *cfg, int argc, char **argv,
    const struct option *longopts)
{
	int listen_flag = 0, admin_flag = 0, opt;
	char err[512];

	optind = 0;
	set_level = 2;
	while ((opt = getopt_long(argc, argv, ":c:hV", longopts, NULL)) != -1) {
		if (opt == '?' || opt == ':')
			bad_option(opt, argc, argv);
		if (opt == 'M') {
			free(cfg->migrate_from);
			cfg->migrate_from = xstrdup(optarg);
			continue;
		}
		if (opt < 1000)
			continue;
		const struct setting *st = &settings[opt - 1000];
		if (st->kind == K_LISTEN && !listen_flag++)
			cfg->n_listen = 0;
		if (st->kind == K_ADMIN && !admin_flag++) {
			for (size_t i = 0; i < cfg->n_admins; i++)
				free(cfg->admins[i]);
			cfg->n_admins = 0;
		}
		if (apply(cfg, st, optarg, err, sizeof(err)) != 0) {
			fprintf(stderr, "rdzvd: --%s\n", err);
			exit(2);
		}
	}
	/* --migrate-store FROM TO: TO is the one argument left. */
	if (cfg->migrate_from != NULL) {
		if (optind + 1 != argc) {
			fprintf(stderr, "rdzvd: --migrate-store FROM TO takes "
			    "the store to copy to after FROM\n");
			exit(2);
		}
		cfg->migrate_to = xstrdup(argv[optind++]);
	}
	if (optind < argc) {
		fprintf(stderr, "rdzvd: unexpected argument '%s'; see 'rdzvd "
		    "--help'\n", argv[optind]);
		exit(2);
	}
}

/* The defaults that depend on what was given: a listener, the database
 * path, and the store the database path names. */
static void
fill_unset(struct config *cfg)
{
	if (cfg->n_listen == 0)
		endpoint_parse("127.0.0.1", RDZV_DEFAULT_PORT, &cfg->listen[
		    cfg->n_listen++], NULL, 0);
	if (cfg->db == NULL) {
		char path[PATH_MAX];
		config_default_db(path, sizeof(path));
		cfg->db = xstrdup(path);
	}
	set_level = 1;
	/* --db PATH is --store sqlite:PATH: a flag --db wins over the file's
	 * store; both from one level must agree (config_validate()). */
	if (cfg->store != NULL && cfg->db_given > cfg->store_given) {
		free(cfg->store);
		cfg->store = NULL;
		cfg->store_given = 0;
	}
	if (cfg->store == NULL) {
		size_t len = strlen(cfg->db) + 8;
		cfg->store = xmalloc(len);
		snprintf(cfg->store, len, "sqlite:%s", cfg->db);
	}
}

void
config_load(struct config *cfg, int argc, char **argv)
{
	struct option longopts[N_SETTINGS + 6];

	defaults(cfg);
	fill_longopts(longopts);
	read_file_first(cfg, argc, argv, longopts);
	apply_flags(cfg, argc, argv, longopts);
	fill_unset(cfg);
}

int
config_is_admin(const struct config *cfg, const char *identity)
{
	for (size_t i = 0; i < cfg->n_admins; i++)
		if (strcmp(cfg->admins[i], identity) == 0)
			return 1;
	return 0;
}

void
config_free(struct config *cfg)
{
	free(cfg->file);
	free(cfg->db);
	free(cfg->store);
	free(cfg->etcd_ca);
	free(cfg->etcd_cert);
	free(cfg->etcd_key);
	free(cfg->migrate_from);
	free(cfg->migrate_to);
	free(cfg->tls_cert);
	free(cfg->tls_key);
	free(cfg->tls_ca);
	free(cfg->unix_group);
	free(cfg->advertise);
	free(cfg->admin_group);
	free(cfg->munge_socket);
	free(cfg->on_quarantine);
	for (size_t i = 0; i < cfg->n_admins; i++)
		free(cfg->admins[i]);
	memset(cfg, 0, sizeof(*cfg));
}
