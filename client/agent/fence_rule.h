/*
 * The fence's decision (fence.c, docs/AGENT.md), apart from the agent so
 * that tests/unit builds it alone: from the times rdzvd was last heard and
 * the workers last stepped, whether the workers keep running. Pure: the
 * caller reads every clock and gives the times.
 */
#ifndef RDZV_AGENT_FENCE_RULE_H
#define RDZV_AGENT_FENCE_RULE_H

#include <stdint.h>

enum fence_verdict {
	FENCE_KEEP,	/* rdzvd heard within the lease (or no lease yet) */
	FENCE_STEPPING,	/* silent for the lease, but the workers step */
	FENCE_STOP,	/* silent for the lease: stop the workers */
};

/* fence_rule.c */

/* The later of the times rdzvd was heard (|heard|, kept by the caller)
 * and a newer report of it (|seen|, 0 for none). */
uint64_t	fence_heard(uint64_t heard, uint64_t seen);
/* The verdict at |now| (monotonic ms) for a node whose rdzvd was last
 * heard at |heard| (0: never) and whose workers last stepped at |moved|
 * (0: never), under a lease of |ttl| ms (0: none yet). Any of the times
 * may be later than |now| (read after it, elsewhere): that counts as
 * heard, or stepped, now. */
enum fence_verdict fence_decide(uint64_t now, uint64_t heard,
	    uint64_t moved, uint64_t ttl);

#endif
