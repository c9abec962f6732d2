/*
 * The GPU check of SPEC §7: every step a training process's first
 * CUDA calls would take, each timed; a buffer written, rewritten on every
 * SM and verified element by element, all on the device (kernels of
 * gpucheck_kernel.ptx), and the PCIe path both ways with a slice through
 * pinned memory. A failure names the
 * step and the driver's name for the error, so that an operator reading
 * "device 2: alloc failed: CUDA_ERROR_OUT_OF_MEMORY" knows where to look.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "gpucheck.h"
#include "gpucheck_cuda.h"

/*
 * The PCIe path is checked with a slice of this size copied to the device
 * and back through pinned memory; the buffer itself is written and
 * verified on the device, by the kernels, every byte of it.
 */
#define COPY_BYTES	(4u << 20)
#define BLOCK_THREADS	256u
#define MAX_BLOCKS	4096u
/* The kernels' result area: u64 elements wrong, u64 the first of them,
 * then one u32 mark per SM (gpucheck_kernel.ptx). */
#define SM_MARKS	1024u
#define RES_WORDS	(4u + SM_MARKS)
#define RES_BYTES	(RES_WORDS * 4u)
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT	16

struct check {
	const struct cuda_api	*api;
	struct gpucheck_result	*r;
	gpucheck_progress_fn	*progress;
	void			*progress_arg;
	const char		*step;		/* the current step */
	uint64_t		 t0;		/* its start */
	CUdevice		 dev;
	CUcontext		 ctx;
	CUdeviceptr		 buf;		/* the buffer checked */
	CUdeviceptr		 res;		/* the kernels' result area */
	CUdeviceptr		 slice;		/* the PCIe slice's target */
	CUmodule		 mod;
	CUfunction		 fill_fn, check_fn, verify_fn;
	uint32_t		*host;		/* slice out, slice back, result */
	bool			 pinned;	/* host from cuMemAllocHost */
	uint64_t		 n;		/* elements of the buffer */
	uint64_t		 copy_n;	/* elements of the slice */
	uint32_t		 seed;		/* never 0: it marks SMs */
	int			 sm_count;
};

/* What the host writes into element i before the kernel runs. */
static uint32_t
pattern_in(uint64_t i, uint32_t seed)
{
	return ((uint32_t)i * 2246822519u + seed);
}

/* Starts step |name|: the progress hook hears of it first. */
static void
step_begin(struct check *c, const char *name)
{
	c->step = name;
	if (c->progress != NULL)
		c->progress(c->r, name, c->progress_arg);
	c->t0 = mono_us();
}

/*
 * Ends the current step: records its time, and when |why| is not NULL the
 * failure (the step's name and |why|). 0 when it passed, -1 when it failed.
 */
static int
step_done(struct check *c, const char *why)
{
	const char		*name = c->step;
	struct gpucheck_result	*r = c->r;
	struct gpucheck_step		*s;

	if (r->n_steps < GPUCHECK_STEPS_MAX) {
		s = &r->steps[r->n_steps++];
		snprintf(s->name, sizeof s->name, "%s", name);
		s->elapsed_us = mono_us() - c->t0;
	}
	if (why == NULL)
		return (0);
	r->ok = false;
	snprintf(r->failed_step, sizeof r->failed_step, "%s", name);
	/* A longer |why| is cut to the report's field on purpose. */
	if (snprintf(r->error, sizeof r->error, "%s", why) >=
	    (int)sizeof r->error)
		r->error[sizeof r->error - 2] = '~';
	return (-1);
}

static int
step_end(struct check *c, CUresult rc)
{
	char	why[sizeof c->r->error];

	if (rc == CUDA_SUCCESS)
		return (step_done(c, NULL));
	gpucheck_cuda_error_name(c->api, rc, why, sizeof why);
	return (step_done(c, why));
}

static void
format_uuid(const CUuuid *u, char *buf, size_t len)
{
	const unsigned char *b = u->bytes;

	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
	    b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
	    b[14], b[15]);
}

