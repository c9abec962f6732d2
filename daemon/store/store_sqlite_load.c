/*
 * Loading the store into a fresh core after a daemon start (SPEC §4 rule
 * 11), and reading a job's event history for Control.ListEvents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite.h"
#include "errf.h"

/* ---------------------------------------------------------------- loading */

/* A column that must hold a 32-bit unsigned value. */
static bool
col_u32(sqlite3_stmt *st, int i, uint32_t *v)
{
	sqlite3_int64	x = sqlite3_column_int64(st, i);

	if (sqlite3_column_type(st, i) != SQLITE_INTEGER || x < 0 ||
	    x > UINT32_MAX)
		return false;
	*v = (uint32_t)x;
	return true;
}

static const char *
col_text(sqlite3_stmt *st, int i)
{
	const unsigned char	*t = sqlite3_column_text(st, i);

	return t != NULL ? (const char *)t : "";
}

static int64_t
col_left(sqlite3_stmt *st, int i)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return -1;
	return sqlite3_column_int64(st, i);
}

static int
job_state(const char *name)
{
	int	i;

	for (i = CORE_JOB_WAITING; i <= CORE_JOB_FAILED; i++)
		if (strcmp(core_job_state_name(i), name) == 0)
			return i;
	return 0;
}

static int
node_state(const char *name)
{
	int	i;

	for (i = 1; i < CORE_NODE_NSTATES; i++)
		if (strcmp(core_node_state_name(i), name) == 0)
			return i;
	return 0;
}

static int
row_job(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	struct core_job		*j;
	struct core_settings	*set;
	const char		*id = col_text(st, 0);
	bool			 ok;

	if ((j = core_restore_job(c, id, col_text(st, 1))) == NULL)
		return errf(-1, err, errlen,
		    "job '%s': invalid or duplicate id",
		    id);
	set = &j->settings;
	ok = col_u32(st, 2, &set->min_nodes) &&
	    col_u32(st, 3, &set->max_nodes) &&
	    col_u32(st, 4, &set->last_call_timeout_ms) &&
	    col_u32(st, 5, &set->join_timeout_ms) &&
	    col_u32(st, 6, &set->max_restarts) &&
	    col_u32(st, 7, &set->lease_ttl_ms) &&
	    col_u32(st, 8, &set->reconnect_grace_ms) &&
	    col_u32(st, 12, &j->restart_count) &&
	    col_u32(st, 13, &j->attempt);
	if (!ok)
		return errf(-1, err, errlen, "job %s: a setting or counter is "
		    "out of range", id);
	if ((j->state = job_state(col_text(st, 9))) == 0)
		return errf(-1, err, errlen, "job %s: unknown state '%s'", id,
		    col_text(st, 9));
	snprintf(j->reason, sizeof(j->reason), "%s", col_text(st, 10));
	j->generation = (uint64_t)sqlite3_column_int64(st, 11);
	j->created_ms = sqlite3_column_int64(st, 14);
	j->updated_ms = sqlite3_column_int64(st, 15);
	j->ended_ms = sqlite3_column_int64(st, 16);
	j->event_seq = (uint64_t)sqlite3_column_int64(st, 17);
	j->last_call_left_ms = col_left(st, 18);
	j->join_left_ms = col_left(st, 19);
	if (sqlite3_column_type(st, 20) != SQLITE_NULL) {
		j->held_failure = true;
		snprintf(j->held_reason, sizeof(j->held_reason), "%s",
		    col_text(st, 20));
	}
	/* Rows from before rule 13 had no rejoin_timeout: their default. */
	set->has_rejoin_timeout = true;
	if (sqlite3_column_type(st, 21) == SQLITE_NULL)
		set->rejoin_timeout_ms = set->join_timeout_ms;
	else if (!col_u32(st, 21, &set->rejoin_timeout_ms))
		return errf(-1, err, errlen, "job %s: rejoin_timeout_ms is out "
		    "of range", id);
	if (sqlite3_column_type(st, 22) != SQLITE_NULL)
		snprintf(j->rejoin_lost, sizeof(j->rejoin_lost), "%s",
		    col_text(st, 22));
	if (!col_u32(st, 23, &set->hang_timeout_ms))
		return errf(-1, err, errlen, "job %s: hang_timeout_ms is out "
		    "of range", id);
	set->rank_policy = sqlite3_column_int(st, 24) == CORE_RANK_STABLE ?
	    CORE_RANK_STABLE : CORE_RANK_ORDERED;
	set->restart = sqlite3_column_int(st, 25) == CORE_RESTART_IN_PROCESS ?
	    CORE_RESTART_IN_PROCESS : CORE_RESTART_PROCESS;
	if (!col_u32(st, 26, &j->n_refused))
		return errf(-1, err, errlen, "job %s: n_refused is out of "
		    "range", id);
	j->refusal_failed = sqlite3_column_int(st, 27) != 0;
	if (strlen(col_text(st, 28)) > CORE_PRELOAD_MAX)
		return errf(-1, err, errlen, "job %s: preload is over %d bytes",
		    id, CORE_PRELOAD_MAX);
	snprintf(set->preload, sizeof(set->preload), "%s", col_text(st, 28));
	return 0;
}

