/*
 * Helpers the benchmarks share: the daemon's CPU time and memory from
 * /proc, a monotonic clock, percentiles and the open-file limit.
 */
#ifndef RDZV_BENCH_UTIL_H
#define RDZV_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A process's utime + stime in seconds, or -1 when it cannot be read. */
double proc_cpu_seconds(pid_t pid);

/* This process's user + system CPU time in seconds. */
double self_cpu_seconds(void);

/*
 * A process's resident set now (VmRSS) and its peak since it started
 * (VmHWM), in KiB, from /proc/PID/status. Returns 0, or -1 when it cannot be
 * read (the values are then untouched).
 */
int proc_rss_kib(pid_t pid, uint64_t *rss, uint64_t *peak);

/* qsort comparator for uint64_t. */
int cmp_u64(const void *x, const void *y);

/*
 * The nearest-rank percentile |p| (0 < p <= 1) of |n| sorted values; 0 when
 * n is 0.
 */
uint64_t percentile(const uint64_t *sorted, size_t n, double p);

/*
 * Raises the soft open-file limit to the hard one, so that one process can
 * hold a connection per simulated node. Returns the limit now in force
 * (RLIM_INFINITY as UINT64_MAX).
 */
uint64_t raise_nofile(void);

/* Prints "NAME p50 / p90 / p99 / max ms" of |n| durations in microseconds,
 * sorting |t| in place; nothing when n is 0. */
void bench_print_spread(const char *name, uint64_t *t, size_t n);

#endif
