/*
 * lib/base/httphead.c: request heads as rdzvd's HTTP listener lets them through
 * to evhttp, whole and split between reads at every byte.
 */
#include <string.h>

#include "check.h"
#include "httphead.h"

/* Feeds |len| bytes of |s| in two pieces split at |at|: the good bytes,
 * the events and what was refused. */
static size_t
feed_split(const char *s, size_t len, size_t at, unsigned *events,
    const char **why)
{
	struct http_head h;
	size_t good;
	unsigned e1, e2 = 0;

	http_head_init(&h);
	good = http_head_feed(&h, s, at, &e1);
	if (good == at)
		good += http_head_feed(&h, s + at, len - at, &e2);
	*events = e1 | e2;
	*why = h.why;
	return good;
}

/* Split at every byte, |s| is good up to the offset of |mark| within it
 * (all of it when |mark| is NULL), refused for |want_why|. */
#define CHECK_HEAD(lit, mark, want_why) \
	check_all_splits(lit, sizeof(lit) - 1, mark, sizeof(mark) - 1, \
	    want_why)
#define CHECK_GOOD(lit) \
	check_all_splits(lit, sizeof(lit) - 1, NULL, 0, NULL)

static void
check_all_splits(const char *s, size_t len, const char *mark,
    size_t mark_len, const char *want_why)
{
	const char *at_mark = mark != NULL ? memmem(s, len, mark, mark_len) :
	    NULL;
	size_t want = at_mark != NULL ? (size_t)(at_mark - s) : len;
	unsigned events;
	const char *why;

	CHECK(mark == NULL || at_mark != NULL);
	for (size_t at = 0; at <= len; at++) {
		CHECK_INT(feed_split(s, len, at, &events, &why), want);
		if (want_why != NULL)
			CHECK_STR(why, want_why);
		else
			CHECK(why == NULL);
	}
}

static void
test_heads(void)
{
	struct http_head h;
	unsigned ev;
	static const char two[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n";

	CHECK_GOOD(two);
	http_head_init(&h);
	CHECK_INT(http_head_feed(&h, two, sizeof(two) - 1, &ev),
	    sizeof(two) - 1);
	CHECK_INT(ev, HTTP_HEAD_BEGAN | HTTP_HEAD_ENDED);
	CHECK(!h.in_head);
	http_head_init(&h);
	CHECK_INT(http_head_feed(&h, "GET", 3, &ev), 3);
	CHECK(ev == HTTP_HEAD_BEGAN && h.in_head);

	/* The mark is where the refused byte is. */
	CHECK_HEAD("GET / HTTP/1.1\nHost: x\r\n\r\n", "\nHost", "a bare LF");
	CHECK_HEAD("GET / HTTP/1.1\r\nA: b\rC: d\r\n\r\n", "C: d",
	    "a bare CR");
	CHECK_HEAD("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", " c",
	    "a folded header line");
	CHECK_HEAD("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", "\0", "a NUL");
	CHECK_HEAD("\r\nGET / HTTP/1.1\r\n\r\n", "\nGET",
	    "an empty line before the request line");
	CHECK_HEAD("GET / HTTP/1.1\r\ncontent-length: 0\r\n"
	    "Content-Length:  5\r\n\r\n", "\n\r\n",
	    "a second Content-Length that differs");
	/* The same value twice is one value; each head has its own. */
	CHECK_GOOD("GET / HTTP/1.1\r\nContent-Length: 0\r\n"
	    "Content-Length: 0\r\n\r\nGET / HTTP/1.1\r\nContent-Length: 1\r\n"
	    "\r\n");

	/* Once refused, nothing more is good; the poison ends the line. */
	http_head_init(&h);
	CHECK_INT(http_head_feed(&h, "GET / HTTP/1.1\r\nA: b\n", 21, &ev), 20);
	CHECK_STR(http_head_poison(&h), "\r\n!\r\n");
	CHECK_INT(http_head_feed(&h, "\r\n", 2, &ev), 0);
	http_head_init(&h);
	CHECK_INT(http_head_feed(&h, "GET / HTTP/1.1\r\n\n", 17, &ev), 16);
	CHECK_STR(http_head_poison(&h), "!\r\n");
	http_head_init(&h);
	CHECK_INT(http_head_feed(&h, "GET / HTTP/1.1\rx", 16, &ev), 15);
	CHECK_STR(http_head_poison(&h), "\n!\r\n");
}

int
main(void)
{
	test_heads();
	return check_done("test_httphead");
}
