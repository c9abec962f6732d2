/*
 * How rdzvctl writes durations, times and ranks: short, the same in
 * every command, and readable at a glance ("1m30s", "4-7").
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rdzvctl.h"

char *
fmt_duration(char *buf, size_t len, int64_t ms)
{
	static const struct {
		const char	*name;
		int64_t		 secs;
	} units[] = {
		{ "d", 86400 }, { "h", 3600 }, { "m", 60 }, { "s", 1 },
	};
	int64_t	s;
	size_t	i;

	if (ms <= 0) {
		snprintf(buf, len, "0s");
		return buf;
	}
	if (ms < 1000) {
		snprintf(buf, len, "%" PRId64 "ms", ms);
		return buf;
	}
	if (ms < 10000 && ms % 1000 != 0) {
		snprintf(buf, len, "%" PRId64 ".%" PRId64 "s", ms / 1000,
		    (ms % 1000) / 100);
		return buf;
	}
	s = ms / 1000;
	/* The largest unit, then the next one when it is not zero. */
	for (i = 0; i < 3 && s < units[i].secs; i++)
		;
	if (i == 3 || s % units[i].secs == 0 ||
	    (s % units[i].secs) / units[i + 1].secs == 0)
		snprintf(buf, len, "%" PRId64 "%s", s / units[i].secs,
		    units[i].name);
	else
		snprintf(buf, len, "%" PRId64 "%s%" PRId64 "%s",
		    s / units[i].secs, units[i].name,
		    (s % units[i].secs) / units[i + 1].secs,
		    units[i + 1].name);
	return buf;
}

char *
fmt_age(char *buf, size_t len, int64_t now_ms, int64_t t_ms)
{
	int64_t	age;

	if (t_ms == 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	/* Any instant may come from rdzvd: one from before the range of a
	 * difference is as old as can be, one from after it in the future
	 * ("0s", as any instant ahead of our clock). */
	if (__builtin_sub_overflow(now_ms, t_ms, &age))
		age = t_ms < 0 ? INT64_MAX : INT64_MIN;
	return fmt_duration(buf, len, age);
}

/* Local time of |t_ms|; the date too when |date|. */
static char *
clock_fmt(char *buf, size_t len, int64_t t_ms, bool date)
{
	time_t		t = (time_t)(t_ms / 1000);
	struct tm	tm;
	size_t		n;

	if (t_ms == 0 || localtime_r(&t, &tm) == NULL)
		n = 0;
	else if (date)
		n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	else
		n = strftime(buf, len, "%H:%M:%S", &tm);
	if (n == 0)
		snprintf(buf, len, "-");
	return buf;
}

char *
fmt_clock(char *buf, size_t len, int64_t t_ms)
{
	return clock_fmt(buf, len, t_ms, true);
}

char *
fmt_clock_short(char *buf, size_t len, int64_t t_ms)
{
	return clock_fmt(buf, len, t_ms, false);
}

char *
fmt_ranks(char *buf, size_t len, const Rdzv__V1__Node *n)
{
	if (n->group_rank < 0 || n->nproc == 0)
		snprintf(buf, len, "-");
	else if (n->nproc == 1)
		snprintf(buf, len, "%u", n->base_rank);
	else
		snprintf(buf, len, "%u-%u", n->base_rank,
		    n->base_rank + n->nproc - 1);
	return buf;
}

char *
fmt_hostport(char *buf, size_t len, const char *host, uint32_t port)
{
	if (strchr(host, ':') != NULL)
		snprintf(buf, len, "[%s]:%u", host, port);
	else
		snprintf(buf, len, "%s:%u", host, port);
	return buf;
}
