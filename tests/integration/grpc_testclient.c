/*
 * grpc-testclient: drives the gRPC client of lib/ against any server, for
 * tests (test_client.py runs it against grpcio servers). Requests and
 * replies are rdzv.v1.Event.
 *
 *   grpc-testclient --server ADDR [--tls-ca F] [--tls-cert F --tls-key F]
 *       [--server-name N] [--timeout MS] [--connect-timeout MS]
 *       [--keepalive MS] [--keepalive-timeout MS] [--max-message N]
 *       [--repeat N] [--cancel-after N] [--free-after N] [--free-on-close]
 *       [--trailer KEY] unary|stream|bidi PATH [seq=N] [kind=K]
 *       [message=M]
 *
 * Prints each reply as "seq=<n> kind=<k> message=<m>" and each call's end
 * as "status=<NAME> message=<msg>", and exits 0; only usage errors exit
 * non-zero. "unary" goes through grpc_unary_sync, "stream" through the
 * asynchronous client (one client for all --repeat calls, so it shows
 * connection reuse and reconnection; each call prints "local=<addr>" when
 * it starts on an established connection). --cancel-after N cancels the
 * call from inside the Nth message callback, --free-after N frees the
 * client there, --free-on-close frees it inside on_closed: all exercise the
 * client's re-entrancy. --trailer KEY prints "trailer KEY=VALUE" (or
 * "trailer KEY absent") before each call's status: the trailing metadata
 * the call ended with, through grpc_unary_sync_trailer or, for "stream",
 * grpc_ccall_trailer in the done callback.
 *
 * "bidi" opens a stream call (grpc_client_stream) without a first message,
 * then sends N=seq messages (seq 1..N, the given kind and message) one at
 * a time, each once the reply to the one before has arrived, and then
 * half-closes: it shows sends on an open call, before and after the
 * connection is up, and grpc_ccall_close_send.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "grpc.h"
#include "rdzv/v1/types.pb-c.h"

struct run {
	struct event_base *base;
	struct grpc_client *cli;
	int done;
	int nmsgs;
	int cancel_after;
	int free_after;
	int free_on_close;
	const char *trailer;	/* --trailer KEY */
	int bidi;		/* messages to send in "bidi" mode */
	int sent;
	Rdzv__V1__Event *req;
};

/* bidi: sends message number r->sent + 1, or half-closes after the last. */
static void
bidi_next(struct grpc_ccall *cc, struct run *r)
{
	int rc;

	if (r->sent < r->bidi) {
		r->req->seq = (uint64_t)++r->sent;
		rc = grpc_ccall_send(cc, &r->req->base);
	} else {
		rc = grpc_ccall_close_send(cc);
		if (rc == 0 && grpc_ccall_close_send(cc) != -EPIPE)
			printf("second close_send did not say EPIPE\n");
		if (rc == 0 && grpc_ccall_send(cc, &r->req->base) != -EPIPE)
			printf("send after close_send did not say EPIPE\n");
	}
	if (rc != 0)
		printf("send failed: %s\n", strerror(-rc));
}

static void
usage(void)
{
	fprintf(stderr, "usage: grpc-testclient --server ADDR [--tls-ca F] "
	    "[--tls-cert F --tls-key F] [--server-name N] [--timeout MS] "
	    "[--connect-timeout MS] [--keepalive MS] [--keepalive-timeout MS] "
	    "[--max-message N] [--repeat N] [--cancel-after N] "
	    "[--free-after N] [--free-on-close] [--trailer KEY] "
	    "unary|stream|bidi PATH [seq=N] [kind=K] [message=M]\n");
	exit(2);
}

static void
print_event(const ProtobufCMessage *msg)
{
	const Rdzv__V1__Event *ev = (const Rdzv__V1__Event *)msg;
	printf("seq=%" PRIu64 " kind=%s message=%s\n", ev->seq, ev->kind,
	    ev->message);
}

