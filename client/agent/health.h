/*
 * GPU health in the agent (SPEC §7). The agent process never loads libcuda:
 * every check runs in a child process, either a probe child before the join
 * or the worker itself between fork and exec.
 */
#ifndef RDZV_AGENT_HEALTH_H
#define RDZV_AGENT_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpucheck.h"
#include "rdzv/v1/types.pb-c.h"

enum health_policy {
	HEALTH_OFF,
	HEALTH_WARN,		/* report, start anyway */
	HEALTH_EXCLUDE,		/* leave failed GPUs out, fewer workers */
	HEALTH_STRICT,		/* any failure: the node leaves the job */
};

struct health_opts {
	enum health_policy	policy;
	/* --health-timeout, per check; 0: no limit */
	uint32_t		timeout_ms;
	/* 0: $RDZV_HEALTH_BYTES, else GPU_DEFAULT_BYTES */
	size_t			bytes;
};

/* "off", "warn", "exclude", "strict". 0, or -1. */
int	health_policy_parse(const char *s, enum health_policy *out);
const char *health_policy_name(enum health_policy);

/* The buffer size a check uses: opts->bytes, else $RDZV_HEALTH_BYTES
 * (a size as parse_size() reads it), else GPU_DEFAULT_BYTES. */
size_t	health_bytes(const struct health_opts *);

/*
 * Counts this node's GPUs in a child process. 0 with *count (0: none, also
 * when the driver says CUDA_ERROR_NO_DEVICE), or -1 with the reason (no
 * libcuda, cuInit failed, the count timed out) in |why|.
 */
int	health_count(uint32_t timeout_ms, int *count, char *why, size_t len);

/*
 * Checks devices 0..n-1, each in its own child process, in parallel; a
 * check still running after opts->timeout_ms is killed and counts as failed
 * ("timeout after ..."). results[i] is device i. Returns the number that
 * passed. Every child is reaped before it returns, by its pid: the caller
 * must not reap with waitpid(-1) meanwhile (a SIGCHLD handler of the agent
 * that does would take the children's statuses, not their results).
 */
int	health_probe(const struct health_opts *, int n,
	    struct gpu_result *results);

/* The same for the |n| devices listed in |devices|: results[i] is
 * devices[i]. */
int	health_probe_devices(const struct health_opts *, const int *devices,
	    int n, struct gpu_result *results);

/*
 * In a worker child, after fork and before exec: checks |device|, writes
 * the result on |fd| and closes it. Returns 0 when the device passed (go
 * on and exec), -1 when it failed (the child should _exit(HEALTH_EXIT)).
 * Async-signal-safety is not needed: the child is single-threaded.
 */
#define HEALTH_EXIT	125
int	health_worker_check(const struct health_opts *, int device, int fd);

/*
 * CUDA_VISIBLE_DEVICES for workers that use only |devices| (ordinals as
 * the agent's environment sees them), mapped through an existing
 * CUDA_VISIBLE_DEVICES (Slurm sets one): "0,1,3", or "GPU-uuid,...".
 * 0, or -1 when |len| is too small.
 */
int	health_visible_devices(const int *devices, size_t n, char *buf,
	    size_t len);

/* A result as the protocol carries it; pb's strings point into |r|. */
void	health_to_pb(const struct gpu_result *r, Rdzv__V1__GpuResult *pb,
	    Rdzv__V1__GpuStep *steps, Rdzv__V1__GpuStep **step_ptrs);

/* The time of all steps of a check. */
uint64_t health_elapsed_us(const struct gpu_result *);

/* "device 2 (NVIDIA H100, GPU-...): alloc failed: CUDA_ERROR_...", or
 * "device 0 (NVIDIA H100, GPU-...): passed in 812.4 ms". */
void	health_describe(const struct gpu_result *r, char *buf, size_t len);

/* `rdzv-agent gpucheck [--device N|all] [-o json]`; returns the exit
 * status. argv[0] is "gpucheck". */
int	cmd_gpucheck(int argc, char **argv);

#endif
