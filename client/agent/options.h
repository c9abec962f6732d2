/*
 * What rdzv-agent was told and what a node offers rdzvd: the options of
 * join and coproc (cmd_join.c, after the scheduler's values, sched.c),
 * the offer, the exit statuses. Internal to client/agent; agent.h maps
 * the module.
 */
#ifndef RDZV_AGENT_OPTIONS_H
#define RDZV_AGENT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"
#include "exitcodes.h"
#include "gpucheck_run.h"

struct gpucheck_node;

/* Exit statuses (SPEC §6); 128+N for signal N. */
/* One table for the three programs (exitcodes.h). */
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
 * values (cmd_join.c, sched.c). Strings point into argv or the environment. */
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

/* cmd_join.c: join's options, which coproc takes too. */
int	join_options(struct agent_opts *, int argc, char **argv,
	    void (*usage)(FILE *), char *err, size_t errlen);

/* sched.c */
void	sched_defaults(struct agent_opts *);
int	sched_pbs_nodes(const char *nodefile, const char *hostname,
	    uint32_t *count, uint32_t *index, char *err, size_t errlen);

#endif
