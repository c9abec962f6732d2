/*
 * The stand-in libcuda's kernels, which cuLaunchKernel (fakecuda.c) runs.
 */
#include <stdint.h>
#include <string.h>

#include "fakecuda.h"

/*
 * The kernels of lib/gpucheck/gpucheck_kernel.ptx, in C, on allocations of the
 * current context: rdzv_fill(buf, n, seed, res, res_words),
 * rdzv_check(buf, n, seed, res) and rdzv_verify(buf, n, seed, res) (the
 * patterns: the PTX's top comment). The stand-in's SMs 0..FAKECUDA_SMS-1
 * all run rdzv_check, and mark so, but a dead one (FAKECUDA_DEAD_SM):
 * the others then do its share, as a GPU's scheduler would.
 */
#define RES_WORDS	(4u + 1024u)

static uint32_t
pattern_in(uint64_t i, uint32_t seed)
{
	return ((uint32_t)i * 2246822519u + seed);
}

/* (buf, n, seed, res): every kernel's first four parameters. */
static int
kernel_args(void **params, uint32_t **buf, uint64_t *n, uint32_t *seed,
    uint32_t **res)
{
	unsigned long long	b, r;

	memcpy(&b, params[0], sizeof b);
	memcpy(n, params[1], sizeof *n);
	memcpy(seed, params[2], sizeof *seed);
	memcpy(&r, params[3], sizeof r);
	if (*n > SIZE_MAX / 4 ||
	    (*buf = fake_device_mem(b, (size_t)*n * 4)) == NULL ||
	    (*res = fake_device_mem(r, RES_WORDS * 4)) == NULL)
		return (CUDA_ERROR_ILLEGAL_ADDRESS);
	return (CUDA_SUCCESS);
}

static int
run_rdzv_fill(void **params)
{
	uint32_t	*e, *res, seed, words;
	uint64_t	 n, i;
	int		 rc;

	if ((rc = kernel_args(params, &e, &n, &seed, &res)) != 0)
		return (rc);
	memcpy(&words, params[4], sizeof words);
	if (words != RES_WORDS)
		return (CUDA_ERROR_ILLEGAL_ADDRESS);
	for (i = 0; i < n; i++)
		e[i] = pattern_in(i, seed);
	for (i = 0; i < words; i++)
		res[i] = i == 2 || i == 3 ? 0xffffffffu : 0;
	return (CUDA_SUCCESS);
}

static int
run_rdzv_check(void **params)
{
	const struct fault	*f, *dead;
	uint32_t		*e, *res, seed;
	uint64_t		 n, i;
	int			 rc;
	int			 sm;

	if ((rc = kernel_args(params, &e, &n, &seed, &res)) != 0)
		return (rc);
	for (i = 0; i < n; i++)
		e[i] = (e[i] ^ seed) * 0x9E3779B1u + (uint32_t)i;
	dead = fake_fault(FAULT_DEAD_SM);
	for (sm = 0; sm < fake_sms(); sm++)
		if (dead == NULL || (uint64_t)sm != dead->element)
			res[4 + sm] = seed;
	if ((f = fake_fault(FAULT_MISMATCH)) != NULL &&
	    n > 0)
		e[f->element % n] ^= 0x00010000u;
	return (CUDA_SUCCESS);
}

static int
run_rdzv_verify(void **params)
{
	uint32_t	*e, *res, seed, want;
	uint64_t	 n, i, wrong, first;
	int		 rc;

	if ((rc = kernel_args(params, &e, &n, &seed, &res)) != 0)
		return (rc);
	memcpy(&wrong, res, sizeof wrong);
	memcpy(&first, res + 2, sizeof first);
	for (i = 0; i < n; i++) {
		want = (pattern_in(i, seed) ^ seed) * 0x9E3779B1u +
		    (uint32_t)i;
		if (e[i] == want)
			continue;
		if (i < first)
			first = i;
		wrong++;
	}
	memcpy(res, &wrong, sizeof wrong);
	memcpy(res + 2, &first, sizeof first);
	return (CUDA_SUCCESS);
}

static const struct {
	const char	*name;
	const char	*step;
	int		(*run)(void **);
} kernels[] = {
	{ "rdzv_fill", "fill", run_rdzv_fill },
	{ "rdzv_check", "kernel", run_rdzv_check },
	{ "rdzv_verify", "verify", run_rdzv_verify },
};

const char *
fake_kernel_step(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
		if (strcmp(kernels[i].name, name) == 0)
			return (kernels[i].step);
	return (NULL);
}

int
fake_run_kernel(const char *name, void **params)
{
	size_t	i;

	for (i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
		if (strcmp(kernels[i].name, name) == 0)
			return (kernels[i].run(params));
	return (CUDA_ERROR_NOT_SUPPORTED);
}
