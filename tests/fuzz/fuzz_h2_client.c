/*
 * Fuzz target for the gRPC client transport (lib/grpc_client*.c on
 * nghttp2) as a server drives it: the bytes of a "server" in, the
 * client's calls and callbacks behind them, the way rdzv-agent and rdzvctl
 * use it (grpc.h): a client on a private event loop, unary calls with
 * a deadline and server-streaming calls without, replies decoded with the
 * real reply types and checked for UTF-8, callbacks that cancel calls,
 * start new ones or free the client.
 *
 * Every input gets a new event loop and client. The client connects to a
 * unix socket the target listens on (its connect path is the real one),
 * starts its calls, and the target accepts the connection, writes the
 * input as the server's bytes and reads and drops what the client sends,
 * turning the loop without blocking (a bounded number of turns) until
 * everything was read and nothing is left to do. Then the server closes,
 * the client sees it, and the client and the loop are freed.
 *
 * Input layout (tests/fuzz/make_corpus_client.py records the seeds from a
 * real rdzvd answering grpcio):
 *   byte 0   bits 0-2: calls, minus 1; bits 3-4: what the callbacks do
 *            (0 nothing; 1 a call cancels itself at its second message;
 *            2 a call that ends starts another of its method, up to 4 in
 *            all; 3 the first call to end frees the client); bit 5:
 *            replies are limited to 1 KiB rather than 4 MiB; bit 6: the
 *            server closes as soon as the client has read its last byte,
 *            without waiting for the client to be done; bit 7: the calls
 *            of 2 start at the next turn, before the loop reads again, as
 *            the agent's decisions start theirs (from an event of their
 *            own), rather than inside the callback
 *   byte 1   the chunking: 0 writes the bytes at once, otherwise in chunks
 *            of 1 to 4 * that many bytes, with a loop turn after each
 *   then     each call's method, an index into methods[] (modulo): the
 *            calls are streams 1, 3, 5, ... in this order
 *   rest     what the server sends, from its SETTINGS frame on
 *
 * Invariants checked (a violation aborts): every call started ends
 * exactly once (its done callback), never before grpc_client_call() has
 * returned it, with a message unless it ended OK, and no message arrives
 * after its end; by the time the client is freed every call has ended.
 * Leaks and memory errors show under ASan.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "fuzz_peer.h"
#include "grpc.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"

/* Turns with nothing done before the client counts as idle. */
#define QUIET_TURNS	3
/* Turns beyond one per chunk: the connect, the answers, the close. */
#define EXTRA_TURNS	256
#define MAX_CALLS	8
#define MAX_CHAINED	4
/* rdzvctl's deadline of a unary call (client/ctl/call.c). */
#define UNARY_TIMEOUT_MS 10000

/* What rdzv-agent and rdzvctl call, with their reply types. */
static const struct method {
	const char				*path;
	const ProtobufCMessageDescriptor	*reply;
	int					 streaming;
} methods[] = {
	{ "/grpc.health.v1.Health/Check",
	    &grpc__health__v1__health_check_response__descriptor, 0 },
	{ "/rdzv.v1.Rendezvous/Join", &rdzv__v1__join_event__descriptor, 1 },
	{ "/rdzv.v1.Rendezvous/Report",
	    &rdzv__v1__report_response__descriptor, 0 },
	{ "/rdzv.v1.Rendezvous/Leave",
	    &rdzv__v1__leave_response__descriptor, 0 },
	{ "/rdzv.v1.Control/GetJob", &rdzv__v1__job__descriptor, 0 },
	{ "/rdzv.v1.Control/ListJobs",
	    &rdzv__v1__list_jobs_response__descriptor, 0 },
	{ "/rdzv.v1.Control/Watch", &rdzv__v1__watch_event__descriptor, 1 },
	{ "/rdzv.v1.Control/ListEvents",
	    &rdzv__v1__list_events_response__descriptor, 0 },
	{ "/rdzv.v1.Control/ServerInfo",
	    &rdzv__v1__server_info_response__descriptor, 0 },
	{ "/rdzv.v1.Control/CloseJob", &rdzv__v1__job__descriptor, 0 },
};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

