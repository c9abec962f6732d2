/*
 * Unit tests of a worker's environment (client/agent/env.c) against the
 * table of SPEC §5, row by row: every worker of a round of three nodes of
 * 5, 4 and 3 workers (a heterogeneous round), then the rows that depend on
 * what the worker inherits (OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, the
 * NCCL variables, inherited variables of the same names), and the error
 * file's path as logs.c makes it.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "check.h"

#define JOB_ID	"job-4711"
#define ROLE	"trainer"

/* The value of |name| in |envp|, or NULL; *count how often it is set. */
static const char *
get(char *const *envp, const char *name, int *count)
{
	size_t len = strlen(name);
	const char *v = NULL;

	*count = 0;
	for (size_t i = 0; envp[i] != NULL; i++) {
		if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=') {
			v = envp[i] + len + 1;
			(*count)++;
		}
	}
	return v;
}

/* |name| is set once, to |want|; NULL: not set at all. */
static void
check_var(char *const *envp, const char *name, const char *want)
{
	int count;
	const char *v = get(envp, name, &count);

	if (want == NULL) {
		if (v != NULL)
			fprintf(stderr, "%s=%s is set\n", name, v);
		CHECK(v == NULL);
		return;
	}
	if (v == NULL || strcmp(v, want) != 0)
		fprintf(stderr, "%s: '%s', want '%s'\n", name,
		    v != NULL ? v : "(unset)", want);
	CHECK_STR(v, want);
	CHECK_INT(count, 1);
}

static void
check_u(char *const *envp, const char *name, unsigned long long want)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", want);
	check_var(envp, name, buf);
}

/* The envp of local rank |lr| of |asg|, over |inherited|. */
static char **
worker_env(const struct assignment *asg, int lr, const char *visible,
    char *const *inherited)
{
	struct env_vars e;
	char error_file[128];
	struct env_worker w = { .local_rank = lr, .run_id = JOB_ID,
	    .role = ROLE, .error_file = error_file, .visible = visible,
	    .progress = "/logs/progress.sock" };
	char **envp;

	snprintf(error_file, sizeof(error_file), "/logs/%llu/%d/error.json",
	    (unsigned long long)asg->generation, lr);
	env_vars(&e, asg, &w, inherited);
	envp = env_merge(&e, inherited);
	CHECK(envp != NULL);
	return envp;
}

static void
assignment(struct assignment *asg, uint32_t group_rank, uint32_t base_rank,
    uint32_t nproc)
{
	memset(asg, 0, sizeof(*asg));
	asg->generation = 7;
	asg->group_rank = group_rank;
	asg->group_world_size = 3;
	asg->base_rank = base_rank;
	asg->local_world_size = nproc;
	asg->world_size = 12;
	snprintf(asg->master_addr, sizeof(asg->master_addr), "10.0.0.7");
	asg->master_port = 29517;
	asg->restart_count = 2;
	asg->max_restarts = 3;
}

/*
 * Every row of the table for every worker of the round: nodes 0, 1, 2
 * with 5, 4 and 3 workers, base ranks 0, 5 and 9, world size 12. The
 * ranks of the round are each given once.
 */
