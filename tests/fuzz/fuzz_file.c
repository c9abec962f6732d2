/*
 * The temporary file of fuzz_file.h. It lives in $TMPDIR (or /tmp), is
 * created on first use and truncated and rewritten in place afterwards, so
 * an input costs two system calls rather than a create and an unlink.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"

static char	path[4096];
static int	fd = -1;

static void
remove_file(void)
{
	if (fd != -1) {
		close(fd);
		unlink(path);
		fd = -1;
	}
}

const char *
fuzz_file_write(const uint8_t *data, size_t size)
{
	if (fd == -1) {
		const char *dir = getenv("TMPDIR");
		if (dir == NULL || *dir == '\0')
			dir = "/tmp";
		snprintf(path, sizeof(path), "%s/rdzv-fuzz-XXXXXX", dir);
		if ((fd = mkstemp(path)) == -1) {
			perror(path);
			abort();
		}
		atexit(remove_file);
	}
	if (ftruncate(fd, 0) != 0 ||
	    (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror(path);
		abort();
	}
	return path;
}
