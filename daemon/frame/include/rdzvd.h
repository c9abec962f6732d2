/*
 * rdzvd's frame and its map. The daemon is one event loop (libevent) and
 * these modules under daemon/, each a folder with a static library and a
 * public header in its include/ folder saying what it owns, from the top:
 *
 *   main.c         the program: starts and stops the modules below
 *   ha/            the election and the replica's role (etcd)
 *   http/          /metrics, probes, the status page (evhttp)
 *   rpc/           one file per RPC; the Join streams
 *   auth/          who a caller is (MUNGE, Slurm job owners), off the loop
 *   frame/         this header: config, the turn, the stall clock, the
 *                  role, metrics, the journal, the host hook, followers
 *   convert/       core state as protobuf messages
 *   store/         the durable copy: SQLite or etcd
 *   core/          the rendezvous rules (SPEC §4): no I/O, no clock
 *
 * and lib/ below them all (base/, grpc/: HTTP/2 connections and gRPC
 * calls, etcd/). A module calls only the modules below it; what a module
 * above must hear of (a turn's output, when a node was last heard, the
 * count of streams) comes down as a hook it registers.
 *
 * The path of a Join. lib/grpc/ reads the HEADERS and DATA of a stream,
 * decodes the request with the method table's descriptor
 * (rpc/rpc_services.c: rpc_methods) and, under auth = munge, first
 * waits for auth/ to decode the credential off the loop. rpc/rpc_join.c
 * checks what the core cannot (strings, the session id), calls
 * core_join() or core_resume() with turn_now(), attaches the call to the
 * node's stream (rpc/rpc_streams.c) and calls turn_schedule(). Nothing is
 * sent yet: the core has only recorded its changes and queued messages in
 * the node's outbox. At the end of the loop turn turn.c's flush event
 * (lowest priority, so after every other event of the turn) writes all
 * the turn's changes into one transaction (store_commit_begin()); with
 * SQLite the commit thread makes it durable (store_commit_end()) while
 * the loop serves on and holds what would change the core (turn_hold.c).
 * Once durable, turn.c hands out the outbox (turn_out.send: the streams
 * write each assignment), tells the followers (follow.c: Control.Watch,
 * the page), answers the unary calls held by turn_answer() and runs what
 * it held. A failed commit sends nothing (turn_out.commit_failed: SQLite
 * exits, etcd steps down).
 *
 * Module daemon/frame/ (librdzvframe): below, its interfaces, grouped by
 * the file that defines them (config_store.h: the store as configured).
 *
 * Calls: lib/base, lib/grpc, lib/etcd, proto, daemon/core, daemon/store,
 *   daemon/convert.
 * Called by: daemon, daemon/auth, daemon/ha, daemon/http, daemon/rpc.
 */
#ifndef RDZVD_H
#define RDZVD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "convert.h"
#include "core.h"
#include "endpoint.h"
#include "grpc.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

#define RDZVD_MAX_LISTEN 16
#define RDZVD_MAX_ADMINS 64
#define RDZVD_HTTP_PORT	29401

/* config.c */
enum auth_kind {
	AUTH_NONE,		/* the transport's identity (SPEC §11) */
	AUTH_MUNGE,		/* a MUNGE credential on every call */
};

