/*
 * proto3 strings are UTF-8, and a peer that sends otherwise breaks every
 * strict decoder its bytes later reach (grpcio, Go): messages are checked
 * where they arrive, and a bad one is refused naming the field.
 */
#ifndef RDZV_PB_UTF8_H
#define RDZV_PB_UTF8_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/*
 * 0 if every string field of |m|, and of the messages in it, is valid
 * UTF-8. Otherwise -1, and |path| gets the field's name with its parents'
 * ("gpus.name"; repeated fields are not indexed).
 */
int	pb_utf8_check(const ProtobufCMessage *m, char *path, size_t len);

#endif
