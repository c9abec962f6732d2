/*
 * What the GPU check's unit tests share (test_gpucheck.c,
 * test_gpucheck_kernels.c): each case in a child with its own FAKECUDA_*
 * settings, since the stand-in libcuda reads them once per process and a
 * process that initialised CUDA must not fork children that use it; and
 * the check of a failed result.
 */
#ifndef RDZV_TESTS_GPUCHECK_HARNESS_H
#define RDZV_TESTS_GPUCHECK_HARNESS_H

#include "gpucheck.h"

/*
 * Runs fn() in a child whose environment has the stand-in's settings
 * cleared (FAKECUDA_LOG is kept), then changed by the arguments
 * ("NAME=value" sets, "NAME" unsets; NULL-terminated). The child's failed
 * checks make it exit 1, which counts as one failure here.
 */
void	in_child(const char *what, void (*fn)(void), ...);
/* A failed result: |step| is the last step recorded and names |error|. */
void	check_failed(const struct gpucheck_result *r, const char *step,
	    const char *error);

#endif
