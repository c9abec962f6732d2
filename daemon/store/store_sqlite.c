/*
 * The SQLite store (SPEC §9), its group commit: at the end of every loop
 * turn the core's changes go into one transaction, so ten thousand joins
 * cost one fsync, and with WAL and synchronous=FULL a commit is on disk
 * when COMMIT returns. Every statement is prepared once for the store's
 * life. A failed commit poisons the store: memory is ahead of the disk,
 * and only a restart (which reloads the disk) can make them agree again.
 * Opening is in store_sqlite_open.c, the statements' SQL in
 * store_sqlite_stmt.c, loading in store_sqlite_load.c (host records in
 * store_sqlite_hosts.c); docs/STORE.md is the operator's view of all this.
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
bind_text_len(struct binder *b, const char *v, int len)
{
	b->i++;
	if (b->rc == SQLITE_OK)
		b->rc = sqlite3_bind_text(b->st, b->i, v, len, SQLITE_STATIC);
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

	/* No sqlite3_clear_bindings() after a step that went well: every
	 * statement has all its parameters bound again before its next
	 * step, and clearing 576 of them costs as much as binding them. */
	if (b->rc == SQLITE_OK && (rc = sqlite3_step(b->st)) == SQLITE_DONE) {
		sqlite3_reset(b->st);
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
	bind_i64(&b, j->settings.rank_policy);
	bind_i64(&b, j->settings.restart);
	bind_i64(&b, j->n_refused);
	bind_i64(&b, j->refusal_failed);
	bind_text(&b, j->settings.preload);
	return run(s, &b, err, errlen, "writing job %s", j->rdzv_id);
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

/*
 * Rows written STORE_BATCH to a statement (store_sqlite.h): the caller
 * counts its rows, then binds each into batch_row()'s binder and calls
 * batch_next(), which runs the statement when its rows are bound. The
 * rows past the last full batch go one to a statement.
 */
struct batch {
	struct sqlstore	*s;
	int		 one, many;	/* the statements */
	size_t		 left;		/* rows not yet bound */
	size_t		 rows, cap;	/* bound in this statement, and its size */
	struct binder	 b;
};

static struct batch
batch_start(struct sqlstore *s, int one, int many, size_t rows)
{
	struct batch	bt = { .s = s, .one = one, .many = many,
			    .left = rows };

	return bt;
}

static struct binder *
batch_row(struct batch *bt)
{
	if (bt->rows == 0) {
		bt->cap = bt->left >= STORE_BATCH ? STORE_BATCH : 1;
		bt->b = bind_start(bt->s->st[bt->cap == 1 ? bt->one :
		    bt->many]);
	}
	return &bt->b;
}

/* A row is bound; |what| and |id| name it should its statement fail. */
static int
batch_next(struct batch *bt, char *err, size_t errlen, const char *what,
    unsigned long long id, const char *rdzv_id)
{
	bt->left--;
	if (++bt->rows < bt->cap)
		return 0;
	bt->rows = 0;
	if (bt->cap == 1)
		return run(bt->s, &bt->b, err, errlen, "writing %s %llu of "
		    "job %s", what, id, rdzv_id);
	return run(bt->s, &bt->b, err, errlen, "writing %d rows up to %s "
	    "%llu of job %s", STORE_BATCH, what, id, rdzv_id);
}

static void
bind_node(struct binder *b, const struct core_node *n)
{
	bind_u64(b, n->node_id);
	bind_text(b, n->job->rdzv_id);
	bind_blob(b, n->session_id, CORE_SESSION_LEN);
	bind_text(b, n->hostname);
	bind_text(b, n->advertise_addr);
	bind_i64(b, n->master_port);
	bind_i64(b, n->nproc);
	if (n->has_rank_hint)
		bind_i64(b, n->rank_hint);
	else
		bind_null(b);
	bind_text(b, core_node_state_name(n->state));
	bind_i64(b, n->group_rank);
	bind_i64(b, n->base_rank);
	bind_u64(b, n->generation);
	bind_u64(b, n->arrival);
	bind_i64(b, n->joined_ms);
	bind_i64(b, n->gpus_healthy);
	bind_i64(b, n->gpus_total);
	bind_text(b, n->reason);
	bind_i64(b, n->port_offer);
	bind_i64(b, n->prev_rank);
	if (n->has_token)
		bind_blob(b, n->join_token, CORE_TOKEN_LEN);
	else
		bind_null(b);
	if (n->has_step)
		bind_u64(b, n->step);
	else
		bind_null(b);
	bind_u64(b, n->has_step ? n->step_gen : 0);
	bind_i64(b, n->has_step ? n->step_wall_ms : 0);
	bind_i64(b, n->last_seen_ms);
}

/*
 * The turn's nodes the store never wrote (|fresh|: their ids were handed
 * out after the last commit, which is when the store last wrote) as plain
 * INSERTs, or the others as UPSERTs.
 */
static int
put_node_rows(struct sqlstore *s, const struct core *c, bool fresh,
    char *err, size_t errlen)
{
	const struct core_node	*n;
	struct batch		 bt;
	size_t			 rows = 0;

	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry)
		rows += (n->node_id >= s->next_node_id) == fresh;
	bt = batch_start(s, fresh ? ST_NODE_NEW : ST_NODE_PUT,
	    fresh ? ST_NODE_NEW_N : ST_NODE_PUT_N, rows);
	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry) {
		if ((n->node_id >= s->next_node_id) != fresh)
			continue;
		bind_node(batch_row(&bt), n);
		if (batch_next(&bt, err, errlen, "node", n->node_id,
		    n->job->rdzv_id) != 0)
			return -1;
	}
	return 0;
}