static void
test_round(void)
{
	static const uint32_t nproc[3] = { 5, 4, 3 };
	char *inherited[] = { "PATH=/usr/bin:/bin", "HOME=/home/u", NULL };
	struct assignment asg;
	int seen[12] = { 0 };
	uint32_t base = 0;
	char want[128];

	for (uint32_t g = 0; g < 3; g++) {
		assignment(&asg, g, base, nproc[g]);
		for (int lr = 0; lr < (int)nproc[g]; lr++) {
			char **envp = worker_env(&asg, lr, "", inherited);
			unsigned rank = base + (unsigned)lr;
			const char *v;
			int count;

			check_u(envp, "RANK", rank);
			check_u(envp, "LOCAL_RANK", (unsigned)lr);
			check_u(envp, "WORLD_SIZE", 12);
			check_u(envp, "LOCAL_WORLD_SIZE", nproc[g]);
			check_u(envp, "GROUP_RANK", g);
			check_u(envp, "GROUP_WORLD_SIZE", 3);
			check_u(envp, "ROLE_RANK", rank);
			check_u(envp, "ROLE_WORLD_SIZE", 12);
			check_var(envp, "ROLE_NAME", ROLE);
			check_var(envp, "MASTER_ADDR", "10.0.0.7");
			check_u(envp, "MASTER_PORT", 29517);
			check_u(envp, "TORCHELASTIC_RESTART_COUNT", 2);
			check_u(envp, "TORCHELASTIC_MAX_RESTARTS", 3);
			check_var(envp, "TORCHELASTIC_RUN_ID", JOB_ID);
			check_var(envp, "TORCHELASTIC_USE_AGENT_STORE",
			    "False");
			snprintf(want, sizeof(want),
			    "/logs/7/%d/error.json", lr);
			check_var(envp, "TORCHELASTIC_ERROR_FILE", want);
			/* Every node here runs more than one worker. */
			check_var(envp, "OMP_NUM_THREADS", "1");
			check_u(envp, "RDZV_GENERATION", 7);
			check_var(envp, "RDZV_PROGRESS",
			    "/logs/progress.sock");
			/* Not asked for: the inherited one, if any. */
			check_var(envp, "CUDA_VISIBLE_DEVICES", NULL);
			/* The agent's own environment goes on. */
			check_var(envp, "PATH", "/usr/bin:/bin");
			check_var(envp, "HOME", "/home/u");
			v = get(envp, "RANK", &count);
			if (v != NULL && atoi(v) >= 0 && atoi(v) < 12)
				seen[atoi(v)]++;
			free(envp);
		}
		base += nproc[g];
	}
	for (int r = 0; r < 12; r++)
		CHECK_INT(seen[r], 1);
}

/* A node of one worker: no OMP_NUM_THREADS (torchrun sets it only for
 * more than one), and RANK is its base rank. */
static void
test_one_worker(void)
{
	char *inherited[] = { NULL };
	struct assignment asg;
	char **envp;

	assignment(&asg, 2, 11, 1);
	envp = worker_env(&asg, 0, "", inherited);
	check_u(envp, "RANK", 11);
	check_u(envp, "LOCAL_RANK", 0);
	check_u(envp, "LOCAL_WORLD_SIZE", 1);
	check_var(envp, "OMP_NUM_THREADS", NULL);
	free(envp);

	/* No inherited environment at all. */
	envp = worker_env(&asg, 0, "", NULL);
	check_u(envp, "RANK", 11);
	free(envp);
}

/* OMP_NUM_THREADS "when unset": an inherited value, even empty, stays. */
static void
test_omp(void)
{
	char *four[] = { "OMP_NUM_THREADS=4", NULL };
	char *empty[] = { "OMP_NUM_THREADS=", NULL };
	char *prefix[] = { "OMP_NUM_THREADS_X=9", NULL };
	struct assignment asg;
	char **envp;

	assignment(&asg, 0, 0, 4);
	envp = worker_env(&asg, 3, "", four);
	check_var(envp, "OMP_NUM_THREADS", "4");
	free(envp);
	envp = worker_env(&asg, 3, "", empty);
	check_var(envp, "OMP_NUM_THREADS", "");
	free(envp);
	/* Another variable that starts with its name does not count. */
	envp = worker_env(&asg, 3, "", prefix);
	check_var(envp, "OMP_NUM_THREADS", "1");
	check_var(envp, "OMP_NUM_THREADS_X", "9");
	free(envp);
}

/*
 * Inherited variables of the table's names are replaced, each set once;
 * CUDA_VISIBLE_DEVICES is replaced only where the GPU check chose the
 * devices (exclude), else the inherited one (Slurm's) stays.
 */
