/*
 * rdzv-bench --client wire: nodes that cost about what rdzv-floor's client
 * costs, while rdzvd receives exactly the bytes rdzv's client library
 * sends.
 *
 * The bytes a node writes are encoded once per server by nghttp2 as
 * lib/grpc's client encodes them (wire_enc.c; wire_check.c proves them
 * equal): the hello (preface, SETTINGS, WINDOW_UPDATE, Health/Check) when
 * the connection is up, and, once every node is connected, the SETTINGS
 * ACK with the Join's HEADERS and the node's own DATA in one write, as
 * rdzv-floor does. What a node reads goes through a small frame parser:
 * header blocks are decoded by nghttp2's HPACK inflater (one per
 * connection, the server's encoder keeps state per connection), gRPC
 * messages reassembled by lib/grpc's reader, and the Join's events
 * unpacked by protobuf-c and handed to the checks rdzv_bench_run.c runs
 * for the grpc client too. PINGs are answered, windows updated as nghttp2
 * would (at half the window); RST_STREAM, GOAWAY, a status other than OK
 * or the connection's end fail the run, naming the node.
 *
 * Cleartext only; --failover stays with the grpc client.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "bench.h"
#include "grpc_wire.h"
#include "wire_enc.h"

#define MAX_MESSAGE	(4u << 20)	/* lib/grpc's default */
#define READ_ROUNDS	4

struct wire_server {
	struct sockaddr_storage	 sa;
	socklen_t		 salen;
	char			 name[300];
	struct wire_enc		*enc;
	const uint8_t		*hello;
	size_t			 hello_len;
	uint8_t			*settings;	/* its first SETTINGS frame */
	size_t			 settings_len;
	const uint8_t		*join;		/* SETTINGS ACK, Join HEADERS */
	size_t			 join_len;
};

/* A stream as the node reads it: the Check (1) or the Join (3). */
struct wire_stream {
	int32_t			 id;
	int			 blocks;	/* header blocks read */
	int			 http_status;
	int			 grpc_status;	/* -1 until the trailers */
	char			 message[128];	/* grpc-message */
	int			 ended;
	uint32_t		 unacked;	/* DATA since WINDOW_UPDATE */
	struct grpc_reader	 reader;
};

struct wire_conn {
	struct agent		*a;
	struct wire_server	*srv;
	int			 fd;
	int			 open;		/* connected, not closed */
	int			 writing;	/* ev waits for EV_WRITE too */
	struct event		*ev;		/* made at connect */
	uint8_t			*in;		/* a frame not whole yet */
	size_t			 in_len;
	uint8_t			*out;		/* what the socket did not take */
	size_t			 out_len;
	nghttp2_hd_inflater	*inf;
	int			 settings_seen;
	int32_t			 block_stream;	/* header block being read */
	int			 block_end;	/* it ends its stream */
	uint32_t		 unacked;	/* connection DATA */
	struct wire_stream	 check, join;
};

static void	conn_cb(evutil_socket_t, short, void *);

/* The run fails with |fmt|, naming the node and its server, unless the
 * node was closed on purpose or the run is over. Returns -1. */
