/*
 * The server list and its choosing rule (servers.h). No I/O and no clock:
 * the callers make the calls, log the moves and wait their backoff.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "grpc.h"
#include "servers.h"

/* The entry named |name|, or -1. */
static int
find(const struct server_list *sl, const char *name)
{
	for (size_t i = 0; i < sl->n; i++) {
		if (strcmp(sl->s[i].name, name) == 0)
			return (int)i;
	}
	return -1;
}

int
server_list_parse(struct server_list *sl, const char *spec,
    uint16_t default_port, char *err, size_t errlen)
{
	char entry[1024], e[256];
	const char *p, *comma;
	size_t len, nth = 0;

	memset(sl, 0, sizeof(*sl));
	if (spec == NULL || *spec == '\0') {
		snprintf(err, errlen, "no server given");
		return -1;
	}
	for (p = spec;; p = comma + 1) {
		struct server_entry *s;

		nth++;
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		/* "a:1, b:1" as people write lists. */
		while (len > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0) {
			snprintf(err, errlen, "'%s': server %zu of the list is "
			    "empty", spec, nth);
			return -1;
		}
		if (len >= sizeof(entry)) {
			snprintf(err, errlen, "'%s': server %zu of the list is "
			    "too long", spec, nth);
			return -1;
		}
		if (sl->n == SERVER_LIST_MAX) {
			snprintf(err, errlen, "'%s': at most %d servers",
			    spec, SERVER_LIST_MAX);
			return -1;
		}
		memcpy(entry, p, len);
		entry[len] = '\0';
		s = &sl->s[sl->n];
		if (endpoint_parse(entry, default_port, &s->ep, e,
		    sizeof(e)) != 0) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
		endpoint_format(&s->ep, s->name, sizeof(s->name));
		if (find(sl, s->name) >= 0) {
			snprintf(err, errlen, "'%s': %s is listed twice", spec,
			    s->name);
			return -1;
		}
		sl->n++;
		if (comma == NULL)
			break;
	}
	sl->n_given = sl->n;
	return 0;
}

const struct server_entry *
server_list_current(const struct server_list *sl)
{
	return &sl->s[sl->cur];
}

const char *
server_list_format(const struct server_list *sl, char *buf, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < sl->n_given && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i > 0 ? "," : "",
		    sl->s[i].name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

void
server_list_ok(struct server_list *sl)
{
	/* A failure later moves on from the server that worked. */
	sl->pos = sl->cur;
	sl->fails = 0;
	sl->hints = 0;
}

int
server_list_should_move(int status)
{
	return status == GRPC_UNAVAILABLE;
}

/*
 * The entry for the leader a hint names: found, or added. A full list
 * gives its last place, one that came from a hint, to the new one; a list
 * of given servers only has no room. -1 when the hint is to be ignored:
 * it does not parse, names the server that refused, or finds no room.
 */
static int
leader_entry(struct server_list *sl, const char *hint)
{
	struct server_entry s;
	char e[256];
	int i;

	if (endpoint_parse(hint, RDZV_DEFAULT_PORT, &s.ep, e, sizeof(e)) != 0)
		return -1;
	endpoint_format(&s.ep, s.name, sizeof(s.name));
	if ((i = find(sl, s.name)) >= 0)
		return (size_t)i == sl->cur ? -1 : i;
	if (sl->n < SERVER_LIST_MAX) {
		sl->s[sl->n] = s;
		return (int)sl->n++;
	}
	if (sl->n_given == SERVER_LIST_MAX)
		return -1;
	sl->s[SERVER_LIST_MAX - 1] = s;
	return SERVER_LIST_MAX - 1;
}

enum server_move
server_list_failed(struct server_list *sl, const char *hint)
{
	int i;

	/* As many hints a round as there are servers: enough for each
	 * standby to name the leader once. */
	if (hint != NULL && *hint != '\0' && sl->hints < sl->n &&
	    (i = leader_entry(sl, hint)) >= 0) {
		sl->hints++;
		sl->cur = (size_t)i;
		return SERVER_MOVE_HINT;
	}
	/* The rotation goes on from where it was before any hint, so a
	 * hint to a dead leader does not skip the servers after it. */
	sl->pos = (sl->pos + 1) % sl->n;
	sl->cur = sl->pos;
	if (++sl->fails < sl->n)
		return SERVER_MOVE_NEXT;
	sl->fails = 0;
	sl->hints = 0;
	return SERVER_MOVE_ROUND;
}

uint32_t
server_jitter(uint32_t ms)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)mono_us();
	return ms / 2 + r % (ms / 2 + 1);
}

uint32_t
server_backoff_next(uint32_t *backoff_ms, uint32_t max_ms,
    bool server_answered)
{
	uint32_t b = *backoff_ms == 0 ? SERVER_BACKOFF_MIN_MS : *backoff_ms * 2;

	if (b > max_ms)
		b = max_ms;
	if (server_answered && b > SERVER_BACKOFF_REPLICA_MS)
		b = SERVER_BACKOFF_REPLICA_MS;
	*backoff_ms = b;
	return server_jitter(b);
}
