/*
 * A deterministic generator (xorshift64*) for the unit tests that cut or
 * pick values at random: the same seed in every run, so a failure repeats.
 */
#ifndef RDZV_TESTS_RNG_H
#define RDZV_TESTS_RNG_H

#include <stdint.h>

extern uint64_t rng_state;

uint64_t	rng(void);

#endif
