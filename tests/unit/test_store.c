/*
 * Unit tests of the SQLite store (SPEC §9), what it keeps: a real
 * rendezvous core is driven through joins, rounds, reports, leaves,
 * evictions, aborts and reopens, each loop turn committed; then a fresh
 * core is loaded from the file and compared with the one that wrote it.
 * Also group commit, retention, events and a figure for 10,000 joins.
 * test_store_open.c has the files the store refuses and failing commits.
 */
#include "clock.h"
#include "store_harness.h"

/*
 * Jobs in every state, built through the core's own inputs, survive a
 * restart: every persisted field, the rounds and assignments, leases of
 * live nodes extended, deadlines with the time they had left, node ids
 * that keep counting, and a resume that keeps its generation.
 */
static void
test_roundtrip(void)
{
	struct core_join	 r;
	struct core_node	*a, *b, *c, *d, *e, *x, *n;
	struct core_report	 rep;
	struct core		*L;
	struct core_job		*j;
	struct core_msg		 m;
	int64_t			 lc_left, join_left;
	uint64_t		 a_id;
	uint8_t			 a_session[CORE_SESSION_LEN];

	static const struct core_gpu gpus[2] = {
		{ .device = 0, .ok = true, .name = "NVIDIA H100",
		    .uuid = "GPU-0", .total_mem = 80ULL << 30 },
		{ .device = 1, .ok = false, .name = "NVIDIA H100",
		    .uuid = "GPU-1", .failed_step = "alloc",
		    .error = "CUDA_ERROR_OUT_OF_MEMORY",
		    .total_mem = 80ULL << 30 },
	};

	setup("roundtrip.db");
	/* A running job that went through a failure and a leave. */
	r = req("run", "hostb", 2, 2, 3);
	r.settings.max_restarts = 3;
	r.settings.hang_timeout_ms = 600000;
	r.preload = "torch,numpy.linalg";	/* issue 45 */
	r.has_rank_hint = true;
	r.rank_hint = 1;
	r.gpus_healthy = 2;
	r.gpus_total = 2;
	b = join_only(&r);
	turn();
	r = req("run", "hosta", 4, 2, 3);
	r.has_rank_hint = true;
	r.rank_hint = 0;
	a = join_only(&r);
	turn();
	tick(30000);				/* last call: generation 1 */
	CHECK_INT(a->job->generation, 1);
	c = join("run", "hostc", 1, 2, 3);	/* fills max: generation 2 */
	CHECK_INT(a->job->generation, 2);
	tick(1000);
	report(a, CORE_OUTCOME_FAILED);		/* generation 3, restart 1 */
	CHECK_INT(a->job->generation, 3);
	CHECK_INT(a->job->restart_count, 1);
	CHECK_INT(core_leave(C, NOW, "alice", c->session_id, "planned",
	    err, sizeof(err)), 0);		/* generation 4 */
	turn();
	memset(&rep, 0, sizeof(rep));
	rep.session_id = b->session_id;
	rep.generation = b->generation;
	rep.outcome = CORE_OUTCOME_UPDATE;
	rep.has_gpus = true;
	rep.gpus_healthy = 1;
	rep.gpus_total = 2;
	rep.gpus = gpus;
	rep.n_gpus = 2;
	rep.master_port = 31337;		/* for the next round */
	CHECK_INT(core_report(C, NOW, "alice", &rep, NULL, err, sizeof(err)),
	    0);
	turn();
	CHECK_INT(a->job->generation, 4);
	CHECK_INT(b->port_offer, 31337);
	CHECK_INT(q("SELECT count(*) FROM gpus WHERE node_id = (SELECT node_id "
	    "FROM nodes WHERE hostname = 'hostb') AND NOT ok AND "
	    "failed_step = 'alloc'"), 1);

	/* Evicted, aborted, closed, and reopened jobs. */
	d = join("evict", "e1", 1, 1, 2);
	e = join("evict", "e2", 1, 1, 2);
	tick(30000);
	CHECK_INT(core_evict(C, NOW, "alice", false, "evict", e->node_id,
	    "bad memory", err, sizeof(err)), 0);
	turn();
	join("abort", "x1", 1, 1, 1);
	CHECK_INT(core_abort(C, NOW, "alice", false, "abort", "operator test",
	    err, sizeof(err)), 0);
	turn();
	x = join("closed", "c1", 1, 1, 1);
	report(x, CORE_OUTCOME_SUCCEEDED);
	join("reopen", "r1", 1, 1, 1);
	CHECK_INT(core_abort(C, NOW, "alice", false, "reopen", "requeue",
	    err, sizeof(err)), 0);
	turn();
	tick(5000);
	join("reopen", "r2", 1, 1, 1);	/* attempt 2; node r1 removed */
	j = core_job_find(C, "reopen");
	CHECK(j != NULL && j->attempt == 2 && j->generation == 2);
	tick(2000);

	/* Nodes disconnected before the restart are still live after it. */
	core_disconnect(C, NOW, d);
	turn();

	/* A job short of nodes (join timeout) and one in its last call. */
	join("short", "s1", 1, 3, 3);
	tick(100000);
	join("short", "s2", 1, 3, 3);
	join("lastcall", "l1", 1, 2, 4);
	join("lastcall", "l2", 1, 2, 4);
	tick(12000);

	/* A failure held while a member is away (rule 5). */
	join("held", "h1", 1, 2, 2);
	n = join("held", "h2", 1, 2, 2);
	core_disconnect(C, NOW, n);
	turn();
	/* Away as after a daemon restart (its lease is lease_ttl, not a
	 * reconnect grace): the failure is held, not a loss (rule 14). */
	n->lease_grace = false;
	report(core_job_find(C, "held")->round[0], CORE_OUTCOME_FAILED);
	CHECK(core_job_find(C, "held")->held_failure);
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE rdzv_id = 'held' AND "
	    "held_reason LIKE '%reported a worker failure%'"), 1);
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE held_reason IS NULL"),
	    7);

	j = core_job_find(C, "short");
	join_left = j->join_left_ms;
	CHECK(join_left > 0 && join_left < 600000);
	j = core_job_find(C, "lastcall");
	lc_left = j->last_call_left_ms;
	CHECK(lc_left > 0 && lc_left <= 30000);

	CHECK_INT(q("SELECT count(*) FROM jobs WHERE rdzv_id = 'run' AND "
	    "preload = 'torch,numpy.linalg'"), 1);
	L = reload();
	compare_cores(C, L);
	CHECK_STR(core_job_find(L, "run")->settings.preload,
	    "torch,numpy.linalg");

	/* Rule 11: leases from now, deadlines with the time they had. */
	n = core_node_find(L, a->node_id);
	CHECK(n != NULL && n->lease.at == NOW.mono_ms + 15000);
	CHECK_INT(core_job_join_timeout_in(core_job_find(L, "short"), NOW),
	    join_left);
	CHECK_INT(core_job_last_call_in(core_job_find(L, "lastcall"), NOW),
	    lc_left);
	CHECK_INT(core_job_join_timeout_in(core_job_find(L, "run"), NOW), -1);
	n = core_node_find(L, e->node_id);
	CHECK(n != NULL && n->state == CORE_NODE_EVICTED);
	CHECK(n != NULL && n->reason != NULL);
	CHECK(core_node_find(L, x->node_id)->lease.idx == SIZE_MAX);

	/* The rounds of "run": generations 1..4, each with its nodes. */
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'run'"), 4);
	CHECK_INT(q("SELECT max(generation) FROM rounds WHERE rdzv_id = "
	    "'run'"), 4);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'run' "
	    "AND generation = 3"), 3);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'run' "
	    "AND generation = 4"), 2);
	CHECK_INT(q("SELECT world_size FROM rounds WHERE rdzv_id = 'run' "
	    "AND generation = 4"), 6);
	CHECK_INT(q("SELECT base_rank FROM assignments WHERE rdzv_id = 'run' "
	    "AND generation = 4 AND group_rank = 1"), 4);
	CHECK_INT(q("SELECT restart_count FROM rounds WHERE rdzv_id = 'run' "
	    "AND generation = 2"), 0);
	CHECK_INT(q("SELECT restart_count FROM rounds WHERE rdzv_id = 'run' "
	    "AND generation = 3"), 1);
	/* Reopen: the old attempt's node is gone, its rounds stay. */
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE rdzv_id = 'reopen'"), 1);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'reopen'"),
	    2);
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE state = 'evicted'"), 1);

	/* The loaded core goes on: ids stay unique, generations keep. */
	a_id = a->node_id;
	memcpy(a_session, a->session_id, CORE_SESSION_LEN);
	core_free(C);
	C = L;
	turn();
	n = join("lastcall", "l3", 1, 2, 4);
	CHECK(n != NULL && n->node_id == L->next_node_id - 1);
	CHECK(n != NULL && core_node_find(L, n->node_id) == n);
	CHECK_INT(core_resume(C, NOW, "alice", "run", a_session, 4, NULL,
	    err, sizeof(err)), 0);
	CHECK(core_job_find(C, "run")->generation == 4);
	turn();
	n = core_node_find(C, a_id);
	core_node_current(n, &m);
	CHECK_INT(m.kind, CORE_MSG_ASSIGNMENT);
	CHECK_INT(m.u.assignment.generation, 4);
	CHECK_INT(m.u.assignment.base_rank, 0);
	CHECK_INT(m.u.assignment.world_size, 6);
	/* A round after the restart is recorded as the next generation. */
	TAILQ_FOREACH(n, &core_job_find(C, "lastcall")->nodes, entry)
		CHECK_INT(core_resume(C, NOW, "alice", "lastcall",
		    n->session_id, 0, NULL, err, sizeof(err)), 0);
	turn();
	tick(30000);
	CHECK_INT(core_job_find(C, "lastcall")->generation, 1);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = "
	    "'lastcall' AND generation = 1"), 3);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/* Retention: an ended job's rows go with it, from memory and from disk. */
