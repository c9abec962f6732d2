/*
 * rdzvd: the cluster-wide rendezvous daemon. It runs in the foreground, logs
 * to stderr and tells systemd when it is ready (SPEC §13).
 *
 * Calls: lib/base, daemon/store, daemon/frame, daemon/auth, daemon/rpc,
 *   daemon/http, daemon/ha.
 * Called by: none (the program rdzvd).
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "buildconf.h"
#include "clock.h"
#include "ha.h"
#include "log.h"
#include "rdzvd.h"
#include "rpc.h"
#include "http.h"
#include "store.h"
#include "auth.h"
#include "tls.h"
#include "text.h"

#if HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

struct rdzvd rdzvd;

/* The open-file limit in force, for the messages about running out, and
 * what raise_nofile() did to it. */
static char nofile_raised[64];
/* The open-file limit in force, for the messages about running out. */
static unsigned long long nofile;

/*
 * Failed TLS handshakes, logged at info with the peer and why, but at most
 * one line a second: a scanner or a fleet of misconfigured clients must not
 * flood the log. A second line counts those held back meanwhile.
 */
static struct {
	struct event		*ev;
	uint64_t		 logged_ms;	/* the last line; 0: none */
	unsigned long long	 held;		/* failures since then */
	char			 peer[80];	/* the last of them */
	char			 reason[160];
} tlsfail;

static void
notify(const char *state)
{
#if HAVE_LIBSYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

static void
shutdown_done(void *arg)
{
	event_base_loopbreak(rdzvd.base);
}

/* The first SIGTERM/SIGINT drains calls gracefully; a second one ends at
 * once. */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	static int stopping;

	if (stopping++) {
		log_warnx("second %s: exiting now", strsignal((int)sig));
		event_base_loopbreak(rdzvd.base);
		return;
	}
	log_info("%s: shutting down", strsignal((int)sig));
	notify("STOPPING=1");
	rpc_health_set_serving(0, 1);
	if (!rdzvd.standby) {
		/* The commit in flight ends and goes out first. */
		turn_settle("rdzvd is shutting down; try again when it is "
		    "back");
		/* A hook's outcome waiting for the next turn goes into this
		 * last commit (turn_settle dropped the turn's held work). */
		hook_settle();
		rpc_watch_end_all("rdzvd is shutting down");
		rpc_streams_shutdown("rdzvd is shutting down; resume when it is "
		    "back");
		/* Save the exact time left on open deadlines (SPEC §4 rule
		 * 11). */
		core_checkpoint(rdzvd.core, turn_now());
		turn_flush();
	}
	/* After the last commit: a standby may take over at once. */
	ha_shutdown();
	grpc_server_shutdown(rdzvd.srv, rdzvd.cfg.shutdown_timeout_ms,
	    shutdown_done, NULL);
}

/* What the transport did and why (lib/ does not log): for whoever debugs a
 * client that cannot connect or keep its connection. */
static void
conn_closed(const char *peer, const char *reason, void *arg)
{
	log_debug("connection from %s closed: %s", peer, reason);
}

static void
accept_paused(int err, uint32_t pause_ms, void *arg)
{
	log_debug("accept: %s; accepting again when a connection closes, or "
	    "in %u ms", strerror(err), pause_ms);
}

/* Once when new clients stop being served, once when they are again. */
static void
accept_blocked(int why, int ended, uint64_t ms, uint64_t count, void *arg)
{
	if (why != 0 && !ended)
		log_warnx("accept: %s (open files: at most %llu): new clients "
		    "wait in the listen backlog until a connection closes",
		    strerror(why), nofile);
	else if (why != 0)
		log_warnx("accept: serving new clients again after %llu.%03llu "
		    "s; %llu accepts failed meanwhile",
		    (unsigned long long)ms / 1000,
		    (unsigned long long)ms % 1000, (unsigned long long)count);
	else if (!ended)
		log_warnx("max-connections (%u) reached and every connection "
		    "made an authenticated call: new connections are refused "
		    "until one closes", grpc_server_max_conns(rdzvd.srv));
	else
		log_warnx("below max-connections again after %llu.%03llu s; "
		    "%llu connections were refused meanwhile",
		    (unsigned long long)ms / 1000,
		    (unsigned long long)ms % 1000, (unsigned long long)count);
}

/* A connection refused by max-connections-per-address: said at most once
 * per REFUSED_SAY_MS, with how many were refused since. */
