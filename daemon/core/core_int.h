/*
 * What the core's files share among themselves and nobody else: timer
 * kinds, and the plumbing each file of the core calls (grouped by the file
 * that defines it). The daemon, the store and the tests outside the core
 * include core.h only.
 */
#ifndef RDZV_CORE_INT_H
#define RDZV_CORE_INT_H

#include "core.h"

enum {
	CORE_TIMER_LAST_CALL = 1,
	CORE_TIMER_JOIN,
	CORE_TIMER_RETENTION,
	CORE_TIMER_LEASE,
	CORE_TIMER_PROGRESS,
};

/* core_timer.c */
void		 core_timer_init(struct core_timer *, int, void *);
void		 core_timer_set(struct core *, struct core_timer *, uint64_t);
void		 core_timer_clear(struct core *, struct core_timer *);
bool		 core_timer_armed(const struct core_timer *);
struct core_timer *core_timer_top(const struct core *);

/* core_objects.c */
void		 core_job_dirty(struct core_job *);
void		 core_job_changed(struct core_job *);
void		 core_node_dirty(struct core_node *);
void		 core_node_set_state(struct core_node *, enum core_node_state);
void		 core_settle_later(struct core_job *);
void		 core_settle_due(struct core *);
void		 core_node_free(struct core_node *);
void		 core_job_free(struct core_job *);
/* Removal: out of the core's indexes and lists, to be freed after the
 * commit (core_changes_clear). */
void		 core_node_forget_token(struct core_node *);
void		 core_node_unlink(struct core_node *);
void		 core_owner_job_unended(struct core_job *);
void		 core_job_remove(struct core_job *);

/* core_event.c */
void		 core_event_add(struct core_job *, const char *kind,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void		 core_fmt_secs(char *, size_t, uint64_t ms);
void		 core_fmt_wall(char *, size_t, int64_t wall_ms);
/* Why a node that has no assignment waits, in words. */
void		 core_waiting_reason(const struct core_node *, char *, size_t);

/* core_outbox.c */
/* A cleared message of that kind, to fill and queue. */
void		 core_msg_init(struct core_msg *, enum core_msg_kind);
/* Queues a copy of the message for a connected node (else drops it). */
void		 core_msg_queue(struct core_node *, const struct core_msg *);
void		 core_msg_waiting(struct core_node *, const char *reason);
uint32_t	 core_fails_in(const struct core_job *);
void		 core_msg_drop(struct core *, struct core_node *);

/* core_round.c */
void		 core_settle(struct core_job *);
void		 core_rounds_clear(struct core *);
void		 core_round_clear(struct core_job *);
void		 core_node_end(struct core_node *, enum core_node_state,
		    const char *reason);

/* core_end.c */
void		 core_job_fail(struct core_job *, const char *reason);
void		 core_job_close(struct core_job *, const char *reason);

/* core_owner.c */
struct core_owner *core_owner_get(struct core *, const char *name);
void		 core_owner_job_ended(struct core_job *);
void		 core_owners_restore(struct core *);
void		 core_owners_free(struct core *);

/* core.c */
void		 core_set_now(struct core *, struct core_now);
struct core_job	*core_job_new(struct core *, const char *rdzv_id,
		    const char *owner);
struct core_node *core_node_new(struct core_job *, uint64_t node_id,
		    const uint8_t session_id[CORE_SESSION_LEN],
		    const char *hostname, const char *advertise_addr);
int		 core_owner_check(const struct core_job *, const char *identity,
		    const char *what, char *err, size_t errlen);
void		 core_tell_current(struct core_node *, bool always);
void		 core_queue_accepted(struct core_node *, bool resumed);

/* core_progress.c */
void		 core_progress_tell(struct core_job *);
void		 core_progress_restored(struct core_job *, struct core_now);
/*
 * core_refuse.c: a join refused because its host is quarantined, kept
 * for a job that has no node yet (its first nodes may come after it).
 */
#define CORE_REFUSALS_MAX	1024
/* The join |req| of |identity| was refused: |why|. */
void		 core_join_refused(struct core *, const struct core_join *,
		    const char *identity, const char *why);
/* A job just created or reopened by a join of |attempt| takes the
 * refusals kept for it (of that attempt). */
void		 core_refusals_take(struct core_job *, uint32_t attempt);
/* 0, or the refusal of a late join into a job a refusal failed. */
int		 core_refused_late(const struct core_job *,
		    const struct core_join *, char *err, size_t errlen);
/* core_hosts.c */
/* Before a join: 0, or the refusal of a quarantined host. *from is
 * where the join's host changes start (for core_host_changed). */
int		 core_join_host(struct core *, const struct core_join *,
		    size_t *from, char *err, size_t errlen);
/* Tells |j| (may be NULL) of the host changes since |from| and evicts
 * the nodes of a host quarantined. */
void		 core_host_changed(struct core *, size_t from,
		    struct core_job *j);
void		 core_report_host(struct core_node *,
		    const struct core_report *);

/* core_agent.c */
void		 core_lease_expired(struct core_node *);

/*
 * Rule 17's start-up allowance: how long a node that said its workers are
 * starting as new processes (an UPDATE "starting") is excused from a
 * round's meeting it missed. A new process imports torch before it reaches
 * rdzv.elastic: seconds, tens of seconds on a busy host; two minutes is
 * well past that, and bounds what a node that never says "started" costs.
 */
#define CORE_START_ALLOWANCE_MS	120000

/* core_agent.c: a node's workers start ("starting") or started. */
void		 core_node_starting(struct core_node *, bool starting);

/* core_culprit.c: rule 17. The nodes a failure report of |by| names as
 * the failure's culprits are lost; how many (0: none, a plain failure). */
uint32_t	 core_culprits(struct core_node *by,
		    const struct core_report *);

/*
 * Rule 18 (core_repeat.c): a failure of the round a counted failure formed,
 * with the same nodes and before any step, is that failure again, at most
 * CORE_REPEAT_MAX times in a row within CORE_REPEAT_WINDOW_MS of it. A
 * partition of a few collective timeouts makes two or three such rounds;
 * a script that fails at once every time still spends a restart per four
 * tries at most.
 */
#define CORE_REPEAT_MAX		3
#define CORE_REPEAT_WINDOW_MS	30000
void		 core_repeat_round_cleared(struct core_job *);
void		 core_repeat_counted(struct core_job *);
bool		 core_repeat_of_failure(struct core_job *, bool plain,
		    char reason[CORE_REASON_MAX]);

#endif
