/*
 * Text that comes from elsewhere (clients, servers, schedulers): UTF-8
 * validity, cutting at character boundaries, and escapes that keep it from
 * driving a terminal or splitting a log line.
 */
#ifndef RDZV_TEXT_H
#define RDZV_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether |len| bytes of |s| are valid UTF-8 (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF). */
bool	utf8_valid(const char *s, size_t len);

/* The length of the UTF-8 character at |s| (|avail| bytes there) with its
 * code point in *cp, or 0 when no valid character starts there. */
size_t	utf8_decode(const char *s, size_t avail, uint32_t *cp);

/*
 * The longest prefix of the valid UTF-8 string |s| that fits in |max|
 * bytes without cutting a character: |max| or a little less. For
 * "%.*s", (int)utf8_prefix(s, 64), s.
 */
size_t	utf8_prefix(const char *s, size_t max);

/*
 * snprintf that never cuts a character in half: when the output does not
 * fit, it ends before the character that would be cut (the arguments are
 * valid UTF-8, the format ASCII). Returns what snprintf returns.
 */
int	textf(char *buf, size_t len, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
int	vtextf(char *buf, size_t len, const char *fmt, va_list ap)
	    __attribute__((format(printf, 3, 0)));
/* textf(buf, len, "%s", s) without printf's cost; returns strlen(s). */
size_t	textcpy(char *buf, size_t len, const char *s);

/*
 * Whether code point |cp| must not reach a terminal or a reader raw: C0,
 * DEL and C1 controls, bidi controls (U+202E turns text around) and the
 * line and paragraph separators. The one list vis_buf and the JSON writers
 * (pbjson.h) escape.
 */
bool	text_cp_hidden(uint32_t cp);

/*
 * Copies |s| into |dst| (|len| bytes, always terminated) with every control
 * character (C0, DEL and C1), every other text_cp_hidden() character
 * (as \uXXXX) and every byte that is not valid UTF-8 written
 * as a C-style escape (\n, \r, \t, \e, \xNN), so the result is one line of
 * printable text. Stops before an escape or a character that would not
 * fit. Returns the length written.
 */
size_t	vis_buf(char *dst, size_t len, const char *s);

/* vis_buf into a new string; NULL when out of memory. */
char	*vis_dup(const char *s);

/*
 * The ending of a counted noun: "" for one, "s" otherwise, so that every
 * program says "1 node" and "2 nodes": "%u node%s", n, plural(n).
 */
const char	*plural(uint64_t n);

#endif
