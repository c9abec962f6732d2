/*
 * The agent's fence (client/agent/fence_rule.c, docs/AGENT.md): workers
 * stop once rdzvd cannot have heard from the node for a whole lease,
 * unless they still step; and a time of hearing that is later than the
 * fence's own clock read (issue 40: the connection's acknowledgement is
 * read after it) is "heard now", never 2^64 ms of silence.
 */
#include "check.h"
#include "clock.h"
#include "fence_rule.h"

#define TTL	3000ULL		/* the lease the soak uses, ms */

static void
test_since(void)
{
	CHECK(mono_since(1000, 400) == 600);
	CHECK(mono_since(1000, 1000) == 0);
	CHECK(mono_since(1000, 1001) == 0);
	CHECK(mono_since(0, UINT64_MAX) == 0);
	CHECK(mono_since(UINT64_MAX, 0) == UINT64_MAX);
}

/* The acknowledgement is read a few ms after the tick's |now|. */
static void
test_heard_after_now(void)
{
	uint64_t now = 1000000, heard;

	for (uint64_t late = 1; late <= 5000; late *= 5) {
		heard = fence_heard(now - 200, now + late);
		CHECK(heard == now + late);
		CHECK_INT(fence_decide(now, heard, 0, TTL), FENCE_KEEP);
		/* Workers that never stepped change nothing. */
		CHECK_INT(fence_decide(now, heard, now - 10 * TTL, TTL),
		    FENCE_KEEP);
	}
	/* And so is a step reported after |now|, once the lease is up. */
	CHECK_INT(fence_decide(now, now - TTL, now + 3, TTL),
	    FENCE_STEPPING);
}

/* Silent for a whole lease, no steps (or none since the silence began,
 * or none within half a lease): the workers stop. */
static void
test_silent(void)
{
	uint64_t now = 1000000;

	CHECK_INT(fence_decide(now, now - TTL + 1, 0, TTL), FENCE_KEEP);
	CHECK_INT(fence_decide(now, now - TTL, 0, TTL), FENCE_STOP);
	CHECK_INT(fence_decide(now, now - 18 * TTL, 0, TTL), FENCE_STOP);
	/* Stepped only before rdzvd was last heard. */
	CHECK_INT(fence_decide(now, now - TTL, now - TTL - 1, TTL),
	    FENCE_STOP);
	CHECK_INT(fence_decide(now, now - TTL, now - TTL, TTL), FENCE_STOP);
	/* Stepped after, but not within the last half lease. */
	CHECK_INT(fence_decide(now, now - 2 * TTL, now - TTL / 2, TTL),
	    FENCE_STOP);
}

/* Silent for the lease while the workers step with every peer: rdzvd's
 * own outage, which holds the job; they keep running. */
static void
test_stepping(void)
{
	uint64_t now = 1000000;

	CHECK_INT(fence_decide(now, now - TTL, now - 1, TTL), FENCE_STEPPING);
	CHECK_INT(fence_decide(now, now - 10 * TTL, now - TTL / 2 + 1, TTL),
	    FENCE_STEPPING);
	CHECK_INT(fence_decide(now, now - 10 * TTL, now, TTL),
	    FENCE_STEPPING);
}

/* Nothing is fenced before there is a lease or before rdzvd was ever
 * heard (the join still runs). */
static void
test_no_lease(void)
{
	CHECK_INT(fence_decide(1000000, 1, 0, 0), FENCE_KEEP);
	CHECK_INT(fence_decide(1000000, 0, 0, TTL), FENCE_KEEP);
	CHECK(fence_heard(500, 0) == 500);
	CHECK(fence_heard(0, 0) == 0);
}

int
main(void)
{
	test_since();
	test_heard_after_now();
	test_silent();
	test_stepping();
	test_no_lease();
	return check_done("test_fence");
}
