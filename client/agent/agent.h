/*
 * rdzv-agent's internals (SPEC §5, §6, §7). One struct agent (agent.c)
 * owns everything of a run and is the hub that decides; the other modules
 * each own a struct of their own and do one job:
 *
 *   session.c        the session on rdzvd: Health/Check, the Join stream,
 *                    reconnecting and resuming, on whichever server of
 *                    --server's list leads (client/common/servers.h);
 *   report.c         what the node tells rdzvd after its Join (Report,
 *                    Leave), kept until it arrives;
 *   workers.c        the set of workers of one generation;
 *   gpucheck_node.c  the node's GPUs and what a failed check means under
 *                    the policy;
 *   progress.c       the workers' progress reports and the hang timer;
 *   hang.c           the stacks of hung workers (py-spy or SIGUSR1) and
 *                    their process state;
 *   hung.c           whose hang it is, and what this node does (rule 17);
 *   logs.c, env.c    the workers' log files and environment.
 *
 * A module tells the hub what happened through the table of callbacks the
 * hub gave it at init (session_events, report_events, workers_events), or
 * through what its functions return; it never calls agent.c, and no two
 * of them call each other in a circle (report.c reads the session's state,
 * the session does not call report.c). agent.c alone starts and stops the
 * workers and decides to exit (node_quit, the one quit path of join and
 * coproc).
 */
#ifndef RDZV_AGENT_H
#define RDZV_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <event2/event.h>

#include "client.h"
#include "clock.h"
#include "exitcodes.h"
#include "helpfmt.h"
#include "grpc.h"
#include "env.h"
#include "gpucheck_run.h"
#include "rdzv_id.h"
#include "rdzv/v1/rendezvous.pb-c.h"

/* Exit statuses (SPEC §6); 128+N for signal N. */
/* One table for the three programs (lib/exitcodes.h). */
#define AGENT_EXIT_OK		RDZV_EXIT_OK
#define AGENT_EXIT_FAILED	RDZV_EXIT_FAILED	/* the job failed */
#define AGENT_EXIT_USAGE	RDZV_EXIT_USAGE
#define AGENT_EXIT_UNREACHABLE	RDZV_EXIT_UNAVAILABLE	/* rdzvd not reached */
#define AGENT_EXIT_REFUSED	RDZV_EXIT_REFUSED	/* permission, job
							   closed, evicted */
#define AGENT_EXIT_PROTOCOL	RDZV_EXIT_PROTOCOL	/* rdzvd sent something
							   impossible */

#define AGENT_STOP_TIMEOUT_MS	30000	/* torchrun's worker close timeout */
#define AGENT_GPUCHECK_TIMEOUT_MS 60000
#define AGENT_RECONNECT_MS	600000	/* how long to retry a lost rdzvd */
#define AGENT_LEAVE_TIMEOUT_MS	5000
#define AGENT_MESSAGE_MAX	200	/* reported error message, bytes */

enum nproc_mode {
	NPROC_FIXED,		/* --nproc-per-node N, or the default 1 */
	NPROC_GPU,		/* one per GPU; no GPU is an error */
	NPROC_AUTO,		/* one per GPU, else one */
	NPROC_SLURM,		/* N from $SLURM_GPUS_ON_NODE: one per GPU */
};

/* What `join` was told, after flags, RDZV_* variables and the scheduler's
 * values (join.c, sched.c). Strings point into argv or the environment. */
