/*
 * grpc-testserver: the gRPC server of lib/ with methods made for transport
 * tests (test_transport.py drives it with grpcio and raw sockets). Every
 * method takes and returns rdzv.v1.Event:
 *
 *   /rdzv.test.Test/Echo    replies the request; kind "whoami" puts the
 *                           caller's identity into message
 *   /rdzv.test.Test/Fail    finishes with status seq and message message
 *   /rdzv.test.Test/Sleep   never answers: a deadline or a cancel ends it
 *   /rdzv.test.Test/Flood   streams Events with a seq-byte message (default
 *                           65536) as fast as the transport takes them,
 *                           generation messages (0: forever)
 *   /rdzv.test.Test/Stream  streams seq Events numbered 1..seq, then OK
 *   /rdzv.test.Test/Later   replies the request after seq milliseconds,
 *                           from a timer
 *   /rdzv.test.Test/Chat    bidirectional: answers each Event with itself
 *                           (kind "fail": finishes with status seq), and
 *                           the end of the client's stream with an Event
 *                           of kind "end" whose seq counts the messages
 *
 * plus grpc.health.v1.Health/Check. Prints "listening on HOST:PORT" per
 * listener and shuts down gracefully on SIGTERM (exit 0).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "grpc.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/types.pb-c.h"

/* A server stream in progress: what to send and how far it got. */
struct streamer {
	struct grpc_call *call;
	int flood;		/* Flood: fixed-size payloads */
	char *payload;
	uint64_t sent;
	uint64_t limit;		/* 0: no end */
};

static struct event_base *base;
static struct grpc_server *srv;

static void
echo(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__Event *req = (const Rdzv__V1__Event *)msg;
	Rdzv__V1__Event rep = *req;
	char buf[600];

	/* whoami also names the connection (its address while it lives)
	 * and the peer, so tests can tell whether a channel reconnected. */
	if (strcmp(req->kind, "whoami") == 0) {
		snprintf(buf, sizeof(buf), "identity=%s",
		    grpc_call_identity(call));
		rep.message = buf;
		rep.kind = (char *)grpc_call_peer(call);
		rep.generation = (uint64_t)(uintptr_t)grpc_call_conn(call);
	}
	if (grpc_call_reply(call, &rep.base) != 0)
		grpc_call_finish(call, GRPC_INTERNAL, "reply failed");
}

static void
fail(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__Event *req = (const Rdzv__V1__Event *)msg;
	char key[128];
	const char *eq;
	int rc;

	/* kind "key=value;key=value": custom trailers with the status. */
	for (const char *p = req->kind; *p != '\0'; p += strcspn(p, ";"),
	    p += *p == ';') {
		size_t n = strcspn(p, ";");
		if ((eq = memchr(p, '=', n)) == NULL ||
		    (size_t)(eq - p) >= sizeof(key))
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
		char *val = strndup(eq + 1, n - (size_t)(eq - p) - 1);
		rc = val != NULL ? grpc_call_set_trailer(call, key, val) :
		    -ENOMEM;
		free(val);
		if (rc != 0) {
			grpc_call_finish(call, GRPC_INTERNAL, "trailer %s: %s",
			    key, strerror(-rc));
			return;
		}
	}
	grpc_call_finish(call, (int)req->seq, "%s", req->message);
}

static void
sleep_close(struct grpc_call *call, int cancelled, void *arg)
{
	/* Nothing to free: the call only had to end. */
}

static void
sleep_forever(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	grpc_call_on_close(call, sleep_close, NULL);
}

static void
streamer_close(struct grpc_call *call, int cancelled, void *arg)
{
	struct streamer *s = arg;

	free(s->payload);
	free(s);
}

/* Sends until the transport pushes back, the limit or an error. */
static void
streamer_run(struct grpc_call *call, void *arg)
{
	struct streamer *s = arg;
	Rdzv__V1__Event ev = RDZV__V1__EVENT__INIT;

	while (s->limit == 0 || s->sent < s->limit) {
		ev.seq = s->sent + 1;
		ev.kind = s->flood ? "flood" : "stream";
		if (s->flood)
			ev.message = s->payload;
		int rc = grpc_call_send(call, &ev.base);
		if (rc == -ENOBUFS) {
			grpc_call_on_writable(call, streamer_run, s);
			return;
		}
		if (rc != 0) {
			grpc_call_finish(call, GRPC_INTERNAL, "send: %s",
			    strerror(-rc));
			return;
		}
		s->sent++;
	}
	grpc_call_finish(call, GRPC_OK, NULL);
}

