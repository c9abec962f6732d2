/*
 * The clocks, each read in one place. Deadlines and durations use the
 * monotonic clock; wall time (CLOCK_REALTIME) is only ever shown to people
 * or stored.
 */
#ifndef RDZV_CLOCK_H
#define RDZV_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t	mono_ns(void);

/* CLOCK_REALTIME in milliseconds since the epoch. */
int64_t		wall_ms(void);

static inline uint64_t
mono_us(void)
{
	return mono_ns() / 1000;
}

static inline uint64_t
mono_ms(void)
{
	return mono_ns() / 1000000;
}

/*
 * The time from |then| to |now| (any one unit of the monotonic clock), 0
 * when |then| is the later: a time read elsewhere (another clock read
 * after the caller's, another thread, the kernel's TCP stamps) can be
 * newer than the caller's |now|, and a plain unsigned difference would
 * then wrap to centuries (issue 40: an agent that fenced healthy workers
 * for "18446744073709552.0 s" of silence).
 */
static inline uint64_t
mono_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

#endif