/* The turn's nodes, then the GPU results of those whose results changed,
 * which refer to their node's row. */
static int
put_nodes(struct sqlstore *s, const struct core *c, char *err, size_t errlen)
{
	const struct core_node	*n;

	if (put_node_rows(s, c, true, err, errlen) != 0 ||
	    put_node_rows(s, c, false, err, errlen) != 0)
		return -1;
	TAILQ_FOREACH(n, &c->dirty_nodes, dirty_entry) {
		if (n->gpus_dirty && put_gpus(s, n, err, errlen) != 0)
			return -1;
	}
	return 0;
}

static int
put_events(struct sqlstore *s, const struct core *c, char *err,
    size_t errlen)
{
	const struct core_event	*e;
	struct batch		 bt;
	struct binder		*b;
	size_t			 i;

	bt = batch_start(s, ST_EVENT_PUT, ST_EVENT_PUT_N, c->n_new_events);
	for (i = 0; i < c->n_new_events; i++) {
		e = &c->new_events[i];
		b = batch_row(&bt);
		bind_text(b, e->job->rdzv_id);
		bind_u64(b, e->seq);
		bind_i64(b, e->wall_ms);
		bind_u64(b, e->generation);
		bind_text(b, e->kind);
		bind_text(b, e->message);
		if (batch_next(&bt, err, errlen, "event", e->seq,
		    e->job->rdzv_id) != 0)
			return -1;
	}
	return 0;
}

/* Appends |v| in decimal. */
static char *
put_dec(char *p, uint64_t v)
{
	char	tmp[20];
	int	n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0)
		*p++ = tmp[--n];
	return p;
}

/*
 * A round's members as the JSON its row keeps, [[node_id, group_rank,
 * base_rank, nproc], ...] by group rank, in s->buf; its length, or -1
 * when out of memory.
 */
static int
members_json(struct sqlstore *s, const struct core_round *r)
{
	/* Digits of a uint64_t and three uint32_t, brackets and commas. */
	size_t		 need = 2 + (size_t)r->n * (20 + 3 * 10 + 6);
	char		*p, *v;
	uint32_t	 i;

	if (need > INT32_MAX)
		return -1;
	if (need > s->buf_cap) {
		if ((v = realloc(s->buf, need)) == NULL)
			return -1;
		s->buf = v;
		s->buf_cap = need;
	}
	p = s->buf;
	*p++ = '[';
	for (i = 0; i < r->n; i++) {
		if (i > 0)
			*p++ = ',';
		*p++ = '[';
		p = put_dec(p, r->members[i].node_id);
		*p++ = ',';
		p = put_dec(p, r->members[i].group_rank);
		*p++ = ',';
		p = put_dec(p, r->members[i].base_rank);
		*p++ = ',';
		p = put_dec(p, r->members[i].nproc);
		*p++ = ']';
	}
	*p++ = ']';
	return (int)(p - s->buf);
}

