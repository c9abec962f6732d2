/*
 * libcuda through dlopen(): the driver API without a build-time dependency
 * on CUDA (SPEC §7). The table is filled once per process and never
 * unloaded: libcuda keeps threads and state that do not survive dlclose().
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucheck_cuda.h"

#define LIBCUDA_DEFAULT	"libcuda.so.1"
/* The driver's PTX compiler, which libcuda loads from its own folder at
 * the first PTX it is given (module_load). */
#define PTXJIT_LIB	"libnvidia-ptxjitcompiler.so.1"

/*
 * Each entry point with the symbol to resolve and, where older drivers
 * lack it, an older symbol of the same signature to fall back on
 * (cuDeviceGetUuid_v2 arrived with CUDA 11.4; both take a CUuuid).
 */
static const struct {
	const char	*name;
	const char	*fallback;
	size_t		 off;
} cuda_syms[] = {
#define SYM(f, name, fallback) \
	{ name, fallback, offsetof(struct cuda_api, f) }
	SYM(GetErrorName, "cuGetErrorName", NULL),
	SYM(Init, "cuInit", NULL),
	SYM(DriverGetVersion, "cuDriverGetVersion", NULL),
	SYM(DeviceGetCount, "cuDeviceGetCount", NULL),
	SYM(DeviceGet, "cuDeviceGet", NULL),
	SYM(DeviceGetName, "cuDeviceGetName", NULL),
	SYM(DeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
	SYM(DeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
	SYM(DeviceGetAttribute, "cuDeviceGetAttribute", NULL),
	SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
	SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", NULL),
	SYM(CtxSetCurrent, "cuCtxSetCurrent", NULL),
	SYM(CtxSynchronize, "cuCtxSynchronize", NULL),
	SYM(MemGetInfo, "cuMemGetInfo_v2", NULL),
	SYM(MemAlloc, "cuMemAlloc_v2", NULL),
	SYM(MemFree, "cuMemFree_v2", NULL),
	SYM(MemAllocHost, "cuMemAllocHost_v2", NULL),
	SYM(MemFreeHost, "cuMemFreeHost", NULL),
	SYM(MemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
	SYM(MemcpyDtoH, "cuMemcpyDtoH_v2", NULL),
	SYM(ModuleLoadData, "cuModuleLoadData", NULL),
	SYM(ModuleUnload, "cuModuleUnload", NULL),
	SYM(ModuleGetFunction, "cuModuleGetFunction", NULL),
	SYM(LaunchKernel, "cuLaunchKernel", NULL),
#undef SYM
};

static struct cuda_api	 cuda;
static int		 cuda_loaded;

/*
 * On a machine that has not run CUDA since it started, the first
 * module_load reads the PTX compiler from disk (tens of MB) while cuInit
 * and the context take hundreds of milliseconds on the CPU: ask the
 * kernel to read it ahead now, so that it is in the page cache by then.
 * Advice only: nothing waits, and any failure is ignored.
 * RDZV_GPUCHECK_PREFETCH=0 turns it off (to measure it).
 */
static void
prefetch_ptxjit(void *sym)
{
	const char	*off = getenv("RDZV_GPUCHECK_PREFETCH");
	char		 path[PATH_MAX];
	const char	*slash;
	Dl_info		 info;
	int		 fd;

	if (off != NULL && strcmp(off, "0") == 0)
		return;
	if (dladdr(sym, &info) == 0 || info.dli_fname == NULL ||
	    (slash = strrchr(info.dli_fname, '/')) == NULL)
		return;
	if (snprintf(path, sizeof path, "%.*s/%s",
	    (int)(slash - info.dli_fname), info.dli_fname, PTXJIT_LIB) >=
	    (int)sizeof path)
		return;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
	close(fd);
}

const struct cuda_api *
gpucheck_cuda_load(char *err, size_t errlen)
{
	const char	*path;
	void		*h, *f;
	size_t		 i;

	if (cuda_loaded)
		return (&cuda);
	path = getenv("RDZV_LIBCUDA");
	if (path == NULL || *path == '\0')
		path = LIBCUDA_DEFAULT;

	/*
	 * RTLD_LOCAL keeps libcuda's symbols out of the global namespace, so
	 * a worker's own CUDA libraries load theirs as usual.
	 */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(err, errlen, "cannot load libcuda: %s", dlerror());
		return (NULL);
	}
	for (i = 0; i < sizeof cuda_syms / sizeof cuda_syms[0]; i++) {
		f = dlsym(h, cuda_syms[i].name);
		if (f == NULL && cuda_syms[i].fallback != NULL)
			f = dlsym(h, cuda_syms[i].fallback);
		if (f == NULL) {
			snprintf(err, errlen, "libcuda %s has no %s: a driver "
			    "too old or not libcuda", path, cuda_syms[i].name);
			dlclose(h);
			return (NULL);
		}
		memcpy((char *)&cuda + cuda_syms[i].off, &f, sizeof f);
	}
	cuda_loaded = 1;
	prefetch_ptxjit((void *)cuda.Init);
	return (&cuda);
}

void
gpucheck_cuda_error_name(const struct cuda_api *api, CUresult rc, char *buf,
    size_t len)
{
	const char	*name = NULL;

	/*
	 * The toolkit's stub libcuda (lib64/stubs, for linking only) answers
	 * every call with this code, cuGetErrorName included: name it, as
	 * it is what a node whose loader path finds the stub first shows.
	 */
	if (rc == CUDA_ERROR_STUB_LIBRARY)
		snprintf(buf, len, "CUDA_ERROR_STUB_LIBRARY");
	else if (api->GetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
		snprintf(buf, len, "CUresult %d", rc);
	else
		snprintf(buf, len, "%s", name);
}