static void
print_status(int status, const char *message)
{
	printf("status=%s message=%s\n", grpc_status_name(status),
	    message != NULL ? message : "");
}

static void
print_trailer(const char *key, const char *value)
{
	if (value != NULL)
		printf("trailer %s=%s\n", key, value);
	else
		printf("trailer %s absent\n", key);
}

static void
on_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct run *r = arg;

	print_event(msg);
	r->nmsgs++;
	if (r->bidi > 0 && r->nmsgs <= r->bidi)
		bidi_next(cc, r);
	if (r->cancel_after > 0 && r->nmsgs == r->cancel_after) {
		grpc_ccall_cancel(cc);
		grpc_ccall_cancel(cc);	/* twice: must be harmless */
	}
	if (r->free_after > 0 && r->nmsgs == r->free_after && r->cli != NULL) {
		grpc_client_free(r->cli);
		r->cli = NULL;
	}
}

static void
on_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct run *r = arg;

	if (r->trailer != NULL)
		print_trailer(r->trailer, grpc_ccall_trailer(cc, r->trailer));
	print_status(status, message);
	grpc_ccall_cancel(cc);	/* inside done: must be a no-op */
	r->done = 1;
	event_base_loopbreak(r->base);
}

static void
on_closed(struct grpc_client *cli, int err, const char *reason, void *arg)
{
	struct run *r = arg;

	printf("closed err=%d reason=%s\n", err, reason);
	if (r->free_on_close && r->cli != NULL) {
		grpc_client_free(r->cli);
		r->cli = NULL;
	}
}

