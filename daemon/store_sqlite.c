/*
 * The SQLite store (SPEC §9), its group commit: at the end of every loop
 * turn the core's changes go into one transaction, so ten thousand joins
 * cost one fsync, and with WAL and synchronous=FULL a commit is on disk
 * when COMMIT returns. Every statement is prepared once for the store's
 * life. A failed commit poisons the store: memory is ahead of the disk,
 * and only a restart (which reloads the disk) can make them agree again.
 * Opening is in store_open.c, loading in store_load.c; docs/STORE.md is
 * the operator's view of all this.
 */
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_be.h"
#include "store_sqlite.h"
#include "errf.h"

/* An SQLite failure: what we were doing, then SQLite's own words. */
int
sqlstore_fail(struct sqlstore *s, char *err, size_t errlen, const char *what)
{
	return errf(-1, err, errlen, "%s: %s (SQLite error %d)", what,
	    sqlite3_errmsg(s->db), sqlite3_extended_errcode(s->db));
}

/*
 * Binding parameters one after another; the first failure sticks and is
 * checked once, so that every sqlite3_bind_* result is looked at without
 * a test after each line.
 */
struct binder {
	sqlite3_stmt	*st;
	int		 i;
	int		 rc;
};

static struct binder
bind_start(sqlite3_stmt *st)
{
	struct binder	b = { st, 0, SQLITE_OK };

	return b;
}

static void
bind_i64(struct binder *b, int64_t v)
{
	b->i++;
	if (b->rc == SQLITE_OK)
		b->rc = sqlite3_bind_int64(b->st, b->i, (sqlite3_int64)v);
}

/* uint64_t round-trips bit for bit through SQLite's signed integer. */
static void
bind_u64(struct binder *b, uint64_t v)
{
	bind_i64(b, (int64_t)v);
}

static void
bind_null(struct binder *b)
{
	b->i++;
	if (b->rc == SQLITE_OK)
		b->rc = sqlite3_bind_null(b->st, b->i);
}

/* The strings outlive the step: SQLITE_STATIC avoids a copy per row. */
static void
bind_text(struct binder *b, const char *v)
{
	b->i++;
	if (b->rc == SQLITE_OK)
		b->rc = v == NULL ? sqlite3_bind_null(b->st, b->i) :
		    sqlite3_bind_text(b->st, b->i, v, -1, SQLITE_STATIC);
}

static void
bind_blob(struct binder *b, const void *v, int len)
{
	b->i++;
	if (b->rc == SQLITE_OK)
		b->rc = sqlite3_bind_blob(b->st, b->i, v, len, SQLITE_STATIC);
}

/* A time left of -1 (none) is stored as NULL. */
static void
bind_left(struct binder *b, int64_t left)
{
	if (left < 0)
		bind_null(b);
	else
		bind_i64(b, left);
}

static int	run(struct sqlstore *, struct binder *, char *, size_t,
		    const char *, ...) __attribute__((format(printf, 5, 6)));

/*
 * Runs a bound statement that returns no rows, then resets it. What it was
 * doing (|fmt|) is formatted only for an error: a turn of 10,000 joins runs
 * 30,000 statements.
 */
static int
run(struct sqlstore *s, struct binder *b, char *err, size_t errlen,
    const char *fmt, ...)
{
	char	what[128 + RDZV_ID_MAX];
	va_list	ap;
	int	rc;

	if (b->rc == SQLITE_OK && (rc = sqlite3_step(b->st)) == SQLITE_DONE) {
		sqlite3_reset(b->st);
		sqlite3_clear_bindings(b->st);
		return 0;
	}
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (b->rc != SQLITE_OK) {
		errf(-1, err, errlen,
		    "%s: binding parameter %d: %s", what, b->i,
		    sqlite3_errstr(b->rc));
		sqlite3_reset(b->st);
		return -1;
	}
	sqlstore_fail(s, err, errlen, what);
	sqlite3_reset(b->st);
	sqlite3_clear_bindings(b->st);
	return -1;
}

