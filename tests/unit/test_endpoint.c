/*
 * Unit tests for lib/base/endpoint.c: the address forms users write
 * (SPEC §13), the messages they see for mistakes, loopback detection
 * (which decides whether cleartext is allowed) and formatting back to
 * text.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "endpoint.h"

/* Parses |s| with port 29400 as default; the formatted result must be
 * |want| and its loopback verdict |loopback|. */
static void
check_ok(const char *s, const char *want, int loopback)
{
	struct endpoint ep;
	char err[256] = "", buf[512];

	int rc = endpoint_parse(s, RDZV_DEFAULT_PORT, &ep, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "'%s': %s\n", s, err);
	CHECK_INT(rc, 0);
	if (rc != 0)
		return;
	endpoint_format(&ep, buf, sizeof(buf));
	CHECK_STR(buf, want);
	CHECK_INT(endpoint_is_loopback(&ep), loopback);

	/* What endpoint_format writes parses back to the same endpoint. */
	struct endpoint again;
	CHECK_INT(endpoint_parse(buf, 1, &again, err, sizeof(err)), 0);
	CHECK_INT(again.kind, ep.kind);
	CHECK_STR(again.host, ep.host);
	CHECK_INT(again.port, ep.port);
	CHECK_STR(again.path, ep.path);
}

/* |s| is refused with a message containing |msg|. */
static void
check_err(const char *s, const char *msg)
{
	struct endpoint ep;
	char err[256] = "";

	CHECK_INT(endpoint_parse(s, RDZV_DEFAULT_PORT, &ep, err, sizeof(err)),
	    -EINVAL);
	CHECK_CONTAINS(err, msg);
	/* The message names what was written, so a user sees which flag. */
	if (s != NULL && *s != '\0')
		CHECK_CONTAINS(err, s);
}

static void
test_parse_tcp(void)
{
	struct endpoint ep;

	CHECK_INT(endpoint_parse("example.org:8080", 1, &ep, NULL, 0), 0);
	CHECK_INT(ep.kind, ENDPOINT_TCP);
	CHECK_STR(ep.host, "example.org");
	CHECK_INT(ep.port, 8080);

	CHECK_INT(endpoint_parse("[2001:db8::5]:443", 1, &ep, NULL, 0), 0);
	CHECK_INT(ep.kind, ENDPOINT_TCP);
	CHECK_STR(ep.host, "2001:db8::5");
	CHECK_INT(ep.port, 443);

	/* A bare host, with or without brackets, gets the default port. */
	CHECK_INT(endpoint_parse("node7", 1234, &ep, NULL, 0), 0);
	CHECK_STR(ep.host, "node7");
	CHECK_INT(ep.port, 1234);
	CHECK_INT(endpoint_parse("[::1]", 29400, &ep, NULL, 0), 0);
	CHECK_STR(ep.host, "::1");
	CHECK_INT(ep.port, 29400);

	check_ok("127.0.0.1:29400", "127.0.0.1:29400", 1);
	check_ok("127.0.0.1:0", "127.0.0.1:0", 1);
	check_ok("0.0.0.0:65535", "0.0.0.0:65535", 0);
	check_ok("node7", "node7:29400", 0);
	check_ok("10.1.2.3", "10.1.2.3:29400", 0);
	check_ok("[::1]:50051", "[::1]:50051", 1);
	check_ok("[::]:1", "[::]:1", 0);
	check_ok("[fe80::1%eth0]:7", "[fe80::1%eth0]:7", 0);
	check_ok("localhost:80", "localhost:80", 1);
	check_ok("host:007", "host:7", 0);
}

static void
test_parse_unix(void)
{
	struct endpoint ep;
	char path[200];

	CHECK_INT(endpoint_parse("unix:/run/rdzv/rdzvd.sock", 1, &ep, NULL, 0),
	    0);
	CHECK_INT(ep.kind, ENDPOINT_UNIX);
	CHECK_STR(ep.path, "/run/rdzv/rdzvd.sock");
	check_ok("unix:/tmp/x.sock", "unix:/tmp/x.sock", 1);
	check_ok("unix:relative.sock", "unix:relative.sock", 1);
	/* A colon in the path is part of the path. */
	check_ok("unix:/tmp/a:b", "unix:/tmp/a:b", 1);

	/* sun_path holds 107 bytes and a NUL. */
	memset(path, 0, sizeof(path));
	memcpy(path, "unix:", 5);
	memset(path + 5, 'p', 107);
	CHECK_INT(endpoint_parse(path, 1, &ep, NULL, 0), 0);
	CHECK_INT(strlen(ep.path), 107);
	path[5 + 107] = 'p';
	check_err(path, "longer than 107 bytes");

	check_err("unix:", "unix socket path is empty");
}

