/*
 * Unit tests of the SQLite store (SPEC §9): a real rendezvous core is
 * driven through joins, rounds, reports, leaves, evictions, aborts and
 * reopens, each loop turn committed to a database in a temporary
 * directory; then a fresh core is loaded from the file and compared field
 * by field with the one that wrote it. Also: group commit, retention,
 * refusing files rdzvd must not touch, the lock, and failing commits.
 * The test looks inside the store (store_int.h) only to reach its SQLite
 * connection.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "core.h"
#include "grpc.h"
#include "store.h"
#include "store_int.h"

static char		 dir[64];
static char		 dbpath[128];
static struct core_now	 NOW;
static struct core	*C;
static struct store	*S;
static uint32_t		 session_ctr;
static char		 err[1024];

static void
fresh_path(const char *name)
{
	snprintf(dbpath, sizeof(dbpath), "%s/%s", dir, name);
}

static void
setup(const char *name)
{
	fresh_path(name);
	NOW.mono_ms = 5000000;
	NOW.wall_ms = 1700000000000LL;
	C = core_new(NULL);
	err[0] = '\0';
	S = NULL;
	if (store_open(dbpath, &S, err, sizeof(err)) != 0) {
		fprintf(stderr, "store_open %s: %s\n", dbpath, err);
		CHECK(0);
	}
}

static void
teardown(void)
{
	store_close(S);
	S = NULL;
	core_free(C);
	C = NULL;
}

/* The end of a loop turn, as the daemon does it. */
static void
turn(void)
{
	struct core_node	*n;
	struct core_msg		 m;
	char			 e[512];

	if (core_check(C, e, sizeof(e)) != 0) {
		fprintf(stderr, "  invariant broken: %s\n", e);
		CHECK(0);
	}
	if (store_commit(S, C, err, sizeof(err)) != 0) {
		fprintf(stderr, "  commit: %s\n", err);
		CHECK(0);
	}
	while (core_outbox_pop(C, &n, &m))
		;
	core_changes_clear(C);
}

static void
tick(uint64_t ms)
{
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	core_advance(C, NOW);
	turn();
}

static struct core_join
req(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r;

	memset(&r, 0, sizeof(r));
	r.rdzv_id = id;
	r.identity = "alice";
	r.hostname = host;
	r.advertise_addr = host;
	r.master_port = 29500;
	r.nproc = nproc;
	r.settings.min_nodes = min;
	r.settings.max_nodes = max;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[15] = 0x5a;
	return r;
}

/* A join without the end of the turn. */
static struct core_node *
join_only(struct core_join *r)
{
	struct core_node	*n = NULL;
	int			 rc;

	rc = core_join(C, NOW, r, &n, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "  join %s/%s: %s\n", r->rdzv_id, r->hostname,
		    err);
	CHECK_INT(rc, 0);
	return n;
}

static struct core_node *
join(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	 r = req(id, host, nproc, min, max);
	struct core_node	*n = join_only(&r);

	turn();
	return n;
}

static void
report(struct core_node *n, enum core_outcome o)
{
	struct core_report	r;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = n->job->generation;
	r.outcome = o;
	r.message = "worker 3 exited 1";
	CHECK_INT(core_report(C, NOW, "alice", &r, NULL, err, sizeof(err)), 0);
	turn();
}

/* A query on a connection of its own, as an operator's sqlite3 would. */
static long long
q(const char *sql)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	long long	 v = -1;

	if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK || sqlite3_prepare_v2(db, sql, -1, &st, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "  %s: %s\n", sql, sqlite3_errmsg(db));
		sqlite3_close(db);
		return -2;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int
exec_other(const char *sql)
{
	sqlite3	*db;
	char	*msg = NULL;
	int	 rc;

	if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "  %s: %s\n", sql, msg);
	sqlite3_free(msg);
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -1;
}