#define REFUSED_SAY_MS	10000
static void
conn_refused(const char *peer, const char *why, void *arg)
{
	static uint64_t said_ms, since;
	uint64_t now = mono_ms();

	since++;
	if (said_ms != 0 && mono_since(now, said_ms) < REFUSED_SAY_MS)
		return;
	log_warnx("connection from %s refused: %s (%llu refused in the last "
	    "%u s)", peer, why, (unsigned long long)since,
	    REFUSED_SAY_MS / 1000);
	said_ms = now;
	since = 0;
}

/*
 * A max-connections above the open-file limit (the default is) becomes the
 * gRPC listeners' share of it: a quarter is the HTTP listener's and
 * CONNS_FD_RESERVE is for the store, munged, squeue and the like. Below it
 * a crowd of connections meets max-connections, where unauthenticated ones
 * make room for new ones, before it meets EMFILE, where every new client
 * waits. One at or below the limit was sized by the operator: kept.
 */
#define CONNS_FD_RESERVE	64
static uint32_t
conns_cap(uint32_t want)
{
	unsigned long long share;

	if (nofile == 0)
		return want;		/* getrlimit failed: said */
	share = nofile - nofile / 4 > 2 * CONNS_FD_RESERVE ?
	    nofile - nofile / 4 - CONNS_FD_RESERVE : nofile / 2;
	if (want <= nofile || share >= want) {
		log_info("open files: at most %llu%s", nofile, nofile_raised);
		return want;
	}
	log_warnx("open files: at most %llu%s, which leaves room for %llu "
	    "gRPC connections, not max-connections %u: raise the limit "
	    "(LimitNOFILE= in the unit, ulimit -n) or lower max-connections",
	    nofile, nofile_raised, share, want);
	return (uint32_t)share;
}

static const char *
tls_reason(const char *reason)
{
	return strncmp(reason, "TLS: ", 5) == 0 ? reason + 5 : reason;
}

static void
tls_failed_flush(evutil_socket_t fd, short what, void *arg)
{
	if (tlsfail.held == 0)
		return;
	log_info("%llu more TLS handshake%s failed, the last with %s: %s",
	    tlsfail.held, plural(tlsfail.held), tlsfail.peer,
	    tlsfail.reason);
	tlsfail.held = 0;
	tlsfail.logged_ms = mono_ms();
}

static void
tls_failed(const char *peer, const char *reason, void *arg)
{
	uint64_t now = mono_ms(), due;
	struct timeval tv;

	if (tlsfail.held == 0 && (tlsfail.logged_ms == 0 ||
	    mono_since(now, tlsfail.logged_ms) >= 1000)) {
		log_info("TLS handshake with %s failed: %s", peer,
		    tls_reason(reason));
		tlsfail.logged_ms = now;
		return;
	}
	snprintf(tlsfail.peer, sizeof(tlsfail.peer), "%s", peer);
	snprintf(tlsfail.reason, sizeof(tlsfail.reason), "%s",
	    tls_reason(reason));
	if (tlsfail.held++ > 0)
		return;
	due = tlsfail.logged_ms + 1000 > now ? tlsfail.logged_ms + 1000 - now :
	    0;
	tv.tv_sec = (time_t)(due / 1000);
	tv.tv_usec = (suseconds_t)(due % 1000) * 1000;
	evtimer_add(tlsfail.ev, &tv);
}

/*
 * Each connection is a descriptor, and a shell's soft limit (often 1024)
 * would end rdzvd's connections long before max-connections: the soft
 * limit goes up to the hard one, as any process may do, and what is in
 * force is logged. Under the systemd unit both are LimitNOFILE.
 */
static void
raise_nofile(void)
{
	struct rlimit rl;
	unsigned long long was;
	char raised[64] = "";

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		log_warn("getrlimit(RLIMIT_NOFILE)");
		return;
	}
	was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			log_warn("cannot raise the open-file limit from %llu "
			    "to %llu", was, (unsigned long long)rl.rlim_max);
			rl.rlim_cur = was;
		} else
			snprintf(raised, sizeof(raised), " (raised from %llu)",
			    was);
	}
	nofile = rl.rlim_cur;
	/* conns_cap() says it, in one line with what it means. */
	snprintf(nofile_raised, sizeof(nofile_raised), "%s", raised);
}