static void
test_parse_errors(void)
{
	struct endpoint ep;
	char err[256] = "";

	CHECK_INT(endpoint_parse("", 1, &ep, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "empty address");
	CHECK_INT(endpoint_parse(NULL, 1, &ep, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "empty address");

	check_err("[::1", "missing ']'");
	check_err("[::1:80", "missing ']'");
	check_err("[::1]80", "expected ':PORT' after ']'");
	check_err("[]:80", "host is empty");
	check_err(":80", "host is empty");

	check_err("host:65536", "port must be a number from 0 to 65535");
	check_err("host:-1", "port must be a number from 0 to 65535");
	check_err("host:+1", "port must be a number from 0 to 65535");
	check_err("host:abc", "port must be a number from 0 to 65535");
	check_err("host:80x", "port must be a number from 0 to 65535");
	check_err("host:", "port must be a number from 0 to 65535");
	check_err("host:99999999999999999999", "port must be a number");
	check_err("[::1]:65536", "port must be a number from 0 to 65535");
	check_err("[::1]:", "port must be a number from 0 to 65535");

	/* IPv6 without brackets is ambiguous with a port. */
	check_err("::1:80", "write IPv6 addresses as [ADDR]:PORT");
	check_err("::1", "write IPv6 addresses as [ADDR]:PORT");
	check_err("2001:db8::5", "write IPv6 addresses as [ADDR]:PORT");

	/* A host name that does not fit. */
	char longhost[300];
	memset(longhost, 'h', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	char longerr[1024];
	CHECK_INT(endpoint_parse(longhost, 1, &ep, longerr, sizeof(longerr)),
	    -EINVAL);
	CHECK_CONTAINS(longerr, "host name too long");

	/* A NULL or short error buffer is fine; the message is cut. */
	CHECK_INT(endpoint_parse("host:x", 1, &ep, NULL, 0), -EINVAL);
	char small[8];
	CHECK_INT(endpoint_parse("host:x", 1, &ep, small, sizeof(small)),
	    -EINVAL);
	CHECK_INT(strlen(small), sizeof(small) - 1);
}

static void
test_loopback(void)
{
	static const struct {
		const char *s;
		int loopback;
	} cases[] = {
		{ "127.0.0.1", 1 },
		{ "127.0.0.5:99", 1 },
		{ "127.255.255.254", 1 },
		{ "128.0.0.1", 0 },
		{ "126.255.255.255", 0 },
		{ "10.0.0.1", 0 },
		{ "192.168.1.1:80", 0 },
		{ "0.0.0.0", 0 },
		{ "[::1]", 1 },
		{ "[0:0:0:0:0:0:0:1]:5", 1 },
		{ "[::2]", 0 },
		{ "[::]", 0 },
		{ "[::ffff:10.0.0.1]", 0 },
		{ "[2001:db8::1]:29400", 0 },
		{ "localhost", 1 },
		{ "localhost:1", 1 },
		{ "localhost.example.org", 0 },
		{ "mylocalhost", 0 },
		{ "node7", 0 },
		{ "unix:/tmp/rdzv.sock", 1 },
	};
	struct endpoint ep;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_INT(endpoint_parse(cases[i].s, 1, &ep, NULL, 0), 0);
		int got = endpoint_is_loopback(&ep);
		if (got != cases[i].loopback)
			fprintf(stderr, "'%s': loopback %d\n", cases[i].s, got);
		CHECK_INT(got, cases[i].loopback);
	}
}

static void
test_format(void)
{
	struct endpoint ep;
	char buf[32];

	memset(&ep, 0, sizeof(ep));
	ep.kind = ENDPOINT_TCP;
	strcpy(ep.host, "::1");
	ep.port = 80;
	endpoint_format(&ep, buf, sizeof(buf));
	CHECK_STR(buf, "[::1]:80");

	strcpy(ep.host, "10.0.0.1");
	ep.port = 65535;
	endpoint_format(&ep, buf, sizeof(buf));
	CHECK_STR(buf, "10.0.0.1:65535");

	ep.kind = ENDPOINT_UNIX;
	strcpy(ep.path, "/run/rdzv.sock");
	endpoint_format(&ep, buf, sizeof(buf));
	CHECK_STR(buf, "unix:/run/rdzv.sock");

	/* A short buffer gets a cut, terminated string. */
	endpoint_format(&ep, buf, 6);
	CHECK_STR(buf, "unix:");
}

int
main(void)
{
	test_parse_tcp();
	test_parse_unix();
	test_parse_errors();
	test_loopback();
	test_format();
	return check_done("test_endpoint");
}
