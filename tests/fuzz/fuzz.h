/*
 * What every fuzz target has: the entry point libFuzzer (or fuzz_main.c,
 * which replays a corpus) calls, and the assertion that turns a broken
 * invariant into a crash libFuzzer reports, naming where.
 */
#ifndef RDZV_FUZZ_H
#define RDZV_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz: %s:%d: %s\n", __FILE__,		\
		    __LINE__, #cond);					\
		abort();						\
	}								\
} while (0)

/* xorshift32, for cutting the input into the chunks a peer writes: the
 * chunking is a pure function of the input (and |*state| its seed). */
static inline uint32_t
fuzz_rand(uint32_t *state)
{
	uint32_t x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}

#endif
