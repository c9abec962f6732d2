/*
 * rdzv-wire-check: rdzv-bench --client wire sends what rdzv's client
 * library sends. lib/grpc's client connects to a listening socket here,
 * makes a Health/Check and, once it has answered the server's SETTINGS, a
 * Join; every byte it writes is recorded and compared with wire_enc.c's
 * bytes for the same calls (the hello, then the SETTINGS ACK and the
 * Join's HEADERS, then the Join's DATA). Run for the SETTINGS rdzvd sends
 * and for SETTINGS with a HEADER_TABLE_SIZE (which changes the Join's
 * header block); and two nodes' encodings must differ in the DATA only.
 *
 * The Check's timeout is chosen so that lib/grpc's grpc-timeout, the time
 * left when the request is written, reads the same for the first second
 * ("100005S"). tests/integration/test_bench_smoke.py runs it. Exit 0 when
 * every byte matched, 1 with the first difference otherwise.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "grpc.h"
#include "wire_enc.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

#define CHECK_TIMEOUT_MS	100005000u
#define WAIT_S			5

struct check {
	struct event_base	*base;
	struct grpc_client	*cli;
	const Rdzv__V1__JoinRequest *req;
	const uint8_t		*settings;	/* the server's, to send */
	size_t			 settings_len;
	size_t			 hello_len, want;
	int			 lfd, fd;
	struct event		*lev, *rev;
	uint8_t			 rec[8192];	/* what the client wrote */
	size_t			 rec_len;
	int			 joined;
};

static void
call_done(struct grpc_ccall *cc, int status, const char *msg, void *arg)
{
	/* Nothing is answered: the calls end when the client is freed. */
}

static void
server_read(evutil_socket_t fd, short what, void *arg)
{
	struct check *c = arg;
	ssize_t n;

	n = recv(fd, c->rec + c->rec_len, sizeof(c->rec) - c->rec_len, 0);
	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		event_base_loopbreak(c->base);
		return;
	}
	c->rec_len += (size_t)n;
	/* The hello and the SETTINGS ACK are in: now the Join, as
	 * rdzv-bench's grpc client makes it once connected. */
	if (!c->joined && c->rec_len >= c->hello_len + WIRE_FRAME_HEADER) {
		c->joined = 1;
		if (grpc_client_call(c->cli, WIRE_JOIN_PATH, &c->req->base,
		    &rdzv__v1__join_event__descriptor, 0, NULL, call_done,
		    c) == NULL)
			event_base_loopbreak(c->base);
	}
	if (c->rec_len >= c->want || c->rec_len == sizeof(c->rec))
		event_base_loopbreak(c->base);
}

static void
server_accept(evutil_socket_t fd, short what, void *arg)
{
	struct check *c = arg;

	if ((c->fd = accept4(fd, NULL, NULL, SOCK_NONBLOCK)) < 0)
		return;
	/* As rdzvd: its SETTINGS at once. */
	if (send(c->fd, c->settings, c->settings_len, 0) !=
	    (ssize_t)c->settings_len ||
	    (c->rev = event_new(c->base, c->fd, EV_READ | EV_PERSIST,
	    server_read, c)) == NULL || event_add(c->rev, NULL) != 0)
		event_base_loopbreak(c->base);
}

static void
print_diff(const uint8_t *want, const uint8_t *got, size_t len, size_t at)
{
	size_t from = at > 16 ? at - 16 : 0, to = at + 32;

	printf("first difference at byte %zu\n  wire:   ", at);
	for (size_t i = from; i < to && i < len; i++)
		printf("%02x%s", want[i], i + 1 == at ? "|" : " ");
	printf("\n  lib/grpc:");
	for (size_t i = from; i < to && i < len; i++)
		printf("%02x%s", got[i], i + 1 == at ? "|" : " ");
	printf("\n");
}

/*
 * One comparison: lib/grpc's client against a server that sends
 * |settings| (a whole frame). The Join's bytes before its DATA go to
 * |prefix| (malloc'd) for the caller to compare across cases. 0 or -1.
 */