static void
setup_tls(void)
{
	char err[512];
	struct tls_opts o = {
		.cert = rdzvd.cfg.tls_cert,
		.key = rdzvd.cfg.tls_key,
		.ca = rdzvd.cfg.tls_ca,
	};

	if (rdzvd.cfg.tls_cert == NULL)
		return;
	if (tls_server_new(&o, &rdzvd.tls, err, sizeof(err)) != 0)
		fatalx("%s", err);
	if ((tlsfail.ev = evtimer_new(rdzvd.base, tls_failed_flush,
	    NULL)) == NULL)
		fatalx("out of memory");
}

/* The etcd settings of the store, from the configuration. */
static void
store_opts_from(const struct config *cfg, struct store_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->etcd_ca = cfg->etcd_ca;
	o->etcd_cert = cfg->etcd_cert;
	o->etcd_key = cfg->etcd_key;
}

/*
 * After a change of role (ha.c): the status page's streams show the core
 * they started on, so they end and the page's EventSource connects again
 * to see the new one.
 */
static void
role_changed(int leading)
{
	http_pages_reset();
}

/*
 * Opens the store. With SQLite the replica leads at once and rebuilds every
 * job from it (SPEC §9, §4 rule 11); on etcd it campaigns, and loads when
 * it wins (SPEC §14).
 */
/*
 * The highest directory above a SQLite database that does not exist, in
 * |buf|; "" when they all do (or the store is not SQLite). The store
 * creates them (0700); rdzvd says so (docs/RDZVD.md).
 */
static void
missing_db_dir(const char *store, char *buf, size_t len)
{
	struct stat st;
	char *p;

	buf[0] = '\0';
	if (strncmp(store, "sqlite:", 7) != 0)
		return;
	snprintf(buf, len, "%s", store + 7);
	if ((p = strrchr(buf, '/')) == NULL || p == buf) {
		buf[0] = '\0';
		return;
	}
	*p = '\0';
	if (stat(buf, &st) == 0) {
		buf[0] = '\0';
		return;
	}
	/* Up while the parent is missing too. */
	while ((p = strrchr(buf, '/')) != NULL && p != buf) {
		*p = '\0';
		if (stat(buf, &st) == 0) {
			*p = '/';
			break;
		}
	}
}

static void
open_state(void)
{
	struct store_opts so;
	char err[1024], created[PATH_MAX], dflt[PATH_MAX];

	store_opts_from(&rdzvd.cfg, &so);
	missing_db_dir(rdzvd.cfg.store, created, sizeof(created));
	if (store_open_opts(rdzvd.cfg.store, &so, &rdzvd.store, err,
	    sizeof(err)) != 0)
		fatalx("%s", err);
	/* A path the operator gave, whose directory did not exist, is as
	 * likely a typo as a wish: a warning. The default's is a first
	 * start. */
	config_default_db(dflt, sizeof(dflt));
	if (created[0] != '\0' && strcmp(rdzvd.cfg.store + 7, dflt) == 0)
		log_info("database %s: created %s, which did not exist",
		    rdzvd.cfg.store + 7, created);
	else if (created[0] != '\0')
		log_warnx("database %s: created %s, which did not exist (mode "
		    "0700); if the path is a typo, stop rdzvd, remove it and "
		    "give the right --db", rdzvd.cfg.store + 7, created);
	stall_init();
	ha_start(role_changed);
}

/*
 * The replicas of an etcd store share their record of accepted MUNGE
 * credentials (issue 42; auth_replay_etcd.c), so that one used at a replica
 * is refused at the next after a failover. Before the decoding threads.
 */
static void
share_replay_record(void)
{
	struct store_spec *sp;
	char err[256];

	if (rdzvd.cfg.auth != AUTH_MUNGE || rdzvd.cfg.store == NULL)
		return;
	sp = xcalloc(1, sizeof(*sp));
	if (store_spec_parse(rdzvd.cfg.store, sp, err, sizeof(err)) == 0 &&
	    sp->kind == STORE_ETCD)
		auth_replay_etcd_start(sp->endpoints, sp->prefix,
		    rdzvd.cfg.etcd_ca, rdzvd.cfg.etcd_cert, rdzvd.cfg.etcd_key);
	free(sp);
}