static void
test_retention(void)
{
	struct core_node	*n;
	struct core		*L;

	setup("retention.db");
	n = join("old", "h1", 1, 1, 1);
	report(n, CORE_OUTCOME_SUCCEEDED);
	join("young", "h2", 1, 1, 1);
	CHECK_INT(q("SELECT count(*) FROM events WHERE rdzv_id = 'old'") > 0,
	    1);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'old'"), 1);
	tick(7ULL * 24 * 3600 * 1000 + 1000);
	CHECK(core_job_find(C, "old") == NULL);
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE rdzv_id = 'old'"), 0);
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE rdzv_id = 'old'"), 0);
	CHECK_INT(q("SELECT count(*) FROM events WHERE rdzv_id = 'old'"), 0);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'old'"), 0);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'old'"),
	    0);
	CHECK_INT(q("SELECT count(*) FROM jobs"), 1);
	/* The same id starts over as a new job, from generation 1. */
	n = join("old", "h3", 1, 1, 1);
	CHECK_INT(n->job->generation, 1);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'old'"), 1);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/*
 * An owner over max_ended_per_owner: its oldest ended jobs go from memory
 * and from the store in the commit of the turn that ended one more, as
 * retention would remove them (on etcd too: reload() loads from there).
 */
static void
test_pruned_ended_jobs(void)
{
	struct core_node	*n;
	struct core		*L;
	char			 id[16];

	setup("pruned.db");
	C->cfg.max_ended_per_owner = 2;
	for (int i = 1; i <= 4; i++) {
		snprintf(id, sizeof(id), "p-%d", i);
		n = join(id, "h", 1, 1, 1);
		tick(1000);
		report(n, CORE_OUTCOME_SUCCEEDED);
	}
	join("live", "h", 1, 2, 2);
	CHECK(core_job_find(C, "p-1") == NULL && core_job_find(C, "p-2") ==
	    NULL && core_job_find(C, "p-4") != NULL);
	CHECK_INT(q("SELECT count(*) FROM jobs"), 3);
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE rdzv_id IN ('p-1', "
	    "'p-2')"), 0);
	CHECK_INT(q("SELECT count(*) FROM events WHERE rdzv_id IN ('p-1', "
	    "'p-2')"), 0);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'p-3'"), 1);
	L = reload();
	compare_cores(C, L);
	CHECK(core_job_find(L, "p-1") == NULL && core_job_find(L, "p-3") !=
	    NULL);
	core_free(L);
	teardown();
}

