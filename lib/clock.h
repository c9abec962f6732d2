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
 * How long after |then| |now| is, 0 when |then| is later: a time read
 * after |now| was (another module's clock read, a kernel's timestamp)
 * must never make a duration of nearly 2^64.
 */
static inline uint64_t
mono_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

#endif
