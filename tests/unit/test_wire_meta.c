/*
 * Unit tests for lib/grpc/grpc_wire.c's header values: grpc-timeout parsing and
 * formatting (at most eight digits and a unit; a deadline never shrinks)
 * and grpc-message percent coding (grpc/grpc doc/PROTOCOL-HTTP2.md,
 * NOTES.md); status names and classes (lib/grpc/grpc_status.c). Message framing is
 * tested in test_wire.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"
#include "grpc.h"
#include "grpc_wire.h"

/* ----------------------------------------------------------- timeouts */

static int
parse(const char *s, uint64_t *ms)
{
	return grpc_timeout_parse(s, strlen(s), ms);
}

static void
test_timeout_parse(void)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {
		{ "1H", 3600000 },
		{ "2M", 120000 },
		{ "3S", 3000 },
		{ "100m", 100 },
		{ "0m", 0 },
		{ "0S", 0 },
		{ "1u", 1 },		/* rounded up */
		{ "999u", 1 },
		{ "1000u", 1 },
		{ "1001u", 2 },
		{ "0u", 0 },
		{ "1n", 1 },
		{ "1000000n", 1 },
		{ "1000001n", 2 },
		{ "99999999n", 100 },
		{ "99999999u", 100000 },
		{ "99999999m", 99999999 },
		{ "99999999S", 99999999000ULL },
		{ "99999999M", 5999999940000ULL },
		{ "99999999H", 359999996400000ULL },
		{ "00000005S", 5000 },	/* eight digits with zeros */
	};
	static const char *bad[] = {
		"",
		"m",
		"S",
		"100",			/* no unit */
		"123456789m",		/* nine digits */
		"000000001S",
		"5s",			/* units are case-sensitive */
		"5h",
		"5x",
		"5U",
		"5N",
		"-5m",
		"+5m",
		" 5m",
		"5 m",
		"5mm",
		"5.0S",
		"0x5m",
		"m5",
	};
	uint64_t ms;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ms = 777;
		int rc = parse(good[i].s, &ms);
		if (rc != 0 || ms != good[i].ms)
			fprintf(stderr, "timeout '%s': rc %d, %llu ms\n",
			    good[i].s, rc, (unsigned long long)ms);
		CHECK(rc == 0 && ms == good[i].ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &ms);
		if (rc != -EINVAL)
			fprintf(stderr, "timeout '%s' accepted\n", bad[i]);
		CHECK_INT(rc, -EINVAL);
	}

	/* |len| bounds the value: nothing after it is read. */
	CHECK_INT(grpc_timeout_parse("100mXYZ", 4, &ms), 0);
	CHECK_INT(ms, 100);
	CHECK_INT(grpc_timeout_parse("25S", 2, &ms), -EINVAL);
	CHECK_INT(grpc_timeout_parse("5m\0", 3, &ms), -EINVAL);
	CHECK_INT(grpc_timeout_parse(NULL, 0, &ms), -EINVAL);
}

/* The formatted value has at most 8 digits, parses back, is not shorter
 * than asked (a deadline never shrinks) and longer by less than its unit. */
static void
check_format(uint64_t ms)
{
	char buf[16];
	uint64_t back = 0, unit;
	size_t len;

	memset(buf, '#', sizeof(buf));
	grpc_timeout_format(ms, buf, sizeof(buf));
	len = strnlen(buf, sizeof(buf));
	CHECK(len >= 2 && len <= 9);
	if (len < 2 || len > 9)
		return;
	CHECK_INT(parse(buf, &back), 0);
	switch (buf[len - 1]) {
	case 'm': unit = 1; break;
	case 'S': unit = 1000; break;
	case 'M': unit = 60000; break;
	case 'H': unit = 3600000; break;
	default: unit = 0; break;
	}
	CHECK(unit != 0);
	if (unit >= 60000 && back == 99999999 * unit && ms > back) {
		/* Past the largest value of the coarsest unit: a cap of
		 * about 190 years or more. */
		return;
	}
	if (!(back >= ms && back - ms < unit) && check_failures < 10)
		fprintf(stderr, "format %llu -> '%s' -> %llu\n",
		    (unsigned long long)ms, buf, (unsigned long long)back);
	CHECK(back >= ms && back - ms < unit);
}

