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

uint32_t
core_culprits(struct core_node *by, const struct core_report *r)
{
	struct core_job		*j = by->job;
	struct core_node	*m;
	char			 why[CORE_REASON_MAX];
	uint32_t		 i, absent = 0, present = 0;
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
	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m->state != CORE_NODE_PARTICIPANT)
			continue;
		if (m != by && holds_absent(m, r->absent_ranks, r->n_absent))
			absent++;
		else
			present++;
	}
	if (absent == 0 || absent > present)
		return 0;
	counted = j->failure_gen == j->generation;
	for (i = 0; i < j->round_n; i++) {
		m = j->round[i];
		if (m == by || m->state != CORE_NODE_PARTICIPANT ||
		    !holds_absent(m, r->absent_ranks, r->n_absent))
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
	return absent;
}