struct agent_opts {
	struct client_opts	 client;
	const char		*id;
	uint32_t		 min_nodes;	/* 0: the job's default */
	uint32_t		 max_nodes;
	enum nproc_mode		 nproc_mode;
	bool			 nproc_set;	/* by a flag or RDZV_* */
	uint32_t		 nproc;		/* NPROC_FIXED, NPROC_SLURM */
	bool			 has_node_rank;
	uint32_t		 node_rank;
	bool			 spare_by_order; /* a Slurm allocation
						   larger than max_nodes and
						   a rank of max_nodes or
						   more (sched.c, session.c) */
	uint32_t		 attempt;	/* the scheduler's run; 0 unknown */
	uint32_t		 allocation_nodes; /* of the scheduler's; 0: none */
	uint32_t		 max_restarts;
	uint32_t		 last_call_ms;	/* 0: the job's default */
	uint32_t		 join_timeout_ms;
	uint32_t		 lease_ttl_ms;
	uint32_t		 reconnect_grace_ms;
	bool			 has_rejoin_timeout;	/* by a flag, RDZV_* or
							 * sched.c */
	uint32_t		 rejoin_timeout_ms;
	uint32_t		 hang_timeout_ms;	/* 0: off (or the job's) */
	const char		*role;
	/* The host as rdzvd remembers it (docs/HEALTH.md): --host, else
	 * $SLURMD_NODENAME (sched.c), else NULL: the hostname. */
	const char		*host;
	const char		*advertise_addr;	/* NULL: our address */
	uint16_t		 master_port;	/* 0: a free port each round */
	const char		*log_dir;	/* NULL: a fresh one */
	bool			 tee;
	bool			 gpucheck_set;	/* --gpucheck was given */
	struct gpucheck_opts	 gpucheck;
	uint32_t		 stop_timeout_ms;
	bool			 restart_inproc;	/* --restart in-process */
	uint32_t		 rank_policy;	/* rdzv.v1.RankPolicy; 0 the
						   job's */
	uint32_t		 reconnect_timeout_ms;
	/* --preload: modules the fork server imports (forksrv.c); NULL:
	 * workers start by exec */
	const char		*preload;
	char			**argv;		/* the worker command */
	int			 argc;
};

/*
 * What this node offers rdzvd: a Join carries it, a Report UPDATE what
 * changed of it. agent.c owns and changes it; session.c and report.c read
 * it when they send.
 */
struct offer {
	char				 hostname[256];	/* the host's name for
							 * rdzvd (opts.host) */
	char				 machine[256];	/* gethostname() */
	uint32_t			 nproc;		/* workers */
	uint16_t			 master_port;
	uint64_t			 started_gen;	/* highest started */
	const struct gpucheck_node	*gpus;		/* the GPU results */
};

/* ------------------------------------------------------ gpucheck_node.c */

/* The node's GPUs as the GPU check sees them. */
struct gpucheck_node {
	enum gpucheck_policy	 policy;	/* GPUCHECK_OFF: no checks */
	int			 n;		/* devices checked */
	struct gpucheck_result	*results;	/* by device, n of them */
	int			*use;		/* devices the workers use, */
	int			 n_use;		/* worker i on use[i] */
	char			 visible[1024];	/* or "" */
	int			 failed[64];	/* failed in the running set, */
	int			 n_failed;	/* left out once it ended */
};

/* What a worker's check result asks of the agent. */
enum gpucheck_action {
	GPUCHECK_DO_NOTHING,	/* it passed */
	GPUCHECK_DO_REPORT,	/* warn: report the results; the worker runs */
	GPUCHECK_DO_STOP,	/* exclude: stop the set; the GPU goes after */
	GPUCHECK_DO_LEAVE,	/* strict: report, leave the job, exit 1 */
};

/* The results as JoinRequest/ReportRequest carry them. */
struct gpucheck_pb {
	size_t			 n;
	Rdzv__V1__GpuResult	**ptrs;
	Rdzv__V1__GpuResult	*res;
	Rdzv__V1__GpuStep	*steps;
	Rdzv__V1__GpuStep	**step_ptrs;
};

/* --------------------------------------------------------------- logs.c */

struct tee;

/* A generation's log files made ahead. */
struct logs_next {
	bool		 ready;		/* <log-dir>/.next/ holds them */
	bool		 taken;		/* renamed to the generation */
	int		 n;		/* ranks */
	int		*fds;		/* stdout, stderr of each rank */
};

struct logs {
	char		 dir[512];
	bool		 made;		/* by us (mkdtemp) */
	struct logs_next next;
};

/* ------------------------------------------------------------ forksrv.c */