static void
streamer_start(struct grpc_call *call, const Rdzv__V1__Event *req, int flood)
{
	struct streamer *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	s->call = call;
	s->flood = flood;
	if (flood) {
		size_t n = req->seq != 0 ? req->seq : 65536;
		if (n > (1 << 22))
			n = 1 << 22;
		s->payload = malloc(n + 1);
		if (s->payload == NULL) {
			free(s);
			grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED,
			    "out of memory");
			return;
		}
		memset(s->payload, 'x', n);
		s->payload[n] = '\0';
		s->limit = req->generation;
	} else
		s->limit = req->seq;
	grpc_call_on_close(call, streamer_close, s);
	if (s->limit == 0 && !flood) {
		grpc_call_finish(call, GRPC_OK, NULL);
		return;
	}
	streamer_run(call, s);
}

static void
flood(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	streamer_start(call, (const Rdzv__V1__Event *)msg, 1);
}

static void
stream(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	streamer_start(call, (const Rdzv__V1__Event *)msg, 0);
}

/* An answer given long after the handler returned. */
struct later {
	struct grpc_call *call;
	struct event *timer;
	Rdzv__V1__Event *req;
};

static void
later_close(struct grpc_call *call, int cancelled, void *arg)
{
	struct later *l = arg;

	event_free(l->timer);
	rdzv__v1__event__free_unpacked(l->req, NULL);
	free(l);
}

static void
later_fire(evutil_socket_t fd, short what, void *arg)
{
	struct later *l = arg;

	/* The reply runs later_close, which frees |l|. */
	grpc_call_reply(l->call, &l->req->base);
}

static void
later(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__Event *req = (const Rdzv__V1__Event *)msg;
	struct later *l = calloc(1, sizeof(*l));
	uint8_t buf[1024];
	size_t n;

	if (l == NULL || protobuf_c_message_get_packed_size(msg) > sizeof(buf)) {
		free(l);
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "request too big");
		return;
	}
	/* The request is freed when the handler returns: keep a copy. */
	n = protobuf_c_message_pack(msg, buf);
	l->req = rdzv__v1__event__unpack(NULL, n, buf);
	l->call = call;
	l->timer = evtimer_new(base, later_fire, l);
	struct timeval tv = { (time_t)(req->seq / 1000),
	    (suseconds_t)(req->seq % 1000) * 1000 };
	evtimer_add(l->timer, &tv);
	grpc_call_on_close(call, later_close, l);
}

/* Chat: how many messages the call has seen. */
static void
chat_close(struct grpc_call *call, int cancelled, void *arg)
{
	free(arg);
}

static void
chat_message(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__Event *req = (const Rdzv__V1__Event *)msg;
	Rdzv__V1__Event end = RDZV__V1__EVENT__INIT;
	uint64_t *count = arg;

	if (req == NULL) {
		end.kind = "end";
		end.seq = *count;
		grpc_call_reply(call, &end.base);
		return;
	}
	++*count;
	if (strcmp(req->kind, "fail") == 0) {
		grpc_call_finish(call, (int)req->seq, "%s", req->message);
		return;
	}
	if (grpc_call_send(call, msg) != 0)
		grpc_call_finish(call, GRPC_INTERNAL, "send failed");
}

static void
chat(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	uint64_t *count = calloc(1, sizeof(*count));

	if (count == NULL) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	grpc_call_on_close(call, chat_close, count);
	grpc_call_on_message(call, chat_message, count);
}

static void
health_check(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	Grpc__Health__V1__HealthCheckResponse rep =
	    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;

	rep.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
	grpc_call_reply(call, &rep.base);
}

