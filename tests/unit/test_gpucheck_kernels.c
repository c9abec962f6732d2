/*
 * Unit tests of the GPU check's device side (lib/gpucheck/gpucheck.c with the
 * kernels of lib/gpucheck/gpucheck_kernel.ptx), on the stand-in libcuda of
 * tests/fakecuda, which runs the kernels in C: a wrong element anywhere
 * in the buffer (first, middle, last), an SM that runs no block, a copy
 * that fails either way, and a check that keeps its context for the
 * driver's teardown (GPUCHECK_KEEP_CONTEXT) and so calls nothing after
 * "verify" when it passes, but gives everything back when it fails. Each
 * case runs in a child of its own: the stand-in reads its FAKECUDA_*
 * settings once per process.
 */
#include <sys/wait.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpucheck.h"
#include "gpucheck_harness.h"

#define SMALL	(1u << 20)

static char	tmpdir[] = "/tmp/test_gpucheck_kernels.XXXXXX";
static char	logpath[sizeof tmpdir + 16];

/* How many lines of the stand-in's log name |fn| (this process's). */
static int
logged(const char *fn)
{
	char	 line[256], want[128];
	FILE	*f;
	int	 n = 0;

	snprintf(want, sizeof want, "%ld %s ", (long)getpid(), fn);
	if ((f = fopen(logpath, "r")) == NULL)
		return (0);
	while (fgets(line, sizeof line, f) != NULL)
		n += strncmp(line, want, strlen(want)) == 0;
	fclose(f);
	return (n);
}

/* A wrong element is found wherever it is, by its index. */
static void
case_wrong_element(void)
{
	struct gpucheck_result	r;

	/* Device 0: the first element; 1: the last of 2^18; 2: the middle. */
	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "verify", "mismatch at element 0 (1 wrong)");
	CHECK_INT(gpucheck_device(1, SMALL, &r), -1);
	check_failed(&r, "verify", "mismatch at element 262143 (1 wrong)");
	CHECK_INT(gpucheck_device(2, SMALL, &r), -1);
	check_failed(&r, "verify", "mismatch at element 131073 (1 wrong)");
	/* The copies both ways passed before it. */
	CHECK_INT(r.n_steps, 18);
	CHECK_STR(r.steps[15].name, "copy_in");
	CHECK_STR(r.steps[16].name, "copy_back");
	/* A buffer not a multiple of the grid (1000 elements) still has
	 * every element checked: its last one. */
	CHECK_INT(gpucheck_device(3, 4000, &r), -1);
	check_failed(&r, "verify", "mismatch at element 999 (1 wrong)");
}

/* An SM that runs no block: the data is right (the others did its
 * share), but the check says how many SMs ran the kernel. */
static void
case_dead_sm(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "verify", "131 of 132 SMs ran the kernel");
	CHECK_INT(gpucheck_device(1, SMALL, &r), 0);
	CHECK(r.ok);
	/* Everything taken was given back: one release per retain. */
	CHECK_INT(logged("cuDevicePrimaryCtxRelease_v2"),
	    logged("cuDevicePrimaryCtxRetain"));
}

static void
case_failed_copy_in(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "copy_in", "CUDA_ERROR_LAUNCH_FAILED");
	CHECK_INT(r.n_steps, 16);
	CHECK_INT(logged("cuDevicePrimaryCtxRelease_v2"), 1);
}

static void
case_failed_copy_back(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device_flags(0, SMALL, GPUCHECK_KEEP_CONTEXT, &r,
	    NULL, NULL), -1);
	check_failed(&r, "copy_back", "CUDA_ERROR_ECC_UNCORRECTABLE");
	CHECK_INT(r.n_steps, 17);
	/* A failed check gives its context back even when asked to keep
	 * it: the process may go on to run the worker (--gpucheck warn). */
	CHECK_INT(logged("cuDevicePrimaryCtxRelease_v2"), 1);
}

/* A passing check that keeps its context ends at "verify" and calls
 * nothing after it; one that does not frees, unloads and releases. */
static void
case_keep_context(void)
{
	struct gpucheck_result	r;
	static const char *steps[] = {
		"libcuda", "cuInit", "driver_version", "device_count",
		"device_get", "name", "uuid", "total_mem", "sm_count",
		"primary_ctx", "free_mem", "alloc", "module_load", "fill",
		"kernel", "copy_in", "copy_back", "verify",
	};
	uint32_t		i;

	CHECK_INT(gpucheck_device_flags(0, SMALL, GPUCHECK_KEEP_CONTEXT, &r,
	    NULL, NULL), 0);
	CHECK(r.ok);
	CHECK_INT(r.n_steps, sizeof steps / sizeof steps[0]);
	for (i = 0; i < r.n_steps && i < sizeof steps / sizeof steps[0]; i++)
		CHECK_STR(r.steps[i].name, steps[i]);
	CHECK_INT(logged("cuDevicePrimaryCtxRetain"), 1);
	CHECK_INT(logged("cuDevicePrimaryCtxRelease_v2"), 0);
	CHECK_INT(gpucheck_device(1, SMALL, &r), 0);
	CHECK_INT(r.n_steps, sizeof steps / sizeof steps[0] + 3);
	CHECK_STR(r.steps[r.n_steps - 1].name, "release");
	CHECK_INT(logged("cuDevicePrimaryCtxRelease_v2"), 1);
}

int
main(void)
{
	const char	*lib = getenv("RDZV_LIBCUDA");
	char		 cmd[128];

	if (lib == NULL || strstr(lib, "libcuda.so") == NULL) {
		printf("RDZV_LIBCUDA names no stand-in libcuda: skipped\n");
		return (77);
	}
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return (1);
	}
	snprintf(logpath, sizeof logpath, "%s/log", tmpdir);
	setenv("FAKECUDA_LOG", logpath, 1);

	in_child("wrong element", case_wrong_element, "FAKECUDA_DEVICES=4",
	    "FAKECUDA_MISMATCH=0:0,1:262143,2:131073,3:999", NULL);
	in_child("dead SM", case_dead_sm, "FAKECUDA_DEVICES=2",
	    "FAKECUDA_SMS=132", "FAKECUDA_DEAD_SM=0:77", NULL);
	in_child("failed copy in", case_failed_copy_in,
	    "FAKECUDA_FAIL=0:copy_in:CUDA_ERROR_LAUNCH_FAILED", NULL);
	in_child("failed copy back", case_failed_copy_back,
	    "FAKECUDA_FAIL=0:copy_back:CUDA_ERROR_ECC_UNCORRECTABLE", NULL);
	in_child("keep context", case_keep_context, "FAKECUDA_DEVICES=2",
	    NULL);

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return (check_done("test_gpucheck_kernels"));
}
