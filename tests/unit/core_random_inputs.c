/*
 * The inputs of the randomized core test (test_core_random.c): agents
 * join, retry, resume, report, make progress, leave and drop; operators
 * act; time passes. Each checks what the core answered at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_random.h"

void
do_join(void)
{
	struct core_join	 r;
	struct core_node	*n = NULL;
	struct core_job		*j;
	struct agent		*a = NULL;
	int			 i, ji, rc, want = 0;

	for (i = 0; i < NAGENTS; i++)
		if (!agents[i].used) {
			a = &agents[i];
			break;
		}
	if (a == NULL)
		return;
	ji = (int)rndn(NJOBIDS);
	if (!jobs[ji].known) {
		memset(&jobs[ji].s, 0, sizeof(jobs[ji].s));
		jobs[ji].s.min_nodes = 1 + rndn(4);
		jobs[ji].s.max_nodes = jobs[ji].s.min_nodes + rndn(4);
		jobs[ji].s.max_restarts = rndn(4);
		jobs[ji].s.last_call_timeout_ms = 500 + rndn(4000);
		jobs[ji].s.join_timeout_ms = 5000 + rndn(30000);
		jobs[ji].s.lease_ttl_ms = 2000 + rndn(5000);
		jobs[ji].s.reconnect_grace_ms = 500 + rndn(3000);
		/* Rule 13: unset, 0 (a fixed allocation) or a wait. */
		if (chance(60)) {
			jobs[ji].s.has_rejoin_timeout = true;
			jobs[ji].s.rejoin_timeout_ms = chance(50) ? 0 :
			    rndn(20000);
		}
		jobs[ji].owner = chance(90) ? "alice" : "bob";
	}
	memset(&r, 0, sizeof(r));
	r.rdzv_id = job_ids[ji];
	r.settings = jobs[ji].s;
	if (chance(3))
		r.settings.max_nodes++;		/* a mismatch */
	r.identity = chance(97) ? jobs[ji].owner : "mallory";
	r.hostname = hosts[rndn(sizeof(hosts) / sizeof(hosts[0]))];
	r.advertise_addr = r.hostname;
	r.master_port = 29500 + rndn(10);
	r.nproc = 1 + rndn(8);
	r.has_rank_hint = chance(50);
	r.rank_hint = rndn(6);
	r.gpus_total = r.nproc;
	r.gpus_healthy = r.nproc;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[12] = 0x5a;
	r.has_token = true;
	memcpy(r.join_token, r.session_id, CORE_TOKEN_LEN);
	r.join_token[13] = 0x7e;

	/* Predict the answer from the job as it is. */
	j = core_job_find(C, r.rdzv_id);
	if (j != NULL) {
		if (strcmp(j->owner, r.identity) != 0)
			want = CORE_DENIED;
		else if (j->state == CORE_JOB_CLOSED ||
		    j->state == CORE_JOB_CLOSING)
			want = CORE_REFUSED;
		else if (r.settings.max_nodes != j->settings.max_nodes)
			want = CORE_INVALID;
		else if (j->state != CORE_JOB_FAILED &&
		    j->n_state[CORE_NODE_PARTICIPANT] +
		    j->n_state[CORE_NODE_WAITING] +
		    j->n_state[CORE_NODE_SPARE] >= CFG.max_nodes_per_job)
			want = CORE_LIMIT;
	} else if (r.settings.max_nodes != jobs[ji].s.max_nodes)
		want = -1;	/* creates the job with other settings */
	stats[S_JOIN]++;
	rc = core_join(C, NOW, &r, &n, err, sizeof(err));
	if (want >= 0 && rc != want)
		die("join %s: status %s, want %s (%s)", r.rdzv_id,
		    core_result_name(rc), core_result_name(want), err);
	if (rc == 0) {
		check_told(n, "join");
		stats[S_JOIN_OK]++;
		jobs[ji].known = true;
		jobs[ji].s.max_nodes = n->job->settings.max_nodes;
		jobs[ji].owner = r.identity;	/* a literal */
		memset(a, 0, sizeof(*a));
		a->used = true;
		a->node_id = n->node_id;
		memcpy(a->session, n->session_id, CORE_SESSION_LEN);
		a->job = ji;
		memcpy(a->token, r.join_token, CORE_TOKEN_LEN);
		a->attached = true;
		a->expect_accepted = true;
	}
}

/*
 * An agent that never got its first answer sends its join again with the
 * same token: while the node still has a place it gets that node back
 * (ACCEPTED, its place), never a second one.
 */
