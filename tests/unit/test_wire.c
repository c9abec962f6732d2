/*
 * Unit tests for lib/grpc/grpc_wire.c's framing: message reassembly from DATA chunks
 * cut at every possible place, the size limit decided from the prefix
 * before anything is buffered, compressed messages, callbacks that stop the
 * feed, and framing of protobuf-c messages (grpc/grpc
 * doc/PROTOCOL-HTTP2.md, NOTES.md). The header values (grpc-timeout,
 * grpc-message) are tested in test_wire_meta.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rdzv/v1/types.pb-c.h"
#include "rng.h"
#include "grpc_wire.h"

/* ------------------------------------------------------------ helpers */

#define MAX_MSGS 64

/* What the reader handed out, copied, in order. */
struct got {
	size_t n;
	uint8_t *msg[MAX_MSGS];
	size_t len[MAX_MSGS];
	int stop_at;		/* return 7 from the callback for message #stop_at */
	int calls;
};

static int
collect(void *arg, const uint8_t *msg, size_t len)
{
	struct got *g = arg;

	g->calls++;
	if (g->n < MAX_MSGS) {
		g->msg[g->n] = malloc(len > 0 ? len : 1);
		if (g->msg[g->n] == NULL)
			abort();
		if (len > 0)
			memcpy(g->msg[g->n], msg, len);
		g->len[g->n] = len;
		g->n++;
	}
	if (g->stop_at > 0 && g->calls == g->stop_at)
		return 7;
	return 0;
}

static void
got_free(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->msg[i]);
	memset(g, 0, sizeof(*g));
}

/* A stream of framed messages and the messages themselves. */
struct stream {
	uint8_t buf[8192];
	size_t len;
	size_t n;
	size_t off[MAX_MSGS];	/* of each message's body in buf */
	size_t mlen[MAX_MSGS];
};

static void
put_prefix(uint8_t *p, uint8_t flag, uint32_t len)
{
	p[0] = flag;
	p[1] = (uint8_t)(len >> 24);
	p[2] = (uint8_t)(len >> 16);
	p[3] = (uint8_t)(len >> 8);
	p[4] = (uint8_t)len;
}

static void
stream_add(struct stream *s, size_t len)
{
	if (s->len + GRPC_PREFIX_LEN + len > sizeof(s->buf) || s->n == MAX_MSGS)
		abort();
	put_prefix(s->buf + s->len, 0, (uint32_t)len);
	s->len += GRPC_PREFIX_LEN;
	s->off[s->n] = s->len;
	s->mlen[s->n] = len;
	s->n++;
	for (size_t i = 0; i < len; i++)
		s->buf[s->len++] = (uint8_t)rng();
}

/* Messages of sizes that cover empty, tiny, prefix-sized and larger ones,
 * with small messages after larger ones and the other way round. */
static void
stream_make(struct stream *s)
{
	static const size_t sizes[] = { 3, 0, 1, 0, 0, 700, 4, 5, 6, 1, 300, 0,
	    2, 1500, 9 };

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		stream_add(s, sizes[i]);
}

static int
got_matches(const struct got *g, const struct stream *s)
{
	if (g->n != s->n)
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		if (g->len[i] != s->mlen[i])
			return 0;
		if (memcmp(g->msg[i], s->buf + s->off[i], s->mlen[i]) != 0)
			return 0;
	}
	return 1;
}

/*
 * Feeds |s| in chunks whose ends are |cuts| (ascending, each < s->len) and
 * returns 1 when the reader produced exactly the stream's messages, no error,
 * and no partial message at the end.
 */
static int
feed_cut(const struct stream *s, const size_t *cuts, size_t ncuts)
{
	struct grpc_reader r;
	struct got g = { 0 };
	size_t pos = 0;
	int ok = 1;

	grpc_reader_init(&r, 4096);
	for (size_t i = 0; i <= ncuts && ok; i++) {
		size_t end = i < ncuts ? cuts[i] : s->len;
		if (grpc_reader_feed(&r, s->buf + pos, end - pos, collect,
		    &g) != 0)
			ok = 0;
		pos = end;
	}
	if (ok && (grpc_reader_partial(&r) || !got_matches(&g, s)))
		ok = 0;
	grpc_reader_reset(&r);
	got_free(&g);
	return ok;
}

/* -------------------------------------------------------- reassembly */

static void
test_reader_whole(void)
{
	struct stream s;

	stream_make(&s);
	CHECK(feed_cut(&s, NULL, 0));
}

