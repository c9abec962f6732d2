/*
 * Rule 17: the culprit pays, not the bystanders. A failure report can say
 * whose fault the failure is: the reporting node's own (cause "stuck": no
 * worker made progress for the hang timeout and one of its workers is
 * stopped or in uninterruptible sleep, while the other nodes' workers only
 * wait for it), or members whose ranks never arrived at the round's
 * meeting (rdzv.elastic's barrier timed out waiting for them: a silent
 * node, a hung process, a worker that cannot start). Those nodes leave the
 * job as lost, and the next round forms without them; the report is not a
 * failure of its own besides. Were they kept, every new round would wait
 * for them again and every bystander's timeout would count a restart until
 * max_restarts ran out.
 *
 * The loss counts one restart (rule 5), except for a member that took no
 * part in a round formed to recover from a failure: that member is what
 * the failure was (a silent node whose peers' collectives timed out before
 * its lease ended), and it counted already. One silent loss is one restart
 * whatever the timeouts.
 *
 * Absent members are believed only while they are fewer than the members
 * that did arrive (a tie goes to the reporter, which proved it is alive by
 * reporting): a node cut off from every peer sees all of them absent, and
 * must not take the job's healthy majority down with it. Its report then
 * counts as a plain failure, as without rule 17.
 *
 * A member whose agent said its workers are starting as new processes (a
 * spare taken in, a node that joined again, a set restarted as processes
 * under in-process restart) was not yet expected at the meeting: a new
 * process imports torch before it reaches rdzv.elastic, which takes longer
 * than the collective timeout the meeting waits on a busy host. While it
 * is connected and within the start-up allowance (CORE_START_ALLOWANCE_MS
 * from its "starting"), or its workers came up only while the round ran
 * (the round formed while they were starting; the meeting gave up on them
 * just before they arrived, and its report can come after their
 * "started") or in the round before it (this is the first round formed
 * after they came up: their first meeting from a cold start, a new store
 * connection and group on a busy host), it is excused: kept, not
 * counted, and on neither side of the vote. When every absent member is excused the job re-rounds
 * without a restart (the excused nodes' workers take the new round once
 * they are up). Were they lost instead, their agents would join again,
 * start new processes again, be taken in and lost again, a restart counted
 * every round (issue 41). Past the allowance a still-starting node is lost
 * as any absent member.
 */
#include <stdbool.h>
#include <stdint.h>

#include "core_int.h"
#include "text.h"

/* Whether one of the global ranks |absent| is |m|'s. */
static bool
holds_absent(const struct core_node *m, const uint32_t *absent, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (absent[i] >= m->base_rank &&
		    absent[i] - m->base_rank < m->nproc)
			return true;
	return false;
}

/*
 * |m| leaves the job as lost for |why|; its stream, if it is still
 * connected, ends as for a refused resume, so that its agent stops its
 * workers and joins again as a new node (a replacement, or a spare). With
 * |counted_already| the loss re-rounds without a restart.
 */
static void
lose_culprit(struct core_node *m, const char *why, bool counted_already)
{
	struct core_job	*j = m->job;
	bool		 was_pending = j->pend_failure;
	struct core_msg	 msg;

	core_timer_clear(j->core, &m->lease);
	core_event_add(j, "lost", "node %s (node %llu) was lost: %s",
	    m->hostname, (unsigned long long)m->node_id, why);
	core_msg_init(&msg, CORE_MSG_LOST);
	textf(msg.reason, sizeof(msg.reason), "node %llu was lost: %s",
	    (unsigned long long)m->node_id, why);
	core_msg_queue(m, &msg);
	core_node_end(m, CORE_NODE_LOST, why);
	if (counted_already && !was_pending) {
		j->pend_failure = false;
		j->pend_change = true;
	}
}

/*
 * Whether absent |m| is excused: it is still connected, and its agent
 * said its workers are starting as new processes (they import torch
 * before they reach the meeting) less than the allowance ago, or they
 * came up only while this round ran (the round formed while they were
 * starting, and its meeting gave up on them just before they arrived) or
 * the one before: this round is their first meeting since they came up.
 * *|ms| gets how long they were starting.
 */
