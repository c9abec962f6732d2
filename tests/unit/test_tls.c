/*
 * Unit tests for lib/base/tls.c: the messages a user sees for missing,
 * broken and mismatched files, and a real in-memory handshake between a server and a
 * client context (ALPN h2, client certificate subject). Certificates are made
 * with the openssl CLI in a temporary directory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "tls.h"

static int failures;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #cond);					\
		failures++;						\
	}								\
} while (0)

#define CHECK_CONTAINS(s, sub) do {					\
	if (strstr((s), (sub)) == NULL) {				\
		fprintf(stderr, "%s:%d: '%s' does not contain '%s'\n",	\
		    __FILE__, __LINE__, (s), (sub));			\
		failures++;						\
	}								\
} while (0)

static char dir[] = "/tmp/rdzv-test-tls-XXXXXX";

static const char *
path(const char *name)
{
	static char buf[8][256];
	static int i;
	char *p = buf[i++ % 8];
	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static void
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "command failed: %s\n", cmd);
		exit(1);
	}
}

/* A CA, a server and a client certificate signed by it, and a stray key. */
static void
make_certs(void)
{
	const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
	sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.pem -days 2 "
	    "-subj '/CN=test CA' 2>/dev/null", dir, ec);
	sh("cd %s && printf 'subjectAltName=DNS:localhost\\n' > srv.ext", dir);
	sh("cd %s && openssl req %s -keyout server.key -out server.csr "
	    "-subj '/CN=localhost' 2>/dev/null && openssl x509 -req -in "
	    "server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
	    "-extfile srv.ext -out server.pem 2>/dev/null", dir, ec);
	sh("cd %s && openssl req %s -keyout client.key -out client.csr "
	    "-subj '/O=rdzv-test/CN=node-7' 2>/dev/null && openssl x509 -req "
	    "-in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
	    "-out client.pem 2>/dev/null", dir, ec);
	sh("cd %s && openssl genpkey -algorithm EC -pkeyopt "
	    "ec_paramgen_curve:P-256 -out other.key 2>/dev/null", dir);
	sh("cd %s && echo 'not a key' > garbage.key", dir);
}

static void
test_errors(void)
{
	struct tls_ctx *ctx = (struct tls_ctx *)1;
	char err[512];
	int rc;
	struct tls_opts o = { .cert = path("server.pem"),
	    .key = path("missing.key") };

	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -ENOENT);
	CHECK(ctx == NULL);
	CHECK_CONTAINS(err, "tls-key ");
	CHECK_CONTAINS(err, "missing.key: no such file");

	o.cert = path("missing.pem");
	o.key = path("server.key");
	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -ENOENT);
	CHECK_CONTAINS(err, "tls-cert ");
	CHECK_CONTAINS(err, "missing.pem: no such file");

	o.cert = path("server.pem");
	o.key = path("other.key");
	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);
	CHECK_CONTAINS(err, "server.pem does not match tls-key ");
	CHECK_CONTAINS(err, "other.key");

	o.key = path("garbage.key");
	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);
	CHECK_CONTAINS(err, "garbage.key: ");

	o.cert = path("garbage.key");
	o.key = path("server.key");
	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);
	CHECK_CONTAINS(err, "tls-cert ");
	CHECK_CONTAINS(err, "garbage.key: ");

	o.cert = path("server.pem");
	o.key = path("server.key");
	o.ca = path("nope-ca.pem");
	rc = tls_server_new(&o, &ctx, err, sizeof(err));
	CHECK(rc == -ENOENT);
	CHECK_CONTAINS(err, "tls-ca ");
	CHECK_CONTAINS(err, "nope-ca.pem: no such file");

	struct tls_opts c = { .ca = path("nope-ca.pem") };
	rc = tls_client_new(&c, &ctx, err, sizeof(err));
	CHECK(rc == -ENOENT);
	CHECK_CONTAINS(err, "tls-ca ");

	c.ca = path("ca.pem");
	c.cert = path("client.pem");
	rc = tls_client_new(&c, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);
	CHECK_CONTAINS(err, "tls-key");

	c.key = path("server.key");
	rc = tls_client_new(&c, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);
	CHECK_CONTAINS(err, "client.pem does not match tls-key ");

	struct tls_opts s = { .cert = path("server.pem") };
	rc = tls_server_new(&s, &ctx, err, sizeof(err));
	CHECK(rc == -EINVAL);

	tls_free(NULL);
}

