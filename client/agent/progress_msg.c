/*
 * The workers' progress datagram (progress_msg.h). Strict on purpose: a
 * message is one version number and two decimal numbers; anything else
 * is dropped by the agent rather than guessed at.
 */
#include <stdio.h>

#include "progress_msg.h"

#define PROGRESS_VERSION	1

/* A decimal number of 1 to 20 digits at s[*i], within uint64_t. */
static int
number(const char *s, size_t len, size_t *i, uint64_t *out)
{
	size_t start = *i;
	uint64_t v = 0;

	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		unsigned d = (unsigned)(s[*i] - '0');

		if (v > UINT64_MAX / 10 ||
		    (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			return -1;
		v = v * 10 + d;
		(*i)++;
	}
	if (*i == start || *i - start > 20)
		return -1;
	*out = v;
	return 0;
}

int
progress_msg_parse(const char *s, size_t len, uint32_t *rank, uint64_t *step)
{
	uint64_t version, r, st;
	size_t i = 0;

	if (len > PROGRESS_MSG_MAX)
		return -1;
	if (len > 0 && s[len - 1] == '\n')
		len--;
	if (number(s, len, &i, &version) != 0 || i >= len || s[i++] != ' ' ||
	    number(s, len, &i, &r) != 0 || i >= len || s[i++] != ' ' ||
	    number(s, len, &i, &st) != 0 || i != len)
		return -1;
	if (version != PROGRESS_VERSION || r > PROGRESS_RANK_MAX)
		return -1;
	*rank = (uint32_t)r;
	*step = st;
	return 0;
}

int
progress_msg_format(char *buf, size_t len, uint32_t rank, uint64_t step)
{
	int n = snprintf(buf, len, "%d %u %llu", PROGRESS_VERSION, rank,
	    (unsigned long long)step);

	return n < 0 || (size_t)n >= len ? -1 : n;
}
