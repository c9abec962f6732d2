/*
 * Fuzz target for the PBS node file as rdzv-agent reads it
 * (client/agent/sched.c, sched_pbs_nodes): one line per slot, the node
 * count is the number of distinct hosts and this node's index the
 * position of its first line among them (SPEC §6).
 *
 * Input layout: byte 0 is the length (modulo 64) of this host's name,
 * which follows (cut at a NUL); the rest is the node file, written to a
 * temporary file (fuzz_file.c) because that is what the agent is given.
 *
 * Invariants checked (a violation aborts): a file is either refused with
 * a message or gives a count from 1 to the number of its lines and an
 * index below the count (or "not listed"); the same file and host give
 * the same answer twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_file.h"
#include "agent.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[64], err[512] = "";
	uint32_t count = 0, index = 0, count2 = 0, index2 = 0;
	size_t hlen, lines;
	const char *path;
	int rc;

	if (size < 1)
		return 0;
	hlen = data[0] % 64;
	if (hlen > size - 1)
		hlen = size - 1;
	memcpy(host, data + 1, hlen);
	host[hlen] = '\0';
	data += 1 + hlen;
	size -= 1 + hlen;
	/* fgets cuts lines at 511 bytes: a long line counts as several. */
	lines = 1 + size / 511;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';

	path = fuzz_file_write(data, size);
	rc = sched_pbs_nodes(path, host, &count, &index, err, sizeof(err));
	FUZZ_ASSERT(rc == 0 || rc == -1);
	if (rc != 0) {
		FUZZ_ASSERT(err[0] != '\0');
		return 0;
	}
	FUZZ_ASSERT(count >= 1 && count <= lines);
	FUZZ_ASSERT(index < count || index == UINT32_MAX);
	FUZZ_ASSERT(sched_pbs_nodes(path, host, &count2, &index2, err,
	    sizeof(err)) == 0);
	FUZZ_ASSERT(count2 == count && index2 == index);
	return 0;
}