/*
 * A round formed and broken up again within one loop turn: its members
 * are still sent its assignment after the commit, so it is recorded too,
 * whole, also with the member that left in the same turn.
 */
/* Rounds whose assignments do not add up to group ranks 0..n-1. */
#define ROUNDS_NOT_WHOLE						\
	"SELECT count(*) FROM rounds r WHERE world_size != (SELECT "	\
	"coalesce(sum(nproc), 0) FROM assignments a WHERE a.rdzv_id = "	\
	"r.rdzv_id AND a.generation = r.generation) OR (SELECT count(*) "	\
	"FROM assignments a WHERE a.rdzv_id = r.rdzv_id AND a.generation "\
	"= r.generation) != (SELECT max(group_rank) + 1 FROM assignments a "\
	"WHERE a.rdzv_id = r.rdzv_id AND a.generation = r.generation)"

static void
test_superseded_round(void)
{
	struct core_node	*a, *b, *c;
	struct core_join	 r;
	struct core		*L;
	size_t			 sent;

	setup("superseded.db");
	a = join("sup", "a", 2, 2, 2);
	b = join("sup", "b", 2, 2, 2);
	CHECK_INT(a->job->generation, 1);
	r = req("sup", "c", 1, 2, 2);
	c = join_only(&r);			/* a spare */
	CHECK_INT(core_leave(C, NOW, "alice", a->session_id, NULL, err,
	    sizeof(err)), 0);			/* b and c: generation 2 */
	CHECK_INT(a->job->generation, 2);
	CHECK_INT(core_leave(C, NOW, "alice", b->session_id, NULL, err,
	    sizeof(err)), 0);			/* too few: round open */
	CHECK_INT(c->job->state, CORE_JOB_WAITING);
	CHECK_INT(c->job->round_n, 0);
	sent = assignments_sent;
	turn();
	CHECK(assignments_sent > sent);
	CHECK_INT(q("SELECT count(*) FROM rounds WHERE rdzv_id = 'sup' AND "
	    "generation = 2"), 1);
	CHECK_INT(q("SELECT world_size FROM rounds WHERE rdzv_id = 'sup' AND "
	    "generation = 2"), 3);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'sup' "
	    "AND generation = 2"), 2);
	CHECK_INT(q("SELECT node_id FROM assignments WHERE rdzv_id = 'sup' "
	    "AND generation = 2 AND group_rank = 0"), (long long)b->node_id);
	CHECK_INT(q(ROUNDS_NOT_WHOLE), 0);
	/* The next round is 3, and a restart keeps counting from there. */
	L = reload();
	compare_cores(C, L);
	core_free(L);
	join("sup", "d", 1, 2, 2);
	CHECK_INT(c->job->generation, 3);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'sup' "
	    "AND generation = 3"), 2);
	CHECK_INT(q(ROUNDS_NOT_WHOLE), 0);
	teardown();
}

