/*
 * Rebuilding the core from the store (SPEC §4 rule 11): what the SQLite and
 * etcd stores call at startup to put back what they saved (defined in
 * core_restore.c and beside the state each restores: core_event.c,
 * core_refuse.c, core_progress.c, core_objects.c), and core_check(), the
 * tests' invariant check. core.h includes this header at its end, since
 * these take its types; whoever includes core.h has them as before.
 */
#ifndef RDZV_CORE_RESTORE_H
#define RDZV_CORE_RESTORE_H

#include "core.h"

/*
 * The order: create each job, fill in its persisted fields (settings,
 * state, reason, generation, restart_count, attempt, *_ms, event_seq,
 * last_call_left_ms, join_left_ms), create its nodes and fill theirs
 * (master_port, nproc, rank hint, state, group_rank, base_rank, generation,
 * arrival, joined_ms, gpus_*, reason via core_node_set_reason), add its
 * latest events oldest first, then call core_restore_finish() once.
 * Nothing restored is dirty.
 */
struct core_job	*core_restore_job(struct core *, const char *rdzv_id,
		    const char *owner);
struct core_node *core_restore_node(struct core *, struct core_job *,
		    uint64_t node_id, const uint8_t session_id[CORE_SESSION_LEN],
		    const char *hostname, const char *advertise_addr);
void		 core_restore_event(struct core_job *, const struct core_event *);
/* A kept refusal (|r|'s until_ms ignored) with |left_ms| of its time left
 * from the restore's now; one with none left, or past the bound, is
 * dropped. */
void		 core_restore_refusal(struct core *, const struct core_refusal *r,
		    uint64_t left_ms);
/* The time a kept refusal has left at |now| (0: none), for the store. */
uint64_t	 core_refusal_left(const struct core_refusal *,
		    struct core_now now);
/* The token of the join that made a restored node: a join sent again with
 * it after a restart finds the node (core_join), as before it. A token
 * another node holds already is ignored. */
void		 core_restore_node_token(struct core_node *,
		    const uint8_t token[CORE_TOKEN_LEN]);
void		 core_node_set_reason(struct core_node *, const char *);
/* A restored node's last step and when it was last seen. */
void		 core_restore_node_progress(struct core_node *, uint64_t step,
		    uint64_t step_gen, int64_t step_wall_ms,
		    int64_t last_seen_ms);
/* Replaces the node's per-device GPU results (a copy); true if changed.
 * Marks nothing dirty (the restore uses it too). */
bool		 core_node_set_gpus(struct core_node *, const struct core_gpu *,
		    uint32_t n);
/*
 * Rebuilds rounds, counters and timers: live nodes get leases ending at
 * now + lease_ttl, open deadlines resume with the time they had left,
 * next_node_id is at least max + 1. 0, or -1 with a message when the
 * restored data is inconsistent.
 */
int		 core_restore_finish(struct core *, struct core_now,
		    uint64_t next_node_id, char *err, size_t errlen);
/* Checks every invariant (tests); 0 or -1 with a message. O(all). */
int		 core_check(const struct core *, char *err, size_t errlen);

#endif
