/*
 * The environment of a worker (SPEC §5): the agent's own, plus what
 * torchrun gives its workers, so that a script that runs under torchrun
 * runs unchanged. Inherited variables of the same names are replaced.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

extern char **environ;

#define ENV_MAX_OURS	24

struct env_add {
	const char	*vars[ENV_MAX_OURS];	/* "NAME=value" */
	size_t		 n;
	char		 buf[4096];
	size_t		 used;
};

static void
add(struct env_add *e, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
add(struct env_add *e, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *p = e->buf + e->used;
	size_t left = sizeof(e->buf) - e->used;
	int n, m;

	if (e->n == ENV_MAX_OURS)
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
replaced(const struct env_add *e, const char *var)
{
	size_t len = strcspn(var, "=");

	for (size_t i = 0; i < e->n; i++) {
		if (strncmp(e->vars[i], var, len) == 0 &&
		    e->vars[i][len] == '=')
			return true;
	}
	return false;
}

/*
 * Returns a NULL-terminated envp in one allocation (free() it), or NULL
 * when out of memory. The inherited strings are not copied: the caller
 * uses the array before the environment changes (it forks at once).
 */
char **
env_worker(const struct agent *a, const struct assignment *asg,
    int local_rank, const char *error_file)
{
	struct env_add e;
	uint32_t rank = asg->base_rank + (uint32_t)local_rank;
	size_t n = 0, k = 0;
	char **envp;

	e.n = 0;
	e.used = 0;
	add(&e, "RANK", "%u", rank);
	add(&e, "LOCAL_RANK", "%d", local_rank);
	add(&e, "WORLD_SIZE", "%u", asg->world_size);
	add(&e, "LOCAL_WORLD_SIZE", "%u", asg->local_world_size);
	add(&e, "GROUP_RANK", "%u", asg->group_rank);
	add(&e, "GROUP_WORLD_SIZE", "%u", asg->group_world_size);
	add(&e, "ROLE_RANK", "%u", rank);
	add(&e, "ROLE_WORLD_SIZE", "%u", asg->world_size);
	add(&e, "ROLE_NAME", "%s", a->opts->role);
	add(&e, "MASTER_ADDR", "%s", asg->master_addr);
	add(&e, "MASTER_PORT", "%u", asg->master_port);
	add(&e, "TORCHELASTIC_RESTART_COUNT", "%u", asg->restart_count);
	add(&e, "TORCHELASTIC_MAX_RESTARTS", "%u", asg->max_restarts);
	add(&e, "TORCHELASTIC_RUN_ID", "%s", a->opts->id);
	/* Worker rank 0 hosts the process group's store (torch compares
	 * with the exact string "True"). */
	add(&e, "TORCHELASTIC_USE_AGENT_STORE", "False");
	add(&e, "TORCHELASTIC_ERROR_FILE", "%s", error_file);
	add(&e, "RDZV_GENERATION", "%llu",
	    (unsigned long long)asg->generation);
	/* As torchrun does: one OpenMP thread per worker unless told. */
	if (asg->local_world_size > 1 && getenv("OMP_NUM_THREADS") == NULL)
		add(&e, "OMP_NUM_THREADS", "1");
	if (a->gpucheck.visible[0] != '\0')
		add(&e, "CUDA_VISIBLE_DEVICES", "%s", a->gpucheck.visible);

	while (environ[n] != NULL)
		n++;
	/* Our strings live in |e|, on this stack: they go after the
	 * pointer array, in the same allocation. */
	if ((envp = malloc((n + e.n + 1) * sizeof(*envp) + e.used)) == NULL)
		return NULL;
	char *strings = (char *)(envp + n + e.n + 1);
	memcpy(strings, e.buf, e.used);
	for (size_t i = 0; i < n; i++) {
		if (!replaced(&e, environ[i]))
			envp[k++] = environ[i];
	}
	for (size_t i = 0; i < e.n; i++)
		envp[k++] = strings + (e.vars[i] - e.buf);
	envp[k] = NULL;
	return envp;
}