/* " (mode 0660, group rdzv)": who may connect to a unix socket file. */
static void
unix_perms_text(const char *path, char *buf, size_t len)
{
	struct stat st;
	struct group *gr;

	if (stat(path, &st) != 0) {
		snprintf(buf, len, " (%s)", strerror(errno));
		return;
	}
	if ((gr = getgrgid(st.st_gid)) != NULL)
		snprintf(buf, len, " (mode %04o, group %.64s)",
		    (unsigned)st.st_mode & 07777, gr->gr_name);
	else
		snprintf(buf, len, " (mode %04o, group %u)",
		    (unsigned)st.st_mode & 07777, (unsigned)st.st_gid);
}

/*
 * The "listening on" lines, logged once the replica knows its role: whoever
 * waits for them (a test, an operator) may call at once and be served, or
 * told who leads (ha_wait_settled).
 */
static char listening[RDZVD_MAX_LISTEN][512];

static void
listen_all(void)
{
	const struct config *cfg = &rdzvd.cfg;
	char addr[300], perms[128] = "";

	for (size_t i = 0; i < cfg->n_listen; i++) {
		const struct endpoint *ep = &cfg->listen[i];
		struct tls_ctx *tls = ep->kind == ENDPOINT_TCP ? rdzvd.tls : NULL;
		int rc = grpc_server_listen(rdzvd.srv, ep, tls);
		endpoint_format(ep, addr, sizeof(addr));
		if (rc < 0 && ep->kind == ENDPOINT_UNIX &&
		    (cfg->unix_mode != 0 || cfg->unix_group != NULL))
			fatalx("cannot listen on %s with unix-mode %04o and "
			    "unix-group %s: %s", addr, cfg->unix_mode,
			    cfg->unix_group != NULL ? cfg->unix_group :
			    "(unset)", strerror(-rc));
		if (rc < 0)
			fatalx("cannot listen on %s: %s", addr, strerror(-rc));
		if (ep->kind == ENDPOINT_TCP) {
			struct endpoint bound = *ep;
			bound.port = (uint16_t)grpc_server_port(rdzvd.srv, i);
			endpoint_format(&bound, addr, sizeof(addr));
		} else
			unix_perms_text(ep->path, perms, sizeof(perms));
		const char *how = tls == NULL ? "" :
		    tls_wants_client_cert(tls) ? " (mTLS)" : " (TLS)";
		snprintf(rdzvd.listeners[rdzvd.n_listeners],
		    sizeof(rdzvd.listeners[0]), "%.280s%s", addr, how);
		snprintf(listening[rdzvd.n_listeners++], sizeof(listening[0]),
		    "listening on %.300s%s%s", addr, tls != NULL ? " (TLS)" :
		    "", ep->kind == ENDPOINT_UNIX ? perms : "");
	}
}

static void
log_listening(void)
{
	for (size_t i = 0; i < rdzvd.n_listeners; i++)
		log_info("%s", listening[i]);
}

static int
is_wildcard(const char *host)
{
	return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
	    strcmp(host, "*") == 0 || host[0] == '\0';
}

/*
 * The address other replicas send clients to (SPEC §14): --advertise, else
 * the first TCP listener as bound, with this host's name in place of a
 * wildcard address.
 */
static void
set_advertise(void)
{
	char host[256];

	if (rdzvd.cfg.advertise != NULL && rdzvd.cfg.advertise[0] != '\0') {
		snprintf(rdzvd.advertise, sizeof(rdzvd.advertise), "%s",
		    rdzvd.cfg.advertise);
		return;
	}
	for (size_t i = 0; i < rdzvd.cfg.n_listen; i++) {
		struct endpoint ep = rdzvd.cfg.listen[i];
		if (ep.kind != ENDPOINT_TCP)
			continue;
		ep.port = (uint16_t)grpc_server_port(rdzvd.srv, i);
		if (is_wildcard(ep.host) && gethostname(host,
		    sizeof(host)) == 0) {
			host[sizeof(host) - 1] = '\0';
			snprintf(rdzvd.advertise, sizeof(rdzvd.advertise),
			    "%s:%u", host, (unsigned)ep.port);
		} else
			endpoint_format(&ep, rdzvd.advertise,
			    sizeof(rdzvd.advertise));
		return;
	}
}

/*
 * rdzvd --migrate-store FROM TO: copies one store into another (SQLite
 * into etcd, typically) and exits; rdzvd must not be running on FROM.
 */
