/*
 * What a MUNGE credential of rdzv carries as its payload (docs/SECURITY.md):
 * the method's path and a SHA-256 digest of the request message's bytes,
 * so that a credential taken from one call can only repeat that exact
 * call. The client makes it (client/common/munge.c), rdzvd compares it
 * (daemon/auth/auth_munge.c); one function keeps the two the same.
 */
#ifndef RDZV_CREDBIND_H
#define RDZV_CREDBIND_H

#include <stddef.h>
#include <stdint.h>

/* "PATH sha256=" and 64 hex digits: the longest path rdzv uses fits. */
#define CREDBIND_MAX	512

/*
 * Writes the payload for a call of |path| whose request message is |req|
 * (|len| bytes; NULL and 0 for none) into |out| with its NUL. Returns
 * its length, or -ENAMETOOLONG when it does not fit |outlen|, -ENOMEM
 * when the digest cannot be made.
 */
int	credbind_payload(const char *path, const uint8_t *req, size_t len,
	    char *out, size_t outlen);

#endif