static void
test_inherited_replaced(void)
{
	char *inherited[] = { "RANK=99", "WORLD_SIZE=1", "MASTER_ADDR=nope",
	    "MASTER_PORT=1", "TORCHELASTIC_RUN_ID=old", "RDZV_GENERATION=1",
	    "CUDA_VISIBLE_DEVICES=4,5,6,7", "LANG=C", NULL };
	struct assignment asg;
	char **envp;

	assignment(&asg, 1, 5, 4);
	envp = worker_env(&asg, 2, "4,6,7", inherited);
	check_u(envp, "RANK", 7);
	check_u(envp, "WORLD_SIZE", 12);
	check_var(envp, "MASTER_ADDR", "10.0.0.7");
	check_u(envp, "MASTER_PORT", 29517);
	check_var(envp, "TORCHELASTIC_RUN_ID", JOB_ID);
	check_u(envp, "RDZV_GENERATION", 7);
	check_var(envp, "CUDA_VISIBLE_DEVICES", "4,6,7");
	check_var(envp, "LANG", "C");
	free(envp);

	envp = worker_env(&asg, 2, "", inherited);
	check_var(envp, "CUDA_VISIBLE_DEVICES", "4,5,6,7");
	free(envp);
}

/*
 * TORCH_NCCL_ASYNC_ERROR_HANDLING: 1 when the agent's environment has
 * none, as torchrun 2.x sets it; an inherited value is the worker's. The
 * deprecated NCCL_ASYNC_ERROR_HANDLING (torch >= 2.2 warns when it is set)
 * is never added, only passed through when the agent's environment has it
 * (what torch < 2.2 reads).
 */
