/*
 * The environment of a worker (SPEC §5), apart from the rest of the agent
 * so that a unit test can build it (tests/unit/test_env.c): what torchrun
 * gives its workers, made from the worker's assignment and a few words of
 * the agent's, then laid over the environment the worker inherits.
 */
#ifndef RDZV_AGENT_ENV_H
#define RDZV_AGENT_ENV_H

#include <stddef.h>
#include <stdint.h>

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

/* What a worker is, beyond its assignment. */
struct env_worker {
	int		 local_rank;
	const char	*run_id;	/* the job's id */
	const char	*role;		/* --role */
	const char	*error_file;	/* torch's error file */
	const char	*visible;	/* CUDA_VISIBLE_DEVICES; "": keep */
	const char	*progress;	/* RDZV_PROGRESS; NULL: none */
	const char	*ifname;	/* GLOO_, NCCL_SOCKET_IFNAME where
					   unset; NULL or "": none */
	/* RDZV_RESTART_SOCKET under in-process restart; NULL: none. */
	const char	*restart;
	/* librdzv-masterwait.so, put first in LD_PRELOAD; NULL: none. */
	const char	*preload;
};

#define ENV_VARS_MAX	28

/* A worker's own variables, "NAME=value" each, pointing into |buf|. */
struct env_vars {
	const char	*vars[ENV_VARS_MAX];
	size_t		 n;
	char		 buf[4096];
	size_t		 used;
};

/* env.c */

/*
 * Fills |e| with the variables of SPEC §5 for worker |w| of |asg|.
 * |inherited| is the environment the worker inherits (NULL-terminated):
 * OMP_NUM_THREADS is set only where it has none. Nothing else is read.
 */
void	env_vars(struct env_vars *e, const struct assignment *asg,
	    const struct env_worker *w, char *const *inherited);

/*
 * |inherited| with |e|'s variables replacing those of the same names, as
 * a NULL-terminated envp in one allocation (free() it), or NULL when out
 * of memory. |e|'s strings are copied; the inherited ones are not: the
 * caller uses the array before |inherited| changes (it forks at once).
 */
char	**env_merge(const struct env_vars *e, char *const *inherited);

#endif
