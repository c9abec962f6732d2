/*
 * TLS contexts on OpenSSL 3 for the gRPC server and client. Both sides insist
 * on TLS 1.2 or newer and on ALPN "h2" (gRPC is HTTP/2 only). Errors name the
 * file and OpenSSL's reason so a user can fix the right flag.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "errf.h"
#include "tls.h"

struct tls_ctx {
	SSL_CTX *ssl;
	int server;
	int wants_client_cert;
};

static const unsigned char alpn_h2[] = { 2, 'h', '2' };

/*
 * OpenSSL's reason for the oldest queued error, in lower case as it prints.
 * The queue is emptied: the reason is all we report, and a stale entry
 * would be blamed for the next failure.
 */
static const char *
ssl_reason(void)
{
	unsigned long e = ERR_peek_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r != NULL ? r : "unknown OpenSSL error";
}

/* strerror with a lower-case first letter, to read well after a colon. */
static const char *
errno_reason(int e, char *buf, size_t len)
{
	if (e == ENOENT)
		snprintf(buf, len, "no such file");
	else
		snprintf(buf, len, "%s", strerror(e));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && buf[1] >= 'a' && buf[1] <= 'z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* Refuses to prompt for a passphrase: daemons have no terminal. */
static int
no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf; (void)size; (void)rwflag; (void)u;
	return 0;
}

/* Opens |path| for reading, failing with a message naming |what|. */
static int
open_file(const char *what, const char *path, FILE **out, char *err,
    size_t errlen)
{
	char why[128];
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		int e = errno;
		return errf(-e, err, errlen, "%s %s: %s", what, path,
		    errno_reason(e, why, sizeof(why)));
	}
	*out = f;
	return 0;
}

/*
 * Loads the certificate chain and the private key into |ssl| and checks that
 * they belong together. The key is read here rather than with
 * SSL_CTX_use_PrivateKey_file so a mismatch gets its own message.
 */
static int
load_cert_key(SSL_CTX *ssl, const char *cert, const char *key, char *err,
    size_t errlen)
{
	FILE *f = NULL;
	int rc;

	if ((rc = open_file("tls-cert", cert, &f, err, errlen)) != 0)
		return rc;
	fclose(f);
	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(ssl, cert) != 1)
		return errf(-EINVAL, err, errlen, "tls-cert %s: %s", cert,
		    ssl_reason());

	if ((rc = open_file("tls-key", key, &f, err, errlen)) != 0)
		return rc;
	EVP_PKEY *pkey = PEM_read_PrivateKey(f, NULL, no_password, NULL);
	fclose(f);
	if (pkey == NULL)
		return errf(-EINVAL, err, errlen, "tls-key %s: %s", key,
		    ssl_reason());

	X509 *x = SSL_CTX_get0_certificate(ssl);
	if (x == NULL || X509_check_private_key(x, pkey) != 1) {
		EVP_PKEY_free(pkey);
		ERR_clear_error();
		return errf(-EINVAL, err, errlen,
		    "tls-cert %s does not match tls-key %s", cert, key);
	}
	if (SSL_CTX_use_PrivateKey(ssl, pkey) != 1 ||
	    SSL_CTX_check_private_key(ssl) != 1) {
		EVP_PKEY_free(pkey);
		return errf(-EINVAL, err, errlen,
		    "tls-cert %s does not match tls-key %s: %s", cert, key,
		    ssl_reason());
	}
	EVP_PKEY_free(pkey);
	return 0;
}

/* Loads |ca| as the trust anchors for verifying the peer. */
static int
load_ca(SSL_CTX *ssl, const char *ca, char *err, size_t errlen)
{
	FILE *f = NULL;
	int rc;

	if ((rc = open_file("tls-ca", ca, &f, err, errlen)) != 0)
		return rc;
	fclose(f);
	ERR_clear_error();
	if (SSL_CTX_load_verify_locations(ssl, ca, NULL) != 1)
		return errf(-EINVAL, err, errlen, "tls-ca %s: %s", ca,
		    ssl_reason());
	return 0;
}

/* Settings common to both sides. */
static int
ctx_common(SSL_CTX *ssl, char *err, size_t errlen)
{
	if (SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION) != 1)
		return errf(-EINVAL, err, errlen, "tls: %s", ssl_reason());
	SSL_CTX_set_options(ssl, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* RFC 7540 §9.2.2: HTTP/2 over TLS 1.2 needs ephemeral AEAD suites. */
	if (SSL_CTX_set_cipher_list(ssl,
	    "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20") != 1)
		return errf(-EINVAL, err, errlen, "tls: %s", ssl_reason());
	SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
	return 0;
}

/* Picks "h2" from the client's list; any other protocol ends the handshake
 * with no_application_protocol. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl; (void)arg;
	if (nghttp2_select_next_protocol((unsigned char **)out, outlen, in,
	    inlen) != 1)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

/* An HTTP/1.1 server: "http/1.1" when the client offers it; a client that
 * offers no ALPN at all (curl without it, old tools) is served too. */
