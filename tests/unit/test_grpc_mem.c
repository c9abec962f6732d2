/*
 * The gRPC server's connection slabs (lib/grpc/grpc_server_mem.c): blocks and
 * their alignment, reuse of a slab after its connection, nghttp2's session
 * with its frame buffer inside the slab and nothing after it, events in a
 * slab, the pages a connection's slab keeps resident, and chunks mapped
 * and unmapped as connections come and go.
 */
#include <sys/mman.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "grpc_server_int.h"

/* 32 KiB slabs, 64 to a chunk (grpc_server_mem.c). */
#define SLAB		(32 * 1024)
#define CHUNK		(64 * (size_t)SLAB)

static int
inside(const struct gsrv_slab *s, const void *p, size_t n)
{
	const char *b = (const char *)s;

	return (const char *)p >= b && (const char *)p + n <= b + SLAB;
}

static void
test_blocks(struct grpc_server *srv)
{
	struct gsrv_slab *s = gsrv_slab_new(srv), *t;
	uint8_t *a, *b, *z;
	char *str;
	size_t i;

	CHECK(s != NULL);
	a = gsrv_slab_alloc(s, 100);
	b = gsrv_slab_alloc(s, 1);
	CHECK(a != NULL && b != NULL);
	CHECK((uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0);
	CHECK(b >= a + 100);
	CHECK(inside(s, a, 100) && inside(s, b, 1));
	memset(a, 0xff, 100);

	/* More than a slab holds: NULL, and the slab is still usable. */
	CHECK(gsrv_slab_alloc(s, SLAB) == NULL);
	CHECK(gsrv_slab_alloc(s, SIZE_MAX) == NULL);
	str = gsrv_slab_strdup(s, "uid:1000");
	CHECK_STR(str, "uid:1000");
	CHECK(inside(s, str, 9));
	gsrv_slab_release(s, str);	/* in the slab: nothing to free */

	/* The slab given back and taken again is the same memory, and
	 * zalloc clears what the last connection left in it. */
	gsrv_slab_free(srv, s);
	t = gsrv_slab_new(srv);
	CHECK(t == s);
	z = gsrv_slab_zalloc(t, 100);
	CHECK(z == a);
	for (i = 0; i < 100 && z != NULL; i++)
		if (z[i] != 0)
			break;
	CHECK_INT(i, 100);
	gsrv_slab_free(srv, t);
}

static ssize_t
send_nothing(nghttp2_session *h2, const uint8_t *d, size_t n, int f,
    void *arg)
{
	return NGHTTP2_ERR_WOULDBLOCK;
}

static void
test_h2_session(struct grpc_server *srv)
{
	struct gsrv_slab *s = gsrv_slab_new(srv);
	nghttp2_session_callbacks *cbs;
	nghttp2_session *h2 = NULL;
	const uint8_t *out;
	char *str;
	ssize_t n;
	size_t before;

	CHECK(s != NULL);
	CHECK(gsrv_slab_alloc(s, 400) != NULL);	/* the connection */
	before = gsrv_slab_used(s);
	CHECK(nghttp2_session_callbacks_new(&cbs) == 0);
	nghttp2_session_callbacks_set_send_callback(cbs, send_nothing);
	CHECK_INT(gsrv_slab_h2_server_new(s, &h2, cbs, NULL, NULL), 0);
	nghttp2_session_callbacks_del(cbs);
	/* The session-long blocks, the 16 KiB frame buffer among them,
	 * went into the slab. */
	CHECK(gsrv_slab_used(s) >= before + 16384);
	CHECK(gsrv_slab_used(s) <= SLAB);

	/* Sealed: nothing goes after the frame buffer, malloc's instead. */
	CHECK(gsrv_slab_alloc(s, 16) == NULL);
	str = gsrv_slab_strdup(s, "127.0.0.1");
	CHECK_STR(str, "127.0.0.1");
	CHECK(!inside(s, str, 10));
	gsrv_slab_release(s, str);

	/* The session works: its SETTINGS come out of the frame buffer,
	 * then a PING and its queue (the pool's blocks) come and go. */
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 7 },
	};
	CHECK_INT(nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, iv, 1), 0);
	n = nghttp2_session_mem_send(h2, &out);
	CHECK(n >= 9 + 6);
	if (n >= 9 + 6) {
		CHECK_INT(out[3], NGHTTP2_SETTINGS);
		CHECK(inside(s, out, (size_t)n));
	}
	CHECK_INT(nghttp2_submit_ping(h2, NGHTTP2_FLAG_NONE, NULL), 0);
	n = nghttp2_session_mem_send(h2, &out);
	CHECK_INT(n, 9 + 8);
	if (n == 9 + 8)
		CHECK_INT(out[3], NGHTTP2_PING);
	nghttp2_session_del(h2);
	gsrv_slab_free(srv, s);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(*(int *)arg)++;
}

