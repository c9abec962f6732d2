/*
 * Allocation for the programs. Running out of memory is not an error that
 * rdzvd, rdzv-agent or rdzvctl can handle where it happens (the core, for
 * one, cannot be left half-updated), so like a failed assert() these abort
 * (tmux's xmalloc does the same). lib's own functions never use them: they
 * return -ENOMEM to their caller.
 */
#ifndef RDZV_XMALLOC_H
#define RDZV_XMALLOC_H

#include <stddef.h>

void	*xmalloc(size_t);
void	*xcalloc(size_t n, size_t size);
/* realloc(p, n * size), refusing an n * size that overflows. */
void	*xreallocarray(void *p, size_t n, size_t size);
/* A copy of s; NULL gives "". */
char	*xstrdup(const char *s);

#endif
