/*
 * Opening the store: the lock that keeps a second rdzvd off the database,
 * the checks that refuse a file rdzvd must not touch (not SQLite, damaged,
 * someone else's, or from a newer rdzvd), the durability settings, and
 * the schema migrations. The statements it prepares last are in
 * store_sqlite_stmt.c.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "store_sqlite.h"
#include "errf.h"

/*
 * Schema migrations: entry i takes user_version i to i + 1, and each runs
 * in its own transaction with the version bump. A new version is one more
 * string.
 * Node and job states are stored by name so that an operator's sqlite3
 * session reads them; the code maps them back with the core's names.
 */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  value NOT NULL);"
	"CREATE TABLE jobs ("
	"  rdzv_id TEXT PRIMARY KEY NOT NULL,"
	"  owner TEXT NOT NULL,"
	"  min_nodes INTEGER NOT NULL,"
	"  max_nodes INTEGER NOT NULL,"
	"  last_call_timeout_ms INTEGER NOT NULL,"
	"  join_timeout_ms INTEGER NOT NULL,"
	"  max_restarts INTEGER NOT NULL,"
	"  lease_ttl_ms INTEGER NOT NULL,"
	"  reconnect_grace_ms INTEGER NOT NULL,"
	"  state TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  restart_count INTEGER NOT NULL,"
	"  attempt INTEGER NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  updated_ms INTEGER NOT NULL,"
	"  ended_ms INTEGER NOT NULL,"
	"  event_seq INTEGER NOT NULL,"
	"  last_call_left_ms INTEGER,"
	"  join_left_ms INTEGER);"
	"CREATE TABLE nodes ("
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
	"  reason TEXT);"
	"CREATE INDEX nodes_by_job ON nodes (rdzv_id);"
	"CREATE TABLE events ("
	"  rdzv_id TEXT NOT NULL REFERENCES jobs (rdzv_id) ON DELETE CASCADE,"
	"  seq INTEGER NOT NULL,"
	"  wall_ms INTEGER NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  message TEXT NOT NULL,"
	"  PRIMARY KEY (rdzv_id, seq)) WITHOUT ROWID;"
	"CREATE TABLE rounds ("
	"  rdzv_id TEXT NOT NULL REFERENCES jobs (rdzv_id) ON DELETE CASCADE,"
	"  generation INTEGER NOT NULL,"
	"  world_size INTEGER NOT NULL,"
	"  master_addr TEXT NOT NULL,"
	"  master_port INTEGER NOT NULL,"
	"  restart_count INTEGER NOT NULL,"
	"  formed_ms INTEGER NOT NULL,"
	"  PRIMARY KEY (rdzv_id, generation)) WITHOUT ROWID;"
	"CREATE TABLE assignments ("
	"  rdzv_id TEXT NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  node_id INTEGER NOT NULL,"
	"  group_rank INTEGER NOT NULL,"
	"  base_rank INTEGER NOT NULL,"
	"  nproc INTEGER NOT NULL,"
	"  PRIMARY KEY (rdzv_id, generation, node_id),"
	"  FOREIGN KEY (rdzv_id, generation)"
	"    REFERENCES rounds (rdzv_id, generation) ON DELETE CASCADE)"
	"  WITHOUT ROWID;",
	/* 1 -> 2: each GPU's result; the master port offered for the next
	 * round. */
	"ALTER TABLE nodes ADD COLUMN port_offer INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE gpus ("
	"  node_id INTEGER NOT NULL REFERENCES nodes (node_id) "
	"    ON DELETE CASCADE,"
	"  device INTEGER NOT NULL,"
	"  name TEXT NOT NULL,"
	"  uuid TEXT NOT NULL,"
	"  ok INTEGER NOT NULL,"
	"  failed_step TEXT NOT NULL,"
	"  error TEXT NOT NULL,"
	"  total_mem INTEGER NOT NULL,"
	"  PRIMARY KEY (node_id, device)) WITHOUT ROWID;",
	/* 2 -> 3: a reported failure held for an away member (SPEC §4 rule
	 * 5); NULL when none is. */
	"ALTER TABLE jobs ADD COLUMN held_reason TEXT;",
	/* 3 -> 4: rule 13's rejoin_timeout (NULL in older rows: the join
	 * timeout, its default) and the loss an open round waits to replace
	 * (NULL when none). */
	("ALTER TABLE jobs ADD COLUMN rejoin_timeout_ms INTEGER;"
	"ALTER TABLE jobs ADD COLUMN rejoin_lost TEXT;"),
	/* 4 -> 5: the job's hang timeout (docs/HEALTH.md); 0: off, as older
	 * jobs had it. */
	"ALTER TABLE jobs ADD COLUMN hang_timeout_ms INTEGER NOT NULL "
	"DEFAULT 0;",
	/* 5 -> 6: host memory (docs/HEALTH.md): a record per host across
	 * jobs, its state by name, the crash times within the window as
	 * "MS,MS,...", and the latest GPU check per device. */
	("CREATE TABLE hosts ("
	"  name TEXT PRIMARY KEY NOT NULL,"
	"  state TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  since_ms INTEGER NOT NULL,"
	"  updated_ms INTEGER NOT NULL,"
	"  crashes INTEGER NOT NULL,"
	"  gpu_failures INTEGER NOT NULL,"
	"  crash_ms TEXT NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE host_gpus ("
	"  host TEXT NOT NULL REFERENCES hosts (name) ON DELETE CASCADE,"
	"  device INTEGER NOT NULL,"
	"  uuid TEXT NOT NULL,"
	"  ok INTEGER NOT NULL,"
	"  failed_step TEXT NOT NULL,"
	"  error TEXT NOT NULL,"
	"  PRIMARY KEY (host, device)) WITHOUT ROWID;"),
	/* 6 -> 7: cheaper rows per join (docs/STORE.md). A round's members
	 * move into its row, as JSON [node_id, group_rank, base_rank, nproc]
	 * by group rank, and the view assignments reads them as the table
	 * did. nodes lose the unique index on session_id (the core keeps
	 * sessions unique and refuses a duplicate at load), the index by job
	 * and the foreign key to jobs that needed it; events lose their
	 * foreign key, a lookup in jobs per row: rdzvd deletes a job's nodes
	 * (by node_id) and events itself. Run with foreign keys off, as
	 * SQLite's way of rebuilding a table asks: dropping the old nodes
	 * must not delete the gpus that refer to them. */
	("ALTER TABLE rounds ADD COLUMN members TEXT NOT NULL DEFAULT '[]';"
	"UPDATE rounds SET members = (SELECT json_group_array(json_array("
	"  node_id, group_rank, base_rank, nproc)) FROM (SELECT * FROM "
	"  assignments a WHERE a.rdzv_id = rounds.rdzv_id AND "
	"  a.generation = rounds.generation ORDER BY group_rank));"
	"DROP TABLE assignments;"
	"CREATE VIEW assignments (rdzv_id, generation, node_id, group_rank,"
	"  base_rank, nproc) AS SELECT r.rdzv_id, r.generation,"
	"  json_extract(m.value, '$[0]'), json_extract(m.value, '$[1]'),"
	"  json_extract(m.value, '$[2]'), json_extract(m.value, '$[3]')"
	"  FROM rounds r, json_each(r.members) m;"
	"CREATE TABLE nodes_7 ("
	"  node_id INTEGER PRIMARY KEY,"
	"  rdzv_id TEXT NOT NULL,"
	"  session_id BLOB NOT NULL,"
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
	"  port_offer INTEGER NOT NULL);"
	"INSERT INTO nodes_7 (" NODE_COLS_7 ") SELECT " NODE_COLS_7 " FROM "
	"  nodes;"
	"DROP TABLE nodes;"
	"ALTER TABLE nodes_7 RENAME TO nodes;"
	"CREATE TABLE events_7 ("
	"  rdzv_id TEXT NOT NULL,"
	"  seq INTEGER NOT NULL,"
	"  wall_ms INTEGER NOT NULL,"
	"  generation INTEGER NOT NULL,"
	"  kind TEXT NOT NULL,"
	"  message TEXT NOT NULL,"
	"  PRIMARY KEY (rdzv_id, seq)) WITHOUT ROWID;"
	"INSERT INTO events_7 (rdzv_id, " EVENT_COLS ") SELECT rdzv_id, "
	"  " EVENT_COLS " FROM events;"
	"DROP TABLE events;"
	"ALTER TABLE events_7 RENAME TO events;"),
	/* 7 -> 8: the rank policy and restart mode (SPEC §4 rules 15, 16;
	 * docs/RECOVERY.md); older jobs: ordered (1), process (1). */
	("ALTER TABLE jobs ADD COLUMN rank_policy INTEGER NOT NULL DEFAULT 1;"
	"ALTER TABLE jobs ADD COLUMN restart INTEGER NOT NULL DEFAULT 1;"),
	/* 8 -> 9: what a restart forgot (issue 42; docs/STORE.md): a node's
	 * group rank in its last round, which rank-policy stable gives it
	 * again (-1: none, as older rows had it), and the token of the join
	 * that made it, so that a join sent again after a restart finds it
	 * (NULL: none). */
	("ALTER TABLE nodes ADD COLUMN prev_rank INTEGER NOT NULL DEFAULT -1;"
	"ALTER TABLE nodes ADD COLUMN join_token BLOB;"
	/* ... a node's last step (docs/HEALTH.md; NULL: none) and when it
	 * was last seen, written by the progress checkpoint; */
	"ALTER TABLE nodes ADD COLUMN step INTEGER;"
	"ALTER TABLE nodes ADD COLUMN step_gen INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN step_wall_ms INTEGER NOT NULL "
	"  DEFAULT 0;"
	"ALTER TABLE nodes ADD COLUMN last_seen_ms INTEGER NOT NULL "
	"  DEFAULT 0;"
	/* ... the joins of a job's attempt refused for a quarantined host,
	 * and whether that failed it; and the refusals kept for jobs that
	 * had no node yet, with the time they had left. */
	"ALTER TABLE jobs ADD COLUMN n_refused INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN refusal_failed INTEGER NOT NULL "
	"  DEFAULT 0;"
	/* ... and how each host's latest on-quarantine run ended (0: none;
	 * rdzv.v1.HookRunState's numbers otherwise). */
	"ALTER TABLE hosts ADD COLUMN hook_state INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE hosts ADD COLUMN hook_code INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE hosts ADD COLUMN hook_sig INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE hosts ADD COLUMN hook_output TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE hosts ADD COLUMN hook_reason TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE hosts ADD COLUMN hook_started_ms INTEGER NOT NULL "
	"  DEFAULT 0;"
	"ALTER TABLE hosts ADD COLUMN hook_ended_ms INTEGER NOT NULL "
	"  DEFAULT 0;"
	"CREATE TABLE refusals ("
	"  rdzv_id TEXT NOT NULL,"
	"  identity TEXT NOT NULL,"
	"  why TEXT NOT NULL,"
	"  allocation_nodes INTEGER NOT NULL,"
	"  attempt INTEGER NOT NULL,"
	"  left_ms INTEGER NOT NULL);"),
	/* 9 -> 10: a job's preload (issue 45; docs/AGENT.md "Warm starts");
	 * older jobs: none. */
	("ALTER TABLE jobs ADD COLUMN preload TEXT NOT NULL DEFAULT '';"),
};
#define STORE_SCHEMA	((int)(sizeof(migrations) / sizeof(migrations[0])))

