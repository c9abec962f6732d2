/*
 * Unit tests of the SQLite store (SPEC §9), what it refuses: files that
 * are not rdzv databases or come from a newer rdzvd (left untouched), a
 * second rdzvd on the same file, a generation recorded twice, a full
 * disk; the settings a new database gets; and older schemas migrated.
 */
#include "store_harness.h"

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
	    "1, 0, 0, '[]')"), 0);
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
	CHECK_INT(sqlite3_exec(sqlite_db(), "PRAGMA max_page_count = 12", NULL,
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
	CHECK_CONTAINS(err, "version 10 that this rdzvd knows");
	after = slurp(dbpath, &na);
	CHECK(after != NULL && na == nb && memcmp(before, after, nb) == 0);
	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	CHECK(access(wal, F_OK) != 0);
	free(before);
	free(after);
}

/*
 * Schema 7 taken back to 6, as rdzvd 6 wrote it: the assignments table
 * (filled from the view), nodes with their unique session, index by job
 * and foreign key, events with theirs, rounds without members. Foreign
 * keys are off on this connection (SQLite's default), so rebuilding nodes
 * keeps the gpus that refer to them.
 */
/* Schema 10 back to 9: a job's preload goes. */
static const char undo_v10[] =
	"BEGIN;"
	"ALTER TABLE jobs DROP COLUMN preload;"
	"PRAGMA user_version = 9;"
	"COMMIT;";

/* Schema 9 back to 8: a node's previous rank and join token go. */
static const char undo_v9[] =
	"BEGIN;"
	"ALTER TABLE nodes DROP COLUMN prev_rank;"
	"ALTER TABLE nodes DROP COLUMN join_token;"
	"ALTER TABLE nodes DROP COLUMN step;"
	"ALTER TABLE nodes DROP COLUMN step_gen;"
	"ALTER TABLE nodes DROP COLUMN step_wall_ms;"
	"ALTER TABLE nodes DROP COLUMN last_seen_ms;"
	"ALTER TABLE jobs DROP COLUMN n_refused;"
	"ALTER TABLE jobs DROP COLUMN refusal_failed;"
	"DROP TABLE refusals;"
	"ALTER TABLE hosts DROP COLUMN hook_state;"
	"ALTER TABLE hosts DROP COLUMN hook_code;"
	"ALTER TABLE hosts DROP COLUMN hook_sig;"
	"ALTER TABLE hosts DROP COLUMN hook_output;"
	"ALTER TABLE hosts DROP COLUMN hook_reason;"
	"ALTER TABLE hosts DROP COLUMN hook_started_ms;"
	"ALTER TABLE hosts DROP COLUMN hook_ended_ms;"
	"PRAGMA user_version = 8;"
	"COMMIT;";

/* Schema 8 back to 7: the rank policy and restart mode go. */
static const char undo_v8[] =
	"BEGIN;"
	"ALTER TABLE jobs DROP COLUMN rank_policy;"
	"ALTER TABLE jobs DROP COLUMN restart;"
	"PRAGMA user_version = 7;"
	"COMMIT;";

static const char undo_v7[] =
	"BEGIN;"
	"CREATE TABLE assignments_6 ("
	"  rdzv_id TEXT NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  node_id INTEGER NOT NULL,"
	"  group_rank INTEGER NOT NULL,"
	"  base_rank INTEGER NOT NULL,"
	"  nproc INTEGER NOT NULL,"
	"  PRIMARY KEY (rdzv_id, generation, node_id),"
	"  FOREIGN KEY (rdzv_id, generation)"
	"    REFERENCES rounds (rdzv_id, generation) ON DELETE CASCADE)"
	"  WITHOUT ROWID;"
	"INSERT INTO assignments_6 SELECT * FROM assignments;"
	"DROP VIEW assignments;"
	"ALTER TABLE assignments_6 RENAME TO assignments;"
	"ALTER TABLE rounds DROP COLUMN members;"
	"CREATE TABLE nodes_6 ("
	"  node_id INTEGER PRIMARY KEY,"
	"  rdzv_id TEXT NOT NULL REFERENCES jobs (rdzv_id) ON DELETE CASCADE,"
	"  session_id BLOB NOT NULL UNIQUE,"
	"  hostname TEXT NOT NULL,"
	"  advertise_addr TEXT NOT NULL,"
	"  master_port INTEGER NOT NULL,"
	"  nproc INTEGER NOT NULL,"
	"  rank_hint INTEGER,"
	"  state TEXT NOT NULL,"
	"  group_rank INTEGER NOT NULL,"
	"  base_rank INTEGER NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  arrival INTEGER NOT NULL,"
	"  joined_ms INTEGER NOT NULL,"
	"  gpus_healthy INTEGER NOT NULL,"
	"  gpus_total INTEGER NOT NULL,"
	"  reason TEXT,"
	"  port_offer INTEGER NOT NULL DEFAULT 0);"
	"INSERT INTO nodes_6 SELECT * FROM nodes;"
	"DROP TABLE nodes;"
	"ALTER TABLE nodes_6 RENAME TO nodes;"
	"CREATE INDEX nodes_by_job ON nodes (rdzv_id);"
	"CREATE TABLE events_6 ("
	"  rdzv_id TEXT NOT NULL REFERENCES jobs (rdzv_id) ON DELETE CASCADE,"
	"  seq INTEGER NOT NULL,"
	"  wall_ms INTEGER NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  message TEXT NOT NULL,"
	"  PRIMARY KEY (rdzv_id, seq)) WITHOUT ROWID;"
	"INSERT INTO events_6 SELECT * FROM events;"
	"DROP TABLE events;"
	"ALTER TABLE events_6 RENAME TO events;"
	"PRAGMA user_version = 6;"
	"COMMIT;";

/* Runs SQL on the file through a connection of its own. */
static void
exec_file(const char *sql)
{
	sqlite3	*db;
	char	*msg = NULL;

	CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "  %s\n", msg);
		CHECK(0);
	}
	sqlite3_free(msg);
	sqlite3_close(db);
}