static const struct grpc_method methods[] = {
	{ "/rdzv.test.Test/Echo", &rdzv__v1__event__descriptor, 0, echo,
	    NULL },
	{ "/rdzv.test.Test/Fail", &rdzv__v1__event__descriptor, 0, fail,
	    NULL },
	{ "/rdzv.test.Test/Sleep", &rdzv__v1__event__descriptor, 0,
	    sleep_forever, NULL },
	{ "/rdzv.test.Test/Flood", &rdzv__v1__event__descriptor, 1, flood,
	    NULL },
	{ "/rdzv.test.Test/Stream", &rdzv__v1__event__descriptor, 1, stream,
	    NULL },
	{ "/rdzv.test.Test/Later", &rdzv__v1__event__descriptor, 0, later,
	    NULL },
	{ "/rdzv.test.Test/Chat", &rdzv__v1__event__descriptor, 1, chat,
	    NULL, 1 },
	{ "/grpc.health.v1.Health/Check",
	    &grpc__health__v1__health_check_request__descriptor, 0,
	    health_check, NULL },
};

static void
shutdown_done(void *arg)
{
	event_base_loopbreak(base);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	static int stopping;

	if (stopping++) {
		event_base_loopbreak(base);
		return;
	}
	grpc_server_shutdown(srv, 5000, shutdown_done, NULL);
}

static void
usage(void)
{
	fprintf(stderr, "usage: grpc-testserver --listen ADDR [--listen ADDR] "
	    "[--tls-cert F --tls-key F [--tls-ca F]] [--max-message N] "
	    "[--out-cap N] [--keepalive-ms N] [--max-conns N] "
	    "[--max-streams N]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "tls-cert", required_argument, NULL, 'c' },
		{ "tls-key", required_argument, NULL, 'k' },
		{ "tls-ca", required_argument, NULL, 'a' },
		{ "max-message", required_argument, NULL, 'm' },
		{ "out-cap", required_argument, NULL, 'o' },
		{ "keepalive-ms", required_argument, NULL, 'K' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "max-streams", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	struct grpc_server_opts opts = { .keepalive_ms = 5000 };
	struct tls_opts topts = { NULL, NULL, NULL };
	struct tls_ctx *tls = NULL;
	const char *listen[8];
	size_t n_listen = 0;
	char err[512];
	int ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'l':
			if (n_listen == sizeof(listen) / sizeof(listen[0]))
				usage();
			listen[n_listen++] = optarg;
			break;
		case 'c': topts.cert = optarg; break;
		case 'k': topts.key = optarg; break;
		case 'a': topts.ca = optarg; break;
		case 'm': opts.max_message = strtoul(optarg, NULL, 0); break;
		case 'o': opts.out_cap = strtoul(optarg, NULL, 0); break;
		case 'K': opts.keepalive_ms = strtoul(optarg, NULL, 0); break;
		case 'C': opts.max_conns = strtoul(optarg, NULL, 0); break;
		case 'S': opts.max_streams = strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (n_listen == 0 || optind != argc)
		usage();
	signal(SIGPIPE, SIG_IGN);

	if (topts.cert != NULL && tls_server_new(&topts, &tls, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "grpc-testserver: %s\n", err);
		return 1;
	}
	base = event_base_new();
	srv = grpc_server_new(base, methods, sizeof(methods) /
	    sizeof(methods[0]), &opts);
	if (base == NULL || srv == NULL) {
		fprintf(stderr, "grpc-testserver: out of memory\n");
		return 1;
	}
	/* Signals are ours before anyone can read "listening on". */
	struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
	struct event *sigint = evsignal_new(base, SIGINT, on_signal, NULL);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	for (size_t i = 0; i < n_listen; i++) {
		struct endpoint ep;
		char buf[400];
		if (endpoint_parse(listen[i], RDZV_DEFAULT_PORT, &ep, err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "grpc-testserver: %s\n", err);
			return 1;
		}
		int rc = grpc_server_listen(srv, &ep, tls);
		if (rc != 0) {
			fprintf(stderr, "grpc-testserver: listen %s: %s\n",
			    listen[i], strerror(-rc));
			return 1;
		}
		if (ep.kind == ENDPOINT_TCP)
			ep.port = (uint16_t)grpc_server_port(srv, i);
		endpoint_format(&ep, buf, sizeof(buf));
		printf("listening on %s\n", buf);
		fflush(stdout);
	}

	event_base_dispatch(base);

	grpc_server_free(srv);
	event_free(sigterm);
	event_free(sigint);
	tls_free(tls);
	event_base_free(base);
	return 0;
}
