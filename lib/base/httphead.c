/*
 * Request heads checked byte by byte (httphead.h): a small state machine,
 * so that heads split anywhere between reads are judged the same.
 */
#include <string.h>
#include <strings.h>

#include "httphead.h"

void
http_head_init(struct http_head *h)
{
	memset(h, 0, sizeof(*h));
}

/* A header line ended: 0 when it is a second Content-Length that differs
 * from the first (compared on the first bytes the line keeps). */
static int
header_ok(struct http_head *h)
{
	static const char name[] = "content-length:";
	char v[sizeof(h->clen)];
	size_t i, k = 0, kept = h->line_len < sizeof(h->line) ? h->line_len :
	    sizeof(h->line);

	if (kept < sizeof(name) - 1 ||
	    strncasecmp(h->line, name, sizeof(name) - 1) != 0)
		return 1;
	for (i = sizeof(name) - 1; i < kept && k + 1 < sizeof(v); i++)
		if (h->line[i] != ' ' && h->line[i] != '\t')
			v[k++] = h->line[i];
	v[k] = '\0';
	if (h->clen[0] == '\0') {
		memcpy(h->clen, v, k + 1);
		return 1;
	}
	return strcmp(h->clen, v) == 0;
}

static int
byte_ok(struct http_head *h, unsigned char b, unsigned *events)
{
	if (!h->in_head) {
		h->in_head = 1;
		h->first_line = 1;
		h->clen[0] = '\0';
		*events |= HTTP_HEAD_BEGAN;
	}
	if (h->prev_cr && b != '\n') {
		h->why = "a bare CR";
		return 0;
	}
	if (b == '\n') {
		if (!h->prev_cr) {
			h->why = "a bare LF";
			return 0;
		}
		h->prev_cr = 0;
		if (h->line_len == 0 && h->first_line) {
			h->why = "an empty line before the request line";
			return 0;
		}
		if (h->line_len == 0) {
			h->in_head = 0;
			*events |= HTTP_HEAD_ENDED;
		} else if (!h->first_line && !header_ok(h)) {
			h->why = "a second Content-Length that differs";
			return 0;
		}
		if (h->line_len > 0)
			h->first_line = 0;
		h->line_len = 0;
		return 1;
	}
	if (b == '\r') {
		h->prev_cr = 1;
		return 1;
	}
	if (b == '\0') {
		h->why = "a NUL";
		return 0;
	}
	if (h->line_len == 0 && (b == ' ' || b == '\t')) {
		h->why = h->first_line ? "a request line that starts with a "
		    "space" : "a folded header line";
		return 0;
	}
	if (h->line_len < sizeof(h->line))
		h->line[h->line_len] = (char)b;
	h->line_len++;
	return 1;
}

size_t
http_head_feed(struct http_head *h, const void *p, size_t len,
    unsigned *events)
{
	const unsigned char *b = p;
	size_t i;

	*events = 0;
	if (h->bad)
		return 0;
	for (i = 0; i < len; i++)
		if (!byte_ok(h, b[i], events)) {
			h->bad = 1;
			break;
		}
	return i;
}

const char *
http_head_poison(const struct http_head *h)
{
	if (h->prev_cr)
		return "\n!\r\n";
	return h->line_len > 0 ? "\r\n!\r\n" : "!\r\n";
}
