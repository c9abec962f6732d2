/*
 * Fuzz target for the check of HTTP request heads that rdzvd's HTTP
 * listener makes before evhttp parses them (lib/base/httphead.c).
 *
 * Input layout: bytes 0-3 seed the cuts (as a peer's reads would fall);
 * the rest is what a client sent.
 *
 * Invariants checked: the verdict (how many bytes are good, why the next
 * is refused, whether a head is open) is the same whole and in pieces; a
 * good prefix holds no NUL, no bare LF and no bare CR; once refused, no
 * byte is good again.
 */
#include <string.h>

#include "fuzz.h"
#include "httphead.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head whole, cut;
	uint32_t seed = 0x9e3779b9;
	size_t good, got = 0, i, n;
	unsigned ev;

	if (size >= 4) {
		memcpy(&seed, data, 4);
		seed |= 1;
		data += 4;
		size -= 4;
	}
	http_head_init(&whole);
	good = http_head_feed(&whole, data, size, &ev);
	FUZZ_ASSERT(good <= size);
	FUZZ_ASSERT((good < size) == (whole.bad != 0));

	http_head_init(&cut);
	for (i = 0; i < size; i += n) {
		n = 1 + fuzz_rand(&seed) % (size - i);
		size_t g = http_head_feed(&cut, data + i, n, &ev);
		got += g;
		if (g < n)
			break;
	}
	FUZZ_ASSERT(got == good);
	FUZZ_ASSERT(cut.bad == whole.bad && cut.in_head == whole.in_head);
	FUZZ_ASSERT(cut.why == whole.why);
	if (whole.bad)
		FUZZ_ASSERT(http_head_feed(&whole, "\r\n", 2, &ev) == 0);

	for (i = 0; i < good; i++) {
		FUZZ_ASSERT(data[i] != '\0');
		if (data[i] == '\n')
			FUZZ_ASSERT(i > 0 && data[i - 1] == '\r');
		if (data[i] == '\r' && i + 1 < good)
			FUZZ_ASSERT(data[i + 1] == '\n');
	}
	return 0;
}
