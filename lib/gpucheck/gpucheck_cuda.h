/*
 * The part of the CUDA driver API that the GPU check uses, declared here so
 * that rdzv builds without CUDA, and resolved from libcuda with dlopen() and
 * dlsym() at run time. Internal to lib/gpucheck*.c.
 *
 * The symbol names are the ones libcuda exports for the current ABI: cuda.h
 * maps cuMemAlloc to cuMemAlloc_v2 and so on with macros, and the unsuffixed
 * symbols are older ABIs with other argument types (32-bit sizes and device
 * pointers), so the names below must be the suffixed ones where they exist.
 */
#ifndef RDZV_GPUCHECK_CUDA_H
#define RDZV_GPUCHECK_CUDA_H

#include <stddef.h>

typedef int			 CUresult;	/* 0 is CUDA_SUCCESS */
typedef int			 CUdevice;
typedef struct CUctx_st		*CUcontext;
typedef struct CUmod_st		*CUmodule;
typedef struct CUfunc_st	*CUfunction;
typedef struct CUstream_st	*CUstream;
typedef unsigned long long	 CUdeviceptr;	/* CUdeviceptr_v2 */
typedef struct {
	unsigned char		 bytes[16];
} CUuuid;

#define CUDA_SUCCESS			0
#define CUDA_ERROR_STUB_LIBRARY		34
#define CUDA_ERROR_NO_DEVICE		100

struct cuda_api {
	CUresult	(*GetErrorName)(CUresult, const char **);
	CUresult	(*Init)(unsigned int);
	CUresult	(*DriverGetVersion)(int *);
	CUresult	(*DeviceGetCount)(int *);
	CUresult	(*DeviceGet)(CUdevice *, int);
	CUresult	(*DeviceGetName)(char *, int, CUdevice);
	CUresult	(*DeviceGetUuid)(CUuuid *, CUdevice);
	CUresult	(*DeviceTotalMem)(size_t *, CUdevice);
	CUresult	(*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult	(*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult	(*DevicePrimaryCtxRelease)(CUdevice);
	CUresult	(*CtxSetCurrent)(CUcontext);
	CUresult	(*CtxSynchronize)(void);
	CUresult	(*MemGetInfo)(size_t *, size_t *);
	CUresult	(*MemAlloc)(CUdeviceptr *, size_t);
	CUresult	(*MemFree)(CUdeviceptr);
	CUresult	(*MemAllocHost)(void **, size_t);
	CUresult	(*MemFreeHost)(void *);
	CUresult	(*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult	(*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult	(*ModuleLoadData)(CUmodule *, const void *);
	CUresult	(*ModuleUnload)(CUmodule);
	CUresult	(*ModuleGetFunction)(CUfunction *, CUmodule,
			    const char *);
	CUresult	(*LaunchKernel)(CUfunction, unsigned int, unsigned int,
			    unsigned int, unsigned int, unsigned int,
			    unsigned int, unsigned int, CUstream, void **,
			    void **);
};

/* gpucheck_cuda.c */

/*
 * Loads libcuda once per process ($RDZV_LIBCUDA, else "libcuda.so.1") and
 * resolves every entry point. The table, or NULL with a message naming
 * libcuda, the file and the cause in |err|. A failed load is retried on the
 * next call.
 */
const struct cuda_api *gpucheck_cuda_load(char *err, size_t errlen);

/* "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 1234" when the driver does not
 * know the code. */
void	gpucheck_cuda_error_name(const struct cuda_api *, CUresult, char *,
	    size_t);

/* gpucheck_kernel.c, generated from gpucheck_kernel.ptx */
extern const char gpucheck_kernel_ptx[];

/* The kernels' names in the PTX (its top comment says what each does). */
#define GPUCHECK_KERNEL_FILL	"rdzv_fill"
#define GPUCHECK_KERNEL		"rdzv_check"
#define GPUCHECK_KERNEL_VERIFY	"rdzv_verify"

#endif