void
do_join_retry(void)
{
	struct agent		*a = random_agent(chance(50));
	struct core_node	*n, *got = NULL;
	struct core_join	 r;
	uint32_t		 before;
	int			 rc;

	if (a == NULL || a->last_assign != 0 || a->gen != 0 ||
	    (n = core_node_find(C, a->node_id)) == NULL || !n->has_token ||
	    memcmp(n->join_token, a->token, CORE_TOKEN_LEN) != 0 ||
	    !core_node_live(n) || core_job_ended(n->job))
		return;
	memset(&r, 0, sizeof(r));
	r.rdzv_id = n->job->rdzv_id;
	r.identity = n->job->owner;
	r.hostname = n->hostname;
	r.advertise_addr = n->advertise_addr;
	r.master_port = 29500;
	r.nproc = 1;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[12] = 0x5a;
	r.has_token = true;
	memcpy(r.join_token, a->token, CORE_TOKEN_LEN);
	before = n->job->n_nodes;
	rc = core_join(C, NOW, &r, &got, err, sizeof(err));
	if (rc != 0 || got != n || n->job->n_nodes != before)
		die("retried join of node %llu: %s, node %llu (%s)",
		    (unsigned long long)n->node_id, core_result_name(rc),
		    got != NULL ? (unsigned long long)got->node_id : 0ULL,
		    err);
	check_told(n, "retried join");
	stats[S_JOIN_RETRY]++;
	a->attached = true;
	a->expect_accepted = true;
}

void
do_resume(void)
{
	struct agent	*a = random_agent(false);
	struct core_node *n = NULL;
	uint64_t	 gen;
	int		 rc;

	if (a == NULL)
		return;
	gen = a->gen;
	if (chance(5) && gen > 0)
		gen--;
	stats[S_RESUME]++;
	rc = core_resume(C, NOW, jobs[a->job].owner, job_ids[a->job],
	    a->session, gen, &n, err, sizeof(err));
	if (rc == 0) {
		/* A lagging agent never saw the newer rounds: it is told
		 * STOP and its current place (rule 4). */
		if (gen != a->gen)
			a->gen = a->last_assign = gen;
		check_told(n, "resume");
		stats[S_RESUME_OK]++;
		a->attached = true;
		a->expect_accepted = true;
	} else if (rc == CORE_NOT_FOUND || rc == CORE_REFUSED) {
		stats[rc == CORE_NOT_FOUND ? S_RESUME_NF : S_RESUME_FP]++;
		/* Refused: the agent stops its workers and goes. */
		a->used = false;
	} else
		die("resume: %s (%s)", core_result_name(rc), err);
}

void
do_report(void)
{
	struct agent		*a = random_agent(true);
	struct core_report	 r;
	uint32_t		 restarts, absent[3];
	int			 rc;

	if (a == NULL)
		return;
	memset(&r, 0, sizeof(r));
	r.session_id = a->session;
	r.generation = a->gen;
	if (chance(5))
		r.generation = rndn(6);
	r.outcome = chance(20) ? CORE_OUTCOME_SUCCEEDED :
	    chance(80) ? CORE_OUTCOME_FAILED : CORE_OUTCOME_UPDATE;
	if (chance(30)) {
		r.has_gpus = true;
		r.gpus_total = 8;
		r.gpus_healthy = rndn(9);
	}
	if (r.outcome == CORE_OUTCOME_UPDATE) {
		r.nproc = rndn(5);		/* 0: unchanged */
		r.master_port = rndn(3) == 0 ? 0 : 30000 + rndn(1000);
		/* Workers starting as new processes, or up (rule 17). */
		if (chance(30))
			r.cause = chance(50) ? CORE_CAUSE_STARTING :
			    CORE_CAUSE_STARTED;
	} else if (r.outcome == CORE_OUTCOME_FAILED && chance(30)) {
		/* A meeting that missed some ranks (rule 17). */
		r.n_absent = 1 + rndn(3);
		for (uint32_t i = 0; i < r.n_absent; i++)
			absent[i] = rndn(8);
		r.absent_ranks = absent;
	}
	stats[S_REPORT]++;
	rc = core_report(C, NOW, jobs[a->job].owner, &r, &restarts, err,
	    sizeof(err));
	if (rc == 0)
		stats[S_REPORT_OK]++;
	else if (rc != CORE_REFUSED && rc != CORE_NOT_FOUND)
		die("report: %s (%s)", core_result_name(rc), err);
	if (rc == 0 && r.outcome == CORE_OUTCOME_SUCCEEDED)
		agent_exit(a);		/* exits 0 */
}

/*
 * A training step (docs/HEALTH.md): accepted from the generation an agent
 * runs, refused otherwise, and never a change for the store. Where the
 * node stands against its job's leader is always consistent.
 */