/* ----------------------------------------------------------- group commit */

static int
put_job(struct sqlstore *s, const struct core_job *j, char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_JOB_PUT]);

	bind_text(&b, j->rdzv_id);
	bind_text(&b, j->owner);
	bind_i64(&b, j->settings.min_nodes);
	bind_i64(&b, j->settings.max_nodes);
	bind_i64(&b, j->settings.last_call_timeout_ms);
	bind_i64(&b, j->settings.join_timeout_ms);
	bind_i64(&b, j->settings.max_restarts);
	bind_i64(&b, j->settings.lease_ttl_ms);
	bind_i64(&b, j->settings.reconnect_grace_ms);
	bind_text(&b, core_job_state_name(j->state));
	bind_text(&b, j->reason);
	bind_u64(&b, j->generation);
	bind_i64(&b, j->restart_count);
	bind_i64(&b, j->attempt);
	bind_i64(&b, j->created_ms);
	bind_i64(&b, j->updated_ms);
	bind_i64(&b, j->ended_ms);
	bind_u64(&b, j->event_seq);
	bind_left(&b, j->last_call_left_ms);
	bind_left(&b, j->join_left_ms);
	if (j->held_failure)
		bind_text(&b, j->held_reason);
	else
		bind_null(&b);
	bind_i64(&b, j->settings.rejoin_timeout_ms);
	if (j->rejoin_lost[0] != '\0')
		bind_text(&b, j->rejoin_lost);
	else
		bind_null(&b);
	bind_i64(&b, j->settings.hang_timeout_ms);
	return run(s, &b, err, errlen, "writing job %s", j->rdzv_id);
}

static int
put_node(struct sqlstore *s, const struct core_node *n, char *err,
    size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_NODE_PUT]);

	bind_u64(&b, n->node_id);
	bind_text(&b, n->job->rdzv_id);
	bind_blob(&b, n->session_id, CORE_SESSION_LEN);
	bind_text(&b, n->hostname);
	bind_text(&b, n->advertise_addr);
	bind_i64(&b, n->master_port);
	bind_i64(&b, n->nproc);
	if (n->has_rank_hint)
		bind_i64(&b, n->rank_hint);
	else
		bind_null(&b);
	bind_text(&b, core_node_state_name(n->state));
	bind_i64(&b, n->group_rank);
	bind_i64(&b, n->base_rank);
	bind_u64(&b, n->generation);
	bind_u64(&b, n->arrival);
	bind_i64(&b, n->joined_ms);
	bind_i64(&b, n->gpus_healthy);
	bind_i64(&b, n->gpus_total);
	bind_text(&b, n->reason);
	bind_i64(&b, n->port_offer);
	return run(s, &b, err, errlen, "writing node %llu of job %s",
	    (unsigned long long)n->node_id, n->job->rdzv_id);
}

/* A node's GPU results, replaced whole when they changed. */
static int
put_gpus(struct sqlstore *s, const struct core_node *n, char *err,
    size_t errlen)
{
	struct binder		 b = bind_start(s->st[ST_GPUS_DEL]);
	const struct core_gpu	*g;
	uint32_t		 i;

	bind_u64(&b, n->node_id);
	if (run(s, &b, err, errlen, "writing the GPUs of node %llu",
	    (unsigned long long)n->node_id) != 0)
		return -1;
	for (i = 0; i < n->n_gpus; i++) {
		g = &n->gpus[i];
		b = bind_start(s->st[ST_GPU_PUT]);
		bind_u64(&b, n->node_id);
		bind_i64(&b, g->device);
		bind_text(&b, g->name);
		bind_text(&b, g->uuid);
		bind_i64(&b, g->ok);
		bind_text(&b, g->failed_step);
		bind_text(&b, g->error);
		bind_u64(&b, g->total_mem);
		if (run(s, &b, err, errlen, "writing the GPUs of node %llu",
		    (unsigned long long)n->node_id) != 0)
			return -1;
	}
	return 0;
}

