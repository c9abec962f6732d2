/* Sizes and durations as users write them (command lines, config files). */
#ifndef RDZV_PARSE_H
#define RDZV_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* "4194304", "4M", "512KiB" -> bytes. 0, or -1 when malformed. */
int	parse_size(const char *s, size_t *out);

/*
 * "30", "30s", "500ms", "5m", "7d" -> milliseconds; a bare number is in
 * |bare_unit_ms|. 0, or -1 when malformed, negative or over 2^32 s.
 */
int	parse_duration(const char *s, uint64_t bare_unit_ms, uint64_t *ms);

#endif
