/*
 * Host records in SQLite (docs/STORE.md, "Hosts"): the hosts and
 * host_gpus tables that schema 5 adds. A record is written whole, in the
 * turn's transaction, when the core marks it dirty; hosts change rarely,
 * so the statements are prepared per use rather than kept.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_sqlite.h"

static const char host_put_sql[] =
    "INSERT INTO hosts (name, state, reason, since_ms, updated_ms, "
    "crashes, gpu_failures, crash_ms, hook_state, hook_code, hook_sig, "
    "hook_output, hook_reason, hook_started_ms, hook_ended_ms) VALUES "
    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) "
    "ON CONFLICT (name) DO UPDATE SET state = ?2, reason = ?3, "
    "since_ms = ?4, updated_ms = ?5, crashes = ?6, gpu_failures = ?7, "
    "crash_ms = ?8, hook_state = ?9, hook_code = ?10, hook_sig = ?11, "
    "hook_output = ?12, hook_reason = ?13, hook_started_ms = ?14, "
    "hook_ended_ms = ?15";
static const char host_gpus_del_sql[] =
    "DELETE FROM host_gpus WHERE host = ?1";
static const char host_gpu_put_sql[] =
    "INSERT INTO host_gpus (host, device, uuid, ok, failed_step, error) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/* The crash times within the window as "MS,MS,...". */
static void
crash_list(const struct host *h, char *buf, size_t len)
{
	size_t	off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < h->n_crash && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64,
		    i ? "," : "", h->crash_ms[i]);
}

static int
step(struct sqlstore *s, sqlite3_stmt *st, const char *what, char *err,
    size_t errlen)
{
	int	rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return sqlstore_fail(s, err, errlen, what);
	return 0;
}

static int
put_host(struct sqlstore *s, sqlite3_stmt **st, const struct host *h,
    char *err, size_t errlen)
{
	char	crashes[HOST_CRASHES_KEPT * 24];
	char	what[HOST_NAME_MAX_LEN + 32];
	int	ok = SQLITE_OK;

	snprintf(what, sizeof(what), "writing host %s", h->name);
	crash_list(h, crashes, sizeof(crashes));
	ok |= sqlite3_bind_text(st[0], 1, h->name, -1, SQLITE_STATIC);
	ok |= sqlite3_bind_text(st[0], 2, host_state_name(h->state), -1,
	    SQLITE_STATIC);
	ok |= sqlite3_bind_text(st[0], 3, h->reason, -1, SQLITE_STATIC);
	ok |= sqlite3_bind_int64(st[0], 4, h->since_ms);
	ok |= sqlite3_bind_int64(st[0], 5, h->updated_ms);
	ok |= sqlite3_bind_int64(st[0], 6, h->crashes);
	ok |= sqlite3_bind_int64(st[0], 7, h->gpu_failures);
	ok |= sqlite3_bind_text(st[0], 8, crashes, -1, SQLITE_TRANSIENT);
	ok |= sqlite3_bind_int64(st[0], 9, h->hook.state);
	ok |= sqlite3_bind_int64(st[0], 10, h->hook.code);
	ok |= sqlite3_bind_int64(st[0], 11, h->hook.sig);
	ok |= sqlite3_bind_text(st[0], 12, h->hook.output, -1, SQLITE_STATIC);
	ok |= sqlite3_bind_text(st[0], 13, h->hook.reason, -1, SQLITE_STATIC);
	ok |= sqlite3_bind_int64(st[0], 14, h->hook.started_ms);
	ok |= sqlite3_bind_int64(st[0], 15, h->hook.ended_ms);
	if (ok != SQLITE_OK)
		return sqlstore_fail(s, err, errlen, what);
	if (step(s, st[0], what, err, errlen) != 0)
		return -1;
	if (sqlite3_bind_text(st[1], 1, h->name, -1, SQLITE_STATIC) !=
	    SQLITE_OK || step(s, st[1], what, err, errlen) != 0)
		return -1;
	for (uint32_t i = 0; i < h->n_gpus; i++) {
		const struct core_gpu *g = &h->gpus[i];

		ok = sqlite3_bind_text(st[2], 1, h->name, -1, SQLITE_STATIC);
		ok |= sqlite3_bind_int64(st[2], 2, g->device);
		ok |= sqlite3_bind_text(st[2], 3, g->uuid, -1, SQLITE_STATIC);
		ok |= sqlite3_bind_int64(st[2], 4, g->ok);
		ok |= sqlite3_bind_text(st[2], 5, g->failed_step, -1,
		    SQLITE_STATIC);
		ok |= sqlite3_bind_text(st[2], 6, g->error, -1,
		    SQLITE_STATIC);
		if (ok != SQLITE_OK)
			return sqlstore_fail(s, err, errlen, what);
		if (step(s, st[2], what, err, errlen) != 0)
			return -1;
	}
	return 0;
}