struct config {
	char		*file;		/* the config file read, or NULL */
	struct endpoint	 listen[RDZVD_MAX_LISTEN];
	size_t		 n_listen;
	struct endpoint	 http_listen;	/* the HTTP listener (SPEC §15) */
	int		 http_off;	/* http-listen = none */
	int		 http_given;	/* set by the file or a flag */
	uint32_t	 http_max_conns;
	uint32_t	 http_request_timeout_ms;
	char		*db;
	int		 db_given;	/* 1 by the file, 2 by a flag */
	int		 store_given;	/* likewise */
	char		*store;		/* the store spec (store.h); from db
					   when not set */
	char		*etcd_ca;	/* TLS to an etcd store */
	char		*etcd_cert;
	char		*etcd_key;
	char		*migrate_from;	/* --migrate-store FROM TO */
	char		*migrate_to;
	char		*tls_cert;
	char		*tls_key;
	char		*tls_ca;
	int		 insecure;
	int		 log_level;
	char		*admins[RDZVD_MAX_ADMINS];
	size_t		 n_admins;
	char		*admin_group;	/* its members are admins (munge) */
	int		 auth;		/* enum auth_kind */
	char		*munge_socket;	/* NULL: libmunge's default */
	int		 slurm_job_owner; /* 1: check numeric ids (auth.c) */
	size_t		 max_message;
	uint32_t	 max_streams;
	uint32_t	 max_conns;
	uint32_t	 max_nodes_per_job;
	uint32_t	 max_jobs_per_identity;
	uint32_t	 max_ended_jobs_per_identity;
	uint32_t	 max_join_timeout_ms;
	uint32_t	 retention_s;
	uint32_t	 straggler_steps;	/* 0: off */
	uint32_t	 straggler_ms;		/* 0: off */
	uint32_t	 keepalive_ms;
	uint32_t	 preface_timeout_ms;
	uint32_t	 idle_timeout_ms;
	/* Who may hold connections (issue 36). */
	uint32_t	 max_conns_per_addr;	/* 0: no limit */
	uint32_t	 unauth_idle_timeout_ms;
	uint32_t	 max_health_watchers;
	uint32_t	 shutdown_timeout_ms;
	char		*advertise;	/* HOST:PORT; NULL: the first TCP
					   listener */
	uint32_t	 leader_lease_ms;	/* the etcd lease of a replica */
	/* Host memory (docs/HEALTH.md): the policy and the hook. */
	int		 host_gpu_failure;	/* enum host_gpu_action */
	uint32_t	 host_suspect_crashes;
	uint32_t	 host_quarantine_crashes;
	uint32_t	 host_crash_window_ms;
	char		*on_quarantine;		/* NULL or "": none */
	uint32_t	 on_quarantine_timeout_ms;
	unsigned int	 unix_mode;	/* 0: as the umask leaves it */
	char		*unix_group;	/* NULL: the process's group */
	gid_t		 unix_gid;	/* unix_group's */
	int		 check_only;
};

/* Fills |cfg| from the defaults, the config file and |argv|, in that order
 * of precedence (flags win). Exits 2 with a message on bad input. */
void config_load(struct config *cfg, int argc, char **argv);
/* Reads the `key = value` lines of |file| into |cfg|, over what it holds
 * (config_load's file step, without exiting). Returns 0; -1 when the file
 * cannot be read; or the number of its first bad line, after reading the
 * rest. |err| says what and where. */
int config_read_file(struct config *cfg, const char *file, char *err,
    size_t errlen);
/* Checks the combination of settings; returns 0 or -1 with a message in
 * |err|. */
int config_validate(const struct config *cfg, char *err, size_t errlen);
void config_print(const struct config *cfg, FILE *f);
void config_free(struct config *cfg);
/* The default database path of SPEC §9 into |buf|. */
void config_default_db(char *buf, size_t len);
int config_is_admin(const struct config *cfg, const char *identity);

/* main.c */
struct rdzvd {
	struct event_base	*base;
	struct grpc_server	*srv;
	struct config		 cfg;
	struct tls_ctx		*tls;
	uint64_t		 started_mono_ms;
	int64_t			 started_wall_ms;
	int			 serving;	/* health: SERVING or not */
	/* The role (SPEC §14; ha.c): 0 leads (always, with SQLite). */
	int			 standby;
	char			 leader[300];	/* the leader's address, or "" */
	char			 advertise[300]; /* ours (--advertise) */
	char			 listeners[RDZVD_MAX_LISTEN][300];
	size_t			 n_listeners;
	struct core		*core;
	struct store		*store;
};
extern struct rdzvd rdzvd;