/*
 * The same, with the superseded round's rank 0 disconnecting in that turn:
 * its message is dropped (it learns the current round when it resumes),
 * but the round it was part of is still recorded whole.
 */
static void
test_superseded_round_disconnect(void)
{
	struct core_node	*a, *b, *c;
	struct core_join	 r;

	setup("superseded2.db");
	a = join("sup2", "a", 2, 2, 2);
	b = join("sup2", "b", 2, 2, 2);
	r = req("sup2", "c", 1, 2, 2);
	c = join_only(&r);
	CHECK_INT(core_leave(C, NOW, "alice", a->session_id, NULL, err,
	    sizeof(err)), 0);			/* b and c: generation 2 */
	CHECK_INT(b->group_rank, 0);
	core_disconnect(C, NOW, b);
	CHECK_INT(core_leave(C, NOW, "alice", c->session_id, NULL, err,
	    sizeof(err)), 0);			/* too few: round open */
	turn();
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'sup2' "
	    "AND generation = 2"), 2);
	CHECK_INT(q(ROUNDS_NOT_WHOLE), 0);
	teardown();
}

/* Node ids stay unique when the node with the highest one is gone. */
static void
test_node_ids(void)
{
	struct core_node	*n;
	struct core		*L;

	setup("ids.db");
	join("keep", "h1", 1, 1, 1);
	n = join("gone", "h2", 1, 1, 1);
	CHECK_INT(n->node_id, 2);
	report(n, CORE_OUTCOME_SUCCEEDED);
	tick(7ULL * 24 * 3600 * 1000 + 1000);
	CHECK_INT(q("SELECT max(node_id) FROM nodes"), 1);
	CHECK_INT(q("SELECT value FROM meta WHERE key = 'next_node_id'"), 3);
	L = reload();
	CHECK_INT(L->next_node_id, 3);
	core_free(C);
	C = L;
	n = join("keep2", "h3", 1, 1, 1);
	CHECK_INT(n->node_id, 3);
	teardown();
}

