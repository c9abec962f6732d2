/*
 * The rendezvous core: the job state machine of SPEC §4, without I/O.
 *
 * The daemon feeds it inputs (a join, a resume, a report, a leave, a closed
 * connection, an operator action, the passing of time), each carrying the
 * current time as a struct core_now; the core never reads a clock, a socket
 * or the database. What must happen as a result is recorded in the core and
 * drained by the daemon once per event-loop turn:
 *
 *   1. the store persists the changes in ONE transaction (group commit):
 *      core->removed_jobs and core->removed_nodes first (deleted rows), then
 *      core->dirty_jobs, core->dirty_nodes, core->new_events and
 *      core->new_rounds;
 *   2. after the commit, core_outbox_pop() hands out the messages for the
 *      nodes' Join streams, in order;
 *   3. core->changed_jobs and core->removed_jobs are the jobs Control.Watch
 *      streams should be told about;
 *   4. core_changes_clear() forgets all of it and frees removed objects.
 *
 * Then core_next_deadline() says when to call core_advance() next.
 *
 * The structs are public so the daemon and the store can read them; only
 * the core writes them, except for the fields the store fills in between
 * core_restore_job()/core_restore_node() and core_restore_finish().
 * docs/RENDEZVOUS.md describes the rules as implemented. Memory exhaustion
 * aborts: the core's state cannot be half-updated.
 *
 * Module daemon/core/ (librdzvcore): owns every job, node, round and event
 * in memory and the rules that change them. It calls only lib/'s base
 * (hash, text, rdzv_id, xmalloc); the store, the conversion to protobuf,
 * the frame, the RPC handlers, the HTTP listener, auth (a job's owner) and
 * the election call it, never the reverse. Its outcomes are its
 * own (enum core_result); the RPC edge maps them to gRPC statuses.
 *
 * Calls: lib/base.
 * Called by: daemon/auth, daemon/convert, daemon/frame, daemon/ha,
 *   daemon/http, daemon/rpc, daemon/store.
 */
#ifndef RDZV_CORE_H
#define RDZV_CORE_H

#include <sys/queue.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "core_hostrules.h"
#include "rdzv_id.h"
#include "xmalloc.h"

#define CORE_SESSION_LEN	16
#define CORE_TOKEN_LEN		16	/* a join token (JoinRequest.join_token) */
#define CORE_STR_MAX		255	/* hostname, advertise address */
#define CORE_REASON_MAX		256	/* reasons and event messages */
#define CORE_KIND_MAX		16	/* event kinds */
#define CORE_EVENTS_KEPT	100	/* per job, in memory */
#define CORE_NPROC_MAX		65536
#define CORE_PRELOAD_MAX	255	/* a job's preload (issue 45) */
/*
 * Rule 13 with rejoin_timeout 0: how long a round left short by a leave or
 * an eviction waits before it fails. scancel sends SIGTERM to every agent
 * at once, and their Leaves arrive one by one: this is time for the rest
 * to arrive, so that the job ends as "cancelled: every node left" rather
 * than naming the first node to go. A loss fails at once (its reconnect
 * grace has passed already).
 */
#define CORE_LEAVE_SETTLE_MS	1000
#define CORE_LEAD_KEPT		64	/* leading steps kept per job */
#define CORE_PROGRESS_TELL_MS	1000	/* watchers hear of steps this often */

/*
 * What a core call says of a request: CORE_OK when it was taken, else why
 * not, with a message for the caller. The core speaks no protocol: the RPC
 * edge maps each outcome to its gRPC status once (rpc_status(),
 * rpc/rpc_access.c).
 */
enum core_result {
	CORE_OK = 0,
	CORE_INVALID,		/* malformed or out of range */
	CORE_NOT_FOUND,		/* no such job, node or session */
	CORE_DENIED,		/* the caller may not act on it */
	CORE_REFUSED,		/* not in the job's state or generation */
	CORE_LIMIT,		/* over a configured limit */
	CORE_ERROR,		/* the daemon could not do it */
};

/* The time of an input: monotonic for deadlines, wall for display. */
struct core_now {
	uint64_t	mono_ms;
	int64_t		wall_ms;
};

