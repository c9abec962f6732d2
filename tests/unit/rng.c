/* The tests' deterministic generator (rng.h). */
#include "rng.h"

uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}