/* The preloaded fork server (--preload): its life as the agent sees it. */
struct forksrv {
	enum {
		FS_OFF,		/* no --preload */
		FS_STARTING,	/* importing */
		FS_READY,
		FS_GONE,	/* failed or died: said once, exec from now */
	}			 state;
	pid_t			 pid;
	int			 fd;		/* SOCK_SEQPACKET to it */
	struct event		*ev;
	const char		*modules;	/* --preload */
	bool			 holding;	/* workers wait (forksrv_hold) */
	bool			 waited;	/* for ready once: no more */
	struct event		*wait_ev;	/* the bound of that wait */
	void			(*ready)(void *);	/* they may go */
	void			*arg;
	uint64_t		 started_us;
};

/* ------------------------------------------------------------ workers.c */

struct workers;

struct worker {
	struct workers	*ws;
	int		 local_rank;
	pid_t		 pid;		/* also its process group; 0: none */
	int		 status;	/* waitpid status once exited */
	bool		 exited;
	bool		 execd;		/* exec succeeded (pipe EOF) */
	int		 exec_errno;	/* exec failed with this */
	int		 device;	/* GPU it checks, -1: none */
	bool		 check_pending;	/* its GPU result is still due */
	bool		 check_failed;	/* it will not exec */
	int		 pipe_fd;	/* exec (and check) pipe, -1 closed */
	struct event	*pipe_ev;
	struct event	*check_timer;
	struct tee	*out;		/* --tee: stdout and stderr copies */
	struct tee	*err;
	char		 error_file[640];
};

enum ws_state {
	WS_IDLE,		/* no worker runs */
	WS_RUNNING,
	WS_STOPPING,		/* SIGTERM sent, waiting for the exits */
};

/* How a worker set ended. */
enum ws_end {
	WS_END_STOPPED,		/* we stopped it */
	WS_END_SUCCEEDED,	/* every worker exited 0 */
	WS_END_FAILED,		/* a worker exited non-zero */
	WS_END_GPUCHECK,	/* a worker's GPU check failed */
	WS_END_HANG,		/* no worker made progress: stopped */
};

/* What the workers tell the hub; each is called with |arg|. */
struct workers_events {
	/* A worker's GPU check passed, failed or timed out. Under a policy
	 * other than warn a worker whose check failed does not exec. */
	void	(*checked)(void *arg, const struct worker *,
		    const struct gpucheck_result *);
	/* Every worker of the set has exec'd: a quiet moment. */
	void	(*execd)(void *arg);
	/* Every worker of the set was reaped; ws->end says how it ended. */
	void	(*ended)(void *arg);
	void	*arg;
};

struct workers {
	struct event_base	*base;
	const struct agent_opts	*opts;
	struct logs		*logs;
	struct workers_events	 ev;
	enum ws_state		 state;
	enum ws_end		 end;
	uint64_t		 generation;
	uint32_t		 base_rank;
	struct worker		*w;
	int			 n;
	int			 alive;		/* not yet reaped */
	int			 execd;		/* exec'd so far */
	int			 first_failed;	/* local rank, -1 */
	uint64_t		 arrived_us;	/* of their assignment */
	struct event		*kill_timer;	/* SIGKILL after stop_timeout */
	struct event		*sigchld;
	bool			 killed;	/* SIGKILL was sent */
	const char		*progress_env;	/* RDZV_PROGRESS; NULL none */
	const char		*ifname;	/* GLOO/NCCL_SOCKET_IFNAME
						   where unset; "" none */
	const char		*restart_env;	/* RDZV_RESTART_SOCKET; NULL */
	struct forksrv		*fs;		/* --preload's; NULL: none */
};

/* ----------------------------------------------------------- progress.c */

/* What the workers' progress tells the hub; each is called with |arg|. */
struct progress_events {
	/* The node's step (its slowest reporting worker's) moved. */
	void	(*moved)(void *arg, uint64_t gen, uint64_t step);
	/* No worker made progress for the hang timeout, after the first
	 * report: called once per set of workers. */
	void	(*hung)(void *arg);
	void	*arg;
};

struct progress_watch {
	struct event_base	*base;
	struct progress_events	 ev;
	int			 fd;		/* the datagram socket */
	struct event		*read_ev;
	struct event		*hang_timer;
	char			 env[128];	/* RDZV_PROGRESS: a path or
						   @abstract-name */
	char			 path[512];	/* to remove; "" abstract */
	uint64_t		 generation;	/* watched; 0: none */
	int			 n;		/* workers */
	uint64_t		*steps;		/* each worker's latest */
	bool			*seen;		/* it reported */
	bool			 has_step;
	uint64_t		 step;		/* the slowest worker's */
	uint64_t		 moved_us;	/* last progress, monotonic */
	uint32_t		 hang_ms;	/* 0: no hang detection */
	bool			 hung;		/* told; until the next set */
	uint64_t		 dropped;	/* messages ignored */
};