/* SPEC §3; durations in ms. In a join, 0 means "not set". */
struct core_settings {
	uint32_t	min_nodes;
	uint32_t	max_nodes;
	uint32_t	last_call_timeout_ms;
	uint32_t	join_timeout_ms;
	uint32_t	max_restarts;
	uint32_t	lease_ttl_ms;
	uint32_t	reconnect_grace_ms;
	/*
	 * Rule 13: how long a job short of min_nodes after a loss waits for
	 * a replacement. 0 is a real value (fail at once), so a join says
	 * whether it set one; a job's is always set (default join_timeout).
	 */
	bool		has_rejoin_timeout;
	uint32_t	rejoin_timeout_ms;
	/* Workers silent this long fail their node as hung; 0: off. The
	 * agents watch it; the job only carries it (docs/HEALTH.md). */
	uint32_t	hang_timeout_ms;
	/* Rules 16 and 15; 0 in a join: unset. */
	uint8_t		rank_policy;		/* enum core_rank_policy */
	uint8_t		restart;		/* enum core_restart_mode */
	/*
	 * Issue 45: the Python modules the agents preload in a fork server,
	 * comma-separated (docs/AGENT.md "Warm starts"); "": none. The job
	 * only carries it. A join sets it through core_join.preload, which
	 * is checked before it is copied here.
	 */
	char		preload[CORE_PRELOAD_MAX + 1];
};

/* Numbered as rdzv.v1.RankPolicy and rdzv.v1.RestartMode. */
enum core_rank_policy {
	CORE_RANK_ORDERED = 1,		/* rule 2 */
	CORE_RANK_STABLE = 2,		/* rule 16 */
};
enum core_restart_mode {
	CORE_RESTART_PROCESS = 1,
	CORE_RESTART_IN_PROCESS = 2,	/* rule 15 */
};

struct core_config {
	uint32_t		max_nodes_per_job;	/* 10,000 */
	uint32_t		max_jobs_per_owner;	/* 1,000 not ended */
	uint64_t		max_join_timeout_ms;	/* 1 day */
	uint64_t		retention_ms;		/* 7 days */
	/* Ended jobs kept per owner, oldest pruned first; at least 1. */
	uint32_t		max_ended_per_owner;	/* 10,000 */
	struct core_settings	defaults;		/* SPEC §3 */
	/* A node is a straggler when it trails the job's leading node by
	 * more than this many steps, or passed its step more than this long
	 * after the leader did (docs/HEALTH.md); 0: that test is off. */
	uint64_t		straggler_steps;	/* 20 */
	uint64_t		straggler_ms;		/* 30 s */
	struct host_policy	hosts;			/* docs/HEALTH.md */
};

/* Numbered as rdzv.v1.JobState and rdzv.v1.NodeState. */
enum core_job_state {
	CORE_JOB_WAITING = 1,		/* a round is open */
	CORE_JOB_RUNNING = 2,
	CORE_JOB_CLOSING = 3,
	CORE_JOB_CLOSED = 4,
	CORE_JOB_FAILED = 5,
};

enum core_node_state {
	CORE_NODE_PARTICIPANT = 1,
	CORE_NODE_WAITING = 2,
	CORE_NODE_SPARE = 3,
	CORE_NODE_SUCCEEDED = 4,
	CORE_NODE_LEFT = 5,
	CORE_NODE_LOST = 6,
	CORE_NODE_EVICTED = 7,
	CORE_NODE_FAILED = 8,
};
#define CORE_NODE_NSTATES	9

/* Numbered as rdzv.v1.Outcome. */
enum core_outcome {
	CORE_OUTCOME_SUCCEEDED = 1,
	CORE_OUTCOME_FAILED = 2,
	CORE_OUTCOME_UPDATE = 3,
};

struct core_job;
struct core_node;
struct core_owner;

/* A deadline in the core's timer heap. */
struct core_timer {
	uint64_t	 at;		/* monotonic ms */
	size_t		 idx;		/* in the heap; SIZE_MAX: not armed */
	int		 kind;
	void		*owner;
};

struct core_event {
	uint64_t	 seq;		/* per job, from 1 */
	int64_t		 wall_ms;
	uint64_t	 generation;
	char		 kind[CORE_KIND_MAX];	/* "join", "round", "lost", ... */
	char		 message[CORE_REASON_MAX];
	struct core_job	*job;		/* in core->new_events only */
};

/* A member of a round as it was formed: what its assignment said. */
struct core_member {
	uint64_t	 node_id;
	uint32_t	 group_rank, base_rank, nproc;
};