enum behaviour {
	PLAIN,
	CANCEL_SELF,	/* at the second message */
	CHAIN,		/* a call that ends starts another */
	FREE_CLIENT,	/* the first call to end frees the client */
};

struct fcall {
	struct fuzz		*fz;
	const struct method	*m;
	struct grpc_ccall	*cc;
	int			 msgs;
	int			 done;
};

struct fuzz {
	struct event_base	*base;
	struct grpc_client	*cli;	/* NULL once freed */
	enum behaviour		 behaviour;
	int			 chain_later;	/* byte 0, bit 7 */
	const struct method	*later[MAX_CHAINED];	/* to start */
	int			 n_later;
	struct fcall		 calls[MAX_CALLS + MAX_CHAINED];
	int			 n_calls;
	int			 chained;
	int			 closed;	/* on_closed runs */
};

static int debug;
static char dir[64], sock_path[80];
static int listen_fd = -1;

static void
cleanup(void)
{
	if (listen_fd >= 0)
		close(listen_fd);
	unlink(sock_path);
	rmdir(dir);
}

static void
setup_once(void)
{
	struct sockaddr_un sun;

	if (dir[0] != '\0')
		return;
	debug = fuzz_peer_start(NULL, dir, sizeof(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
	atexit(cleanup);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (listen_fd < 0 ||
	    bind(listen_fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    listen(listen_fd, 16) != 0) {
		perror("fuzz: listen");
		abort();
	}
}

/* ----------------------------------------------------------- the calls */

static void	start_call(struct fuzz *, const struct method *);

static void
on_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct fcall *c = arg;

	FUZZ_ASSERT(!c->done);
	FUZZ_ASSERT(cc == c->cc);
	FUZZ_ASSERT(msg != NULL && msg->descriptor == c->m->reply);
	if (++c->msgs == 2 && c->fz->behaviour == CANCEL_SELF) {
		grpc_ccall_cancel(cc);
		FUZZ_ASSERT(c->done);
	}
}

static void
on_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct fcall *c = arg;
	struct fuzz *fz = c->fz;

	FUZZ_ASSERT(!c->done);
	/* A call ending from inside grpc_client_call is reported from the
	 * loop instead, so the pointer is known by now. */
	FUZZ_ASSERT(cc == c->cc);
	FUZZ_ASSERT(status >= 0);
	FUZZ_ASSERT((status == GRPC_OK) == (message == NULL));
	c->done = 1;
	if (debug)
		fprintf(stderr, "fuzz: %s: %s %s (%d messages)\n", c->m->path,
		    grpc_status_name(status), message ? message : "",
		    c->msgs);
	switch (fz->behaviour) {
	case CHAIN:
		if (fz->chained < MAX_CHAINED && fz->cli != NULL) {
			fz->chained++;
			if (fz->chain_later)
				fz->later[fz->n_later++] = c->m;
			else
				start_call(fz, c->m);
		}
		break;
	case FREE_CLIENT:
		if (fz->cli != NULL) {
			struct grpc_client *cli = fz->cli;
			fz->cli = NULL;
			grpc_client_free(cli);
		}
		break;
	default:
		break;
	}
}

static void
on_closed(struct grpc_client *cli, int err, const char *reason, void *arg)
{
	struct fuzz *fz = arg;

	FUZZ_ASSERT(reason != NULL && reason[0] != '\0');
	fz->closed++;
}

static void
start_call(struct fuzz *fz, const struct method *m)
{
	Grpc__Health__V1__HealthCheckRequest req =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct fcall *c;

	FUZZ_ASSERT(fz->n_calls < MAX_CALLS + MAX_CHAINED);
	c = &fz->calls[fz->n_calls++];
	c->fz = fz;
	c->m = m;
	/* What a request holds does not matter to the transport. */
	req.service = (char *)"rdzv.v1.Rendezvous";
	c->cc = grpc_client_call(fz->cli, m->path, &req.base, m->reply,
	    m->streaming ? 0 : UNARY_TIMEOUT_MS, on_msg, on_done, c);
	if (c->cc == NULL) {
		/* Only a client being freed refuses a call. */
		FUZZ_ASSERT(errno == ESHUTDOWN);
		fz->n_calls--;
	}
}

/* ------------------------------------------------------------ the server */

/* Connections the client made and the target has not served: a second
 * one after GOAWAY, or one the client gave up. */
static void
drop_pending(void)
{
	int fd;

	while ((fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
}

/*
 * One turn: the calls the callbacks asked for during the last one start,
 * before the loop looks at the socket again (as a call the agent decides
 * on starts from an event of its own, whatever else is pending), then the
 * loop runs until nothing is active.
 */
static void
loop_turn(struct fuzz *fz)
{
	for (int i = 0; i < fz->n_later; i++) {
		if (fz->cli != NULL)
			start_call(fz, fz->later[i]);
	}
	fz->n_later = 0;
	event_base_loop(fz->base, EVLOOP_NONBLOCK);
}

/*
 * The server's side: accepts the client's connection, writes |in| as
 * |chunking| says, drains what the client sends, and turns the loop until
 * the client has read everything and stays quiet; then closes.
 */
static void
serve(struct fuzz *fz, const uint8_t *in, size_t len, uint8_t chunking,
    int close_early)
{
	uint32_t state = 0x9e3779b9u ^ chunking;
	size_t pos = 0, maxchunk = 4 * (size_t)chunking;
	size_t turns = EXTRA_TURNS + (maxchunk > 0 ? len : 1);
	int fd = -1, quiet = 0, gone = 0;

	for (size_t turn = 0; turn < turns && quiet < QUIET_TURNS; turn++) {
		loop_turn(fz);
		if (fd < 0) {
			fd = accept4(listen_fd, NULL, NULL,
			    SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0) {
				/* Not connected (yet, or ever: the client
				 * was freed before it connected). */
				quiet = fuzz_loop_active(fz->base) ? 0 : quiet + 1;
				continue;
			}
		}
		if (pos < len && !gone && fuzz_send_chunk(fd, in, len, &pos,
		    maxchunk, &state) != 0)
			gone = 1;
		if (pos == len && close_early && !gone &&
		    fuzz_unread(fd) == 0) {
			close(fd);
			fd = -1;
			gone = 1;
			continue;
		}
		ssize_t got = gone ? 0 : fuzz_drain(fd);
		if (got < 0)
			gone = 1;
		if ((pos == len || gone) && got <= 0 &&
		    (gone || fuzz_unread(fd) == 0) &&
		    !fuzz_loop_active(fz->base))
			quiet++;
		else
			quiet = 0;
	}
	if (debug)
		fprintf(stderr, "fuzz: %zu of %zu bytes sent\n", pos, len);
	/* The server goes away; the client sees it. */
	if (fd >= 0)
		close(fd);
	quiet = 0;
	for (size_t turn = 0; turn < EXTRA_TURNS && quiet < QUIET_TURNS;
	    turn++) {
		loop_turn(fz);
		quiet = fuzz_loop_active(fz->base) ? 0 : quiet + 1;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grpc_client_opts o;
	struct fuzz fz;
	size_t n, hdr;

	if (size < 2 || size > 256 * 1024)
		return 0;
	n = 1 + (data[0] & 7);
	hdr = 2 + n;
	if (size < hdr)
		return 0;
	setup_once();

	memset(&fz, 0, sizeof(fz));
	fz.behaviour = (enum behaviour)((data[0] >> 3) & 3);
	fz.chain_later = (data[0] & 128) != 0;
	memset(&o, 0, sizeof(o));
	o.server.kind = ENDPOINT_UNIX;
	snprintf(o.server.path, sizeof(o.server.path), "%s", sock_path);
	o.max_message = data[0] & 32 ? 1024 : 0;
	if ((fz.base = event_base_new()) == NULL ||
	    (fz.cli = grpc_client_new(fz.base, &o, on_closed, &fz)) == NULL)
		abort();
	for (size_t i = 0; i < n; i++)
		start_call(&fz, &methods[data[2 + i] % N_METHODS]);

	serve(&fz, data + hdr, size - hdr, data[1], (data[0] & 64) != 0);

	if (fz.cli != NULL) {
		struct grpc_client *cli = fz.cli;
		fz.cli = NULL;
		grpc_client_free(cli);
	}
	for (int i = 0; i < fz.n_calls; i++)
		FUZZ_ASSERT(fz.calls[i].done);
	event_base_free(fz.base);
	drop_pending();
	return 0;
}