/* --------------------------------------------------------------- hang.c */

struct hang {
	struct event_base	*base;
	void			(*done)(void *arg);	/* the dump is over */
	void			*arg;
	bool			 active;
	struct event		*timer;
	int			 pipe_fd;	/* EOF: every py-spy exited */
	struct event		*pipe_ev;
};

/* ------------------------------------------------------------- inproc.c */

/* What the restart socket tells the hub; each is called with |arg|. */
struct inproc_events {
	/* A kept worker's train function failed in generation |gen|. */
	void	(*failed)(void *arg, uint64_t gen, int local_rank,
		    const char *msg);
	/* The set did not take generation |gen| within the stop timeout. */
	void	(*late)(void *arg, uint64_t gen);
	/* A kept worker's meeting of generation |gen| timed out waiting for
	 * the global ranks |ranks| (rule 17); its failure follows. */
	void	(*absent)(void *arg, uint64_t gen, const uint32_t *ranks,
		    size_t n);
	/* A worker of the set said hello, or the wait for a starting set
	 * (inproc_starting) ended: decide again. */
	void	(*ready)(void *arg);
	void	*arg;
};

struct inproc_peer {
	int		 fd;
	struct event	*ev;
	pid_t		 pid;		/* SO_PEERCRED */
	int		 local_rank;	/* -1 before its hello */
	bool		 hello;
	uint64_t	 took;		/* the last generation it took */
	size_t		 len;
	char		 buf[1024];	/* a partial line */
};

struct inproc {
	struct event_base	*base;
	const struct workers	*ws;
	struct inproc_events	 ev;
	int			 fd;		/* listening; -1 none */
	struct event		*accept_ev;
	char			 env[128];	/* RDZV_RESTART_SOCKET */
	char			 path[512];	/* to remove; "" abstract */
	struct inproc_peer	*peers;
	int			 n_peers, cap;
	uint64_t		 handing;	/* handed, not taken by all; 0 */
	int			 hellos;	/* of the set's workers, ever */
	struct event		*late_timer;
	uint64_t		 set_us;	/* the set started (mono_us) */
	struct event		*start_timer;	/* inproc_starting's wait */
};

/* ------------------------------------------------------------ session.c */

enum session_state {
	SESSION_CONNECT,	/* Health/Check before a new Join */
	SESSION_JOIN,		/* Join sent, no Accepted yet */
	SESSION_JOINED,		/* the stream is open */
	SESSION_RETRY,		/* waiting to connect again */
	SESSION_ENDED,		/* the job or this node ended; no more calls */
};

/* What the session tells the hub; each is called with |arg|. */
struct session_events {
	/* rdzvd accepted the node (joined or resumed): the stream is up. */
	void	(*joined)(void *arg);
	void	(*assignment)(void *arg, const Rdzv__V1__Assignment *);
	/* rdzvd says stop the workers of |gen| and older. */
	void	(*stop)(void *arg, uint64_t gen, const char *why);
	/* rdzvd refused to resume node |node_id|: the session joins again
	 * as a new node; what the old one had to say is moot. */
	void	(*resume_refused)(void *arg, uint64_t node_id,
		    const char *why);
	/* The session is over: the job closed or failed, the node was
	 * evicted, rdzvd refused the Join or could not be reached. The
	 * agent should exit with |status|; there is nothing to leave. */
	void	(*ended)(void *arg, int status, const char *msg);
	/* The generation a resume names: the one run or about to be. */
	uint64_t (*resume_generation)(void *arg);
	void	*arg;
};

/* The reminders while the node waits for the others (waiting.c). */
struct waiting_log {
	struct event		*ev;
	uint32_t		 participants;
	uint32_t		 min_nodes;
	uint64_t		 fails_at_ms;	/* monotonic; 0 unknown */
	uint32_t		 every_ms;
};