/*
 * A round formed in this turn (rule 2), complete as formed, even when a
 * member is lost or the round superseded within the same turn.
 */
struct core_round {
	struct core_job		*job;
	uint64_t		 generation;
	uint32_t		 world_size;
	char			 master_addr[CORE_STR_MAX + 1];
	uint32_t		 master_port;
	uint32_t		 restart_count;
	struct core_member	*members;	/* by group rank */
	uint32_t		 n;
};

struct core_node {
	uint64_t		 node_id;	/* unique in the core */
	uint8_t			 session_id[CORE_SESSION_LEN];
	struct core_job		*job;
	char			*hostname;
	char			*advertise_addr;
	uint32_t		 master_port;	/* offered if it is rank 0 */
	uint32_t		 port_offer;	/* for the next round; 0 none */
	uint32_t		 nproc;
	bool			 has_rank_hint;
	uint32_t		 rank_hint;
	enum core_node_state	 state;
	int32_t			 group_rank;	/* -1: not in the current round */
	uint32_t		 base_rank;
	uint64_t		 generation;	/* of the assignment it holds; 0 */
	uint64_t		 arrival;	/* order of joins, core-wide */
	int64_t			 joined_ms;	/* wall */
	int64_t			 last_seen_ms;	/* wall; persisted by the
						   progress checkpoint */
	bool			 connected;	/* not persisted */
	/* The token of the join that made it, while it is live; persisted
	 * (see core_join). */
	bool			 has_token;
	uint8_t			 join_token[CORE_TOKEN_LEN];
	uint32_t		 gpus_healthy;
	uint32_t		 gpus_total;
	struct core_gpu		*gpus;		/* each device's latest result */
	uint32_t		 n_gpus;
	bool			 gpus_dirty;	/* gpus changed this turn */
	char			*reason;	/* why it left, was lost, evicted */
	/* Training progress (core_progress.c); saved with the node, which a
	 * step alone does not make dirty: core_progress_checkpoint() does,
	 * now and then. */
	bool			 has_step;
	uint64_t		 step;
	uint64_t		 step_gen;	/* the generation it is of */
	int64_t			 step_wall_ms;	/* when it last moved */
	bool			 step_unsaved;	/* moved since the node was
						   last written */
	int64_t			 seen_saved_ms;	/* last_seen_ms as written */

	uint64_t		 reported_gen;	/* its last FAILED; volatile */
	/* That report was of its own worker killed by a signal: its
	 * connection closing next is the same death (core_agent.c). */
	bool			 reported_killed;
	/* Rule 16: the group rank it held when its last round ended, -1:
	 * none; persisted, so that stable ranks survive a restart. */
	int32_t			 prev_rank;

	/* Core-private below. */
	uint64_t		 member_gen;	/* its last round's (rule 18) */
	/* Its workers are starting as new processes ("starting" report,
	 * until "started"), since starting_ms (core monotonic); they came
	 * up at started_ms in the job's generation started_gen (0: not
	 * since the last start). Volatile: rule 17 excuses it from a
	 * meeting it missed (core_culprit.c). */
	bool			 starting;
	uint64_t		 starting_ms;
	uint64_t		 started_ms;
	uint64_t		 started_gen;
	struct core_timer	 lease;		/* armed while disconnected */
	bool			 lease_grace;	/* it runs reconnect_grace (its
						   connection closed), not
						   lease_ttl (rdzvd restarted) */
	TAILQ_ENTRY(core_node)	 entry;		/* job->nodes, removed_nodes */
	TAILQ_ENTRY(core_node)	 ended_entry;	/* job->ended */
	bool			 in_ended;
	bool			 dirty;
	TAILQ_ENTRY(core_node)	 dirty_entry;
	bool			 removed;
	struct core_qmsg	*out_head, *out_tail;
	size_t			 out_n;
	TAILQ_ENTRY(core_node)	 out_entry;	/* core->outbox */
};
TAILQ_HEAD(core_nodes, core_node);

/* A join refused for a job that has no node yet (core_refuse.c). */
struct core_refusal {
	char		 rdzv_id[RDZV_ID_MAX + 1];
	char		 identity[CORE_STR_MAX + 1];
	char		 why[CORE_REASON_MAX];
	uint32_t	 allocation_nodes;
	uint32_t	 attempt;	/* the scheduler's run; 0 unknown */
	uint64_t	 until_ms;	/* monotonic: forgotten then */
};