static void
test_reader_byte_at_a_time(void)
{
	struct stream s;
	size_t *cuts;

	stream_make(&s);
	cuts = calloc(s.len, sizeof(*cuts));
	for (size_t i = 1; i < s.len; i++)
		cuts[i - 1] = i;
	CHECK(feed_cut(&s, cuts, s.len - 1));
	free(cuts);
}

/* Every single split point, then every pair of split points of a shorter
 * stream: each byte boundary is a chunk end at least once, next to every
 * other. */
static void
test_reader_every_split(void)
{
	struct stream s;
	int bad = 0;

	stream_make(&s);
	for (size_t i = 0; i <= s.len; i++) {
		size_t cut = i;
		if (!feed_cut(&s, &cut, 1))
			bad++;
	}
	CHECK_INT(bad, 0);

	memset(&s, 0, sizeof(s));
	stream_add(&s, 2);
	stream_add(&s, 0);
	stream_add(&s, 9);
	stream_add(&s, 1);
	stream_add(&s, 0);
	stream_add(&s, 30);
	bad = 0;
	for (size_t i = 0; i <= s.len; i++) {
		for (size_t j = i; j <= s.len; j++) {
			size_t cuts[2] = { i, j };
			if (!feed_cut(&s, cuts, 2))
				bad++;
		}
	}
	CHECK_INT(bad, 0);
}

static void
test_reader_random_chunks(void)
{
	struct stream s;
	size_t cuts[256];
	int bad = 0;

	stream_make(&s);
	for (int round = 0; round < 2000; round++) {
		size_t n = 0, pos = 0;
		size_t maxchunk = 1 + (size_t)(rng() % (round % 3 == 0 ?
		    8 : 900));
		while (n < sizeof(cuts) / sizeof(cuts[0])) {
			pos += rng() % (maxchunk + 1);	/* empty chunks too */
			if (pos >= s.len)
				break;
			cuts[n++] = pos;
		}
		if (!feed_cut(&s, cuts, n))
			bad++;
	}
	CHECK_INT(bad, 0);
}

/* Several messages in one chunk, and zero-length messages alone. */
static void
test_reader_zero_length(void)
{
	struct grpc_reader r;
	struct got g = { 0 };
	uint8_t buf[GRPC_PREFIX_LEN * 3];

	put_prefix(buf, 0, 0);
	put_prefix(buf + 5, 0, 0);
	put_prefix(buf + 10, 0, 0);
	grpc_reader_init(&r, 0);
	CHECK_INT(grpc_reader_feed(&r, buf, sizeof(buf), collect, &g), 0);
	CHECK_INT(g.n, 3);
	CHECK_INT(g.len[0] + g.len[1] + g.len[2], 0);
	CHECK_INT(grpc_reader_partial(&r), 0);
	got_free(&g);

	/* The prefix's last byte alone completes a zero-length message. */
	CHECK_INT(grpc_reader_feed(&r, buf, 4, collect, &g), 0);
	CHECK_INT(g.n, 0);
	CHECK_INT(grpc_reader_partial(&r), 1);
	CHECK_INT(grpc_reader_feed(&r, buf + 4, 1, collect, &g), 0);
	CHECK_INT(g.n, 1);
	CHECK_INT(grpc_reader_partial(&r), 0);
	got_free(&g);

	/* An empty feed changes nothing. */
	CHECK_INT(grpc_reader_feed(&r, buf, 0, collect, &g), 0);
	CHECK_INT(g.n, 0);
	CHECK_INT(grpc_reader_partial(&r), 0);
	grpc_reader_reset(&r);
}

/*
 * A message whose prefix ends one chunk and whose body fills the next, then
 * a larger message split across chunks: the second must not land in a
 * buffer sized for the first (an overflow ASan reports).
 */
static void
test_reader_buffer_per_message(void)
{
	struct grpc_reader r;
	struct got g = { 0 };
	uint8_t buf[5 + 1 + 5 + 100];

	put_prefix(buf, 0, 1);
	buf[5] = 0xaa;
	put_prefix(buf + 6, 0, 100);
	memset(buf + 11, 0xbb, 100);
	grpc_reader_init(&r, 1000);
	CHECK_INT(grpc_reader_feed(&r, buf, 5, collect, &g), 0);
	CHECK_INT(grpc_reader_feed(&r, buf + 5, 1 + 5 + 50, collect, &g), 0);
	CHECK_INT(grpc_reader_partial(&r), 1);
	CHECK_INT(grpc_reader_feed(&r, buf + 61, 50, collect, &g), 0);
	CHECK_INT(g.n, 2);
	CHECK_INT(g.len[0], 1);
	CHECK_INT(g.len[1], 100);
	CHECK(g.msg[0][0] == 0xaa);
	CHECK(g.len[1] == 100 && g.msg[1][99] == 0xbb);
	CHECK_INT(grpc_reader_partial(&r), 0);
	got_free(&g);
	grpc_reader_reset(&r);
}

