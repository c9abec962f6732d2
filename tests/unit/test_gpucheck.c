/*
 * Unit tests for the GPU check (lib/gpucheck/gpucheck.c) and the agent's running
 * of it (client/agent/gpucheck_run.c), on the stand-in libcuda of
 * tests/fakecuda ($RDZV_LIBCUDA names it; meson sets it). Every case that
 * loads libcuda runs in a child process with its own FAKECUDA_* settings,
 * because the stand-in reads them once per process at cuInit, and because
 * a process that has initialised CUDA must not fork children that use it.
 *
 * With RDZV_GPUCHECK_REAL=1 (tests/gpu/run.sh) it checks the machine's
 * real GPUs instead: every device must pass, with sane values.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "gpucheck.h"
#include "gpucheck_harness.h"
#include "gpucheck_run.h"

#define SMALL	(1u << 20)	/* the buffer of most cases */
#define STUB	"/usr/local/cuda/lib64/stubs/libcuda.so"

/* The steps of a passing check, in order (SPEC §7). */
static const char *all_steps[] = {
	"libcuda", "cuInit", "driver_version", "device_count", "device_get",
	"name", "uuid", "total_mem", "sm_count", "primary_ctx", "free_mem",
	"alloc", "module_load", "fill", "kernel", "copy_in", "copy_back",
	"verify", "free", "module_unload", "release",
};
#define N_STEPS	(sizeof all_steps / sizeof all_steps[0])
/* A probe's check keeps its context for the driver's teardown at exit:
 * it ends at "verify" (GPUCHECK_KEEP_CONTEXT). */
#define N_STEPS_KEPT	(N_STEPS - 3)

static char	tmpdir[] = "/tmp/test_gpucheck.XXXXXX";

/* A passing result: every step present, in order (up to "verify" for a
 * check that kept its context), with sane values. */
static void
check_passed(const struct gpucheck_result *r, int device, int phys)
{
	char	want[64];
	size_t	i;

	CHECK(r->ok);
	CHECK_INT(r->device, device);
	CHECK_STR(r->failed_step, "");
	CHECK_STR(r->error, "");
	CHECK(r->n_steps == N_STEPS || r->n_steps == N_STEPS_KEPT);
	for (i = 0; i < N_STEPS && i < r->n_steps; i++) {
		CHECK_STR(r->steps[i].name, all_steps[i]);
		/* No step of a check takes minutes. */
		CHECK(r->steps[i].elapsed_us < 60u * 1000 * 1000);
	}
	snprintf(want, sizeof want, "FakeCUDA GPU %d", phys);
	CHECK_STR(r->name, want);
	snprintf(want, sizeof want, "GPU-fa4ec0da-0000-4000-8000-0000%08x",
	    phys);
	CHECK_STR(r->uuid, want);
	CHECK_INT(r->driver_version, 12080);
	CHECK_INT(r->total_mem, 80ull << 30);
	CHECK_INT(r->free_mem, 80ull << 30);
}

static void
case_pass(void)
{
	struct gpucheck_result	r;
	char			err[256];
	int			n = -1;
	uint64_t		sum = 0;
	uint32_t		i;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(gpucheck_device(0, SMALL, &r), 0);
	check_passed(&r, 0, 0);
	for (i = 0; i < r.n_steps; i++)
		sum += r.steps[i].elapsed_us;
	/* 1 MiB filled, transformed, copied and verified takes some time. */
	CHECK(sum > 0);
	CHECK_INT(gpucheck_device(1, SMALL, &r), 0);
	check_passed(&r, 1, 1);
	/* Twice on one device in one process: the first cleaned up. */
	CHECK_INT(gpucheck_device(1, 4096, &r), 0);
	check_passed(&r, 1, 1);
	/* An odd size: elements are 32-bit, the rest is left out. */
	CHECK_INT(gpucheck_device(0, 4099, &r), 0);
	CHECK_INT(gpucheck_device(2, SMALL, &r), -1);
	check_failed(&r, "device_count", "no device 2 (2 found)");
}

/* The default size, 256 MiB, when neither RDZV_GPUCHECK_BYTES nor its
 * older name RDZV_HEALTH_BYTES is set; the new name wins over the old. */