/* Moves bytes between two memory BIO pairs until neither side progresses. */
static int
handshake(SSL *cli, SSL *srv)
{
	int cdone = 0, sdone = 0;
	for (int i = 0; i < 100 && !(cdone && sdone); i++) {
		if (!cdone) {
			int r = SSL_do_handshake(cli);
			if (r == 1)
				cdone = 1;
			else if (SSL_get_error(cli, r) != SSL_ERROR_WANT_READ)
				return -1;
		}
		if (!sdone) {
			int r = SSL_do_handshake(srv);
			if (r == 1)
				sdone = 1;
			else if (SSL_get_error(srv, r) != SSL_ERROR_WANT_READ)
				return -1;
		}
	}
	return cdone && sdone ? 0 : -1;
}

static int
run_handshake(struct tls_ctx *sctx, struct tls_ctx *cctx, char *subject,
    size_t len, int *alpn_ok)
{
	SSL *srv = SSL_new(tls_ssl_ctx(sctx));
	SSL *cli = SSL_new(tls_ssl_ctx(cctx));
	BIO *a, *b;
	BIO_new_bio_pair(&a, 0, &b, 0);
	SSL_set_bio(cli, a, a);
	SSL_set_bio(srv, b, b);
	SSL_set_connect_state(cli);
	SSL_set_accept_state(srv);
	SSL_set_tlsext_host_name(cli, "localhost");
	SSL_set1_host(cli, "localhost");

	int rc = handshake(cli, srv);
	if (rc == 0) {
		const unsigned char *p;
		unsigned int n;
		SSL_get0_alpn_selected(cli, &p, &n);
		*alpn_ok = n == 2 && memcmp(p, "h2", 2) == 0;
		rc = tls_peer_subject(srv, subject, len);
	}
	SSL_free(cli);
	SSL_free(srv);
	return rc;
}

static void
test_handshake(void)
{
	struct tls_ctx *sctx, *cctx, *mctx;
	char err[512], subject[256];
	int alpn_ok = 0;

	struct tls_opts so = { .cert = path("server.pem"),
	    .key = path("server.key"), .ca = path("ca.pem") };
	CHECK(tls_server_new(&so, &sctx, err, sizeof(err)) == 0);
	CHECK(tls_wants_client_cert(sctx) == 1);

	struct tls_opts co = { .ca = path("ca.pem") };
	CHECK(tls_client_new(&co, &cctx, err, sizeof(err)) == 0);
	CHECK(tls_wants_client_cert(cctx) == 0);

	/* Without a client certificate the server refuses the handshake. */
	CHECK(run_handshake(sctx, cctx, subject, sizeof(subject),
	    &alpn_ok) != 0);

	struct tls_opts mo = { .ca = path("ca.pem"),
	    .cert = path("client.pem"), .key = path("client.key") };
	CHECK(tls_client_new(&mo, &mctx, err, sizeof(err)) == 0);
	CHECK(run_handshake(sctx, mctx, subject, sizeof(subject),
	    &alpn_ok) == 0);
	CHECK(alpn_ok);
	CHECK(strcmp(subject, "CN=node-7,O=rdzv-test") == 0);
	CHECK(run_handshake(sctx, mctx, subject, 4, &alpn_ok) == -ENOSPC);

	/* A server without a CA: no client certificate, no subject. */
	tls_free(sctx);
	so.ca = NULL;
	CHECK(tls_server_new(&so, &sctx, err, sizeof(err)) == 0);
	CHECK(tls_wants_client_cert(sctx) == 0);
	CHECK(run_handshake(sctx, cctx, subject, sizeof(subject),
	    &alpn_ok) == -ENOENT);
	CHECK(alpn_ok);

	tls_free(sctx);
	tls_free(cctx);
	tls_free(mctx);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	make_certs();
	test_errors();
	test_handshake();
	sh("rm -rf %s", dir);
	if (failures > 0) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
