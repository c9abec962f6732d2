/*
 * Running the GPU check from the agent (SPEC §7), and the words around it:
 * its policies, its options, a result described or put in a message. The
 * agent process never loads libcuda: every check runs in a child process,
 * either one started for it before the join or the worker itself between
 * fork and exec. The check itself is lib/gpucheck/gpucheck.c's.
 */
#ifndef RDZV_AGENT_GPUCHECK_RUN_H
#define RDZV_AGENT_GPUCHECK_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpucheck.h"
#include "rdzv/v1/types.pb-c.h"

enum gpucheck_policy {
	GPUCHECK_OFF,
	GPUCHECK_WARN,		/* report, start anyway */
	GPUCHECK_EXCLUDE,	/* leave failed GPUs out, fewer workers */
	GPUCHECK_STRICT,	/* any failure: the node leaves the job */
};

struct gpucheck_opts {
	enum gpucheck_policy	policy;
	/* --gpucheck-timeout, per check; 0: no limit */
	uint32_t		timeout_ms;
	/* 0: $RDZV_GPUCHECK_BYTES, else GPUCHECK_DEFAULT_BYTES */
	size_t			bytes;
};

/* "off", "warn", "exclude", "strict". 0, or -1. */
int	gpucheck_policy_parse(const char *s, enum gpucheck_policy *out);
const char *gpucheck_policy_name(enum gpucheck_policy);

/* The buffer size a check uses: opts->bytes, else $RDZV_GPUCHECK_BYTES
 * (a size as parse_size() reads it; its older name RDZV_HEALTH_BYTES is
 * still read when it is unset), else GPUCHECK_DEFAULT_BYTES. */
size_t	gpucheck_bytes(const struct gpucheck_opts *);

/*
 * Counts this node's GPUs in a child process. 0 with *count (0: none, also
 * when the driver says CUDA_ERROR_NO_DEVICE), or -1 with the reason (no
 * libcuda, cuInit failed, the count timed out) in |why|.
 */
int	gpucheck_run_count(uint32_t timeout_ms, int *count, char *why,
	    size_t len);

/*
 * Checks devices 0..n-1, each in its own child process, in parallel; a
 * check still running after opts->timeout_ms is killed and counts as failed
 * ("timeout after ..."). results[i] is device i. Returns the number that
 * passed. Every child is reaped before it returns, by its pid: the caller
 * must not reap with waitpid(-1) meanwhile (a SIGCHLD handler of the agent
 * that does would take the children's statuses, not their results).
 */
int	gpucheck_run(const struct gpucheck_opts *, int n,
	    struct gpucheck_result *results);

/* The same for the |n| devices listed in |devices|: results[i] is
 * devices[i]. */
int	gpucheck_run_devices(const struct gpucheck_opts *, const int *devices,
	    int n, struct gpucheck_result *results);

/*
 * In a worker child, after fork and before exec: checks |device|, writes
 * the result on |fd| and closes it. Returns 0 when the device passed (go
 * on and exec), -1 when it failed (the child should _exit(GPUCHECK_EXIT)).
 * Async-signal-safety is not needed: the child is single-threaded.
 */
#define GPUCHECK_EXIT	125
int	gpucheck_run_worker(const struct gpucheck_opts *, int device, int fd);

/*
 * CUDA_VISIBLE_DEVICES for workers that use only |devices| (ordinals as
 * the agent's environment sees them), mapped through an existing
 * CUDA_VISIBLE_DEVICES (Slurm sets one): "0,1,3", or "GPU-uuid,...".
 * 0, or -1 when |len| is too small.
 */
int	gpucheck_visible_devices(const int *devices, size_t n, char *buf,
	    size_t len);

/* A result as the protocol carries it; pb's strings point into |r|. */
void	gpucheck_to_pb(const struct gpucheck_result *r,
	    Rdzv__V1__GpuResult *pb, Rdzv__V1__GpuStep *steps,
	    Rdzv__V1__GpuStep **step_ptrs);

/* The time of all steps of a check. */
uint64_t gpucheck_elapsed_us(const struct gpucheck_result *);

/* "device 2 (NVIDIA H100, GPU-...): alloc failed: CUDA_ERROR_...", or
 * "device 0 (NVIDIA H100, GPU-...): passed in 812.4 ms". */
void	gpucheck_describe(const struct gpucheck_result *r, char *buf,
	    size_t len);

#endif