/* Every row of a query, "a|b|c;" each, as the sqlite3 CLI would list them. */
static char *
rows(const char *sql)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	char		*out = NULL;
	size_t		 len = 0;
	FILE		*f = open_memstream(&out, &len);
	int		 i;

	CHECK(f != NULL);
	CHECK_INT(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL),
	    SQLITE_OK);
	CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (i = 0; i < sqlite3_column_count(st); i++)
			fprintf(f, "%s%s", i > 0 ? "|" : "",
			    (const char *)sqlite3_column_text(st, i));
		fputc(';', f);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	fclose(f);
	return out;
}

/*
 * A database of schema 6 (made here by undoing migration 7 on one with
 * jobs, nodes with GPU results, rounds and events) is migrated in place:
 * the view assignments lists what the table held, row for row; nodes keep
 * their GPUs; the indexes and foreign keys that migration 7 drops are
 * gone; the core loads as it was written; and the migrated file takes new
 * joins, rounds and a deleted job as a new one does.
 */
static void
test_migrate_v6(void)
{
	static const struct core_gpu gpu = { .device = 0, .ok = true,
		.name = "A100", .uuid = "GPU-1", .total_mem = 1 << 30 };
	struct core_join	 r;
	struct core_node	*n[3];
	struct core		*L;
	char			*before, *after, *ev_before, *ev_after;
	int			 i;

	setup("v6.db");
	for (i = 0; i < 3; i++) {
		char	host[16];

		snprintf(host, sizeof(host), "g%d", i);
		r = req("six", host, (uint32_t)i + 1, 3, 3);
		r.gpus_total = r.gpus_healthy = 1;
		r.gpus = &gpu;
		r.n_gpus = 1;
		n[i] = join_only(&r);
		CHECK(n[i] != NULL);
	}
	turn();
	join("solo", "s1", 2, 1, 1);
	CHECK_INT(core_job_find(C, "six")->generation, 1);
	store_close(S);
	S = NULL;
	before = rows("SELECT * FROM assignments ORDER BY rdzv_id, "
	    "generation, group_rank");
	ev_before = rows("SELECT * FROM events ORDER BY rdzv_id, seq");
	CHECK(strstr(before, "six|1|") != NULL);
	exec_file(undo_v10);
	exec_file(undo_v9);
	exec_file(undo_v8);
	exec_file(undo_v7);
	CHECK_INT(q("PRAGMA user_version"), 6);
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
	    "AND name = 'assignments'"), 1);
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE name = "
	    "'nodes_by_job'"), 1);

	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK_INT(q("PRAGMA user_version"), 10);
	after = rows("SELECT * FROM assignments ORDER BY rdzv_id, "
	    "generation, group_rank");
	ev_after = rows("SELECT * FROM events ORDER BY rdzv_id, seq");
	CHECK_STR(after, before);
	CHECK_STR(ev_after, ev_before);
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE type = 'view' "
	    "AND name = 'assignments'"), 1);
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
	    "AND tbl_name IN ('nodes', 'events')"), 0);
	CHECK_INT(q("SELECT count(*) FROM pragma_foreign_key_list('nodes')"),
	    0);
	CHECK_INT(q("SELECT count(*) FROM pragma_foreign_key_list('events')"),
	    0);
	CHECK_INT(q("SELECT count(*) FROM gpus"), 3);
	CHECK_INT(q("SELECT count(*) FROM pragma_foreign_key_check"), 0);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	free(before);
	free(after);
	free(ev_before);
	free(ev_after);

	/* The migrated file goes on: a new job and its round, a job that
	 * ended deleted whole when its retention is over. */
	join("seven", "s7", 1, 1, 1);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = "
	    "'seven'"), 1);
	for (i = 0; i < 3; i++)
		report(core_node_find(C, n[i]->node_id),
		    CORE_OUTCOME_SUCCEEDED);
	tick(7ULL * 24 * 3600 * 1000 + 1000);
	CHECK(core_job_find(C, "six") == NULL);
	CHECK_INT(q("SELECT count(*) FROM nodes WHERE rdzv_id = 'six'"), 0);
	CHECK_INT(q("SELECT count(*) FROM events WHERE rdzv_id = 'six'"), 0);
	CHECK_INT(q("SELECT count(*) FROM assignments WHERE rdzv_id = 'six'"),
	    0);
	CHECK_INT(q("SELECT count(*) FROM gpus"), 0);
	teardown();
}

