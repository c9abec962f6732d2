/*
 * The store of rdzvd (SPEC §9, §14): the durable copy of the rendezvous
 * core's jobs, nodes, rounds and events. The daemon opens it at start,
 * rebuilds the core from it, and at the end of every event-loop turn writes
 * the core's changes before anything is sent. Two backends sit behind this
 * one interface, chosen by the store's spec:
 *
 *   sqlite:PATH or a bare PATH     one SQLite file (store_sqlite*.c)
 *   etcd://HOST:PORT[,...]/PREFIX  an etcd v3 cluster (store_etcd*.c)
 *
 * A failed commit is final for the store until the next store_load: the
 * daemon exits (SQLite) or steps down (etcd) and recovers from what was
 * committed. docs/STORE.md describes both layouts and the durability
 * choices.
 *
 * Module daemon/store/ (librdzvstore): owns the durable copy and both
 * backends. It calls the core (to load it and to read a turn's changes),
 * lib/etcd/ and lib/'s base; the program (main.c: open, load), the frame
 * (turn.c: commit), the election (load, drop) and, to read its kind and
 * settings, the RPC handlers and the HTTP listener call it.
 *
 * Calls: lib/base, lib/etcd, proto, daemon/core.
 * Called by: daemon, daemon/frame, daemon/ha, daemon/http, daemon/rpc.
 */
#ifndef RDZV_STORE_H
#define RDZV_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

struct store;

enum store_kind {
	STORE_SQLITE = 1,
	STORE_ETCD = 2,
};

/* A store spec taken apart (store_spec_parse). */
#define STORE_PATH_MAX		4096
#define STORE_ENDPOINTS_MAX	1024
#define STORE_PREFIX_MAX	256
struct store_spec {
	enum store_kind	kind;
	char		path[STORE_PATH_MAX];		/* SQLite */
	char		endpoints[STORE_ENDPOINTS_MAX];	/* etcd: "h:p,h:p" */
	char		prefix[STORE_PREFIX_MAX];	/* etcd: "/rdzv" */
};

/*
 * Parses "sqlite:PATH", a bare PATH, or "etcd://HOST:PORT[,HOST:PORT...]/
 * PREFIX" (the prefix keeps its leading slash and loses a trailing one; it
 * may not be empty). 0, or -1 with a message naming the problem.
 */
int		 store_spec_parse(const char *spec, struct store_spec *out,
		    char *err, size_t errlen);

/* What an etcd store needs besides its spec; every field may be NULL/0. */
struct store_opts {
	const char	*etcd_ca;	/* CA of the members' certificates */
	const char	*etcd_cert;	/* client certificate and key */
	const char	*etcd_key;
	uint32_t	 etcd_timeout_ms;	/* one request; default 5000 */
	/* etcd: only read (--migrate-store's FROM): a load leaves what an
	 * interrupted turn left for the writer to collect, and a commit is
	 * refused. */
	int		 read_only;
};

/*
 * Opens the store of |spec| (see the top). SQLite: opens the database,
 * creating it (mode 0600) and its missing parent directories (0700) when
 * absent, holds a lock on "<path>.lock" so that a second rdzvd on the same
 * file refuses to start, sets WAL mode and synchronous=FULL, migrates older
 * schemas, and refuses a newer schema, a file that is not an rdzv database
 * or a damaged one with a message naming the path. etcd: connects and
 * reads PREFIX/meta: absent (a new store), or an rdzv store's of a format
 * this rdzvd knows; anything else is refused with a message naming the
 * store. 0, or -1 with a message in err. |opts| may be NULL.
 */
int		 store_open_opts(const char *spec, const struct store_opts *opts,
		    struct store **out, char *err, size_t errlen);
/* store_open_opts() without options. */
int		 store_open(const char *spec, struct store **out, char *err,
		    size_t errlen);

/*
 * Rebuilds a fresh core from the store (core_restore_job, _node, _event,
 * then core_restore_finish(now)): leases of live nodes end lease_ttl after
 * now, open deadlines resume with the time they had left. Works any number
 * of times on one open store (a standby that becomes the leader loads
 * again), and clears the failure of an earlier commit: what the core now
 * holds is what the store holds. 0, or -1 with a message.
 */
