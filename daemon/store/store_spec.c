/*
 * Parsing a store spec (store.h), on its own so that the configuration
 * check (and its fuzz target) reads it as the daemon and --migrate-store
 * do, without linking the backends.
 */
#include <stdio.h>
#include <string.h>

#include "errf.h"
#include "store.h"

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