/* -------------------------------------------------------- size limit */

static void
test_reader_limit(void)
{
	struct grpc_reader r;
	struct got g = { 0 };
	uint8_t buf[5 + 101];

	/* Exactly the limit is accepted. */
	memset(buf, 0x5a, sizeof(buf));
	put_prefix(buf, 0, 100);
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_feed(&r, buf, 5 + 100, collect, &g), 0);
	CHECK_INT(g.n, 1);
	got_free(&g);
	grpc_reader_reset(&r);

	/* One more: the prefix alone fails, and nothing was allocated. */
	put_prefix(buf, 0, 101);
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_feed(&r, buf, 5, collect, &g), -EMSGSIZE);
	CHECK(r.buf == NULL);
	CHECK_INT(g.calls, 0);
	grpc_reader_reset(&r);

	/* Byte by byte: the first four bytes are fine, the fifth decides. */
	grpc_reader_init(&r, 100);
	for (int i = 0; i < 4; i++)
		CHECK_INT(grpc_reader_feed(&r, buf + i, 1, collect, &g), 0);
	CHECK(r.buf == NULL);
	CHECK_INT(grpc_reader_feed(&r, buf + 4, 1, collect, &g), -EMSGSIZE);
	CHECK(r.buf == NULL);
	grpc_reader_reset(&r);

	/* The largest length a prefix can announce, with a real limit. */
	put_prefix(buf, 0, UINT32_MAX);
	grpc_reader_init(&r, 4 << 20);
	CHECK_INT(grpc_reader_feed(&r, buf, 5, collect, &g), -EMSGSIZE);
	CHECK(r.buf == NULL);
	grpc_reader_reset(&r);

	/* After good messages in the same chunk: they are delivered first. */
	uint8_t two[5 + 2 + 5];
	put_prefix(two, 0, 2);
	two[5] = 1;
	two[6] = 2;
	put_prefix(two + 7, 0, 0x01000000);
	grpc_reader_init(&r, 1000);
	CHECK_INT(grpc_reader_feed(&r, two, sizeof(two), collect, &g),
	    -EMSGSIZE);
	CHECK_INT(g.n, 1);
	CHECK(r.buf == NULL);
	got_free(&g);
	grpc_reader_reset(&r);

	/* A limit of 0 takes only empty messages. */
	put_prefix(buf, 0, 1);
	grpc_reader_init(&r, 0);
	CHECK_INT(grpc_reader_feed(&r, buf, 6, collect, &g), -EMSGSIZE);
	grpc_reader_reset(&r);
}

static void
test_reader_compressed(void)
{
	struct grpc_reader r;
	struct got g = { 0 };
	uint8_t buf[5 + 3 + 5 + 3];

	for (int flag = 1; flag < 256; flag += 127) {
		put_prefix(buf, (uint8_t)flag, 3);
		grpc_reader_init(&r, 100);
		CHECK_INT(grpc_reader_feed(&r, buf, 5, collect, &g),
		    -RDZV_ECOMPRESSED);
		CHECK_INT(g.calls, 0);
		CHECK(r.buf == NULL);
		grpc_reader_reset(&r);
	}

	/* A compressed message after a plain one in the same chunk. */
	put_prefix(buf, 0, 3);
	memcpy(buf + 5, "abc", 3);
	put_prefix(buf + 8, 1, 3);
	memcpy(buf + 13, "def", 3);
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_feed(&r, buf, sizeof(buf), collect, &g),
	    -RDZV_ECOMPRESSED);
	CHECK_INT(g.n, 1);
	CHECK(g.n == 1 && g.len[0] == 3 && memcmp(g.msg[0], "abc", 3) == 0);
	got_free(&g);
	grpc_reader_reset(&r);
}

/* ------------------------------------------------- callback, partial */