int
main(int argc, char **argv)
{
	enum { O_CA = 256, O_CERT, O_KEY, O_NAME, O_TIMEOUT, O_CTIMEOUT,
	    O_KA, O_KATIMEOUT, O_MAXMSG, O_REPEAT, O_CANCEL, O_FREE, O_FREECLOSE,
	    O_TRAILER };
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "tls-ca", required_argument, NULL, O_CA },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "server-name", required_argument, NULL, O_NAME },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "connect-timeout", required_argument, NULL, O_CTIMEOUT },
		{ "keepalive", required_argument, NULL, O_KA },
		{ "keepalive-timeout", required_argument, NULL, O_KATIMEOUT },
		{ "max-message", required_argument, NULL, O_MAXMSG },
		{ "repeat", required_argument, NULL, O_REPEAT },
		{ "cancel-after", required_argument, NULL, O_CANCEL },
		{ "free-after", required_argument, NULL, O_FREE },
		{ "free-on-close", no_argument, NULL, O_FREECLOSE },
		{ "trailer", required_argument, NULL, O_TRAILER },
		{ NULL, 0, NULL, 0 },
	};
	struct grpc_client_opts opts;
	struct tls_opts tlso = { NULL, NULL, NULL };
	const char *server = NULL;
	uint32_t timeout = 0;
	int repeat = 1, use_tls = 0, c;
	struct run r;
	char err[512];

	memset(&opts, 0, sizeof(opts));
	memset(&r, 0, sizeof(r));
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A peer closing mid-write must be an error, not a death: lib/
	 * leaves the signal's disposition to programs. */
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "s:", longopts, NULL)) != -1) {
		switch (c) {
		case 's': server = optarg; break;
		case O_CA: tlso.ca = optarg; use_tls = 1; break;
		case O_CERT: tlso.cert = optarg; use_tls = 1; break;
		case O_KEY: tlso.key = optarg; use_tls = 1; break;
		case O_NAME: opts.server_name = optarg; break;
		case O_TIMEOUT: timeout = (uint32_t)atol(optarg); break;
		case O_CTIMEOUT:
			opts.connect_timeout_ms = (uint32_t)atol(optarg);
			break;
		case O_KA: opts.keepalive_ms = (uint32_t)atol(optarg); break;
		case O_KATIMEOUT:
			opts.keepalive_timeout_ms = (uint32_t)atol(optarg);
			break;
		case O_MAXMSG: opts.max_message = (size_t)atol(optarg); break;
		case O_REPEAT: repeat = atoi(optarg); break;
		case O_CANCEL: r.cancel_after = atoi(optarg); break;
		case O_FREE: r.free_after = atoi(optarg); break;
		case O_FREECLOSE: r.free_on_close = 1; break;
		case O_TRAILER: r.trailer = optarg; break;
		default: usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (server == NULL || argc < 2 || repeat < 1 ||
	    (strcmp(argv[0], "unary") != 0 && strcmp(argv[0], "stream") != 0 &&
	    strcmp(argv[0], "bidi") != 0))
		usage();
	if (endpoint_parse(server, RDZV_DEFAULT_PORT, &opts.server, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "grpc-testclient: %s\n", err);
		return 2;
	}
	if (use_tls && tls_client_new(&tlso, &opts.tls, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "grpc-testclient: %s\n", err);
		return 2;
	}

	const char *mode = argv[0], *path = argv[1];
	Rdzv__V1__Event req = RDZV__V1__EVENT__INIT;
	for (int i = 2; i < argc; i++) {
		if (strncmp(argv[i], "seq=", 4) == 0)
			req.seq = strtoull(argv[i] + 4, NULL, 10);
		else if (strncmp(argv[i], "kind=", 5) == 0)
			req.kind = argv[i] + 5;
		else if (strncmp(argv[i], "message=", 8) == 0)
			req.message = argv[i] + 8;
		else
			usage();
	}

	if (strcmp(mode, "unary") == 0) {
		for (int i = 0; i < repeat; i++) {
			ProtobufCMessage *reply = NULL;
			char *msg = NULL, *trailer = NULL;
			int st = grpc_unary_sync_trailer(&opts, path,
			    &req.base, &rdzv__v1__event__descriptor, timeout,
			    &reply, &msg, r.trailer,
			    r.trailer != NULL ? &trailer : NULL);
			if (reply != NULL) {
				print_event(reply);
				protobuf_c_message_free_unpacked(reply, NULL);
			}
			if (r.trailer != NULL)
				print_trailer(r.trailer, trailer);
			print_status(st, msg);
			free(msg);
			free(trailer);
		}
		tls_free(opts.tls);
		return 0;
	}

	r.base = event_base_new();
	r.cli = grpc_client_new(r.base, &opts, on_closed, &r);
	if (r.base == NULL || r.cli == NULL) {
		fprintf(stderr, "grpc-testclient: cannot create the client\n");
		return 2;
	}
	for (int i = 0; i < repeat && r.cli != NULL; i++) {
		const char *local = grpc_client_local_addr(r.cli);
		if (local != NULL)
			printf("local=%s\n", local);
		r.done = 0;
		r.nmsgs = 0;
		struct grpc_ccall *cc;
		if (strcmp(mode, "bidi") == 0) {
			r.bidi = (int)req.seq;
			r.sent = 0;
			r.req = &req;
			cc = grpc_client_stream(r.cli, path, NULL,
			    &rdzv__v1__event__descriptor, timeout, on_msg,
			    on_done, &r);
			if (cc != NULL)
				bidi_next(cc, &r);
		} else
			cc = grpc_client_call(r.cli, path, &req.base,
			    &rdzv__v1__event__descriptor, timeout, on_msg,
			    on_done, &r);
		if (cc == NULL) {
			printf("status=%s message=cannot start: %s\n",
			    grpc_status_name(GRPC_INTERNAL), strerror(errno));
			break;
		}
		/* The connect timeout and --timeout bound this loop. */
		while (!r.done)
			if (event_base_loop(r.base, EVLOOP_ONCE) < 0)
				break;
	}
	grpc_client_free(r.cli);
	/* Let a client freed inside a callback finish going away. */
	event_base_loop(r.base, EVLOOP_NONBLOCK);
	event_base_free(r.base);
	tls_free(opts.tls);
	return 0;
}
