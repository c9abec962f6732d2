/*
 * Unit tests for client/common/servers.c: the --server list as users write
 * it (and the messages for mistakes), and the choosing rule of SPEC §14 a
 * client follows when a call fails: the leader a standby names, else the
 * next server, and a round's end when every server has failed.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "client.h"
#include "grpc.h"
#include "servers.h"

static const char *
cur(const struct server_list *sl)
{
	return server_list_current(sl)->name;
}

static void
parse_ok(struct server_list *sl, const char *spec)
{
	char err[512] = "";

	int rc = server_list_parse(sl, spec, RDZV_DEFAULT_PORT, err,
	    sizeof(err));
	if (rc != 0)
		fprintf(stderr, "'%s': %s\n", spec, err);
	CHECK_INT(rc, 0);
}

static void
parse_err(const char *spec, const char *msg)
{
	struct server_list sl;
	char err[512] = "";

	CHECK_INT(server_list_parse(&sl, spec, RDZV_DEFAULT_PORT, err,
	    sizeof(err)), -1);
	CHECK_CONTAINS(err, msg);
}

static void
test_parse(void)
{
	struct server_list sl;
	char buf[1024];

	parse_ok(&sl, "a:1");
	CHECK_INT(sl.n, 1);
	CHECK_STR(cur(&sl), "a:1");

	parse_ok(&sl, "a:1,b,[::1]:3,unix:/run/rdzv.sock,127.0.0.1:29401");
	CHECK_INT(sl.n, 5);
	CHECK_INT(sl.n_given, 5);
	CHECK_STR(sl.s[0].name, "a:1");
	CHECK_STR(sl.s[1].name, "b:29400");
	CHECK_STR(sl.s[2].name, "[::1]:3");
	CHECK_INT(sl.s[3].ep.kind, ENDPOINT_UNIX);
	CHECK_STR(sl.s[3].ep.path, "/run/rdzv.sock");
	CHECK_STR(sl.s[4].name, "127.0.0.1:29401");
	CHECK_STR(cur(&sl), "a:1");
	CHECK_STR(server_list_format(&sl, buf, sizeof(buf)),
	    "a:1,b:29400,[::1]:3,unix:/run/rdzv.sock,127.0.0.1:29401");
	/* Cut short, still a string. */
	CHECK_STR(server_list_format(&sl, buf, 6), "a:1,b");

	/* Blanks around entries, as people write lists, do not count. */
	parse_ok(&sl, " a:1 ,\tb:2 ");
	CHECK_INT(sl.n, 2);
	CHECK_STR(sl.s[0].name, "a:1");
	CHECK_STR(sl.s[1].name, "b:2");
	parse_err("a:1, ,b:2", "server 2 of the list is empty");

	parse_err("", "no server given");
	parse_err("a:1,,b:2", "server 2 of the list is empty");
	parse_err("a:1,", "server 2 of the list is empty");
	parse_err(",a:1", "server 1 of the list is empty");
	parse_err("a:1,b:x", "'b:x': port must be a number");
	parse_err("a:1,unix:", "'unix:': unix socket path is empty");
	parse_err("a:29400,b,a", "a:29400 is listed twice");
	parse_err("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "at most 16 servers");
	parse_ok(&sl, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p");
	CHECK_INT(sl.n, 16);
}

/* With one server, every failure ends a round: as before lists. */
static void
test_one_server(void)
{
	struct server_list sl;

	parse_ok(&sl, "a:1");
	for (int i = 0; i < 3; i++) {
		CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_ROUND);
		CHECK_STR(cur(&sl), "a:1");
	}
	/* A hint names another: it is followed, and joins the list. */
	CHECK_INT(server_list_failed(&sl, "b:2"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "b:2");
	CHECK_INT(sl.n, 2);
	CHECK_INT(sl.n_given, 1);
	server_list_ok(&sl);
	/* The list as given is what messages show. */
	char buf[64];
	CHECK_STR(server_list_format(&sl, buf, sizeof(buf)), "a:1");
}

static void
test_next_and_rounds(void)
{
	struct server_list sl;

	parse_ok(&sl, "a:1,b:1,c:1");
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "b:1");
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "c:1");
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_ROUND);
	CHECK_STR(cur(&sl), "a:1");
	/* The next round is the same. */
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_ROUND);

	/* A success starts a new round at the server that worked. */
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "b:1");
	server_list_ok(&sl);
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "c:1");
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "a:1");
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_ROUND);
	CHECK_STR(cur(&sl), "b:1");
}

