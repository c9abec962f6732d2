/*
 * Fuzz target for the workers' progress datagram as rdzv-agent reads it
 * (client/agent/progress_msg.c, docs/HEALTH.md): "1 LOCAL_RANK STEP".
 *
 * Input layout: the whole input is one datagram, as recvmsg() gives it
 * (not NUL-terminated; NULs inside are data).
 *
 * Invariants checked (a violation aborts, as does undefined behaviour
 * under UBSan): only up to PROGRESS_MSG_MAX bytes are read and only such
 * datagrams are accepted; an accepted one has a local rank within
 * PROGRESS_RANK_MAX, holds no NUL, and the agent's own writing of its
 * values reads back to the same values.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "progress_msg.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, buf[PROGRESS_MSG_MAX];
	uint32_t rank, rank2;
	uint64_t step, step2;
	int n;

	/* A copy of exactly |size| bytes: ASan sees any read past it. */
	if ((copy = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(copy, data, size);
	if (progress_msg_parse(copy, size, &rank, &step) == 0) {
		FUZZ_ASSERT(size <= PROGRESS_MSG_MAX);
		FUZZ_ASSERT(memchr(copy, '\0', size) == NULL);
		FUZZ_ASSERT(rank <= PROGRESS_RANK_MAX);
		n = progress_msg_format(buf, sizeof(buf), rank, step);
		FUZZ_ASSERT(n > 0);
		FUZZ_ASSERT(progress_msg_parse(buf, (size_t)n, &rank2,
		    &step2) == 0);
		FUZZ_ASSERT(rank2 == rank && step2 == step);
	}
	free(copy);
	return 0;
}