int
sqlstore_put_hosts(struct sqlstore *s, const struct core *c, char *err,
    size_t errlen)
{
	const char *const	 sql[3] = { host_put_sql, host_gpus_del_sql,
				    host_gpu_put_sql };
	sqlite3_stmt		*st[3] = { NULL };
	const struct host	*h;
	int			 rc = 0;

	if (TAILQ_EMPTY(&c->hosts->dirty))
		return 0;
	for (int i = 0; i < 3 && rc == 0; i++)
		if (sqlite3_prepare_v2(s->db, sql[i], -1, &st[i], NULL) !=
		    SQLITE_OK)
			rc = sqlstore_fail(s, err, errlen, "writing hosts");
	TAILQ_FOREACH(h, &c->hosts->dirty, dirty_entry) {
		if (rc != 0 || (rc = put_host(s, st, h, err, errlen)) != 0)
			break;
	}
	for (int i = 0; i < 3; i++)
		sqlite3_finalize(st[i]);
	return rc;
}

static const char *
text(sqlite3_stmt *st, int i)
{
	const unsigned char	*t = sqlite3_column_text(st, i);
	return t != NULL ? (const char *)t : "";
}

static void
crash_parse(struct host *h, const char *s)
{
	char	*end;

	h->n_crash = 0;
	while (*s != '\0' && h->n_crash < HOST_CRASHES_KEPT) {
		long long v = strtoll(s, &end, 10);
		if (end == s)
			break;
		h->crash_ms[h->n_crash++] = v;
		s = *end == ',' ? end + 1 : end;
	}
}

/* The host_gpus rows of |h->name| into h->gpus (at most HOST_GPUS_MAX). */
static int
load_gpus(struct sqlstore *s, sqlite3_stmt *st, struct host *h,
    struct core_gpu *gpus, char *err, size_t errlen)
{
	int	rc;

	h->gpus = gpus;
	h->n_gpus = 0;
	if (sqlite3_bind_text(st, 1, h->name, -1, SQLITE_STATIC) != SQLITE_OK)
		return sqlstore_fail(s, err, errlen, "reading hosts");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct core_gpu *g;

		if (h->n_gpus == HOST_GPUS_MAX)
			continue;
		g = &gpus[h->n_gpus++];
		memset(g, 0, sizeof(*g));
		g->device = (uint32_t)sqlite3_column_int64(st, 0);
		snprintf(g->uuid, sizeof(g->uuid), "%s", text(st, 1));
		g->ok = sqlite3_column_int64(st, 2) != 0;
		snprintf(g->failed_step, sizeof(g->failed_step), "%s",
		    text(st, 3));
		snprintf(g->error, sizeof(g->error), "%s", text(st, 4));
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : sqlstore_fail(s, err, errlen,
	    "reading hosts");
}

int
sqlstore_load_hosts(struct sqlstore *s, struct core *c, char *err,
    size_t errlen)
{
	struct core_gpu		 gpus[HOST_GPUS_MAX];
	sqlite3_stmt		*st = NULL, *gst = NULL;
	struct host		 h;
	int			 rc;

	if (sqlite3_prepare_v2(s->db, "SELECT name, state, reason, since_ms, "
	    "updated_ms, crashes, gpu_failures, crash_ms, hook_state, "
	    "hook_code, hook_sig, hook_output, hook_reason, hook_started_ms, "
	    "hook_ended_ms FROM hosts ORDER BY name", -1, &st, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "SELECT device, uuid, ok, failed_step, "
	    "error FROM host_gpus WHERE host = ?1 ORDER BY device", -1, &gst,
	    NULL) != SQLITE_OK) {
		rc = sqlstore_fail(s, err, errlen, "reading hosts");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&h, 0, sizeof(h));
		h.name = (char *)text(st, 0);
		h.state = host_state_parse(text(st, 1));
		if (h.state == 0 || *h.name == '\0') {
			rc = errf(-1, err, errlen, "host %s has an unknown "
			    "state %s", h.name, text(st, 1));
			goto out;
		}
		snprintf(h.reason, sizeof(h.reason), "%s", text(st, 2));
		h.since_ms = sqlite3_column_int64(st, 3);
		h.updated_ms = sqlite3_column_int64(st, 4);
		h.crashes = (uint32_t)sqlite3_column_int64(st, 5);
		h.gpu_failures = (uint32_t)sqlite3_column_int64(st, 6);
		crash_parse(&h, text(st, 7));
		h.hook.state = (uint32_t)sqlite3_column_int64(st, 8);
		h.hook.code = (int32_t)sqlite3_column_int64(st, 9);
		h.hook.sig = (int32_t)sqlite3_column_int64(st, 10);
		snprintf(h.hook.output, sizeof(h.hook.output), "%s",
		    text(st, 11));
		snprintf(h.hook.reason, sizeof(h.hook.reason), "%s",
		    text(st, 12));
		h.hook.started_ms = sqlite3_column_int64(st, 13);
		h.hook.ended_ms = sqlite3_column_int64(st, 14);
		if ((rc = load_gpus(s, gst, &h, gpus, err, errlen)) != 0)
			goto out;
		hosts_restore(c->hosts, &h);
	}
	rc = rc == SQLITE_DONE ? 0 : sqlstore_fail(s, err, errlen,
	    "reading hosts");
out:
	sqlite3_finalize(st);
	sqlite3_finalize(gst);
	return rc;
}