static void
case_default_size(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_EXCLUDE, 0, 0 };

	CHECK_INT(gpucheck_bytes(&opts), GPUCHECK_DEFAULT_BYTES);
	setenv("RDZV_HEALTH_BYTES", "2MiB", 1);
	CHECK_INT(gpucheck_bytes(&opts), 2u << 20);
	setenv("RDZV_GPUCHECK_BYTES", "", 1);
	CHECK_INT(gpucheck_bytes(&opts), 2u << 20);
	setenv("RDZV_GPUCHECK_BYTES", "1MiB", 1);
	CHECK_INT(gpucheck_bytes(&opts), 1u << 20);
	opts.bytes = 4096;
	CHECK_INT(gpucheck_bytes(&opts), 4096);
}

/* Which device fails, and how: set per case by test_fail_steps(). */
static const char	*fail_step;
static const char	*fail_error;

static void
case_fail_step(void)
{
	struct gpucheck_result	r;
	char			log[4096];
	FILE			*f;
	int			released = 0, retained = 0;

	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, fail_step, fail_error);
	/* Every step before the failed one was recorded, in order. */
	for (uint32_t i = 0; i < r.n_steps && i < N_STEPS; i++)
		CHECK_STR(r.steps[i].name, all_steps[i]);
	/* What the check had taken was given back (the stand-in logs). */
	if (getenv("FAKECUDA_LOG") != NULL &&
	    (f = fopen(getenv("FAKECUDA_LOG"), "r")) != NULL) {
		while (fgets(log, sizeof log, f) != NULL) {
			if (strstr(log, "cuDevicePrimaryCtxRetain 0 "
			    "CUDA_SUCCESS") != NULL)
				retained++;
			if (strstr(log, "cuDevicePrimaryCtxRelease_v2 0") !=
			    NULL)
				released++;
		}
		fclose(f);
	}
	CHECK_INT(released, retained);
}

/* Each step of the check fails with an error, and says so. */
static void
test_fail_steps(void)
{
	static const char *errors[] = {
		"CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_OUT_OF_MEMORY",
		"CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_UNKNOWN",
	};
	char	fail[128], logenv[4200];
	size_t	i;

	for (i = 1; i < N_STEPS; i++) {
		fail_step = all_steps[i];
		fail_error = errors[i % 4];
		/* Steps before a device is chosen fail for every device. */
		snprintf(fail, sizeof fail, "FAKECUDA_FAIL=%s:%s:%s",
		    i <= 3 ? "*" : "0", fail_step, fail_error);
		snprintf(logenv, sizeof logenv, "FAKECUDA_LOG=%s/log.%zu",
		    tmpdir, i);
		in_child(fail_step, case_fail_step, "FAKECUDA_DEVICES=2",
		    fail, logenv, NULL);
	}
	/* A code the driver has no name for. */
	fail_step = "alloc";
	fail_error = "CUresult 4242";
	in_child("unnamed code", case_fail_step,
	    "FAKECUDA_FAIL=0:alloc:4242", NULL);
}

static void
case_other_device_unaffected(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(2, SMALL, &r), -1);
	check_failed(&r, "alloc", "CUDA_ERROR_OUT_OF_MEMORY");
	CHECK_STR(r.name, "FakeCUDA GPU 2");
	CHECK_INT(gpucheck_device(3, SMALL, &r), 0);
	check_passed(&r, 3, 3);
}

static void
case_mismatch(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "verify", "mismatch at element 5 (1 wrong)");
	/* Steps up to the verification ran; copy_back before it. */
	CHECK_INT(r.n_steps, 18);
	CHECK_STR(r.steps[16].name, "copy_back");
	/* The index wraps on a smaller buffer: 1000 elements. */
	CHECK_INT(gpucheck_device(1, 4000, &r), -1);
	check_failed(&r, "verify", "mismatch at element 0 (1 wrong)");
	CHECK_INT(gpucheck_device(2, SMALL, &r), 0);
}

/* "Passes before the join, fails when its worker starts." */
static void
case_fail_after(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(0, SMALL, &r), 0);
	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "alloc", "CUDA_ERROR_OUT_OF_MEMORY");
	CHECK_INT(gpucheck_device(1, SMALL, &r), 0);
}

static int	want_ok;

static void
case_one_check(void)
{
	struct gpucheck_result	r;

	CHECK_INT(gpucheck_device(0, SMALL, &r), want_ok ? 0 : -1);
	if (!want_ok)
		check_failed(&r, "alloc", "CUDA_ERROR_OUT_OF_MEMORY");
}

