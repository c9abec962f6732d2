/*
 * The store interface (store.h): the spec names a backend, and every call
 * goes through that backend's table (store_be.h). Parsing the spec lives
 * here so that the configuration check, the daemon and --migrate-store read
 * it the same way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store.h"
#include "store_be.h"

struct store {
	const struct store_ops	*ops;
	void			*be;
	char			 desc[STORE_PATH_MAX + STORE_ENDPOINTS_MAX +
				    STORE_PREFIX_MAX + 16];
};

/*
 * An etcd prefix: what follows the endpoints, from its slash on. Printable
 * ASCII without spaces, so that it reads the same in etcdctl, and no empty
 * path segment: "/a//b" would be a different key space from "/a/b" that
 * looks the same to a person.
 */
static int
prefix_parse(const char *p, struct store_spec *out, char *err, size_t errlen)
{
	size_t	len = strlen(p);

	while (len > 1 && p[len - 1] == '/')
		len--;
	if (len <= 1)
		return errf(-1, err, errlen, "store etcd://...: no key prefix "
		    "after the endpoints (e.g. etcd://127.0.0.1:2379/rdzv)");
	if (len >= sizeof(out->prefix))
		return errf(-1, err, errlen, "store: the etcd key prefix is "
		    "longer than %zu bytes", sizeof(out->prefix) - 1);
	for (size_t i = 0; i < len; i++) {
		if (p[i] <= ' ' || p[i] > '~')
			return errf(-1, err, errlen, "store: the etcd key "
			    "prefix may hold only printable ASCII without "
			    "spaces");
		if (p[i] == '/' && i > 0 && p[i - 1] == '/')
			return errf(-1, err, errlen, "store: the etcd key "
			    "prefix has an empty segment ('//')");
	}
	memcpy(out->prefix, p, len);
	out->prefix[len] = '\0';
	return 0;
}

/* "HOST:PORT[,HOST:PORT...]": each member with its port, none empty. */
static int
endpoints_parse(const char *s, size_t len, struct store_spec *out, char *err,
    size_t errlen)
{
	const char	*p = s, *end = s + len, *comma, *colon;

	if (len == 0)
		return errf(-1, err, errlen, "store etcd://: no endpoints "
		    "(etcd://HOST:PORT[,HOST:PORT...]/PREFIX)");
	if (len >= sizeof(out->endpoints))
		return errf(-1, err, errlen, "store: the etcd endpoints are "
		    "longer than %zu bytes", sizeof(out->endpoints) - 1);
	while (p < end) {
		if ((comma = memchr(p, ',', (size_t)(end - p))) == NULL)
			comma = end;
		if (comma == p)
			return errf(-1, err, errlen, "store: an empty etcd "
			    "endpoint in '%.*s'", (int)len, s);
		colon = NULL;
		for (const char *q = p; q < comma; q++)
			if (*q == ':')
				colon = q;
		if (colon == NULL || colon + 1 == comma ||
		    strspn(colon + 1, "0123456789") < (size_t)(comma -
		    colon - 1) || colon == p)
			return errf(-1, err, errlen, "store: etcd endpoint "
			    "'%.*s' is not HOST:PORT", (int)(comma - p), p);
		p = comma + (comma < end);
		if (comma < end && p == end)
			return errf(-1, err, errlen, "store: an empty etcd "
			    "endpoint in '%.*s'", (int)len, s);
	}
	memcpy(out->endpoints, s, len);
	out->endpoints[len] = '\0';
	return 0;
}

