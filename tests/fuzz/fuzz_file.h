/*
 * For fuzz targets whose parser reads a named file (the PBS node file, the
 * config file): the input goes into one private temporary file, rewritten
 * for every input, which is removed when the program exits.
 */
#ifndef RDZV_FUZZ_FILE_H
#define RDZV_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes |data| as the whole content of the file and returns its path;
 * aborts when the file cannot be made or written (a broken setup, not a
 * finding). */
const char	*fuzz_file_write(const uint8_t *data, size_t size);

#endif
