/*
 * A stand-in libcuda for the test suite (SPEC §7): the driver API entry
 * points that lib/gpucheck/gpucheck.c resolves, under the same exported names
 * (cuMemAlloc_v2 and so on; the unsuffixed old-ABI names of versioned
 * functions are deliberately absent, so resolving one fails the tests),
 * with devices and faults set by environment variables (README.md).
 *
 * It cannot run PTX, so "device memory" is host memory and a launch of the
 * check's kernel applies the kernel's transform in C; the check then
 * verifies real data, and FAKECUDA_MISMATCH leaves one element wrong.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

#define EXPORT	__attribute__((visibility("default")))

typedef int	CUresult;
typedef int	CUdevice;
typedef unsigned long long CUdeviceptr;

struct alloc {
	unsigned char	*mem;
	size_t		 size;
	struct alloc	*next;
};

struct ctx {
	int		 phys;		/* physical device */
	unsigned	 refs;
	struct alloc	*allocs;
	uint64_t	 used;
};

struct function {
	char		 name[64];
};

/* Functions live as long as their module, as in the driver, and the
 * modules loaded are on a list until unloaded. */
struct module {
	char		*ptx;
	struct function	 fns[8];
	int		 n_fns;
	struct module	*next;
};
static struct module	*modules;

static struct fake_config	 cfg;
static int			 inited;
static struct ctx		 ctxs[FAKE_DEVICES_MAX];
static struct ctx		*current;
/* Checks begun on each physical device by this process (primary_ctx). */
static unsigned			 checks[FAKE_DEVICES_MAX];
static int			 in_check[FAKE_DEVICES_MAX];

/*
 * FAKECUDA_LOG: one line per call that matters to a test, "PID FUNCTION
 * DEVICE RESULT", so that a test can tell which process touched which
 * device. RESULT is the CUresult's name, HANG or CRASH.
 */
static void
logf_call(const char *fn, int phys, CUresult rc)
{
	const char	*what;
	char		 line[256];
	int		 fd, n;

	if (cfg.log_path == NULL)
		return;
	what = rc == -1 ? "HANG" : rc == -2 ? "CRASH" : fake_error_name(rc);
	n = snprintf(line, sizeof line, "%ld %s %d %s\n", (long)getpid(), fn,
	    phys, what != NULL ? what : "CUDA_ERROR_UNKNOWN");
	fd = open(cfg.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0644);
	if (fd == -1)
		return;
	(void)!write(fd, line, (size_t)n);
	close(fd);
}

/*
 * Checks of physical device |d| before the current one: those of this
 * process, or with FAKECUDA_STATE those of every process (one byte per
 * check in a file per device).
 */
static unsigned
checks_before(int d)
{
	char		path[4096];
	struct stat	st;
	unsigned	n = checks[d];

	if (cfg.state_dir != NULL) {
		snprintf(path, sizeof path, "%s/device%d", cfg.state_dir, d);
		n = stat(path, &st) == 0 ? (unsigned)st.st_size : 0;
	}
	return (n > 0 && in_check[d] ? n - 1 : n);
}

static void
check_begun(int d)
{
	char	path[4096];
	int	fd;

	checks[d]++;
	in_check[d] = 1;
	if (cfg.state_dir == NULL)
		return;
	snprintf(path, sizeof path, "%s/device%d", cfg.state_dir, d);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd != -1) {
		(void)!write(fd, "c", 1);
		close(fd);
	}
}

static const struct fault *
fault_at(enum fault_kind kind, int phys, const char *step)
{
	const struct fault	*f;
	int			 i;

	for (i = 0; i < cfg.n_faults; i++) {
		f = &cfg.faults[i];
		if (f->kind != kind || strcmp(f->step, step) != 0)
			continue;
		if (f->device != -1 && f->device != phys)
			continue;
		if (phys >= 0 && checks_before(phys) < f->after)
			continue;
		return (f);
	}
	return (NULL);
}

/*
 * What every entry point does first: hang or fail when a fault says so
 * for this step on this device (-1: the call names no device, and only
 * faults for every device apply).
 */
static CUresult
enter(const char *fn, const char *step, int phys)
{
	const struct fault	*f;
	CUresult		 rc = CUDA_SUCCESS;

	if (fault_at(FAULT_HANG, phys, step) != NULL) {
		logf_call(fn, phys, -1);
		for (;;)
			pause();
	}
	if (fault_at(FAULT_CRASH, phys, step) != NULL) {
		logf_call(fn, phys, -2);
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV);
	}
	if ((f = fault_at(FAULT_FAIL, phys, step)) != NULL)
		rc = f->error;
	if (rc != CUDA_SUCCESS)
		logf_call(fn, phys, rc);
	return (rc);
}