/*
 * role.c: leader or standby (SPEC §14), as the services read it. A standby
 * refuses Rendezvous and Control calls with UNAVAILABLE and the leader's
 * address in the `rdzv-leader` trailer.
 */
/* "leader" or "standby". */
const char	*role_name(void);
/* Adds the `rdzv-leader` trailer to |call| when a standby knows the
 * leader. */
void		 role_hint(struct grpc_call *call);
/* Ends a call a standby does not serve: UNAVAILABLE, "not the leader; the
 * leader is X", with the hint. */
void		 role_refuse(struct grpc_call *call);
/* The leader's advertised address as the election learned it ("":
 * unknown). */
void		 role_set_leader(const char *addr);

/*
 * turn.c: one event-loop turn's changes become one transaction, then the
 * turn's output goes out (SPEC §9: nothing is acknowledged before it is
 * durable) to the consumers rpc_services.c registers at start: the Join streams
 * and the followers of job changes (follow.c). They call turn.c to feed
 * the core; turn.c calls none of them by name.
 */
struct turn_out {
	/* One message of the core's outbox, for |node|. */
	void	(*send)(struct core_node *, const struct core_msg *);
	/* The turn's changed and removed jobs, on the core's lists. */
	void	(*jobs_changed)(const struct core *, struct core_now);
	/* A node the core removed, alone or with its job. */
	void	(*node_removed)(uint64_t node_id);
	/* The turn's transaction took |usec| (none: no transaction). */
	void	(*committed)(uint64_t usec);
	/* The turn's output is out: what it changed, for counting. */
	void	(*turn_done)(const struct core *, struct core_now);
	/* The turn's host changes (hosts->changes), after the commit. */
	void	(*hosts_changed)(const struct hosts *);
	/* The store refused the turn's commit (|err| says why): nothing of
	 * the turn goes out, and the turn is gone. */
	void	(*commit_failed)(const char *err);
	/* When |node| was last heard from, the freshest the frame knows
	 * (the progress checkpoint saves it). */
	int64_t	(*last_seen)(const struct core_node *, struct core_now);
};
void		 turn_init(const struct turn_out *);
void		 turn_free(void);
/* The time to give the core now. */
struct core_now	 turn_now(void);
/* When |node| was last heard from, the freshest the frame knows (its
 * connection's, through turn_out.last_seen). */
int64_t		 turn_last_seen(const struct core_node *, struct core_now);
/* A job with its nodes as rdzvd shows it now: last seen as above, silent
 * after twice the keepalive, with its |events| latest events. */
struct convert_job_view turn_job_view(uint32_t events);
/* Something changed in the core: commit and send at the end of this turn. */
void		 turn_schedule(void);
/* Answers a unary call after this turn's commit: |answer| builds the reply
 * (or finishes the call) then; |arg| is freed with free() afterwards, also
 * when the client went away first. */
void		 turn_answer(struct grpc_call *call,
		    void (*answer)(struct grpc_call *, void *), void *arg);
/* Runs the flush now (used at shutdown). */
void		 turn_flush(void);
/* Refuses the calls waiting for this turn's commit, which will not come
 * (stepping down): UNAVAILABLE with |why| and the leader hint. */
void		 turn_abandon(const char *why);
/* Waits for the commit in flight and sends its output, then refuses what
 * is still held with |why| (shutting down). */
void		 turn_settle(const char *why);
/* A commit is in flight on the commit thread: the core must not change
 * (hold the input with turn_hold) and reads answer from what is durable. */
bool		 turn_sealed(void);
/* How long the commit in flight has taken so far (0: none). */
uint64_t	 turn_commit_age_ms(void);
/* Whether that is long enough to call the store slow (/readyz). */
bool		 turn_store_slow(void);