static int	conn_fail(struct wire_conn *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static int
conn_fail(struct wire_conn *wc, const char *fmt, ...)
{
	struct agent *a = wc->a;
	struct bench *b = a->job->b;
	char why[400];
	va_list ap;

	if (b->closing || a->killed || b->phase == PHASE_DONE)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	bench_fail(b, "%s node %d (%s): %s", a->job->rdzv_id, a->idx,
	    wc->srv->name, why);
	return -1;
}

static void
conn_close(struct wire_conn *wc)
{
	if (wc->fd < 0)
		return;
	if (wc->ev != NULL)
		event_free(wc->ev);
	wc->ev = NULL;
	close(wc->fd);
	wc->fd = -1;
	wc->open = 0;
}

/* Waits for the socket to be readable, and writable too while output is
 * left. */
static void
conn_arm(struct wire_conn *wc, int writing)
{
	struct event_base *base = wc->a->job->b->base;

	if (writing == wc->writing)
		return;
	event_del(wc->ev);
	wc->writing = writing;
	event_assign(wc->ev, base, wc->fd, EV_READ | EV_PERSIST |
	    (writing ? EV_WRITE : 0), conn_cb, wc);
	event_add(wc->ev, NULL);
}

/* Writes |p| now, keeping what the socket does not take. 0 or -1. */
static int
conn_write(struct wire_conn *wc, const uint8_t *p, size_t n)
{
	uint8_t *q;

	while (wc->out_len == 0 && n > 0) {
		ssize_t w = send(wc->fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return conn_fail(wc, "write: %s", strerror(errno));
		break;
	}
	if (n == 0)
		return 0;
	if ((q = realloc(wc->out, wc->out_len + n)) == NULL)
		return conn_fail(wc, "out of memory");
	memcpy(q + wc->out_len, p, n);
	wc->out = q;
	wc->out_len += n;
	conn_arm(wc, 1);
	return 0;
}

static int
conn_flush(struct wire_conn *wc)
{
	uint8_t *p = wc->out;
	size_t n = wc->out_len;

	wc->out = NULL;
	wc->out_len = 0;
	int rc = conn_write(wc, p, n);
	free(p);
	if (rc == 0 && wc->out_len == 0)
		conn_arm(wc, 0);
	return rc;
}

static int
window_update(struct wire_conn *wc, int32_t stream, uint32_t n)
{
	uint8_t f[WIRE_FRAME_HEADER + 4];

	wire_frame_header(f, 4, WIRE_WINDOW_UPDATE, 0, stream);
	f[9] = (uint8_t)(n >> 24 & 0x7f);
	f[10] = (uint8_t)(n >> 16);
	f[11] = (uint8_t)(n >> 8);
	f[12] = (uint8_t)n;
	return conn_write(wc, f, sizeof(f));
}

static struct wire_stream *
conn_stream(struct wire_conn *wc, int32_t id)
{
	if (id == WIRE_CHECK_STREAM)
		return &wc->check;
	if (id == WIRE_JOIN_STREAM && wc->a->t_join_sent != 0)
		return &wc->join;
	return NULL;
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* One event of the Join stream (grpc_reader_feed's callback). */
static int
join_msg(void *arg, const uint8_t *msg, size_t len)
{
	struct wire_conn *wc = arg;
	Rdzv__V1__JoinEvent *ev;

	ev = rdzv__v1__join_event__unpack(NULL, len, msg);
	if (ev == NULL)
		return conn_fail(wc, "Join: an event protobuf-c cannot "
		    "decode (%zu bytes)", len);
	bench_join_event(wc->a, ev);
	rdzv__v1__join_event__free_unpacked(ev, NULL);
	return 0;
}

/* A header block is whole: :status must be 200; a block that ends the
 * stream holds its trailers, grpc-status first of all. */
static int
block_done(struct wire_conn *wc, struct wire_stream *s)
{
	const char *what = s == &wc->check ? "connect (Health/Check)" : "Join";

	if (s->blocks++ == 0 && s->http_status != 200)
		return conn_fail(wc, "%s: HTTP status %d", what,
		    s->http_status);
	if (!wc->block_end)
		return 0;
	s->ended = 1;
	if (s->grpc_status < 0)
		return conn_fail(wc, "%s: the stream ended without "
		    "grpc-status", what);
	if (s == &wc->join) {
		if (grpc_reader_partial(&s->reader))
			return conn_fail(wc, "Join: the stream ended inside "
			    "a message");
		bench_join_ended(wc->a, s->grpc_status,
		    s->message[0] != '\0' ? s->message : NULL);
		return 0;
	}
	if (s->grpc_status != GRPC_OK)
		return conn_fail(wc, "%s: %s%s%s", what,
		    grpc_status_name(s->grpc_status),
		    s->message[0] != '\0' ? ": " : "", s->message);
	bench_connected(wc->a);
	return 0;
}

static void
header(struct wire_stream *s, const nghttp2_nv *nv)
{
	char v[16];

	if (nv->namelen == 7 && memcmp(nv->name, ":status", 7) == 0) {
		snprintf(v, sizeof(v), "%.*s", (int)nv->valuelen, nv->value);
		s->http_status = atoi(v);
	} else if (nv->namelen == 11 &&
	    memcmp(nv->name, "grpc-status", 11) == 0) {
		snprintf(v, sizeof(v), "%.*s", (int)nv->valuelen, nv->value);
		s->grpc_status = atoi(v);
	} else if (nv->namelen == 12 &&
	    memcmp(nv->name, "grpc-message", 12) == 0) {
		snprintf(s->message, sizeof(s->message), "%.*s",
		    (int)nv->valuelen, nv->value);
	}
}

/* A fragment of the header block being read, decoded by nghttp2's HPACK
 * inflater; |last| when it ends the block. */
static int
inflate(struct wire_conn *wc, const uint8_t *p, size_t n, int last)
{
	struct wire_stream *s = conn_stream(wc, wc->block_stream);
	nghttp2_nv nv;
	int fl;

	if (s == NULL)
		return conn_fail(wc, "HEADERS on stream %d, which this client "
		    "did not open", wc->block_stream);
	if (wc->inf == NULL && nghttp2_hd_inflate_new(&wc->inf) != 0)
		return conn_fail(wc, "out of memory");
	for (;;) {
		fl = 0;
		ssize_t rv = nghttp2_hd_inflate_hd2(wc->inf, &nv, &fl, p, n,
		    last);
		if (rv < 0)
			return conn_fail(wc, "HPACK: %s",
			    nghttp2_strerror((int)rv));
		p += rv;
		n -= (size_t)rv;
		if (fl & NGHTTP2_HD_INFLATE_EMIT)
			header(s, &nv);
		if (fl & NGHTTP2_HD_INFLATE_FINAL) {
			nghttp2_hd_inflate_end_headers(wc->inf);
			break;
		}
		if (!(fl & NGHTTP2_HD_INFLATE_EMIT) && n == 0)
			break;
	}
	if (!last)
		return 0;
	wc->block_stream = 0;
	return block_done(wc, s);
}

/* The server's SETTINGS: every connection to one server must get the
 * same (the Join's HEADERS were encoded after the first). */
static int
settings(struct wire_conn *wc, const uint8_t *f, size_t n)
{
	struct wire_server *srv = wc->srv;

	if (wc->settings_seen)
		return 0;	/* a change later: nothing to encode */
	wc->settings_seen = 1;
	if (srv->settings == NULL) {
		if ((srv->settings = malloc(n)) == NULL)
			return conn_fail(wc, "out of memory");
		memcpy(srv->settings, f, n);
		srv->settings_len = n;
		return 0;
	}
	if (n != srv->settings_len || memcmp(f, srv->settings, n) != 0)
		return conn_fail(wc, "SETTINGS differ from the server's on "
		    "another connection; the wire client encodes the Join "
		    "once per server");
	return 0;
}

static int
data(struct wire_conn *wc, struct wire_stream *s, int flags,
    const uint8_t *p, size_t n, size_t flen)
{
	int rc;

	/* nghttp2 grants the window back once half of it is used. */
	if ((wc->unacked += (uint32_t)flen) >= WIRE_CONN_WINDOW / 2) {
		if (window_update(wc, 0, wc->unacked) != 0)
			return -1;
		wc->unacked = 0;
	}
	if ((s->unacked += (uint32_t)flen) >= WIRE_STREAM_WINDOW / 2 &&
	    !(flags & WIRE_END_STREAM)) {
		if (window_update(wc, s->id, s->unacked) != 0)
			return -1;
		s->unacked = 0;
	}
	if (s == &wc->join &&
	    (rc = grpc_reader_feed(&s->reader, p, n, join_msg, wc)) != 0)
		return rc == -1 ? -1 : conn_fail(wc, "Join: %s",
		    rc == -EMSGSIZE ? "a message over 4 MiB" :
		    rc == -ENOMEM ? "out of memory" : "a compressed message");
	if (flags & WIRE_END_STREAM)
		return conn_fail(wc, "stream %d ended without trailers", s->id);
	return 0;
}

/* One whole frame at |f|. 0, or -1 when the run failed. */
static int
frame(struct wire_conn *wc, const uint8_t *f, size_t flen)
{
	int type = f[3], flags = f[4];
	int32_t id = (int32_t)(be32(f + 5) & 0x7fffffff);
	const uint8_t *p = f + WIRE_FRAME_HEADER;
	size_t n = flen, pad = 0;
	struct wire_stream *s;

	if (wc->block_stream != 0 && type != WIRE_CONTINUATION)
		return conn_fail(wc, "a frame of type %d inside a header "
		    "block", type);
	if ((type == WIRE_DATA || type == WIRE_HEADERS) &&
	    (flags & WIRE_PADDED)) {
		if (n < 1 || (pad = p[0]) + 1 > n)
			return conn_fail(wc, "bad padding");
		p++;
		n -= 1 + pad;
	}
	switch (type) {
	case WIRE_DATA:
		if ((s = conn_stream(wc, id)) == NULL || s->ended)
			return conn_fail(wc, "DATA on stream %d", id);
		return data(wc, s, flags, p, n, flen);
	case WIRE_HEADERS:
		if ((s = conn_stream(wc, id)) == NULL || s->ended)
			return conn_fail(wc, "HEADERS on stream %d", id);
		if (flags & WIRE_PRIORITY) {
			if (n < 5)
				return conn_fail(wc, "bad HEADERS");
			p += 5;
			n -= 5;
		}
		wc->block_stream = id;
		wc->block_end = flags & WIRE_END_STREAM;
		return inflate(wc, p, n, flags & WIRE_END_HEADERS);
	case WIRE_CONTINUATION:
		if (id != wc->block_stream || id == 0)
			return conn_fail(wc, "CONTINUATION on stream %d", id);
		return inflate(wc, p, n, flags & WIRE_END_HEADERS);
	case WIRE_SETTINGS:
		if (flags & WIRE_ACK)
			return 0;
		return settings(wc, f, WIRE_FRAME_HEADER + flen);
	case WIRE_PING: {
		uint8_t ack[WIRE_FRAME_HEADER + 8];

		if ((flags & WIRE_ACK) || n != 8)
			return 0;
		wire_frame_header(ack, 8, WIRE_PING, WIRE_ACK, 0);
		memcpy(ack + WIRE_FRAME_HEADER, p, 8);
		return conn_write(wc, ack, sizeof(ack));
	}
	case WIRE_RST_STREAM:
		s = conn_stream(wc, id);
		if (s != NULL && s->ended && n == 4 && be32(p) == 0)
			return 0;
		return conn_fail(wc, "the server reset stream %d (%s)", id,
		    nghttp2_http2_strerror(n == 4 ? be32(p) : 0));
	case WIRE_GOAWAY:
		if (n < 8)
			return conn_fail(wc, "bad GOAWAY");
		return conn_fail(wc, "GOAWAY %s, last stream %u%s%.*s",
		    nghttp2_http2_strerror(be32(p + 4)),
		    be32(p) & 0x7fffffff, n > 8 ? ": " : "", (int)(n - 8),
		    (const char *)p + 8);
	case WIRE_PUSH_PROMISE:
		return conn_fail(wc, "PUSH_PROMISE, though push is disabled");
	default:	/* WINDOW_UPDATE, PRIORITY, extensions */
		return 0;
	}
}

/* Bytes read: every whole frame, the rest kept for the next read. */
static int
conn_input(struct wire_conn *wc, const uint8_t *p, size_t n)
{
	size_t off = 0, flen;
	uint8_t *q;

	if (wc->in_len > 0) {
		if ((q = realloc(wc->in, wc->in_len + n)) == NULL)
			return conn_fail(wc, "out of memory");
		memcpy(q + wc->in_len, p, n);
		wc->in = q;
		p = q;
		n += wc->in_len;
	}
	while (n - off >= WIRE_FRAME_HEADER) {
		const uint8_t *f = p + off;

		flen = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
		if (flen > 16384)	/* SETTINGS_MAX_FRAME_SIZE's default */
			return conn_fail(wc, "a frame of %zu bytes", flen);
		if (n - off < WIRE_FRAME_HEADER + flen)
			break;
		if (frame(wc, f, flen) != 0 || !wc->open)
			return -1;
		off += WIRE_FRAME_HEADER + flen;
	}
	if (off == n) {
		free(wc->in);
		wc->in = NULL;
		wc->in_len = 0;
		return 0;
	}
	if (p == wc->in) {
		memmove(wc->in, wc->in + off, n - off);
	} else {
		if ((q = realloc(wc->in, n - off)) == NULL)
			return conn_fail(wc, "out of memory");
		memcpy(q, p + off, n - off);
		wc->in = q;
	}
	wc->in_len = n - off;
	return 0;
}

static void
conn_read(struct wire_conn *wc)
{
	static uint8_t buf[65536];

	for (int i = 0; i < READ_ROUNDS && wc->open; i++) {
		ssize_t n = recv(wc->fd, buf, sizeof(buf), 0);
		if (n > 0) {
			if (conn_input(wc, buf, (size_t)n) != 0 ||
			    (size_t)n < sizeof(buf))
				return;
			continue;
		}
		if (n == 0) {
			conn_fail(wc, "connection closed by the server");
			conn_close(wc);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			conn_fail(wc, "read: %s", strerror(errno));
			conn_close(wc);
		}
		return;
	}
}

/* The socket is up: the hello goes out at once. */
static void
conn_connected(struct wire_conn *wc)
{
	int one = 1;

	wc->open = 1;
	wc->writing = -1;	/* ev waited for the connect: assign it anew */
	if (wc->srv->sa.ss_family != AF_UNIX)
		setsockopt(wc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	conn_arm(wc, 0);
	conn_write(wc, wc->srv->hello, wc->srv->hello_len);
}

static void
conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wire_conn *wc = arg;
	socklen_t len = sizeof(int);
	int err = 0;

	if (!wc->open) {	/* connecting */
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0) {
			conn_fail(wc, "connect: %s", strerror(err));
			conn_close(wc);
			return;
		}
		conn_connected(wc);
		return;
	}
	if ((what & EV_WRITE) && conn_flush(wc) != 0)
		return;
	if (what & EV_READ)
		conn_read(wc);
}

static int
conn_start(struct wire_conn *wc)
{
	struct wire_server *srv = wc->srv;

	wc->fd = socket(srv->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (wc->fd < 0)
		return conn_fail(wc, "socket: %s", strerror(errno));
	wc->ev = event_new(wc->a->job->b->base, wc->fd, EV_WRITE, conn_cb, wc);
	if (wc->ev == NULL) {
		conn_close(wc);
		return conn_fail(wc, "out of memory");
	}
	if (connect(wc->fd, (struct sockaddr *)&srv->sa, srv->salen) == 0) {
		conn_connected(wc);
		return 0;
	}
	if (errno != EINPROGRESS) {
		conn_fail(wc, "connect: %s", strerror(errno));
		conn_close(wc);
		return -1;
	}
	event_add(wc->ev, NULL);
	return 0;
}

/* |ep|'s first address, as the grpc client tries it first. */
static int
server_resolve(struct wire_server *srv, const struct endpoint *ep)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char port[8];

	endpoint_format(ep, srv->name, sizeof(srv->name));
	if (ep->kind == ENDPOINT_UNIX) {
		struct sockaddr_un *sun = (struct sockaddr_un *)&srv->sa;
		sun->sun_family = AF_UNIX;
		snprintf(sun->sun_path, sizeof(sun->sun_path), "%s", ep->path);
		srv->salen = sizeof(*sun);
		return 0;
	}
	snprintf(port, sizeof(port), "%u", (unsigned int)ep->port);
	if (getaddrinfo(ep->host, port, &hints, &ai) != 0)
		return -EHOSTUNREACH;
	memcpy(&srv->sa, ai->ai_addr, ai->ai_addrlen);
	srv->salen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int
wire_setup(struct bench *b)
{
	int k = 0, rc;

	b->wire_servers = calloc((size_t)b->n_servers,
	    sizeof(*b->wire_servers));
	b->wire_conns = calloc((size_t)b->total, sizeof(*b->wire_conns));
	if (b->wire_servers == NULL || b->wire_conns == NULL)
		return -ENOMEM;
	for (int i = 0; i < b->n_servers; i++) {
		struct wire_server *srv = &b->wire_servers[i];

		if ((rc = server_resolve(srv, &b->opts[i].server)) != 0)
			return rc;
		/* The grpc client's Check has the time left of --timeout
		 * when it is sent: at once, the whole of it. */
		srv->enc = wire_enc_new(&b->opts[i].server,
		    (uint32_t)(b->timeout_s * 1000));
		if (srv->enc == NULL)
			return -errno;
		srv->hello = wire_enc_hello(srv->enc, &srv->hello_len);
	}
	for (int j = 0; j < b->jobs; j++)
		for (int i = 0; i < b->nodes; i++) {
			struct wire_conn *wc = &b->wire_conns[k];

			wc->a = &b->jobv[j].agents[i];
			wc->a->wc = wc;
			/* Spread over the servers as the grpc client is. */
			wc->srv = &b->wire_servers[k++ % b->n_servers];
			wc->fd = -1;
			wc->check.id = WIRE_CHECK_STREAM;
			wc->check.grpc_status = -1;
			wc->join.id = WIRE_JOIN_STREAM;
			wc->join.grpc_status = -1;
			grpc_reader_init(&wc->join.reader, MAX_MESSAGE);
		}
	return 0;
}

void
wire_start(struct bench *b)
{
	for (int k = 0; k < b->total && b->phase == PHASE_CONNECT; k++)
		conn_start(&b->wire_conns[k]);
}

int
wire_join(struct agent *a, const Rdzv__V1__JoinRequest *req)
{
	struct wire_conn *wc = a->wc;
	struct wire_server *srv = wc->srv;
	uint8_t buf[16384 + 1024];
	char err[256];
	size_t n;

	if (!wc->settings_seen)
		return conn_fail(wc, "Health/Check answered before the "
		    "server's SETTINGS");
	if (srv->join == NULL && wire_enc_join(srv->enc, srv->settings,
	    srv->settings_len, &req->base, &srv->join, &srv->join_len, err,
	    sizeof(err)) != 0)
		return conn_fail(wc, "cannot encode the Join: %s", err);
	if (srv->join_len > sizeof(buf))
		return conn_fail(wc, "Join HEADERS of %zu bytes", srv->join_len);
	memcpy(buf, srv->join, srv->join_len);
	n = wire_data(buf + srv->join_len, sizeof(buf) - srv->join_len,
	    WIRE_JOIN_STREAM, &req->base);
	if (n == 0)
		return conn_fail(wc, "a JoinRequest past one DATA frame");
	return conn_write(wc, buf, srv->join_len + n);
}

void
wire_close(struct agent *a)
{
	if (a->wc != NULL)
		conn_close(a->wc);
}

void
wire_teardown(struct bench *b)
{
	for (int k = 0; b->wire_conns != NULL && k < b->total; k++) {
		struct wire_conn *wc = &b->wire_conns[k];

		conn_close(wc);
		free(wc->in);
		free(wc->out);
		if (wc->inf != NULL)
			nghttp2_hd_inflate_del(wc->inf);
		grpc_reader_reset(&wc->join.reader);
	}
	for (int i = 0; b->wire_servers != NULL && i < b->n_servers; i++) {
		wire_enc_free(b->wire_servers[i].enc);
		free(b->wire_servers[i].settings);
	}
	free(b->wire_conns);
	free(b->wire_servers);
}
