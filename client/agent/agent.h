/*
 * rdzv-agent (SPEC §5, §6, §7), one per node per job. main.c lists the
 * commands; each lives in a file of its own with its options and usage:
 *
 *   cmd_join.c       join: the options of join and coproc (with sched.c,
 *                    the scheduler's values), then agent_run();
 *   cmd_coproc.c     coproc: a node in a job for a launcher that runs the
 *                    workers itself (torchrun), JSON lines on stdio;
 *   cmd_gpucheck.c   gpucheck: the GPU check by hand (gpucheck_run.c).
 *
 * A join's run is struct agent (agent.c), the hub that decides: it owns
 * everything of the run, with the hub's parts beside it in restart.c
 * (in-process restart), hung.c (whose hang it is, rule 17) and netif.c
 * (the workers' network interface). The other modules each own a struct
 * of their own and do one job, in two groups with internal headers:
 *
 *   node.h     a node in a job, shared by join and coproc: node.c (the
 *              loop, the signals, the one quit path node_quit, the
 *              assignment checked), session.c and waiting.c (the session
 *              on rdzvd, on whichever server of --server's list leads:
 *              client/common/servers.h), report.c (what the node tells
 *              rdzvd after its Join, kept until it arrives), port.c (the
 *              master port it offers);
 *   workers.h  what runs on the node: workers.c (the set of workers of
 *              one generation), forksrv.c (the --preload fork server),
 *              gpucheck_node.c (the node's GPUs under the policy),
 *              progress.c (progress reports and the hang timer), hang.c
 *              (the stacks of hung workers), inproc.c (the restart
 *              socket), logs.c and env.c (log files and environment);
 *
 * and options.h, what the agent was told and what a node offers. fence.c
 * (with fence_rule.c) says when rdzvd cannot have heard from the node for
 * a lease, and the hub stops the workers. masterwait.c is a library
 * preloaded into the workers, not part of the agent process.
 *
 * A module tells its owner what happened through the table of callbacks
 * the owner gave it at init (session_events, report_events,
 * workers_events, progress_events, inproc_events, fence_events,
 * node_hooks), or through what its functions return; none of them calls
 * agent.c, and no two of them call each other in a circle (report.c reads
 * the session's state, the session does not call report.c). Only
 * cmd_join.c calls agent.c (agent_run). The hub alone starts and stops
 * the workers and decides to exit, through node_quit, the one quit path
 * of join and coproc.
 *
 * Calls: lib/base, lib/grpc, lib/gpucheck, proto, client/common.
 * Called by: none (a program).
 */
#ifndef RDZV_AGENT_H
#define RDZV_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

#include "options.h"
#include "node.h"
#include "workers.h"

/* ---------------------------------------------------------------- the hub */

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
	struct forksrv		 fs;		/* --preload, the job's */
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
void	restart_started(struct agent *);
extern const struct inproc_events restart_events;

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

#endif