static char *
slurp(const char *path, size_t *len)
{
	FILE	*f = fopen(path, "rb");
	char	*buf;
	long	 n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* A fresh core from the file, as after a daemon restart at NOW. */
static struct core *
reload(void)
{
	struct core	*b = core_new(NULL);

	store_close(S);
	S = NULL;
	if (store_open(dbpath, &S, err, sizeof(err)) != 0 ||
	    store_load(S, b, NOW, err, sizeof(err)) != 0) {
		fprintf(stderr, "  reload: %s\n", err);
		CHECK(0);
	}
	if (core_check(b, err, sizeof(err)) != 0) {
		fprintf(stderr, "  loaded core: %s\n", err);
		CHECK(0);
	}
	return b;
}

static void
compare_job(const struct core_job *a, const struct core_job *b)
{
	const struct core_event	*x, *y;
	uint32_t		 i;

	CHECK_STR(a->owner, b->owner);
	CHECK_MEM(&a->settings, &b->settings, sizeof(a->settings));
	CHECK_INT(a->state, b->state);
	CHECK_STR(a->reason, b->reason);
	CHECK_INT(a->generation, b->generation);
	CHECK_INT(a->restart_count, b->restart_count);
	CHECK_INT(a->attempt, b->attempt);
	CHECK_INT(a->created_ms, b->created_ms);
	CHECK_INT(a->updated_ms, b->updated_ms);
	CHECK_INT(a->ended_ms, b->ended_ms);
	CHECK_INT(a->event_seq, b->event_seq);
	CHECK_INT(a->last_call_left_ms, b->last_call_left_ms);
	CHECK_INT(a->join_left_ms, b->join_left_ms);
	CHECK_INT(a->round_n, b->round_n);
	CHECK_INT(a->world_size, b->world_size);
	CHECK_STR(a->master_addr, b->master_addr);
	CHECK_INT(a->master_port, b->master_port);
	CHECK_INT(a->n_nodes, b->n_nodes);
	CHECK_MEM(a->n_state, b->n_state, sizeof(a->n_state));
	CHECK_INT(a->events_n, b->events_n);
	for (i = 0; i < a->events_n && i < b->events_n; i++) {
		x = core_job_event(a, i);
		y = core_job_event(b, i);
		CHECK_INT(x->seq, y->seq);
		CHECK_INT(x->wall_ms, y->wall_ms);
		CHECK_INT(x->generation, y->generation);
		CHECK_STR(x->kind, y->kind);
		CHECK_STR(x->message, y->message);
	}
	for (i = 0; i < a->round_n && i < b->round_n; i++)
		CHECK_INT(a->round[i]->node_id, b->round[i]->node_id);
}

static void
compare_node(const struct core_node *a, const struct core_node *b)
{
	CHECK_MEM(a->session_id, b->session_id, CORE_SESSION_LEN);
	CHECK_STR(a->job->rdzv_id, b->job->rdzv_id);
	CHECK_STR(a->hostname, b->hostname);
	CHECK_STR(a->advertise_addr, b->advertise_addr);
	CHECK_INT(a->master_port, b->master_port);
	CHECK_INT(a->nproc, b->nproc);
	CHECK_INT(a->has_rank_hint, b->has_rank_hint);
	CHECK_INT(a->rank_hint, b->rank_hint);
	CHECK_INT(a->state, b->state);
	CHECK_INT(a->group_rank, b->group_rank);
	CHECK_INT(a->base_rank, b->base_rank);
	CHECK_INT(a->generation, b->generation);
	CHECK_INT(a->arrival, b->arrival);
	CHECK_INT(a->joined_ms, b->joined_ms);
	CHECK_INT(a->gpus_healthy, b->gpus_healthy);
	CHECK_INT(a->gpus_total, b->gpus_total);
	CHECK_INT(a->reason == NULL, b->reason == NULL);
	if (a->reason != NULL && b->reason != NULL)
		CHECK_STR(a->reason, b->reason);
}

/* Everything the store keeps, job by job and node by node. */
static void
compare_cores(const struct core *a, const struct core *b)
{
	const struct core_job	*j, *k;
	const struct core_node	*n, *m;

	CHECK_INT(a->n_jobs, b->n_jobs);
	CHECK_INT(a->by_node.n, b->by_node.n);
	CHECK_INT(a->next_node_id, b->next_node_id);
	TAILQ_FOREACH(j, &a->jobs, entry) {
		if ((k = core_job_find(b, j->rdzv_id)) == NULL) {
			fprintf(stderr, "  job %s not loaded\n", j->rdzv_id);
			CHECK(0);
			continue;
		}
		compare_job(j, k);
		TAILQ_FOREACH(n, &j->nodes, entry) {
			if ((m = core_node_find(b, n->node_id)) == NULL) {
				fprintf(stderr, "  node %llu not loaded\n",
				    (unsigned long long)n->node_id);
				CHECK(0);
				continue;
			}
			compare_node(n, m);
		}
	}
}

/* ------------------------------------------------------------------ tests */

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

	setup("roundtrip.db");
	/* A running job that went through a failure and a leave. */
	r = req("run", "hostb", 2, 2, 3);
	r.settings.max_restarts = 3;
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
	rep.outcome = CORE_OUTCOME_HEALTH;
	rep.has_gpus = true;
	rep.gpus_healthy = 1;
	rep.gpus_total = 2;
	CHECK_INT(core_report(C, NOW, "alice", &rep, NULL, err, sizeof(err)),
	    0);
	turn();
	CHECK_INT(a->job->generation, 4);

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

	j = core_job_find(C, "short");
	join_left = j->join_left_ms;
	CHECK(join_left > 0 && join_left < 600000);
	j = core_job_find(C, "lastcall");
	lc_left = j->last_call_left_ms;
	CHECK(lc_left > 0 && lc_left <= 30000);

	L = reload();
	compare_cores(C, L);

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
secs_since(const struct timespec *t0)
{
	struct timespec	t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A figure, not a check: 10,000 joins and their round in one commit. */
static void
test_bench_10k(void)
{
	struct core_join	r;
	struct timespec		t0;
	struct core		*L;
	char			host[32];
	double			commit_s, load_s;
	int			i;

	setup("bench.db");
	for (i = 0; i < 10000; i++) {
		snprintf(host, sizeof(host), "gpu%05d.cluster", i);
		r = req("huge", host, 8, 10000, 10000);
		join_only(&r);
	}
	CHECK_INT(core_job_find(C, "huge")->generation, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	turn();
	commit_s = secs_since(&t0);
	CHECK_INT(store_transactions(S), 1);
	CHECK_INT(q("SELECT count(*) FROM assignments"), 10000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	L = reload();
	load_s = secs_since(&t0);
	CHECK_INT(L->by_node.n, 10000);
	printf("figure: store_commit of 10,000 joins and their round in one "
	    "transaction: %.1f ms; store_open + store_load of them: %.1f ms\n",
	    commit_s * 1e3, load_s * 1e3);
	core_free(C);
	C = L;
	/* One join per turn: the cost of a commit, mostly its fsync. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 100; i++) {
		snprintf(host, sizeof(host), "small%03d", i);
		join(host, host, 1, 1, 1);
	}
	commit_s = secs_since(&t0);
	CHECK_INT(store_transactions(S), 100);
	printf("figure: one join per turn: %.2f ms per turn (core + commit)\n",
	    commit_s * 1e3 / 100);
	teardown();
}

/* A generation recorded twice fails the commit loudly, and for good. */
static void
test_duplicate_generation(void)
{
	struct core_node	*a;
	uint64_t		 t;

	setup("dup.db");
	a = join("dup", "h1", 1, 1, 2);
	join("dup", "h2", 1, 1, 2);
	CHECK_INT(a->job->generation, 1);
	/* Someone writes generation 2 behind the daemon's back. */
	CHECK_INT(exec_other("INSERT INTO rounds VALUES ('dup', 2, 1, 'x', "
	    "1, 0, 0)"), 0);
	t = store_transactions(S);
	CHECK_INT(core_leave(C, NOW, "alice", a->session_id, NULL, err,
	    sizeof(err)), 0);
	CHECK_INT(a->job->generation, 2);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "round 2 of job dup");
	CHECK_CONTAINS(err, "UNIQUE constraint failed: rounds");
	CHECK_INT(store_transactions(S), t);
	/* Nothing of the failed turn reached the file. */
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE state = 'left'"), 0);
	/* Never retried: the next commit fails too. */
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "an earlier commit failed");
	core_changes_clear(C);
	teardown();
}

/* A full disk: the commit fails with SQLite's words, and for good. */
static void
test_commit_failure(void)
{
	struct core_join	r;
	char			host[64];
	int			i, rc;

	setup("full.db");
	join("full", "h0", 1, 1, 5000);
	CHECK_INT(sqlite3_exec(S->db, "PRAGMA max_page_count = 12", NULL,
	    NULL, NULL), SQLITE_OK);
	for (i = 1; i < 2000; i++) {
		snprintf(host, sizeof(host), "a-rather-long-host-name-%05d", i);
		r = req("full", host, 1, 1, 5000);
		join_only(&r);
	}
	rc = store_commit(S, C, err, sizeof(err));
	CHECK_INT(rc, -1);
	CHECK_CONTAINS(err, "full");
	printf("  commit on a full disk: %s\n", err);
	CHECK_INT(store_commit(S, C, err, sizeof(err)), -1);
	CHECK_INT(q("SELECT count(*) FROM nodes"), 1);
	core_changes_clear(C);
	teardown();
}

/* A newer schema is refused untouched, naming the file and the versions. */
static void
test_newer_schema(void)
{
	struct store	*s = NULL;
	char		*before, *after, wal[160];
	size_t		 nb = 0, na = 0;

	fresh_path("newer.db");
	{
		sqlite3	*db;

		CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
		CHECK_INT(sqlite3_exec(db, "CREATE TABLE future (x); INSERT "
		    "INTO future VALUES (1); PRAGMA user_version = 99", NULL,
		    NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	}
	before = slurp(dbpath, &nb);
	CHECK(before != NULL);
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), -1);
	CHECK(s == NULL);
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "schema version 99");
	CHECK_CONTAINS(err, "version 1 that this rdzvd knows");
	after = slurp(dbpath, &na);
	CHECK(after != NULL && na == nb && memcmp(before, after, nb) == 0);
	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	CHECK(access(wal, F_OK) != 0);
	free(before);
	free(after);
}

/* Not SQLite at all, or SQLite of another program: refused untouched. */
static void
test_garbage(void)
{
	struct store	*s = NULL;
	char		 junk[4096], *after;
	size_t		 na = 0, i;
	FILE		*f;

	fresh_path("garbage.db");
	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (char)('a' + i % 23);
	f = fopen(dbpath, "wb");
	CHECK(f != NULL && fwrite(junk, 1, sizeof(junk), f) == sizeof(junk));
	fclose(f);
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), -1);
	CHECK(s == NULL);
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "not a database");
	CHECK_CONTAINS(err, "never overwrites");
	after = slurp(dbpath, &na);
	CHECK(after != NULL && na == sizeof(junk) &&
	    memcmp(junk, after, na) == 0);
	free(after);

	fresh_path("foreign.db");
	{
		sqlite3	*db;

		CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
		CHECK_INT(sqlite3_exec(db, "CREATE TABLE photos (x)", NULL,
		    NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	}
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "belongs to something else");
	CHECK_INT(q("SELECT count(*) FROM photos"), 0);
}

