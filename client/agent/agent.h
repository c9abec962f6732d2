/*
 * rdzv-agent's internals (SPEC §5, §6, §7). One struct agent owns
 * everything of a run: the gRPC client and the session on rdzvd, the set of
 * workers of the generation it runs, the GPU check's state and the log
 * directory. Modules change the agent and call agent_step(), which compares
 * what should run with what runs and does the difference: that is the only
 * place workers are started or stopped.
 */
#ifndef RDZV_AGENT_H
#define RDZV_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "client.h"
#include "clock.h"
#include "grpc.h"
#include "rdzv_id.h"
#include "gpucheck_run.h"
#include "rdzv/v1/rendezvous.pb-c.h"

/* Exit statuses (SPEC §6); 128+N for signal N. */
#define AGENT_EXIT_OK		0
#define AGENT_EXIT_FAILED	1	/* the job failed */
#define AGENT_EXIT_USAGE	2	/* usage or configuration */
#define AGENT_EXIT_UNREACHABLE	3	/* rdzvd could not be reached */
#define AGENT_EXIT_REFUSED	4	/* permission, job closed, evicted */

#define AGENT_STOP_TIMEOUT_MS	30000	/* torchrun's worker close timeout */
#define AGENT_GPUCHECK_TIMEOUT_MS	60000
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
	uint32_t		 max_restarts;
	uint32_t		 last_call_ms;	/* 0: the job's default */
	uint32_t		 join_timeout_ms;
	uint32_t		 lease_ttl_ms;
	uint32_t		 reconnect_grace_ms;
	const char		*role;
	const char		*advertise_addr;	/* NULL: our address */
	uint16_t		 master_port;	/* 0: a free port each round */
	const char		*log_dir;	/* NULL: a fresh one */
	bool			 tee;
	bool			 gpucheck_set;	/* --gpucheck was given */
	struct gpucheck_opts	 gpucheck;
	uint32_t		 stop_timeout_ms;
	uint32_t		 reconnect_timeout_ms;
	char			**argv;		/* the worker command */
	int			 argc;
};

/* A copy of an Assignment, and when it arrived. */
struct assignment {
	uint64_t	generation;
	uint32_t	group_rank;
	uint32_t	group_world_size;
	uint32_t	base_rank;
	uint32_t	local_world_size;
	uint32_t	world_size;
	char		master_addr[256];
	uint32_t	master_port;
	uint32_t	restart_count;
	uint32_t	max_restarts;
	uint64_t	arrived_us;	/* monotonic */
};

/* The node's GPUs as the GPU check sees them (gpucheck_node.c). */
struct gpucheck_node {
	enum gpucheck_policy	 policy;	/* GPUCHECK_OFF: no checks */
	int			 n;		/* devices checked */
	struct gpucheck_result	*results;	/* by device, n of them */
	int			*use;		/* devices the workers use, */
	int			 n_use;		/* worker i on use[i] */
	char			 visible[1024];	/* or "" */
};

/* The results as JoinRequest/ReportRequest carry them. */
struct gpucheck_pb {
	size_t			 n;
	Rdzv__V1__GpuResult	**ptrs;
	Rdzv__V1__GpuResult	*res;
	Rdzv__V1__GpuStep	*steps;
	Rdzv__V1__GpuStep	**step_ptrs;
};

struct tee;

/* A generation's log files made ahead (logs.c). */
struct logs_next {
	bool		 ready;		/* <log-dir>/.next/ holds them */
	bool		 taken;		/* renamed to the generation */
	int		 n;		/* ranks */
	int		*fds;		/* stdout, stderr of each rank */
};

struct worker {
	struct agent	*a;
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
	WS_END_GPUCHECK,		/* a worker's GPU check failed */
};

struct workers {
	enum ws_state	 state;
	enum ws_end	 end;
	uint64_t	 generation;
	uint32_t	 base_rank;
	struct worker	*w;
	int		 n;
	int		 alive;		/* not yet reaped */
	int		 execd;		/* exec'd so far */
	int		 first_failed;	/* local rank, -1 */
	int		 failed_devices[64];
	int		 n_failed_devices;
	uint64_t	 arrived_us;	/* of the assignment they run */
	struct event	*kill_timer;	/* SIGKILL after stop_timeout */
	struct event	*sigchld;
	bool		 killed;	/* SIGKILL was sent */
};

enum session_state {
	SESSION_CONNECT,	/* Health/Check before a new Join */
	SESSION_JOIN,		/* Join sent, no Accepted yet */
	SESSION_JOINED,		/* the stream is open */
	SESSION_RETRY,		/* waiting to connect again */
	SESSION_ENDED,		/* the job or this node ended; no more calls */
};

/* A Report that must reach rdzvd; resent after a resume. */
struct outcome_report {
	bool			 pending;
	struct grpc_ccall	*cc;		/* in flight */
	unsigned int		 seq, sent_seq;
	uint64_t		 generation;
	Rdzv__V1__Outcome	 outcome;
	Rdzv__V1__WorkerExit	*exits;
	int			 n_exits;
	char			 message[AGENT_MESSAGE_MAX + 1];
};

/* Changes to the node's offer (OUTCOME_UPDATE), merged while one is in
 * flight; each sends the agent's values at the time. */
