/*
 * Fuzz target for rdzvd's config file (daemon/frame/config.c): `key = value`
 * lines read with inih, each value parsed by its setting's kind
 * (endpoints, sizes, counts, durations, booleans, log levels).
 *
 * config_load() exits on a bad file, as a daemon that cannot start
 * should, so this target calls the step below it that returns,
 * config_read_file(), on the input written to a temporary file
 * (fuzz_file.c), then validates and prints the result as rdzvd
 * --check-config does, and frees it.
 *
 * Invariants checked (a violation aborts; so do leaks under ASan): a file
 * is read (0) or refused with a message naming the file (-1, or the line
 * number of its first error); lists stay within their limits; whatever
 * was read prints, validates and frees.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_file.h"
#include "rdzvd.h"

static FILE *devnull;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config cfg;
	char err[512] = "", verr[512];
	const char *path;
	size_t lines;
	int rc;

	if (devnull == NULL && (devnull = fopen("/dev/null", "w")) == NULL)
		abort();
	/* inih reads at most 199 bytes of a line at a time. */
	lines = 1 + size / 199;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	path = fuzz_file_write(data, size);

	/* What config_load has set when it reads the file. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_message = 4 * 1024 * 1024;
	if ((cfg.db = strdup("/var/lib/rdzv/rdzv.db")) == NULL)
		abort();

	rc = config_read_file(&cfg, path, err, sizeof(err));
	FUZZ_ASSERT(rc >= 0 || rc == -1);
	FUZZ_ASSERT(rc != -1);		/* the file is there */
	FUZZ_ASSERT((size_t)rc <= lines);
	if (rc != 0)
		FUZZ_ASSERT(strstr(err, path) != NULL);
	else
		FUZZ_ASSERT(cfg.file != NULL && strcmp(cfg.file, path) == 0);
	FUZZ_ASSERT(cfg.n_listen <= RDZVD_MAX_LISTEN);
	FUZZ_ASSERT(cfg.n_admins <= RDZVD_MAX_ADMINS);
	FUZZ_ASSERT(cfg.db != NULL);
	for (size_t i = 0; i < cfg.n_admins; i++)
		FUZZ_ASSERT(config_is_admin(&cfg, cfg.admins[i]));

	config_validate(&cfg, verr, sizeof(verr));
	config_print(&cfg, devnull);
	config_free(&cfg);
	return 0;
}
