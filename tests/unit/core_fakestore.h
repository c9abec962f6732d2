/*
 * A stand-in for the SQLite store in the core's tests: it keeps only what
 * the core marks dirty each turn (rows of jobs and nodes, event sequence
 * numbers), deletes what the core removes, and builds a new core from those
 * rows the way the daemon does after a restart. A change the core forgets
 * to mark dirty shows up as a difference after fs_restore().
 */
#ifndef CORE_FAKESTORE_H
#define CORE_FAKESTORE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct fs_job {
	char			id[RDZV_ID_MAX + 1];
	char			owner[256];
	struct core_settings	s;
	enum core_job_state	state;
	char			reason[CORE_REASON_MAX];
	bool			held;
	char			held_reason[CORE_REASON_MAX];
	char			rejoin_lost[CORE_REASON_MAX];
	uint64_t		generation, event_seq;
	uint32_t		restart_count, attempt;
	int64_t			created, updated, ended, lc_left, join_left;
};

struct fs_node {
	uint64_t		node_id;
	uint8_t			session[CORE_SESSION_LEN];
	char			job[RDZV_ID_MAX + 1];
	char			host[CORE_STR_MAX + 1], addr[CORE_STR_MAX + 1];
	uint32_t		master_port, port_offer, nproc, rank_hint;
	uint32_t		base_rank;
	bool			has_hint;
	enum core_node_state	state;
	int32_t			group_rank;
	uint64_t		generation, arrival;
	int64_t			joined;
	uint32_t		gpus_h, gpus_t;
	char			reason[CORE_REASON_MAX];
	bool			has_reason;
	bool			used;
};

struct fakestore {
	struct fs_job	*jobs;
	size_t		 njobs, capjobs;
	struct fs_node	*nodes;		/* indexed by node_id */
	size_t		 nnodes, capnodes;
	uint64_t	 next_node_id;
	unsigned long	 commits, rows, bad_seq;
};

void *fs_grow(void *p, size_t *cap, size_t n, size_t size);

struct fs_job *fs_job_find(struct fakestore *fs, const char *id);

struct fs_node *fs_node_find(struct fakestore *fs, uint64_t node_id);

struct fs_node *fs_node_add(struct fakestore *fs, uint64_t node_id);

void	fs_node_delete(struct fakestore *fs, struct fs_node *fn);

/* One turn's group commit: deletions first, then upserts and events. */
void	fs_commit(struct fakestore *fs, struct core *c);

/* A daemon restart: a new core from the rows. NULL if restore failed. */
struct core *fs_restore(struct fakestore *fs, const struct core_config *cfg,
    struct core_now now, char *err, size_t errlen);

void	fs_free(struct fakestore *fs);

#endif