static int
put_event(struct sqlstore *s, const struct core_event *e, char *err,
    size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_EVENT_PUT]);

	bind_text(&b, e->job->rdzv_id);
	bind_u64(&b, e->seq);
	bind_i64(&b, e->wall_ms);
	bind_u64(&b, e->generation);
	bind_text(&b, e->kind);
	bind_text(&b, e->message);
	return run(s, &b, err, errlen, "writing event %llu of job %s",
	    (unsigned long long)e->seq, e->job->rdzv_id);
}

/*
 * Rounds. SPEC §4 rule 2: a round is written before any member is told,
 * so every assignment a node can receive has its rows. The core lists
 * every round formed in the turn, complete as formed, also one superseded
 * or missing a member lost within the same turn.
 */
static int
put_round_row(struct sqlstore *s, const struct core_job *j, uint64_t gen,
    uint32_t world_size, const char *master_addr, uint32_t master_port,
    uint32_t restart_count, int64_t formed_ms, char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_ROUND_PUT]);

	bind_text(&b, j->rdzv_id);
	bind_u64(&b, gen);
	bind_i64(&b, world_size);
	bind_text(&b, master_addr);
	bind_i64(&b, master_port);
	bind_i64(&b, restart_count);
	bind_i64(&b, formed_ms);
	return run(s, &b, err, errlen, "recording round %llu of job %s",
	    (unsigned long long)gen, j->rdzv_id);
}

static int
put_assignment(struct sqlstore *s, const struct core_job *j, uint64_t gen,
    uint64_t node_id, uint32_t group_rank, uint32_t base_rank,
    uint32_t nproc, char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_ASSIGN_PUT]);

	bind_text(&b, j->rdzv_id);
	bind_u64(&b, gen);
	bind_u64(&b, node_id);
	bind_i64(&b, group_rank);
	bind_i64(&b, base_rank);
	bind_i64(&b, nproc);
	return run(s, &b, err, errlen, "recording node %llu in round %llu of "
	    "job %s", (unsigned long long)node_id, (unsigned long long)gen,
	    j->rdzv_id);
}

static int
put_round(struct sqlstore *s, const struct core_round *r, int64_t formed_ms,
    char *err, size_t errlen)
{
	uint32_t	i;

	if (put_round_row(s, r->job, r->generation, r->world_size,
	    r->master_addr, r->master_port, r->restart_count, formed_ms, err,
	    errlen) != 0)
		return -1;
	for (i = 0; i < r->n; i++) {
		if (put_assignment(s, r->job, r->generation,
		    r->members[i].node_id, r->members[i].group_rank,
		    r->members[i].base_rank, r->members[i].nproc, err,
		    errlen) != 0)
			return -1;
	}
	return 0;
}

static int
put_meta(struct sqlstore *s, uint64_t next_node_id, char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_META_PUT]);

	bind_text(&b, "next_node_id");
	bind_u64(&b, next_node_id);
	return run(s, &b, err, errlen, "saving next_node_id");
}

static int
del_job(struct sqlstore *s, const struct core_job *j, char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_JOB_DEL]);

	bind_text(&b, j->rdzv_id);
	return run(s, &b, err, errlen, "deleting job %s", j->rdzv_id);
}

static int
del_node(struct sqlstore *s, const struct core_node *n, char *err,
    size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_NODE_DEL]);

	bind_u64(&b, n->node_id);
	return run(s, &b, err, errlen, "deleting node %llu",
	    (unsigned long long)n->node_id);
}

/*
 * The order matters: deletions first, so that a job removed and created
 * again under the same id in one turn starts from no rows; then jobs
 * before their nodes, events and rounds, which refer to them.
 */
