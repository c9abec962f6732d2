/*
 * Inputs the core's and the store's test harnesses share. Each harness
 * defines C, NOW, session_ctr and turn(): it ends a loop turn its own way
 * (a fake store or the real one), and core_inputs.c is built into both.
 */
#ifndef RDZV_TEST_CORE_INPUTS_H
#define RDZV_TEST_CORE_INPUTS_H

#include <stdint.h>

#include "core.h"

extern struct core	*C;
extern struct core_now	 NOW;
extern uint32_t		 session_ctr;
void	turn(void);

/* Time passes and the daemon's timer fires. */
void	tick(uint64_t ms);

/* A join request with a fresh, distinct session id. */
struct core_join req(const char *id, const char *host, uint32_t nproc,
	    uint32_t min, uint32_t max);

#endif