static void
test_reader_callback_stops(void)
{
	struct stream s;
	struct grpc_reader r;
	struct got g = { 0 };

	memset(&s, 0, sizeof(s));
	stream_add(&s, 4);
	stream_add(&s, 0);
	stream_add(&s, 10);
	stream_add(&s, 2);

	/* All in one chunk (no copy): the third message is never seen. */
	g.stop_at = 2;
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_feed(&r, s.buf, s.len, collect, &g), 7);
	CHECK_INT(g.calls, 2);
	grpc_reader_reset(&r);
	got_free(&g);

	/* Byte by byte (buffered): the feed that completes the third
	 * message returns 7 and nothing after it is delivered. */
	g.stop_at = 3;
	grpc_reader_init(&r, 100);
	size_t i;
	int rc = 0;
	for (i = 0; i < s.len && rc == 0; i++)
		rc = grpc_reader_feed(&r, s.buf + i, 1, collect, &g);
	CHECK_INT(rc, 7);
	CHECK_INT(i, s.off[2] + s.mlen[2]);
	CHECK_INT(g.calls, 3);
	CHECK(r.buf == NULL);
	grpc_reader_reset(&r);
	got_free(&g);

	/* Stopping inside a chunk that holds more: the rest is not read. */
	g.stop_at = 1;
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_feed(&r, s.buf, 3, collect, &g), 0);
	CHECK_INT(grpc_reader_feed(&r, s.buf + 3, s.len - 3, collect, &g), 7);
	CHECK_INT(g.calls, 1);
	CHECK(g.n == 1 && g.len[0] == 4 &&
	    memcmp(g.msg[0], s.buf + s.off[0], 4) == 0);
	grpc_reader_reset(&r);
	got_free(&g);
}

static void
test_reader_partial(void)
{
	struct grpc_reader r;
	struct got g = { 0 };
	uint8_t buf[5 + 4];

	put_prefix(buf, 0, 4);
	memcpy(buf + 5, "wxyz", 4);
	grpc_reader_init(&r, 100);
	CHECK_INT(grpc_reader_partial(&r), 0);
	for (size_t i = 0; i < sizeof(buf); i++) {
		CHECK_INT(grpc_reader_feed(&r, buf + i, 1, collect, &g), 0);
		CHECK_INT(grpc_reader_partial(&r), i + 1 < sizeof(buf));
	}
	CHECK_INT(g.n, 1);
	got_free(&g);

	/* Reset forgets a half-read message and frees its buffer. */
	CHECK_INT(grpc_reader_feed(&r, buf, 7, collect, &g), 0);
	CHECK_INT(grpc_reader_partial(&r), 1);
	grpc_reader_reset(&r);
	CHECK_INT(grpc_reader_partial(&r), 0);
	CHECK(r.buf == NULL);
	CHECK_INT(r.max, 100);
	CHECK_INT(grpc_reader_feed(&r, buf, sizeof(buf), collect, &g), 0);
	CHECK_INT(g.n, 1);
	got_free(&g);
	grpc_reader_reset(&r);
	grpc_reader_reset(&r);	/* twice is fine */
}

/* ------------------------------------------------------------ framing */

static int
unpack_one(void *arg, const uint8_t *msg, size_t len)
{
	Rdzv__V1__Event **out = arg;

	*out = rdzv__v1__event__unpack(NULL, len, msg);
	return *out == NULL ? -EBADMSG : 0;
}

