/*
 * Endpoints as users write them: "HOST:PORT", "[V6ADDR]:PORT", "HOST" (the
 * default port) and "unix:PATH" (SPEC §13).
 */
#ifndef RDZV_ENDPOINT_H
#define RDZV_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#define RDZV_DEFAULT_PORT 29400

enum endpoint_kind {
	ENDPOINT_TCP,
	ENDPOINT_UNIX,
};

struct endpoint {
	enum endpoint_kind kind;
	char host[256];		/* ENDPOINT_TCP, without brackets */
	uint16_t port;
	char path[108];		/* ENDPOINT_UNIX (sun_path) */
};

/* Parses |s|. Returns 0, or -EINVAL with a reason in |err| (may be NULL). */
int endpoint_parse(const char *s, uint16_t default_port, struct endpoint *ep,
    char *err, size_t errlen);

/* 1 when |ep| can only be reached from this machine: a unix socket, a
 * loopback address (127.0.0.0/8, ::1) or "localhost". */
int endpoint_is_loopback(const struct endpoint *ep);

/* "host:port", "[v6]:port" or "unix:path" into |buf|. */
void endpoint_format(const struct endpoint *ep, char *buf, size_t len);

#endif
