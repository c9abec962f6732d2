/*
 * Prints the PTX embedded in rdzv's library (gpucheck_kernel.c in the build folder, made
 * from lib/gpucheck/gpucheck_kernel.ptx at build time), so test_ptxas.sh assembles
 * exactly what the check hands to the driver.
 */
#include <stdio.h>

#include "gpucheck_cuda.h"

int
main(void)
{
	return (fputs(gpucheck_kernel_ptx, stdout) == EOF ? 1 : 0);
}
