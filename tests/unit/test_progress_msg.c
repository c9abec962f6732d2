/*
 * The workers' progress datagram (client/agent/progress_msg.c,
 * docs/HEALTH.md): what rdzv.progress and the documented snippet send is
 * read back; anything else is refused whole, never half-read.
 */
#include <string.h>

#include "check.h"
#include "progress_msg.h"

static int
parse(const char *s, uint32_t *rank, uint64_t *step)
{
	return progress_msg_parse(s, strlen(s), rank, step);
}

static void
test_valid(void)
{
	uint32_t rank;
	uint64_t step;

	CHECK_INT(parse("1 0 0", &rank, &step), 0);
	CHECK(rank == 0 && step == 0);
	CHECK_INT(parse("1 3 1234\n", &rank, &step), 0);
	CHECK(rank == 3 && step == 1234);
	CHECK_INT(parse("1 65535 18446744073709551615", &rank, &step), 0);
	CHECK(rank == 65535 && step == UINT64_MAX);
	CHECK_INT(parse("1 7 0042", &rank, &step), 0);
	CHECK(rank == 7 && step == 42);
}

static void
test_invalid(void)
{
	static const char *const bad[] = {
		"", "\n", "1", "1 0", "1 0 ", "1 0 5 6", "2 0 5", "0 0 5",
		"1  0 5", " 1 0 5", "1 0 5 ", "1 0 -5", "1 0 +5", "1 0 5x",
		"1 0 5\n\n", "1 0 5\r\n", "1\t0\t5", "1 -1 5", "1 65536 5",
		"1 0 18446744073709551616", "1 0 99999999999999999999",
		"1 0 000000000000000000001", "one 0 5",
	};
	uint32_t rank = 99;
	uint64_t step = 99;
	char big[PROGRESS_MSG_MAX + 2];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &rank, &step) != -1)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_INT(parse(bad[i], &rank, &step), -1);
	}
	CHECK(rank == 99 && step == 99);
	/* A NUL inside is not the end of the message. */
	CHECK_INT(progress_msg_parse("1 0 5\0", 6, &rank, &step), -1);
	CHECK_INT(progress_msg_parse("1 0 5\0 6", 3, &rank, &step), -1);
	/* Over the size, whatever it says. */
	memset(big, '0', sizeof(big));
	memcpy(big, "1 0 ", 4);
	CHECK_INT(progress_msg_parse(big, sizeof(big), &rank, &step), -1);
}

/* What the agent's side writes reads back the same. */
static void
test_round_trip(void)
{
	static const uint64_t steps[] = { 0, 1, 9, 10, 1234567,
	    UINT64_MAX - 1, UINT64_MAX };
	char buf[PROGRESS_MSG_MAX];
	uint32_t rank;
	uint64_t step;
	int n;

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		n = progress_msg_format(buf, sizeof(buf), (uint32_t)i * 7,
		    steps[i]);
		CHECK(n > 0);
		CHECK_INT(progress_msg_parse(buf, (size_t)n, &rank, &step), 0);
		CHECK(rank == (uint32_t)i * 7 && step == steps[i]);
	}
	CHECK_INT(progress_msg_format(buf, 4, 1, 1000), -1);
}

int
main(void)
{
	test_valid();
	test_invalid();
	test_round_trip();
	return check_done("test_progress_msg");
}
