/*
 * The payload of a MUNGE credential, bound to one request (credbind.h).
 * The digest is OpenSSL's SHA-256, which every program links already.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "credbind.h"

int
credbind_payload(const char *path, const uint8_t *req, size_t len,
    char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t n = strlen(path);
	static const uint8_t none[1];

	if (EVP_Digest(req != NULL ? req : none, req != NULL ? len : 0, md,
	    &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -ENOMEM;
	if (n + sizeof(" sha256=") - 1 + 2 * mdlen + 1 > outlen)
		return -ENAMETOOLONG;
	memcpy(out, path, n);
	memcpy(out + n, " sha256=", 8);
	n += 8;
	for (unsigned int i = 0; i < mdlen; i++) {
		out[n++] = hex[md[i] >> 4];
		out[n++] = hex[md[i] & 15];
	}
	out[n] = '\0';
	return (int)n;
}