struct core_job {
	char			 rdzv_id[RDZV_ID_MAX + 1];
	char			*owner;
	struct core_settings	 settings;
	enum core_job_state	 state;
	char			 reason[CORE_REASON_MAX];
	uint64_t		 generation;	/* last completed round; 0 */
	uint32_t		 restart_count;
	uint32_t		 attempt;	/* 1, +1 per reopen */
	int64_t			 created_ms;
	int64_t			 updated_ms;
	int64_t			 ended_ms;	/* 0 while active */
	uint64_t		 event_seq;	/* the last event's seq */

	/*
	 * Time left on the open deadlines (-1: none), as of the last time
	 * the job was marked dirty: the store saves these, and after a
	 * restart the deadlines resume with that much time (rule 11).
	 * core_checkpoint() refreshes them before a planned shutdown.
	 */
	int64_t			 last_call_left_ms;
	int64_t			 join_left_ms;

	/* The current round, by group rank; derived, not persisted. */
	struct core_node	**round;
	uint32_t		 round_n;
	uint32_t		 round_cap;
	uint32_t		 world_size;
	char			 master_addr[CORE_STR_MAX + 1]; /* group rank 0's */
	uint32_t		 master_port;

	/*
	 * Every node of the current attempt, in arrival order; the ended ones
	 * also in the order they ended, so that the oldest can be dropped when
	 * there are more than max_nodes_per_job of them.
	 */
	struct core_nodes	 nodes;
	uint32_t		 n_nodes;
	uint32_t		 n_state[CORE_NODE_NSTATES];
	struct core_nodes	 ended;

	/* The latest events, oldest first: see core_job_event(). */
	struct core_event	*events;
	uint32_t		 events_n, events_start, events_cap;

	/* Core-private below. */
	struct core		*core;
	struct core_owner	*own;		/* of ->owner (core_owner.c) */
	TAILQ_ENTRY(core_job)	 owner_entry;	/* own->ended */
	bool			 in_owner_ended;
	bool			 pruned;	/* removed over the bound */
	struct core_timer	 last_call;
	struct core_timer	 join_deadline;
	struct core_timer	 retention;
	TAILQ_ENTRY(core_job)	 entry;		/* core->jobs, removed_jobs */
	bool			 dirty, changed, removed, settling;
	TAILQ_ENTRY(core_job)	 dirty_entry;
	TAILQ_ENTRY(core_job)	 changed_entry;
	TAILQ_ENTRY(core_job)	 settle_entry;
	bool			 pend_failure;	/* count a failure */
	bool			 pend_loss;	/* ... that is a lost node */
	bool			 pend_change;	/* re-round, no restart */
	/* When (core ms) the current round was formed after a failure, 0 if
	 * not: a node silent since before then is part of that failure. */
	uint64_t		 failure_round_ms;
	/* The generation that round formed (rule 17: a member that takes no
	 * part in it is what that failure was, counted already); volatile. */
	uint64_t		 failure_gen;
	/* Rule 17's excuse re-rounds a round that failure formed: the next
	 * round is that failure's too (volatile). */
	bool			 failure_gen_carry;
	/* Rule 18 (core_repeat.c), volatile: the round cleared last, the
	 * repeats since the failure counted at counted_ms; pend_plain: the
	 * failure to settle is of workers that exited, none killed. */
	uint32_t		 cleared_n;
	uint64_t		 cleared_gen;
	uint32_t		 repeat_n;
	uint64_t		 counted_ms;
	bool			 pend_plain;
	/* A reported failure waiting for an away member (see core_settle). */
	bool			 held_failure;
	char			 held_reason[CORE_REASON_MAX];
	bool			 fired_last_call, fired_join;
	/* Rule 14: the generation of the last failure reported and when
	 * (monotonic); volatile. */
	uint64_t		 failed_gen;
	uint64_t		 failed_mono_ms;
	/* The failed generation whose cause was found lost with the report
	 * (a member whose connection had closed): a member closing after it
	 * is a second fault; volatile. */
	uint64_t		 cause_gen;
	char			 pend_reason[CORE_REASON_MAX];
	/* The first participant that went in this input, and how ("node X
	 * (node N) left (...)"): a departure for rule 13; empty: none. */
	char			 pend_gone[CORE_REASON_MAX];
	/*
	 * Rule 13: the departure the open round waits to replace ("node X
	 * (node N) was lost (...)", "... left (...)", "... was evicted
	 * (...)"); empty when its deadline is a plain join timeout. The store
	 * keeps it, so the failure names the node after a daemon restart too.
	 */
	char			 rejoin_lost[CORE_REASON_MAX];
	/*
	 * Joins of this attempt refused because their host is quarantined
	 * (core_refuse.c), and whether that failed the job; persisted, so
	 * that a fixed allocation still fails at once after a restart.
	 */
	uint32_t		 n_refused;
	bool			 refusal_failed;