/* The same across processes, counted in FAKECUDA_STATE. */
static void
test_fail_after_state(void)
{
	char	state[4200];

	snprintf(state, sizeof state, "FAKECUDA_STATE=%s", tmpdir);
	want_ok = 1;
	in_child("after=2, check 1", case_one_check, state,
	    "FAKECUDA_FAIL=0:alloc:CUDA_ERROR_OUT_OF_MEMORY:after=2", NULL);
	in_child("after=2, check 2", case_one_check, state,
	    "FAKECUDA_FAIL=0:alloc:CUDA_ERROR_OUT_OF_MEMORY:after=2", NULL);
	want_ok = 0;
	in_child("after=2, check 3", case_one_check, state,
	    "FAKECUDA_FAIL=0:alloc:CUDA_ERROR_OUT_OF_MEMORY:after=2", NULL);
}

static void
case_no_libcuda(void)
{
	struct gpucheck_result	r;
	char			err[256], why[512];
	int			n = -1;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), -1);
	CHECK_INT(n, 0);
	CHECK_CONTAINS(err, "libcuda");
	CHECK_CONTAINS(err, "/nonexistent/libcuda.so.1");
	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	CHECK_STR(r.failed_step, "libcuda");
	CHECK_INT(r.n_steps, 1);
	CHECK_CONTAINS(r.error, "libcuda");
	CHECK_INT(gpucheck_run_count(5000, &n, why, sizeof why), -1);
	CHECK_CONTAINS(why, "cannot load libcuda: /nonexistent/libcuda.so.1");
}

/* A library that is no libcuda at all (it lacks the entry points). */
static void
case_not_libcuda(void)
{
	char	err[256];
	int	n;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), -1);
	CHECK_CONTAINS(err, "has no cuGetErrorName");
}

/*
 * The CUDA toolkit's stub libcuda exports the real driver's symbol table:
 * every entry point we resolve must be in it (the load succeeds), and its
 * answer, CUDA_ERROR_STUB_LIBRARY, is named.
 */
static void
case_toolkit_stub(void)
{
	struct gpucheck_result	r;
	char			err[256];
	int			n;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), -1);
	CHECK_STR(err, "libcuda: cuInit: CUDA_ERROR_STUB_LIBRARY");
	CHECK_INT(gpucheck_device(0, 4096, &r), -1);
	check_failed(&r, "cuInit", "CUDA_ERROR_STUB_LIBRARY");
}

static void
case_no_device(void)
{
	struct gpucheck_result	r;
	char			err[256];
	int			n = -1;

	CHECK_INT(gpucheck_run_count(5000, &n, err, sizeof err), 0);
	CHECK_INT(n, 0);
	CHECK_INT(gpucheck_count(&n, err, sizeof err), 0);
	CHECK_INT(n, 0);
	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	check_failed(&r, "cuInit", "CUDA_ERROR_NO_DEVICE");
}

/* CUDA_VISIBLE_DEVICES renumbers, as the driver does: ordinal 0 is
 * physical device 2 and fails with it. */
static void
case_visible(void)
{
	struct gpucheck_result	r;
	char			err[256];
	int			n = -1;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(gpucheck_device(0, SMALL, &r), -1);
	CHECK_STR(r.name, "FakeCUDA GPU 2");
	check_failed(&r, "alloc", "CUDA_ERROR_OUT_OF_MEMORY");
	CHECK_INT(gpucheck_device(1, SMALL, &r), 0);
	check_passed(&r, 1, 3);
}

/* UUID entries (a unique prefix is enough); the list ends at the first
 * entry that names no device. */
static void
case_visible_uuid(void)
{
	struct gpucheck_result	r;
	char			err[256];
	int			n = -1;

	CHECK_INT(gpucheck_count(&n, err, sizeof err), 0);
	CHECK_INT(n, 2);
	CHECK_INT(gpucheck_device(0, 4096, &r), 0);
	check_passed(&r, 0, 3);
	CHECK_INT(gpucheck_device(1, 4096, &r), 0);
	check_passed(&r, 1, 1);
}