/* One rdzvd per database. */
static void
test_lock(void)
{
	struct store	*s = NULL;
	char		 pid[32];

	setup("locked.db");
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), -1);
	CHECK(s == NULL);
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "in use by another rdzvd");
	CHECK_CONTAINS(err, pid);
	CHECK_CONTAINS(err, ".lock");
	/* The refused open did not release the holder's lock. */
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), -1);
	teardown();
	CHECK_INT(store_open(dbpath, &s, err, sizeof(err)), 0);
	store_close(s);
}

/* WAL and synchronous=FULL, a private file in a private new directory. */
static void
test_open_settings(void)
{
	struct stat	sb;
	char		mode[16] = "";
	sqlite3_stmt	*st;
	char		sub[128];

	snprintf(sub, sizeof(sub), "%s/state/rdzv", dir);
	fresh_path("state/rdzv/rdzvd.db");
	C = core_new(NULL);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK(stat(sub, &sb) == 0 && (sb.st_mode & 0777) == 0700);
	CHECK(stat(dbpath, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	CHECK(S != NULL);
	if (S == NULL)
		return;
	CHECK_INT(sqlite3_prepare_v2(S->db, "PRAGMA journal_mode", -1, &st,
	    NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(mode, sizeof(mode), "%s",
		    (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	CHECK_STR(mode, "wal");
	CHECK_INT(sqlite3_prepare_v2(S->db, "PRAGMA synchronous", -1, &st,
	    NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	CHECK_INT(sqlite3_column_int(st, 0), 2);
	sqlite3_finalize(st);
	CHECK_INT(q("PRAGMA user_version"), 1);
	/* Also from outside, as the sqlite3 CLI would see it. */
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE name IN "
	    "('jobs', 'nodes', 'events', 'rounds', 'assignments', 'meta')"),
	    6);
	CHECK_STR(S->path, store_path(S));
	teardown();
	/* An empty existing file is an empty database: it is set up. */
	fresh_path("empty.db");
	CHECK(close(open(dbpath, O_CREAT | O_WRONLY, 0600)) == 0);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	store_close(S);
	S = NULL;
	CHECK_INT(q("PRAGMA user_version"), 1);
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
	rep.outcome = CORE_OUTCOME_HEALTH;
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

/* Load refuses data that would hand out a generation twice. */
static void
test_load_refuses_rounds_ahead(void)
{
	struct core	*L = core_new(NULL);

	setup("ahead.db");
	join("ah", "h1", 1, 1, 1);
	store_close(S);
	S = NULL;
	CHECK_INT(exec_other("INSERT INTO rounds VALUES ('ah', 7, 1, 'x', 1, "
	    "0, 0)"), 0);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK_INT(store_load(S, L, NOW, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "job ah: round 7 is recorded but the job's "
	    "generation is 1");
	core_free(L);
	teardown();
}

static void
rmtree(const char *path)
{
	char	cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

struct test {
	const char	*name;
	void		(*fn)(void);
};

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "roundtrip", test_roundtrip },
		{ "retention", test_retention },
		{ "node_ids", test_node_ids },
		{ "no_change_no_transaction", test_no_change_no_transaction },
		{ "group_commit", test_group_commit },
		{ "bench_10k", test_bench_10k },
		{ "duplicate_generation", test_duplicate_generation },
		{ "commit_failure", test_commit_failure },
		{ "newer_schema", test_newer_schema },
		{ "garbage", test_garbage },
		{ "lock", test_lock },
		{ "open_settings", test_open_settings },
		{ "events", test_events },
		{ "load_refuses_rounds_ahead", test_load_refuses_rounds_ahead },
	};
	const char	*tmp = getenv("TMPDIR");
	size_t		 i;
	int		 before;

	snprintf(dir, sizeof(dir), "%s/test_store.XXXXXX",
	    tmp != NULL && strlen(tmp) < 40 ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
			continue;
		before = check_failures;
		session_ctr = 0;
		tests[i].fn();
		printf("%s %s\n", check_failures == before ? "PASS" : "FAIL",
		    tests[i].name);
	}
	rmtree(dir);
	return check_done("test_store");
}
