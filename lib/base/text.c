#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/*
 * The length of the UTF-8 character at |s| (|avail| bytes there), or 0 if
 * the bytes there are not a valid character. *cp gets its code point.
 */
static size_t
utf8_char(const unsigned char *s, size_t avail, uint32_t *cp)
{
	size_t		n, i;
	uint32_t	c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2, c = s[0] & 0x1f, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, c = s[0] & 0x0f, min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4, c = s[0] & 0x07, min = 0x10000;
	} else
		return 0;
	if (n > avail)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

size_t
utf8_decode(const char *s, size_t avail, uint32_t *cp)
{
	return avail > 0 ? utf8_char((const unsigned char *)s, avail, cp) : 0;
}

bool
utf8_valid(const char *s, size_t len)
{
	const unsigned char	*p = (const unsigned char *)s;
	uint32_t		 cp;
	size_t			 n;

	while (len > 0) {
		if ((n = utf8_char(p, len, &cp)) == 0)
			return false;
		p += n;
		len -= n;
	}
	return true;
}

/*
 * |len| bytes of valid UTF-8 may end inside a character where something cut
 * them: the length without that partial character.
 */
static size_t
utf8_whole(const char *s, size_t len)
{
	size_t		i, need;
	unsigned char	c;

	for (i = len; i > 0 && len - i < 4; i--) {
		c = (unsigned char)s[i - 1];
		if ((c & 0xc0) == 0x80)
			continue;	/* a continuation: look further back */
		need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 :
		    (c & 0xf0) == 0xe0 ? 3 : 4;
		return len - (i - 1) >= need ? len : i - 1;
	}
	return len;
}

size_t
utf8_prefix(const char *s, size_t max)
{
	return utf8_whole(s, strnlen(s, max));
}

int
vtextf(char *buf, size_t len, const char *fmt, va_list ap)
{
	int	n;

	if (len == 0)
		return 0;
	n = vsnprintf(buf, len, fmt, ap);
	if (n >= 0 && (size_t)n >= len)
		buf[utf8_whole(buf, len - 1)] = '\0';
	return n;
}

size_t
textcpy(char *buf, size_t len, const char *s)
{
	size_t	n = strlen(s);

	if (len == 0)
		return n;
	if (n < len) {
		memcpy(buf, s, n + 1);
		return n;
	}
	memcpy(buf, s, len - 1);
	buf[utf8_whole(buf, len - 1)] = '\0';
	return n;
}

int
textf(char *buf, size_t len, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vtextf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

bool
text_cp_hidden(uint32_t cp)
{
	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
		return true;
	/* Bidi marks, embeddings, overrides and isolates (Unicode's
	 * Bidi_Control), and the line and paragraph separators. */
	return cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	    (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	    cp == 0x2028 || cp == 0x2029;
}

size_t
vis_buf(char *dst, size_t len, const char *s)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 o = 0, n, avail = strlen(s);
	uint32_t		 cp;
	char			 esc[16];
	const char		*out;

	if (len == 0)
		return 0;
	while (*p != '\0') {
		n = utf8_char(p, avail, &cp);
		if (n == 0) {
			snprintf(esc, sizeof(esc), "\\x%02x", *p);
			out = esc, n = 1;
		} else if (cp == '\n')
			out = "\\n";
		else if (cp == '\r')
			out = "\\r";
		else if (cp == '\t')
			out = "\\t";
		else if (cp == 0x1b)
			out = "\\e";
		else if (cp < 0x20 || cp == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", (unsigned)cp);
			out = esc;
		} else if (cp >= 0x80 && text_cp_hidden(cp)) {
			/* C1 controls: CSI (U+009B) is an escape to some
			 * terminals; a bidi override (U+202E) makes text
			 * read backwards. */
			snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
			out = esc;
		} else
			out = NULL;
		if (out != NULL) {
			size_t olen = strlen(out);
			if (o + olen >= len)
				break;
			memcpy(dst + o, out, olen);
			o += olen;
		} else {
			if (o + n >= len)
				break;
			memcpy(dst + o, p, n);
			o += n;
		}
		p += n;
		avail -= n;
	}
	dst[o] = '\0';
	return o;
}

char *
vis_dup(const char *s)
{
	size_t	 len = strlen(s) * 4 + 1;	/* an escape: at most 4
						   bytes a byte */
	char	*d;

	if ((d = malloc(len)) == NULL)
		return NULL;
	vis_buf(d, len, s);
	return d;
}

const char *
plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}