static int
alpn_select_http1(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char http1[] = { 8, 'h', 't', 't', 'p', '/', '1',
	    '.', '1' };
	unsigned char *sel;

	(void)ssl; (void)arg;
	if (SSL_select_next_proto(&sel, outlen, http1, sizeof(http1), in,
	    inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static struct tls_ctx *
ctx_alloc(const SSL_METHOD *method, int server, char *err, size_t errlen)
{
	struct tls_ctx *ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		errf(0, err, errlen, "tls: out of memory");
		return NULL;
	}
	ctx->server = server;
	ERR_clear_error();
	if ((ctx->ssl = SSL_CTX_new(method)) == NULL) {
		errf(0, err, errlen, "tls: %s", ssl_reason());
		free(ctx);
		return NULL;
	}
	return ctx;
}

int
tls_server_new(const struct tls_opts *opts, struct tls_ctx **out, char *err,
    size_t errlen)
{
	static const unsigned char sid_ctx[] = "rdzv";
	struct tls_ctx *ctx;
	int rc;

	*out = NULL;
	if (opts->cert == NULL || opts->key == NULL)
		return errf(-EINVAL, err, errlen,
		    "tls: a server needs both tls-cert and tls-key");
	if ((ctx = ctx_alloc(TLS_server_method(), 1, err, errlen)) == NULL)
		return -ENOMEM;
	if ((rc = ctx_common(ctx->ssl, err, errlen)) != 0)
		goto bad;
	if ((rc = load_cert_key(ctx->ssl, opts->cert, opts->key, err,
	    errlen)) != 0)
		goto bad;
	SSL_CTX_set_alpn_select_cb(ctx->ssl, opts->http1 ? alpn_select_http1 :
	    alpn_select, NULL);
	/* Session resumption with client verification needs an id context. */
	SSL_CTX_set_session_id_context(ctx->ssl, sid_ctx, sizeof(sid_ctx) - 1);

	if (opts->ca != NULL) {
		if ((rc = load_ca(ctx->ssl, opts->ca, err, errlen)) != 0)
			goto bad;
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(opts->ca);
		if (names != NULL)
			SSL_CTX_set_client_CA_list(ctx->ssl, names);
		SSL_CTX_set_verify(ctx->ssl,
		    SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		ctx->wants_client_cert = 1;
	}
	ERR_clear_error();
	*out = ctx;
	return 0;
bad:
	tls_free(ctx);
	return rc;
}

int
tls_client_new(const struct tls_opts *opts, struct tls_ctx **out, char *err,
    size_t errlen)
{
	struct tls_ctx *ctx;
	int rc;

	*out = NULL;
	if ((opts->cert == NULL) != (opts->key == NULL))
		return errf(-EINVAL, err, errlen,
		    "tls: a client certificate needs both tls-cert and tls-key");
	if ((ctx = ctx_alloc(TLS_client_method(), 0, err, errlen)) == NULL)
		return -ENOMEM;
	if ((rc = ctx_common(ctx->ssl, err, errlen)) != 0)
		goto bad;
	/* Note the inverted convention: 0 is success here. */
	if (SSL_CTX_set_alpn_protos(ctx->ssl, alpn_h2, sizeof(alpn_h2)) != 0) {
		rc = errf(-ENOMEM, err, errlen, "tls: %s", ssl_reason());
		goto bad;
	}
	if (opts->cert != NULL && (rc = load_cert_key(ctx->ssl, opts->cert,
	    opts->key, err, errlen)) != 0)
		goto bad;
	if (opts->ca != NULL) {
		if ((rc = load_ca(ctx->ssl, opts->ca, err, errlen)) != 0)
			goto bad;
	} else if (SSL_CTX_set_default_verify_paths(ctx->ssl) != 1) {
		rc = errf(-EINVAL, err, errlen,
		    "tls: system trust store: %s", ssl_reason());
		goto bad;
	}
	SSL_CTX_set_verify(ctx->ssl, SSL_VERIFY_PEER, NULL);
	ERR_clear_error();
	*out = ctx;
	return 0;
bad:
	tls_free(ctx);
	return rc;
}

void
tls_free(struct tls_ctx *ctx)
{
	if (ctx == NULL)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

SSL_CTX *
tls_ssl_ctx(struct tls_ctx *ctx)
{
	return ctx->ssl;
}

int
tls_wants_client_cert(const struct tls_ctx *ctx)
{
	return ctx != NULL && ctx->wants_client_cert;
}

int
tls_peer_subject(SSL *ssl, char *buf, size_t len)
{
	if (len > 0)
		buf[0] = '\0';
	X509 *x = SSL_get0_peer_certificate(ssl);
	if (x == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
		return -ENOENT;

	BIO *bio = BIO_new(BIO_s_mem());
	if (bio == NULL)
		return -ENOMEM;
	int rc = 0;
	if (X509_NAME_print_ex(bio, X509_get_subject_name(x), 0,
	    XN_FLAG_RFC2253) < 0) {
		rc = -EINVAL;
	} else {
		char *p;
		long n = BIO_get_mem_data(bio, &p);
		if (n < 0 || (size_t)n >= len)
			rc = -ENOSPC;
		else {
			memcpy(buf, p, (size_t)n);
			buf[n] = '\0';
		}
	}
	BIO_free(bio);
	return rc;
}