struct session {
	const struct agent_opts	*opts;
	const struct offer	*offer;
	struct session_events	 ev;
	struct grpc_client_opts	 gopts;
	struct tls_ctx		*tls;
	struct grpc_client	*cli;		/* to the current server */
	struct server_list	 servers;	/* --server's, and leaders */
	bool			 moved;		/* cli is not to the current
						   server: a new one before
						   the next attempt */
	enum session_state	 state;
	bool			 quitting;	/* no more attempts */
	struct grpc_ccall	*call;		/* Health/Check, a spare's
						   Watch, or Join */
	bool			 check_serving;
	uint8_t			 id[32];
	size_t			 id_len;	/* 0: not a node yet */
	/* Drawn for each join as a new node, sent in each retry of it
	 * (docs/PROTOCOL.md). */
	uint8_t			 join_token[16];
	uint64_t		 node_id;
	struct event		*retry_ev;
	uint32_t		 backoff_ms;
	bool			 round_answered; /* a server refused
						   in this round */
	uint64_t		 trying_since;	/* ms, first failed attempt */
	bool			 ever_joined;
	uint32_t		 hang_timeout_ms;	/* the job's; 0 off */
	uint32_t		 lease_ttl_ms;	/* the job's; 0 unknown */
	int			 close_err;	/* the last connection's end */
	bool			 job_restart_inproc;	/* the job's setting */
	bool			 hang_warned;
	/* A join went to an rdzvd that answered: it may hold our node. */
	bool			 join_sent;
	char			 last_error[512];
	bool			 spare_done;	/* a spare by node order has
						   waited (session.c) */
	struct event		*spare_ev;	/* ... at most this long */
	struct waiting_log	 wait;
};

/* ------------------------------------------------------------- report.c */

/* A Report that must reach rdzvd; resent after a resume. */
struct outcome_report {
	bool			 pending;
	struct grpc_ccall	*cc;		/* in flight */
	unsigned int		 seq, sent_seq;
	uint64_t		 generation;
	Rdzv__V1__Outcome	 outcome;
	const char		*cause;		/* "hang", "stuck", or NULL */
	uint32_t		*absent;	/* ranks that never arrived */
	size_t			 n_absent;
	Rdzv__V1__WorkerExit	*exits;
	int			 n_exits;
	char			 message[AGENT_MESSAGE_MAX + 1];
};

/* The node's latest step for rdzvd: at most one call a second, only the
 * latest step, nothing resent but the latest after a resume. */
struct progress_report {
	bool			 pending;	/* step not sent yet */
	uint64_t		 generation;
	uint64_t		 step;
	struct grpc_ccall	*cc;
	bool			 sent;		/* ever */
	uint64_t		 sent_us;	/* monotonic */
	bool			 unsupported;	/* rdzvd has no Progress */
	struct event		*timer;
};

/* Changes to the node's offer (OUTCOME_UPDATE), merged while one is in
 * flight; each sends the offer's values at the time. */
struct update_report {
	bool			 pending;
	struct grpc_ccall	*cc;
	unsigned int		 seq, sent_seq;
	bool			 nproc;
	bool			 master_port;
	bool			 gpucheck;
	uint64_t		 port_taken_gen;	/* see report_port_taken */
};

/* What the reports tell the hub. */
struct report_events {
	/* A call ended: an exiting agent may have waited for it. */
	void	(*done)(void *arg);
	void	*arg;
};

struct report {
	const struct session	*session;
	const struct offer	*offer;
	const char		*job_id;
	struct report_events	 ev;
	bool			 quitting;	/* outcomes are moot */
	struct outcome_report	 outcome;
	struct update_report	 update;
	struct progress_report	 progress;
	struct event		*retry_ev;
	struct grpc_ccall	*leave_cc;
	bool			 left;
};

/* -------------------------------------------------------------- agent.c */

/* What fencing asks of the hub (fence.c); each is called with |arg|. */
struct fence_events {
	/* The generation whose workers run as wanted; 0: none, nothing to
	 * fence. */
	uint64_t (*running)(void *arg);
	/* rdzvd cannot have heard from this node for the lease: the workers
	 * of |gen| are to stop; |why| says so. */
	void	(*fenced)(void *arg, uint64_t gen, const char *why);
	void	*arg;
};

