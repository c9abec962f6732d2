/*
 * Text that comes from elsewhere (clients, servers, schedulers): UTF-8
 * validity, cutting at character boundaries, and escapes that keep it from
 * driving a terminal or splitting a log line.
 */
#ifndef RDZV_TEXT_H
#define RDZV_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether |len| bytes of |s| are valid UTF-8 (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF). */
bool	utf8_valid(const char *s, size_t len);

/*
 * The longest prefix of the valid UTF-8 string |s| that fits in |max|
 * bytes without cutting a character: |max| or a little less.
 */
size_t	utf8_prefix(const char *s, size_t max);

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
