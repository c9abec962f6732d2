/*
 * Helpers the benchmarks share.
 */
#ifndef RDZV_BENCH_UTIL_H
#define RDZV_BENCH_UTIL_H

#include <sys/types.h>

/* A process's utime + stime in seconds, or -1 when it cannot be read. */
double proc_cpu_seconds(pid_t pid);

#endif