static void
case_visible_devices(void)
{
	const int	a[] = { 0, 1, 3 }, b[] = { 0, 2 }, c[] = { 5 };
	char		buf[256];

	unsetenv("CUDA_VISIBLE_DEVICES");
	CHECK_INT(gpucheck_visible_devices(a, 3, buf, sizeof buf), 0);
	CHECK_STR(buf, "0,1,3");
	CHECK_INT(gpucheck_visible_devices(a, 0, buf, sizeof buf), 0);
	CHECK_STR(buf, "");
	CHECK_INT(gpucheck_visible_devices(a, 3, buf, 5), -1);
	CHECK_INT(gpucheck_visible_devices(a, 3, buf, 6), 0);
	setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7", 1);
	CHECK_INT(gpucheck_visible_devices(b, 2, buf, sizeof buf), 0);
	CHECK_STR(buf, "4,6");
	CHECK_INT(gpucheck_visible_devices(c, 1, buf, sizeof buf), -1);
	setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb,GPU-cccc", 1);
	CHECK_INT(gpucheck_visible_devices(b, 2, buf, sizeof buf), 0);
	CHECK_STR(buf, "GPU-aaaa,GPU-cccc");
}

static void
case_probe(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_EXCLUDE, 10000, SMALL };
	struct gpucheck_result	rs[4];
	int			i;

	CHECK_INT(gpucheck_run(&opts, 4, rs), 3);
	for (i = 0; i < 4; i++) {
		if (i == 2)
			check_failed(&rs[i], "alloc",
			    "CUDA_ERROR_OUT_OF_MEMORY");
		else
			check_passed(&rs[i], i, i);
	}
	/* Every child was reaped. */
	CHECK_INT(waitpid(-1, NULL, WNOHANG), -1);
	CHECK_INT(errno, ECHILD);
}

/* A hanging device is killed at the timeout; the others are not held up
 * by it, and nothing is left behind. */
static void
case_probe_hang(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_EXCLUDE, 0, SMALL };
	struct gpucheck_result	rs[4];
	uint64_t		t0, took, good;
	char			buf[512], want[256];
	int			i, n;

	/*
	 * The timeout must let the good devices finish, under valgrind too:
	 * it is set from how long a good check takes here.
	 */
	t0 = mono_ms();
	CHECK_INT(gpucheck_run(&opts, 1, rs), 1);
	good = mono_ms() - t0;
	opts.timeout_ms = (uint32_t)(700 + 4 * good);
	t0 = mono_ms();
	CHECK_INT(gpucheck_run(&opts, 4, rs), 3);
	took = mono_ms() - t0;
	CHECK(took >= opts.timeout_ms);
	CHECK(took < opts.timeout_ms + 3000);
	for (i = 0; i < 3; i++)
		check_passed(&rs[i], i, i);
	/* The step it hung in is named, with the time it spent there; what
	 * it had done before is kept. */
	snprintf(want, sizeof want, "timeout after %u ms", opts.timeout_ms);
	if (opts.timeout_ms % 1000 == 0)
		snprintf(want, sizeof want, "timeout after %u s",
		    opts.timeout_ms / 1000);
	check_failed(&rs[3], "kernel", want);
	CHECK_INT(rs[3].device, 3);
	CHECK_STR(rs[3].name, "FakeCUDA GPU 3");
	CHECK_INT(rs[3].n_steps, 15);
	for (i = 0; i < 15 && i < (int)rs[3].n_steps; i++)
		CHECK_STR(rs[3].steps[i].name, all_steps[i]);
	CHECK(rs[3].steps[14].elapsed_us >=
	    (opts.timeout_ms - good) * 1000 / 2);
	CHECK(rs[3].steps[14].elapsed_us <= (opts.timeout_ms + 3000) * 1000);
	gpucheck_describe(&rs[3], buf, sizeof buf);
	snprintf(want, sizeof want, "device 3 (FakeCUDA GPU 3, "
	    "GPU-fa4ec0da-0000-4000-8000-000000000003): kernel failed: %s",
	    rs[3].error);
	CHECK_STR(buf, want);
	CHECK_CONTAINS(buf, "timeout after");
	CHECK_INT(waitpid(-1, NULL, WNOHANG), -1);
	CHECK_INT(errno, ECHILD);

	/* Hung before anything was known of the device. */
	opts.timeout_ms = 1000;
	setenv("FAKECUDA_HANG", "*:cuInit", 1);
	CHECK_INT(gpucheck_run(&opts, 1, rs), 0);
	check_failed(&rs[0], "cuInit", "timeout after 1 s");
	CHECK_INT(rs[0].n_steps, 2);

	/* A count that hangs in cuInit times out the same way. */
	setenv("FAKECUDA_HANG", "*:cuInit", 1);
	t0 = mono_ms();
	CHECK_INT(gpucheck_run_count(500, &n, buf, sizeof buf), -1);
	CHECK(mono_ms() - t0 < 500 + 3000);
	CHECK_STR(buf, "timeout after 500 ms");
	CHECK_INT(waitpid(-1, NULL, WNOHANG), -1);
}