/* cuInit up to the device handle, and what the device says of itself. */
static int
check_device(struct check *c, int device)
{
	const struct cuda_api	*api = c->api;
	struct gpucheck_result	*r = c->r;
	CUuuid			 uuid;
	CUresult		 rc;
	size_t			 total;
	int			 count;
	char			 why[sizeof r->error];

	step_begin(c, "cuInit");
	if (step_end(c, api->Init(0)) != 0)
		return (-1);
	step_begin(c, "driver_version");
	if (step_end(c, api->DriverGetVersion(&r->driver_version)) != 0)
		return (-1);
	step_begin(c, "device_count");
	rc = api->DeviceGetCount(&count);
	if (rc == CUDA_SUCCESS && (device < 0 || device >= count)) {
		snprintf(why, sizeof why, "no device %d (%d found)", device,
		    count);
		return (step_done(c, why));
	}
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "device_get");
	if (step_end(c, api->DeviceGet(&c->dev, device)) != 0)
		return (-1);
	step_begin(c, "name");
	if (step_end(c, api->DeviceGetName(r->name,
	    (int)sizeof r->name, c->dev)) != 0)
		return (-1);
	r->name[sizeof r->name - 1] = '\0';
	step_begin(c, "uuid");
	if (step_end(c, api->DeviceGetUuid(&uuid, c->dev)) != 0)
		return (-1);
	format_uuid(&uuid, r->uuid, sizeof r->uuid);
	step_begin(c, "total_mem");
	if (step_end(c, api->DeviceTotalMem(&total, c->dev)) != 0)
		return (-1);
	r->total_mem = total;
	step_begin(c, "sm_count");
	if (step_end(c, api->DeviceGetAttribute(&c->sm_count,
	    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev)) != 0)
		return (-1);
	return (0);
}

/* The primary context (the one the CUDA runtime uses) and free memory. */
static int
check_context(struct check *c)
{
	const struct cuda_api	*api = c->api;
	CUresult		 rc;
	size_t			 free_mem, total;

	step_begin(c, "primary_ctx");
	rc = api->DevicePrimaryCtxRetain(&c->ctx, c->dev);
	if (rc != CUDA_SUCCESS)
		c->ctx = NULL;
	else
		rc = api->CtxSetCurrent(c->ctx);
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "free_mem");
	if (step_end(c, api->MemGetInfo(&free_mem, &total)) != 0)
		return (-1);
	c->r->free_mem = free_mem;
	return (0);
}

/* Launches kernel |fn| over the buffer and waits for it. */
static CUresult
launch(struct check *c, CUfunction fn, void **params)
{
	const struct cuda_api	*api = c->api;
	uint64_t		 blocks;
	CUresult		 rc;

	blocks = (c->n + BLOCK_THREADS - 1) / BLOCK_THREADS;
	if (blocks > MAX_BLOCKS)
		blocks = MAX_BLOCKS;
	rc = api->LaunchKernel(fn, (unsigned int)blocks, 1, 1, BLOCK_THREADS,
	    1, 1, 0, NULL, params, NULL);
	if (rc != CUDA_SUCCESS)
		return (rc);
	return (api->CtxSynchronize());
}

/* The buffer, the result area and the slice on the device; the host's
 * side of the slice and of the result pinned (pageable if it cannot be). */
static int
check_alloc(struct check *c, size_t bytes)
{
	const struct cuda_api	*api = c->api;
	size_t			 host_bytes;
	void			*p = NULL;
	CUresult		 rc;

	c->n = bytes / 4 > 0 ? bytes / 4 : 1;
	c->copy_n = c->n < COPY_BYTES / 4 ? c->n : COPY_BYTES / 4;
	host_bytes = c->copy_n * 8 + RES_BYTES;
	step_begin(c, "alloc");
	rc = api->MemAlloc(&c->buf, c->n * 4);
	if (rc == CUDA_SUCCESS)
		rc = api->MemAlloc(&c->res, RES_BYTES);
	if (rc == CUDA_SUCCESS)
		rc = api->MemAlloc(&c->slice, c->copy_n * 4);
	if (rc == CUDA_SUCCESS && api->MemAllocHost(&p, host_bytes) ==
	    CUDA_SUCCESS) {
		c->host = p;
		c->pinned = true;
	} else if (rc == CUDA_SUCCESS && (c->host = malloc(host_bytes)) ==
	    NULL)
		return (step_done(c, "out of host memory"));
	return (step_end(c, rc));
}

/*
 * The PCIe path both ways: a slice with its own pattern to the device
 * ("copy_in") and back, compared on the host ("copy_back").
 */
static int
check_copies(struct check *c)
{
	uint32_t	*out = c->host, *back = c->host + c->copy_n;
	uint32_t	 seed = c->seed ^ 0x5bd1e995u;
	uint64_t	 i, wrong = 0, first = 0;
	CUresult	 rc;
	char		 why[96];	/* cut to fit by step_done() */

	step_begin(c, "copy_in");
	for (i = 0; i < c->copy_n; i++)
		out[i] = pattern_in(i, seed);
	if (step_end(c, c->api->MemcpyHtoD(c->slice, out, c->copy_n * 4)) != 0)
		return (-1);
	step_begin(c, "copy_back");
	memset(back, 0, c->copy_n * 4);
	rc = c->api->MemcpyDtoH(back, c->slice, c->copy_n * 4);
	if (rc != CUDA_SUCCESS)
		return (step_end(c, rc));
	for (i = 0; i < c->copy_n; i++) {
		if (back[i] != pattern_in(i, seed) && wrong++ == 0)
			first = i;
	}
	if (wrong == 0)
		return (step_done(c, NULL));
	snprintf(why, sizeof why, "copy mismatch at element %llu (%llu wrong)",
	    (unsigned long long)first, (unsigned long long)wrong);
	return (step_done(c, why));
}

