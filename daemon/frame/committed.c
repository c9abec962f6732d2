/*
 * The jobs as last committed, for the reads that must not show a state
 * before it is durable (issue 42; docs/RDZVD.md, "The commit pipeline").
 * While a turn's changes are written, or in flight to the disk, the core
 * is ahead of the store: a job it marked dirty may show a generation that
 * a crash would take back. ListJobs answers such a job from its copy here,
 * a shallow copy of the job's own fields as they were when its last commit
 * ended; a job no commit has held yet is left out. The copy's lists
 * (nodes, events) are not its own and are never walked: only a summary is
 * built from it (convert_job without nodes or events).
 *
 * Copies are taken when the store was loaded (every job is durable then)
 * and refreshed after each commit for the jobs it wrote, so a turn costs a
 * copy per job it changed, not per job.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "log.h"
#include "rdzvd.h"
#include "xmalloc.h"

static struct hash	 copies;	/* of struct core_job, by rdzv_id */
static bool		 ready;

static int
match(const void *item, const void *key)
{
	return strcmp(((const struct core_job *)item)->rdzv_id, key) == 0;
}

static uint64_t
hv(const char *id)
{
	return hash_bytes(id, strlen(id));
}

static void
drop(const char *id)
{
	struct core_job	*cp = hash_find(&copies, hv(id), match, id);

	if (cp != NULL) {
		hash_remove(&copies, hv(id), cp);
		free(cp);
	}
}

static void
keep(const struct core_job *j)
{
	struct core_job	*cp = hash_find(&copies, hv(j->rdzv_id), match,
			    j->rdzv_id);

	if (cp == NULL) {
		cp = xmalloc(sizeof(*cp));
		memcpy(cp, j, sizeof(*cp));
		if (hash_insert(&copies, hv(j->rdzv_id), cp) != 0)
			fatalx("committed: out of memory");
		return;
	}
	memcpy(cp, j, sizeof(*cp));
}

void
committed_free(void)
{
	for (size_t i = 0; i < copies.cap; i++)
		free(copies.slots[i].item);
	hash_free(&copies);
	hash_init(&copies);
	ready = false;
}

void
committed_load(const struct core *c)
{
	const struct core_job	*j;

	committed_free();
	TAILQ_FOREACH(j, &c->jobs, entry)
		keep(j);
	ready = true;
}

void
committed_turn(const struct core *c)
{
	const struct core_job	*j;

	if (!ready)
		return;
	TAILQ_FOREACH(j, &c->removed_jobs, entry)
		drop(j->rdzv_id);
	TAILQ_FOREACH(j, &c->dirty_jobs, dirty_entry)
		keep(j);
}

const struct core_job *
committed_job(const struct core_job *j)
{
	if (!j->dirty || !ready)
		return j;
	return hash_find(&copies, hv(j->rdzv_id), match, j->rdzv_id);
}