/* turn_hold.c: what waits for the commit in flight. */
/* Runs |fn|(call, req, arg) once the commit in flight is durable, its
 * output out, and what was held before it has run; |req| is copied. A
 * call that ends first is forgotten. */
void		 turn_hold(struct grpc_call *call, grpc_handler_fn fn,
		    const ProtobufCMessage *req, void *arg);
/* The same for a read: held reads run first, before the held writes. */
void		 turn_hold_read(struct grpc_call *call, grpc_handler_fn fn,
		    const ProtobufCMessage *req, void *arg);
/* The same for a function of the loop (a stream's end). */
void		 turn_hold_fn(void (*fn)(uint64_t), uint64_t arg);
/* Runs what was held, in order (turn.c, after a commit's output). */
void		 turn_release(void);
/* Ends every held call with UNAVAILABLE and |why|. */
void		 turn_refuse_held(const char *why);
size_t		 turn_held_count(void);

/* committed.c: the jobs as last committed, for reads (ListJobs). */
void		 committed_load(const struct core *);
/* After a commit: its jobs, before the core clears its changes. */
void		 committed_turn(const struct core *);
void		 committed_free(void);
/* |j| when it holds nothing uncommitted; else its copy as last
 * committed, or NULL when no commit has held it yet. The copy serves a
 * summary only: its lists are not its own. */
const struct core_job *committed_job(const struct core_job *j);

/* stall.c: the clock deadlines run on, which stops while the loop is held. */
/* Starts the heartbeat; again does nothing. */
void		 stall_init(void);
void		 stall_free(void);
/* Monotonic ms less every stall so far: the core's clock. */
uint64_t	 stall_clock_ms(void);
/* When (mono ms) the last stall was noticed, 0 if none: no silence is
 * counted from before it. */
uint64_t	 stall_end_ms(void);
/* A commit in flight for |ms| just ended (turn.c): a slow one is a stall
 * for the core's deadlines and for leases, as when it held the loop. */
void		 stall_commit_took(uint64_t ms);

/* metrics.c: the counters and histograms of /metrics (SPEC §15). */
struct evbuffer;
/* |methods|: what rdzvd serves, for the calls' labels; |agents_connected|
 * counts the open Join streams. */
void		 metrics_init(const struct grpc_method *methods,
		    size_t n_methods, size_t (*agents_connected)(void));
void		 metrics_free(void);
/* grpc_server_opts.call_ended: a call by method and status code. */
void		 metrics_call_ended(const char *path, int status, void *arg);
/* A store commit that took |usec|. */
void		 metrics_commit(uint64_t usec);
/* The turn's rounds, restarts, lost leases, GPU results (after the
 * commit, before the core clears its changes). */
void		 metrics_turn(const struct core *, struct core_now);
void		 metrics_http_request(void);
/* The exposition in Prometheus' text format. */
void		 metrics_write(struct evbuffer *, size_t http_conns,
		    size_t sse_clients);

/* joblog.c: one info line per job event that matters, per turn (after
 * the commit, before the core clears its changes). */
void		 joblog_turn(const struct core *, struct core_now);

/*
 * follow.c: the one list of followers of job changes; Control.Watch and the
 * page's event streams are its sinks. A follower is a sink and its
 * argument, optionally one job, and how much of each job it wants.
 */
enum follow_detail {
	FOLLOW_SUMMARY,		/* the job alone */
	FOLLOW_NODES,		/* with its nodes */
	FOLLOW_EVENTS,		/* with its nodes and latest events */
	FOLLOW_NDETAIL
};
struct follow_sink {
	/* Sends |job| (|removed|: retention deleted it) to the follower of
	 * |arg|; 0, or -1 after ending that follower (follow_remove). */
	int	(*send)(void *arg, const Rdzv__V1__Job *job, int removed,
		    struct core_now now);
	/* Ends the follower of |arg| (follow_end_all), with follow_remove. */
	void	(*end)(void *arg, const char *why);
};
struct follower;
/* A new follower of the job |rdzv_id| (NULL: every job). */
struct follower	*follow_add(const struct follow_sink *, void *arg,
		    const char *rdzv_id, enum follow_detail);
