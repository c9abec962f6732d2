/*
 * A connection's memory: one slab per connection holds its struct, its
 * events and the blocks nghttp2 allocates for the session's whole life
 * (the session, the indexes of its two header tables, its stream map and
 * its outgoing frame buffer).
 *
 * Where each goes is chosen so that a connection keeps two pages resident:
 * the struct, its events, the session and the frame buffer are packed from
 * the slab's start, in that order, so that the first page holds all of
 * them but the frame buffer's untouched tail; the sparse tables (the header
 * tables' rings, which rdzv's clients never fill since they do not index,
 * and the stream map, a calloc'd hash of which a few buckets are used) go
 * to the slab's end, the map on a page of its own. That is nghttp2 1.52's
 * set of blocks; another version's only costs a page more, never
 * correctness.
 *
 * Why: nghttp2's frame buffer is 16 KiB, and every frame is written at its
 * start. gRPC's frames here are a few hundred bytes, so most of the buffer
 * is never touched. In malloc's heap its first and last pages are shared
 * with other blocks and it costs about a page per connection; last in a
 * slab, whose tail nothing else uses, it costs the bytes its frames touch
 * and the rest stays address space that was never faulted in. Packing
 * the session's other blocks and the connection beside it saves malloc's
 * headers and what their pages would share with shorter-lived blocks.
 * (rdzv-bench, 10,000 nodes: 8 KiB of each slab resident, 12 before the
 * tables went to the end, and two page faults a connection.)
 *
 * Blocks nghttp2 asks for once the session exists (streams, header table
 * entries, queued frames) come and go and are the server's pool's
 * (grpc_server_pool.c). Slabs come
 * SLABS_PER_CHUNK at a time from one mapping and are reused once their
 * connection closes; a chunk whose slabs are all free is unmapped unless
 * it is the only one with room.
 */
#include <sys/mman.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "grpc_server_int.h"


/*
 * A slab's size: the connection (about 0.8 KiB with its events), nghttp2's
 * session-long blocks (about 9 KiB in 1.52) and its 16 KiB frame buffer
 * fit with room to spare. What does not fit comes from malloc instead.
 */
#define SLAB_SIZE	(32 * 1024)
#define SLABS_PER_CHUNK	64
#define CHUNK_SIZE	((size_t)SLAB_SIZE * SLABS_PER_CHUNK)
#define ALIGN		16
_Static_assert(SLAB_SIZE <= UINT16_MAX, "slab offsets are 16 bits");
#define PAGE		4096
/* A block of nghttp2's this large or larger is a table, not a struct. */
#define TABLE_MIN	1024
/* nghttp2 1.52 makes six when a session starts. */
#define MAX_H2_BLOCKS	8

struct slab_chunk {
	TAILQ_ENTRY(slab_chunk) entry;
	struct gsrv_slabs *owner;
	char *base;
	uint64_t used;		/* a bit per slab */
	uint64_t dirty;		/* ... that has been used */
};

struct gsrv_slabs {
	TAILQ_HEAD(, slab_chunk) room;	/* chunks with a free slab */
	struct gsrv_pool *pool;		/* nghttp2's other blocks */
	size_t n_room;
	size_t n_chunks;
};

/*
 * A slab starts with this; its blocks follow, with nothing between them
 * (a size before each would be written on pages nothing else touches).
 * nghttp2's blocks are the only ones it may grow: blocks[] keeps their
 * offsets and sizes.
 */
struct gsrv_slab {
	struct slab_chunk *chunk;
	uint16_t used;		/* bytes taken from the start, this header
				   included */
	uint16_t top;		/* where the blocks at the end begin */
	uint16_t blocks[MAX_H2_BLOCKS][2];	/* nghttp2's: offset, size */
	uint8_t n_blocks;
	uint8_t h2_init;	/* nghttp2's session is being made */
	uint8_t sealed;		/* it was: nothing more goes after its
				   frame buffer */
	uint8_t fresh;		/* never used: still the kernel's zeroes */
};

static int
in_slab(const struct gsrv_slab *s, const void *p)
{
	const char *b = (const char *)s;

	return (const char *)p >= b && (const char *)p < b + SLAB_SIZE;
}

static struct gsrv_slabs *
slabs_of(struct grpc_server *srv)
{
	struct gsrv_slabs *pool;

	if (srv->slabs != NULL)
		return srv->slabs;
	if ((pool = calloc(1, sizeof(*pool))) == NULL)
		return NULL;
	if ((pool->pool = gsrv_pool_new()) == NULL) {
		free(pool);
		return NULL;
	}
	TAILQ_INIT(&pool->room);
	return srv->slabs = pool;
}

static struct slab_chunk *
chunk_new(void)
{
	struct slab_chunk *ch = calloc(1, sizeof(*ch));

	if (ch == NULL)
		return NULL;
	ch->base = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ch->base == MAP_FAILED) {
		free(ch);
		return NULL;
	}
	/* Huge pages would make the frame buffers' untouched pages
	 * resident (THP set to "always"). */
	(void)madvise(ch->base, CHUNK_SIZE, MADV_NOHUGEPAGE);
	POISON(ch->base, CHUNK_SIZE);
	return ch;
}