static int
migrate_store(const struct config *cfg)
{
	struct store_migrated m;
	struct store_opts so;
	struct core_now now = { mono_ms(), wall_ms() };
	char err[1024];

	store_opts_from(cfg, &so);
	if (store_migrate(cfg->migrate_from, cfg->migrate_to, &so, now, &m,
	    err, sizeof(err)) != 0) {
		fprintf(stderr, "rdzvd: --migrate-store: %s\n", err);
		return 1;
	}
	printf("copied %u jobs, %u nodes and %llu events from %s to %s "
	    "(%llu transactions, %llu bytes)\n", m.jobs, m.nodes,
	    (unsigned long long)m.events, cfg->migrate_from, cfg->migrate_to,
	    (unsigned long long)m.transactions, (unsigned long long)m.bytes);
	return 0;
}

int
main(int argc, char **argv)
{
	char err[512];

	log_init("rdzvd", LOG_LEVEL_INFO);
	config_load(&rdzvd.cfg, argc, argv);
	log_set_level(rdzvd.cfg.log_level);
	if (config_validate(&rdzvd.cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "rdzvd: %s\n", err);
		return 2;
	}
	if (rdzvd.cfg.check_only) {
		config_print(&rdzvd.cfg, stdout);
		return 0;
	}
	if (rdzvd.cfg.migrate_from != NULL)
		return migrate_store(&rdzvd.cfg);

	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	rdzvd.started_mono_ms = mono_ms();
	rdzvd.started_wall_ms = wall_ms();
	rdzvd.base = event_base_new();
	/* Three priorities: the end-of-turn flush runs after everything else
	 * (turn.c). */
	if (rdzvd.base == NULL || event_base_priority_init(rdzvd.base, 3) != 0)
		fatalx("cannot create the event loop");
	setup_tls();
	metrics_init(rpc_methods, rpc_n_methods, rpc_streams_count);
	hook_init(rdzvd.base, rdzvd.cfg.on_quarantine,
	    rdzvd.cfg.on_quarantine_timeout_ms);

	struct grpc_server_opts so;

	rpc_services_server_opts(&so);
	so.max_conns = conns_cap(so.max_conns);
	so.conn_refused = conn_refused;
	/* Only where they are logged: ten thousand closing connections need
	 * not format their peers for nothing. */
	so.conn_closed = rdzvd.cfg.log_level >= LOG_LEVEL_DEBUG ?
	    conn_closed : NULL;
	so.tls_failed = rdzvd.tls != NULL &&
	    rdzvd.cfg.log_level >= LOG_LEVEL_INFO ? tls_failed : NULL;
	so.accept_paused = accept_paused;
	so.accept_blocked = accept_blocked;
	so.call_ended = metrics_call_ended;
	share_replay_record();
	auth_start(&so);
	rdzvd.srv = grpc_server_new(rdzvd.base, rpc_methods,
	    rpc_n_methods, &so);
	if (rdzvd.srv == NULL)
		fatal("grpc_server_new");

	/* Signal handlers before "listening on": whoever waits for that line
	 * may signal us at once. */
	struct event *sigterm = evsignal_new(rdzvd.base, SIGTERM, on_signal, NULL);
	struct event *sigint = evsignal_new(rdzvd.base, SIGINT, on_signal, NULL);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	listen_all();
	set_advertise();
	open_state();
	ha_wait_settled();
	log_listening();
	http_start();

	rdzvd.serving = 1;
	notify("READY=1");
	log_info("ready (version %s, pid %d)", RDZV_VERSION, (int)getpid());
	event_base_dispatch(rdzvd.base);

	event_free(sigterm);
	event_free(sigint);
	if (tlsfail.ev != NULL) {
		tls_failed_flush(-1, 0, NULL);
		event_free(tlsfail.ev);
	}
	http_stop();
	rpc_services_stop();
	hook_free();
	ha_free();
	grpc_server_free(rdzvd.srv);
	auth_stop();
	log_info("store %s: %llu transaction%s, %llu byte%s written",
	    store_path(rdzvd.store),
	    (unsigned long long)store_transactions(rdzvd.store),
	    plural(store_transactions(rdzvd.store)),
	    (unsigned long long)store_bytes_written(rdzvd.store),
	    plural(store_bytes_written(rdzvd.store)));
	store_close(rdzvd.store);
	core_free(rdzvd.core);
	tls_free(rdzvd.tls);
	event_base_free(rdzvd.base);
	config_free(&rdzvd.cfg);
	metrics_free();
	log_info("stopped");
	return 0;
}