/* --------------------------------------------------------------- opening */

/* Creates the missing directories above path, 0700 each. */
static int
make_parents(const char *path, char *err, size_t errlen)
{
	struct stat	 sb;
	char		*dir, *p;
	int		 rc = 0;

	if ((dir = strdup(path)) == NULL)
		return errf(-1, err, errlen, "%s: out of memory", path);
	for (p = strchr(dir + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (stat(dir, &sb) != 0) {
			if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
				rc = errf(-1, err, errlen,
				    "database %s: cannot "
				    "create directory %s: %s", path, dir,
				    strerror(errno));
				break;
			}
		} else if (!S_ISDIR(sb.st_mode)) {
			rc = errf(-1, err, errlen, "database %s: %s is not a "
			    "directory", path, dir);
			break;
		}
		*p = '/';
	}
	free(dir);
	return rc;
}

/*
 * One rdzvd per database: an open-file-description lock on "<path>.lock"
 * conflicts with any other holder, even in the same process, and goes away
 * with the process however it dies. The holder's pid in the file makes the
 * refusal say who. The database itself is not locked, so operators can
 * still read it with the sqlite3 CLI while rdzvd runs.
 */
static int
lock_take(struct sqlstore *s, char *err, size_t errlen)
{
	struct flock	 fl;
	char		*lockpath, pid[32];
	ssize_t		 n;
	int		 fd, saved;

	if (asprintf(&lockpath, "%s.lock", s->path) == -1)
		return errf(-1, err, errlen, "%s: out of memory", s->path);
	fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1) {
		saved = errno;
		errf(-1, err, errlen, "database %s: cannot open its lock file "
		    "%s: %s", s->path, lockpath, strerror(saved));
		free(lockpath);
		return -1;
	}
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
	if (fcntl(fd, F_OFD_SETLK, &fl) == -1) {
#else
	if (fcntl(fd, F_SETLK, &fl) == -1) {
#endif
		saved = errno;
		if (saved == EAGAIN || saved == EACCES) {
			n = pread(fd, pid, sizeof(pid) - 1, 0);
			pid[n > 0 ? n : 0] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
			errf(-1, err, errlen,
			    "database %s is in use by another "
			    "rdzvd (pid %s holds %s); stop it or use another "
			    "--db", s->path, pid[0] != '\0' ? pid : "unknown",
			    lockpath);
		} else
			errf(-1, err, errlen, "database %s: cannot lock %s: %s",
			    s->path, lockpath, strerror(saved));
		close(fd);
		free(lockpath);
		return -1;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		saved = errno;
		errf(-1, err, errlen,
		    "database %s: cannot write %s: %s", s->path,
		    lockpath, strerror(saved));
		close(fd);
		free(lockpath);
		return -1;
	}
	free(lockpath);
	s->lock_fd = fd;
	return 0;
}