static int
compare(const char *name, const uint8_t *settings, size_t settings_len,
    const Rdzv__V1__JoinRequest *req, uint8_t **prefix, size_t *prefix_len)
{
	Grpc__Health__V1__HealthCheckRequest hc =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t slen = sizeof(sin);
	struct grpc_client_opts opts;
	struct timeval wait = { WAIT_S, 0 };
	struct check c;
	struct wire_enc *enc = NULL;
	const uint8_t *hello, *jp;
	uint8_t want[8192];
	size_t hlen, jlen, dlen;
	char err[256], addr[64];
	int rc = -1;

	memset(&c, 0, sizeof(c));
	memset(&opts, 0, sizeof(opts));
	c.req = req;
	c.settings = settings;
	c.settings_len = settings_len;
	c.fd = -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((c.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0 ||
	    bind(c.lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    listen(c.lfd, 4) != 0 ||
	    getsockname(c.lfd, (struct sockaddr *)&sin, &slen) != 0) {
		printf("%s: cannot listen: %s\n", name, strerror(errno));
		goto out;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sin.sin_port));
	if (endpoint_parse(addr, 0, &opts.server, err, sizeof(err)) != 0) {
		printf("%s: %s\n", name, err);
		goto out;
	}

	/* What the wire client sends to this server. */
	if ((enc = wire_enc_new(&opts.server, CHECK_TIMEOUT_MS)) == NULL) {
		printf("%s: cannot encode: %s\n", name, strerror(errno));
		goto out;
	}
	hello = wire_enc_hello(enc, &hlen);
	if (wire_enc_join(enc, settings, settings_len, &req->base, &jp, &jlen,
	    err, sizeof(err)) != 0) {
		printf("%s: %s\n", name, err);
		goto out;
	}
	if (hlen + jlen > sizeof(want) - 1024) {
		printf("%s: %zu bytes to compare: too many\n", name,
		    hlen + jlen);
		goto out;
	}
	memcpy(want, hello, hlen);
	memcpy(want + hlen, jp, jlen);
	dlen = wire_data(want + hlen + jlen, sizeof(want) - hlen - jlen,
	    WIRE_JOIN_STREAM, &req->base);
	c.hello_len = hlen;
	c.want = hlen + jlen + dlen;

	/* What lib/grpc's client sends. */
	hc.service = "";
	if ((c.base = event_base_new()) == NULL ||
	    (c.lev = event_new(c.base, c.lfd, EV_READ, server_accept,
	    &c)) == NULL || event_add(c.lev, NULL) != 0 ||
	    (c.cli = grpc_client_new(c.base, &opts, NULL, NULL)) == NULL ||
	    grpc_client_call(c.cli, WIRE_CHECK_PATH, &hc.base,
	    &grpc__health__v1__health_check_response__descriptor,
	    CHECK_TIMEOUT_MS, NULL, call_done, &c) == NULL) {
		printf("%s: cannot start the client\n", name);
		goto out;
	}
	event_base_loopexit(c.base, &wait);
	event_base_dispatch(c.base);

	if (c.rec_len < c.want) {
		printf("%s: lib/grpc's client wrote %zu bytes in %d s, the wire "
		    "client writes %zu\n", name, c.rec_len, WAIT_S, c.want);
		goto out;
	}
	for (size_t i = 0; i < c.want; i++)
		if (want[i] != c.rec[i]) {
			printf("%s: the bytes differ\n", name);
			print_diff(want, c.rec, c.want, i);
			goto out;
		}
	if (c.rec_len != c.want) {
		printf("%s: lib/grpc's client wrote %zu bytes more\n", name,
		    c.rec_len - c.want);
		goto out;
	}
	if ((*prefix = malloc(jlen)) == NULL)
		goto out;
	memcpy(*prefix, jp, jlen);
	*prefix_len = jlen;
	printf("%s: equal, %zu bytes: hello %zu, SETTINGS ACK and Join "
	    "HEADERS %zu, Join DATA %zu\n", name, c.want, hlen, jlen, dlen);
	rc = 0;
out:
	grpc_client_free(c.cli);
	if (c.rev != NULL)
		event_free(c.rev);
	if (c.lev != NULL)
		event_free(c.lev);
	if (c.base != NULL)
		event_base_free(c.base);
	if (c.fd >= 0)
		close(c.fd);
	if (c.lfd >= 0)
		close(c.lfd);
	wire_enc_free(enc);
	return rc;
}

/* A SETTINGS frame of |n| (id, value) pairs into |f|: its length. */
static size_t
settings_frame(uint8_t *f, const uint32_t (*iv)[2], size_t n)
{
	wire_frame_header(f, n * 6, WIRE_SETTINGS, 0, 0);
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = f + WIRE_FRAME_HEADER + i * 6;
		p[0] = (uint8_t)(iv[i][0] >> 8);
		p[1] = (uint8_t)iv[i][0];
		p[2] = (uint8_t)(iv[i][1] >> 24);
		p[3] = (uint8_t)(iv[i][1] >> 16);
		p[4] = (uint8_t)(iv[i][1] >> 8);
		p[5] = (uint8_t)iv[i][1];
	}
	return WIRE_FRAME_HEADER + n * 6;
}

