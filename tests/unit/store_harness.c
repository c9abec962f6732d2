/*
 * The store's test harness (store_harness.h): a real core over the real
 * SQLite store.
 */
#include "store_harness.h"

char		 dir[64];
char		 dbpath[128];
struct core_now	 NOW;
struct core	*C;
struct store	*S;
struct store	*S2;
const char	*test_etcd;
char		 spec[512];
uint32_t		 session_ctr;
char		 err[1024];

void
fresh_path(const char *name)
{
	snprintf(dbpath, sizeof(dbpath), "%s/%s", dir, name);
}

sqlite3 *
sqlite_db(void)
{
	struct sqlstore	*s = store_backend(S2 != NULL ? S2 : S);

	return s->db;
}

void
setup(const char *name)
{
	static unsigned	 seq;

	fresh_path(name);
	NOW.mono_ms = 5000000;
	NOW.wall_ms = 1700000000000LL;
	C = core_new(NULL);
	err[0] = '\0';
	S = S2 = NULL;
	if (ON_ETCD) {
		/* A prefix no other run or test has used. */
		snprintf(spec, sizeof(spec), "etcd://%s/test/%d.%u/%s",
		    test_etcd, (int)getpid(), ++seq, name);
		if (store_open(dbpath, &S2, err, sizeof(err)) != 0) {
			fprintf(stderr, "store_open %s: %s\n", dbpath, err);
			CHECK(0);
		}
	} else
		snprintf(spec, sizeof(spec), "%s", dbpath);
	if (store_open(spec, &S, err, sizeof(err)) != 0) {
		fprintf(stderr, "store_open %s: %s\n", spec, err);
		CHECK(0);
	}
}

void
teardown(void)
{
	store_close(S);
	S = NULL;
	store_close(S2);
	S2 = NULL;
	core_free(C);
	C = NULL;
}

size_t		 assignments_sent;

/*
 * The round the last checked assignment belongs to, as the database holds
 * it, with its members by node id: read once per round, since the view
 * assignments unpacks a round's members and a query per node would cost
 * the round's size each time (10,000 nodes: 10^8 members read).
 */
static struct {
	char		*rdzv_id, *master_addr;
	uint64_t	 generation;
	bool		 found;
	int64_t		 world_size, master_port, restart_count;
	size_t		 n;
	int64_t		(*m)[4];	/* node_id, group_rank, base_rank, nproc */
} dbr;

static void
db_round_forget(void)
{
	free(dbr.rdzv_id);
	free(dbr.master_addr);
	free(dbr.m);
	memset(&dbr, 0, sizeof(dbr));
}

static int
cmp_node_id(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

/* "SELECT ... FROM t" of round |generation| of job |rdzv_id|, prepared. */
static sqlite3_stmt *
round_query(sqlite3 *db, const char *select, const char *rdzv_id,
    uint64_t generation)
{
	sqlite3_stmt	*st;
	char		 sql[256];

	snprintf(sql, sizeof(sql), "%s WHERE rdzv_id = ?1 AND generation = ?2",
	    select);
	CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, rdzv_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)generation);
	return st;
}

static void
db_round_read(sqlite3 *db, const char *rdzv_id, uint64_t generation)
{
	sqlite3_stmt	*st;
	size_t		 cap = 0;

	db_round_forget();
	CHECK((dbr.rdzv_id = strdup(rdzv_id)) != NULL);
	dbr.generation = generation;
	st = round_query(db, "SELECT world_size, master_addr, master_port, "
	    "restart_count FROM rounds", rdzv_id, generation);
	if (sqlite3_step(st) == SQLITE_ROW) {
		dbr.found = true;
		dbr.world_size = sqlite3_column_int64(st, 0);
		CHECK((dbr.master_addr = strdup((const char *)
		    sqlite3_column_text(st, 1))) != NULL);
		dbr.master_port = sqlite3_column_int64(st, 2);
		dbr.restart_count = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	if (!dbr.found)
		return;
	st = round_query(db, "SELECT node_id, group_rank, base_rank, nproc "
	    "FROM assignments", rdzv_id, generation);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (dbr.n == cap) {
			cap = cap == 0 ? 64 : cap * 2;
			CHECK((dbr.m = realloc(dbr.m, cap * sizeof(*dbr.m))) !=
			    NULL);
		}
		for (int k = 0; k < 4; k++)
			dbr.m[dbr.n][k] = sqlite3_column_int64(st, k);
		dbr.n++;
	}
	sqlite3_finalize(st);
	qsort(dbr.m, dbr.n, sizeof(*dbr.m), cmp_node_id);
}

