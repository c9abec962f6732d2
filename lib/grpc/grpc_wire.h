/*
 * The gRPC message layer on top of HTTP/2 DATA (grpc/grpc
 * doc/PROTOCOL-HTTP2.md): length-prefixed messages, grpc-timeout values and
 * percent-encoded grpc-message. Pure functions, no I/O: fuzzed and unit
 * tested directly.
 */
#ifndef RDZV_WIRE_H
#define RDZV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

#include "errf.h"

#define GRPC_PREFIX_LEN 5

/*
 * Reassembles messages from DATA chunks of any size. The size limit is
 * checked against the length prefix before anything of the message is
 * buffered.
 */
struct grpc_reader {
	size_t max;		/* largest message accepted */
	uint8_t prefix[GRPC_PREFIX_LEN];
	size_t prefix_have;
	uint8_t *buf;
	size_t len;		/* of the message being read */
	size_t have;
};

void grpc_reader_init(struct grpc_reader *r, size_t max);
void grpc_reader_reset(struct grpc_reader *r);

/*
 * Feeds |len| bytes. |cb| runs for each complete message; its non-zero
 * return stops the feed and is returned. Returns 0, -EMSGSIZE for a
 * message over the limit, -RDZV_ECOMPRESSED for a compressed message (we
 * announce no compression), -ENOMEM.
 */
int grpc_reader_feed(struct grpc_reader *r, const uint8_t *data, size_t len,
    int (*cb)(void *arg, const uint8_t *msg, size_t len), void *arg);

/* 1 when a message is partly read: the stream ended inside a message. */
int grpc_reader_partial(const struct grpc_reader *r);

/* Packs |msg| behind a length prefix into a malloc'd buffer. Returns 0,
 * -EMSGSIZE when the packed message exceeds |max|, -ENOMEM. */
int grpc_frame_pack(const ProtobufCMessage *msg, size_t max, uint8_t **out,
    size_t *outlen);

/* Parses a grpc-timeout value ("100m", "5S", at most 8 digits then one of
 * H M S m u n) into milliseconds, rounded up. Returns 0 or -EINVAL. */
int grpc_timeout_parse(const char *s, size_t len, uint64_t *ms);

/* Formats |ms| as a grpc-timeout value into |buf| (at least 16 bytes). */
void grpc_timeout_format(uint64_t ms, char *buf, size_t len);

/* The flow-control windows rdzv's client grants a server. */
#define GRPC_CLIENT_STREAM_WINDOW	(1 << 20)
#define GRPC_CLIENT_CONN_WINDOW		(16 << 20)

/*
 * A client's HTTP/2 session as rdzv's client makes it: no header indexed,
 * its SETTINGS (no push, GRPC_CLIENT_STREAM_WINDOW) and the connection's
 * window (GRPC_CLIENT_CONN_WINDOW) queued. Returns 0 or an nghttp2 error
 * (*h2 is then NULL).
 */
int grpc_client_session_new(nghttp2_session **h2,
    const nghttp2_session_callbacks *cbs, void *arg);

/*
 * The request headers of rdzv's client, in the order it sends them
 * (:method, :scheme, :path, :authority, te, content-type, user-agent, then
 * |cred_key| with |cred| and grpc-timeout with |timeout| where those are
 * not NULL), none indexed. Fills |nva|, GRPC_REQUEST_NV_MAX entries, and
 * returns how many. The strings are |nva|'s: they must outlive it.
 */
#define GRPC_REQUEST_NV_MAX	9
size_t grpc_request_nv(nghttp2_nv *nva, const char *scheme, const char *path,
    const char *authority, const char *cred_key, const char *cred,
    const char *timeout);

/* Percent-encodes a grpc-message: bytes 0x20-0x7E except '%' stay, others
 * become %XX. Returns a malloc'd string, NULL on ENOMEM. */
char *grpc_message_encode(const char *s);

/* Decodes a percent-encoded grpc-message of |len| bytes; malformed escapes
 * are kept as they are. Returns a malloc'd string, NULL on ENOMEM. */
char *grpc_message_decode(const char *s, size_t len);

#endif
