/*
 * Parsing of "HOST:PORT", "[V6]:PORT", "HOST" and "unix:PATH".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "errf.h"

static int
parse_port(const char *s, uint16_t *port)
{
	char *end;
	/* strtoul would accept leading blanks and signs: digits only. */
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int
endpoint_parse(const char *s, uint16_t default_port, struct endpoint *ep,
    char *err, size_t errlen)
{
	memset(ep, 0, sizeof(*ep));
	if (s == NULL || *s == '\0')
		return errf(-EINVAL, err, errlen, "empty address");

	if (strncmp(s, "unix:", 5) == 0) {
		const char *path = s + 5;
		if (*path == '\0')
			return errf(-EINVAL, err, errlen,
			    "'%s': unix socket path is empty", s);
		if (strlen(path) >= sizeof(ep->path))
			return errf(-EINVAL, err, errlen, "'%s': unix socket "
			    "path is longer than %zu bytes", s,
			    sizeof(ep->path) - 1);
		ep->kind = ENDPOINT_UNIX;
		strcpy(ep->path, path);
		return 0;
	}

	ep->kind = ENDPOINT_TCP;
	ep->port = default_port;
	const char *host = s, *port = NULL;
	size_t hostlen;
	if (*s == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL)
			return errf(-EINVAL, err, errlen,
			    "'%s': missing ']'", s);
		host = s + 1;
		hostlen = (size_t)(close - host);
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
			return errf(-EINVAL, err, errlen,
			    "'%s': expected ':PORT' after ']'", s);
	} else {
		const char *colon = strrchr(s, ':');
		if (colon != NULL && strchr(s, ':') != colon)
			return errf(-EINVAL, err, errlen,
			    "'%s': write IPv6 addresses as [ADDR]:PORT", s);
		hostlen = colon != NULL ? (size_t)(colon - s) : strlen(s);
		if (colon != NULL)
			port = colon + 1;
	}
	if (hostlen == 0)
		return errf(-EINVAL, err, errlen, "'%s': host is empty", s);
	if (hostlen >= sizeof(ep->host))
		return errf(-EINVAL, err, errlen,
		    "'%s': host name too long", s);
	memcpy(ep->host, host, hostlen);
	ep->host[hostlen] = '\0';
	if (port != NULL && parse_port(port, &ep->port) != 0)
		return errf(-EINVAL, err, errlen,
		    "'%s': port must be a number from 0 to 65535", s);
	return 0;
}

int
endpoint_is_loopback(const struct endpoint *ep)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (ep->kind == ENDPOINT_UNIX)
		return 1;
	if (strcmp(ep->host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, ep->host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, ep->host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

/*
 * Brackets go around a host that would read back as something else without
 * them: an IPv6 address, a host named "unix" ("unix:29400" is a socket
 * path) and one beginning with '[' (which parses only as "[HOST]").
 */
void
endpoint_format(const struct endpoint *ep, char *buf, size_t len)
{
	if (ep->kind == ENDPOINT_UNIX)
		snprintf(buf, len, "unix:%s", ep->path);
	else if (strchr(ep->host, ':') != NULL || ep->host[0] == '[' ||
	    strcmp(ep->host, "unix") == 0)
		snprintf(buf, len, "[%s]:%u", ep->host, ep->port);
	else
		snprintf(buf, len, "%s:%u", ep->host, ep->port);
}
