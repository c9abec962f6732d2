/*
 * TLS contexts for the gRPC server and client: TLS 1.2 or newer, ALPN "h2",
 * optional client certificates (SPEC §10, §11). OpenSSL underneath.
 */
#ifndef RDZV_TLS_H
#define RDZV_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

struct tls_opts {
	const char *cert;	/* PEM certificate (chain) file */
	const char *key;	/* PEM private key file */
	const char *ca;		/* server: verify and require client
				   certificates against this CA; client:
				   verify the server against it (NULL: the
				   system's trust store) */
	int http1;		/* server: ALPN "http/1.1" (or none)
				   instead of "h2", for an HTTP/1.1
				   listener such as rdzvd's status page */
};

struct tls_ctx;

/* Returns 0 or a negative errno, with a message naming the file and the
 * OpenSSL error in |err|. */
int tls_server_new(const struct tls_opts *opts, struct tls_ctx **out,
    char *err, size_t errlen);
int tls_client_new(const struct tls_opts *opts, struct tls_ctx **out,
    char *err, size_t errlen);

void tls_free(struct tls_ctx *ctx);

SSL_CTX *tls_ssl_ctx(struct tls_ctx *ctx);

/* 1 when the context verifies client certificates (a server with a CA). */
int tls_wants_client_cert(const struct tls_ctx *ctx);

/* The verified peer certificate's subject as an RFC 2253 string
 * ("CN=node1,O=rdzv"). Returns 0, or -ENOENT without a certificate. */
int tls_peer_subject(SSL *ssl, char *buf, size_t len);

#endif