static void
case_probe_list(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_WARN, 10000, 4096 };
	struct gpucheck_result	rs[2];
	const int		devs[] = { 3, 1 };
	int			n = -1;
	char			why[256];

	CHECK_INT(gpucheck_run_count(5000, &n, why, sizeof why), 0);
	CHECK_INT(n, 4);
	CHECK_INT(gpucheck_run_devices(&opts, devs, 2, rs), 2);
	check_passed(&rs[0], 3, 3);
	check_passed(&rs[1], 1, 1);
}

/* A check whose process dies (a driver crash) fails naming the step. */
static void
case_probe_crash(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_EXCLUDE, 10000, SMALL };
	struct gpucheck_result	rs[2];

	CHECK_INT(gpucheck_run(&opts, 2, rs), 1);
	check_passed(&rs[0], 0, 0);
	check_failed(&rs[1], "alloc", "check died: Segmentation fault");
	CHECK_INT(rs[1].n_steps, 12);
}

/* The worker's side: the check between fork and exec, its result on a
 * pipe to the agent. */
static void
case_worker(void)
{
	struct gpucheck_opts	opts = { GPUCHECK_EXCLUDE, 0, SMALL };
	struct gpucheck_result	r;
	int			p[2], dev, status;
	pid_t			pid;

	for (dev = 0; dev < 2; dev++) {
		CHECK_INT(pipe(p), 0);
		pid = fork();
		if (pid == 0) {
			close(p[0]);
			_exit(gpucheck_run_worker(&opts, dev, p[1]) == 0 ?
			    0 : GPUCHECK_EXIT);
		}
		close(p[1]);
		CHECK_INT(gpucheck_result_read(p[0], &r), 0);
		/* The worker closed its end: nothing more comes. */
		CHECK_INT(gpucheck_result_read(p[0], &r), -EPIPE);
		close(p[0]);
		CHECK_INT(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status));
		if (dev == 0) {
			CHECK_INT(WEXITSTATUS(status), GPUCHECK_EXIT);
			CHECK_INT(gpucheck_result_read(-1, &r), -EBADF);
		} else
			CHECK_INT(WEXITSTATUS(status), 0);
	}
}

/* Results as the protocol carries them, and as people read them. */
static void
test_pb_describe(void)
{
	struct gpucheck_result	 r;
	Rdzv__V1__GpuResult	 pb, *back;
	Rdzv__V1__GpuStep	 steps[GPUCHECK_STEPS_MAX];
	Rdzv__V1__GpuStep	*ptrs[GPUCHECK_STEPS_MAX];
	uint8_t			 buf[4096];
	size_t			 len;
	char			 s[512];

	memset(&r, 0, sizeof r);
	r.device = 2;
	r.ok = false;
	snprintf(r.name, sizeof r.name, "NVIDIA H100 80GB HBM3");
	snprintf(r.uuid, sizeof r.uuid, "GPU-1");
	snprintf(r.failed_step, sizeof r.failed_step, "alloc");
	snprintf(r.error, sizeof r.error, "CUDA_ERROR_OUT_OF_MEMORY");
	r.total_mem = 80ull << 30;
	r.n_steps = 2;
	snprintf(r.steps[0].name, sizeof r.steps[0].name, "cuInit");
	r.steps[0].elapsed_us = 1500;
	snprintf(r.steps[1].name, sizeof r.steps[1].name, "alloc");
	r.steps[1].elapsed_us = 20;

	gpucheck_to_pb(&r, &pb, steps, ptrs);
	len = rdzv__v1__gpu_result__get_packed_size(&pb);
	CHECK(len < sizeof buf);
	rdzv__v1__gpu_result__pack(&pb, buf);
	back = rdzv__v1__gpu_result__unpack(NULL, len, buf);
	CHECK(back != NULL);
	if (back != NULL) {
		CHECK_INT(back->device, 2);
		CHECK_INT(back->ok, 0);
		CHECK_STR(back->name, "NVIDIA H100 80GB HBM3");
		CHECK_STR(back->uuid, "GPU-1");
		CHECK_STR(back->failed_step, "alloc");
		CHECK_STR(back->error, "CUDA_ERROR_OUT_OF_MEMORY");
		CHECK_INT(back->total_mem, 80ull << 30);
		CHECK_INT(back->n_steps, 2);
		CHECK_STR(back->steps[0]->name, "cuInit");
		CHECK_INT(back->steps[0]->elapsed_us, 1500);
		CHECK_STR(back->steps[1]->name, "alloc");
		rdzv__v1__gpu_result__free_unpacked(back, NULL);
	}

	gpucheck_describe(&r, s, sizeof s);
	CHECK_STR(s, "device 2 (NVIDIA H100 80GB HBM3, GPU-1): alloc failed: "
	    "CUDA_ERROR_OUT_OF_MEMORY");
	r.ok = true;
	CHECK_INT(gpucheck_elapsed_us(&r), 1520);
	gpucheck_describe(&r, s, sizeof s);
	CHECK_STR(s, "device 2 (NVIDIA H100 80GB HBM3, GPU-1): passed in "
	    "1.5 ms");
	gpucheck_result_failed(&r, 7, "check died: Killed");
	CHECK(!r.ok);
	CHECK_INT(r.device, 7);
	CHECK_STR(r.failed_step, "check");
	CHECK_INT(r.n_steps, 0);
	gpucheck_describe(&r, s, sizeof s);
	CHECK_STR(s, "device 7: check failed: check died: Killed");
}

