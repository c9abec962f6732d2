/*
 * Open addressing with linear probing. The load factor stays at or below
 * one half, and removal shifts later entries of the probe run back instead
 * of leaving tombstones, so lookups never slow down as items come and go.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

uint64_t
hash_u64(uint64_t x)
{
	/* splitmix64's finaliser: every input bit reaches every output bit. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t
hash_bytes(const void *p, size_t len)
{
	const unsigned char	*b = p;
	uint64_t		 h = 0xcbf29ce484222325ULL;
	size_t			 i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return hash_u64(h);
}

void
hash_init(struct hash *h)
{
	memset(h, 0, sizeof(*h));
}

void
hash_free(struct hash *h)
{
	if (h == NULL)
		return;
	free(h->slots);
	hash_init(h);
}

void *
hash_find(const struct hash *h, uint64_t hv,
    int (*match)(const void *, const void *), const void *key)
{
	size_t	mask, i;

	if (h->cap == 0)
		return NULL;
	mask = h->cap - 1;
	for (i = hv & mask; h->slots[i].item != NULL; i = (i + 1) & mask) {
		if (h->slots[i].hv == hv && match(h->slots[i].item, key))
			return h->slots[i].item;
	}
	return NULL;
}

static void
hash_place(struct hash_slot *slots, size_t cap, uint64_t hv, void *item)
{
	size_t	mask = cap - 1, i;

	for (i = hv & mask; slots[i].item != NULL; i = (i + 1) & mask)
		;
	slots[i].hv = hv;
	slots[i].item = item;
}

static int
hash_grow(struct hash *h)
{
	struct hash_slot	*slots;
	size_t			 cap, i;

	cap = h->cap == 0 ? 16 : h->cap * 2;
	if ((slots = calloc(cap, sizeof(*slots))) == NULL)
		return -ENOMEM;
	for (i = 0; i < h->cap; i++) {
		if (h->slots[i].item != NULL)
			hash_place(slots, cap, h->slots[i].hv,
			    h->slots[i].item);
	}
	free(h->slots);
	h->slots = slots;
	h->cap = cap;
	return 0;
}

int
hash_insert(struct hash *h, uint64_t hv, void *item)
{
	int	rc;

	if ((h->n + 1) * 2 > h->cap && (rc = hash_grow(h)) != 0)
		return rc;
	hash_place(h->slots, h->cap, hv, item);
	h->n++;
	return 0;
}

int
hash_remove(struct hash *h, uint64_t hv, const void *item)
{
	size_t	mask, i, j, home;

	if (h->cap == 0)
		return -ENOENT;
	mask = h->cap - 1;
	for (i = hv & mask; h->slots[i].item != item; i = (i + 1) & mask) {
		if (h->slots[i].item == NULL)
			return -ENOENT;
	}
	/*
	 * Backward shift: move each later entry of the run into the hole
	 * when its home slot does not lie cyclically in (hole, entry].
	 */
	for (j = (i + 1) & mask; h->slots[j].item != NULL; j = (j + 1) & mask) {
		home = h->slots[j].hv & mask;
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			h->slots[i] = h->slots[j];
			i = j;
		}
	}
	h->slots[i].item = NULL;
	h->slots[i].hv = 0;
	h->n--;
	return 0;
}