/* Fencing's state (fence.c). */
struct fence {
	struct event		*ev;		/* its tick */
	const struct session	*session;	/* read: rdzvd last heard */
	const struct progress_watch *progress;	/* read: workers' steps */
	struct fence_events	 events;
	uint64_t		 heard_ms;	/* rdzvd last heard, mono */
	bool			 stepping_said;
};

/*
 * A node's life in a job (node.c), shared by join and coproc: the loop,
 * the session and its reports, the step, the signals, the exit.
 */
struct node_hooks {
	/* Decide again (the step event, on its own loop turn). */
	void	(*step)(void *arg);
	/* The exit was just decided: take no more work. NULL: nothing. */
	void	(*quitting)(void *arg);
	/* The exit's deadline passed: drop what still runs. NULL: nothing. */
	void	(*deadline)(void *arg);
	/* SIGINT, SIGTERM or SIGHUP arrived. */
	void	(*signal)(void *arg, int sig);
	void	*arg;
};

struct node {
	struct agent_opts	*opts;
	struct event_base	*base;
	struct offer		 offer;
	struct session		 session;
	struct report		 report;
	struct node_hooks	 hooks;
	struct event		*step_ev;
	struct event		*quit_ev;	/* the exit's deadline */
	uint32_t		 quit_ms;
	struct event		*sig_ev[3];
	bool			 quitting;
	int			 exit_status;
};

struct agent {
	struct node		 node;		/* first: the loop, the session */
	struct agent_opts	*opts;
	struct gpucheck_node	 gpucheck;
	struct logs		 logs;
	struct event		*prepare_ev;
	struct progress_watch		 progress;
	struct hang		 hang;
	uint64_t		 hung_gen;	/* reported as hung; 0 */
	/* A hang found with no worker of ours stopped: the culprit's node
	 * has this long to report first (rule 17), then we report too. */
	struct event		*bystander_ev;
	uint64_t		 bystander_gen;	/* waiting for it; 0 */
	struct fence		 fence;
	char			 ifname[16];	/* netif.c */
	bool			 ifname_chosen;

	/* What should run, and what runs (agent_step). */
	bool			 have_want;
	struct assignment	 want;
	char			 unwant_reason[160];	/* why !have_want */
	struct assignment	 cur;		/* of the running workers */
	struct workers		 ws;
	struct forksrv		 fs;		/* --preload */
	uint32_t		 nproc_joined;	/* offered at the join: the most */
	uint64_t		 gen_seen;	/* highest assigned */

	/* In-process restart (restart.c): the kept set's socket, the
	 * generation it ran before the one handed to it, the generation it
	 * reported failed, and whether a set that cannot be kept was told. */
	struct inproc		 inproc;
	uint64_t		 kept_from;
	uint64_t		 inproc_failed;
	uint64_t		 absent_gen;	/* of absent[]; 0: none */
	uint32_t		*absent;
	size_t			 n_absent;
	bool			 inproc_warned;
	uint64_t		 start_wait_gen; /* said we wait for it */

	int			 signals;	/* termination signals seen */
};

/* agent.c */
int	agent_init(struct agent *, struct agent_opts *);
void	agent_free(struct agent *);
int	agent_run(struct agent_opts *);

/* waiting.c */
int	waiting_init(struct session *, struct event_base *);
void	waiting_news(struct session *, const Rdzv__V1__Waiting *);
void	waiting_over(struct session *);
void	waiting_free(struct session *);
/* port.c: the master port this node offers, held until it is used. */
uint16_t port_next(uint16_t in_use);
bool	port_usable(uint16_t port);
bool	port_master_taken(struct node *, const Rdzv__V1__Assignment *);
int	assignment_check(const char *job_id, uint32_t nproc,
	    uint64_t gen_seen, const Rdzv__V1__Assignment *, char *why,
	    size_t len);
/* Logs an assignment in the words of docs/AGENT.md. */
void	assignment_log(const Rdzv__V1__Assignment *);

/* netif.c */
void	netif_choose(struct agent *);