static void
test_policy(void)
{
	static const char *names[] = { "off", "warn", "exclude", "strict" };
	enum gpucheck_policy	p;
	int			i;

	for (i = 0; i < 4; i++) {
		CHECK_INT(gpucheck_policy_parse(names[i], &p), 0);
		CHECK_INT(p, i);
		CHECK_STR(gpucheck_policy_name(p), names[i]);
	}
	CHECK_INT(gpucheck_policy_parse("Strict", &p), -1);
	CHECK_INT(gpucheck_policy_parse("", &p), -1);
	CHECK_STR(gpucheck_policy_name((enum gpucheck_policy)9), "unknown");
}

/* A result crosses a pipe whole; a writer that dies halfway is -EPIPE. */
static void
test_pipe(void)
{
	struct gpucheck_result	a, b;
	int			p[2];

	CHECK(sizeof a < 4096);	/* PIPE_BUF: one atomic write */
	memset(&a, 0, sizeof a);
	gpucheck_result_failed(&a, 3, "timeout after 60 s");
	CHECK_INT(pipe(p), 0);
	CHECK_INT(gpucheck_result_write(p[1], &a), 0);
	CHECK_INT(gpucheck_result_read(p[0], &b), 0);
	CHECK_MEM(&a, &b, sizeof a);
	CHECK_INT(write(p[1], &a, 10), 10);
	close(p[1]);
	CHECK_INT(gpucheck_result_read(p[0], &b), -EPIPE);
	close(p[0]);
}

/* The real GPUs of this machine (tests/gpu/run.sh). Probes in children
 * come first: this process must not fork after it initialised CUDA. */
static int
test_real(void)
{
	struct gpucheck_opts	 opts = { GPUCHECK_STRICT, 120000, 0 };
	struct gpucheck_result	*rs, r;
	char			 why[512], line[512];
	int			 n, i;
	uint32_t		 k;

	CHECK_INT(gpucheck_run_count(60000, &n, why, sizeof why), 0);
	if (check_failures != 0) {
		fprintf(stderr, "no GPU to check: %s\n", why);
		return (check_done("test_gpucheck (real GPUs)"));
	}
	CHECK(n > 0);
	rs = calloc((size_t)(n > 0 ? n : 1), sizeof *rs);
	CHECK_INT(gpucheck_run(&opts, n, rs), n);
	for (i = 0; i < n; i++) {
		gpucheck_describe(&rs[i], line, sizeof line);
		printf("probe: %s\n", line);
		for (k = 0; k < rs[i].n_steps; k++)
			printf("  %-16s %10.3f ms\n", rs[i].steps[k].name,
			    (double)rs[i].steps[k].elapsed_us / 1000.0);
		CHECK(rs[i].ok);
		CHECK_INT(rs[i].n_steps, N_STEPS_KEPT);
		CHECK(rs[i].total_mem > 0);
		CHECK(rs[i].free_mem <= rs[i].total_mem);
		CHECK(rs[i].driver_version >= 9000);
		CHECK_CONTAINS(rs[i].uuid, "GPU-");
	}
	free(rs);
	/* In this process now, device 0, with the default buffer. */
	CHECK_INT(gpucheck_device(0, 0, &r), 0);
	gpucheck_describe(&r, line, sizeof line);
	printf("in-process: %s\n", line);
	for (k = 0; k < r.n_steps; k++) {
		printf("  %-16s %10.3f ms\n", r.steps[k].name,
		    (double)r.steps[k].elapsed_us / 1000.0);
		CHECK_STR(r.steps[k].name, all_steps[k]);
	}
	CHECK_INT(r.n_steps, N_STEPS);
	return (check_done("test_gpucheck (real GPUs)"));
}

