/*
 * Every string of a protobuf-c message, with its field's path: proto3
 * strings are UTF-8, and a peer that sends otherwise breaks every strict
 * decoder its bytes later reach (grpcio, Go), so messages are checked where
 * they arrive and a bad one is refused naming the field; rdzvctl escapes
 * the same strings for a terminal.
 */
#ifndef RDZV_PB_STRINGS_H
#define RDZV_PB_STRINGS_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Where a string is: its field's name and its parents'. */
#define PB_PATH_DEPTH	8
struct pb_path {
	const char	*names[PB_PATH_DEPTH];
	size_t		 depth;
};

/* "gpus.name" (repeated fields are not indexed). */
void	pb_path_format(const struct pb_path *, char *buf, size_t len);

/*
 * Calls |fn| for each non-empty string field of |m| and of the messages in
 * it (of a oneof, only the member that is set), with a pointer to the
 * string, which |fn| may replace (with a malloc'd one; the old one is
 * |fn|'s to free). Unset and empty strings are skipped: nothing to check
 * or change, and most of a message's fields are unset. Stops at |fn|'s
 * first non-zero return, which it returns.
 */
int	pb_strings_walk(ProtobufCMessage *m,
	    int (*fn)(char **s, const struct pb_path *path, void *arg),
	    void *arg);

/* 0 if every string of |m| is valid UTF-8, else -1 and the first bad
 * field's path in |path|. */
int	pb_utf8_check(const ProtobufCMessage *m, char *path, size_t len);

#endif
