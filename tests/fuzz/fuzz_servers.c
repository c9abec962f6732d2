/*
 * Fuzz target for server lists and their choosing rule
 * (client/common/servers.c): --server and RDZV_SERVER as users write them,
 * and the rdzv-leader hints any replica (or anything pretending to be one)
 * may send.
 *
 * Input layout: the list up to the first NUL; then records, each a byte
 * saying what happened to the call on the current server (bit 0: a
 * success, else a failure; bit 1: the failure came with the hint that
 * follows, a string up to the next NUL) until the input ends.
 *
 * Invariants checked (a violation aborts): parsing gives 0 or -1 with a
 * message; a list has 1 to SERVER_LIST_MAX distinct entries, the given
 * ones first; the current server and the rotation's place are entries;
 * a hint move lands on the hinted server; and a round ends within 2 n
 * failures (n plain ones and n hints), so no sequence of hints makes a
 * client spin.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "servers.h"

static void
check_list(const struct server_list *sl)
{
	FUZZ_ASSERT(sl->n >= 1 && sl->n <= SERVER_LIST_MAX);
	FUZZ_ASSERT(sl->n_given >= 1 && sl->n_given <= sl->n);
	FUZZ_ASSERT(sl->cur < sl->n && sl->pos < sl->n);
	for (size_t i = 0; i < sl->n; i++) {
		FUZZ_ASSERT(sl->s[i].name[0] != '\0');
		for (size_t j = i + 1; j < sl->n; j++)
			FUZZ_ASSERT(strcmp(sl->s[i].name, sl->s[j].name) != 0);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct server_list sl;
	char err[512], *buf, *p, *end, list[1024];
	size_t since_round = 0;
	int rc;

	if (size > 8192)
		return 0;
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	end = buf + size;

	err[0] = '\0';
	rc = server_list_parse(&sl, buf, RDZV_DEFAULT_PORT, err, sizeof(err));
	FUZZ_ASSERT(rc == 0 || rc == -1);
	if (rc != 0) {
		FUZZ_ASSERT(err[0] != '\0');
		free(buf);
		return 0;
	}
	check_list(&sl);
	FUZZ_ASSERT(sl.n == sl.n_given && sl.cur == 0);
	server_list_format(&sl, list, sizeof(list));
	FUZZ_ASSERT(strlen(list) < sizeof(list));

	for (p = buf + strlen(buf) + 1; p < end;) {
		uint8_t what = (uint8_t)*p++;
		const char *hint = NULL;
		enum server_move move;

		if (what & 2) {
			hint = p;
			p += strlen(p) + 1;
		}
		if (what & 1) {
			server_list_ok(&sl);
			since_round = 0;
			continue;
		}
		move = server_list_failed(&sl, hint);
		check_list(&sl);
		if (move == SERVER_MOVE_HINT) {
			struct endpoint ep;
			char name[300];

			FUZZ_ASSERT(hint != NULL && endpoint_parse(hint,
			    RDZV_DEFAULT_PORT, &ep, NULL, 0) == 0);
			endpoint_format(&ep, name, sizeof(name));
			FUZZ_ASSERT(strcmp(name,
			    server_list_current(&sl)->name) == 0);
		}
		if (move == SERVER_MOVE_ROUND)
			since_round = 0;
		else
			FUZZ_ASSERT(++since_round < 2 * SERVER_LIST_MAX);
	}
	free(buf);
	return 0;
}