/*
 * A database of schema 9 (before issue 45) gets the preload column: its
 * jobs preload nothing, load as they were written, and a new job's
 * preload is written and read back.
 */
static void
test_migrate_v9(void)
{
	struct core_join	 r;
	struct core		*L;

	setup("v9.db");
	join("old", "h1", 2, 1, 1);
	store_close(S);
	S = NULL;
	exec_file(undo_v10);
	CHECK_INT(q("PRAGMA user_version"), 9);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK_INT(q("PRAGMA user_version"), 10);
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE rdzv_id = 'old' AND "
	    "preload = ''"), 1);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	r = req("warm", "h2", 1, 1, 1);
	r.preload = "torch";
	CHECK(join_only(&r) != NULL);
	turn();
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE rdzv_id = 'warm' AND "
	    "preload = 'torch'"), 1);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	teardown();
}

/*
 * A database written by the first schema (made here by undoing migrations
 * 7, 5, 4, 3 and 2 on a fresh one; 6 added tables only) is migrated in
 * place and keeps its jobs; a job's rejoin_timeout becomes its join
 * timeout, the default.
 */
static void
test_migrate_v1(void)
{
	struct core	*L;

	setup("v1.db");
	join("old", "h1", 2, 1, 1);
	store_close(S);
	S = NULL;
	exec_file(undo_v10);
	exec_file(undo_v9);
	exec_file(undo_v8);
	exec_file(undo_v7);
	{
		sqlite3	*db;

		CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
		CHECK_INT(sqlite3_exec(db, "DROP TABLE host_gpus; DROP TABLE "
		    "hosts; ALTER TABLE jobs DROP COLUMN hang_timeout_ms; "
		    "ALTER TABLE jobs DROP COLUMN rejoin_lost; "
		    "ALTER TABLE jobs DROP COLUMN "
		    "rejoin_timeout_ms; ALTER TABLE jobs DROP COLUMN "
		    "held_reason; DROP TABLE gpus; ALTER TABLE nodes "
		    "DROP COLUMN port_offer; PRAGMA user_version = 1", NULL,
		    NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
	}
	CHECK_INT(q("PRAGMA user_version"), 1);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK_INT(q("PRAGMA user_version"), 10);
	L = reload();
	compare_cores(C, L);
	core_free(L);
	CHECK_INT(q("SELECT port_offer FROM nodes WHERE hostname = 'h1'"), 0);
	CHECK_INT(q("SELECT count(*) FROM gpus"), 0);
	CHECK_INT(q("SELECT count(*) FROM jobs WHERE held_reason IS NULL"), 1);
	CHECK_INT(q("SELECT count(*) FROM hosts"), 0);
	teardown();
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
	CHECK_INT(sqlite3_prepare_v2(sqlite_db(), "PRAGMA journal_mode", -1, &st,
	    NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(mode, sizeof(mode), "%s",
		    (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	CHECK_STR(mode, "wal");
	CHECK_INT(sqlite3_prepare_v2(sqlite_db(), "PRAGMA synchronous", -1, &st,
	    NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	CHECK_INT(sqlite3_column_int(st, 0), 2);
	sqlite3_finalize(st);
	CHECK_INT(q("PRAGMA user_version"), 10);
	/* Also from outside, as the sqlite3 CLI would see it. */
	CHECK_INT(q("SELECT count(*) FROM sqlite_master WHERE name IN "
	    "('jobs', 'nodes', 'events', 'rounds', 'assignments', 'meta', "
	    "'gpus')"), 7);
	CHECK_STR(((struct sqlstore *)store_backend(S))->path,
	    store_path(S));
	teardown();
	/* An empty existing file is an empty database: it is set up. */
	fresh_path("empty.db");
	CHECK(close(open(dbpath, O_CREAT | O_WRONLY, 0600)) == 0);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	store_close(S);
	S = NULL;
	CHECK_INT(q("PRAGMA user_version"), 10);
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
	    "0, 0, '[]')"), 0);
	CHECK_INT(store_open(dbpath, &S, err, sizeof(err)), 0);
	CHECK_INT(store_load(S, L, NOW, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, dbpath);
	CHECK_CONTAINS(err, "job ah: round 7 is recorded but the job's "
	    "generation is 1");
	core_free(L);
	teardown();
}

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "open_settings", test_open_settings },
		{ "newer_schema", test_newer_schema },
		{ "migrate_v9", test_migrate_v9 },
		{ "migrate_v1", test_migrate_v1 },
		{ "migrate_v6", test_migrate_v6 },
		{ "garbage", test_garbage },
		{ "lock", test_lock },
		{ "duplicate_generation", test_duplicate_generation },
		{ "commit_failure", test_commit_failure },
		{ "load_refuses_rounds_ahead", test_load_refuses_rounds_ahead },
	};

	return run_tests("test_store_open", tests,
	    sizeof(tests) / sizeof(tests[0]), argc, argv);
}