/* fence.c */
int	fence_init(struct fence *, struct event_base *,
	    const struct session *, const struct progress_watch *,
	    const struct fence_events *);
void	fence_free(struct fence *);

/* hung.c: the hub's part of a hang. */
int	hung_init(struct agent *);
void	hung_free(struct agent *);
/* No worker made progress for the hang timeout (progress_events.hung). */
void	hung_found(void *arg);

/* restart.c: the hub's part of in-process restart. */
bool	restart_inproc_on(const struct agent *);
bool	restart_keep(struct agent *);
void	restart_ended(struct agent *);
extern const struct inproc_events restart_events;

/* inproc.c */
int	inproc_init(struct inproc *, struct event_base *, const char *dir,
	    const struct workers *, const struct inproc_events *, char *err,
	    size_t errlen);
bool	inproc_ready(struct inproc *);
bool	inproc_starting(struct inproc *, uint32_t window_ms);
int	inproc_hand(struct inproc *, const struct assignment *,
	    struct env_worker, uint32_t stop_timeout_ms);
void	inproc_reset(struct inproc *);
void	inproc_free(struct inproc *);

/* node.c */
/* The loop, the signals, the reports and the session of |n|, for job
 * o->id; |quit_ms| bounds an exit. 0, or -1 with a message. */
int	node_setup(struct node *n, struct agent_opts *o,
	    const struct node_hooks *, const struct session_events *,
	    uint32_t quit_ms, char *err, size_t len);
/* The offer's machine (gethostname) and its name for rdzvd: |host|
 * (--host), else the machine's. */
void	node_names(struct node *, const char *host);
/* Joins and runs the loop until the exit; the exit status. */
int	node_run(struct node *);
/* Decides again on the next loop turn: no decision runs inside another. */
void	node_step(struct node *);
/* The exit with |status| (|leave|: leave the job first), the one quit
 * path of join and coproc. The first decision to exit is the one; its
 * message is logged as its status wants. */
