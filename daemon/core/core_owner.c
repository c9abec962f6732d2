/*
 * The identities that own jobs, and the bound on the ended jobs each may
 * leave behind. Ended jobs stay visible for the retention (SPEC §4 rule
 * 12), 7 days by default; a client that creates and closes jobs in a loop
 * would have rdzvd keep every one of them that long. So each owner keeps
 * at most max_ended_per_owner ended jobs: when one more ends, the one that
 * ended first is removed as its retention would have removed it (the store
 * deletes its rows on either backend in the same commit), and is counted
 * (rdzvd_ended_jobs_pruned_total). Live jobs are bounded separately
 * (max_jobs_per_owner, core.c).
 */
#include <stdlib.h>
#include <string.h>

#include "core_int.h"

static int
match_owner(const void *item, const void *key)
{
	return strcmp(((const struct core_owner *)item)->name, key) == 0;
}

/* The owner record of |name|, made on first use; kept until core_free. */
struct core_owner *
core_owner_get(struct core *c, const char *name)
{
	struct core_owner *o;
	uint64_t hv = hash_bytes(name, strlen(name));

	if ((o = hash_find(&c->by_owner, hv, match_owner, name)) != NULL)
		return o;
	o = xcalloc(1, sizeof(*o));
	o->name = xstrdup(name);
	TAILQ_INIT(&o->ended);
	if (hash_insert(&c->by_owner, hv, o) != 0)
		abort();
	return o;
}

static void
append(struct core_job *j)
{
	struct core_owner *o = j->own;

	TAILQ_INSERT_TAIL(&o->ended, j, owner_entry);
	j->in_owner_ended = true;
	o->n_ended++;
}

/* A job of the owner ended now: it is the newest; the oldest beyond the
 * bound go. */
void
core_owner_job_ended(struct core_job *j)
{
	struct core_owner *o = j->own;
	struct core_job *old;
	uint32_t max = j->core->cfg.max_ended_per_owner;

	core_owner_job_unended(j);
	append(j);
	if (max == 0)
		max = 1;
	while (o->n_ended > max && (old = TAILQ_FIRST(&o->ended)) != j) {
		old->pruned = true;
		core_job_remove(old);	/* unlinks it from o->ended */
	}
}

static int
by_ended(const void *a, const void *b)
{
	const struct core_job *x = *(struct core_job *const *)a;
	const struct core_job *y = *(struct core_job *const *)b;

	if (x->ended_ms != y->ended_ms)
		return x->ended_ms < y->ended_ms ? -1 : 1;
	return strcmp(x->rdzv_id, y->rdzv_id);
}

/*
 * After a restore: every owner's ended jobs in the order they ended. A
 * bound lowered since they ended applies when the owner's next job ends.
 */
void
core_owners_restore(struct core *c)
{
	struct core_job **v, *j;
	size_t n = 0;

	v = xreallocarray(NULL, c->n_jobs + 1, sizeof(*v));
	TAILQ_FOREACH(j, &c->jobs, entry)
		if (core_job_ended(j) && !j->in_owner_ended)
			v[n++] = j;
	qsort(v, n, sizeof(*v), by_ended);
	for (size_t i = 0; i < n; i++)
		append(v[i]);
	free(v);
}

void
core_owners_free(struct core *c)
{
	for (size_t i = 0; i < c->by_owner.cap; i++) {
		struct core_owner *o = c->by_owner.slots[i].item;
		if (o == NULL)
			continue;
		free(o->name);
		free(o);
	}
	hash_free(&c->by_owner);
}
