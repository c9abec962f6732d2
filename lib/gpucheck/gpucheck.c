/*
 * The GPU check of SPEC §7: every step a training process's first
 * CUDA calls would take, each timed, ending with a kernel that rewrites a
 * buffer which is then verified element by element. A failure names the
 * step and the driver's name for the error, so that an operator reading
 * "device 2: alloc failed: CUDA_ERROR_OUT_OF_MEMORY" knows where to look.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "gpucheck.h"
#include "gpucheck_cuda.h"

/*
 * The buffer goes to and from the device in chunks of this size, so the
 * host needs only one chunk of memory whatever the size of the buffer.
 */
#define CHUNK_BYTES	(4u << 20)
#define BLOCK_THREADS	256u
#define MAX_BLOCKS	4096u

struct check {
	const struct cuda_api	*api;
	struct gpucheck_result	*r;
	gpucheck_progress_fn		*progress;
	void			*progress_arg;
	const char		*step;		/* the current step */
	uint64_t		 t0;		/* its start */
	CUdevice		 dev;
	CUcontext		 ctx;
	CUdeviceptr		 buf;
	CUmodule		 mod;
	CUfunction		 fn;
	uint32_t		*host;		/* one chunk */
	uint64_t		 n;		/* elements of the buffer */
	uint32_t		 seed;
	uint64_t		 wrong;		/* elements found wrong */
	uint64_t		 first_wrong;
};

/* What the host writes into element i before the kernel runs. */
static uint32_t
pattern_in(uint64_t i, uint32_t seed)
{
	return ((uint32_t)i * 2246822519u + seed);
}

/* What element i must hold after the kernel (gpucheck_kernel.ptx). */
static uint32_t
pattern_out(uint64_t i, uint32_t seed)
{
	return ((pattern_in(i, seed) ^ seed) * GPUCHECK_MUL + (uint32_t)i);
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

/* Copies the input pattern to the device chunk by chunk. */
static CUresult
fill(struct check *c)
{
	uint64_t	 i, off, per = CHUNK_BYTES / 4, k;
	CUresult	 rc;

	for (off = 0; off < c->n; off += per) {
		k = c->n - off < per ? c->n - off : per;
		for (i = 0; i < k; i++)
			c->host[i] = pattern_in(off + i, c->seed);
		rc = c->api->MemcpyHtoD(c->buf + off * 4, c->host, k * 4);
		if (rc != CUDA_SUCCESS)
			return (rc);
	}
	return (CUDA_SUCCESS);
}

static CUresult
launch(struct check *c)
{
	const struct cuda_api	*api = c->api;
	uint64_t		 blocks;
	void			*params[3];
	CUresult		 rc;

	blocks = (c->n + BLOCK_THREADS - 1) / BLOCK_THREADS;
	if (blocks > MAX_BLOCKS)
		blocks = MAX_BLOCKS;
	params[0] = &c->buf;
	params[1] = &c->n;
	params[2] = &c->seed;
	rc = api->LaunchKernel(c->fn, (unsigned int)blocks, 1, 1,
	    BLOCK_THREADS, 1, 1, 0, NULL, params, NULL);
	if (rc != CUDA_SUCCESS)
		return (rc);
	return (api->CtxSynchronize());
}

/*
 * Copies the buffer back and verifies every element, chunk by chunk; the
 * two are timed apart as the steps "copy_back" and "verify".
 */
static int
copy_back_verify(struct check *c)
{
	uint64_t	 i, off, per = CHUNK_BYTES / 4, k, t, copy_us = 0;
	uint64_t	 verify_us = 0;
	CUresult	 rc = CUDA_SUCCESS;
	char		 why[96];	/* cut to fit by step_done() */

	step_begin(c, "copy_back");
	for (off = 0; off < c->n; off += per) {
		k = c->n - off < per ? c->n - off : per;
		t = mono_us();
		rc = c->api->MemcpyDtoH(c->host, c->buf + off * 4, k * 4);
		copy_us += mono_us() - t;
		if (rc != CUDA_SUCCESS)
			break;
		t = mono_us();
		for (i = 0; i < k; i++) {
			if (c->host[i] == pattern_out(off + i, c->seed))
				continue;
			if (c->wrong++ == 0)
				c->first_wrong = off + i;
		}
		verify_us += mono_us() - t;
	}
	c->t0 = mono_us() - copy_us;
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "verify");
	c->t0 = mono_us() - verify_us;
	if (c->wrong == 0)
		return (step_done(c, NULL));
	snprintf(why, sizeof why, "mismatch at element %llu (%llu wrong)",
	    (unsigned long long)c->first_wrong, (unsigned long long)c->wrong);
	return (step_done(c, why));
}

/* Allocation, fill, kernel, copy back and verify, free. */
static int
check_memory(struct check *c, size_t bytes)
{
	const struct cuda_api	*api = c->api;
	CUresult		 rc;

	c->n = bytes / 4 > 0 ? bytes / 4 : 1;
	c->host = malloc((c->n < CHUNK_BYTES / 4 ? c->n : CHUNK_BYTES / 4) * 4);
	if (c->host == NULL) {
		step_begin(c, "alloc");
		return (step_done(c, "out of host memory"));
	}
	step_begin(c, "alloc");
	rc = api->MemAlloc(&c->buf, c->n * 4);
	if (rc != CUDA_SUCCESS)
		c->buf = 0;
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "fill");
	if (step_end(c, fill(c)) != 0)
		return (-1);
	step_begin(c, "module_load");
	rc = api->ModuleLoadData(&c->mod, gpucheck_kernel_ptx);
	if (rc != CUDA_SUCCESS)
		c->mod = NULL;
	else
		rc = api->ModuleGetFunction(&c->fn, c->mod, GPUCHECK_KERNEL);
	if (step_end(c, rc) != 0)
		return (-1);
	step_begin(c, "kernel");
	if (step_end(c, launch(c)) != 0)
		return (-1);
	if (copy_back_verify(c) != 0)
		return (-1);
	step_begin(c, "free");
	rc = api->MemFree(c->buf);
	c->buf = 0;
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
	if (c->mod != NULL)
		api->ModuleUnload(c->mod);
	if (c->ctx != NULL) {
		api->CtxSetCurrent(NULL);
		api->DevicePrimaryCtxRelease(c->dev);
	}
	free(c->host);
}

int
gpucheck_device(int device, size_t bytes, struct gpucheck_result *out)
{
	return (gpucheck_device_progress(device, bytes, out, NULL, NULL));
}

int
gpucheck_device_progress(int device, size_t bytes, struct gpucheck_result *out,
    gpucheck_progress_fn *progress, void *arg)
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
	c.seed = (uint32_t)mono_us() ^ ((uint32_t)getpid() << 8) ^
	    (uint32_t)device;
	if (bytes == 0)
		bytes = GPUCHECK_DEFAULT_BYTES;

	step_begin(&c, "libcuda");
	c.api = gpucheck_cuda_load(err, sizeof err);
	if (c.api == NULL)
		return (step_done(&c, err));
	step_done(&c, NULL);

	if (check_device(&c, device) != 0 || check_context(&c) != 0 ||
	    check_memory(&c, bytes) != 0)
		goto out;
	step_begin(&c, "release");
	c.api->CtxSetCurrent(NULL);
	rc = c.api->DevicePrimaryCtxRelease(c.dev);
	c.ctx = NULL;
	if (step_end(&c, rc) != 0)
		goto out;
	ret = 0;
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