	/*
	 * Progress (core_progress.c), volatile: the leading step of
	 * generation progress_gen and when it rose to each of its latest
	 * values (a ring, oldest at lead_start), so that a node's lag can be
	 * told in time as well as in steps. Watchers hear of new steps at
	 * most once per CORE_PROGRESS_TELL_MS (the progress timer).
	 */
	uint64_t		 progress_gen;
	struct core_lead {
		uint64_t	 step;
		uint64_t	 mono_ms;
	}			 lead[CORE_LEAD_KEPT];
	uint32_t		 lead_n, lead_start;
	uint64_t		 progress_told_ms;	/* monotonic */
	struct core_timer	 progress_timer;
	/* In changed_jobs for new steps only: what a job's summary shows
	 * did not change (watchers of every job can skip it). */
	bool			 steps_only;
};
TAILQ_HEAD(core_jobs, core_job);

/* An identity that owns jobs: its ended jobs, oldest ended first. */
struct core_owner {
	char			*name;
	struct core_jobs	 ended;
	uint32_t		 n_ended;
};

enum core_msg_kind {
	CORE_MSG_ACCEPTED = 1,
	CORE_MSG_WAITING,
	CORE_MSG_ASSIGNMENT,
	CORE_MSG_STOP,
	CORE_MSG_CLOSED,
	CORE_MSG_FAILED,
	CORE_MSG_EVICTED,
	CORE_MSG_LEFT,		/* no event: the stream of a node that left ends */
	/* No event: a connected node was lost (rule 17, its culprit); its
	 * stream ends as for a refused resume, so its agent stops its
	 * workers and joins again as a new node. */
	CORE_MSG_LOST,
};

struct core_assignment {
	uint64_t	generation;
	uint32_t	group_rank;
	uint32_t	group_world_size;
	uint32_t	base_rank;
	uint32_t	local_world_size;	/* the node's nproc */
	uint32_t	world_size;
	uint32_t	master_port;
	uint32_t	restart_count;
	uint32_t	max_restarts;
	/* Last: a queued message keeps only the string's bytes of it. */
	char		master_addr[CORE_STR_MAX + 1];
};

/* One JoinEvent for a node's stream; a copy, valid on its own. */
struct core_msg {
	enum core_msg_kind	 kind;
	union {
		struct {
			uint64_t		node_id;
			uint8_t			session_id[CORE_SESSION_LEN];
			struct core_settings	settings;
			bool			resumed;
			uint32_t		attempt;
		} accepted;
		struct {
			enum core_node_state	state;
			uint32_t		participants;
			uint32_t		min_nodes;
			uint32_t		max_nodes;
			/* The join (or rejoin) timeout's time left,
			 * when armed; 0 none. */
			uint32_t		fails_in_ms;
		} waiting;
		struct core_assignment	 assignment;
		struct {
			uint64_t		generation;
		} stop;
	} u;
	char			 reason[CORE_REASON_MAX]; /* not ACCEPTED */
};

/*
 * A message in a node's queue, in as few bytes as it needs: the part of
 * core_msg.u its kind uses, then the reason. Ten thousand nodes joining
 * in one turn queue three messages each, and a whole core_msg is 568
 * bytes, mostly unused strings.
 */
struct core_qmsg {
	struct core_qmsg	*next;
	enum core_msg_kind	 kind;
	uint16_t		 u_len;		/* bytes of core_msg.u kept */
	char			 data[];	/* those, then the reason */
};

struct core {
	struct core_config	 cfg;
	struct core_now		 now;		/* of the latest input */
	struct hash		 by_id;		/* jobs by rdzv_id */
	struct hash		 by_node;	/* nodes by node_id */
	struct hash		 by_session;	/* nodes by session_id */
	struct hash		 by_token;	/* live nodes by join token */
	struct hash		 by_owner;	/* struct core_owner by name */
	struct core_jobs	 jobs;		/* every job, in creation order */
	uint32_t		 n_jobs;
	uint64_t		 next_node_id;	/* persist to keep ids unique */
	uint64_t		 next_arrival;
	/* What rdzvd remembers of each host across jobs (core_hostrules.h): the
	 * store writes its dirty records in the same commit as the jobs. */
	struct hosts		*hosts;