/*
 * Rounds. SPEC §4 rule 2: a round is written before any member is told,
 * so every assignment a node can receive is in its round's row, members
 * and all. The core lists every round formed in the turn, complete as
 * formed, also one superseded or missing a member lost within the same
 * turn.
 */
static int
put_round(struct sqlstore *s, const struct core_round *r, int64_t formed_ms,
    char *err, size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_ROUND_PUT]);
	int		len;

	if ((len = members_json(s, r)) < 0)
		return errf(-1, err, errlen, "recording round %llu of job %s: "
		    "out of memory", (unsigned long long)r->generation,
		    r->job->rdzv_id);
	bind_text(&b, r->job->rdzv_id);
	bind_u64(&b, r->generation);
	bind_i64(&b, r->world_size);
	bind_text(&b, r->master_addr);
	bind_i64(&b, r->master_port);
	bind_i64(&b, r->restart_count);
	bind_i64(&b, formed_ms);
	bind_text_len(&b, s->buf, len);
	return run(s, &b, err, errlen, "recording round %llu of job %s",
	    (unsigned long long)r->generation, r->job->rdzv_id);
}

/* The kept refusals, rewritten whole when the turn changed them (at most
 * CORE_REFUSALS_MAX rows), each with the time it has left. */
static int
put_refusals(struct sqlstore *s, const struct core *c, char *err,
    size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_REFUSALS_DEL]);

	if (!c->refusals_dirty)
		return 0;
	if (run(s, &b, err, errlen, "clearing the kept refusals") != 0)
		return -1;
	for (size_t i = 0; i < c->n_refusals; i++) {
		const struct core_refusal *r = &c->refusals[i];
		uint64_t left = core_refusal_left(r, c->now);

		if (left == 0)
			continue;
		b = bind_start(s->st[ST_REFUSAL_PUT]);
		bind_text(&b, r->rdzv_id);
		bind_text(&b, r->identity);
		bind_text(&b, r->why);
		bind_i64(&b, r->allocation_nodes);
		bind_i64(&b, r->attempt);
		bind_u64(&b, left);
		if (run(s, &b, err, errlen, "keeping a refusal for job %s",
		    r->rdzv_id) != 0)
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
del_node(struct sqlstore *s, const struct core_node *n, char *err,
    size_t errlen)
{
	struct binder	b = bind_start(s->st[ST_NODE_DEL]);

	bind_u64(&b, n->node_id);
	return run(s, &b, err, errlen, "deleting node %llu",
	    (unsigned long long)n->node_id);
}

/*
 * A job goes with its rounds (their foreign key cascades), its events and
 * its nodes, which have no foreign key (a lookup per row written): the
 * events by the job's id, the nodes, which have no index by job, by their
 * ids, from the job's list, which holds every node of the job the store
 * has (the nodes of an earlier attempt were deleted when they left it).
 */
static int
del_job(struct sqlstore *s, const struct core_job *j, char *err, size_t errlen)
{
	const struct core_node	*n;
	struct binder		 b;

	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (del_node(s, n, err, errlen) != 0)
			return -1;
	}
	b = bind_start(s->st[ST_EVENTS_DEL]);
	bind_text(&b, j->rdzv_id);
	if (run(s, &b, err, errlen, "deleting the events of job %s",
	    j->rdzv_id) != 0)
		return -1;
	b = bind_start(s->st[ST_JOB_DEL]);
	bind_text(&b, j->rdzv_id);
	return run(s, &b, err, errlen, "deleting job %s", j->rdzv_id);
}

