/*
 * The bytes of lib/grpc's client, encoded by an nghttp2 client session
 * made as gcli_conn_ready makes it (options, SETTINGS, window) whose send
 * callback appends to memory, and requests submitted with
 * gcli_conn_submit's header list in its order. wire_check.c compares the
 * result with what the client itself writes, so a change there that this
 * file misses fails a test rather than the bench's honesty.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpc_wire.h"
#include "wire_enc.h"
#include "grpc/health/v1/health.pb-c.h"

#define MAX_FRAME	16384

struct wire_enc {
	nghttp2_session	*h2;
	uint8_t		*out;		/* what the session wrote */
	size_t		 len, cap;
	uint8_t		*hello;
	size_t		 hello_len;
	uint8_t		*body;		/* the request being sent */
	size_t		 body_len, body_off;
	int		 joined;
	char		 authority[300];
};

static ssize_t
send_cb(nghttp2_session *h2, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct wire_enc *e = arg;

	if (e->len + len > e->cap) {
		size_t cap = e->cap * 2 + len + 256;
		uint8_t *p = realloc(e->out, cap);
		if (p == NULL)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		e->out = p;
		e->cap = cap;
	}
	memcpy(e->out + e->len, data, len);
	e->len += len;
	return (ssize_t)len;
}

/* As lib/grpc's data_read_cb for a call whose request side is closed:
 * the framed message, then EOF (END_STREAM). */