static void
chunk_free(struct slab_chunk *ch)
{
	UNPOISON(ch->base, CHUNK_SIZE);
	munmap(ch->base, CHUNK_SIZE);
	free(ch);
}

struct gsrv_slab *
gsrv_slab_new(struct grpc_server *srv)
{
	struct gsrv_slabs *pool = slabs_of(srv);
	struct slab_chunk *ch;
	struct gsrv_slab *s;
	int i;

	if (pool == NULL)
		return NULL;
	if ((ch = TAILQ_FIRST(&pool->room)) == NULL) {
		if ((ch = chunk_new()) == NULL)
			return NULL;
		ch->owner = pool;
		TAILQ_INSERT_HEAD(&pool->room, ch, entry);
		pool->n_room++;
		pool->n_chunks++;
	}
	i = __builtin_ctzll(~ch->used);
	ch->used |= (uint64_t)1 << i;
	if (ch->used == UINT64_MAX) {
		TAILQ_REMOVE(&pool->room, ch, entry);
		pool->n_room--;
	}
	s = (struct gsrv_slab *)(ch->base + (size_t)i * SLAB_SIZE);
	UNPOISON(s, sizeof(*s));
	s->chunk = ch;
	s->fresh = (ch->dirty & (uint64_t)1 << i) == 0;
	ch->dirty |= (uint64_t)1 << i;
	s->used = (sizeof(*s) + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	s->top = SLAB_SIZE;
	s->n_blocks = 0;
	s->h2_init = 0;
	s->sealed = 0;
	return s;
}

void
gsrv_slab_free(struct grpc_server *srv, struct gsrv_slab *s)
{
	struct gsrv_slabs *pool = srv->slabs;
	struct slab_chunk *ch;
	int i;

	if (s == NULL)
		return;
	ch = s->chunk;
	i = (int)(((char *)s - ch->base) / SLAB_SIZE);
	POISON(s, SLAB_SIZE);
	if (ch->used == UINT64_MAX) {
		TAILQ_INSERT_TAIL(&pool->room, ch, entry);
		pool->n_room++;
	}
	ch->used &= ~((uint64_t)1 << i);
	/* Its pages stay for the next connection, unless another chunk has
	 * room for it. */
	if (ch->used == 0 && pool->n_room > 1) {
		TAILQ_REMOVE(&pool->room, ch, entry);
		pool->n_room--;
		pool->n_chunks--;
		chunk_free(ch);
	}
}

size_t
gsrv_slabs_mapped(const struct grpc_server *srv)
{
	return srv->slabs != NULL ? srv->slabs->n_chunks * CHUNK_SIZE : 0;
}

size_t
gsrv_slab_used(const struct gsrv_slab *s)
{
	return (size_t)s->used + (SLAB_SIZE - s->top);
}

void
gsrv_slabs_free(struct grpc_server *srv)
{
	struct slab_chunk *ch;

	if (srv->slabs == NULL)
		return;
	/* Every connection is gone: every chunk has room. */
	while ((ch = TAILQ_FIRST(&srv->slabs->room)) != NULL) {
		TAILQ_REMOVE(&srv->slabs->room, ch, entry);
		chunk_free(ch);
	}
	gsrv_pool_free(srv->slabs->pool);
	free(srv->slabs);
	srv->slabs = NULL;
}

void *
gsrv_slab_alloc(struct gsrv_slab *s, size_t size)
{
	size_t need, at;

	if (s->sealed || size > SLAB_SIZE)
		return NULL;
	need = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (need > (size_t)(s->top - s->used))
		return NULL;
	at = s->used;
	s->used = (uint16_t)(at + need);
	UNPOISON((char *)s + at, size);
	return (char *)s + at;
}

/*
 * A table at the slab's end, below the ones already there, on a page of
 * its own when it is a page or more; NULL when it does not fit. A new
 * mapping's pages are zero, but a table nghttp2 reads before it writes
 * (the stream map's lookups) would fault twice, the kernel's zero page
 * first: one write now makes that one fault.
 */
static void *
slab_alloc_top(struct gsrv_slab *s, size_t size, int zero)
{
	size_t at;
	char *p;

	if (size > (size_t)(s->top - s->used))
		return NULL;
	at = (s->top - size) & ~(size_t)(size >= PAGE ? PAGE - 1 : ALIGN - 1);
	if (at < s->used)
		return NULL;
	s->top = (uint16_t)at;
	p = (char *)s + at;
	UNPOISON(p, size);
	if (zero && !s->fresh)
		memset(p, 0, size);
	else if (zero) {
		DEFINED(p, size);
		*(volatile char *)p = 0;
	}
	return p;
}

/*
 * nghttp2's block of |size| while its session is made: from the start, or
 * a table at the end when |top|; listed, since nghttp2 may grow it. NULL
 * when it does not fit (or once the session is made).
 */
static void *
h2_block(struct gsrv_slab *s, size_t size, int top, int zero)
{
	void *p;

	if (!s->h2_init || s->n_blocks == MAX_H2_BLOCKS)
		return NULL;
	if (top)
		p = slab_alloc_top(s, size, zero);
	else
		p = zero ? gsrv_slab_zalloc(s, size) : gsrv_slab_alloc(s, size);
	if (p == NULL)
		return NULL;
	s->blocks[s->n_blocks][0] = (uint16_t)((char *)p - (char *)s);
	s->blocks[s->n_blocks][1] = (uint16_t)size;
	s->n_blocks++;
	return p;
}

/* The size of an nghttp2 block in the slab. */
static size_t
h2_block_size(const struct gsrv_slab *s, const void *p)
{
	size_t off = (size_t)((const char *)p - (const char *)s);

	for (int i = 0; i < s->n_blocks; i++)
		if (s->blocks[i][0] == off)
			return s->blocks[i][1];
	return 0;
}

void *
gsrv_slab_zalloc(struct gsrv_slab *s, size_t size)
{
	void *p = gsrv_slab_alloc(s, size);

	/* A new mapping's pages are zero: clearing them would only fault
	 * them in sooner. */
	if (p != NULL && !s->fresh)
		memset(p, 0, size);
	else if (p != NULL)
		DEFINED(p, size);
	return p;
}

char *
gsrv_slab_strdup(struct gsrv_slab *s, const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = gsrv_slab_alloc(s, n);

	if (p == NULL)
		return strdup(str);
	memcpy(p, str, n);
	return p;
}

void
gsrv_slab_release(struct gsrv_slab *s, void *p)
{
	if (!in_slab(s, p))
		free(p);
}

/* ---------------------------------------------- nghttp2's allocator */

#define POOL(s)	((s)->chunk->owner->pool)

/*
 * While the session is made: the header tables' rings (malloc'd, filled
 * only by indexed headers) at the slab's end, the rest from its start.
 * Afterwards: the server's pool.
 */
static void *
h2_malloc(size_t size, void *arg)
{
	struct gsrv_slab *s = arg;
	void *p;

	if ((p = h2_block(s, size, size >= TABLE_MIN, 0)) != NULL)
		return p;
	return gsrv_pool_alloc(POOL(s), size);
}

/* A slab's blocks live as long as the connection. */
static void
h2_free(void *ptr, void *arg)
{
	struct gsrv_slab *s = arg;

	if (!in_slab(s, ptr))
		gsrv_pool_release(POOL(s), ptr);
}

static void *
h2_calloc(size_t n, size_t size, void *arg)
{
	struct gsrv_slab *s = arg;
	void *p;

	if (size == 0 || n > SIZE_MAX / size)
		return NULL;
	/* The session is dense; the stream map, a page, is a sparse hash. */
	if ((p = h2_block(s, n * size, n * size >= PAGE, 1)) != NULL)
		return p;
	return gsrv_pool_calloc(POOL(s), n * size);
}

static void *
h2_realloc(void *ptr, size_t size, void *arg)
{
	struct gsrv_slab *s = arg;
	size_t had;
	void *p;

	/* nghttp2 makes its frame buffer with realloc(NULL, ...): from the
	 * start, where its first bytes share the session's page. */
	if (ptr == NULL) {
		if ((p = h2_block(s, size, 0, 0)) != NULL)
			return p;
		return gsrv_pool_alloc(POOL(s), size);
	}
	if (!in_slab(s, ptr))
		return gsrv_pool_realloc(POOL(s), ptr, size);
	had = h2_block_size(s, ptr);
	if (size <= had)
		return ptr;
	if ((p = gsrv_pool_alloc(POOL(s), size)) != NULL)
		memcpy(p, ptr, had);
	return p;
}

int
gsrv_slab_h2_server_new(struct gsrv_slab *s, nghttp2_session **h2,
    const nghttp2_session_callbacks *cbs, void *user_data,
    const nghttp2_option *opt)
{
	/* nghttp2 keeps a copy of it. */
	nghttp2_mem mem = { s, h2_malloc, h2_free, h2_calloc, h2_realloc };
	int rv;

	s->h2_init = 1;
	rv = nghttp2_session_server_new3(h2, cbs, user_data, opt, &mem);
	s->h2_init = 0;
	s->sealed = 1;
	return rv;
}

/* ------------------------------------------------------------ events */

struct event *
gsrv_slab_event(struct gsrv_slab *s, struct event_base *base,
    evutil_socket_t fd, short what, event_callback_fn cb, void *arg)
{
	struct event *ev = gsrv_slab_alloc(s, event_get_struct_event_size());

	if (ev == NULL)
		return event_new(base, fd, what, cb, arg);
	if (event_assign(ev, base, fd, what, cb, arg) != 0)
		return NULL;
	return ev;
}

void
gsrv_slab_event_free(struct gsrv_slab *s, struct event *ev)
{
	if (ev == NULL)
		return;
	if (in_slab(s, ev))
		event_del(ev);
	else
		event_free(ev);
}
