/*
 * A tiny assertion kit for the unit tests: CHECK() and friends report the
 * file, line and expression of a failure and keep going, so one run shows
 * every broken check; check_done() turns the count into the exit status
 * (0 when all passed, 1 otherwise).
 */
#ifndef RDZV_TESTS_CHECK_H
#define RDZV_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond) do {						\
	check_count++;							\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #cond);					\
		check_failures++;					\
	}								\
} while (0)

/* Integers, compared as intmax_t, with both values in the report. */
#define CHECK_INT(a, b) do {						\
	intmax_t check_a_ = (intmax_t)(a), check_b_ = (intmax_t)(b);	\
	check_count++;							\
	if (check_a_ != check_b_) {					\
		fprintf(stderr, "%s:%d: check failed: %s == %s "	\
		    "(%jd != %jd)\n", __FILE__, __LINE__, #a, #b,	\
		    check_a_, check_b_);				\
		check_failures++;					\
	}								\
} while (0)

/* Strings; NULL compares unequal to everything. */
#define CHECK_STR(a, b) do {						\
	const char *check_a_ = (a), *check_b_ = (b);			\
	check_count++;							\
	if (check_a_ == NULL || check_b_ == NULL ||			\
	    strcmp(check_a_, check_b_) != 0) {				\
		fprintf(stderr, "%s:%d: check failed: %s == %s "	\
		    "('%s' != '%s')\n", __FILE__, __LINE__, #a, #b,	\
		    check_a_ ? check_a_ : "(null)",			\
		    check_b_ ? check_b_ : "(null)");			\
		check_failures++;					\
	}								\
} while (0)

/* |s| contains |sub|. */
#define CHECK_CONTAINS(s, sub) do {					\
	const char *check_s_ = (s), *check_sub_ = (sub);		\
	check_count++;							\
	if (check_s_ == NULL || strstr(check_s_, check_sub_) == NULL) {	\
		fprintf(stderr, "%s:%d: check failed: '%s' does not "	\
		    "contain '%s'\n", __FILE__, __LINE__,		\
		    check_s_ ? check_s_ : "(null)", check_sub_);	\
		check_failures++;					\
	}								\
} while (0)

/* Byte ranges of equal length. */
#define CHECK_MEM(a, b, n) do {						\
	check_count++;							\
	if (memcmp((a), (b), (n)) != 0) {				\
		fprintf(stderr, "%s:%d: check failed: %s and %s differ "\
		    "in their %zu bytes\n", __FILE__, __LINE__, #a, #b,	\
		    (size_t)(n));					\
		check_failures++;					\
	}								\
} while (0)

/* Prints a summary and returns the exit status for main(). */
int	check_done(const char *name);

#endif