/* Node 0's and |req|'s Join HEADERS for one server, each encoded by a
 * session of its own as each node's connection would be: equal. */
static int
same_headers(const uint8_t *settings, size_t len,
    const Rdzv__V1__JoinRequest *req)
{
	Rdzv__V1__JoinRequest r0 = *req;
	struct wire_enc *e0 = NULL, *e1 = NULL;
	const uint8_t *p0, *p1;
	size_t l0, l1;
	struct endpoint ep;
	char err[256];
	int rc = -1;

	r0.hostname = "bench-00000";
	r0.rank_hint = 0;
	if (endpoint_parse("127.0.0.1:29400", 0, &ep, err, sizeof(err)) != 0 ||
	    (e0 = wire_enc_new(&ep, CHECK_TIMEOUT_MS)) == NULL ||
	    (e1 = wire_enc_new(&ep, CHECK_TIMEOUT_MS)) == NULL ||
	    wire_enc_join(e0, settings, len, &r0.base, &p0, &l0, err,
	    sizeof(err)) != 0 ||
	    wire_enc_join(e1, settings, len, &req->base, &p1, &l1, err,
	    sizeof(err)) != 0)
		printf("cannot encode two nodes' Joins\n");
	else if (l0 != l1 || memcmp(p0, p1, l0) != 0)
		printf("two nodes of one server have different Join HEADERS: "
		    "the wire client's one encoding per server is wrong\n");
	else {
		printf("two nodes of one server: the same Join HEADERS\n");
		rc = 0;
	}
	wire_enc_free(e0);
	wire_enc_free(e1);
	return rc;
}

int
main(void)
{
	/* lib/grpc/grpc_server_h2.c's: MAX_CONCURRENT_STREAMS,
	 * INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE. */
	static const uint32_t rdzvd[][2] = {
		{ 3, 100 }, { 4, 1 << 20 }, { 6, 16384 },
	};
	static const uint32_t table[][2] = {
		{ 1, 4096 }, { 3, 100 }, { 4, 1 << 20 },
	};
	Rdzv__V1__JoinRequest req = RDZV__V1__JOIN_REQUEST__INIT;
	uint8_t f1[64], f2[64], *p1 = NULL, *p2 = NULL, *p3 = NULL;
	size_t n1, n2, l1 = 0, l2 = 0, l3 = 0;
	int rc = 1;

	signal(SIGPIPE, SIG_IGN);
	/* As rdzv-bench's send_joins makes node 0's. */
	req.rdzv_id = "wire-check";
	req.hostname = "bench-00000";
	req.min_nodes = 4;
	req.max_nodes = 4;
	req.last_call_timeout_ms = 60000;
	req.advertise_addr = "127.0.0.1";
	req.master_port = 29500;
	req.nproc = 1;
	req.has_rank_hint = 1;
	req.agent_version = "rdzv-bench";
	n1 = settings_frame(f1, rdzvd, 3);
	n2 = settings_frame(f2, table, 3);
	if (compare("rdzvd's SETTINGS", f1, n1, &req, &p1, &l1) != 0 ||
	    compare("SETTINGS with HEADER_TABLE_SIZE", f2, n2, &req, &p2,
	    &l2) != 0)
		goto out;
	if (l1 == l2 && memcmp(p1, p2, l1) == 0)
		printf("note: a HEADER_TABLE_SIZE left the Join's HEADERS as "
		    "they were\n");
	/* Another node: its own DATA; and for one server (one
	 * :authority) the same HEADERS as node 0's. */
	req.hostname = "bench-00001";
	req.rank_hint = 1;
	if (compare("node 1", f1, n1, &req, &p3, &l3) != 0 ||
	    same_headers(f1, n1, &req) != 0)
		goto out;
	printf("wire bytes equal lib/grpc's\n");
	rc = 0;
out:
	free(p1);
	free(p2);
	free(p3);
	return rc;
}
