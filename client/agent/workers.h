/*
 * What runs on the node (SPEC §5, §7): the workers of one generation
 * (workers.c), started by exec or by the preloaded fork server
 * (forksrv.c), with their GPUs (gpucheck_node.c), log files (logs.c),
 * progress reports and hang timer (progress.c), hung stacks (hang.c) and
 * the restart socket of in-process restart (inproc.c). Each module tells
 * the hub (agent.c) what happened through the table of callbacks it was
 * given at init. Internal to client/agent; agent.h maps the module.
 */
#ifndef RDZV_AGENT_WORKERS_H
#define RDZV_AGENT_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "env.h"
#include "options.h"
#include "rdzv/v1/rendezvous.pb-c.h"

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

/* A preload's bound, as rdzvd's for a job's (CORE_PRELOAD_MAX). */
#define FORKSRV_MODULES_MAX	255

/* The preloaded fork server (--preload, or the job's preload): its life
 * as the agent sees it. */
struct forksrv {
	enum {
		FS_OFF,		/* no preload (yet) */
		FS_STARTING,	/* importing */
		FS_READY,
		FS_GONE,	/* failed or died: said once, exec from now */
	}			 state;
	pid_t			 pid;
	int			 fd;		/* SOCK_SEQPACKET to it */
	struct event		*ev;
	char			 modules[FORKSRV_MODULES_MAX + 1];
	const char		*origin;	/* "--preload", or the job's */
	struct event_base	*base;		/* the agent's loop, attached */
	bool			 job_told;	/* that the job's preload is
						   not this node's (agent.c) */
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

/* forksrv.c */
bool	forksrv_python(const char *cmd);
bool	forksrv_modules_ok(const char *modules);
void	forksrv_init(struct forksrv *);
void	forksrv_start(struct forksrv *, const struct agent_opts *,
	    const char *modules, const char *origin, const char *masterwait);
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

#endif
