/*
 * A deterministic generator (xorshift64*) for the unit tests that cut or
 * pick values at random: the same seed in every run, so a failure repeats.
 */
#ifndef RDZV_TESTS_RNG_H
#define RDZV_TESTS_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static inline uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

#endif
