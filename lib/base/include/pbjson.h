/*
 * protobuf-c messages as JSON, driven by their descriptors, and JSON text
 * that is safe to show: the one JSON vocabulary of rdzvd's status page and
 * rdzvctl (docs/PROTOCOL.md, "JSON").
 */
#ifndef RDZV_PBJSON_H
#define RDZV_PBJSON_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/*
 * |m| as a JSON object: proto3's JSON mapping with the proto field names
 * kept (restart_count, created_unix_ms), every field present (proto3
 * defaults included, so a reader needs no schema), with these choices of
 * ours: 64-bit integers as numbers (our values stay below 2^53), enums as
 * their value's name without the enum's common prefix, in lower case
 * (JOB_STATE_RUNNING is "running"), a message field not set as null, a
 * string that is not UTF-8 as "(not UTF-8)". Fields added to a message
 * appear without more code. NULL when out of memory.
 */
json_t	*pbjson_message(const ProtobufCMessage *m);

/*
 * Adds to |o| every field of |m| that is neither named in |mapped| (a NULL-
 * ended list of the field names a caller writes in its own shape) nor a key
 * of |o| already, as pbjson_message writes it: a shape of one's own that
 * still shows the fields added to the message later. 0, or -1 when out of
 * memory.
 */
int	 pbjson_add_rest(json_t *o, const ProtobufCMessage *m,
	    const char *const *mapped);

/* The short name of enum value |v| as pbjson_message writes it, into
 * |buf|; the number when |v| has no name. */
const char *pbjson_enum_name(const ProtobufCEnumDescriptor *d, int v,
	    char *buf, size_t len);

/*
 * json_dumps() with every text_cp_hidden() character above U+007F written
 * as \uXXXX (jansson writes C1 and bidi controls raw): the JSON means the
 * same, and a terminal or a page shows it as it is. Free the result with
 * free(); NULL when out of memory.
 */
char	*pbjson_dumps(const json_t *j, size_t flags);

#endif
