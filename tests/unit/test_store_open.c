/*
 * Unit tests of the SQLite store (SPEC §9), what it refuses: files that
 * are not rdzv databases or come from a newer rdzvd (left untouched), a
 * second rdzvd on the same file, a generation recorded twice, a full
 * disk; and the settings a new database gets.
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
	CHECK_CONTAINS(err, "version 6 that this rdzvd knows");
	after = slurp(dbpath, &na);
	CHECK(after != NULL && na == nb && memcmp(before, after, nb) == 0);
	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	CHECK(access(wal, F_OK) != 0);
	free(before);
	free(after);
}

/*
 * A database written by the first schema (made here by undoing migrations
 * 5, 4, 3 and 2 on a fresh one) is migrated in place and keeps its jobs; a
 * job's rejoin_timeout becomes its join timeout, the default.
 */
static void
test_migrate_v1(void)
{
	struct core	*L;

	setup("v1.db");
	join("old", "h1", 2, 1, 1);
	store_close(S);
	S = NULL;
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
	CHECK_INT(q("PRAGMA user_version"), 6);
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
	CHECK_INT(q("PRAGMA user_version"), 6);
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
	CHECK_INT(q("PRAGMA user_version"), 6);
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

int
main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "open_settings", test_open_settings },
		{ "newer_schema", test_newer_schema },
		{ "migrate_v1", test_migrate_v1 },
		{ "garbage", test_garbage },
		{ "lock", test_lock },
		{ "duplicate_generation", test_duplicate_generation },
		{ "commit_failure", test_commit_failure },
		{ "load_refuses_rounds_ahead", test_load_refuses_rounds_ahead },
	};

	return run_tests("test_store_open", tests,
	    sizeof(tests) / sizeof(tests[0]), argc, argv);
}