static int
row_node(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	struct core_job		*j;
	struct core_node	*n;
	uint64_t		 id = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_int64		 rank;
	bool			 ok;

	if ((j = core_job_find(c, col_text(st, 1))) == NULL)
		return errf(-1, err, errlen, "node %llu: no job '%s'",
		    (unsigned long long)id, col_text(st, 1));
	if (sqlite3_column_bytes(st, 2) != CORE_SESSION_LEN ||
	    sqlite3_column_type(st, 2) != SQLITE_BLOB)
		return errf(-1, err, errlen, "node %llu: session_id is not %d "
		    "bytes", (unsigned long long)id, CORE_SESSION_LEN);
	n = core_restore_node(c, j, id, sqlite3_column_blob(st, 2),
	    col_text(st, 3), col_text(st, 4));
	if (n == NULL)
		return errf(-1, err, errlen,
		    "node %llu: invalid or duplicate id "
		    "or session", (unsigned long long)id);
	n->has_rank_hint = sqlite3_column_type(st, 7) != SQLITE_NULL;
	rank = sqlite3_column_int64(st, 9);
	ok = col_u32(st, 5, &n->master_port) && col_u32(st, 6, &n->nproc) &&
	    (!n->has_rank_hint || col_u32(st, 7, &n->rank_hint)) &&
	    col_u32(st, 10, &n->base_rank) &&
	    col_u32(st, 14, &n->gpus_healthy) &&
	    col_u32(st, 15, &n->gpus_total) &&
	    col_u32(st, 17, &n->port_offer) && rank >= -1 &&
	    rank <= INT32_MAX && sqlite3_column_int64(st, 18) >= -1 &&
	    sqlite3_column_int64(st, 18) <= INT32_MAX;
	if (!ok)
		return errf(-1, err, errlen,
		    "node %llu of job %s: a value is out "
		    "of range", (unsigned long long)id, j->rdzv_id);
	if ((n->state = node_state(col_text(st, 8))) == 0)
		return errf(-1, err, errlen,
		    "node %llu of job %s: unknown state "
		    "'%s'", (unsigned long long)id, j->rdzv_id,
		    col_text(st, 8));
	n->group_rank = (int32_t)rank;
	n->generation = (uint64_t)sqlite3_column_int64(st, 11);
	n->arrival = (uint64_t)sqlite3_column_int64(st, 12);
	n->joined_ms = sqlite3_column_int64(st, 13);
	if (sqlite3_column_type(st, 16) != SQLITE_NULL)
		core_node_set_reason(n, col_text(st, 16));
	n->prev_rank = (int32_t)sqlite3_column_int64(st, 18);
	if (sqlite3_column_type(st, 19) == SQLITE_BLOB &&
	    sqlite3_column_bytes(st, 19) == CORE_TOKEN_LEN)
		core_restore_node_token(n, sqlite3_column_blob(st, 19));
	core_restore_node_progress(n, (uint64_t)sqlite3_column_int64(st, 20),
	    sqlite3_column_type(st, 20) == SQLITE_NULL ? 0 :
	    (uint64_t)sqlite3_column_int64(st, 21),
	    sqlite3_column_int64(st, 22), sqlite3_column_int64(st, 23));
	return 0;
}