/* Turns that change nothing durable do no transaction. */
static void
test_no_change_no_transaction(void)
{
	struct core_node	*n;
	uint64_t		 t;

	setup("quiet.db");
	n = join("q", "h1", 1, 1, 1);
	t = store_transactions(S);
	CHECK_INT(t, 1);
	turn();
	turn();
	CHECK_INT(store_transactions(S), t);
	/* Disconnects and resumes are not written (docs/RENDEZVOUS.md). */
	core_disconnect(C, NOW, n);
	turn();
	CHECK_INT(core_resume(C, NOW, "alice", "q", n->session_id, 1, NULL,
	    err, sizeof(err)), 0);
	turn();
	CHECK_INT(store_transactions(S), t);
	report(n, CORE_OUTCOME_SUCCEEDED);
	CHECK_INT(store_transactions(S), t + 1);
	teardown();
}

/* Group commit: a thousand joins in one turn are one transaction. */
static void
test_group_commit(void)
{
	struct core_join	r;
	char			host[32];
	int			i;

	setup("group.db");
	for (i = 0; i < 1000; i++) {
		snprintf(host, sizeof(host), "node%04d", i);
		r = req("big", host, 8, 1000, 1000);
		join_only(&r);
	}
	CHECK_INT(core_job_find(C, "big")->generation, 1);
	turn();
	CHECK_INT(store_transactions(S), 1);
	CHECK_INT(q("SELECT count(*) FROM nodes"), 1000);
	CHECK_INT(q("SELECT count(*) FROM assignments"), 1000);
	CHECK_INT(q("SELECT world_size FROM rounds"), 8000);
	CHECK_INT(q("SELECT value FROM meta WHERE key = 'next_node_id'"),
	    1001);
	teardown();
}

static double
secs_since(uint64_t t0_ns)
{
	return (double)(mono_ns() - t0_ns) / 1e9;
}

