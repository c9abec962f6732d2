/*
 * The SQLite store's statements (the ST_* of store_sqlite.h): their SQL,
 * the batched INSERTs built for STORE_BATCH rows, and preparing them all
 * once when the store opens, so that a turn only binds and steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "errf.h"
#include "store_sqlite.h"

static const char *const statements[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_JOB_DEL] = "DELETE FROM jobs WHERE rdzv_id = ?1",
	[ST_NODE_DEL] = "DELETE FROM nodes WHERE node_id = ?1",
	[ST_EVENTS_DEL] = "DELETE FROM events WHERE rdzv_id = ?1",
	[ST_JOB_PUT] = "INSERT INTO jobs (" JOB_COLS ") VALUES (?1, ?2, ?3, "
	    "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
	    "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29) "
	    "ON CONFLICT (rdzv_id) DO UPDATE SET "
	    "owner = ?2, min_nodes = ?3, max_nodes = ?4, "
	    "last_call_timeout_ms = ?5, join_timeout_ms = ?6, "
	    "max_restarts = ?7, lease_ttl_ms = ?8, reconnect_grace_ms = ?9, "
	    "state = ?10, reason = ?11, generation = ?12, "
	    "restart_count = ?13, attempt = ?14, created_ms = ?15, "
	    "updated_ms = ?16, ended_ms = ?17, event_seq = ?18, "
	    "last_call_left_ms = ?19, join_left_ms = ?20, held_reason = ?21, "
	    "rejoin_timeout_ms = ?22, rejoin_lost = ?23, "
	    "hang_timeout_ms = ?24, rank_policy = ?25, restart = ?26, "
	    "n_refused = ?27, refusal_failed = ?28, preload = ?29",
	[ST_REFUSALS_DEL] = "DELETE FROM refusals",
	[ST_REFUSAL_PUT] = "INSERT INTO refusals (rdzv_id, identity, why, "
	    "allocation_nodes, attempt, left_ms) VALUES (?1, ?2, ?3, ?4, ?5, "
	    "?6)",
	/* Plain INSERTs: a generation recorded twice must fail loudly. */
	[ST_ROUND_PUT] = "INSERT INTO rounds (rdzv_id, generation, "
	    "world_size, master_addr, master_port, restart_count, formed_ms, "
	    "members) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_GPUS_DEL] = "DELETE FROM gpus WHERE node_id = ?1",
	[ST_GPU_PUT] = "INSERT INTO gpus (node_id, device, name, uuid, ok, "
	    "failed_step, error, total_mem) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
	    "?7, ?8)",
	[ST_META_PUT] = "INSERT INTO meta (key, value) VALUES (?1, ?2) "
	    "ON CONFLICT (key) DO UPDATE SET value = ?2",
	[ST_EVENTS_GET] = "SELECT " EVENT_COLS " FROM events "
	    "WHERE rdzv_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
};

/*
 * The statements of rows written in batches: "HEAD VALUES (?, ...), ...
 * TAIL" with one row of values, or STORE_BATCH (the _N one). A node the
 * store wrote before replaces its row (an UPSERT); one it never wrote
 * (its id was handed out after the last commit) is a plain INSERT, which
 * need not look for the row first.
 */
#define NODE_SET	"rdzv_id = excluded.rdzv_id, "			\
	"session_id = excluded.session_id, hostname = excluded.hostname, "  \
	"advertise_addr = excluded.advertise_addr, "			    \
	"master_port = excluded.master_port, nproc = excluded.nproc, "	    \
	"rank_hint = excluded.rank_hint, state = excluded.state, "	    \
	"group_rank = excluded.group_rank, base_rank = excluded.base_rank, " \
	"generation = excluded.generation, arrival = excluded.arrival, "    \
	"joined_ms = excluded.joined_ms, "				    \
	"gpus_healthy = excluded.gpus_healthy, "			    \
	"gpus_total = excluded.gpus_total, reason = excluded.reason, "	    \
	"port_offer = excluded.port_offer, prev_rank = excluded.prev_rank, " \
	"join_token = excluded.join_token, step = excluded.step, "	    \
	"step_gen = excluded.step_gen, "				    \
	"step_wall_ms = excluded.step_wall_ms, "			    \
	"last_seen_ms = excluded.last_seen_ms"

static const struct {
	int		 one, many;
	const char	*head;
	int		 cols;
	const char	*tail;
} batched[] = {
	{ ST_NODE_NEW, ST_NODE_NEW_N, "INSERT INTO nodes (" NODE_COLS ")",
	    24, "" },
	{ ST_NODE_PUT, ST_NODE_PUT_N, "INSERT INTO nodes (" NODE_COLS ")",
	    24, " ON CONFLICT (node_id) DO UPDATE SET " NODE_SET },
	{ ST_EVENT_PUT, ST_EVENT_PUT_N,
	    "INSERT INTO events (rdzv_id, " EVENT_COLS ")", 6, "" },
};

/* "HEAD VALUES (?, ?), (?, ?) TAIL" for |rows| rows; NULL: no memory. */
static char *
batch_sql(const char *head, int cols, int rows, const char *tail)
{
	size_t	 len = strlen(head) + strlen(tail) + 16 +
		    (size_t)rows * ((size_t)cols * 3 + 4);
	char	*sql, *p;
	int	 r, c;

	if ((sql = malloc(len)) == NULL)
		return NULL;
	p = sql + snprintf(sql, len, "%s VALUES ", head);
	for (r = 0; r < rows; r++) {
		*p++ = r == 0 ? '(' : ',';
		if (r > 0)
			*p++ = '(';
		for (c = 0; c < cols; c++) {
			if (c > 0)
				*p++ = ',';
			*p++ = '?';
		}
		*p++ = ')';
	}
	snprintf(p, len - (size_t)(p - sql), "%s", tail);
	return sql;
}

/* Prepares one statement for the store's life. */
static int
prepare(struct sqlstore *s, int i, const char *sql, char *err, size_t errlen)
{
	if (sql == NULL)
		return errf(-1, err, errlen, "%s: out of memory", s->path);
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
	    &s->st[i], NULL) != SQLITE_OK)
		return errf(-1, err, errlen, "database %s: preparing \"%s\": %s",
		    s->path, sql, sqlite3_errmsg(s->db));
	return 0;
}

int
sqlstore_prepare_all(struct sqlstore *s, char *err, size_t errlen)
{
	char	*sql;
	size_t	 i;
	int	 rc;

	for (i = 0; i < ST_COUNT; i++) {
		if (statements[i] != NULL &&
		    prepare(s, (int)i, statements[i], err, errlen) != 0)
			return -1;
	}
	for (i = 0; i < sizeof(batched) / sizeof(batched[0]); i++) {
		sql = batch_sql(batched[i].head, batched[i].cols, 1,
		    batched[i].tail);
		rc = prepare(s, batched[i].one, sql, err, errlen);
		free(sql);
		if (rc != 0)
			return -1;
		sql = batch_sql(batched[i].head, batched[i].cols, STORE_BATCH,
		    batched[i].tail);
		rc = prepare(s, batched[i].many, sql, err, errlen);
		free(sql);
		if (rc != 0)
			return -1;
	}
	return 0;
}