/*
 * The result area after rdzv_verify: no element wrong, and every SM ran
 * rdzv_check (left its mark).
 */
static int
check_verify(struct check *c)
{
	uint32_t	*res = c->host + 2 * c->copy_n;
	uint64_t	 wrong, first;
	void		*params[4] = { &c->buf, &c->n, &c->seed, &c->res };
	CUresult	 rc;
	char		 why[96];
	int		 seen = 0;
	uint32_t	 i;

	step_begin(c, "verify");
	rc = launch(c, c->verify_fn, params);
	if (rc == CUDA_SUCCESS)
		rc = c->api->MemcpyDtoH(res, c->res, RES_BYTES);
	if (rc != CUDA_SUCCESS)
		return (step_end(c, rc));
	memcpy(&wrong, res, sizeof wrong);
	memcpy(&first, res + 2, sizeof first);
	for (i = 0; i < SM_MARKS; i++)
		seen += res[4 + i] == c->seed;
	if (wrong != 0) {
		snprintf(why, sizeof why, "mismatch at element %llu "
		    "(%llu wrong)", (unsigned long long)first,
		    (unsigned long long)wrong);
		return (step_done(c, why));
	}
	if (seen < c->sm_count) {
		snprintf(why, sizeof why, "%d of %d SMs ran the kernel", seen,
		    c->sm_count);
		return (step_done(c, why));
	}
	return (step_done(c, NULL));
}

/*
 * Allocation; the buffer written by rdzv_fill, rewritten by rdzv_check on
 * every SM, the PCIe path both ways, the buffer verified by rdzv_verify;
 * then (unless the context is kept) everything freed.
 */
static int
check_memory(struct check *c, size_t bytes, unsigned flags)
{
	const struct cuda_api	*api = c->api;
	uint32_t		 res_words = RES_WORDS;
	void			*fill_params[5] = { &c->buf, &c->n, &c->seed,
				    &c->res, &res_words };
	void			*params[4] = { &c->buf, &c->n, &c->seed,
				    &c->res };
	CUresult		 rc;

	if (check_alloc(c, bytes) != 0)
		return (-1);
	step_begin(c, "module_load");
	rc = api->ModuleLoadData(&c->mod, gpucheck_kernel_ptx);
	if (rc != CUDA_SUCCESS)
		c->mod = NULL;
	if (rc == CUDA_SUCCESS)
		rc = api->ModuleGetFunction(&c->fill_fn, c->mod,
		    GPUCHECK_KERNEL_FILL);
	if (rc == CUDA_SUCCESS)
		rc = api->ModuleGetFunction(&c->check_fn, c->mod,
		    GPUCHECK_KERNEL);
	if (rc == CUDA_SUCCESS)
		rc = api->ModuleGetFunction(&c->verify_fn, c->mod,
		    GPUCHECK_KERNEL_VERIFY);
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "fill");
	if (step_end(c, launch(c, c->fill_fn, fill_params)) != 0)
		return (-1);
	step_begin(c, "kernel");
	if (step_end(c, launch(c, c->check_fn, params)) != 0)
		return (-1);
	if (check_copies(c) != 0 || check_verify(c) != 0)
		return (-1);
	if (flags & GPUCHECK_KEEP_CONTEXT)
		return (0);
	/* What was not freed when a call fails, cleanup() tries. */
	step_begin(c, "free");
	rc = api->MemFree(c->buf);
	c->buf = 0;
	if (rc == CUDA_SUCCESS) {
		rc = api->MemFree(c->res);
		c->res = 0;
	}
	if (rc == CUDA_SUCCESS) {
		rc = api->MemFree(c->slice);
		c->slice = 0;
	}
	if (rc == CUDA_SUCCESS && c->pinned) {
		rc = api->MemFreeHost(c->host);
		c->host = NULL;
	}
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "module_unload");
	rc = api->ModuleUnload(c->mod);
	c->mod = NULL;
	return (step_end(c, rc));
}

/*
 * What a failed step left behind, undone without timing: the process may
 * check another device next (the unit tests do).
 */
static void
cleanup(struct check *c)
{
	const struct cuda_api *api = c->api;

	if (c->buf != 0)
		api->MemFree(c->buf);
	if (c->res != 0)
		api->MemFree(c->res);
	if (c->slice != 0)
		api->MemFree(c->slice);
	if (c->host != NULL && c->pinned)
		api->MemFreeHost(c->host);
	else
		free(c->host);
	if (c->mod != NULL)
		api->ModuleUnload(c->mod);
	if (c->ctx != NULL) {
		api->CtxSetCurrent(NULL);
		api->DevicePrimaryCtxRelease(c->dev);
	}
}

