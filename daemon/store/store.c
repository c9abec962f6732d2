/*
 * The store interface (store.h): the spec names a backend, and every call
 * goes through that backend's table (store_be.h). The spec is parsed in
 * store_spec.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store.h"
#include "store_be.h"

struct store {
	const struct store_ops	*ops;
	void			*be;
	uint64_t		 next_node_id;	/* as last loaded or committed */
	bool			 broken;	/* a commit failed; until a load */
	bool			 open_txn;	/* begun; store_commit_end next */
	uint64_t		 pending_node_id; /* what the open one saves */
	bool			 read_only;
	char			 desc[STORE_PATH_MAX + STORE_ENDPOINTS_MAX +
				    STORE_PREFIX_MAX + 16];
};

int
store_open_opts(const char *spec, const struct store_opts *opts,
    struct store **out, char *err, size_t errlen)
{
	static const struct store_opts	 none;
	struct store_spec		*sp;
	struct store			*s;

	*out = NULL;
	if (opts == NULL)
		opts = &none;
	if ((sp = malloc(sizeof(*sp))) == NULL ||
	    (s = calloc(1, sizeof(*s))) == NULL) {
		free(sp);
		return errf(-1, err, errlen, "out of memory");
	}
	if (store_spec_parse(spec, sp, err, errlen) != 0)
		goto bad;
	if (sp->kind == STORE_ETCD) {
		s->ops = &store_etcd_ops;
		snprintf(s->desc, sizeof(s->desc), "etcd://%s%s",
		    sp->endpoints, sp->prefix);
	} else {
		s->ops = &store_sqlite_ops;
		snprintf(s->desc, sizeof(s->desc), "%s", sp->path);
	}
	if (s->ops->open(sp, opts, &s->be, err, errlen) != 0)
		goto bad;
	s->next_node_id = 1;		/* a new core's (core_new) */
	s->read_only = opts->read_only != 0;
	free(sp);
	*out = s;
	return 0;

bad:
	free(sp);
	free(s);
	return -1;
}

int
store_open(const char *spec, struct store **out, char *err, size_t errlen)
{
	return store_open_opts(spec, NULL, out, err, errlen);
}

int
store_load(struct store *s, struct core *c, struct core_now now, char *err,
    size_t errlen)
{
	if (s->ops->load(s->be, c, now, err, errlen) != 0)
		return -1;
	/* The core now holds what the store holds (store.h). */
	s->next_node_id = c->next_node_id;
	s->broken = false;
	return 0;
}

static bool
commit_empty(const struct store *s, const struct core *c)
{
	return TAILQ_EMPTY(&c->removed_jobs) &&
	    TAILQ_EMPTY(&c->removed_nodes) && TAILQ_EMPTY(&c->dirty_jobs) &&
	    TAILQ_EMPTY(&c->dirty_nodes) && c->n_new_events == 0 &&
	    c->n_new_rounds == 0 && TAILQ_EMPTY(&c->hosts->dirty) &&
	    !c->refusals_dirty && c->next_node_id == s->next_node_id;
}

int
store_commit_begin(struct store *s, struct core *c, char *err, size_t errlen)
{
	bool	write_meta;

	if (s->broken)
		return errf(-1, err, errlen, "an earlier commit failed; %s "
		    "holds the state before it and must be loaded again "
		    "(restart rdzvd)", s->desc);
	if (s->open_txn)
		return errf(-1, err, errlen, "%s: a commit began before the "
		    "last one ended (an rdzvd bug)", s->desc);
	if (commit_empty(s, c))
		return 0;
	if (s->read_only)
		return errf(-1, err, errlen, "%s was opened to be read only",
		    s->desc);
	/* etcd keeps the kept refusals in its meta record. */
	write_meta = c->next_node_id != s->next_node_id || c->refusals_dirty;
	if (s->ops->commit_rows == NULL) {
		if (s->ops->commit(s->be, c, write_meta, err, errlen) != 0)
			goto bad;
		s->next_node_id = c->next_node_id;
		return 0;
	}
	if (s->ops->commit_rows(s->be, c, write_meta, err, errlen) != 0)
		goto bad;
	s->open_txn = true;
	s->pending_node_id = c->next_node_id;
	return 1;

bad:
	/*
	 * Never retried (SPEC §9): after a failed fsync or Txn the store's
	 * state is unknown, and memory is ahead of it.
	 */
	s->broken = true;
	return -1;
}

int
store_commit_end(struct store *s, char *err, size_t errlen)
{
	if (!s->open_txn)
		return errf(-1, err, errlen, "%s: no commit to end (an rdzvd "
		    "bug)", s->desc);
	s->open_txn = false;
	if (s->ops->commit_end(s->be, err, errlen) != 0) {
		s->broken = true;
		return -1;
	}
	s->next_node_id = s->pending_node_id;
	return 0;
}

int
store_commit(struct store *s, struct core *c, char *err, size_t errlen)
{
	int	rc = store_commit_begin(s, c, err, errlen);

	if (rc <= 0)
		return rc;
	return store_commit_end(s, err, errlen);
}

int
store_fence(struct store *s, const char *leader_key, int64_t create_revision)
{
	if (s == NULL)
		return -EINVAL;
	if (s->ops->fence == NULL)
		return -ENOTSUP;
	return s->ops->fence(s->be, leader_key, create_revision);
}

int
store_events(struct store *s, const char *rdzv_id, uint64_t after_seq,
    uint32_t limit, int (*cb)(const struct core_event *, void *), void *arg,
    char *err, size_t errlen)
{
	return s->ops->events(s->be, rdzv_id, after_seq, limit, cb, arg, err,
	    errlen);
}

int
store_is_empty(struct store *s, char *err, size_t errlen)
{
	return s->ops->empty(s->be, err, errlen);
}

enum store_kind
store_kind(const struct store *s)
{
	return s->ops->kind;
}

int
store_kind_etcd(const struct store *s)
{
	return s != NULL && s->ops->kind == STORE_ETCD;
}

uint64_t
store_transactions(const struct store *s)
{
	return s->ops->transactions(s->be);
}

uint64_t
store_bytes_written(const struct store *s)
{
	return s->ops->bytes_written != NULL ? s->ops->bytes_written(s->be) :
	    0;
}

const char *
store_path(const struct store *s)
{
	return s->desc;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	if (s->be != NULL)
		s->ops->close(s->be);
	free(s);
}

/* The SQLite backend's handle, for the store's tests that look inside. */
void *
store_backend(struct store *s)
{
	return s->be;
}