static ssize_t
data_read_cb(nghttp2_session *h2, int32_t stream_id, uint8_t *buf,
    size_t len, uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct wire_enc *e = arg;
	size_t n = e->body_len - e->body_off;

	if (n > len)
		n = len;
	memcpy(buf, e->body + e->body_off, n);
	e->body_off += n;
	if (e->body_off == e->body_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* gcli_conn_submit's headers (grpc_request_nv) for a cleartext client
 * without a credential; |timeout_ms| 0 leaves grpc-timeout out. The
 * framed |msg| is the body. 0 or -1. */
static int
submit(struct wire_enc *e, const char *path, uint32_t timeout_ms,
    const ProtobufCMessage *msg)
{
	char timeout[32];
	nghttp2_nv nva[GRPC_REQUEST_NV_MAX];
	size_t n;

	if (timeout_ms != 0)
		grpc_timeout_format(timeout_ms, timeout, sizeof(timeout));
	n = grpc_request_nv(nva, "http", path, e->authority, NULL, NULL,
	    timeout_ms != 0 ? timeout : NULL);
	free(e->body);
	e->body = NULL;
	e->body_off = 0;
	if (grpc_frame_pack(msg, MAX_FRAME, &e->body, &e->body_len) != 0)
		return -1;
	nghttp2_data_provider dp = { .read_callback = data_read_cb };
	if (nghttp2_submit_request(e->h2, NULL, nva, n, &dp, NULL) < 0)
		return -1;
	return nghttp2_session_send(e->h2) == 0 ? 0 : -1;
}

struct wire_enc *
wire_enc_new(const struct endpoint *ep, uint32_t check_timeout_ms)
{
	Grpc__Health__V1__HealthCheckRequest check =
	    GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	nghttp2_session_callbacks *cbs = NULL;
	struct wire_enc *e;
	int rv;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	/* grpc_client_new's :authority. */
	if (ep->kind == ENDPOINT_UNIX)
		snprintf(e->authority, sizeof(e->authority), "localhost");
	else
		snprintf(e->authority, sizeof(e->authority),
		    strchr(ep->host, ':') != NULL ? "[%s]:%u" : "%s:%u",
		    ep->host, (unsigned int)ep->port);

	if (nghttp2_session_callbacks_new(&cbs) != 0)
		goto fail;
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	rv = grpc_client_session_new(&e->h2, cbs, e);
	nghttp2_session_callbacks_del(cbs);
	cbs = NULL;
	if (rv != 0)
		goto fail;
	check.service = "";
	if (submit(e, WIRE_CHECK_PATH, check_timeout_ms, &check.base) != 0)
		goto fail;
	/* The hello is kept apart: the buffer grows (moves) later. */
	if ((e->hello = malloc(e->len)) == NULL)
		goto fail;
	memcpy(e->hello, e->out, e->len);
	e->hello_len = e->len;
	e->len = 0;
	return e;
fail:
	nghttp2_session_callbacks_del(cbs);
	wire_enc_free(e);
	errno = ENOMEM;
	return NULL;
}

void
wire_enc_free(struct wire_enc *e)
{
	if (e == NULL)
		return;
	if (e->h2 != NULL)
		nghttp2_session_del(e->h2);
	free(e->out);
	free(e->hello);
	free(e->body);
	free(e);
}

const uint8_t *
wire_enc_hello(const struct wire_enc *e, size_t *len)
{
	*len = e->hello_len;
	return e->hello;
}

void
wire_frame_header(uint8_t *p, size_t len, int type, int flags,
    int32_t stream)
{
	p[0] = (uint8_t)(len >> 16);
	p[1] = (uint8_t)(len >> 8);
	p[2] = (uint8_t)len;
	p[3] = (uint8_t)type;
	p[4] = (uint8_t)flags;
	p[5] = (uint8_t)((uint32_t)stream >> 24 & 0x7f);
	p[6] = (uint8_t)((uint32_t)stream >> 16);
	p[7] = (uint8_t)((uint32_t)stream >> 8);
	p[8] = (uint8_t)stream;
}

size_t
wire_data(uint8_t *buf, size_t cap, int32_t stream,
    const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);

	if (GRPC_PREFIX_LEN + n > MAX_FRAME ||
	    WIRE_FRAME_HEADER + GRPC_PREFIX_LEN + n > cap)
		return 0;
	wire_frame_header(buf, GRPC_PREFIX_LEN + n, WIRE_DATA,
	    WIRE_END_STREAM, stream);
	buf[9] = 0;
	buf[10] = (uint8_t)(n >> 24);
	buf[11] = (uint8_t)(n >> 16);
	buf[12] = (uint8_t)(n >> 8);
	buf[13] = (uint8_t)n;
	protobuf_c_message_pack(msg, buf + WIRE_FRAME_HEADER + GRPC_PREFIX_LEN);
	return WIRE_FRAME_HEADER + GRPC_PREFIX_LEN + n;
}

int
wire_enc_join(struct wire_enc *e, const uint8_t *settings, size_t len,
    const ProtobufCMessage *req, const uint8_t **prefix, size_t *prefix_len,
    char *err, size_t errlen)
{
	uint8_t data[MAX_FRAME + 64];
	size_t off = 0, dlen;
	ssize_t rv;

	if (e->joined) {
		snprintf(err, errlen, "a second Join on one encoder");
		return -1;
	}
	e->joined = 1;
	rv = nghttp2_session_mem_recv(e->h2, settings, len);
	if (rv < 0 || (size_t)rv != len) {
		snprintf(err, errlen, "nghttp2 refused the server's SETTINGS: "
		    "%s", rv < 0 ? nghttp2_strerror((int)rv) : "not all read");
		return -1;
	}
	if (submit(e, WIRE_JOIN_PATH, 0, req) != 0) {
		snprintf(err, errlen, "nghttp2 did not encode a Join");
		return -1;
	}
	/* Everything before the Join's DATA is the prefix; that DATA must
	 * be wire_data()'s, and last. */
	while (off + WIRE_FRAME_HEADER <= e->len) {
		const uint8_t *f = e->out + off;
		size_t flen = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];

		if (f[3] == WIRE_DATA)
			break;
		off += WIRE_FRAME_HEADER + flen;
	}
	dlen = wire_data(data, sizeof(data), WIRE_JOIN_STREAM, req);
	if (off > e->len || dlen == 0 || e->len - off != dlen ||
	    memcmp(e->out + off, data, dlen) != 0) {
		snprintf(err, errlen, "nghttp2 wrote the Join's DATA otherwise "
		    "than one frame with END_STREAM (%zu bytes after the "
		    "HEADERS, expected %zu)", off <= e->len ? e->len - off : 0,
		    dlen);
		return -1;
	}
	*prefix = e->out;
	*prefix_len = off;
	return 0;
}
