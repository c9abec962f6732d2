/*
 * Helpers the benchmarks share.
 */
#include <sys/resource.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

double
proc_cpu_seconds(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long utime, stime;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name is in parentheses and may hold spaces; fields
	 * 14 and 15 (utime, stime) follow the last ')'. */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	    "%llu %llu", &utime, &stime) != 2)
		return -1;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

double
self_cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int
proc_rss_kib(pid_t pid, uint64_t *rss, uint64_t *peak)
{
	char path[64], line[256];
	unsigned long long v;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %llu kB", &v) == 1) {
			*rss = v;
			found |= 1;
		} else if (sscanf(line, "VmHWM: %llu kB", &v) == 1) {
			*peak = v;
			found |= 2;
		}
	}
	fclose(f);
	return found == 3 ? 0 : -1;
}

int
cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

uint64_t
percentile(const uint64_t *sorted, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	rank = (size_t)ceil(p * (double)n);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

uint64_t
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

void
bench_print_spread(const char *name, uint64_t *t, size_t n)
{
	if (n == 0)
		return;
	qsort(t, n, sizeof(*t), cmp_u64);
	printf("%-34s %.1f / %.1f / %.1f / %.1f ms\n", name,
	    percentile(t, n, 0.50) / 1000.0, percentile(t, n, 0.90) / 1000.0,
	    percentile(t, n, 0.99) / 1000.0, t[n - 1] / 1000.0);
}
