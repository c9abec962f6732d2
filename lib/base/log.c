/*
 * stderr logging with levels; systemd's journal adds its own timestamps,
 * so a timestamp is printed only when stderr is not the journal.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "text.h"

static const char *log_prog = "rdzv";
static enum log_level log_level = LOG_LEVEL_INFO;
static int log_stamp = 1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void
log_init(const char *progname, enum log_level level)
{
	log_prog = progname;
	log_level = level;
	log_stamp = getenv("JOURNAL_STREAM") == NULL;
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

int
log_level_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return (int)i;
	if (strcasecmp(s, "warning") == 0)
		return LOG_LEVEL_WARN;
	return -1;
}

const char *
log_level_name(enum log_level level)
{
	return level_names[level];
}

static void vlog(enum log_level, const char *, const char *, va_list)
    __attribute__((format(printf, 3, 0)));

static void
vlog(enum log_level level, const char *err, const char *fmt, va_list ap)
{
	char stamp[32] = "";
	if (level > log_level)
		return;
	if (log_stamp) {
		int64_t ms = wall_ms();
		time_t t = (time_t)(ms / 1000);
		struct tm tm;
		localtime_r(&t, &tm);
		size_t n = strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
		snprintf(stamp + n, sizeof(stamp) - n, ".%03d ",
		    (int)(ms % 1000));
	}
	/* A message may carry what a client sent: one line, no control
	 * character reaches the terminal or the journal. */
	char msg[2048], line[4096];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	vis_buf(line, sizeof(line), msg);
	fprintf(stderr, "%s%s: %s%s%s%s\n", stamp, log_prog,
	    level == LOG_LEVEL_ERROR ? "error: " :
	    level == LOG_LEVEL_WARN ? "warning: " : "",
	    line, err != NULL ? ": " : "", err != NULL ? err : "");
}

#define LOGFN(name, level, witherr)					\
void									\
name(const char *fmt, ...)						\
{									\
	int saved = errno;						\
	va_list ap;							\
	va_start(ap, fmt);						\
	vlog(level, witherr ? strerror(saved) : NULL, fmt, ap);	\
	va_end(ap);							\
	errno = saved;							\
}

LOGFN(log_warn, LOG_LEVEL_WARN, 1)
LOGFN(log_warnx, LOG_LEVEL_WARN, 0)
LOGFN(log_error, LOG_LEVEL_ERROR, 0)
LOGFN(log_info, LOG_LEVEL_INFO, 0)
LOGFN(log_debug, LOG_LEVEL_DEBUG, 0)

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, strerror(saved), fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}