	/* The changes of this loop turn (see the top of this file). */
	struct core_jobs	 dirty_jobs;
	struct core_nodes	 dirty_nodes;
	struct core_jobs	 changed_jobs;
	struct core_jobs	 removed_jobs;	/* with their nodes */
	struct core_nodes	 removed_nodes;	/* of jobs that stay */
	struct core_event	*new_events;
	size_t			 n_new_events, new_events_cap;
	struct core_round	*new_rounds;	/* of jobs not removed */
	size_t			 n_new_rounds, new_rounds_cap;

	/*
	 * Joins refused for jobs that had no node yet, kept for them until
	 * their join timeout (core_refuse.c); persisted: refusals_dirty says
	 * the turn changed them, and the store rewrites them whole.
	 */
	struct core_refusal	*refusals;
	size_t			 n_refusals, refusals_cap;
	bool			 refusals_dirty;

	/* Core-private below. */
	struct core_nodes	 outbox;	/* nodes with queued messages */
	struct core_jobs	 settle;	/* jobs to re-evaluate */
	struct core_timer	**heap;
	size_t			 heap_n, heap_cap;
};

/* core.c: creation, lookups; core_join.c: joins. */
void		 core_config_defaults(struct core_config *);
/* cfg NULL: the defaults. */
struct core	*core_new(const struct core_config *cfg);
void		 core_free(struct core *);
struct core_job	*core_job_find(const struct core *, const char *rdzv_id);
struct core_node *core_node_find(const struct core *, uint64_t node_id);
struct core_node *core_node_by_session(const struct core *,
		    const uint8_t session_id[CORE_SESSION_LEN]);

/*
 * A new node's Join. session_id is fresh random bytes from the daemon (the
 * core has no randomness); settings fields of 0 are unset. gpus_* may be
 * 0/0 when the node reported none.
 */
struct core_join {
	const char		*rdzv_id;
	const char		*identity;	/* SPEC §11; NULL: anonymous */
	struct core_settings	 settings;
	const char		*hostname;
	const char		*advertise_addr;
	uint32_t		 master_port;
	uint32_t		 nproc;
	bool			 has_rank_hint;
	uint32_t		 rank_hint;
	uint32_t		 gpus_healthy;
	uint32_t		 gpus_total;
	const struct core_gpu	*gpus;		/* n_gpus results, or none */
	uint32_t		 n_gpus;
	uint32_t		 attempt;	/* the scheduler's run; 0 unknown */
	/* The nodes of its scheduler allocation; 0: not in one. */
	uint32_t		 allocation_nodes;
	/* The job's preload the join asks for (issue 45): module names of
	 * letters, digits, '_' and '.', comma-separated, at most
	 * CORE_PRELOAD_MAX bytes; NULL or "": unset. */
	const char		*preload;
	uint8_t			 session_id[CORE_SESSION_LEN];
	/*
	 * The agent's token for this join, the same in every retry of it
	 * (has_token false: none). A retry that finds the node its first
	 * attempt made gets that node (ACCEPTED, its place) instead of a
	 * second one: a join answered too late for the agent makes no ghost.
	 */
	bool			 has_token;
	uint8_t			 join_token[CORE_TOKEN_LEN];
};

/*
 * Every input returns CORE_OK or another enum core_result
 * with a message for the user in err. On 0, *nodep (where asked) is the
 * node, and its first queued message is ACCEPTED followed by what it must
 * be told now; the node counts as connected.
 */
int		 core_join(struct core *, struct core_now,
		    const struct core_join *, struct core_node **nodep,
		    char *err, size_t errlen);

/* core_agent.c: the agents' other inputs. */
/*
 * A Join with session_id set: the agent's workers run `generation` (0:
 * none). rdzv_id may be NULL. On 0 the node gets ACCEPTED(resumed), a STOP
 * if the workers it names must stop, then its current place (the same
 * ASSIGNMENT when the generation is current: its workers keep running; an
 * older generation is stopped and the current place sent, no round made).
 * A generation newer than the job's is refused and the node leaves.
 * The daemon must close any older stream of the node.
 */