static void
test_timeout_format(void)
{
	static const uint64_t values[] = {
		0, 1, 2, 999, 1000, 1001, 59999, 60000, 3600000,
		99999999,		/* the last value in milliseconds */
		100000000,
		100000001,
		99999999000ULL,		/* the last value in seconds */
		99999999001ULL,		/* ...rounded up: 100000000 S */
		99999999999ULL,
		100000000000ULL,
		5999999940000ULL,	/* the last value in minutes */
		5999999940001ULL,
		5999999999999ULL,
		86400000ULL * 365 * 100,
		UINT64_MAX / 2,
		UINT64_MAX - 1,
		UINT64_MAX,
	};
	char buf[16];

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		check_format(values[i]);
	for (int i = 0; i < 20000; i++) {
		/* Two statements: the same values from every compiler. */
		uint64_t v = rng();
		check_format(v >> (rng() % 64));
	}

	/* Exact and readable where it can be. */
	grpc_timeout_format(0, buf, sizeof(buf));
	CHECK_STR(buf, "0m");
	grpc_timeout_format(1500, buf, sizeof(buf));
	CHECK_STR(buf, "1500m");
	grpc_timeout_format(99999999, buf, sizeof(buf));
	CHECK_STR(buf, "99999999m");
	grpc_timeout_format(100000000, buf, sizeof(buf));
	CHECK_STR(buf, "100000S");
	grpc_timeout_format(100000001, buf, sizeof(buf));
	CHECK_STR(buf, "100001S");
}

/* ---------------------------------------------------- grpc-message */

static char *
decode(const char *s)
{
	return grpc_message_decode(s, strlen(s));
}

static void
check_encode(const char *in, const char *want)
{
	char *enc = grpc_message_encode(in), *dec;

	CHECK_STR(enc, want);
	dec = enc != NULL ? decode(enc) : NULL;
	CHECK_STR(dec, in);
	free(enc);
	free(dec);
}

static void
check_decode(const char *in, const char *want)
{
	char *dec = decode(in);

	CHECK_STR(dec, want);
	free(dec);
}

static void
test_message_coding(void)
{
	check_encode("", "");
	check_encode("hello world", "hello world");
	check_encode(" !\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~",
	    " !\"#$&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~");
	check_encode("100%", "100%25");
	check_encode("%25", "%2525");
	check_encode("line\nbreak\ttab\r", "line%0Abreak%09tab%0D");
	check_encode("\x01\x1f\x7f", "%01%1F%7F");
	/* UTF-8: each byte of a multi-byte sequence is escaped. */
	check_encode("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x9a\x80",
	    "h%C3%A9llo %E2%9C%93 %F0%9F%9A%80");

	/* Every byte value 1-255 survives a round trip. */
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char *enc = grpc_message_encode(all), *dec;
	CHECK(enc != NULL && strlen(enc) == 94 + 161 * 3);
	dec = enc != NULL ? decode(enc) : NULL;
	CHECK(dec != NULL && memcmp(dec, all, 256) == 0);
	for (const char *p = enc; p != NULL && *p != '\0'; p++)
		CHECK(*p >= 0x20 && *p <= 0x7e);
	free(enc);
	free(dec);

	/* Lowercase hex decodes too. */
	check_decode("h%c3%a9llo", "h\xc3\xa9llo");
	check_decode("%2a%2A", "**");

	/* Malformed escapes are kept as they are. */
	check_decode("%", "%");
	check_decode("abc%", "abc%");
	check_decode("%4", "%4");
	check_decode("abc%4", "abc%4");
	check_decode("%zz", "%zz");
	check_decode("%4g", "%4g");
	check_decode("%g4", "%g4");
	check_decode("%%41", "%A");
	check_decode("50% off", "50% off");
	check_decode("%%%", "%%%");
	check_decode("%41%", "A%");
	check_decode("%41%4", "A%4");

	/* |len| bounds the input; a %00 escape yields a NUL byte. */
	dec = grpc_message_decode("ab%41cd", 5);
	CHECK_STR(dec, "abA");
	free(dec);
	dec = grpc_message_decode("ab%41", 4);
	CHECK_STR(dec, "ab%4");
	free(dec);
	dec = grpc_message_decode("x%00y", 5);
	CHECK(dec != NULL && memcmp(dec, "x\0y", 4) == 0);
	free(dec);
	dec = grpc_message_decode("", 0);
	CHECK_STR(dec, "");
	free(dec);
}

/* Status names, and which failures a client may try again. */
static void
test_status(void)
{
	static const int again[] = {
		GRPC_CANCELLED, GRPC_UNKNOWN, GRPC_DEADLINE_EXCEEDED,
		GRPC_ABORTED, GRPC_INTERNAL, GRPC_UNAVAILABLE,
	};
	int	n = 0;

	CHECK_STR(grpc_status_name(GRPC_OK), "OK");
	CHECK_STR(grpc_status_name(GRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
	CHECK_STR(grpc_status_name(-1), "UNKNOWN_STATUS");
	CHECK_STR(grpc_status_name(17), "UNKNOWN_STATUS");
	for (size_t i = 0; i < sizeof(again) / sizeof(again[0]); i++)
		CHECK(grpc_status_transient(again[i]));
	/* The refusals (NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION,
	 * ...) answer the same every time. */
	for (int s = -1; s <= 17; s++)
		n += grpc_status_transient(s);
	CHECK(n == (int)(sizeof(again) / sizeof(again[0])));
}

int
main(void)
{
	test_timeout_parse();
	test_timeout_format();
	test_message_coding();
	test_status();
	return check_done("test_wire_meta");
}
