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

/* Whether |len| bytes of |s| are valid UTF-8 (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF). */
bool	utf8_valid(const char *s, size_t len);

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

/*
 * Copies |s| into |dst| (|len| bytes, always terminated) with every control
 * character (C0, DEL and C1) and every byte that is not valid UTF-8 written
 * as a C-style escape (\n, \r, \t, \e, \xNN), so the result is one line of
 * printable text. Stops before an escape or a character that would not
 * fit. Returns the length written.
 */
size_t	vis_buf(char *dst, size_t len, const char *s);

/* vis_buf into a new string; NULL when out of memory. */
char	*vis_dup(const char *s);

#endif