static void
test_nccl(void)
{
	char *inherited[] = { "NCCL_ASYNC_ERROR_HANDLING=1",
	    "TORCH_NCCL_ASYNC_ERROR_HANDLING=3", NULL };
	char *none[] = { "PATH=/bin", NULL };
	struct assignment asg;
	char **envp;

	assignment(&asg, 0, 0, 5);
	envp = worker_env(&asg, 0, "", inherited);
	check_var(envp, "NCCL_ASYNC_ERROR_HANDLING", "1");
	check_var(envp, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "3");
	free(envp);
	envp = worker_env(&asg, 0, "", none);
	check_var(envp, "NCCL_ASYNC_ERROR_HANDLING", NULL);
	check_var(envp, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
	free(envp);
}

/* The interface that reaches rdzvd, when the host name is on loopback
 * (netif.c): set where unset, an inherited choice kept. */
static void
test_ifname(void)
{
	char *inherited[] = { "NCCL_SOCKET_IFNAME=ib0", NULL };
	struct env_worker w = { .run_id = JOB_ID, .role = ROLE,
	    .error_file = "/logs/1/0/error.json", .visible = "",
	    .ifname = "eth1" };
	struct assignment asg;
	struct env_vars e;
	char **envp;

	assignment(&asg, 0, 0, 1);
	env_vars(&e, &asg, &w, inherited);
	envp = env_merge(&e, inherited);
	CHECK(envp != NULL);
	check_var(envp, "GLOO_SOCKET_IFNAME", "eth1");
	check_var(envp, "NCCL_SOCKET_IFNAME", "ib0");
	free(envp);
}

/*
 * In-process restart (docs/RECOVERY.md): the worker learns the restart
 * socket, and a broken NCCL communicator is cleaned up without ending the
 * process (2) unless the user chose otherwise. Without it, neither.
 */
static void
test_restart_socket(void)
{
	char *none[] = { "PATH=/bin", NULL };
	char *user[] = { "TORCH_NCCL_ASYNC_ERROR_HANDLING=0", NULL };
	struct assignment asg;
	struct env_vars e;
	struct env_worker w = { .local_rank = 1, .run_id = JOB_ID,
	    .role = ROLE, .error_file = "/logs/e.json", .visible = "",
	    .restart = "/logs/restart.sock" };
	char **envp;

	assignment(&asg, 0, 0, 2);
	env_vars(&e, &asg, &w, none);
	envp = env_merge(&e, none);
	check_var(envp, "RDZV_RESTART_SOCKET", "/logs/restart.sock");
	check_var(envp, "NCCL_ASYNC_ERROR_HANDLING", NULL);
	check_var(envp, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "2");
	check_var(envp, "RANK", "1");
	free(envp);
	env_vars(&e, &asg, &w, user);
	envp = env_merge(&e, user);
	check_var(envp, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "0");
	free(envp);
	envp = worker_env(&asg, 0, "", none);
	check_var(envp, "RDZV_RESTART_SOCKET", NULL);
	free(envp);
}

/*
 * The master-wait preload (docs/RECOVERY.md) goes first in LD_PRELOAD,
 * before what the agent's own environment preloads, once; without it,
 * LD_PRELOAD passes through untouched.
 */
static void
test_preload(void)
{
	char *none[] = { "PATH=/bin", NULL };
	char *user[] = { "LD_PRELOAD=/opt/a.so /opt/b.so", NULL };
	char *empty[] = { "LD_PRELOAD=", NULL };
	struct assignment asg;
	struct env_vars e;
	struct env_worker w = { .local_rank = 1, .run_id = JOB_ID,
	    .role = ROLE, .error_file = "/logs/e.json", .visible = "",
	    .preload = "/usr/lib/rdzv/librdzv-masterwait.so" };
	char **envp;

	assignment(&asg, 0, 0, 2);
	env_vars(&e, &asg, &w, none);
	envp = env_merge(&e, none);
	check_var(envp, "LD_PRELOAD", "/usr/lib/rdzv/librdzv-masterwait.so");
	free(envp);
	env_vars(&e, &asg, &w, user);
	envp = env_merge(&e, user);
	check_var(envp, "LD_PRELOAD", "/usr/lib/rdzv/librdzv-masterwait.so:"
	    "/opt/a.so /opt/b.so");
	free(envp);
	env_vars(&e, &asg, &w, empty);
	envp = env_merge(&e, empty);
	check_var(envp, "LD_PRELOAD", "/usr/lib/rdzv/librdzv-masterwait.so");
	free(envp);
	w.preload = NULL;
	env_vars(&e, &asg, &w, user);
	envp = env_merge(&e, user);
	check_var(envp, "LD_PRELOAD", "/opt/a.so /opt/b.so");
	free(envp);
}

/* Values at their bounds: a generation beyond 32 bits, long strings. */
static void
test_bounds(void)
{
	char *inherited[] = { NULL };
	struct assignment asg;
	char addr[256];
	char **envp;

	assignment(&asg, 0, 0, 2);
	asg.generation = 4294967296ULL + 5;
	asg.master_port = 65535;
	memset(addr, 'a', sizeof(addr) - 1);
	addr[sizeof(addr) - 1] = '\0';
	memcpy(asg.master_addr, addr, sizeof(addr));
	envp = worker_env(&asg, 1, "", inherited);
	check_var(envp, "RDZV_GENERATION", "4294967301");
	check_var(envp, "TORCHELASTIC_ERROR_FILE",
	    "/logs/4294967301/1/error.json");
	check_var(envp, "MASTER_ADDR", addr);
	check_u(envp, "MASTER_PORT", 65535);
	check_u(envp, "TORCHELASTIC_MAX_RESTARTS", 3);
	free(envp);
}

/* TORCHELASTIC_ERROR_FILE is <log dir>/<gen>/<local_rank>/error.json:
 * the path logs.c gives a worker, next to its two logs. */
static void
test_error_file(void)
{
	char dir[] = "/tmp/rdzv-test-env-XXXXXX";
	char path[640], err[256], want[700], cmd[700];
	struct logs l;
	struct stat st;
	int out = -1, errfd = -1;

	memset(&l, 0, sizeof(l));
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		CHECK(0);
		return;
	}
	CHECK_INT(logs_init(&l, dir, JOB_ID, err, sizeof(err)), 0);
	CHECK_INT(logs_worker_open(&l, 12, 3, path, sizeof(path), &out,
	    &errfd, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/12/3/error.json", dir);
	CHECK_STR(path, want);
	snprintf(want, sizeof(want), "%s/12/3/stdout.log", dir);
	CHECK_INT(stat(want, &st), 0);
	CHECK(out >= 0 && errfd >= 0);
	if (out >= 0)
		close(out);
	if (errfd >= 0)
		close(errfd);
	logs_free(&l);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int
main(void)
{
	test_round();
	test_one_worker();
	test_omp();
	test_inherited_replaced();
	test_nccl();
	test_ifname();
	test_restart_socket();
	test_preload();
	test_bounds();
	test_error_file();
	return check_done("test_env");
}
