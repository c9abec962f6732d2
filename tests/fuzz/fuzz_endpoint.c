/*
 * Fuzz target for endpoints as users write them (lib/base/endpoint.c):
 * "HOST:PORT", "[V6]:PORT", "HOST" and "unix:PATH", from --listen, the
 * config file, --server and RDZV_SERVER.
 *
 * Input layout: byte 0 picks the default port (0, 29400 or the byte
 * itself) and the size of the error buffer (1 to 64, or a roomy one); the
 * rest is the text, cut at its first NUL as a C string would be.
 *
 * Invariants checked (a violation aborts): the result is 0 or -EINVAL, an
 * error comes with a message, a parsed endpoint fits its fields and keeps
 * the default port unless one was written, and what endpoint_format writes
 * parses back to the same endpoint with the same loopback verdict.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "endpoint.h"

static void
check_round_trip(const struct endpoint *ep)
{
	struct endpoint again;
	char buf[512], err[256] = "";

	endpoint_format(ep, buf, sizeof(buf));
	FUZZ_ASSERT(strlen(buf) < sizeof(buf) - 1);
	/* A default port that differs shows a port left out of buf. */
	FUZZ_ASSERT(endpoint_parse(buf, 1, &again, err, sizeof(err)) == 0);
	FUZZ_ASSERT(again.kind == ep->kind);
	FUZZ_ASSERT(strcmp(again.host, ep->host) == 0);
	FUZZ_ASSERT(strcmp(again.path, ep->path) == 0);
	FUZZ_ASSERT(again.kind == ENDPOINT_UNIX || again.port == ep->port);
	FUZZ_ASSERT(endpoint_is_loopback(&again) == endpoint_is_loopback(ep));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct endpoint ep;
	char err[512];
	size_t errlen;
	uint16_t def;
	char *s;
	int rc;

	if (size < 1 || size > 4096)
		return 0;
	def = data[0] < 0x40 ? 0 : data[0] < 0x80 ? RDZV_DEFAULT_PORT :
	    data[0];
	errlen = data[0] & 0x80 ? sizeof(err) : 1 + (size_t)(data[0] & 0x3f);
	if ((s = malloc(size)) == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';

	memset(err, 0, sizeof(err));
	rc = endpoint_parse(s, def, &ep, err, errlen);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	FUZZ_ASSERT(strlen(err) < errlen);
	if (rc != 0) {
		FUZZ_ASSERT(errlen == 1 || err[0] != '\0');
		FUZZ_ASSERT(endpoint_parse(s, def, &ep, NULL, 0) == -EINVAL);
		free(s);
		return 0;
	}
	if (ep.kind == ENDPOINT_UNIX) {
		FUZZ_ASSERT(strncmp(s, "unix:", 5) == 0);
		FUZZ_ASSERT(strcmp(ep.path, s + 5) == 0);
	} else {
		FUZZ_ASSERT(ep.kind == ENDPOINT_TCP);
		FUZZ_ASSERT(ep.host[0] != '\0');
		FUZZ_ASSERT(strlen(ep.host) < sizeof(ep.host));
		FUZZ_ASSERT(strstr(s, ep.host) != NULL);
		/* No port written: the default. */
		if (strrchr(s, ':') == NULL || (s[0] == '[' &&
		    strrchr(s, ']')[1] == '\0'))
			FUZZ_ASSERT(ep.port == def);
	}
	check_round_trip(&ep);
	free(s);
	return 0;
}
