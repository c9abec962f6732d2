/*
 * The fence's rule (docs/AGENT.md): once rdzvd cannot have heard from this
 * node for a whole lease, the workers stop, unless they stepped after the
 * silence began and within the last half lease (rdzvd's own outage, which
 * holds the job). Every difference is taken with mono_since(): the times
 * come from other clock reads (the connection's acknowledgements, the
 * progress socket) that can be later than the tick's own |now|, and such
 * a time means "just now", never "ages ago".
 */
#include "clock.h"
#include "fence_rule.h"

uint64_t
fence_heard(uint64_t heard, uint64_t seen)
{
	return seen > heard ? seen : heard;
}

enum fence_verdict
fence_decide(uint64_t now, uint64_t heard, uint64_t moved, uint64_t ttl)
{
	if (ttl == 0 || heard == 0 || mono_since(now, heard) < ttl)
		return FENCE_KEEP;
	if (moved > heard && mono_since(now, moved) < ttl / 2)
		return FENCE_STEPPING;
	return FENCE_STOP;
}
