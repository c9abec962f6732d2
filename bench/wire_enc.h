/*
 * The bytes lib/grpc's client writes on a new connection, encoded once by
 * nghttp2 configured as lib/grpc/grpc_client_conn.c configures it, for
 * rdzv-bench --client wire (rdzv_bench_wire.c) and for the check that they
 * equal the client's own (wire_check.c). A client session writes into
 * memory instead of a socket; nothing here does I/O.
 *
 * Per connection the client writes: the preface, SETTINGS, a connection
 * WINDOW_UPDATE and a Health/Check (HEADERS and DATA with END_STREAM,
 * stream 1): the hello. Once it has read the server's SETTINGS it writes
 * the SETTINGS ACK, and its Join is HEADERS and DATA on stream 3. The
 * hello depends on the server's :authority and the Check's timeout, the
 * ACK and Join HEADERS on the server's SETTINGS (a HEADER_TABLE_SIZE
 * there makes the next header block carry a table size update); only the
 * Join's DATA differs per node.
 */
#ifndef RDZV_BENCH_WIRE_ENC_H
#define RDZV_BENCH_WIRE_ENC_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "endpoint.h"
#include "grpc_wire.h"

/* The windows lib/grpc's client grants the server (grpc_wire.h). */
#define WIRE_STREAM_WINDOW	GRPC_CLIENT_STREAM_WINDOW
#define WIRE_CONN_WINDOW	GRPC_CLIENT_CONN_WINDOW

#define WIRE_CHECK_PATH		"/grpc.health.v1.Health/Check"
#define WIRE_JOIN_PATH		"/rdzv.v1.Rendezvous/Join"
#define WIRE_CHECK_STREAM	1
#define WIRE_JOIN_STREAM	3

/* HTTP/2 frame types and flags that the wire client reads and writes. */
enum {
	WIRE_DATA = 0, WIRE_HEADERS = 1, WIRE_RST_STREAM = 3,
	WIRE_SETTINGS = 4, WIRE_PUSH_PROMISE = 5, WIRE_PING = 6,
	WIRE_GOAWAY = 7, WIRE_WINDOW_UPDATE = 8, WIRE_CONTINUATION = 9,
};
#define WIRE_END_STREAM		0x01
#define WIRE_ACK		0x01
#define WIRE_END_HEADERS	0x04
#define WIRE_PADDED		0x08
#define WIRE_PRIORITY		0x20
#define WIRE_FRAME_HEADER	9

struct wire_enc;

/* A client session as lib/grpc's for a server reached at |ep|, that has
 * written the hello with a Check of |check_timeout_ms| (0: none). NULL
 * with errno set. */
struct wire_enc	*wire_enc_new(const struct endpoint *ep,
		    uint32_t check_timeout_ms);
void		 wire_enc_free(struct wire_enc *);
/* The hello's bytes, valid until wire_enc_free. */
const uint8_t	*wire_enc_hello(const struct wire_enc *, size_t *len);
/*
 * Feeds the server's first SETTINGS frame (|settings|, header included)
 * to the session and submits a Join of |req|: what the client then writes
 * before the Join's DATA (the SETTINGS ACK and the Join's HEADERS) into
 * |prefix|, valid until wire_enc_free. nghttp2's DATA must equal
 * wire_data()'s for |req|, and nothing else may follow. Once per session.
 * 0, or -1 with the reason in |err|.
 */
int		 wire_enc_join(struct wire_enc *, const uint8_t *settings,
		    size_t len, const ProtobufCMessage *req,
		    const uint8_t **prefix, size_t *prefix_len, char *err,
		    size_t errlen);
/* One DATA frame with END_STREAM on |stream| carrying |msg| as a gRPC
 * message, into |buf|: its length, or 0 when it does not fit |cap| or a
 * frame of 16,384 bytes. */
size_t		 wire_data(uint8_t *buf, size_t cap, int32_t stream,
		    const ProtobufCMessage *msg);
/* A frame header into |p| (WIRE_FRAME_HEADER bytes). */
void		 wire_frame_header(uint8_t *p, size_t len, int type,
		    int flags, int32_t stream);

#endif