/* One GPU of a node, appended to those read before it. */
static int
row_gpu(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	uint64_t		 id = (uint64_t)sqlite3_column_int64(st, 0);
	struct core_node	*n = core_node_find(c, id);
	struct core_gpu		*v, *g;

	(void)s;
	if (n == NULL)
		return errf(-1, err, errlen, "GPU of node %llu: no such node",
		    (unsigned long long)id);
	if ((v = calloc(n->n_gpus + 1, sizeof(*v))) == NULL)
		return errf(-1, err, errlen, "out of memory");
	if (n->n_gpus > 0)
		memcpy(v, n->gpus, n->n_gpus * sizeof(*v));
	g = &v[n->n_gpus];
	if (!col_u32(st, 1, &g->device)) {
		free(v);
		return errf(-1, err, errlen, "GPU of node %llu: device out of "
		    "range", (unsigned long long)id);
	}
	snprintf(g->name, sizeof(g->name), "%s", col_text(st, 2));
	snprintf(g->uuid, sizeof(g->uuid), "%s", col_text(st, 3));
	g->ok = sqlite3_column_int64(st, 4) != 0;
	snprintf(g->failed_step, sizeof(g->failed_step), "%s",
	    col_text(st, 5));
	snprintf(g->error, sizeof(g->error), "%s", col_text(st, 6));
	g->total_mem = (uint64_t)sqlite3_column_int64(st, 7);
	core_node_set_gpus(n, v, n->n_gpus + 1);
	free(v);
	return 0;
}

static void
event_fill(sqlite3_stmt *st, struct core_event *e)
{
	memset(e, 0, sizeof(*e));
	e->seq = (uint64_t)sqlite3_column_int64(st, 0);
	e->wall_ms = sqlite3_column_int64(st, 1);
	e->generation = (uint64_t)sqlite3_column_int64(st, 2);
	snprintf(e->kind, sizeof(e->kind), "%s", col_text(st, 3));
	snprintf(e->message, sizeof(e->message), "%s", col_text(st, 4));
}

/* Steps a prepared query, handing each row to fn; 0, or -1 + message. */
static int
each_row(struct sqlstore *s, sqlite3_stmt *st,
    int (*fn)(struct sqlstore *, struct core *, sqlite3_stmt *, char *, size_t),
    struct core *c, char *err, size_t errlen)
{
	int	rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (fn(s, c, st, err, errlen) != 0) {
			sqlite3_reset(st);
			return -1;
		}
	}
	if (rc != SQLITE_DONE) {
		sqlstore_fail(s, err, errlen, "reading the database");
		sqlite3_reset(st);
		return -1;
	}
	sqlite3_reset(st);
	return 0;
}

/* The job's latest events, oldest first, into its ring. */
static int
row_event(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	struct core_event	 e;

	event_fill(st, &e);
	core_restore_event(s->loading, &e);
	return 0;
}

/*
 * The generation last recorded for each job is the job's own: every
 * generation up to it was recorded, or superseded within its turn. A round
 * above it would be a generation that could be handed out twice.
 */
static int
row_round(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	struct core_job	*j = core_job_find(c, col_text(st, 0));
	uint64_t	 g = (uint64_t)sqlite3_column_int64(st, 1);

	if (j != NULL && g > j->generation)
		return errf(-1, err, errlen,
		    "job %s: round %llu is recorded but "
		    "the job's generation is %llu", j->rdzv_id,
		    (unsigned long long)g, (unsigned long long)j->generation);
	return 0;
}

/* A refusal kept for a job that had no node yet, with its time left. */
static int
row_refusal(struct sqlstore *s, struct core *c, sqlite3_stmt *st, char *err,
    size_t errlen)
{
	struct core_refusal	r = { .allocation_nodes = 0 };
	sqlite3_int64		left = sqlite3_column_int64(st, 5);

	snprintf(r.rdzv_id, sizeof(r.rdzv_id), "%s", col_text(st, 0));
	snprintf(r.identity, sizeof(r.identity), "%s", col_text(st, 1));
	snprintf(r.why, sizeof(r.why), "%s", col_text(st, 2));
	if (!col_u32(st, 3, &r.allocation_nodes) ||
	    !col_u32(st, 4, &r.attempt) || left < 0)
		return errf(-1, err, errlen, "a refusal kept for job %s: a "
		    "value is out of range", r.rdzv_id);
	core_restore_refusal(c, &r, (uint64_t)left);
	return 0;
}

