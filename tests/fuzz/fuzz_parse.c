/*
 * Fuzz target for sizes and durations as users write them (lib/base/parse.c):
 * --max-message 4M, retention = 7d, --timeout 500ms, RDZV_* variables.
 *
 * Input layout: byte 0 picks the unit of a bare number for
 * parse_duration (1 ms, 1 s, 1 min or 1 h); the rest is the text, cut at
 * its first NUL as a C string would be.
 *
 * Invariants checked (a violation aborts, as does undefined behaviour
 * under UBSan): a size is never negative and a suffix multiplies by its
 * power of 1024; a duration is within the documented 2^32 s, and one
 * written in ms with no fraction is exactly that number.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "parse.h"

static const uint64_t bare_units[] = { 1, 1000, 60 * 1000, 3600 * 1000 };

static void
fuzz_size(const char *s)
{
	size_t sz;
	const char *p;

	if (parse_size(s, &sz) != 0)
		return;
	/* "-1" wraps to SIZE_MAX in strtoull: a negative size is malformed. */
	FUZZ_ASSERT(strchr(s, '-') == NULL);
	for (p = s; *p >= '0' && *p <= '9'; p++)
		;
	if (*p == 'K' || *p == 'k')
		FUZZ_ASSERT(sz % 1024 == 0);
	else if (*p == 'M' || *p == 'm')
		FUZZ_ASSERT(sz % (1024 * 1024) == 0);
	else if (*p == 'G' || *p == 'g')
		FUZZ_ASSERT(sz % (1024 * 1024 * 1024) == 0);
}

static void
fuzz_duration(const char *s, uint64_t bare)
{
	uint64_t ms;
	const char *p;

	if (parse_duration(s, bare, &ms) != 0)
		return;
	FUZZ_ASSERT(ms <= (uint64_t)UINT32_MAX * 1000);
	for (p = s; *p >= '0' && *p <= '9'; p++)
		;
	if (p > s && p - s <= 12 && strcmp(p, "ms") == 0)
		FUZZ_ASSERT(ms == strtoull(s, NULL, 10));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1 || size > 4096)
		return 0;
	if ((s = malloc(size)) == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	fuzz_size(s);
	fuzz_duration(s, bare_units[data[0] % 4]);
	free(s);
	return 0;
}