void
check_sent(sqlite3 *db, const struct core_node *n,
    const struct core_assignment *a)
{
	int64_t		 key = (int64_t)n->node_id, (*m)[4] = NULL;
	bool		 ok;

	assignments_sent++;
	if (dbr.rdzv_id == NULL || strcmp(dbr.rdzv_id, n->job->rdzv_id) != 0 ||
	    dbr.generation != a->generation)
		db_round_read(db, n->job->rdzv_id, a->generation);
	if (dbr.found)
		m = bsearch(&key, dbr.m, dbr.n, sizeof(*dbr.m), cmp_node_id);
	ok = m != NULL && dbr.world_size == a->world_size &&
	    strcmp(dbr.master_addr, a->master_addr) == 0 &&
	    dbr.master_port == a->master_port &&
	    dbr.restart_count == a->restart_count &&
	    (*m)[1] == a->group_rank && (*m)[2] == a->base_rank &&
	    (*m)[3] == a->local_world_size;
	if (!ok)
		fprintf(stderr, "  job %s generation %llu: node %llu is sent "
		    "an assignment the database does not hold\n",
		    n->job->rdzv_id, (unsigned long long)a->generation,
		    (unsigned long long)n->node_id);
	CHECK(ok);
}

void
turn_send(bool committed)
{
	struct core_node	*n;
	struct core_msg		 m;
	sqlite3			*db = NULL;

	if (committed && !TAILQ_EMPTY(&C->outbox))
		CHECK_INT(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY,
		    NULL), SQLITE_OK);
	while (core_outbox_pop(C, &n, &m)) {
		if (db != NULL && m.kind == CORE_MSG_ASSIGNMENT)
			check_sent(db, n, &m.u.assignment);
	}
	/* The next turn may hold a new database under the same names. */
	db_round_forget();
	sqlite3_close(db);
	core_changes_clear(C);
}

void
turn(void)
{
	char	e[512];
	bool	committed;

	if (core_check(C, e, sizeof(e)) != 0) {
		fprintf(stderr, "  invariant broken: %s\n", e);
		CHECK(0);
	}
	committed = store_commit(S, C, err, sizeof(err)) == 0;
	if (!committed) {
		fprintf(stderr, "  commit: %s\n", err);
		CHECK(0);
	}
	if (S2 != NULL && store_commit(S2, C, err, sizeof(err)) != 0) {
		fprintf(stderr, "  commit to the SQLite copy: %s\n", err);
		CHECK(0);
	}
	turn_send(committed);
}

struct core_node *
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

struct core_node *
join(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	 r = req(id, host, nproc, min, max);
	struct core_node	*n = join_only(&r);

	turn();
	return n;
}

void
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

long long
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

int
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

char *
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