static bool
excused(const struct core_node *m, uint64_t now, uint64_t *ms)
{
	uint64_t	end = m->starting ? now : m->started_ms;

	*ms = end >= m->starting_ms ? end - m->starting_ms : 0;
	if (!m->connected || *ms >= CORE_START_ALLOWANCE_MS)
		return false;
	return m->starting || (m->started_gen != 0 &&
	    m->job->generation <= m->started_gen + 1);
}

/*
 * The absent members still starting their workers are excused: kept, and
 * in the next round again. With |all| they were every absent member: the
 * job re-rounds at once as a planned change (the kept workers wait for the
 * next round), no restart counted. Returns how many were excused.
 */
static uint32_t
excuse(struct core_node *by, const struct core_report *r, bool all)
{
	struct core_job		*j = by->job;
	struct core_node	*m;
	char			 t[32];
	uint64_t		 now = j->core->now.mono_ms, ms;
	uint32_t		 i, n = 0;

	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m == by || m->state != CORE_NODE_PARTICIPANT ||
		    !holds_absent(m, r->absent_ranks, r->n_absent) ||
		    !excused(m, now, &ms))
			continue;
		core_fmt_secs(t, sizeof(t), ms);
		core_event_add(j, "starting", "node %s (node %llu) was still "
		    "starting its workers (for %s): the meeting of generation "
		    "%llu missed it; %s", m->hostname,
		    (unsigned long long)m->node_id, t,
		    (unsigned long long)j->generation, all ? "not counted" :
		    "kept");
		if (n++ == 0 && all && !j->pend_failure && !j->pend_change)
			textf(j->pend_reason, sizeof(j->pend_reason), "node "
			    "%.*s (node %llu) was still starting its workers",
			    (int)utf8_prefix(m->hostname, 64), m->hostname,
			    (unsigned long long)m->node_id);
	}
	if (all) {
		j->pend_change = true;
		/* The round it re-forms stands for the one a failure formed:
		 * a member that misses it is that failure still (rule 17's
		 * "counted already"), not a second one. */
		if (j->failure_gen == j->generation)
			j->failure_gen_carry = true;
	}
	return n;
}

uint32_t
core_culprits(struct core_node *by, const struct core_report *r)
{
	struct core_job		*j = by->job;
	struct core_node	*m;
	char			 why[CORE_REASON_MAX];
	uint64_t		 now = j->core->now.mono_ms, ms;
	uint32_t		 i, absent = 0, present = 0, starting = 0;
	bool			 counted;

	if (j->state != CORE_JOB_RUNNING)
		return 0;
	if (r->cause == CORE_CAUSE_STUCK) {
		textf(why, sizeof(why), "it hung in generation %llu with a "
		    "worker stopped (the other nodes only waited for it)%s%.*s",
		    (unsigned long long)r->generation,
		    r->message != NULL ? ": " : "",
		    r->message != NULL ? (int)utf8_prefix(r->message, 160) : 0,
		    r->message != NULL ? r->message : "");
		lose_culprit(by, why, false);
		return 1;
	}
	if (r->n_absent == 0)
		return 0;
	/* Excused members were not expected at the meeting yet: they count
	 * on neither side of the vote. */
	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m->state != CORE_NODE_PARTICIPANT)
			continue;
		if (m == by || !holds_absent(m, r->absent_ranks, r->n_absent))
			present++;
		else if (excused(m, now, &ms))
			starting++;
		else
			absent++;
	}
	if (absent == 0 && starting > 0)
		return excuse(by, r, true);
	if (absent == 0 || absent > present)
		return 0;
	counted = j->failure_gen == j->generation;
	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m == by || m->state != CORE_NODE_PARTICIPANT ||
		    !holds_absent(m, r->absent_ranks, r->n_absent) ||
		    excused(m, now, &ms))
			continue;
		textf(why, sizeof(why), "it took no part in generation %llu: "
		    "its ranks never arrived at the round's meeting (node "
		    "%.*s (node %llu) waited for them)%s",
		    (unsigned long long)j->generation,
		    (int)utf8_prefix(by->hostname, 64), by->hostname,
		    (unsigned long long)by->node_id, counted ? "; part of the "
		    "failure that formed this round, not counted again" : "");
		lose_culprit(m, why, counted);
	}
	if (starting > 0)
		excuse(by, r, false);
	/* As the excuse's: the round this loss re-forms stands for the one
	 * a failure formed, and a member that misses it is that failure
	 * still (a partition's tail: issue 41, seed 17). */
	if (counted)
		j->failure_gen_carry = true;
	return absent;
}