int
main(void)
{
	const char	*lib = getenv("RDZV_LIBCUDA");
	char		 path[4200];

	setvbuf(stdout, NULL, _IOLBF, 0);
	test_policy();
	test_pipe();
	test_pb_describe();
	in_child("visible devices", case_visible_devices, NULL);
	if (getenv("RDZV_GPUCHECK_REAL") != NULL)
		return (test_real());
	if (lib == NULL || strstr(lib, "libcuda.so") == NULL) {
		printf("RDZV_LIBCUDA names no stand-in libcuda: skipped\n");
		return (77);
	}
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return (1);
	}

	in_child("pass", case_pass, "FAKECUDA_DEVICES=2", NULL);
	in_child("default size", case_default_size, NULL);
	test_fail_steps();
	in_child("one device fails", case_other_device_unaffected,
	    "FAKECUDA_DEVICES=4",
	    "FAKECUDA_FAIL=2:alloc:CUDA_ERROR_OUT_OF_MEMORY", NULL);
	in_child("mismatch", case_mismatch, "FAKECUDA_DEVICES=3",
	    "FAKECUDA_MISMATCH=0:5,1:1000", NULL);
	in_child("fail after", case_fail_after, "FAKECUDA_DEVICES=2",
	    "FAKECUDA_FAIL=0:alloc:CUDA_ERROR_OUT_OF_MEMORY:after=1", NULL);
	test_fail_after_state();
	in_child("no libcuda", case_no_libcuda,
	    "RDZV_LIBCUDA=/nonexistent/libcuda.so.1", NULL);
	/* libc is a shared library but no libcuda. */
	in_child("not libcuda", case_not_libcuda, "RDZV_LIBCUDA=libc.so.6",
	    NULL);
	if (access(STUB, R_OK) == 0) {
		snprintf(path, sizeof path, "RDZV_LIBCUDA=%s", STUB);
		in_child("toolkit stub", case_toolkit_stub, path, NULL);
	} else
		printf("no %s: the symbol table of a real libcuda is not "
		    "checked\n", STUB);
	in_child("no device", case_no_device, "FAKECUDA_DEVICES=0", NULL);
	in_child("visible", case_visible, "FAKECUDA_DEVICES=4",
	    "CUDA_VISIBLE_DEVICES=2,3",
	    "FAKECUDA_FAIL=2:alloc:CUDA_ERROR_OUT_OF_MEMORY", NULL);
	in_child("visible uuid", case_visible_uuid, "FAKECUDA_DEVICES=4",
	    "CUDA_VISIBLE_DEVICES=GPU-fa4ec0da-0000-4000-8000-000000000003,1,"
	    "GPU-nonesuch,2", NULL);
	in_child("probe", case_probe, "FAKECUDA_DEVICES=4",
	    "FAKECUDA_FAIL=2:alloc:CUDA_ERROR_OUT_OF_MEMORY", NULL);
	in_child("probe hang", case_probe_hang, "FAKECUDA_DEVICES=4",
	    "FAKECUDA_HANG=3", NULL);
	in_child("probe crash", case_probe_crash, "FAKECUDA_DEVICES=2",
	    "FAKECUDA_CRASH=1:alloc", NULL);
	in_child("probe list", case_probe_list, "FAKECUDA_DEVICES=4", NULL);
	in_child("worker", case_worker, "FAKECUDA_DEVICES=2",
	    "FAKECUDA_FAIL=0:kernel:CUDA_ERROR_ILLEGAL_ADDRESS", NULL);

	snprintf(path, sizeof path, "rm -rf '%s'", tmpdir);
	if (system(path) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return (check_done("test_gpucheck"));
}
