/*
 * rdzvd --migrate-store FROM TO (store.h): a copy of one store into
 * another, typically an SQLite file into an etcd prefix when a single
 * rdzvd becomes replicas (docs/HA.md). The copy goes through the core, as
 * a restart does: FROM is loaded into a fresh core, every job and node of
 * it is marked to be written, its whole event history is queued as the
 * turn's new events, and TO commits that as one turn (the etcd store packs
 * it into as many Txns as etcd's limits want).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errf.h"
#include "store.h"

struct history {
	struct core	*c;
	struct core_job	*j;
	int		 failed;
};

/* Appends one event of FROM's history to the turn's new events. */
static int
history_add(const struct core_event *e, void *arg)
{
	struct history		*h = arg;
	struct core		*c = h->c;
	struct core_event	*v;

	if (c->n_new_events == c->new_events_cap) {
		size_t cap = c->new_events_cap != 0 ? c->new_events_cap * 2 :
		    256;

		v = reallocarray(c->new_events, cap, sizeof(*v));
		if (v == NULL) {
			h->failed = 1;
			return 1;
		}
		c->new_events = v;
		c->new_events_cap = cap;
	}
	c->new_events[c->n_new_events] = *e;
	c->new_events[c->n_new_events++].job = h->j;
	return 0;
}

/*
 * Everything loaded becomes this turn's change. The core's own
 * core_job_dirty() would also stamp updated_ms and the deadlines' time
 * left with the present; a copy keeps them as FROM had them, so the lists
 * are filled here directly.
 */
static int
mark_all(struct store *from, struct core *c, struct store_migrated *out,
    char *err, size_t errlen)
{
	struct core_job		*j;
	struct core_node	*n;
	struct history		 h = { .c = c };

	TAILQ_FOREACH(j, &c->jobs, entry) {
		j->dirty = true;
		TAILQ_INSERT_TAIL(&c->dirty_jobs, j, dirty_entry);
		out->jobs++;
		TAILQ_FOREACH(n, &j->nodes, entry) {
			n->dirty = true;
			n->gpus_dirty = n->n_gpus > 0;
			TAILQ_INSERT_TAIL(&c->dirty_nodes, n, dirty_entry);
			out->nodes++;
		}
		h.j = j;
		if (store_events(from, j->rdzv_id, 0, UINT32_MAX, history_add,
		    &h, err, errlen) != 0)
			return -1;
		if (h.failed)
			return errf(-1, err, errlen, "out of memory");
	}
	out->events = c->n_new_events;
	hosts_dirty_all(c->hosts);
	return 0;
}

int
store_migrate(const char *from, const char *to, const struct store_opts *opts,
    struct core_now now, struct store_migrated *out, char *err,
    size_t errlen)
{
	struct store		*src = NULL, *dst = NULL;
	struct store_opts	 ro;
	struct core		*c;
	char		 e[1024];
	int		 rc = -1, empty;

	memset(out, 0, sizeof(*out));
	/* Opening an SQLite store creates it: FROM must be there already. */
	{
		struct store_spec *sp = malloc(sizeof(*sp));

		if (sp == NULL)
			return errf(-1, err, errlen, "out of memory");
		if (store_spec_parse(from, sp, e, sizeof(e)) != 0) {
			free(sp);
			return errf(-1, err, errlen, "%s", e);
		}
		if (sp->kind == STORE_SQLITE && access(sp->path, F_OK) != 0) {
			errf(-1, err, errlen, "no database at %s: %s", sp->path,
			    strerror(errno));
			free(sp);
			return -1;
		}
		free(sp);
	}
	if ((c = core_new(NULL)) == NULL)
		return errf(-1, err, errlen, "out of memory");
	ro = *opts;
	ro.read_only = 1;
	if (store_open_opts(from, &ro, &src, e, sizeof(e)) != 0 ||
	    store_load(src, c, now, e, sizeof(e)) != 0) {
		errf(-1, err, errlen, "reading %s: %s", from, e);
		goto out;
	}
	if (store_open_opts(to, opts, &dst, e, sizeof(e)) != 0) {
		errf(-1, err, errlen, "opening %s: %s", to, e);
		goto out;
	}
	if ((empty = store_is_empty(dst, e, sizeof(e))) < 0) {
		errf(-1, err, errlen, "%s: %s", to, e);
		goto out;
	}
	if (!empty) {
		errf(-1, err, errlen, "%s is not empty: copy into a new "
		    "database or an etcd prefix that holds no key (nothing was "
		    "written)", store_path(dst));
		goto out;
	}
	if (mark_all(src, c, out, e, sizeof(e)) != 0 ||
	    store_commit(dst, c, e, sizeof(e)) != 0) {
		errf(-1, err, errlen, "writing %s: %s", store_path(dst), e);
		goto out;
	}
	out->transactions = store_transactions(dst);
	out->bytes = store_bytes_written(dst);
	rc = 0;
out:
	store_close(src);
	store_close(dst);
	core_free(c);
	return rc;
}
