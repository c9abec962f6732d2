/*
 * Runs a fuzz target without libFuzzer: LLVMFuzzerTestOneInput on every
 * file named on the command line, or found in the directories named there
 * (not recursively, in name order so runs are alike). This is how a seed
 * corpus and the inputs that once crashed run as a regression test in the
 * normal build, with gcc and under ASan/UBSan or valgrind.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Corpus files are small; a larger one is a mistake worth a failure. */
#define FUZZ_MAX_INPUT (1 << 20)

static int
run_file(const char *path)
{
	FILE *f;
	uint8_t *buf;
	size_t n;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if ((buf = malloc(FUZZ_MAX_INPUT + 1)) == NULL) {
		fclose(f);
		fprintf(stderr, "%s: out of memory\n", path);
		return -1;
	}
	n = fread(buf, 1, FUZZ_MAX_INPUT + 1, f);
	if (ferror(f) || n > FUZZ_MAX_INPUT) {
		fprintf(stderr, "%s: %s\n", path, ferror(f) ?
		    "read error" : "larger than 1 MiB");
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	/* An exact-size copy, so ASan sees reads past the input's end. */
	uint8_t *exact = malloc(n > 0 ? n : 1);
	if (exact == NULL) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

static int
select_file(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int
main(int argc, char **argv)
{
	int files = 0, errors = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			errors++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			errors += run_file(argv[i]) != 0;
			files++;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, select_file, alphasort);
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			errors++;
			continue;
		}
		for (int j = 0; j < n; j++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i],
			    names[j]->d_name);
			errors += run_file(path) != 0;
			files++;
			free(names[j]);
		}
		free(names);
	}
	printf("%d inputs run, %d unreadable\n", files, errors);
	return errors != 0 || files == 0;
}