/* A figure, not a check: 10,000 joins and their round in one commit. */
static void
test_bench_10k(void)
{
	struct core_join	r;
	uint64_t		t0;
	struct core		*L;
	char			host[32];
	double			commit_s, load_s;
	uint64_t		ntxn, nbytes;
	int			i;

	setup("bench.db");
	for (i = 0; i < 10000; i++) {
		snprintf(host, sizeof(host), "gpu%05d.cluster", i);
		r = req("huge", host, 8, 10000, 10000);
		join_only(&r);
	}
	CHECK_INT(core_job_find(C, "huge")->generation, 1);
	t0 = mono_ns();
	CHECK_INT(store_commit(S, C, err, sizeof(err)), 0);
	commit_s = secs_since(t0);
	if (S2 != NULL)
		CHECK_INT(store_commit(S2, C, err, sizeof(err)), 0);
	turn_send(true);
	/* etcd: more than 1.5 MiB, so the job's buckets and log go first in
	 * Txns of their own and its record last (store_etcd_plan.h). */
	if (ON_ETCD)
		CHECK(store_transactions(S) >= 2 && store_transactions(S) <= 4);
	else
		CHECK_INT(store_transactions(S), 1);
	CHECK_INT(q("SELECT count(*) FROM assignments"), 10000);
	ntxn = store_transactions(S);
	nbytes = store_bytes_written(S);
	t0 = mono_ns();
	L = reload();
	load_s = secs_since(t0);
	CHECK_INT(L->by_node.n, 10000);
	printf("figure: %s: store_commit of 10,000 joins and their round in "
	    "%llu transaction(s), %llu bytes: %.1f ms; store_open + store_load "
	    "of them: %.1f ms\n", ON_ETCD ? "etcd" : "SQLite",
	    (unsigned long long)ntxn, (unsigned long long)nbytes,
	    commit_s * 1e3, load_s * 1e3);
	core_free(C);
	C = L;
	/* One join per turn: the cost of a commit, mostly its fsync. */
	commit_s = 0;
	for (i = 0; i < 100; i++) {
		snprintf(host, sizeof(host), "small%03d", i);
		r = req(host, host, 1, 1, 1);
		join_only(&r);
		t0 = mono_ns();
		CHECK_INT(store_commit(S, C, err, sizeof(err)), 0);
		commit_s += secs_since(t0);
		if (S2 != NULL)
			CHECK_INT(store_commit(S2, C, err, sizeof(err)), 0);
		turn_send(true);
	}
	CHECK_INT(store_transactions(S), 100);
	printf("figure: %s: store_commit of one join and its round: %.2f ms\n",
	    ON_ETCD ? "etcd" : "SQLite", commit_s * 1e3 / 100);
	teardown();
}







struct evs {
	uint64_t	seqs[512];
	int		n, stop_at;
};

static int
collect(const struct core_event *e, void *arg)
{
	struct evs	*v = arg;

	if (v->n < 512)
		v->seqs[v->n++] = e->seq;
	return v->stop_at != 0 && v->n == v->stop_at;
}

