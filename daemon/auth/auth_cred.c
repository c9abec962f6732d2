/*
 * The text of a MUNGE credential, read before munged sees it
 * (docs/SECURITY.md). munged is lenient with the armor: it skips
 * whitespace before "MUNGE:" and anywhere in the base64, and it ignores
 * whatever follows the last ':'. So one credential has many texts that
 * munged decodes to the same thing, and a replay record kept by the text
 * would take each of them for a new credential. rdzvd therefore accepts
 * one text only, the one munge_encode writes ("MUNGE:", padded base64
 * with its unused bits zero, ':'), and keys its replay record on the
 * credential's message authentication code: munged checks that MAC over
 * every field of the credential (the salt, the encode time, the uid and
 * gid, the payload), so no second credential that munged accepts carries
 * the same one, however its text is written.
 *
 * Layout (munge's credential v3): version, cipher, MAC type, compression
 * and realm length (one byte each), the realm, the cipher's IV, the MAC,
 * then the encrypted fields. Pure functions: no I/O, thread-safe.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "auth_int.h"

#define PREFIX		"MUNGE:"
#define PREFIX_LEN	6

/* A base64 digit's value, or -1. */
static int
b64(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* The IV's length for munge's cipher types; -1 for one rdzvd does not
 * know (munge.h: NONE 0, BLOWFISH 2, CAST5 3, AES128 4, AES256 5). */
static int
iv_len(int cipher)
{
	switch (cipher) {
	case 0:
		return 0;
	case 2:
	case 3:
		return 8;
	case 4:
	case 5:
		return 16;
	default:
		return -1;
	}
}

/* The MAC's length for munge's MAC types (MD5 2, SHA1 3, RIPEMD160 4,
 * SHA256 5, SHA512 6); -1 otherwise. */
static int
mac_len(int mac)
{
	switch (mac) {
	case 2:
		return 16;
	case 3:
	case 4:
		return 20;
	case 5:
		return 32;
	case 6:
		return 64;
	default:
		return -1;
	}
}

int
auth_cred_key(const char *text, uint8_t md[AUTH_CRED_KEY_LEN],
    const char **why)
{
	size_t len = strlen(text), n, body, out = 0, at;
	unsigned int mdlen = 0;
	uint32_t acc = 0;
	int pad = 0, iv, mac, ok;
	uint8_t *bin;

	if (len < PREFIX_LEN + 1 || memcmp(text, PREFIX, PREFIX_LEN) != 0) {
		*why = "it does not start with \"MUNGE:\"";
		return -1;
	}
	if (text[len - 1] != ':') {
		*why = "it does not end with the credential's closing ':'";
		return -1;
	}
	body = len - PREFIX_LEN - 1;
	if (body == 0 || body % 4 != 0) {
		*why = "its base64 is not in groups of four digits (spaces or "
		    "other bytes inside?)";
		return -1;
	}
	if (text[PREFIX_LEN + body - 1] == '=')
		pad = text[PREFIX_LEN + body - 2] == '=' ? 2 : 1;
	if ((bin = malloc(body / 4 * 3)) == NULL) {
		*why = "rdzvd is out of memory";
		return -1;
	}
	for (n = 0; n < body; n++) {
		int v = n < body - (size_t)pad ?
		    b64((unsigned char)text[PREFIX_LEN + n]) : 0;

		if (v < 0) {
			free(bin);
			*why = "a byte between \"MUNGE:\" and the closing ':' "
			    "is not a base64 digit";
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		if (n % 4 == 3) {
			bin[out++] = (uint8_t)(acc >> 16);
			bin[out++] = (uint8_t)(acc >> 8);
			bin[out++] = (uint8_t)acc;
			acc = 0;
		}
	}
	out -= (size_t)pad;
	/* munge_encode leaves the unused bits of the last digit zero. */
	if (pad > 0 && (b64((unsigned char)text[PREFIX_LEN + body - pad - 1]) &
	    (pad == 1 ? 3 : 15)) != 0) {
		free(bin);
		*why = "its base64 is not written as munge_encode writes it "
		    "(unused bits set)";
		return -1;
	}
	if (out < 5) {
		free(bin);
		*why = "it is too short to be a MUNGE credential";
		return -1;
	}
	/* The MAC and the fields before it; a cipher or MAC type rdzvd does
	 * not know keys on the whole credential, which its one canonical
	 * text makes unique as well. */
	iv = iv_len(bin[1]);
	mac = mac_len(bin[2]);
	at = (size_t)5 + bin[4] + (size_t)(iv >= 0 ? iv : 0) +
	    (size_t)(mac >= 0 ? mac : 0);
	if (iv < 0 || mac < 0 || at > out)
		at = out;
	ok = EVP_Digest(bin, at, md, &mdlen, EVP_sha256(), NULL) == 1 &&
	    mdlen == AUTH_CRED_KEY_LEN;
	free(bin);
	if (!ok) {
		*why = "rdzvd cannot digest it (out of memory?)";
		return -1;
	}
	return 0;
}
