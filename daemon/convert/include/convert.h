/*
 * Module daemon/convert/ (librdzvconvert): the core's state as protobuf-c
 * messages, and a node's GPU results back, with nothing else: no clock, no
 * connection, no call, no setting of rdzvd's. What a message needs from
 * outside the core (the time, when a node was last heard from, when a
 * node counts as silent) comes in as arguments. protobuf-c messages point
 * at their arrays and strings; an arena owns what a conversion allocates,
 * so a reply is built, sent and released in three lines.
 *
 * The RPC handlers, the HTTP listener and the frame's followers use it;
 * it sits below all three.
 *
 * Calls: lib/base, proto, daemon/core.
 * Called by: daemon/frame, daemon/http, daemon/rpc.
 */
#ifndef RDZVD_CONVERT_H
#define RDZVD_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

/* Every allocation of a conversion; convert_free releases them together. */
struct convert_arena {
	void		**ptrs;
	size_t		  n, cap;
};
/* |size| zeroed bytes that live until convert_free(). */
void		*convert_alloc(struct convert_arena *, size_t size);
void		 convert_free(struct convert_arena *);

/* When a node was last heard from (wall ms), which only its connection
 * knows (the frame's turn_last_seen). */
typedef int64_t	(*last_seen_fn)(const struct core_node *, struct core_now);

/* What a job message holds beyond the job's own fields. */
struct convert_job_view {
	/* NULL: the summary, without nodes or progress. */
	last_seen_fn	 last_seen;
	/* A connected node not heard from for this long is shown silent
	 * (twice rdzvd's keepalive: its PINGs go unanswered). */
	uint32_t	 silent_ms;
	/* The job's latest events, at most this many. */
	uint32_t	 events;
};
Rdzv__V1__Job	*convert_job(struct convert_arena *, const struct core_job *,
		    struct core_now, const struct convert_job_view *);
void		 convert_event(struct convert_arena *,
		    const struct core_event *, Rdzv__V1__Event *);
/* Fills |ev| from |msg| for |node|; a message without an event (LEFT,
 * LOST: the stream just ends) leaves it empty. */
void		 convert_msg(struct convert_arena *, const struct core_node *,
		    const struct core_msg *, Rdzv__V1__JoinEvent *ev);
/* A host record as Control.ListHosts and SetHost return it; |window_ms|
 * is the policy's crash window, for the crashes that still count. The
 * on-quarantine hook's last run is the caller's (hook.c). */
Rdzv__V1__Host	*convert_host(struct convert_arena *, const struct host *,
		    struct core_now, uint64_t window_ms);

/* A node's GPU results as the core keeps them (*out: free it), counted
 * into healthy/total: 0, or -1 with a message in |err| (too many). */
#define CONVERT_GPUS_MAX	64
int		 convert_gpus(Rdzv__V1__GpuResult **, size_t,
		    struct core_gpu **out, uint32_t *healthy,
		    uint32_t *total, char *err, size_t errlen);

#endif