/* The full history stays on disk; the core keeps only the latest. */
static void
test_events(void)
{
	struct core_node	*n;
	struct core_report	 rep;
	struct core		*L;
	struct core_job		*j;
	struct evs		 v;
	uint64_t		 last;
	int			 i, ok;

	setup("events.db");
	n = join("ev", "h1", 1, 1, 1);
	memset(&rep, 0, sizeof(rep));
	rep.session_id = n->session_id;
	rep.generation = 1;
	rep.outcome = CORE_OUTCOME_UPDATE;
	rep.has_gpus = true;
	rep.gpus_total = 8;
	for (i = 0; i < 250; i++) {
		rep.gpus_healthy = (uint32_t)(i % 2 == 0 ? 7 : 8);
		CHECK_INT(core_report(C, NOW, "alice", &rep, NULL, err,
		    sizeof(err)), 0);
		tick(10);
	}
	j = core_job_find(C, "ev");
	last = j->event_seq;
	CHECK(last > CORE_EVENTS_KEPT);
	CHECK_INT(q("SELECT count(*) FROM events WHERE rdzv_id = 'ev'"),
	    last);

	memset(&v, 0, sizeof(v));
	CHECK_INT(store_events(S, "ev", 0, 1000, collect, &v, err,
	    sizeof(err)), 0);
	CHECK_INT(v.n, last);
	for (i = 0, ok = 1; i < v.n; i++)
		ok &= v.seqs[i] == (uint64_t)i + 1;
	CHECK(ok);
	memset(&v, 0, sizeof(v));
	CHECK_INT(store_events(S, "ev", 20, 10, collect, &v, err,
	    sizeof(err)), 0);
	CHECK(v.n == 10 && v.seqs[0] == 21 && v.seqs[9] == 30);
	memset(&v, 0, sizeof(v));
	v.stop_at = 3;
	CHECK_INT(store_events(S, "ev", 0, 100, collect, &v, err,
	    sizeof(err)), 0);
	CHECK_INT(v.n, 3);
	memset(&v, 0, sizeof(v));
	CHECK_INT(store_events(S, "nosuchjob", 0, 100, collect, &v, err,
	    sizeof(err)), 0);
	CHECK_INT(v.n, 0);
	CHECK_INT(store_events(S, "ev", UINT64_MAX, 100, collect, &v, err,
	    sizeof(err)), 0);
	CHECK_INT(v.n, 0);

	L = reload();
	j = core_job_find(L, "ev");
	CHECK(j != NULL && j->events_n == CORE_EVENTS_KEPT);
	CHECK(j != NULL && core_job_event(j, 0)->seq ==
	    last - CORE_EVENTS_KEPT + 1);
	CHECK(j != NULL && core_job_event(j, CORE_EVENTS_KEPT - 1)->seq ==
	    last);
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/* A figure: 1,000 jobs of 8 nodes joining in one turn, then loaded. */
static void
test_bench_1000_jobs(void)
{
	struct core_join	r;
	struct core		*L;
	char			id[32], host[32];
	uint64_t		t0, ntxn, nbytes;
	double			commit_s, load_s;
	int			i, k;

	setup("jobs.db");
	for (i = 0; i < 1000; i++) {
		snprintf(id, sizeof(id), "job-%d", i);
		for (k = 0; k < 8; k++) {
			snprintf(host, sizeof(host), "gpu%05d.cluster", i * 8 + k);
			r = req(id, host, 8, 8, 8);
			join_only(&r);
		}
	}
	t0 = mono_ns();
	CHECK_INT(store_commit(S, C, err, sizeof(err)), 0);
	commit_s = secs_since(t0);
	if (S2 != NULL)
		CHECK_INT(store_commit(S2, C, err, sizeof(err)), 0);
	turn_send(true);
	ntxn = store_transactions(S);
	nbytes = store_bytes_written(S);
	if (ON_ETCD)
		CHECK(ntxn >= 20 && ntxn <= 40);
	else
		CHECK_INT(ntxn, 1);
	t0 = mono_ns();
	L = reload();
	load_s = secs_since(t0);
	compare_cores(C, L);
	printf("figure: %s: store_commit of 1,000 new 8-node jobs and their "
	    "rounds in %llu transaction(s), %llu bytes: %.1f ms; store_open + "
	    "store_load of them: %.1f ms\n", ON_ETCD ? "etcd" : "SQLite",
	    (unsigned long long)ntxn, (unsigned long long)nbytes,
	    commit_s * 1e3, load_s * 1e3);
	core_free(L);
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "roundtrip", test_roundtrip },
		{ "retention", test_retention },
		{ "pruned_ended_jobs", test_pruned_ended_jobs },
		{ "node_ids", test_node_ids },
		{ "superseded_round", test_superseded_round },
		{ "superseded_round_disconnect",
		    test_superseded_round_disconnect },
		{ "no_change_no_transaction", test_no_change_no_transaction },
		{ "group_commit", test_group_commit },
		{ "events", test_events },
		{ "bench_10k", test_bench_10k },
		{ "bench_1000_jobs", test_bench_1000_jobs },
	};

	return run_tests("test_store", tests, sizeof(tests) / sizeof(tests[0]),
	    argc, argv);
}