static int
commit_rows(struct sqlstore *s, struct core *c, bool write_meta, char *err,
    size_t errlen)
{
	struct core_job		*j;
	struct core_node	*n;
	size_t			 i;

	TAILQ_FOREACH(j, &c->removed_jobs, entry) {
		if (del_job(s, j, err, errlen) != 0)
			return -1;
	}
	TAILQ_FOREACH(n, &c->removed_nodes, entry) {
		if (del_node(s, n, err, errlen) != 0)
			return -1;
	}
	TAILQ_FOREACH(j, &c->dirty_jobs, dirty_entry) {
		if (put_job(s, j, err, errlen) != 0)
			return -1;
	}
	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry) {
		if (put_node(s, n, err, errlen) != 0 ||
		    (n->gpus_dirty && put_gpus(s, n, err, errlen) != 0))
			return -1;
	}
	for (i = 0; i < c->n_new_rounds; i++) {
		if (put_round(s, &c->new_rounds[i], c->now.wall_ms, err,
		    errlen) != 0)
			return -1;
	}
	for (i = 0; i < c->n_new_events; i++) {
		if (put_event(s, &c->new_events[i], err, errlen) != 0)
			return -1;
	}
	if (sqlstore_put_hosts(s, c, err, errlen) != 0)
		return -1;
	if (write_meta && put_meta(s, c->next_node_id, err, errlen) != 0)
		return -1;
	return 0;
}

int
sqlstore_commit(struct sqlstore *s, struct core *c, bool write_meta,
    char *err, size_t errlen)
{
	struct binder	b;

	b = bind_start(s->st[ST_BEGIN]);
	if (run(s, &b, err, errlen, "beginning a transaction") != 0)
		goto bad;
	if (commit_rows(s, c, write_meta, err, errlen) != 0)
		goto bad;
	b = bind_start(s->st[ST_COMMIT]);
	if (run(s, &b, err, errlen, "committing") != 0)
		goto bad;
	s->next_node_id = c->next_node_id;
	s->transactions++;
	return 0;

bad:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_step(s->st[ST_ROLLBACK]);
	sqlite3_reset(s->st[ST_ROLLBACK]);
	return -1;
}


/* ---------------------------------------------------------- the interface */

static int
ops_open(const struct store_spec *spec, const struct store_opts *opts,
    void **out, char *err, size_t errlen)
{
	struct sqlstore	*s;

	(void)opts;
	if (sqlstore_open(spec->path, &s, err, errlen) != 0)
		return -1;
	*out = s;
	return 0;
}

static int
ops_load(void *s, struct core *c, struct core_now now, char *err,
    size_t errlen)
{
	return sqlstore_load(s, c, now, err, errlen);
}

static int
ops_commit(void *s, struct core *c, bool write_meta, char *err,
    size_t errlen)
{
	return sqlstore_commit(s, c, write_meta, err, errlen);
}

static int
ops_events(void *s, const char *rdzv_id, uint64_t after_seq, uint32_t limit,
    int (*cb)(const struct core_event *, void *), void *arg, char *err,
    size_t errlen)
{
	return sqlstore_events(s, rdzv_id, after_seq, limit, cb, arg, err,
	    errlen);
}

static int
ops_empty(void *v, char *err, size_t errlen)
{
	struct sqlstore	*s = v;
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM jobs", -1, &st,
	    NULL) != SQLITE_OK)
		return sqlstore_fail(s, err, errlen, "counting jobs");
	rc = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) == 0 :
	    sqlstore_fail(s, err, errlen, "counting jobs");
	sqlite3_finalize(st);
	return rc;
}

static uint64_t
ops_transactions(const void *s)
{
	return sqlstore_transactions(s);
}

static void
ops_close(void *s)
{
	sqlstore_close(s);
}

/* No fence: the lock file already keeps a second rdzvd off the file. */
const struct store_ops store_sqlite_ops = {
	.kind = STORE_SQLITE,
	.name = "sqlite",
	.open = ops_open,
	.load = ops_load,
	.commit = ops_commit,
	.events = ops_events,
	.empty = ops_empty,
	.transactions = ops_transactions,
	.close = ops_close,
};