struct core *
reload(void)
{
	struct core	*b = core_new(NULL);

	store_close(S);
	S = NULL;
	if (store_open(spec, &S, err, sizeof(err)) != 0 ||
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

void
compare_job(const struct core_job *a, const struct core_job *b)
{
	const struct core_event	*x, *y;
	uint32_t		 i;

	CHECK_STR(a->owner, b->owner);
	CHECK_INT(a->n_refused, b->n_refused);
	CHECK_INT(a->refusal_failed, b->refusal_failed);
	/* Field by field: the struct has padding. */
	CHECK_INT(a->settings.min_nodes, b->settings.min_nodes);
	CHECK_INT(a->settings.max_nodes, b->settings.max_nodes);
	CHECK_INT(a->settings.last_call_timeout_ms,
	    b->settings.last_call_timeout_ms);
	CHECK_INT(a->settings.join_timeout_ms, b->settings.join_timeout_ms);
	CHECK_INT(a->settings.max_restarts, b->settings.max_restarts);
	CHECK_INT(a->settings.lease_ttl_ms, b->settings.lease_ttl_ms);
	CHECK_INT(a->settings.reconnect_grace_ms,
	    b->settings.reconnect_grace_ms);
	CHECK_INT(a->settings.has_rejoin_timeout,
	    b->settings.has_rejoin_timeout);
	CHECK_INT(a->settings.rejoin_timeout_ms, b->settings.rejoin_timeout_ms);
	CHECK_INT(a->settings.hang_timeout_ms, b->settings.hang_timeout_ms);
	CHECK_INT(a->settings.rank_policy, b->settings.rank_policy);
	CHECK_INT(a->settings.restart, b->settings.restart);
	CHECK_STR(a->settings.preload, b->settings.preload);
	CHECK_STR(a->rejoin_lost, b->rejoin_lost);
	CHECK_INT(a->state, b->state);
	CHECK_STR(a->reason, b->reason);
	CHECK_INT(a->held_failure, b->held_failure);
	CHECK_STR(a->held_reason, b->held_reason);
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

void
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
	CHECK_INT(a->port_offer, b->port_offer);
	/* Issue 42: what a restart used to forget. */
	CHECK_INT(a->prev_rank, b->prev_rank);
	CHECK_INT(a->has_token, b->has_token);
	CHECK_INT(a->has_step, b->has_step);
	if (a->has_step && b->has_step) {
		CHECK(a->step == b->step);
		CHECK(a->step_gen == b->step_gen);
		CHECK(a->step_wall_ms == b->step_wall_ms);
	}
	CHECK(a->last_seen_ms == b->last_seen_ms);
	if (a->has_token && b->has_token)
		CHECK_MEM(a->join_token, b->join_token, CORE_TOKEN_LEN);
	CHECK_INT(a->n_gpus, b->n_gpus);
	if (a->n_gpus == b->n_gpus && a->n_gpus > 0)
		CHECK_MEM(a->gpus, b->gpus, a->n_gpus * sizeof(*a->gpus));
	CHECK_INT(a->reason == NULL, b->reason == NULL);
	if (a->reason != NULL && b->reason != NULL)
		CHECK_STR(a->reason, b->reason);
}

void
compare_cores(const struct core *a, const struct core *b)
{
	const struct core_job	*j, *k;
	const struct core_node	*n, *m;

	CHECK_INT(a->n_jobs, b->n_jobs);
	CHECK_INT(a->by_node.n, b->by_node.n);
	/* Kept refusals (issue 42), in order; their time is left as is. */
	CHECK_INT(a->n_refusals, b->n_refusals);
	for (size_t i = 0; i < a->n_refusals && i < b->n_refusals; i++) {
		CHECK_STR(a->refusals[i].rdzv_id, b->refusals[i].rdzv_id);
		CHECK_STR(a->refusals[i].why, b->refusals[i].why);
		CHECK_INT(a->refusals[i].allocation_nodes,
		    b->refusals[i].allocation_nodes);
	}
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

void
rmtree(const char *path)
{
	char	cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

int
run_tests(const char *prog, const struct test *t, size_t n, int argc,
    char **argv)
{
	const char	*tmp = getenv("TMPDIR");
	size_t		 i;
	int		 before;

	test_etcd = getenv("RDZV_TEST_ETCD");
	if (test_etcd != NULL && *test_etcd == '\0')
		test_etcd = NULL;
	if (test_etcd != NULL)
		printf("# on etcd %s (and an SQLite copy)\n", test_etcd);
	snprintf(dir, sizeof(dir), "%s/%s.XXXXXX",
	    tmp != NULL && strlen(tmp) < 30 ? tmp : "/tmp", prog);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (argc > 1 && strcmp(argv[1], t[i].name) != 0)
			continue;
		before = check_failures;
		session_ctr = 0;
		t[i].fn();
		printf("%s %s\n", check_failures == before ? "PASS" : "FAIL",
		    t[i].name);
	}
	rmtree(dir);
	return check_done(prog);
}