static void
test_events(struct grpc_server *srv, struct event_base *base)
{
	struct gsrv_slab *s = gsrv_slab_new(srv);
	struct timeval tv = { 0, 0 };
	struct event *ev;
	int fired = 0;

	CHECK(s != NULL);
	ev = gsrv_slab_event(s, base, -1, 0, timer_cb, &fired);
	CHECK(ev != NULL);
	CHECK(inside(s, ev, event_get_struct_event_size()));
	CHECK_INT(event_add(ev, &tv), 0);
	CHECK_INT(event_base_loop(base, EVLOOP_ONCE), 0);
	CHECK_INT(fired, 1);
	/* Freed while pending: it must never fire from freed memory. */
	CHECK_INT(event_add(ev, &tv), 0);
	gsrv_slab_event_free(s, ev);
	CHECK_INT(event_base_loop(base, EVLOOP_NONBLOCK), 1);
	CHECK_INT(fired, 1);
	gsrv_slab_free(srv, s);
}

static ssize_t
answer_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	/* A Join's first answers and its assignment in one frame. */
	size_t n = len < 400 ? len : 400;

	memset(buf, 'a', n);
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* Resident pages of a slab, a bit each. */
static unsigned
resident(const struct gsrv_slab *s)
{
	unsigned char v[SLAB / 4096];
	unsigned bits = 0;

	if (mincore((void *)s, SLAB, v) != 0)
		return ~0u;
	for (size_t i = 0; i < sizeof(v); i++)
		bits |= (unsigned)(v[i] & 1) << i;
	return bits;
}

/*
 * A fresh slab, a connection's struct and events and a session that reads
 * a client's preface and two requests and answers one: two pages are
 * resident, the first (everything but the frame buffer's untouched tail)
 * and the stream map's; the header tables' rings, never filled by a
 * client that does not index, and the frame buffer's tail are not.
 */
