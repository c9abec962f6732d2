/*
 * The SQLite backend of the store (store.h), shared by store_sqlite*.c only:
 * its struct, its prepared statements and the helpers the opening,
 * committing and loading parts have in common. store.c reaches it through
 * the functions at the end, which behave as store.h describes.
 */
#ifndef RDZV_STORE_SQLITE_H
#define RDZV_STORE_SQLITE_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "core.h"
#include "hash.h"

#define STORE_XSTR(x)	#x
#define STORE_STR(x)	STORE_XSTR(x)

#define JOB_COLS	"rdzv_id, owner, min_nodes, max_nodes, "	\
	"last_call_timeout_ms, join_timeout_ms, max_restarts, lease_ttl_ms, " \
	"reconnect_grace_ms, state, reason, generation, restart_count, "   \
	"attempt, created_ms, updated_ms, ended_ms, event_seq, "	   \
	"last_call_left_ms, join_left_ms, held_reason, rejoin_timeout_ms, " \
	"rejoin_lost, hang_timeout_ms, rank_policy, restart, n_refused, "   \
	"refusal_failed, preload"
/* A node's columns as schema 7 made them (its migration copies these). */
#define NODE_COLS_7	"node_id, rdzv_id, session_id, hostname, "	\
	"advertise_addr, master_port, nproc, rank_hint, state, group_rank, " \
	"base_rank, generation, arrival, joined_ms, gpus_healthy, "	     \
	"gpus_total, reason, port_offer"
/* ... and since 9: the rank it held in its last round (rank-policy
 * stable), the token of the join that made it, its last step (NULL: none)
 * and generation, when the step moved, when it was last seen. */
#define NODE_COLS	NODE_COLS_7 ", prev_rank, join_token, step, "	\
	"step_gen, step_wall_ms, last_seen_ms"
#define EVENT_COLS	"seq, wall_ms, generation, kind, message"

/*
 * Rows a turn writes by the thousand (nodes, events) go STORE_BATCH to an
 * INSERT: a statement's own cost (its cursors, its start and end) is most
 * of what a small row costs.
 */
#define STORE_BATCH	32

/*
 * The statements of a turn and of Control.ListEvents, prepared once. Each
 * _N one is its row's statement with STORE_BATCH rows of values.
 */
enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_JOB_DEL,
	ST_NODE_DEL,
	ST_EVENTS_DEL,
	ST_JOB_PUT,
	ST_NODE_NEW,	/* a node the store never wrote: a plain INSERT */
	ST_NODE_NEW_N,
	ST_NODE_PUT,	/* a node written before: an UPSERT */
	ST_NODE_PUT_N,
	ST_EVENT_PUT,
	ST_EVENT_PUT_N,
	ST_ROUND_PUT,
	ST_META_PUT,
	ST_GPUS_DEL,
	ST_GPU_PUT,
	ST_EVENTS_GET,
	ST_REFUSALS_DEL,
	ST_REFUSAL_PUT,
	ST_COUNT
};

struct sqlstore {
	char		*path;
	sqlite3		*db;
	int		 lock_fd;
	sqlite3_stmt	*st[ST_COUNT];
	uint64_t	 next_node_id;	/* as saved in meta; no row from here up */
	uint64_t	 pending_node_id; /* of the rows of an open commit */
	uint64_t	 transactions;
	/* Bytes of the pages its commits wrote (SQLite's own count of the
	 * dirty pages it wrote, SQLITE_DBSTATUS_CACHE_WRITE, times the page
	 * size): the WAL's growth, without frame headers and checkpoints. */
	uint64_t	 bytes;
	int64_t		 page_size;	/* 0 until the first commit asks */
	struct core_job	*loading;	/* whose events store_load reads */
	char		*buf;		/* a round's members as JSON */
	size_t		 buf_cap;
};

/* store_sqlite.c */
int		 sqlstore_fail(struct sqlstore *, char *, size_t, const char *);
int		 sqlstore_commit(struct sqlstore *, struct core *,
		    bool write_meta, char *err, size_t errlen);
/* The two halves of sqlstore_commit: the rows, on the loop; then COMMIT,
 * which may run on another thread (store_commit_begin). */
int		 sqlstore_commit_rows(struct sqlstore *, struct core *,
		    bool write_meta, char *err, size_t errlen);
int		 sqlstore_commit_end(struct sqlstore *, char *err,
		    size_t errlen);
uint64_t	 sqlstore_transactions(const struct sqlstore *);
uint64_t	 sqlstore_bytes(const struct sqlstore *);

/* store_sqlite_hosts.c: the core's dirty host records; every record into
 * the core's hosts. 0, or -1 with a message. */
int		 sqlstore_put_hosts(struct sqlstore *, const struct core *,
		    char *err, size_t errlen);
int		 sqlstore_load_hosts(struct sqlstore *, struct core *,
		    char *err, size_t errlen);

/* store_sqlite_open.c */
int		 sqlstore_open(const char *path, struct sqlstore **out,
		    char *err, size_t errlen);
void		 sqlstore_close(struct sqlstore *);
const char	*sqlstore_path(const struct sqlstore *);

/* store_sqlite_stmt.c: prepares every ST_* statement into s->st. */
int		 sqlstore_prepare_all(struct sqlstore *, char *err,
		    size_t errlen);

/* store_sqlite_load.c */
int		 sqlstore_load(struct sqlstore *, struct core *,
		    struct core_now now, char *err, size_t errlen);
int		 sqlstore_events(struct sqlstore *, const char *rdzv_id,
		    uint64_t after_seq, uint32_t limit,
		    int (*cb)(const struct core_event *, void *), void *arg,
		    char *err, size_t errlen);

#endif
