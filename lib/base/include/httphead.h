/*
 * The bytes of HTTP/1.1 request heads as a client sends them, checked
 * before an HTTP parser that is too lenient sees them (rdzvd's evhttp):
 * every line ends in CRLF (no bare LF or CR), no header line is folded (a
 * line that starts with a space or tab), no NUL, a request line first, and
 * at most one Content-Length value. No request body is expected: every byte
 * is part of some request's head. Fed in pieces as they arrive.
 */
#ifndef RDZV_HTTPHEAD_H
#define RDZV_HTTPHEAD_H

#include <stddef.h>

#define HTTP_HEAD_BEGAN	0x1	/* a request head began in the piece */
#define HTTP_HEAD_ENDED	0x2	/* one ended (its empty line) */

struct http_head {
	int		 bad;		/* a byte refused: the rest is too */
	int		 in_head;	/* a head has begun and not ended */
	int		 first_line;	/* the current line is a request line */
	int		 prev_cr;
	size_t		 line_len;
	char		 line[32];	/* the current line's start */
	char		 clen[24];	/* the head's Content-Length, or "" */
	const char	*why;		/* what the refused byte was */
};

/* A connection's state before its first byte. */
void	http_head_init(struct http_head *);

/*
 * Checks |len| more bytes of the connection. Returns how many are good:
 * |len|, or the offset of the first refused byte (h->why says what it is;
 * every later byte is refused too). *events gets HTTP_HEAD_BEGAN and
 * HTTP_HEAD_ENDED for what happened within these bytes.
 */
size_t	http_head_feed(struct http_head *h, const void *p, size_t len,
	    unsigned *events);

/*
 * What to put after the good bytes of a refused head so that any HTTP/1.1
 * parser refuses it (400): a line with no colon and no spaces, after
 * finishing the line the refused byte was in.
 */
const char *http_head_poison(const struct http_head *h);

#endif