/* The queries of a load, prepared once each. */
static const char *const load_sql[] = {
	"SELECT " JOB_COLS " FROM jobs ORDER BY created_ms, rowid",
	"SELECT " NODE_COLS " FROM nodes ORDER BY node_id",
	"SELECT rdzv_id, max(generation) FROM rounds GROUP BY rdzv_id",
	/* Through the primary key: CORE_EVENTS_KEPT rows per job, not all. */
	"SELECT " EVENT_COLS " FROM (SELECT * FROM events WHERE rdzv_id = ?1 "
	    "ORDER BY seq DESC LIMIT " STORE_STR(CORE_EVENTS_KEPT) ") "
	    "ORDER BY seq",
	/* In parentheses: clang's -Wstring-concatenation takes a last
	 * element split over lines for a missing comma. */
	("SELECT node_id, device, name, uuid, ok, failed_step, error, "
	    "total_mem FROM gpus ORDER BY node_id, device"),
	("SELECT rdzv_id, identity, why, allocation_nodes, attempt, left_ms "
	    "FROM refusals ORDER BY rowid"),
};
#define LOAD_N	(sizeof(load_sql) / sizeof(load_sql[0]))

static int
load_rows(struct sqlstore *s, struct core *c, sqlite3_stmt **st, char *err,
    size_t errlen)
{
	struct core_job	*j;

	if (each_row(s, st[0], row_job, c, err, errlen) != 0 ||
	    each_row(s, st[1], row_node, c, err, errlen) != 0 ||
	    each_row(s, st[2], row_round, c, err, errlen) != 0)
		return -1;
	TAILQ_FOREACH(j, &c->jobs, entry) {
		s->loading = j;
		if (sqlite3_bind_text(st[3], 1, j->rdzv_id, -1,
		    SQLITE_STATIC) != SQLITE_OK)
			return sqlstore_fail(s, err, errlen, "reading events");
		if (each_row(s, st[3], row_event, c, err, errlen) != 0)
			return -1;
	}
	if (each_row(s, st[4], row_gpu, c, err, errlen) != 0)
		return -1;
	return each_row(s, st[5], row_refusal, c, err, errlen);
}

int
sqlstore_load(struct sqlstore *s, struct core *c, struct core_now now, char *err,
    size_t errlen)
{
	sqlite3_stmt	*st[LOAD_N] = { NULL };
	char		 e[CORE_REASON_MAX * 2];
	size_t		 i;
	int		 rc = -1;

	if (c->n_jobs != 0)
		return errf(-1, err, errlen, "database %s: loading into a "
		    "core that already has jobs", s->path);
	for (i = 0; i < LOAD_N; i++) {
		if (sqlite3_prepare_v2(s->db, load_sql[i], -1, &st[i],
		    NULL) != SQLITE_OK) {
			sqlstore_fail(s, e, sizeof(e), "reading the database");
			goto out;
		}
	}
	if (load_rows(s, c, st, e, sizeof(e)) != 0 ||
	    sqlstore_load_hosts(s, c, e, sizeof(e)) != 0 ||
	    core_restore_finish(c, now, s->next_node_id, e, sizeof(e)) != 0)
		goto out;
	s->next_node_id = c->next_node_id;
	rc = 0;

out:
	s->loading = NULL;
	for (i = 0; i < LOAD_N; i++)
		sqlite3_finalize(st[i]);
	if (rc != 0)
		errf(-1, err, errlen, "database %s: %s", s->path, e);
	return rc;
}

int
sqlstore_events(struct sqlstore *s, const char *rdzv_id, uint64_t after_seq,
    uint32_t limit, int (*cb)(const struct core_event *, void *), void *arg,
    char *err, size_t errlen)
{
	sqlite3_stmt		*st = s->st[ST_EVENTS_GET];
	struct core_event	 e;
	int			 rc;

	if (after_seq > INT64_MAX || limit == 0)
		return 0;
	if ((rc = sqlite3_bind_text(st, 1, rdzv_id, -1,
	    SQLITE_STATIC)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(st, 2, (sqlite3_int64)after_seq)) !=
	    SQLITE_OK ||
	    (rc = sqlite3_bind_int64(st, 3, limit)) != SQLITE_OK) {
		sqlite3_clear_bindings(st);
		return errf(-1, err, errlen, "reading events of job %s: %s",
		    rdzv_id, sqlite3_errstr(rc));
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		event_fill(st, &e);
		if (cb(&e, arg) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	if (rc != SQLITE_DONE)
		sqlstore_fail(s, err, errlen, "reading events");
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -1;
}