/* Forgets |f|; NULL does nothing. */
void		 follow_remove(struct follower *f);
size_t		 follow_count(const struct follow_sink *);
void		 follow_end_all(const struct follow_sink *, const char *why);
/* Calls |fn| with each argument of |sink|'s followers and |ctx|; |fn| may
 * not add or remove followers. */
void		 follow_foreach(const struct follow_sink *sink,
		    void (*fn)(void *arg, void *ctx), void *ctx);
/* What a first answer holds: at most |max| jobs, of the ended ones (when
 * following every job) the |ended_max| that ended last. */
struct follow_limits {
	size_t		 max;
	size_t		 ended_max;
};
/* The jobs a first answer left out. */
struct follow_left {
	size_t		 active;
	size_t		 ended;
};
/* Sends |f| the matching jobs as they are now, active ones first; 0, or -1
 * when the sink ended the follower. */
int		 follow_snapshot(struct follower *f, struct core_now,
		    const struct follow_limits *, struct follow_left *left);
/* turn_out.jobs_changed: the turn's changed and removed jobs to every
 * follower that matches. */
void		 follow_jobs_changed(const struct core *, struct core_now);

/* hook.c: host state changes logged, on-quarantine run (docs/HEALTH.md). */
/* command NULL or "": no hook. */
void		 hook_init(struct event_base *, const char *command,
		    uint32_t timeout_ms);
/* After a turn's commit: its host changes. */
void		 hook_hosts_changed(const struct hosts *);
/* After the store was loaded: the quarantined hosts, named in the log
 * (their joins are refused; nothing is run for them again). */
void		 hook_hosts_loaded(const struct hosts *);
/* Runs started, and runs that failed (not 0, killed, not started). */
void		 hook_counts(uint64_t *runs, uint64_t *failures);
/* Writes into the core the outcomes of runs that ended while a commit was
 * in flight, which the next turn would have written (shutting down: the
 * held work is dropped, and turn_flush commits what this wrote). */
void		 hook_settle(void);
void		 hook_free(void);
/* How a host's latest run went (numbered as rdzv.v1.HookRunState). */
enum hook_state {
	HOOK_QUEUED = 1,
	HOOK_RUNNING = 2,
	HOOK_EXITED = 3,
	HOOK_SIGNALED = 4,
	HOOK_KILLED = 5,
	HOOK_NOT_STARTED = 6,
	HOOK_DROPPED = 7,
};
struct hook_last {
	char		 host[HOST_NAME_MAX_LEN + 1];
	enum hook_state	 state;
	int		 pid;		/* 0 before it started */
	int		 code;		/* HOOK_EXITED: its exit status */
	int		 sig;		/* HOOK_SIGNALED */
	char		 output[HOST_REASON_MAX];	/* its last line */
	char		 reason[HOST_REASON_MAX];	/* what it was given */
	int64_t		 started_ms, ended_ms;		/* wall; 0: not yet */
	TAILQ_ENTRY(hook_last) entry;
};
/* The latest run for |host| since rdzvd started, or NULL. */
const struct hook_last *hook_last(const char *host);
/* The command, or NULL when none is set. */
const char	*hook_command(void);
/* Whether a run for |host| is queued or running. */
bool		 hook_pending(const char *host);
/* |fn| is told of the end of each run (one listener: rpc_set_host.c). */
void		 hook_on_end(void (*fn)(const char *host));
/* A host record with its latest run, as Control.ListHosts, SetHost and
 * the page show it (convert_host and the run). */
Rdzv__V1__Host	*hook_host_to_pb(struct convert_arena *, const struct host *,
		    struct core_now);

#endif