static void
test_hints(void)
{
	struct server_list sl;

	/* A standby first in the list names the leader: straight there. */
	parse_ok(&sl, "a:1,b:1,c:1");
	CHECK_INT(server_list_failed(&sl, "c:1"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "c:1");
	server_list_ok(&sl);
	CHECK_INT(sl.n, 3);

	/* The hint is parsed like --server: the default port applies, and
	 * the same server written otherwise is the same entry. */
	parse_ok(&sl, "a:1,b");
	CHECK_INT(server_list_failed(&sl, "b:29400"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "b:29400");
	CHECK_INT(sl.n, 2);

	/* Bad hints, and hints naming the server that refused, count as
	 * none. */
	parse_ok(&sl, "a:1,b:1,c:1");
	CHECK_INT(server_list_failed(&sl, "not a:host:port"), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "b:1");
	CHECK_INT(server_list_failed(&sl, ""), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "c:1");
	CHECK_INT(server_list_failed(&sl, "c:1"), SERVER_MOVE_ROUND);
	CHECK_STR(cur(&sl), "a:1");
	CHECK_INT(sl.n, 3);
}

/*
 * A hint to a leader that is dead: the rotation still reaches every server
 * of the list after it, and the round ends.
 */
static void
test_hint_to_a_dead_leader(void)
{
	struct server_list sl;
	int seen_b = 0, moves = 0;
	enum server_move m;

	parse_ok(&sl, "a:1,b:1");
	CHECK_INT(server_list_failed(&sl, "dead:1"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "dead:1");
	CHECK_INT(sl.n, 3);
	/* dead:1 refuses the connection. */
	CHECK_INT(server_list_failed(&sl, NULL), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "b:1");
	/* So does every standby keep naming it, until the round ends. */
	do {
		if (strcmp(cur(&sl), "b:1") == 0)
			seen_b++;
		m = server_list_failed(&sl, strcmp(cur(&sl), "dead:1") == 0 ?
		    NULL : "dead:1");
		moves++;
	} while (m != SERVER_MOVE_ROUND && moves < 100);
	CHECK_INT(m, SERVER_MOVE_ROUND);
	CHECK(seen_b >= 1);
	/* Bounded: at most n hints and n plain failures a round. */
	CHECK(moves <= 6);
}

/* Two standbys naming each other cannot make a client spin. */
static void
test_hint_loop(void)
{
	struct server_list sl;
	enum server_move m;
	int moves = 0;

	parse_ok(&sl, "a:1,b:1");
	do {
		m = server_list_failed(&sl, strcmp(cur(&sl), "a:1") == 0 ?
		    "b:1" : "a:1");
		moves++;
	} while (m != SERVER_MOVE_ROUND && moves < 100);
	CHECK_INT(m, SERVER_MOVE_ROUND);
	CHECK(moves <= 4);
}

/* Hints fill the free places; a full list gives its last hinted place to
 * a new leader, and a list of given servers only has none. */
static void
test_full_list(void)
{
	struct server_list sl;

	parse_ok(&sl, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o");
	CHECK_INT(server_list_failed(&sl, "x:1"), SERVER_MOVE_HINT);
	CHECK_INT(sl.n, 16);
	CHECK_STR(cur(&sl), "x:1");
	server_list_ok(&sl);
	CHECK_INT(server_list_failed(&sl, "y:1"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "y:1");
	CHECK_INT(sl.n, 16);

	parse_ok(&sl, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p");
	CHECK_INT(server_list_failed(&sl, "x:1"), SERVER_MOVE_NEXT);
	CHECK_STR(cur(&sl), "b:29400");
	/* A hint to one of them still works. */
	CHECK_INT(server_list_failed(&sl, "p"), SERVER_MOVE_HINT);
	CHECK_STR(cur(&sl), "p:29400");
}

static void
test_should_move(void)
{
	CHECK_INT(server_list_should_move(GRPC_UNAVAILABLE), 1);
	CHECK_INT(server_list_should_move(GRPC_OK), 0);
	CHECK_INT(server_list_should_move(GRPC_NOT_FOUND), 0);
	CHECK_INT(server_list_should_move(GRPC_FAILED_PRECONDITION), 0);
	CHECK_INT(server_list_should_move(GRPC_PERMISSION_DENIED), 0);
}

/* The client options: the list from --server or RDZV_SERVER, TLS checked
 * for every entry. */
static void
test_client_opts(void)
{
	struct client_opts o;
	struct server_list sl;
	struct grpc_client_opts g;
	struct tls_ctx *tls = NULL;
	char err[512] = "";

	setenv("RDZV_SERVER", "a:1,b:2", 1);
	CHECK_INT(client_opts_init(&o, err, sizeof(err)), 0);
	CHECK_INT(client_opts_servers(&o, &sl, err, sizeof(err)), 0);
	CHECK_INT(sl.n, 2);
	CHECK_INT(client_opts_grpc(&o, &g, &tls, err, sizeof(err)), 0);
	CHECK_STR(g.server.host, "a");
	CHECK_INT(g.server.port, 1);
	CHECK_INT(client_opts_take(&o, CLIENT_OPT_SERVER, "c:3", err,
	    sizeof(err)), 1);
	CHECK_INT(client_opts_servers(&o, &sl, err, sizeof(err)), 0);
	CHECK_INT(sl.n, 1);
	CHECK_STR(sl.s[0].name, "c:3");

	o.server = "a:1,b:x";
	CHECK_INT(client_opts_servers(&o, &sl, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "--server a:1,b:x: 'b:x'");
	CHECK_INT(client_opts_grpc(&o, &g, &tls, err, sizeof(err)), -1);

	o.server = "a:1,unix:/run/x.sock";
	o.tls_ca = "/nonexistent/ca.pem";
	CHECK_INT(client_opts_servers(&o, &sl, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "a unix socket (unix:/run/x.sock) is cleartext");
	unsetenv("RDZV_SERVER");
	CHECK_INT(client_opts_init(&o, err, sizeof(err)), 0);
	CHECK_STR(o.server, CLIENT_DEFAULT_SERVER);
	CHECK_INT(o.connect_timeout_ms, 10000);

	/* RDZV_CONNECT_TIMEOUT is a duration, plain numbers in seconds, as
	 * --connect-timeout; a bad one is an error naming it. */
	setenv("RDZV_CONNECT_TIMEOUT", "3", 1);
	CHECK_INT(client_opts_init(&o, err, sizeof(err)), 0);
	CHECK_INT(o.connect_timeout_ms, 3000);
	setenv("RDZV_CONNECT_TIMEOUT", "250ms", 1);
	CHECK_INT(client_opts_init(&o, err, sizeof(err)), 0);
	CHECK_INT(o.connect_timeout_ms, 250);
	CHECK_INT(client_opts_take(&o, CLIENT_OPT_CONNECT_TIMEOUT, "2m", err,
	    sizeof(err)), 1);
	CHECK_INT(o.connect_timeout_ms, 120000);
	CHECK_INT(client_opts_take(&o, CLIENT_OPT_CONNECT_TIMEOUT, "7", err,
	    sizeof(err)), 1);
	CHECK_INT(o.connect_timeout_ms, 7000);
	CHECK_INT(client_opts_take(&o, CLIENT_OPT_CONNECT_TIMEOUT, "0", err,
	    sizeof(err)), -1);
	CHECK_CONTAINS(err, "--connect-timeout: '0' is not a duration above 0");
	setenv("RDZV_CONNECT_TIMEOUT", "soon", 1);
	CHECK_INT(client_opts_init(&o, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "RDZV_CONNECT_TIMEOUT=soon is not a duration");
	unsetenv("RDZV_CONNECT_TIMEOUT");
}

/* SPEC §6's backoff between rounds, and its bound while a server answers. */
static void
test_backoff(void)
{
	uint32_t b = 0, want[] = { 100, 200, 400, 800, 1600, 3200, 5000, 5000 };
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint32_t ms = server_backoff_next(&b, SERVER_BACKOFF_MAX_MS,
		    false);
		CHECK_INT(b, want[i]);
		CHECK(ms >= want[i] / 2 && ms <= want[i]);
	}
	/* A standby answered: at most a second, and back up after. */
	server_backoff_next(&b, SERVER_BACKOFF_MAX_MS, true);
	CHECK_INT(b, SERVER_BACKOFF_REPLICA_MS);
	server_backoff_next(&b, SERVER_BACKOFF_MAX_MS, false);
	CHECK_INT(b, 2 * SERVER_BACKOFF_REPLICA_MS);
	b = 0;
	server_backoff_next(&b, SERVER_BACKOFF_MAX_MS, true);
	CHECK_INT(b, SERVER_BACKOFF_MIN_MS);
	/* A lower bound (rdzv-bench --max-backoff) still holds. */
	b = 0;
	for (i = 0; i < 6; i++)
		server_backoff_next(&b, 300, false);
	CHECK_INT(b, 300);
	for (i = 0; i < 100; i++) {
		uint32_t ms = server_jitter(100);
		CHECK(ms >= 50 && ms <= 100);
	}
}

int
main(void)
{
	test_parse();
	test_one_server();
	test_next_and_rounds();
	test_hints();
	test_hint_to_a_dead_leader();
	test_hint_loop();
	test_full_list();
	test_should_move();
	test_client_opts();
	test_backoff();
	return check_done("servers");
}