int		 store_load(struct store *, struct core *, struct core_now now,
		    char *err, size_t errlen);

/*
 * Writes the core's changes of this loop turn (group commit): removed jobs
 * and nodes are deleted, dirty jobs and nodes written, new events appended,
 * a round newly completed recorded with its assignments, next_node_id
 * saved. SQLite: one transaction. etcd: as few Txns as etcd's limits allow,
 * each job's changes whole in one Txn where they fit, all committed before
 * this returns. A turn with nothing to write does no transaction. It does
 * not call core_changes_clear(); the daemon does, after sending. 0, or -1
 * with a message on any failure, after which every later commit fails too
 * until the next store_load: SPEC §9 wants the daemon to stop serving,
 * never to retry.
 */
int		 store_commit(struct store *, struct core *, char *err,
		    size_t errlen);

/*
 * store_commit() in two halves, for a commit that runs beside the event
 * loop (turn.c). store_commit_begin() reads the core's changes and writes
 * them into an open transaction; it returns 1 when store_commit_end() must
 * follow to make them durable (SQLite's COMMIT, etcd's Txns), 0 when the
 * turn is already durable (nothing to write), -1 with a message
 * (as store_commit). store_commit_end() reads nothing of the core and may
 * run on another thread, while no other call is made on the store; 0, or
 * -1 with a message, after which the store is broken as after a failed
 * store_commit(). The core's changes must stay as they are until the end
 * (the daemon holds its inputs meanwhile), since a failed end leaves the
 * daemon to stop, not to write them again.
 */
int		 store_commit_begin(struct store *, struct core *, char *err,
		    size_t errlen);
int		 store_commit_end(struct store *, char *err, size_t errlen);

/*
 * Fencing (SPEC §14), etcd only: from now on every Txn of a commit holds
 * only while create_revision(leader_key) == create_revision, so a leader
 * that lost its key can no longer write; such a commit fails with a message
 * saying the leader key is gone or changed. leader_key NULL removes the
 * fence. 0, -EINVAL (bad arguments), -ENOTSUP (an SQLite store, which has
 * one writer by its lock), or -ENOMEM.
 */
int		 store_fence(struct store *, const char *leader_key,
		    int64_t create_revision);

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

/* 1 when the store holds nothing (SQLite: no job; etcd: no key under the
 * prefix), 0 when it holds something, -1 with a message. */
int		 store_is_empty(struct store *, char *err, size_t errlen);

/*
 * rdzvd --migrate-store FROM TO (store_migrate.c): loads every job, node
 * and event of the store FROM and writes them to the store TO, which must
 * be empty. |opts| are TO's (or FROM's) etcd settings. Round history is
 * not copied: the jobs' generations and each node's assignment are, and
 * so are the events that tell of every round. Fills in what was copied.
 * 0, or -1 with a message; FROM is never written.
 */
struct store_migrated {
	uint32_t	jobs;
	uint32_t	nodes;
	uint64_t	events;
	uint64_t	transactions;
	uint64_t	bytes;
};
int		 store_migrate(const char *from, const char *to,
		    const struct store_opts *opts, struct core_now now,
		    struct store_migrated *out, char *err, size_t errlen);

enum store_kind	 store_kind(const struct store *);
/* 1 for an etcd store (the daemon steps down on a failed commit), else 0. */
int		 store_kind_etcd(const struct store *);
/* Transactions store_commit() has committed (etcd: Txns), for benchmarks
 * and ServerInfo. */
uint64_t	 store_transactions(const struct store *);
/* Bytes of requests sent to etcd by store_commit(); 0 for SQLite. */
uint64_t	 store_bytes_written(const struct store *);
/* The database path, or "etcd://ENDPOINTS/PREFIX". */
const char	*store_path(const struct store *);
/* Accepts NULL. Releases the lock file (SQLite) or the connections. */
void		 store_close(struct store *);

#endif
