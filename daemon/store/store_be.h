/*
 * The backends behind store.h: each fills in a table of its functions, and
 * store.c calls through it. A backend's state is its own struct, reached
 * through the opaque pointer the table's functions take.
 */
#ifndef RDZV_STORE_BE_H
#define RDZV_STORE_BE_H

#include "store.h"

struct store_ops {
	enum store_kind	  kind;
	const char	 *name;		/* "sqlite", "etcd" */
	int		(*open)(const struct store_spec *,
			    const struct store_opts *, void **out, char *err,
			    size_t errlen);
	int		(*load)(void *, struct core *, struct core_now,
			    char *err, size_t errlen);
	/*
	 * Writes a turn that store.c found not empty; next_node_id only when
	 * write_meta. Called only while no earlier commit failed and the
	 * store is writable (store.c keeps both rules).
	 */
	int		(*commit)(void *, struct core *, bool write_meta,
			    char *err, size_t errlen);
	/*
	 * A commit in two halves, for the turn's pipeline (store.h,
	 * store_commit_begin); NULL for a backend that commits whole in
	 * commit. commit_rows writes the turn into an open transaction on
	 * the loop; commit_end makes it durable, from any one thread, and
	 * reads nothing of the core.
	 */
	int		(*commit_rows)(void *, struct core *, bool write_meta,
			    char *err, size_t errlen);
	int		(*commit_end)(void *, char *err, size_t errlen);
	int		(*fence)(void *, const char *leader_key,
			    int64_t create_revision);
	int		(*events)(void *, const char *rdzv_id,
			    uint64_t after_seq, uint32_t limit,
			    int (*cb)(const struct core_event *, void *),
			    void *arg, char *err, size_t errlen);
	/* 1 when the store holds no job (and for etcd: no key at all). */
	int		(*empty)(void *, char *err, size_t errlen);
	uint64_t	(*transactions)(const void *);
	uint64_t	(*bytes_written)(const void *);
	void		(*close)(void *);
};

/* store_sqlite.c, store_etcd.c */
extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_etcd_ops;

/* store.c: the backend's own handle (the tests reach SQLite through it). */
void		*store_backend(struct store *);

#endif
