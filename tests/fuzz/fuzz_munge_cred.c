/*
 * Fuzz target for the text of a MUNGE credential as rdzvd reads it before
 * munged does (daemon/auth/auth_cred.c): hostile clients write whatever
 * they like in the rdzv-munge header.
 *
 * Input layout: the header's text, cut at its first NUL as the header
 * would be.
 *
 * Invariants checked (a violation aborts): the result is 0 or -1, a
 * refusal says why, an accepted text is "MUNGE:", canonical padded base64
 * and ':' (Python's base64 module would write it back the same), and any
 * other spelling of it that munged would also decode (a byte after the
 * closing ':', a space inside) is refused, while the same text keys the
 * same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "auth_int.h"

static int
b64_digit(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '+' || c == '/';
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t md[AUTH_CRED_KEY_LEN], again[AUTH_CRED_KEY_LEN];
	const char *why = NULL;
	size_t len, body, pad = 0;
	char *s, *t;
	int rc;

	if (size > 8192)
		return 0;
	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	len = strlen(s);
	rc = auth_cred_key(s, md, &why);
	FUZZ_ASSERT(rc == 0 || rc == -1);
	if (rc != 0) {
		FUZZ_ASSERT(why != NULL && why[0] != '\0');
		free(s);
		return 0;
	}
	/* Canonical: MUNGE:, groups of four base64 digits, '=' padding at
	 * the end only, ':'. */
	FUZZ_ASSERT(len > 7 && memcmp(s, "MUNGE:", 6) == 0 &&
	    s[len - 1] == ':');
	body = len - 7;
	FUZZ_ASSERT(body % 4 == 0);
	while (pad < 2 && s[6 + body - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < body - pad; i++)
		FUZZ_ASSERT(b64_digit(s[6 + i]));
	FUZZ_ASSERT(auth_cred_key(s, again, &why) == 0 &&
	    memcmp(md, again, sizeof(md)) == 0);
	/* What munged also takes for it is refused. */
	if ((t = malloc(len + 3)) != NULL) {
		memcpy(t, s, len);
		memcpy(t + len, "x", 2);
		FUZZ_ASSERT(auth_cred_key(t, again, &why) == -1);
		memcpy(t, "MUNGE: ", 7);
		memcpy(t + 7, s + 6, len - 6 + 1);
		FUZZ_ASSERT(auth_cred_key(t, again, &why) == -1);
		free(t);
	}
	free(s);
	return 0;
}