static void
test_pages(struct grpc_server *srv, struct event_base *base)
{
	struct gsrv_slab *dirty = gsrv_slab_new(srv), *s = gsrv_slab_new(srv);
	nghttp2_session_callbacks *cbs;
	nghttp2_session *h2 = NULL, *cli = NULL;
	const uint8_t *out;
	struct event *ev[2];
	unsigned bits;
	ssize_t n;

	CHECK(dirty != NULL && s != NULL);
	if (s == NULL || getpagesize() != 4096) {
		gsrv_slab_free(srv, dirty);
		gsrv_slab_free(srv, s);
		return;
	}
	CHECK_INT(resident(s), 1);	/* its header */
	/* The connection, its read event and its timer. */
	CHECK(gsrv_slab_zalloc(s, sizeof(struct grpc_conn)) != NULL);
	for (int i = 0; i < 2; i++)
		ev[i] = gsrv_slab_event(s, base, -1, 0, timer_cb, NULL);
	CHECK(nghttp2_session_callbacks_new(&cbs) == 0);
	CHECK_INT(gsrv_slab_h2_server_new(s, &h2, cbs, NULL, NULL), 0);
	/* As rdzv's clients: no header indexed. */
	nghttp2_option *opt;
	CHECK_INT(nghttp2_option_new(&opt), 0);
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 0);
	CHECK_INT(nghttp2_session_client_new2(&cli, cbs, NULL, opt), 0);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cbs);

	nghttp2_nv nv[] = {
		{ (uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0 },
		{ (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
		{ (uint8_t *)":path", (uint8_t *)"/rdzv.v1.Rendezvous/Join", 5,
		  24, 0 },
		{ (uint8_t *)":authority", (uint8_t *)"h:1", 10, 3, 0 },
	};
	CHECK_INT(nghttp2_submit_settings(cli, NGHTTP2_FLAG_NONE, NULL, 0), 0);
	CHECK(nghttp2_submit_request(cli, NULL, nv, 4, NULL, NULL) == 1);
	CHECK(nghttp2_submit_request(cli, NULL, nv, 4, NULL, NULL) == 3);
	while ((n = nghttp2_session_mem_send(cli, &out)) > 0)
		CHECK_INT(nghttp2_session_mem_recv(h2, out, (size_t)n), n);
	nghttp2_data_provider dp = { .read_callback = answer_read };
	nghttp2_nv status = { (uint8_t *)":status", (uint8_t *)"200", 7, 3, 0 };
	CHECK_INT(nghttp2_submit_response(h2, 1, &status, 1, &dp), 0);
	while ((n = nghttp2_session_mem_send(h2, &out)) > 0)
		CHECK(inside(s, out, (size_t)n));
	CHECK_INT(n, 0);

	bits = resident(s);
	if (__builtin_popcount(bits) != 2)
		fprintf(stderr, "resident pages: %#x\n", bits);
	CHECK(bits & 1);
	CHECK_INT(__builtin_popcount(bits), 2);
	nghttp2_session_del(cli);
	nghttp2_session_del(h2);
	for (int i = 0; i < 2; i++)
		gsrv_slab_event_free(s, ev[i]);
	gsrv_slab_free(srv, s);
	gsrv_slab_free(srv, dirty);
}

/* The pool of nghttp2's passing blocks: classes, reuse, large blocks,
 * realloc keeping the bytes. */
static void
test_pool(void)
{
	struct gsrv_pool *p = gsrv_pool_new();
	uint8_t *a, *b, *c, *big, *z;
	size_t i;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	a = gsrv_pool_alloc(p, 40);
	b = gsrv_pool_alloc(p, 48);
	c = gsrv_pool_alloc(p, 49);
	CHECK(a != NULL && b != NULL && c != NULL);
	CHECK((uintptr_t)a % 16 == 0 && (uintptr_t)c % 16 == 0);
	CHECK(b >= a + 40 || a >= b + 48);
	memset(a, 1, 40);
	memset(b, 2, 48);
	memset(c, 3, 49);
	/* Freed, the next block of its class is the same memory; another
	 * class does not get it. */
	gsrv_pool_release(p, a);
	CHECK(gsrv_pool_alloc(p, 64) != a);
	CHECK(gsrv_pool_alloc(p, 33) == a);
	for (i = 0; i < 48 && b[i] == 2; i++)
		;
	CHECK_INT(i, 48);
	/* Zeroed when asked, whatever the block held. */
	gsrv_pool_release(p, c);
	z = gsrv_pool_calloc(p, 50);
	CHECK(z == c);
	for (i = 0; i < 50 && z[i] == 0; i++)
		;
	CHECK_INT(i, 50);
	/* Past the classes: malloc's, released as such. */
	big = gsrv_pool_alloc(p, 100000);
	CHECK(big != NULL);
	memset(big, 4, 100000);
	/* realloc keeps the bytes, within a class and across. */
	CHECK(gsrv_pool_realloc(p, b, 40) == b);
	b = gsrv_pool_realloc(p, b, 300);
	CHECK(b != NULL);
	for (i = 0; i < 48 && b[i] == 2; i++)
		;
	CHECK_INT(i, 48);
	big = gsrv_pool_realloc(p, big, 200000);
	CHECK(big != NULL && big[99999] == 4);
	gsrv_pool_release(p, big);
	gsrv_pool_release(p, b);
	gsrv_pool_release(p, NULL);
	/* More than a piece's worth. */
	for (i = 0; i < 2000; i++)
		CHECK(gsrv_pool_alloc(p, 100) != NULL);
	gsrv_pool_free(p);
}

static void
test_chunks(struct grpc_server *srv)
{
	struct gsrv_slab *s[130];
	size_t i;

	CHECK_INT(gsrv_slabs_mapped(srv), CHUNK);	/* from the tests above */
	for (i = 0; i < 130; i++) {
		s[i] = gsrv_slab_new(srv);
		CHECK(s[i] != NULL);
	}
	CHECK_INT(gsrv_slabs_mapped(srv), 3 * CHUNK);
	for (i = 0; i < 130; i++)
		CHECK(i == 0 || s[i] != s[i - 1]);
	/* Every slab free: one chunk stays for the next connection. */
	for (i = 0; i < 130; i++)
		gsrv_slab_free(srv, s[i]);
	CHECK_INT(gsrv_slabs_mapped(srv), CHUNK);
	s[0] = gsrv_slab_new(srv);
	CHECK(s[0] != NULL);
	CHECK_INT(gsrv_slabs_mapped(srv), CHUNK);
	gsrv_slab_free(srv, s[0]);
}

int
main(void)
{
	struct event_base *base = event_base_new();
	struct grpc_server *srv = grpc_server_new(base, NULL, 0, NULL);

	CHECK(srv != NULL);
	if (srv == NULL)
		return check_done("grpc_mem");
	test_blocks(srv);
	test_h2_session(srv);
	test_events(srv, base);
	test_pages(srv, base);
	test_pool();
	test_chunks(srv);
	grpc_server_free(srv);
	event_base_free(base);
	return check_done("grpc_mem");
}
