/*
 * The environment of a worker (SPEC §5): the agent's own, plus what
 * torchrun gives its workers, so that a script that runs under torchrun
 * runs unchanged. Inherited variables of the same names are replaced.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

static void
add(struct env_vars *e, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
add(struct env_vars *e, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *p = e->buf + e->used;
	size_t left = sizeof(e->buf) - e->used;
	int n, m;

	if (e->n == ENV_VARS_MAX)
		return;
	n = snprintf(p, left, "%s=", name);
	if (n < 0 || (size_t)n >= left)
		return;
	va_start(ap, fmt);
	m = vsnprintf(p + n, left - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)(n + m) >= left - 1)
		return;
	e->vars[e->n++] = p;
	e->used += (size_t)(n + m) + 1;
}

/* Whether "NAME=..." names one of |e|'s variables. */
static bool
replaced(const struct env_vars *e, const char *var)
{
	size_t len = strcspn(var, "=");

	for (size_t i = 0; i < e->n; i++) {
		if (strncmp(e->vars[i], var, len) == 0 &&
		    e->vars[i][len] == '=')
			return true;
	}
	return false;
}

/* Whether |env| has a variable |name|, set to anything. */
static bool
has(char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
			return true;
	}
	return false;
}

/* The value of |name| in |env|, or NULL. */
static const char *
get(char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
			return env[i] + len + 1;
	}
	return NULL;
}

void
env_vars(struct env_vars *e, const struct assignment *asg,
    const struct env_worker *w, char *const *inherited)
{
	uint32_t rank = asg->base_rank + (uint32_t)w->local_rank;
	bool restart = w->restart != NULL && w->restart[0] != '\0';

	e->n = 0;
	e->used = 0;
	add(e, "RANK", "%u", rank);
	add(e, "LOCAL_RANK", "%d", w->local_rank);
	add(e, "WORLD_SIZE", "%u", asg->world_size);
	add(e, "LOCAL_WORLD_SIZE", "%u", asg->local_world_size);
	add(e, "GROUP_RANK", "%u", asg->group_rank);
	add(e, "GROUP_WORLD_SIZE", "%u", asg->group_world_size);
	add(e, "ROLE_RANK", "%u", rank);
	add(e, "ROLE_WORLD_SIZE", "%u", asg->world_size);
	add(e, "ROLE_NAME", "%s", w->role);
	add(e, "MASTER_ADDR", "%s", asg->master_addr);
	add(e, "MASTER_PORT", "%u", asg->master_port);
	add(e, "TORCHELASTIC_RESTART_COUNT", "%u", asg->restart_count);
	add(e, "TORCHELASTIC_MAX_RESTARTS", "%u", asg->max_restarts);
	add(e, "TORCHELASTIC_RUN_ID", "%s", w->run_id);
	/* Worker rank 0 hosts the process group's store (torch compares
	 * with the exact string "True"). */
	add(e, "TORCHELASTIC_USE_AGENT_STORE", "False");
	add(e, "TORCHELASTIC_ERROR_FILE", "%s", w->error_file);
	add(e, "RDZV_GENERATION", "%llu",
	    (unsigned long long)asg->generation);
	/* As torchrun does: one OpenMP thread per worker unless told. */
	if (asg->local_world_size > 1 && !has(inherited, "OMP_NUM_THREADS"))
		add(e, "OMP_NUM_THREADS", "1");
	/*
	 * As torchrun 2.x does: a collective that fails or hangs ends the
	 * worker instead of blocking it for ever. Only torch 2.2's name:
	 * torch >= 2.2 warns of the deprecated NCCL_ASYNC_ERROR_HANDLING
	 * whenever it is set, and the agent cannot tell which torch a
	 * worker will import; torch < 2.2 reads only the old name, which
	 * passes through from the agent's environment (docs/AGENT.md).
	 * Under in-process restart, 2 ("clean up only"): a broken
	 * communicator is aborted and the error raised in the worker, which
	 * lives on to take the next round (docs/RECOVERY.md).
	 */
	if (!has(inherited, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
		add(e, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "%d", restart ? 2 : 1);
	if (w->visible != NULL && w->visible[0] != '\0')
		add(e, "CUDA_VISIBLE_DEVICES", "%s", w->visible);
	/* The interface that reaches rdzvd, when the host name resolves
	 * to loopback only (netif.c). */
	if (w->ifname != NULL && w->ifname[0] != '\0') {
		if (!has(inherited, "GLOO_SOCKET_IFNAME"))
			add(e, "GLOO_SOCKET_IFNAME", "%s", w->ifname);
		if (!has(inherited, "NCCL_SOCKET_IFNAME"))
			add(e, "NCCL_SOCKET_IFNAME", "%s", w->ifname);
	}
	/* Where rdzv.progress(step) reports to (docs/HEALTH.md). */
	if (w->progress != NULL && w->progress[0] != '\0')
		add(e, "RDZV_PROGRESS", "%s", w->progress);
	/* Where rdzv.elastic takes new assignments (docs/RECOVERY.md). */
	if (restart)
		add(e, "RDZV_RESTART_SOCKET", "%s", w->restart);
	/* A non-master worker's first connection to the master's store
	 * waits for it rather than sleep a second (masterwait.c); before
	 * whatever the agent's own environment preloads. */
	if (w->preload != NULL && w->preload[0] != '\0') {
		const char *more = get(inherited, "LD_PRELOAD");
		if (more != NULL && more[0] != '\0')
			add(e, "LD_PRELOAD", "%s:%s", w->preload, more);
		else
			add(e, "LD_PRELOAD", "%s", w->preload);
	}
}

char **
env_merge(const struct env_vars *e, char *const *inherited)
{
	size_t n = 0, k = 0;
	char **envp, *strings;

	while (inherited != NULL && inherited[n] != NULL)
		n++;
	/* Our strings go after the pointer array, in the same allocation:
	 * |e| may live on the caller's stack. */
	if ((envp = malloc((n + e->n + 1) * sizeof(*envp) + e->used)) ==
	    NULL)
		return NULL;
	strings = (char *)(envp + n + e->n + 1);
	memcpy(strings, e->buf, e->used);
	for (size_t i = 0; i < n; i++) {
		if (!replaced(e, inherited[i]))
			envp[k++] = inherited[i];
	}
	for (size_t i = 0; i < e->n; i++)
		envp[k++] = strings + (e->vars[i] - e->buf);
	envp[k] = NULL;
	return envp;
}
