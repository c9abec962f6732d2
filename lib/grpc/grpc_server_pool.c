/*
 * nghttp2's blocks that come and go while a session runs: a stream and its
 * state, each header field's buffer, each queued frame. A call makes some
 * thirty of them, all small, and frees them when it ends; through malloc
 * that was about 6,000 instructions a call. Here each size class (16 bytes
 * apart, up to 512) has a free list, refilled from 64 KiB pieces that the
 * server keeps: a block freed is the next one of its class handed out,
 * on memory that is already faulted in. Larger blocks are malloc's.
 *
 * nghttp2's free has no size, so every block has its class in the 16 bytes
 * before it (which keeps the 16-byte alignment malloc gives). Free blocks
 * are off limits to ASan and memcheck, as malloc's are.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_server_int.h"

#define CLASS_STEP	16
#define CLASSES		32		/* blocks up to 512 bytes */
#define PIECE_SIZE	(64 * 1024)
#define LARGE		CLASSES		/* the class of malloc's blocks */

struct block {
	uint32_t cls;
	uint32_t size;			/* of a LARGE one */
	uint64_t pad;
};

struct free_block {
	struct free_block *next;
};

struct piece {
	struct piece *next;
};

struct gsrv_pool {
	struct free_block *free[CLASSES];
	char *at;			/* the current piece's room */
	size_t left;
	struct piece *pieces;
};

struct gsrv_pool *
gsrv_pool_new(void)
{
	return calloc(1, sizeof(struct gsrv_pool));
}

void
gsrv_pool_free(struct gsrv_pool *p)
{
	struct piece *pc;

	if (p == NULL)
		return;
	while ((pc = p->pieces) != NULL) {
		p->pieces = pc->next;
		UNPOISON(pc, PIECE_SIZE);
		free(pc);
	}
	free(p);
}

void *
gsrv_pool_alloc(struct gsrv_pool *p, size_t size)
{
	size_t cls = size == 0 ? 0 : (size - 1) / CLASS_STEP;
	size_t need = sizeof(struct block) + (cls + 1) * CLASS_STEP;
	struct block *b;

	if (cls >= CLASSES) {
		if (size > UINT32_MAX || (b = malloc(sizeof(*b) + size)) == NULL)
			return NULL;
		b->cls = LARGE;
		b->size = (uint32_t)size;
		return b + 1;
	}
	if (p->free[cls] != NULL) {
		b = (struct block *)p->free[cls] - 1;
		UNPOISON(b, need);
		p->free[cls] = p->free[cls]->next;
	} else {
		if (p->left < need) {
			struct piece *pc = malloc(PIECE_SIZE);

			if (pc == NULL)
				return NULL;
			pc->next = p->pieces;
			p->pieces = pc;
			p->at = (char *)pc + CLASS_STEP;
			p->left = PIECE_SIZE - CLASS_STEP;
			POISON(p->at, p->left);
		}
		b = (struct block *)p->at;
		p->at += need;
		p->left -= need;
		UNPOISON(b, need);
	}
	b->cls = (uint32_t)cls;
	return b + 1;
}

void *
gsrv_pool_calloc(struct gsrv_pool *p, size_t size)
{
	void *v = gsrv_pool_alloc(p, size);

	if (v != NULL)
		memset(v, 0, size);
	return v;
}

void
gsrv_pool_release(struct gsrv_pool *p, void *v)
{
	struct free_block *f = v;
	struct block *b;
	uint32_t cls;

	if (v == NULL)
		return;
	b = (struct block *)v - 1;
	cls = b->cls;
	if (cls == LARGE) {
		free(b);
		return;
	}
	f->next = p->free[cls];
	p->free[cls] = f;
	POISON(b, sizeof(*b));
	POISON((char *)v + sizeof(*f), (cls + 1) * CLASS_STEP - sizeof(*f));
}

void *
gsrv_pool_realloc(struct gsrv_pool *p, void *v, size_t size)
{
	struct block *b;
	size_t had;
	void *n;

	if (v == NULL)
		return gsrv_pool_alloc(p, size);
	b = (struct block *)v - 1;
	had = b->cls == LARGE ? b->size : (b->cls + 1) * CLASS_STEP;
	if (size <= had && b->cls != LARGE)
		return v;
	if ((n = gsrv_pool_alloc(p, size)) == NULL)
		return NULL;
	memcpy(n, v, had < size ? had : size);
	gsrv_pool_release(p, v);
	return n;
}
