/*
 * Rule 18: a failure that repeats before the job stepped. A job whose
 * nodes are cut from one another but not from rdzvd (a partition, a
 * switch port that flaps) fails, re-rounds with the same nodes, and fails
 * again at the new round's first collective, every collective timeout
 * while the cut lasts: one fault, counted each time, would spend
 * max_restarts in seconds. So a failure reported by the round that a
 * counted failure formed, with the same nodes as the round that failed,
 * before any of its workers said a step, is that failure again: the job
 * re-rounds with no restart. Bounded, so that a script that fails the
 * same way every time still spends its restarts: at most
 * CORE_REPEAT_MAX such repeats in a row, within CORE_REPEAT_WINDOW_MS of
 * the counted failure; the next counts. A worker killed by a signal
 * (SIGKILL: an operator, the OOM killer, a node's death) or a hang is a
 * fault of its own and counts as before, and so does a round with a node
 * more or less (a node lost during a recovery, rule 14).
 *
 * The state is the core's memory only, like rule 17's: after a daemon
 * restart the next failure counts.
 */
#include <stdio.h>

#include "core_int.h"
#include "text.h"

/* The round in effect has exactly the nodes of the round before it. */
static bool
same_nodes(const struct core_job *j)
{
	uint32_t	i;

	if (j->cleared_gen == 0 || j->round_n != j->cleared_n)
		return false;
	for (i = 0; i < j->round_n; i++)
		if (j->round[i]->member_gen != j->cleared_gen)
			return false;
	return true;
}

/* The round in effect is being cleared (its generation is j's). */
void
core_repeat_round_cleared(struct core_job *j)
{
	uint32_t	i;

	for (i = 0; i < j->round_n; i++)
		j->round[i]->member_gen = j->generation;
	j->cleared_n = j->round_n;
	j->cleared_gen = j->generation;
}

/* A failure was counted now: the repeats start again from it. */
void
core_repeat_counted(struct core_job *j)
{
	j->repeat_n = 0;
	j->counted_ms = j->core->now.mono_ms;
}

/*
 * Whether the failure to settle, of the current round, is a repeat of the
 * counted failure that formed it. |plain|: it is a report of workers that
 * exited, none killed, no hang. When it is, the event says so (the
 * report's own event came before it) and |reason| becomes the
 * re-round's.
 */
bool
core_repeat_of_failure(struct core_job *j, bool plain,
    char reason[CORE_REASON_MAX])
{
	uint64_t	now = j->core->now.mono_ms, g = j->generation;
	char		t[32];

	if (!plain || j->failure_gen != g || g < 2 || !same_nodes(j) ||
	    (j->progress_gen == g && j->lead_n > 0) ||
	    j->repeat_n >= CORE_REPEAT_MAX ||
	    now > j->counted_ms + CORE_REPEAT_WINDOW_MS)
		return false;
	j->repeat_n++;
	core_fmt_secs(t, sizeof(t), now - j->counted_ms);
	core_event_add(j, "repeat", "generation %llu failed before any "
	    "step, with the nodes of generation %llu, %s after the failure "
	    "that formed it: that failure again, not counted (repeat %u of "
	    "%u)", (unsigned long long)g, (unsigned long long)j->cleared_gen,
	    t, j->repeat_n, CORE_REPEAT_MAX);
	textf(reason, CORE_REASON_MAX, "generation %llu failed again before "
	    "any step (repeat %u of at most %u, not counted)",
	    (unsigned long long)g, j->repeat_n, CORE_REPEAT_MAX);
	return true;
}
