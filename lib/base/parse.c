/*
 * Sizes and durations as users write them on command lines and in config
 * files.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int
parse_size(const char *s, size_t *out)
{
	char *end;
	/* strtoull would accept leading blanks and a sign, and " -1" would
	 * wrap to SIZE_MAX: digits only. */
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	unsigned long long mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1024;
	else if (*end == 'M' || *end == 'm')
		mul = 1024 * 1024;
	else if (*end == 'G' || *end == 'g')
		mul = 1024ULL * 1024 * 1024;
	if (mul != 1 && (*++end == 'i' || *end == 'B'))
		end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
	if (*end != '\0' || v > SIZE_MAX / mul)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

int
parse_duration(const char *s, uint64_t bare_unit_ms, uint64_t *ms)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	/* Not "v < 0": strtod reads "nan", which compares false with
	 * everything and has no integer value. */
	if (errno != 0 || end == s || !(v >= 0))
		return -1;
	double mul;
	if (*end == '\0')
		mul = (double)bare_unit_ms;
	else if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0)
		mul = 1000;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mul = 60 * 1000;
	else if (strcmp(end, "h") == 0)
		mul = 3600 * 1000;
	else if (strcmp(end, "d") == 0)
		mul = 86400 * 1000;
	else
		return -1;
	if (v * mul > (double)UINT32_MAX * 1000)
		return -1;
	*ms = (uint64_t)(v * mul + 0.5);
	return 0;
}