void	node_quit(struct node *, int status, bool leave, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/* Ends the session and the reports (their calls cancelled), then frees
 * the loop: the owner frees its own parts between the two. Both accept a
 * half-built node. */
void	node_close(struct node *);
void	node_free(struct node *);

/*
 * One command of rdzv-agent, as rdzvctl's are (tmux's cmd_entry): each
 * cmd_*.c exports one, with its usage and options; main.c lists them.
 */
struct cmd_entry {
	const char	*name;
	const char	*usage;		/* its lines in the general usage */
	int		(*exec)(int argc, char **argv);	/* argv[0]: name */
	void		(*help)(FILE *);	/* COMMAND --help, help COMMAND */
};

/* cmd_coproc.c */
extern const struct cmd_entry cmd_coproc_entry;

/* cmd_gpucheck.c */
extern const struct cmd_entry cmd_gpucheck_entry;
/* `gpucheck-worker`: one device's check for a preloaded worker (forksrv.c),
 * run by the worker process; argv[0] is "gpucheck-worker". */
int	cmd_gpucheck_worker(int argc, char **argv);

/* cmd_join.c */
extern const struct cmd_entry cmd_join_entry;
/* join's options, which coproc takes too. */
int	join_options(struct agent_opts *, int argc, char **argv,
	    void (*usage)(FILE *), char *err, size_t errlen);

/* sched.c */
void	sched_defaults(struct agent_opts *);
int	sched_pbs_nodes(const char *nodefile, const char *hostname,
	    uint32_t *count, uint32_t *index, char *err, size_t errlen);

/* session.c */
int	session_init(struct session *, struct event_base *,
	    const struct agent_opts *, const struct offer *,
	    const struct session_events *, char *err, size_t errlen);
void	session_start(struct session *);
void	session_quit(struct session *);
void	session_free(struct session *);
bool	session_connected(const struct session *);
const char *session_server(const struct session *);
void	session_event(struct session *, const Rdzv__V1__JoinEvent *);

/* report.c */
int	report_init(struct report *, struct event_base *,
	    const struct session *, const struct offer *, const char *job_id,
	    const struct report_events *);
void	report_outcome(struct report *, uint64_t gen, Rdzv__V1__Outcome,
	    const int *status, int n, const char *message);
void	report_hang(struct report *, uint64_t gen, const char *message,
	    bool culprit);
void	report_absent(struct report *, uint64_t gen, const char *message,
	    const uint32_t *absent, size_t n_absent);
void	report_progress(struct report *, uint64_t gen, uint64_t step);
void	report_update(struct report *, bool nproc, bool master_port,
	    bool gpucheck);
/* The master port of |generation| was taken: the update of the new port
 * asks for a new round that counts no restart. */
void	report_port_taken(struct report *, uint64_t generation);
void	report_flush(struct report *);
void	report_forget(struct report *);
void	report_leave(struct report *, const char *reason);
void	report_quit(struct report *);
bool	report_busy(const struct report *);
void	report_free(struct report *);

/* forksrv.c */
void	forksrv_start(struct forksrv *, const struct agent_opts *,
	    const char *masterwait);
int	forksrv_attach(struct forksrv *, struct event_base *);
bool	forksrv_hold(struct forksrv *);
bool	forksrv_usable(const struct forksrv *);
int	forksrv_spawn(struct forksrv *, const struct agent_opts *,
	    char *const *envp, const int fds[4], int device, pid_t *pid);
void	forksrv_free(struct forksrv *);

/* workers.c */
/* librdzv-masterwait.so's path, NULL where there is none (or
 * RDZV_MASTER_WAIT=0). */
const char *workers_masterwait_path(void);
int	workers_init(struct workers *, struct event_base *,
	    const struct agent_opts *, struct logs *,
	    const struct workers_events *);
int	workers_start(struct workers *, const struct assignment *,
	    const struct gpucheck_node *);
void	workers_stop(struct workers *, enum ws_end, const char *why);
void	workers_kill(struct workers *);
void	workers_free(struct workers *);
const char *workers_describe_status(int status, char *buf, size_t len);

/* progress.c */
int	progress_init(struct progress_watch *, struct event_base *, const char *dir,
	    const struct progress_events *, char *err, size_t errlen);
int	progress_start(struct progress_watch *, uint64_t gen, int n,
	    uint32_t hang_ms);
void	progress_stop(struct progress_watch *);
void	progress_free(struct progress_watch *);

/* hang.c */
int	hang_init(struct hang *, struct event_base *, void (*done)(void *),
	    void *arg);
void	hang_dump(struct hang *, const struct workers *);
int	hang_culprit(const struct workers *, char *state);
void	hang_free(struct hang *);

/* logs.c */
int	logs_init(struct logs *, const char *dir, const char *job_id,
	    char *err, size_t errlen);
void	logs_free(struct logs *);
void	logs_prepare(struct logs *, int n);
void	logs_unprepare(struct logs *);
void	logs_generation(struct logs *, uint64_t gen);
void	logs_generation_done(struct logs *, uint64_t gen, int n);
int	logs_worker_open(struct logs *, uint64_t gen, int local_rank,
	    char *error_file, size_t error_len, int *out_fd, int *err_fd,
	    char *err, size_t errlen);
struct tee *tee_new(struct event_base *, int rfd, int file_fd, int console,
	    uint32_t rank);
void	tee_free(struct tee *);
int	logs_error_message(const char *path, char *buf, size_t len);
int	logs_stderr_tail(const char *error_file, const char *prefix,
	    char *buf, size_t len);

/* gpucheck_node.c */
int	gpucheck_node_plan(struct agent_opts *, struct gpucheck_node *,
	    uint32_t *nproc);
int	gpucheck_node_device(const struct gpucheck_node *, int local_rank);
void	gpucheck_node_record(struct gpucheck_node *,
	    const struct gpucheck_result *);
int	gpucheck_node_exclude(struct gpucheck_node *, const int *devices,
	    int n);
enum gpucheck_action gpucheck_node_worker(struct gpucheck_node *,
	    uint64_t gen, int local_rank, const struct gpucheck_result *,
	    char *desc, size_t len);
int	gpucheck_node_ended(struct gpucheck_node *);
int	gpucheck_pb_new(const struct gpucheck_node *, struct gpucheck_pb *);
void	gpucheck_pb_free(struct gpucheck_pb *);
void	gpucheck_node_free(struct gpucheck_node *);

#endif