int		 core_resume(struct core *, struct core_now,
		    const char *identity, const char *rdzv_id,
		    const uint8_t session_id[CORE_SESSION_LEN],
		    uint64_t generation, struct core_node **nodep,
		    char *err, size_t errlen);

/* Why a node failed (ReportRequest.cause). */
enum core_cause {
	CORE_CAUSE_WORKER = 0,	/* a worker exited non-zero */
	CORE_CAUSE_HANG,	/* "hang": no progress for hang_timeout */
	CORE_CAUSE_STUCK,	/* "stuck": and the hang is this node's */
	/* "master_port", UPDATE only: the node of group rank 0 found the
	 * master port of |generation| taken on its host before its workers
	 * started; |master_port| is its new offer. */
	CORE_CAUSE_MASTER_PORT,
	/* "starting", UPDATE only: the node just started its workers as new
	 * processes (in-process restart) and they have not all reached
	 * rdzv.elastic yet; "started": they all have, or the set ended.
	 * Rule 17 excuses a starting node absent from a round's meeting. */
	CORE_CAUSE_STARTING,
	CORE_CAUSE_STARTED,
};

/* A worker's end as the agent reported it (rdzv.v1.WorkerExit). */
struct core_exit {
	int32_t		 exit_code;		/* -1: killed by a signal */
	int32_t		 signal;
};

struct core_report {
	const uint8_t	*session_id;		/* CORE_SESSION_LEN bytes */
	uint64_t	 generation;
	enum core_outcome outcome;
	const char	*message;		/* NULL or the error file's */
	bool		 has_gpus;
	uint32_t	 gpus_healthy;
	uint32_t	 gpus_total;
	const struct core_gpu *gpus;		/* n_gpus results, or none */
	uint32_t	 n_gpus;
	/* CORE_OUTCOME_UPDATE only; 0: unchanged. */
	uint32_t	 nproc;			/* fewer workers: re-round */
	uint32_t	 master_port;		/* offered from now on */
	/* CORE_OUTCOME_FAILED: CORE_CAUSE_HANG when no worker made progress
	 * for the hang timeout, CORE_CAUSE_STUCK when one of the node's own
	 * workers is stopped as well (the node is the culprit, rule 17),
	 * else CORE_CAUSE_WORKER. CORE_OUTCOME_UPDATE: CORE_CAUSE_MASTER_PORT,
	 * CORE_CAUSE_STARTING, CORE_CAUSE_STARTED or CORE_CAUSE_WORKER
	 * (none). */
	enum core_cause	 cause;
	/* CORE_OUTCOME_FAILED: global ranks of the generation that never
	 * arrived at its meeting; their nodes are its culprits (rule 17). */
	const uint32_t	*absent_ranks;
	uint32_t	 n_absent;
	/* CORE_OUTCOME_FAILED: the workers' exits, held against the host
	 * when they crashed (hosts_exit_is_crash). */
	const struct core_exit *exits;
	uint32_t	 n_exits;
};
/* *restart_count (may be NULL) gets the job's count for ReportResponse. */
int		 core_report(struct core *, struct core_now,
		    const char *identity, const struct core_report *,
		    uint32_t *restart_count, char *err, size_t errlen);
int		 core_leave(struct core *, struct core_now, const char *identity,
		    const uint8_t session_id[CORE_SESSION_LEN],
		    const char *reason, char *err, size_t errlen);
/* The node's stream ended: its lease ends after reconnect_grace. */
void		 core_disconnect(struct core *, struct core_now,
		    struct core_node *);
/* The node's connection went silent for lease_ttl: it is lost now. */
void		 core_lease_lost(struct core *, struct core_now,
		    struct core_node *);
/*
 * The leases of |n| nodes ended in one sweep: one failure per job. Node i
 * was silent for silent_ms[i] (NULL: not known); one silent since
 * before a round formed after a failure is part of that failure, and its
 * loss re-rounds without a second restart.
 */
void		 core_leases_lost(struct core *, struct core_now,
		    struct core_node *const *, const uint64_t *silent_ms,
		    size_t);

/* core_progress.c: training progress (docs/HEALTH.md). */
/*
 * The node of |session_id| says its workers of |generation| reached
 * |step|. Kept in memory only: nothing becomes dirty, so no commit follows.
 * A generation other than the node's current one: FAILED_PRECONDITION.
 */