/* A PRAGMA or query that yields one integer. */
static int
query_int(struct sqlstore *s, const char *sql, int64_t *out)
{
	sqlite3_stmt	*st;
	int		 rc;

	if ((rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK) {
		sqlite3_finalize(st);	/* keeps the step's error message */
		return rc;
	}
	return sqlite3_finalize(st);
}

/* A PRAGMA that yields one text, copied into buf. */
static int
query_text(struct sqlstore *s, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt		*st;
	const unsigned char	*t;
	int			 rc;

	if ((rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		t = sqlite3_column_text(st, 0);
		snprintf(buf, len, "%s", t != NULL ? (const char *)t : "");
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK) {
		sqlite3_finalize(st);
		return rc;
	}
	return sqlite3_finalize(st);
}

/*
 * Reads the schema version and checks the file before anything writes to
 * it: a file that is not SQLite, is damaged, belongs to another program or
 * comes from a newer rdzvd is refused untouched.
 */
static int
check_file(struct sqlstore *s, int64_t *version, char *err, size_t errlen)
{
	char	ok[1024], *cut;
	int64_t	tables = 0;

	if (query_int(s, "PRAGMA user_version", version) != SQLITE_OK)
		return errf(-1, err, errlen, "database %s cannot be read: %s; "
		    "rdzvd never overwrites a database: move it aside or use "
		    "another --db", s->path, sqlite3_errmsg(s->db));
	if (*version > STORE_SCHEMA)
		return errf(-1, err, errlen, "database %s has schema version "
		    "%lld, newer than version %d that this rdzvd knows; run "
		    "the newer rdzvd that wrote it, or use another --db",
		    s->path, (long long)*version, STORE_SCHEMA);
	if (*version < 0)
		return errf(-1, err, errlen, "database %s has schema version "
		    "%lld, which no rdzvd writes", s->path,
		    (long long)*version);
	if (*version == 0) {
		if (query_int(s, "SELECT count(*) FROM sqlite_master",
		    &tables) != SQLITE_OK)
			return errf(-1, err, errlen,
			    "database %s cannot be read: "
			    "%s", s->path, sqlite3_errmsg(s->db));
		if (tables > 0)
			return errf(-1, err, errlen,
			    "database %s holds tables but "
			    "no rdzv schema version: it belongs to something "
			    "else; use another --db", s->path);
	}
	if (query_text(s, "PRAGMA quick_check", ok, sizeof(ok)) != SQLITE_OK)
		return errf(-1, err, errlen,
		    "database %s cannot be checked: %s",
		    s->path, sqlite3_errmsg(s->db));
	/* A long report is cut between words, not inside one. */
	if (strlen(ok) == sizeof(ok) - 1 && (cut = strrchr(ok, ' ')) != NULL)
		snprintf(cut, sizeof(ok) - (size_t)(cut - ok), " ...");
	if (strcmp(ok, "ok") != 0)
		return errf(-1, err, errlen,
		    "database %s is damaged (%s); restore "
		    "it from a backup or move it aside", s->path, ok);
	return 0;
}

/* WAL and FULL, each checked, as a PRAGMA can silently no-op. */
static int
set_pragmas(struct sqlstore *s, char *err, size_t errlen)
{
	char	mode[32];
	int64_t	v = 0;

	if (sqlite3_busy_timeout(s->db, 5000) != SQLITE_OK)
		return sqlstore_fail(s, err, errlen, "busy timeout");
	if (query_text(s, "PRAGMA journal_mode = WAL", mode,
	    sizeof(mode)) != SQLITE_OK)
		return errf(-1, err, errlen,
		    "database %s: cannot enable WAL: %s",
		    s->path, sqlite3_errmsg(s->db));
	if (strcmp(mode, "wal") != 0)
		return errf(-1, err, errlen,
		    "database %s: journal mode is %s, not "
		    "wal; is it on a file system without shared memory (NFS)?",
		    s->path, mode);
	if (sqlite3_exec(s->db, "PRAGMA synchronous = FULL", NULL, NULL,
	    NULL) != SQLITE_OK)
		return errf(-1, err, errlen, "database %s: %s", s->path,
		    sqlite3_errmsg(s->db));
	if (query_int(s, "PRAGMA synchronous", &v) != SQLITE_OK || v != 2)
		return errf(-1, err, errlen,
		    "database %s: synchronous=FULL did "
		    "not take", s->path);
	return 0;
}

/* After the migrations, which rebuild tables with foreign keys off. */
static int
foreign_keys_on(struct sqlstore *s, char *err, size_t errlen)
{
	int64_t	v = 0;

	if (sqlite3_exec(s->db, "PRAGMA foreign_keys = ON", NULL, NULL,
	    NULL) != SQLITE_OK)
		return errf(-1, err, errlen, "database %s: %s", s->path,
		    sqlite3_errmsg(s->db));
	if (query_int(s, "PRAGMA foreign_keys", &v) != SQLITE_OK || v != 1)
		return errf(-1, err, errlen, "database %s: this SQLite has no "
		    "foreign key support", s->path);
	return 0;
}

/* Applies migrations[from..], each with its version bump, atomically. */
static int
migrate(struct sqlstore *s, int64_t from, char *err, size_t errlen)
{
	char	sql[64];
	int64_t	v = 0;
	int	i;

	for (i = (int)from; i < STORE_SCHEMA; i++) {
		if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL,
		    NULL) != SQLITE_OK)
			return errf(-1, err, errlen,
			    "database %s: migrating to "
			    "schema %d: %s", s->path, i + 1,
			    sqlite3_errmsg(s->db));
		/* Another process may have migrated since we looked. */
		if (query_int(s, "PRAGMA user_version", &v) != SQLITE_OK)
			goto bad;
		if (v > i) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			return errf(-1, err, errlen,
			    "database %s: schema changed "
			    "underneath (version %lld)", s->path,
			    (long long)v);
		}
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", i + 1);
		if (sqlite3_exec(s->db, migrations[i], NULL, NULL,
		    NULL) != SQLITE_OK ||
		    sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(s->db, "COMMIT", NULL, NULL,
		    NULL) != SQLITE_OK)
			goto bad;
	}
	return 0;