void
do_progress(void)
{
	struct agent			*a = random_agent(true);
	struct core_node_progress	 p;
	struct core_node		*n;
	struct core_job			*j;
	uint64_t			 gen, lead;
	uint32_t			 k;
	int				 rc;

	if (a == NULL)
		return;
	gen = chance(5) ? rndn(6) : a->gen;
	stats[S_PROGRESS]++;
	rc = core_progress(C, NOW, jobs[a->job].owner, a->session, gen,
	    rndn(1000), err, sizeof(err));
	if (rc == 0)
		stats[S_PROGRESS_OK]++;
	else if (rc != CORE_REFUSED && rc != CORE_NOT_FOUND)
		die("progress: %s (%s)", core_result_name(rc), err);
	if (!TAILQ_EMPTY(&C->dirty_jobs) || !TAILQ_EMPTY(&C->dirty_nodes) ||
	    C->n_new_events > 0 || C->n_new_rounds > 0)
		die("progress made a change to commit");
	if ((n = core_node_find(C, a->node_id)) == NULL)
		return;
	j = n->job;
	if (!core_job_progress(j, NOW, &lead, &k)) {
		if (rc == 0)
			die("progress accepted but the job has no leading step");
		return;
	}
	if (k > j->n_nodes)
		die("%u stragglers of %u nodes", k, j->n_nodes);
	TAILQ_FOREACH(n, &j->nodes, entry) {
		core_node_progress(n, lead, NOW, &p);
		if (p.has_step && (p.step > lead ||
		    p.steps_behind != lead - p.step || p.behind_ms < 0))
			die("node %llu: step %llu, %llu behind a lead of %llu",
			    (unsigned long long)n->node_id,
			    (unsigned long long)p.step,
			    (unsigned long long)p.steps_behind,
			    (unsigned long long)lead);
	}
}

void
do_leave(void)
{
	struct agent	*a = random_agent(chance(80));
	int		 rc;

	if (a == NULL)
		return;
	stats[S_LEAVE]++;
	rc = core_leave(C, NOW, jobs[a->job].owner, a->session, "SIGTERM",
	    err, sizeof(err));
	if (rc != 0 && rc != CORE_NOT_FOUND)
		die("leave: %s (%s)", core_result_name(rc), err);
	agent_exit(a);
}

void
do_disconnect(bool silent)
{
	struct agent		*a = random_agent(true);
	struct core_node	*n;

	if (a == NULL)
		return;
	a->attached = false;
	if ((n = core_node_find(C, a->node_id)) == NULL)
		return;
	stats[silent ? S_LOST : S_DISC]++;
	if (silent)
		core_lease_lost(C, NOW, n);
	else
		core_disconnect(C, NOW, n);
}

void
do_operator(void)
{
	int		 ji = (int)rndn(NJOBIDS), rc, what = (int)rndn(10);
	struct core_job	*j = core_job_find(C, job_ids[ji]);
	bool		 admin = chance(30);
	const char	*who = chance(80) ? jobs[ji].owner : "eve";
	struct core_node *n;
	uint32_t	 k;

	if (j == NULL)
		return;
	if (what < 6) {
		if (j->n_nodes == 0)
			return;
		k = rndn(j->n_nodes);
		TAILQ_FOREACH(n, &j->nodes, entry)
			if (k-- == 0)
				break;
		stats[S_EVICT]++;
		rc = core_evict(C, NOW, who, admin, j->rdzv_id, n->node_id,
		    "maintenance", err, sizeof(err));
	} else if (what < 9) {
		stats[S_CLOSE]++;
		rc = core_close(C, NOW, who, admin, j->rdzv_id, err,
		    sizeof(err));
	} else {
		stats[S_ABORT]++;
		rc = core_abort(C, NOW, who, admin, j->rdzv_id, "test", err,
		    sizeof(err));
	}
	if (!admin && strcmp(who, j->owner) != 0 &&
	    rc != CORE_DENIED)
		die("operator action by a stranger: %s",
		    core_result_name(rc));
	if (rc != 0 && rc != CORE_DENIED &&
	    rc != CORE_REFUSED)
		die("operator: %s (%s)", core_result_name(rc), err);
}

void
do_tick(void)
{
	uint64_t	ms = rndn(1000) < 5 ? rndn(400000) : rndn(1500);
	uint64_t	next = core_next_deadline(C);

	/* Sometimes land exactly on the next deadline. */
	if (chance(20) && next != UINT64_MAX && next > NOW.mono_ms &&
	    next - NOW.mono_ms < 200000)
		ms = next - NOW.mono_ms;
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	stats[S_TICK]++;
	core_advance(C, NOW);
	if (core_next_deadline(C) <= NOW.mono_ms)
		die("a due deadline survived core_advance");
}