int
gpucheck_device(int device, size_t bytes, struct gpucheck_result *out)
{
	return (gpucheck_device_flags(device, bytes, 0, out, NULL, NULL));
}

int
gpucheck_device_progress(int device, size_t bytes, struct gpucheck_result *out,
    gpucheck_progress_fn *progress, void *arg)
{
	return (gpucheck_device_flags(device, bytes, 0, out, progress, arg));
}

int
gpucheck_device_flags(int device, size_t bytes, unsigned flags,
    struct gpucheck_result *out, gpucheck_progress_fn *progress, void *arg)
{
	struct check	 c;
	char		 err[sizeof out->error + 64];
	CUresult	 rc;
	int		 ret = -1;

	memset(out, 0, sizeof *out);
	memset(&c, 0, sizeof c);
	out->device = device;
	out->ok = true;
	c.r = out;
	c.progress = progress;
	c.progress_arg = arg;
	c.seed = ((uint32_t)mono_us() ^ ((uint32_t)getpid() << 8) ^
	    (uint32_t)device) | 1u;
	if (bytes == 0)
		bytes = GPUCHECK_DEFAULT_BYTES;

	step_begin(&c, "libcuda");
	c.api = gpucheck_cuda_load(err, sizeof err);
	if (c.api == NULL)
		return (step_done(&c, err));
	step_done(&c, NULL);

	if (check_device(&c, device) != 0 || check_context(&c) != 0 ||
	    check_memory(&c, bytes, flags) != 0)
		goto out;
	ret = 0;
	/* A process about to exit or exec leaves the teardown to the
	 * driver: the context goes with the process. */
	if (flags & GPUCHECK_KEEP_CONTEXT)
		return (ret);
	step_begin(&c, "release");
	c.api->CtxSetCurrent(NULL);
	rc = c.api->DevicePrimaryCtxRelease(c.dev);
	c.ctx = NULL;
	if (step_end(&c, rc) != 0)
		ret = -1;
out:
	cleanup(&c);
	return (ret);
}

int
gpucheck_count(int *count, char *err, size_t errlen)
{
	const struct cuda_api	*api;
	CUresult		 rc;
	const char		*call = "cuInit";
	char			 name[64];

	*count = 0;
	if ((api = gpucheck_cuda_load(err, errlen)) == NULL)
		return (-1);
	/* A machine without GPUs is not an error: the node has none. */
	rc = api->Init(0);
	if (rc == CUDA_ERROR_NO_DEVICE)
		return (0);
	if (rc == CUDA_SUCCESS) {
		call = "cuDeviceGetCount";
		rc = api->DeviceGetCount(count);
	}
	if (rc == CUDA_SUCCESS)
		return (0);
	*count = 0;
	gpucheck_cuda_error_name(api, rc, name, sizeof name);
	snprintf(err, errlen, "libcuda: %s: %s", call, name);
	return (-1);
}

void
gpucheck_result_failed(struct gpucheck_result *r, int device, const char *why)
{
	memset(r, 0, sizeof *r);
	r->device = device;
	r->ok = false;
	snprintf(r->failed_step, sizeof r->failed_step, "check");
	snprintf(r->error, sizeof r->error, "%s", why);
}

/*
 * A result is smaller than PIPE_BUF, so one write() of it on a pipe is
 * atomic; the loops only matter for other kinds of descriptors.
 */
int
gpucheck_result_write(int fd, const struct gpucheck_result *r)
{
	const char	*p = (const char *)r;
	size_t		 off = 0;
	ssize_t		 n;

	while (off < sizeof *r) {
		n = write(fd, p + off, sizeof *r - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (-errno);
		off += (size_t)n;
	}
	return (0);
}

int
gpucheck_result_read(int fd, struct gpucheck_result *r)
{
	char	*p = (char *)r;
	size_t	 off = 0;
	ssize_t	 n;

	while (off < sizeof *r) {
		n = read(fd, p + off, sizeof *r - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (-errno);
		if (n == 0)
			return (-EPIPE);
		off += (size_t)n;
	}
	/* Whatever the writer sent, the strings end inside their arrays. */
	r->name[sizeof r->name - 1] = '\0';
	r->uuid[sizeof r->uuid - 1] = '\0';
	r->failed_step[sizeof r->failed_step - 1] = '\0';
	r->error[sizeof r->error - 1] = '\0';
	if (r->n_steps > GPUCHECK_STEPS_MAX)
		r->n_steps = GPUCHECK_STEPS_MAX;
	for (n = 0; n < (ssize_t)r->n_steps; n++)
		r->steps[n].name[sizeof r->steps[n].name - 1] = '\0';
	return (0);
}
