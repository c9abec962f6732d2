/*
 * The GPU check of SPEC §7 on the CUDA driver API, with libcuda
 * loaded by dlopen() ("libcuda.so.1", or $RDZV_LIBCUDA). No CUDA header or
 * library is needed to build: the few declarations used are our own.
 *
 * gpucheck_device() initialises CUDA in the calling process. A process that has
 * called it must not fork children that use CUDA; the agent therefore only
 * calls it in child processes (a worker between fork and exec, or a probe
 * child). Nothing here logs or exits.
 *
 * Module lib/gpucheck/ (librdzvgpucheck): owns the check's steps and its embedded kernel. It
 * calls libcuda (by dlopen) and lib/'s base; rdzv-agent calls it, in child
 * processes only.
 *
 * Calls: lib/base.
 * Called by: client/agent.
 */
#ifndef RDZV_GPUCHECK_H
#define RDZV_GPUCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPUCHECK_STEPS_MAX	24
#define GPUCHECK_DEFAULT_BYTES	(256u << 20)	/* the test buffer */

struct gpucheck_step {
	char		name[24];	/* "cuInit", "alloc", "kernel", ... */
	uint64_t	elapsed_us;
};

/*
 * The result of checking one device. A plain struct with no pointers, so
 * that a child can write() it whole through a pipe (sizeof < PIPE_BUF:
 * atomic) and the parent read() it.
 */
struct gpucheck_result {
	int32_t		device;		/* ordinal as this process sees it */
	bool		ok;
	int32_t		driver_version;	/* cuDriverGetVersion, 0 unknown */
	char		name[96];
	char		uuid[48];	/* "GPU-xxxxxxxx-xxxx-..." */
	uint64_t	total_mem;	/* bytes */
	uint64_t	free_mem;
	char		failed_step[24];/* empty when ok */
	char		error[48];	/* "CUDA_ERROR_OUT_OF_MEMORY", "timeout",
					   "mismatch at element 17", ... */
	struct gpucheck_step steps[GPUCHECK_STEPS_MAX];
	uint32_t	n_steps;
};

/*
 * Loads libcuda (once per process) and counts devices (cuInit,
 * cuDeviceGetCount). 0 with *count (0 also when cuInit says
 * CUDA_ERROR_NO_DEVICE: a node without GPUs), or -1 with a message in |err|
 * naming libcuda and the cause ("cannot load libcuda: libcuda.so.1: cannot
 * open shared object file: ...", "libcuda: cuInit: CUDA_ERROR_UNKNOWN").
 */
int	gpucheck_count(int *count, char *err, size_t errlen);

/*
 * Runs every step of SPEC §7 on |device| with a |bytes| buffer (0: the
 * default), each timed. Returns 0 when the device passed; -1 when it failed
 * (out->failed_step and out->error say where and why). |out| is always
 * filled.
 */
int	gpucheck_device(int device, size_t bytes, struct gpucheck_result *out);

/*
 * gpucheck_device() telling |fn| before each step which step starts, with
 * the result so far (the steps done, with their times): a parent that has
 * to kill a hung check can then say which step hung.
 */
typedef void gpucheck_progress_fn(const struct gpucheck_result *sofar,
    const char *step, void *arg);
int	gpucheck_device_progress(int device, size_t bytes,
	    struct gpucheck_result *out, gpucheck_progress_fn *fn, void *arg);

/*
 * Either of the above with |flags|: GPUCHECK_KEEP_CONTEXT ends a passing
 * check after "verify", leaving the memory, the module and the primary
 * context to the driver's teardown at exit or exec, for a process that
 * exits or execs right after (a probe child, a worker); a failed check
 * still releases what it took.
 */
#define GPUCHECK_KEEP_CONTEXT	0x1u
int	gpucheck_device_flags(int device, size_t bytes, unsigned flags,
	    struct gpucheck_result *out, gpucheck_progress_fn *fn, void *arg);

/* Writes / reads one result whole on a pipe. 0, or -errno (-EPIPE: the
 * writer went away before a whole result). */
int	gpucheck_result_write(int fd, const struct gpucheck_result *r);
int	gpucheck_result_read(int fd, struct gpucheck_result *r);

/* A failed result for a device whose check did not finish (killed after
 * the timeout, or the child died): failed_step "check", error |why|
 * ("timeout after 60 s"). */
void	gpucheck_result_failed(struct gpucheck_result *r, int device,
	    const char *why);

#endif
