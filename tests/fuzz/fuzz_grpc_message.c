/*
 * Fuzz target for what a peer controls before any handler runs: the gRPC
 * message framing (struct grpc_reader), protobuf decoding of every request
 * type the daemon accepts, grpc-timeout values and percent-encoded
 * grpc-message text.
 *
 * Input layout (tests/fuzz/make_corpus.py writes the seed corpus in it):
 *   byte 0   the request type, an index into requests[] (modulo its size)
 *   byte 1   the chunking: 0 feeds the stream in one piece; otherwise chunk
 *            sizes come from a generator seeded with it, each from 1 to
 *            1 + (byte & 63), so message boundaries fall everywhere
 *   rest     the bytes of a request stream: length-prefixed messages
 *
 * Invariants checked (a violation aborts): every reassembled message fits
 * the 64 KiB limit; a decoded message re-packs to exactly its packed size,
 * and re-packing is stable; a parsed timeout formats to a value that parses
 * back no shorter; percent coding round-trips.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/rendezvous.pb-c.h"
#include "grpc_wire.h"

#define FUZZ_MAX_MESSAGE (64 * 1024)

static const ProtobufCMessageDescriptor *const requests[] = {
	&rdzv__v1__join_request__descriptor,
	&rdzv__v1__report_request__descriptor,
	&rdzv__v1__leave_request__descriptor,
	&rdzv__v1__list_jobs_request__descriptor,
	&rdzv__v1__get_job_request__descriptor,
	&rdzv__v1__watch_request__descriptor,
	&rdzv__v1__close_job_request__descriptor,
	&rdzv__v1__abort_job_request__descriptor,
	&rdzv__v1__evict_node_request__descriptor,
	&rdzv__v1__list_events_request__descriptor,
	&rdzv__v1__server_info_request__descriptor,
	&grpc__health__v1__health_check_request__descriptor,
};
#define N_REQUESTS (sizeof(requests) / sizeof(requests[0]))

/*
 * Decodes one reassembled message as the server would, then checks that
 * protobuf-c packs it back to the size it announces and that packing what
 * it decoded from its own output gives the same bytes.
 */
static int
on_message(void *arg, const uint8_t *msg, size_t len)
{
	const ProtobufCMessageDescriptor *desc = arg;
	ProtobufCMessage *m, *again;
	uint8_t *out, *out2;
	size_t n, n2;

	FUZZ_ASSERT(len <= FUZZ_MAX_MESSAGE);
	m = protobuf_c_message_unpack(desc, NULL, len, msg);
	if (m == NULL)
		return 0;
	n = protobuf_c_message_get_packed_size(m);
	out = malloc(n > 0 ? n : 1);
	FUZZ_ASSERT(out != NULL);
	FUZZ_ASSERT(protobuf_c_message_pack(m, out) == n);

	/*
	 * protobuf-c 1.4 accepts an overlong tag of field 0 ("82 00") as an
	 * unknown field, packs it as "02" and then refuses its own output:
	 * a quirk of the library, harmless here (unknown fields are ignored),
	 * so a failed second decode is not a finding.
	 */
	again = protobuf_c_message_unpack(desc, NULL, n, out);
	if (again == NULL) {
		free(out);
		protobuf_c_message_free_unpacked(m, NULL);
		return 0;
	}
	n2 = protobuf_c_message_get_packed_size(again);
	FUZZ_ASSERT(n2 == n);
	out2 = malloc(n2 > 0 ? n2 : 1);
	FUZZ_ASSERT(out2 != NULL);
	FUZZ_ASSERT(protobuf_c_message_pack(again, out2) == n2);
	FUZZ_ASSERT(memcmp(out, out2, n) == 0);

	/* Framing what was decoded gives a prefix plus the same bytes. */
	uint8_t *frame;
	size_t flen;
	FUZZ_ASSERT(grpc_frame_pack(again, FUZZ_MAX_MESSAGE, &frame,
	    &flen) == 0);
	FUZZ_ASSERT(flen == GRPC_PREFIX_LEN + n);
	FUZZ_ASSERT(memcmp(frame + GRPC_PREFIX_LEN, out, n) == 0);

	free(frame);
	free(out2);
	free(out);
	protobuf_c_message_free_unpacked(again, NULL);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

static void
fuzz_reader(const ProtobufCMessageDescriptor *desc, uint8_t mode,
    const uint8_t *data, size_t size)
{
	struct grpc_reader r;
	uint32_t state = 0x9e3779b9u ^ mode;
	size_t pos = 0, maxchunk = 1 + (mode & 63);
	int rc = 0;

	grpc_reader_init(&r, FUZZ_MAX_MESSAGE);
	if (mode == 0)
		rc = grpc_reader_feed(&r, data, size, on_message, (void *)desc);
	while (mode != 0 && pos < size && rc == 0) {
		size_t n = 1 + fuzz_rand(&state) % maxchunk;
		if (n > size - pos)
			n = size - pos;
		rc = grpc_reader_feed(&r, data + pos, n, on_message,
		    (void *)desc);
		pos += n;
	}
	/* Nothing is kept beyond the message being read, within the limit. */
	FUZZ_ASSERT(rc == 0 || r.buf == NULL);
	FUZZ_ASSERT(r.have > 0 || r.buf == NULL);
	FUZZ_ASSERT(r.len <= FUZZ_MAX_MESSAGE || rc != 0);
	FUZZ_ASSERT(!grpc_reader_partial(&r) || r.have <= r.len);
	grpc_reader_reset(&r);
}

static void
fuzz_timeout(const uint8_t *data, size_t size)
{
	uint64_t ms, back;
	char buf[16];

	if (grpc_timeout_parse((const char *)data, size, &ms) != 0)
		return;
	FUZZ_ASSERT(size >= 2 && size <= 9);
	grpc_timeout_format(ms, buf, sizeof(buf));
	FUZZ_ASSERT(grpc_timeout_parse(buf, strlen(buf), &back) == 0);
	/* Never shorter, except at the format's cap of 99999999 minutes. */
	FUZZ_ASSERT(back >= ms || back == 99999999ULL * 60000);
}

static void
fuzz_message_text(const uint8_t *data, size_t size)
{
	char *dec, *text, *enc, *back;

	/* Decoding never grows the text and always terminates it. */
	dec = grpc_message_decode((const char *)data, size);
	FUZZ_ASSERT(dec != NULL);
	FUZZ_ASSERT(strlen(dec) <= size);
	free(dec);

	/* Encoding yields only kept bytes and decodes back exactly. */
	text = malloc(size + 1);
	FUZZ_ASSERT(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	enc = grpc_message_encode(text);
	FUZZ_ASSERT(enc != NULL);
	for (const char *p = enc; *p != '\0'; p++)
		FUZZ_ASSERT(*p >= 0x20 && *p <= 0x7e);
	back = grpc_message_decode(enc, strlen(enc));
	FUZZ_ASSERT(back != NULL && strcmp(back, text) == 0);
	free(back);
	free(enc);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const ProtobufCMessageDescriptor *desc = requests[data[0] % N_REQUESTS];
	uint8_t mode = data[1];
	const uint8_t *body = data + 2;
	size_t len = size - 2;

	fuzz_reader(desc, mode, body, len);

	/* Slices: the whole body and its first bytes as a timeout value
	 * (the parser takes at most 9), the body as grpc-message text. */
	fuzz_timeout(body, len);
	for (size_t i = 0; i < 10 && i <= len; i++)
		fuzz_timeout(body, i);
	if (len <= 4096)
		fuzz_message_text(body, len);
	else
		fuzz_message_text(body, 4096);
	return 0;
}