int		 core_progress(struct core *, struct core_now,
		    const char *identity,
		    const uint8_t session_id[CORE_SESSION_LEN],
		    uint64_t generation, uint64_t step, char *err,
		    size_t errlen);

/* Where a node stands against its job's leading node at now. */
struct core_node_progress {
	bool		has_step;	/* false: nothing else is set */
	uint64_t	step;
	int64_t		step_wall_ms;
	uint64_t	steps_behind;
	int64_t		behind_ms;	/* since the leader passed its step */
	bool		straggler;
};
/* The job's leading step (false: none this generation) and how many of
 * its nodes are stragglers at now. */
bool		 core_job_progress(const struct core_job *, struct core_now,
		    uint64_t *lead_step, uint32_t *stragglers);
/* The node against |lead_step|, core_job_progress()'s (0 when it said
 * false: then nothing is set). */
void		 core_node_progress(const struct core_node *, uint64_t lead_step,
		    struct core_now, struct core_node_progress *);

/* core_operator.c: operator actions (SPEC §4 rule 9); core_hosts.c: on a
 * host. */
int		 core_close(struct core *, struct core_now, const char *identity,
		    bool is_admin, const char *rdzv_id, char *err,
		    size_t errlen);
int		 core_abort(struct core *, struct core_now, const char *identity,
		    bool is_admin, const char *rdzv_id, const char *reason,
		    char *err, size_t errlen);
int		 core_evict(struct core *, struct core_now, const char *identity,
		    bool is_admin, const char *rdzv_id, uint64_t node_id,
		    const char *reason, char *err, size_t errlen);
/*
 * An admin's action on a host (docs/HEALTH.md): HOST_OK clears it,
 * HOST_QUARANTINED quarantines it and evicts its live nodes from every
 * job. PERMISSION_DENIED for a caller who is not an admin, NOT_FOUND when
 * clearing a host rdzvd has no record of.
 */
int		 core_host_set(struct core *, struct core_now,
		    const char *identity, bool is_admin, const char *host,
		    enum host_state, const char *reason, char *err,
		    size_t errlen);
/* core_timer.c, core_objects.c: the passing of time. */
/* Fires every deadline due at now. */
void		 core_advance(struct core *, struct core_now);
/* The earliest monotonic deadline, or UINT64_MAX. */
uint64_t	 core_next_deadline(const struct core *);
/* Marks jobs with open deadlines dirty, refreshing their time left. */
void		 core_checkpoint(struct core *, struct core_now);
/*
 * Marks dirty the nodes whose step moved since they were last written, and
 * those whose last-seen time (|seen|, the frame's freshest) moved by
 * |seen_every_ms| or more: a restart then starts the straggler and hang
 * views from what was saved (docs/HEALTH.md). Returns how many.
 */
size_t		 core_progress_checkpoint(struct core *, struct core_now,
		    int64_t (*seen)(const struct core_node *, struct core_now),
		    int64_t seen_every_ms);
/* Time left on a job's deadlines at now, or -1 when none is armed. */
int64_t		 core_job_last_call_in(const struct core_job *,
		    struct core_now);
int64_t		 core_job_join_timeout_in(const struct core_job *,
		    struct core_now);

/* Outputs (core_outbox.c, core_event.c, core_objects.c, core_round.c,
 * core.c). */
/* Pops the next queued message of any node; false when none is left. */
bool		 core_outbox_pop(struct core *, struct core_node **nodep,
		    struct core_msg *msg);
/* What a (re)attached stream must be told now about its node's place. */
void		 core_node_current(const struct core_node *, struct core_msg *);
/* The i-th kept event of a job, oldest first (i < job->events_n). */
const struct core_event *core_job_event(const struct core_job *, uint32_t i);
/* After the commit and the sends: forget the turn's changes. */
void		 core_changes_clear(struct core *);
/* Participant, waiting or spare: a node that still has a place. */
bool		 core_node_live(const struct core_node *);
/* Closed or failed. */
bool		 core_job_ended(const struct core_job *);
const char	*core_job_state_name(enum core_job_state);
const char	*core_node_state_name(enum core_node_state);
const char	*core_msg_kind_name(enum core_msg_kind);
const char	*core_result_name(int);

/* Rebuilding the core from the store (core_restore.c): a concern of its
 * own, which the store and the tests call. */
#include "core_restore.h"

#endif
