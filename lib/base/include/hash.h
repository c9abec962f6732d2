/*
 * A small open-addressing hash table of pointers (linear probing, deletion
 * by backward shift, so there are no tombstones). The table stores items,
 * not keys: the caller hashes its key, and a match function says whether an
 * item has that key. The rendezvous core indexes jobs and nodes with it.
 */
#ifndef RDZV_HASH_H
#define RDZV_HASH_H

#include <stddef.h>
#include <stdint.h>

struct hash_slot {
	uint64_t	 hv;
	void		*item;		/* NULL: empty */
};

struct hash {
	struct hash_slot *slots;
	size_t		  cap;		/* 0 or a power of two */
	size_t		  n;
};

/* A 64-bit hash of bytes (FNV-1a with a final mix). */
uint64_t	 hash_bytes(const void *, size_t);
uint64_t	 hash_u64(uint64_t);

void		 hash_init(struct hash *);
/* Frees the table only; the items belong to the caller. */
void		 hash_free(struct hash *);
/* The item whose hash is hv and that match() accepts, or NULL. */
void		*hash_find(const struct hash *, uint64_t hv,
		    int (*match)(const void *item, const void *key),
		    const void *key);
/* Adds an item (the caller checked it is absent). 0 or -ENOMEM. */
int		 hash_insert(struct hash *, uint64_t hv, void *item);
/* Removes this very item (compared by pointer); 0, or -ENOENT. */
int		 hash_remove(struct hash *, uint64_t hv, const void *item);

#endif