int
store_spec_parse(const char *spec, struct store_spec *out, char *err,
    size_t errlen)
{
	const char	*rest, *slash;

	memset(out, 0, sizeof(*out));
	if (spec == NULL || *spec == '\0')
		return errf(-1, err, errlen, "store: empty (sqlite:PATH or "
		    "etcd://HOST:PORT[,HOST:PORT...]/PREFIX)");
	if (strncmp(spec, "etcd://", 7) == 0) {
		out->kind = STORE_ETCD;
		rest = spec + 7;
		if ((slash = strchr(rest, '/')) == NULL)
			slash = rest + strlen(rest);
		if (endpoints_parse(rest, (size_t)(slash - rest), out, err,
		    errlen) != 0)
			return -1;
		return prefix_parse(slash, out, err, errlen);
	}
	if (strncmp(spec, "etcd:", 5) == 0 || strncmp(spec, "etcds:", 6) == 0)
		return errf(-1, err, errlen, "store '%s': write etcd stores as "
		    "etcd://HOST:PORT[,HOST:PORT...]/PREFIX (TLS through "
		    "--etcd-ca, --etcd-cert, --etcd-key)", spec);
	out->kind = STORE_SQLITE;
	rest = strncmp(spec, "sqlite:", 7) == 0 ? spec + 7 : spec;
	if (*rest == '\0')
		return errf(-1, err, errlen, "store sqlite: no database path");
	if (strlen(rest) >= sizeof(out->path))
		return errf(-1, err, errlen, "store: the database path is "
		    "longer than %zu bytes", sizeof(out->path) - 1);
	snprintf(out->path, sizeof(out->path), "%s", rest);
	return 0;
}

int
store_open_opts(const char *spec, const struct store_opts *opts,
    struct store **out, char *err, size_t errlen)
{
	static const struct store_opts	 none;
	struct store_spec		*sp;
	struct store			*s;

	*out = NULL;
	if (opts == NULL)
		opts = &none;
	if ((sp = malloc(sizeof(*sp))) == NULL ||
	    (s = calloc(1, sizeof(*s))) == NULL) {
		free(sp);
		return errf(-1, err, errlen, "out of memory");
	}
	if (store_spec_parse(spec, sp, err, errlen) != 0)
		goto bad;
	if (sp->kind == STORE_ETCD) {
		s->ops = &store_etcd_ops;
		snprintf(s->desc, sizeof(s->desc), "etcd://%s%s",
		    sp->endpoints, sp->prefix);
	} else {
		s->ops = &store_sqlite_ops;
		snprintf(s->desc, sizeof(s->desc), "%s", sp->path);
	}
	if (s->ops->open(sp, opts, &s->be, err, errlen) != 0)
		goto bad;
	free(sp);
	*out = s;
	return 0;

bad:
	free(sp);
	free(s);
	return -1;
}

int
store_open(const char *spec, struct store **out, char *err, size_t errlen)
{
	return store_open_opts(spec, NULL, out, err, errlen);
}

int
store_load(struct store *s, struct core *c, struct core_now now, char *err,
    size_t errlen)
{
	return s->ops->load(s->be, c, now, err, errlen);
}

int
store_commit(struct store *s, struct core *c, char *err, size_t errlen)
{
	return s->ops->commit(s->be, c, err, errlen);
}

int
store_fence(struct store *s, const char *leader_key, int64_t create_revision)
{
	if (s == NULL)
		return -EINVAL;
	if (s->ops->fence == NULL)
		return -ENOTSUP;
	return s->ops->fence(s->be, leader_key, create_revision);
}

int
store_events(struct store *s, const char *rdzv_id, uint64_t after_seq,
    uint32_t limit, int (*cb)(const struct core_event *, void *), void *arg,
    char *err, size_t errlen)
{
	return s->ops->events(s->be, rdzv_id, after_seq, limit, cb, arg, err,
	    errlen);
}

enum store_kind
store_kind(const struct store *s)
{
	return s->ops->kind;
}

int
store_kind_etcd(const struct store *s)
{
	return s != NULL && s->ops->kind == STORE_ETCD;
}

uint64_t
store_transactions(const struct store *s)
{
	return s->ops->transactions(s->be);
}

uint64_t
store_bytes_written(const struct store *s)
{
	return s->ops->bytes_written != NULL ? s->ops->bytes_written(s->be) :
	    0;
}

const char *
store_path(const struct store *s)
{
	return s->desc;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	if (s->be != NULL)
		s->ops->close(s->be);
	free(s);
}

/* The SQLite backend's handle, for the store's tests that look inside. */
void *
store_backend(struct store *s)
{
	return s->be;
}