/*
 * The order matters: deletions first, so that a job removed and created
 * again under the same id in one turn starts from no rows; then jobs
 * before their rounds, which refer to them, and nodes before their GPUs.
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
	if (put_nodes(s, c, err, errlen) != 0)
		return -1;
	for (i = 0; i < c->n_new_rounds; i++) {
		if (put_round(s, &c->new_rounds[i], c->now.wall_ms, err,
		    errlen) != 0)
			return -1;
	}
	if (put_events(s, c, err, errlen) != 0)
		return -1;
	if (sqlstore_put_hosts(s, c, err, errlen) != 0)
		return -1;
	if (put_refusals(s, c, err, errlen) != 0)
		return -1;
	if (write_meta && put_meta(s, c->next_node_id, err, errlen) != 0)
		return -1;
	return 0;
}

/* The pages this commit wrote, by SQLite's own counter (reset each time). */
static void
count_bytes(struct sqlstore *s)
{
	sqlite3_stmt	*st;
	int		 cur = 0, hi = 0;

	if (s->page_size == 0 && sqlite3_prepare_v2(s->db, "PRAGMA page_size",
	    -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			s->page_size = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (sqlite3_db_status(s->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi,
	    1) == SQLITE_OK && cur > 0 && s->page_size > 0)
		__atomic_fetch_add(&s->bytes, (uint64_t)cur *
		    (uint64_t)s->page_size, __ATOMIC_RELAXED);
}

uint64_t
sqlstore_bytes(const struct sqlstore *s)
{
	return __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
}

/*
 * A commit in two halves (store.h, store_commit_begin): the rows are
 * written on the event loop, where the core is, into an open transaction
 * (work for the CPU and SQLite's page cache, no disk wait); then COMMIT,
 * which writes the WAL and fsyncs it, may run on another thread: it reads
 * nothing of the core, and the loop does not touch the connection until
 * it returns (the connection is opened NOMUTEX, SQLite's multi-thread
 * mode, which allows that).
 */
int
sqlstore_commit_rows(struct sqlstore *s, struct core *c, bool write_meta,
    char *err, size_t errlen)
{
	struct binder	b;

	b = bind_start(s->st[ST_BEGIN]);
	if (run(s, &b, err, errlen, "beginning a transaction") != 0)
		goto bad;
	if (commit_rows(s, c, write_meta, err, errlen) != 0)
		goto bad;
	/* Never down: put_nodes() takes every id from here up for one the
	 * file does not hold; the end makes it true. */
	s->pending_node_id = c->next_node_id;
	return 0;

bad:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_step(s->st[ST_ROLLBACK]);
	sqlite3_reset(s->st[ST_ROLLBACK]);
	return -1;
}

int
sqlstore_commit_end(struct sqlstore *s, char *err, size_t errlen)
{
	struct binder	b;

	b = bind_start(s->st[ST_COMMIT]);
	if (run(s, &b, err, errlen, "committing") != 0) {
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_step(s->st[ST_ROLLBACK]);
		sqlite3_reset(s->st[ST_ROLLBACK]);
		return -1;
	}
	if (s->pending_node_id > s->next_node_id)
		s->next_node_id = s->pending_node_id;
	/* Counted atomically: the loop reads them while the commit thread
	 * runs (ServerInfo, /metrics). */
	__atomic_fetch_add(&s->transactions, 1, __ATOMIC_RELAXED);
	count_bytes(s);
	return 0;
}

int
sqlstore_commit(struct sqlstore *s, struct core *c, bool write_meta,
    char *err, size_t errlen)
{
	if (sqlstore_commit_rows(s, c, write_meta, err, errlen) != 0)
		return -1;
	return sqlstore_commit_end(s, err, errlen);
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
ops_commit_rows(void *s, struct core *c, bool write_meta, char *err,
    size_t errlen)
{
	return sqlstore_commit_rows(s, c, write_meta, err, errlen);
}

static int
ops_commit_end(void *s, char *err, size_t errlen)
{
	return sqlstore_commit_end(s, err, errlen);
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

static uint64_t
ops_bytes(const void *s)
{
	return sqlstore_bytes(s);
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
	.commit_rows = ops_commit_rows,
	.commit_end = ops_commit_end,
	.events = ops_events,
	.empty = ops_empty,
	.transactions = ops_transactions,
	.bytes_written = ops_bytes,
	.close = ops_close,
};