bad:
	errf(-1, err, errlen,
	    "database %s: migrating to schema %d: %s", s->path,
	    i + 1, sqlite3_errmsg(s->db));
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/*
 * SQLite in WAL mode creates the database's -wal and -shm files beside it,
 * even to read: in a directory rdzvd may not write, every read fails with
 * "unable to open database file", which says nothing of the cause. Asked
 * here (for the effective uid), the cause is named.
 */
static int
dir_writable(const char *path, char *err, size_t errlen)
{
	char	dir[4096], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0)
		return 0;
	return errf(-1, err, errlen, "database %s: its directory %s is not "
	    "writable by rdzvd (uid %u): %s; SQLite keeps the database's "
	    "write-ahead log and shared memory (%s-wal, %s-shm) beside it. "
	    "Make the directory writable by rdzvd's user, or use another --db",
	    path, dir, (unsigned)geteuid(), strerror(errno), path, path);
}

int
sqlstore_open(const char *path, struct sqlstore **out, char *err, size_t errlen)
{
	struct sqlstore	*s;
	int64_t		 version, next = 1;
	int		 fd;

	*out = NULL;
	if (path == NULL || *path == '\0')
		return errf(-1, err, errlen, "no database path");
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(path)) == NULL) {
		free(s);
		return errf(-1, err, errlen, "%s: out of memory", path);
	}
	s->lock_fd = -1;
	/* SQLite counts every allocation under a global mutex unless told
	 * not to before its first use in the process; rdzvd never reads the
	 * counts. Later calls are refused, harmlessly. */
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (make_parents(path, err, errlen) != 0 ||
	    lock_take(s, err, errlen) != 0)
		goto bad;

	/* A new database is created here, private: it holds session tokens. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd != -1)
		close(fd);
	else if (errno != EEXIST) {
		errf(-1, err, errlen, "cannot create database %s: %s", path,
		    strerror(errno));
		goto bad;
	}
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		errf(-1, err, errlen, "cannot open database %s: %s%s%s", path,
		    s->db != NULL ? sqlite3_errmsg(s->db) : "out of memory",
		    s->db != NULL && sqlite3_system_errno(s->db) != 0 ? ": " :
		    "", s->db != NULL && sqlite3_system_errno(s->db) != 0 ?
		    strerror(sqlite3_system_errno(s->db)) : "");
		goto bad;
	}
	sqlite3_extended_result_codes(s->db, 1);
	/* SQLite opens a file it may not write read-only, without a word:
	 * rdzvd would report ready and die at its first commit. */
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		errf(-1, err, errlen, "database %s is read-only for rdzvd "
		    "(uid %u): rdzvd writes every change before it answers; "
		    "make the file and its directory writable by rdzvd's user, "
		    "or use another --db", path, (unsigned)geteuid());
		goto bad;
	}
	if (dir_writable(path, err, errlen) != 0 ||
	    check_file(s, &version, err, errlen) != 0 ||
	    set_pragmas(s, err, errlen) != 0 ||
	    migrate(s, version, err, errlen) != 0 ||
	    foreign_keys_on(s, err, errlen) != 0 ||
	    sqlstore_prepare_all(s, err, errlen) != 0)
		goto bad;
	if (query_int(s, "SELECT coalesce((SELECT value FROM meta WHERE "
	    "key = 'next_node_id'), 1)", &next) != SQLITE_OK) {
		errf(-1, err, errlen, "database %s: reading meta: %s", path,
		    sqlite3_errmsg(s->db));
		goto bad;
	}
	s->next_node_id = (uint64_t)next;
	*out = s;
	return 0;

bad:
	sqlstore_close(s);
	return -1;
}

void
sqlstore_close(struct sqlstore *s)
{
	int	i;

	if (s == NULL)
		return;
	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	/* Checkpoints the WAL into the database and removes it. */
	if (s->db != NULL)
		sqlite3_close(s->db);
	if (s->lock_fd != -1)
		close(s->lock_fd);
	free(s->buf);
	free(s->path);
	free(s);
}

uint64_t
sqlstore_transactions(const struct sqlstore *s)
{
	return __atomic_load_n(&s->transactions, __ATOMIC_RELAXED);
}

const char *
sqlstore_path(const struct sqlstore *s)
{
	return s->path;
}

