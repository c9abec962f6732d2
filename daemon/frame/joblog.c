/*
 * One info line per job event that an operator reading the journal wants:
 * the job created or reopened, a round started (workers, nodes, restart
 * count), a round opened short of nodes, nodes gone (lost, left, evicted,
 * with how), a failure reported that did something (a restart, the end,
 * a hold for an away node), a node excused from a meeting because its
 * workers were still starting (rule 17: why a round came without a
 * restart), every hang (docs/HEALTH.md: rare, and where
 * to look for stacks), closing, and the end with its reason. Joins,
 * successes, GPU results and the reports that follow the first are per
 * node and stay in the job's events (rdzvctl events). Nodes that go or
 * report in the same turn (a rack that dies, scancel of a 10,000-node
 * job) make one line per job and kind with a count, so the journal grows
 * with rounds, not with nodes. Lines are written after the turn's commit,
 * in the events' order.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdzvd.h"
#include "xmalloc.h"
#include "text.h"

/* The kinds logged one line per job and turn, however many nodes. */
static bool
grouped(const char *kind)
{
	return strcmp(kind, "lost") == 0 || strcmp(kind, "left") == 0 ||
	    strcmp(kind, "evicted") == 0 || strcmp(kind, "failure") == 0 ||
	    strcmp(kind, "hang") == 0 || strcmp(kind, "nproc") == 0 ||
	    strcmp(kind, "refused") == 0 || strcmp(kind, "starting") == 0 ||
	    strcmp(kind, "repeat") == 0;
}

/* What a counted failure leads to in its turn. */
static bool
effect(const char *kind)
{
	return strcmp(kind, "round") == 0 || strcmp(kind, "waiting") == 0 ||
	    strcmp(kind, "held") == 0 || strcmp(kind, "failed") == 0 ||
	    strcmp(kind, "closed") == 0;
}

static bool
logged(const char *kind)
{
	return grouped(kind) || effect(kind) || strcmp(kind, "created") == 0 ||
	    strcmp(kind, "reopened") == 0 || strcmp(kind, "closing") == 0;
}

static int
ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(const void *const *)a;
	uintptr_t y = (uintptr_t)*(const void *const *)b;

	return x < y ? -1 : x > y;
}

/* Orders indices of grouped events by job, kind, then turn order. */
static const struct core_event	*sort_ev;

static int
group_cmp(const void *a, const void *b)
{
	const struct core_event	*x = &sort_ev[*(const size_t *)a];
	const struct core_event	*y = &sort_ev[*(const size_t *)b];
	int			 r;

	if (x->job != y->job)
		return (uintptr_t)x->job < (uintptr_t)y->job ? -1 : 1;
	if ((r = strcmp(x->kind, y->kind)) != 0)
		return r;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static void
log_round(const struct core *c, const struct core_event *e)
{
	const struct core_round	*r = NULL;
	size_t			 i;

	for (i = 0; i < c->n_new_rounds; i++)
		if (c->new_rounds[i].job == e->job &&
		    c->new_rounds[i].generation == e->generation)
			r = &c->new_rounds[i];
	if (r == NULL) {
		log_info("job %s: round: %s", e->job->rdzv_id, e->message);
		return;
	}
	log_info("job %s: round %llu started with %u worker%s on %u node%s "
	    "(master %s:%u, restart %u of max %u)", e->job->rdzv_id,
	    (unsigned long long)r->generation, r->world_size,
	    plural(r->world_size), r->n, plural(r->n),
	    r->master_addr, r->master_port, r->restart_count,
	    e->job->settings.max_restarts);
}

static void
log_one(const struct core *c, const struct core_event *e, size_t more)
{
	const char	*id = e->job->rdzv_id;

	if (strcmp(e->kind, "round") == 0)
		log_round(c, e);
	else if (strcmp(e->kind, "failed") == 0 ||
	    strcmp(e->kind, "closed") == 0)
		log_info("job %s: %s, attempt %u, generation %llu, %u "
		    "restart%s: %s", id, e->kind, e->job->attempt,
		    (unsigned long long)e->generation, e->job->restart_count,
		    plural(e->job->restart_count), e->message);
	else if (strcmp(e->kind, "waiting") == 0)
		log_info("job %s: %s", id, e->message);
	else if (more > 0)
		log_info("job %s: %s: %s; and %zu more node%s in the same "
		    "instant (rdzvctl events %s)", id, e->kind, e->message,
		    more, plural(more), id);
	else
		log_info("job %s: %s: %s", id, e->kind, e->message);
}

void
joblog_turn(const struct core *c, struct core_now now)
{
	const struct core_job	**acted;
	size_t			*idx, *more, n = 0, na = 0, i, k;

	(void)now;
	if (c->n_new_events == 0 || log_get_level() < LOG_LEVEL_INFO)
		return;
	/* more[i]: for the first event of a group, how many follow it;
	 * SIZE_MAX for the others, which are not logged. */
	idx = xcalloc(c->n_new_events, sizeof(*idx));
	more = xcalloc(c->n_new_events, sizeof(*more));
	acted = xcalloc(c->n_new_events, sizeof(*acted));
	/* The jobs in which something followed from a failure this turn: a
	 * report with no such effect (the peers' reports of the same
	 * failure, while it is held) is not logged. */
	for (i = 0; i < c->n_new_events; i++)
		if (c->new_events[i].job != NULL &&
		    effect(c->new_events[i].kind))
			acted[na++] = c->new_events[i].job;
	qsort(acted, na, sizeof(*acted), ptr_cmp);
	for (i = 0; i < c->n_new_events; i++)
		if (c->new_events[i].job != NULL &&
		    grouped(c->new_events[i].kind))
			idx[n++] = i;
	sort_ev = c->new_events;
	qsort(idx, n, sizeof(*idx), group_cmp);
	for (i = 0; i < n; i = k) {
		for (k = i + 1; k < n &&
		    c->new_events[idx[k]].job == c->new_events[idx[i]].job &&
		    strcmp(c->new_events[idx[k]].kind,
		    c->new_events[idx[i]].kind) == 0; k++)
			more[idx[k]] = SIZE_MAX;
		more[idx[i]] = k - i - 1;
	}
	for (i = 0; i < c->n_new_events; i++) {
		const struct core_event *e = &c->new_events[i];

		if (e->job == NULL || !logged(e->kind) || more[i] == SIZE_MAX)
			continue;
		if (strcmp(e->kind, "failure") == 0 && bsearch(&e->job, acted,
		    na, sizeof(*acted), ptr_cmp) == NULL)
			continue;
		log_one(c, e, more[i]);
	}
	free(idx);
	free(more);
	free(acted);
}