static CUresult
done(const char *fn, int phys, CUresult rc)
{
	logf_call(fn, phys, rc);
	return (rc);
}

static int
phys_of(CUdevice dev)
{
	if (dev < 0 || dev >= cfg.n_visible)
		return (-1);
	return (cfg.visible[dev]);
}

static struct alloc *
find_alloc(CUdeviceptr p, size_t len)
{
	struct alloc	*a;
	uintptr_t	 base;

	if (current == NULL)
		return (NULL);
	for (a = current->allocs; a != NULL; a = a->next) {
		base = (uintptr_t)a->mem;
		if (p >= base && p - base <= a->size &&
		    len <= a->size - (p - base))
			return (a);
	}
	return (NULL);
}

EXPORT CUresult
cuGetErrorName(CUresult rc, const char **name)
{
	if (name == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	*name = fake_error_name(rc);
	return (*name == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

EXPORT CUresult
cuInit(unsigned int flags)
{
	CUresult	rc;

	if (!inited) {
		if (fake_config_read(&cfg) != 0)
			return (CUDA_ERROR_INVALID_VALUE);
		inited = 1;
	}
	if (flags != 0)
		return (done("cuInit", -1, CUDA_ERROR_INVALID_VALUE));
	if ((rc = enter("cuInit", "cuInit", -1)) != CUDA_SUCCESS)
		return (rc);
	if (cfg.n_visible == 0)
		return (done("cuInit", -1, CUDA_ERROR_NO_DEVICE));
	return (done("cuInit", -1, CUDA_SUCCESS));
}

EXPORT CUresult
cuDriverGetVersion(int *v)
{
	CUresult	rc;

	if (v == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	/* The real one answers before cuInit too. */
	if (!inited) {
		*v = 12080;
		return (CUDA_SUCCESS);
	}
	if ((rc = enter("cuDriverGetVersion", "driver_version", -1)) != 0)
		return (rc);
	*v = cfg.driver_version;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGetCount(int *n)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (n == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuDeviceGetCount", "device_count", -1)) != 0)
		return (rc);
	*n = cfg.n_visible;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGet(CUdevice *dev, int ordinal)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (dev == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if (phys_of(ordinal) < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if ((rc = enter("cuDeviceGet", "device_get", phys_of(ordinal))) != 0)
		return (rc);
	*dev = ordinal;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys_of(dev) < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if (name == NULL || len <= 0)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuDeviceGetName", "name", phys_of(dev))) != 0)
		return (rc);
	snprintf(name, (size_t)len, "FakeCUDA GPU %d", phys_of(dev));
	return (CUDA_SUCCESS);
}

static CUresult
get_uuid(const char *fn, unsigned char *out, CUdevice dev)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys_of(dev) < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if (out == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter(fn, "uuid", phys_of(dev))) != 0)
		return (rc);
	fake_uuid(phys_of(dev), out);
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuDeviceGetUuid(unsigned char *out, CUdevice dev)
{
	return (get_uuid("cuDeviceGetUuid", out, dev));
}

EXPORT CUresult
cuDeviceGetUuid_v2(unsigned char *out, CUdevice dev)
{
	return (get_uuid("cuDeviceGetUuid_v2", out, dev));
}

EXPORT CUresult
cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys_of(dev) < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if (bytes == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuDeviceTotalMem_v2", "total_mem",
	    phys_of(dev))) != 0)
		return (rc);
	*bytes = cfg.mem;
	return (CUDA_SUCCESS);
}

/* Only the SM count (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16). */
EXPORT CUresult
cuDeviceGetAttribute(int *v, int attrib, CUdevice dev)
{
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys_of(dev) < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if (v == NULL || attrib != 16)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuDeviceGetAttribute", "sm_count",
	    phys_of(dev))) != 0)
		return (rc);
	*v = cfg.sms;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuDevicePrimaryCtxRetain(struct ctx **out, CUdevice dev)
{
	int		phys = phys_of(dev);
	CUresult	rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	if (out == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	check_begun(phys);
	if ((rc = enter("cuDevicePrimaryCtxRetain", "primary_ctx", phys)) != 0)
		return (rc);
	ctxs[phys].phys = phys;
	ctxs[phys].refs++;
	*out = &ctxs[phys];
	return (done("cuDevicePrimaryCtxRetain", phys, CUDA_SUCCESS));
}

EXPORT CUresult
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	int		 phys = phys_of(dev);
	struct ctx	*c;
	struct alloc	*a;
	CUresult	 rc;

	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (phys < 0)
		return (CUDA_ERROR_INVALID_DEVICE);
	c = &ctxs[phys];
	if (c->refs == 0)
		return (CUDA_ERROR_INVALID_CONTEXT);
	rc = enter("cuDevicePrimaryCtxRelease_v2", "release", phys);
	/* The context goes whatever the answer, as the check ends anyway. */
	if (--c->refs == 0) {
		while ((a = c->allocs) != NULL) {
			c->allocs = a->next;
			free(a->mem);
			free(a);
		}
		c->used = 0;
		if (current == c)
			current = NULL;
	}
	in_check[phys] = 0;
	return (rc != CUDA_SUCCESS ? rc :
	    done("cuDevicePrimaryCtxRelease_v2", phys, CUDA_SUCCESS));
}

EXPORT CUresult
cuCtxSetCurrent(struct ctx *c)
{
	if (!inited)
		return (CUDA_ERROR_NOT_INITIALIZED);
	if (c != NULL && (c < ctxs || c >= ctxs + FAKE_DEVICES_MAX ||
	    c->refs == 0))
		return (CUDA_ERROR_INVALID_CONTEXT);
	current = c;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuMemGetInfo_v2(size_t *free_mem, size_t *total)
{
	CUresult	rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (free_mem == NULL || total == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemGetInfo_v2", "free_mem", current->phys)) != 0)
		return (rc);
	*total = cfg.mem;
	*free_mem = cfg.mem - current->used;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	struct alloc	*a;
	CUresult	 rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (p == NULL || size == 0)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemAlloc_v2", "alloc", current->phys)) != 0)
		return (rc);
	if (size > cfg.mem - current->used)
		return (done("cuMemAlloc_v2", current->phys,
		    CUDA_ERROR_OUT_OF_MEMORY));
	if ((a = calloc(1, sizeof *a)) == NULL ||
	    (a->mem = malloc(size)) == NULL) {
		free(a);
		return (done("cuMemAlloc_v2", current->phys,
		    CUDA_ERROR_OUT_OF_MEMORY));
	}
	a->size = size;
	a->next = current->allocs;
	current->allocs = a;
	current->used += size;
	*p = (CUdeviceptr)(uintptr_t)a->mem;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuMemFree_v2(CUdeviceptr p)
{
	struct alloc	**ap, *a;
	CUresult	  rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	for (ap = &current->allocs; (a = *ap) != NULL; ap = &a->next)
		if ((uintptr_t)a->mem == p)
			break;
	if (a == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemFree_v2", "free", current->phys)) != 0)
		return (rc);
	*ap = a->next;
	current->used -= a->size;
	free(a->mem);
	free(a);
	return (CUDA_SUCCESS);
}

/*
 * Pinned host memory: host memory as any other here, but kept on a list
 * as the driver keeps it (a check that leaves it to the teardown at exit
 * has not leaked it).
 */
struct host_alloc {
	struct host_alloc	*next;
	max_align_t		 mem[];
};
static struct host_alloc	*host_allocs;

EXPORT CUresult
cuMemAllocHost_v2(void **p, size_t size)
{
	struct host_alloc	*h;
	CUresult		 rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (p == NULL || size == 0)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemAllocHost_v2", "alloc", current->phys)) != 0)
		return (rc);
	if ((h = malloc(sizeof *h + size)) == NULL)
		return (done("cuMemAllocHost_v2", current->phys,
		    CUDA_ERROR_OUT_OF_MEMORY));
	h->next = host_allocs;
	host_allocs = h;
	*p = h->mem;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuMemFreeHost(void *p)
{
	struct host_alloc	**hp, *h;
	CUresult		  rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	for (hp = &host_allocs; (h = *hp) != NULL; hp = &h->next)
		if ((void *)h->mem == p)
			break;
	if (h == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	/* The memory goes whatever the answer (nothing else could free it). */
	rc = enter("cuMemFreeHost", "free", current->phys);
	*hp = h->next;
	free(h);
	return (rc);
}

EXPORT CUresult
cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len)
{
	CUresult	rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (src == NULL || find_alloc(dst, len) == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemcpyHtoD_v2", "copy_in", current->phys)) != 0)
		return (rc);
	memcpy((void *)(uintptr_t)dst, src, len);
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len)
{
	CUresult	rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (dst == NULL || find_alloc(src, len) == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuMemcpyDtoH_v2", "copy_back", current->phys)) != 0)
		return (rc);
	memcpy(dst, (const void *)(uintptr_t)src, len);
	return (CUDA_SUCCESS);
}

/*
 * PTX as the driver's JIT first sees it: ASCII text with a version and a
 * target. Anything else is an invalid image.
 */
EXPORT CUresult
cuModuleLoadData(struct module **out, const void *image)
{
	const char	*ptx = image, *p;
	struct module	*m;
	CUresult	 rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (out == NULL || ptx == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((rc = enter("cuModuleLoadData", "module_load",
	    current->phys)) != 0)
		return (rc);
	if (strstr(ptx, ".version") == NULL || strstr(ptx, ".target") ==
	    NULL)
		return (done("cuModuleLoadData", current->phys,
		    CUDA_ERROR_INVALID_IMAGE));
	for (p = ptx; *p != '\0'; p++)
		if ((unsigned char)*p > 0x7e)
			return (done("cuModuleLoadData", current->phys,
			    CUDA_ERROR_INVALID_PTX));
	if ((m = calloc(1, sizeof *m)) == NULL || (m->ptx = strdup(ptx)) ==
	    NULL) {
		free(m);
		return (CUDA_ERROR_OUT_OF_MEMORY);
	}
	m->next = modules;
	modules = m;
	*out = m;
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuModuleUnload(struct module *m)
{
	struct module	**mp;
	CUresult	  rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (m == NULL)
		return (CUDA_ERROR_INVALID_HANDLE);
	for (mp = &modules; *mp != NULL && *mp != m; mp = &(*mp)->next)
		;
	if (*mp == NULL)
		return (CUDA_ERROR_INVALID_HANDLE);
	rc = enter("cuModuleUnload", "module_unload", current->phys);
	*mp = m->next;
	free(m->ptx);
	free(m);
	return (rc);
}

/* A kernel exists when the PTX declares ".entry NAME(". */
EXPORT CUresult
cuModuleGetFunction(struct function **out, struct module *m,
    const char *name)
{
	struct function	*f;
	char		 decl[80];
	int		 i;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (out == NULL || m == NULL || name == NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	snprintf(decl, sizeof decl, ".entry %s(", name);
	if (strstr(m->ptx, decl) == NULL)
		return (done("cuModuleGetFunction", current->phys,
		    CUDA_ERROR_NOT_FOUND));
	for (i = 0; i < m->n_fns; i++) {
		if (strcmp(m->fns[i].name, name) == 0) {
			*out = &m->fns[i];
			return (CUDA_SUCCESS);
		}
	}
	if (m->n_fns == (int)(sizeof m->fns / sizeof m->fns[0]))
		return (CUDA_ERROR_OUT_OF_MEMORY);
	f = &m->fns[m->n_fns++];
	snprintf(f->name, sizeof f->name, "%s", name);
	*out = f;
	return (CUDA_SUCCESS);
}

/* The kernels' stand-ins (fakecuda_kernels.c) reach the current
 * context's memory, its device's faults and the SM count through these. */
void *
fake_device_mem(unsigned long long p, size_t len)
{
	return (find_alloc(p, len) != NULL ? (void *)(uintptr_t)p : NULL);
}

const struct fault *
fake_fault(enum fault_kind kind)
{
	return (fault_at(kind, current->phys, "kernel"));
}

int
fake_sms(void)
{
	return (cfg.sms);
}

/* Launch errors of the real driver come back from the synchronize; so
 * do the stand-in's: this one is set by a launch and taken by it, with
 * the step of the check that the launched kernel belongs to (what a
 * fault of cuCtxSynchronize names). */
static CUresult		 pending;
static const char	*pending_step = "kernel";

EXPORT CUresult
cuLaunchKernel(struct function *f, unsigned int gx, unsigned int gy,
    unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
    unsigned int shmem, void *stream, void **params, void **extra)
{
	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if (f == NULL)
		return (CUDA_ERROR_INVALID_HANDLE);
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
	    (uint64_t)bx * by * bz > 1024 || gx > 0x7fffffffu || gy > 65535 ||
	    gz > 65535 || params == NULL || extra != NULL)
		return (CUDA_ERROR_INVALID_VALUE);
	if ((pending_step = fake_kernel_step(f->name)) == NULL) {
		pending_step = "kernel";
		return (CUDA_ERROR_NOT_SUPPORTED);
	}
	pending = fake_run_kernel(f->name, params);
	return (CUDA_SUCCESS);
}

EXPORT CUresult
cuCtxSynchronize(void)
{
	CUresult	rc;

	if (current == NULL)
		return (CUDA_ERROR_INVALID_CONTEXT);
	if ((rc = enter("cuCtxSynchronize", pending_step,
	    current->phys)) != 0)
		return (rc);
	rc = pending;
	pending = CUDA_SUCCESS;
	return (done("cuCtxSynchronize", current->phys, rc));
}
