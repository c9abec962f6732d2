/*
 * The SQLite store of rdzvd (SPEC §9): the durable copy of the rendezvous
 * core's jobs, nodes, rounds and events. The daemon opens it at start,
 * rebuilds the core from it, and at the end of every event-loop turn writes
 * the core's changes in one transaction before anything is sent. A failed
 * commit is final: the daemon exits and recovers from the file at its next
 * start. docs/STORE.md describes the schema and the durability choices.
 */
#ifndef RDZV_STORE_H
#define RDZV_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

struct store;

/*
 * Opens the database at path, creating it (mode 0600) and its missing
 * parent directories (0700) when absent. Holds a lock on "<path>.lock" so
 * that a second rdzvd on the same file refuses to start; sets WAL mode,
 * synchronous=FULL and foreign keys; migrates older schemas. A newer
 * schema, a file that is not an rdzv database, or a damaged one is refused
 * with a message naming the path; an existing file is never recreated or
 * truncated. 0, or -1 with a message in err.
 */
int		 store_open(const char *path, struct store **out, char *err,
		    size_t errlen);

/*
 * Rebuilds a fresh core from the database (core_restore_job, _node, _event,
 * then core_restore_finish(now)): leases of live nodes end lease_ttl after
 * now, open deadlines resume with the time they had left. 0, or -1 with a
 * message.
 */
int		 store_load(struct store *, struct core *, struct core_now now,
		    char *err, size_t errlen);

/*
 * Writes the core's changes of this loop turn in one transaction (group
 * commit): removed jobs and nodes are deleted, dirty jobs and nodes
 * upserted, new events appended, a round newly completed recorded with its
 * assignments, next_node_id saved. A turn with nothing to write does no
 * transaction. It does not call core_changes_clear(); the daemon does, after
 * sending. 0, or -1 with a message on any failure, after which every later
 * commit fails too: SPEC §9 wants the daemon to exit, never to retry.
 */
int		 store_commit(struct store *, struct core *, char *err,
		    size_t errlen);

/*
 * Calls cb with the events of a job whose seq is above after_seq, oldest
 * first, at most limit of them (the core keeps only the latest
 * CORE_EVENTS_KEPT). cb returns non-zero to stop early and must not call
 * into the store. 0 (also for an unknown job), or -1 with a message.
 */
int		 store_events(struct store *, const char *rdzv_id,
		    uint64_t after_seq, uint32_t limit,
		    int (*cb)(const struct core_event *, void *), void *arg,
		    char *err, size_t errlen);

/* Transactions store_commit() has committed, for benchmarks and ServerInfo. */
uint64_t	 store_transactions(const struct store *);
const char	*store_path(const struct store *);
/* Accepts NULL. Releases the lock file. */
void		 store_close(struct store *);

#endif