struct update_report {
	bool			 pending;
	struct grpc_ccall	*cc;
	unsigned int		 seq, sent_seq;
	bool			 nproc;
	bool			 master_port;
	bool			 gpucheck;
};

struct agent {
	struct agent_opts	*opts;
	struct event_base	*base;
	char			 hostname[256];
	uint32_t		 nproc;		/* workers this node offers */
	uint16_t		 offer_port;	/* master port offered now */
	struct gpucheck_node	 gpucheck;
	char			 log_dir[512];
	bool			 log_dir_made;	/* by us (mkdtemp) */
	struct logs_next	 next_logs;
	struct event		*prepare_ev;

	/* The session on rdzvd (session.c). */
	struct grpc_client_opts	 gopts;
	struct tls_ctx		*tls;
	struct grpc_client	*cli;
	enum session_state	 sstate;
	struct grpc_ccall	*call;		/* Health/Check or Join */
	bool			 check_serving;
	uint8_t			 session_id[32];
	size_t			 session_len;	/* 0: not a node yet */
	uint64_t		 node_id;
	struct event		*retry_ev;
	uint32_t		 backoff_ms;
	uint64_t		 trying_since;	/* ms, first failed attempt */
	bool			 ever_joined;
	char			 last_error[512];
	struct outcome_report	 outcome;
	struct update_report	 update;
	struct event		*report_retry_ev;
	struct grpc_ccall	*leave_cc;
	bool			 left;

	/* What should run, and what runs (agent_step). */
	struct event		*step_ev;
	bool			 have_want;
	struct assignment	 want;
	char			 unwant_reason[160];	/* why !have_want */
	uint64_t		 started_gen;	/* highest generation started */
	struct assignment	 cur;		/* of the running workers */
	struct workers		 ws;

	/* The end. */
	bool			 quitting;
	struct event		*quit_ev;	/* its deadline */
	int			 exit_status;
	int			 signals;	/* termination signals seen */
	struct event		*sig_ev[3];
};

/* agent.c */
int	agent_run(struct agent_opts *);
void	agent_step(struct agent *);
void	agent_quit(struct agent *, int status, bool leave, const char *fmt,
	    ...) __attribute__((format(printf, 4, 5)));
void	agent_assignment(struct agent *, const Rdzv__V1__Assignment *);
void	agent_stop_generation(struct agent *, uint64_t gen, const char *why);
void	agent_workers_ended(struct agent *);
void	agent_resume_refused(struct agent *, const char *why);
uint64_t agent_resume_generation(const struct agent *);
uint16_t agent_free_port(uint16_t avoid);

/* join.c */
int	cmd_join(int argc, char **argv);

/* sched.c */
void	sched_defaults(struct agent_opts *);
int	sched_pbs_nodes(const char *nodefile, const char *hostname,
	    uint32_t *count, uint32_t *index, char *err, size_t errlen);

/* session.c */
int	session_init(struct agent *, char *err, size_t errlen);
void	session_start(struct agent *);
void	session_free(struct agent *);
bool	session_connected(const struct agent *);

/* report.c */
void	report_outcome(struct agent *, Rdzv__V1__Outcome, const char *message);
void	report_update(struct agent *, bool nproc, bool master_port,
	    bool gpucheck);
int	report_init(struct agent *);
void	report_flush(struct agent *);
void	report_forget(struct agent *);
void	report_leave(struct agent *, const char *reason);
bool	report_busy(const struct agent *);
void	report_free(struct agent *);

/* workers.c */
int	workers_init(struct agent *);
int	workers_start(struct agent *, const struct assignment *);
void	workers_stop(struct agent *, enum ws_end, const char *why);
void	workers_kill(struct agent *);
void	workers_free(struct agent *);
const char *workers_describe_status(int status, char *buf, size_t len);

/* env.c */
char	**env_worker(const struct agent *, const struct assignment *,
	    int local_rank, const char *error_file);

/* logs.c */
int	logs_init(struct agent *, char *err, size_t errlen);
void	logs_free(struct agent *);
void	logs_prepare(struct agent *, int n);
void	logs_unprepare(struct agent *);
void	logs_generation(struct agent *, uint64_t gen);
void	logs_generation_done(struct agent *, uint64_t gen, int n);
int	logs_worker_open(struct agent *, uint64_t gen, struct worker *,
	    int *out_fd, int *err_fd, char *err, size_t errlen);
struct tee *tee_new(struct event_base *, int rfd, int file_fd, int console,
	    uint32_t rank);
void	tee_free(struct tee *);
int	logs_error_message(const char *path, char *buf, size_t len);

/* gpucheck_node.c */
int	gpucheck_node_plan(struct agent_opts *, struct gpucheck_node *,
	    uint32_t *nproc);
int	gpucheck_node_device(const struct gpucheck_node *, int local_rank);
void	gpucheck_node_record(struct gpucheck_node *,
	    const struct gpucheck_result *);
int	gpucheck_node_exclude(struct gpucheck_node *, const int *devices,
	    int n);
void	gpucheck_node_worker(struct agent *, struct worker *,
	    const struct gpucheck_result *);
void	gpucheck_node_ended(struct agent *);
int	gpucheck_pb_new(const struct gpucheck_node *, struct gpucheck_pb *);
void	gpucheck_pb_free(struct gpucheck_pb *);
void	gpucheck_node_free(struct gpucheck_node *);

#endif