static void
test_frame_pack(void)
{
	Rdzv__V1__Event ev = RDZV__V1__EVENT__INIT, *back = NULL;
	uint8_t *out = NULL;
	size_t outlen = 0, n;

	ev.seq = 42;
	ev.time_unix_ms = -1;
	ev.generation = 7;
	ev.kind = "round";
	ev.message = "round 7 complete: 4 nodes";
	n = rdzv__v1__event__get_packed_size(&ev);

	CHECK_INT(grpc_frame_pack(&ev.base, 4096, &out, &outlen), 0);
	CHECK_INT(outlen, GRPC_PREFIX_LEN + n);
	CHECK(out != NULL && out[0] == 0 && out[1] == 0 && out[2] == 0 &&
	    out[3] == (uint8_t)(n >> 8) && out[4] == (uint8_t)n);

	/* Through the reader, byte by byte, and back into a message. */
	struct grpc_reader r;
	grpc_reader_init(&r, 4096);
	for (size_t i = 0; i < outlen; i++)
		CHECK_INT(grpc_reader_feed(&r, out + i, 1, unpack_one, &back), 0);
	CHECK(back != NULL);
	if (back != NULL) {
		CHECK_INT(back->seq, 42);
		CHECK_INT(back->time_unix_ms, -1);
		CHECK_INT(back->generation, 7);
		CHECK_STR(back->kind, "round");
		CHECK_STR(back->message, "round 7 complete: 4 nodes");
		rdzv__v1__event__free_unpacked(back, NULL);
	}
	grpc_reader_reset(&r);
	free(out);

	/* The limit is on the message, not the frame. */
	out = NULL;
	CHECK_INT(grpc_frame_pack(&ev.base, n, &out, &outlen), 0);
	free(out);
	out = NULL;
	outlen = 12345;
	CHECK_INT(grpc_frame_pack(&ev.base, n - 1, &out, &outlen), -EMSGSIZE);
	CHECK(out == NULL);
	CHECK_INT(outlen, 12345);

	/* An empty message is a bare prefix of zeros. */
	Rdzv__V1__Event empty = RDZV__V1__EVENT__INIT;
	CHECK_INT(grpc_frame_pack(&empty.base, 0, &out, &outlen), 0);
	CHECK_INT(outlen, GRPC_PREFIX_LEN);
	CHECK(out != NULL && memcmp(out, "\0\0\0\0\0", 5) == 0);
	free(out);

	/* A message longer than 255 bytes uses the prefix's upper bytes. */
	char big[70000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ev.message = big;
	n = rdzv__v1__event__get_packed_size(&ev);
	CHECK_INT(grpc_frame_pack(&ev.base, 1 << 20, &out, &outlen), 0);
	CHECK(out != NULL && out[1] == (uint8_t)(n >> 24) &&
	    out[2] == (uint8_t)(n >> 16) && out[3] == (uint8_t)(n >> 8) &&
	    out[4] == (uint8_t)n && out[2] == 1);
	back = NULL;
	grpc_reader_init(&r, 1 << 20);
	CHECK_INT(grpc_reader_feed(&r, out, outlen, unpack_one, &back), 0);
	CHECK(back != NULL && strcmp(back->message, big) == 0);
	if (back != NULL)
		rdzv__v1__event__free_unpacked(back, NULL);
	grpc_reader_reset(&r);
	free(out);
	CHECK_INT(grpc_frame_pack(&ev.base, 65536, &out, &outlen), -EMSGSIZE);
}

/* One header of grpc_request_nv's list. */
static void
check_nv(const nghttp2_nv *v, const char *name, const char *value)
{
	CHECK_INT(v->namelen, strlen(name));
	CHECK_MEM(v->name, name, strlen(name));
	CHECK_INT(v->valuelen, strlen(value));
	CHECK_MEM(v->value, value, strlen(value));
	CHECK_INT(v->flags, NGHTTP2_NV_FLAG_NONE);
}

/* The client's request headers, in its order, the optional ones last. */
static void
test_request_nv(void)
{
	nghttp2_nv nva[GRPC_REQUEST_NV_MAX];
	size_t n;

	n = grpc_request_nv(nva, "http", "/a.B/C", "h:1", NULL, NULL, NULL);
	CHECK_INT(n, 7);
	check_nv(&nva[0], ":method", "POST");
	check_nv(&nva[1], ":scheme", "http");
	check_nv(&nva[2], ":path", "/a.B/C");
	check_nv(&nva[3], ":authority", "h:1");
	check_nv(&nva[4], "te", "trailers");
	check_nv(&nva[5], "content-type", "application/grpc");
	check_nv(&nva[6], "user-agent", "rdzv/" RDZV_VERSION);
	/* A key without a credential sends neither. */
	CHECK_INT(grpc_request_nv(nva, "https", "/p", "h", "x-munge", NULL,
	    NULL), 7);
	n = grpc_request_nv(nva, "https", "/p", "h", "x-munge", "cred",
	    "5S");
	CHECK_INT(n, GRPC_REQUEST_NV_MAX);
	check_nv(&nva[1], ":scheme", "https");
	check_nv(&nva[7], "x-munge", "cred");
	check_nv(&nva[8], "grpc-timeout", "5S");
}

int
main(void)
{
	test_request_nv();
	test_reader_whole();
	test_reader_byte_at_a_time();
	test_reader_every_split();
	test_reader_random_chunks();
	test_reader_zero_length();
	test_reader_buffer_per_message();
	test_reader_limit();
	test_reader_compressed();
	test_reader_callback_stops();
	test_reader_partial();
	test_frame_pack();
	return check_done("test_wire");
}
