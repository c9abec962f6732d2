/*
 * The stand-in libcuda's configuration (tests/fakecuda/README.md): its
 * devices and their faults, read once from the environment at cuInit.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_DEVICES_MAX	64
#define FAKE_FAULTS_MAX		32

#define CUDA_SUCCESS				0
#define CUDA_ERROR_INVALID_VALUE		1
#define CUDA_ERROR_OUT_OF_MEMORY		2
#define CUDA_ERROR_NOT_INITIALIZED		3
#define CUDA_ERROR_NO_DEVICE			100
#define CUDA_ERROR_INVALID_DEVICE		101
#define CUDA_ERROR_INVALID_IMAGE		200
#define CUDA_ERROR_INVALID_CONTEXT		201
#define CUDA_ERROR_INVALID_PTX			218
#define CUDA_ERROR_INVALID_HANDLE		400
#define CUDA_ERROR_NOT_FOUND			500
#define CUDA_ERROR_ILLEGAL_ADDRESS		700
#define CUDA_ERROR_NOT_SUPPORTED		801

enum fault_kind {
	FAULT_FAIL,		/* a step returns an error */
	FAULT_MISMATCH,		/* the kernel leaves one element wrong */
	FAULT_DEAD_SM,		/* one SM runs no block of the kernel */
	FAULT_HANG,		/* a step never returns */
	FAULT_CRASH,		/* a step kills the process (SIGSEGV) */
};

struct fault {
	enum fault_kind	 kind;
	int		 device;	/* physical; -1: every device */
	char		 step[24];	/* the check's step name */
	int		 error;		/* FAULT_FAIL: the CUresult */
	uint64_t	 element;	/* FAULT_MISMATCH: which one;
					   FAULT_DEAD_SM: the SM */
	unsigned	 after;		/* only after this many checks */
};

struct fake_config {
	int		 devices;	/* physical devices */
	int		 visible[FAKE_DEVICES_MAX]; /* ordinal -> physical */
	int		 n_visible;
	int		 driver_version;
	uint64_t	 mem;		/* per device, bytes */
	int		 sms;		/* SMs per device */
	const char	*state_dir;	/* check counts across processes */
	const char	*log_path;
	struct fault	 faults[FAKE_FAULTS_MAX];
	int		 n_faults;
};

/* fakecuda_env.c */

/* Reads the FAKECUDA_* variables and CUDA_VISIBLE_DEVICES. 0, or -1 with
 * a message on stderr (a test that sets a bad value must notice). */
int	fake_config_read(struct fake_config *);

/* CUresult <-> "CUDA_ERROR_..." for the codes the stand-in knows. */
const char *fake_error_name(int);
int	fake_error_parse(const char *, int *);

/* The UUID bytes of physical device |d|. */
void	fake_uuid(int d, unsigned char out[16]);

/* fakecuda.c, for the kernels */

/* |p| as a pointer when [p, p + len) is inside an allocation of the
 * current context, else NULL. */
void	*fake_device_mem(unsigned long long p, size_t len);
/* The fault of |kind| for the current device's kernel, or NULL. */
const struct fault *fake_fault(enum fault_kind kind);
int	 fake_sms(void);

/* fakecuda_kernels.c */

/* The check's step a kernel belongs to ("fill", "kernel", "verify"), or
 * NULL for a kernel the stand-in does not know. */
const char *fake_kernel_step(const char *name);
/* Runs kernel |name| with the launch's parameters: a CUresult. */
int	fake_run_kernel(const char *name, void **params);

#endif
