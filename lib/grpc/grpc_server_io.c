/*
 * A connection's bytes in and out: reads fed to nghttp2, nghttp2's frames
 * written, and the connection closed once both sides are done with it.
 *
 * TLS connections go through libevent's OpenSSL bufferevent. Cleartext ones
 * (loopback TCP, unix sockets) use the socket directly: a flush writes what
 * nghttp2 produced at once, with one send from the server's staging
 * buffer, and asks for writability only when the socket did not take it
 * all. A bufferevent registers for EV_WRITE and removes it again around
 * every message, two epoll_ctl calls each, and asks FIONREAD before every
 * read; with ten thousand nodes joining at once that was most of the
 * daemon's system calls.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "errf.h"
#include "grpc_server_int.h"

/* Cleartext reads: bytes per recv, and recvs per readable event (more
 * waits for the next turn, so one busy peer cannot starve the others). */
#define READ_CHUNK		16384
#define READS_PER_EVENT		4
/* Cleartext writes: output limits (GRPC_SERVER_WBUF_MAX) written per flush
 * before the rest waits for the next turn. */
#define FLUSH_ROUNDS		16

/*
 * Cleartext frames go to the server's staging buffer (every connection's,
 * in turn: it is written out, or what the socket did not take moved to the
 * connection's own output, before the flush returns), or after the
 * connection's own output while that still holds bytes; TLS ones to the
 * bufferevent's.
 */
ssize_t
gsrv_send_cb(nghttp2_session *h2, const uint8_t *data, size_t len, int flags,
    void *arg)
{
	struct grpc_conn *c = arg;
	struct grpc_server *srv = c->srv;

	/* Backpressure: nghttp2 keeps the frame until the write callback. */
	if (gsrv_conn_unwritten(c) + (srv->stage_owner == c ?
	    srv->stage_len : 0) >= GRPC_SERVER_WBUF_MAX) {
		c->send_blocked = 1;
		return NGHTTP2_ERR_WOULDBLOCK;
	}
	/* The staging buffer is one connection's at a time: another's
	 * frames (were a flush ever to run inside a flush) go to its own. */
	if (c->bev != NULL || (c->out != NULL &&
	    evbuffer_get_length(c->out) > 0) ||
	    (srv->stage_len > 0 && srv->stage_owner != c)) {
		if (c->bev == NULL && c->out == NULL &&
		    (c->out = evbuffer_new()) == NULL)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		if (evbuffer_add(gsrv_conn_output(c), data, len) != 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return (ssize_t)len;
	}
	/* Below the limit it takes one more frame, whatever its size. */
	if (srv->stage_len + len > srv->stage_cap) {
		size_t cap = srv->stage_len + len < GRPC_SERVER_WBUF_MAX ?
		    GRPC_SERVER_WBUF_MAX : srv->stage_len + len;
		uint8_t *p = realloc(srv->stage, cap);

		if (p == NULL)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		srv->stage = p;
		srv->stage_cap = cap;
	}
	memcpy(srv->stage + srv->stage_len, data, len);
	srv->stage_len += len;
	srv->stage_owner = c;
	return (ssize_t)len;
}

/* Forgets what the connection has in the staging buffer. */
void
gsrv_stage_drop(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;

	if (srv->stage_owner != c)
		return;
	srv->stage_len = 0;
	srv->stage_owner = NULL;
}

/* ------------------------------------------- bytes in, frames out */

/* Waits for the socket to take more. */
static int
sconn_wait_writable(struct grpc_conn *c)
{
	if (c->wev == NULL && (c->wev = event_new(c->srv->base, c->fd,
	    EV_WRITE, gsrv_conn_raw_write_cb, c)) == NULL) {
		gsrv_conn_closef(c, "out of memory");
		return -1;
	}
	if (!event_pending(c->wev, EV_WRITE, NULL))
		event_add(c->wev, NULL);
	return 0;
}

/*
 * Cleartext: writes the output now (the connection's own, or the staging
 * buffer's, which is empty when this returns) and waits for writability
 * only when the socket did not take all of it. Returns -1 when that
 * closed the connection.
 */
static int
sconn_write(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;
	size_t done = 0;
	ssize_t n;

	while (c->out != NULL && evbuffer_get_length(c->out) > 0) {
		if ((n = evbuffer_write(c->out, c->fd)) > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			return sconn_wait_writable(c);
		gsrv_conn_closef(c, "write: %s", strerror(errno));
		return -1;
	}
	while (srv->stage_owner == c && done < srv->stage_len) {
		n = send(c->fd, srv->stage + done, srv->stage_len - done,
		    MSG_NOSIGNAL);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			gsrv_stage_drop(c);
			gsrv_conn_closef(c, "write: %s", strerror(errno));
			return -1;
		}
		/* The rest waits in the connection's own output. */
		if ((c->out == NULL && (c->out = evbuffer_new()) == NULL) ||
		    evbuffer_add(c->out, srv->stage + done,
		    srv->stage_len - done) != 0) {
			gsrv_stage_drop(c);
			gsrv_conn_closef(c, "out of memory");
			return -1;
		}
		gsrv_stage_drop(c);
		return sconn_wait_writable(c);
	}
	gsrv_stage_drop(c);
	/* A frame far larger than the limit made it grow: not kept. */
	if (srv->stage_cap > 4 * GRPC_SERVER_WBUF_MAX) {
		free(srv->stage);
		srv->stage = NULL;
		srv->stage_cap = 0;
	}
	return 0;
}

/*
 * Hands nghttp2's pending frames to the socket (or the TLS bufferevent) and
 * closes the connection once both sides are done with it.
 */
void
gsrv_conn_flush(struct grpc_conn *c)
{
	if (c->closed || c->h2 == NULL)
		return;
	for (int round = 0;; round++) {
		c->send_blocked = 0;
		c->in_h2++;
		int rv = nghttp2_session_send(c->h2);
		c->in_h2--;
		if (rv != 0 || c->close_pending)
			gsrv_stage_drop(c);	/* not for a closing one */
		if (rv != 0) {
			gsrv_conn_closef(c, "HTTP/2: %s", nghttp2_strerror(rv));
			return;
		}
		if (c->close_pending) {
			gsrv_conn_close(c, c->close_reason);
			return;
		}
		if (c->bev != NULL)
			break;
		if (sconn_write(c) != 0)
			return;
		/*
		 * The socket took everything but nghttp2 stopped at the
		 * output limit: go on, a bounded number of times per turn so
		 * that one large stream does not hold up every connection.
		 */
		if (!c->send_blocked || gsrv_conn_unwritten(c) > 0)
			break;
		if (round == FLUSH_ROUNDS) {
			gsrv_conn_schedule_flush(c);
			return;
		}
	}
	/*
	 * Whatever nghttp2 could not hand over (the output is full) goes out
	 * from the write callback once the output drains.
	 */
	if (gsrv_conn_unwritten(c) == 0 &&
	    !nghttp2_session_want_write(c->h2) &&
	    (c->draining || !nghttp2_session_want_read(c->h2))) {
		gsrv_conn_close(c,
		    c->close_reason != NULL ? c->close_reason :
		    "the HTTP/2 session ended");
		return;
	}
	gsrv_conn_check_writable(c);
}

/* Feeds bytes read to nghttp2. Returns -1 when the connection closed. */
static int
sconn_feed(struct grpc_conn *c, const uint8_t *data, size_t len,
    size_t *used)
{
	c->in_h2++;
	ssize_t n = nghttp2_session_mem_recv(c->h2, data, len);
	c->in_h2--;
	if (n < 0) {
		gsrv_conn_closef(c, "HTTP/2: %s", nghttp2_strerror((int)n));
		return -1;
	}
	if (c->close_pending) {
		gsrv_conn_close(c, c->close_reason);
		return -1;
	}
	*used = (size_t)n;
	return 0;
}

void
gsrv_conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len, used;

	while (!c->closed && (len = evbuffer_get_contiguous_space(in)) > 0) {
		unsigned char *data = evbuffer_pullup(in, (ev_ssize_t)len);
		if (sconn_feed(c, data, len, &used) != 0)
			return;
		evbuffer_drain(in, used);
	}
	gsrv_conn_flush(c);
}

/* Cleartext: reads straight into nghttp2, then flushes its answers. */
void
gsrv_conn_raw_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	uint8_t buf[READ_CHUNK];
	size_t used;

	for (int i = 0; i < READS_PER_EVENT; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0) {
			/* nghttp2 takes all of it or fails. */
			if (sconn_feed(c, buf, (size_t)n, &used) != 0)
				return;
			if ((size_t)n < sizeof(buf))
				break;
			continue;
		}
		if (n == 0) {
			gsrv_conn_close(c, "the peer closed the connection");
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		gsrv_conn_closef(c, "read: %s", strerror(errno));
		return;
	}
	gsrv_conn_flush(c);
}

void
gsrv_conn_raw_write_cb(evutil_socket_t fd, short what, void *arg)
{
	gsrv_conn_flush(arg);
}

void
gsrv_conn_write_cb(struct bufferevent *bev, void *arg)
{
	gsrv_conn_flush(arg);
}

/*
 * Once TLS is up: insist on h2 and take the certificate's subject. NULL, or
 * why the connection cannot go on.
 */
static const char *
sconn_tls_ready(struct grpc_conn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	const unsigned char *alpn = NULL;
	unsigned int alpnlen = 0;
	char subject[512];
	char *id;

	SSL_get0_alpn_selected(ssl, &alpn, &alpnlen);
	if (alpn == NULL || alpnlen != 2 || memcmp(alpn, "h2", 2) != 0)
		return "TLS: the peer did not offer ALPN h2";
	if (tls_peer_subject(ssl, subject, sizeof(subject)) != 0) {
		if (tls_wants_client_cert(c->listener->tls))
			return "TLS: no client certificate";
		snprintf(subject, sizeof(subject), "anonymous");
	}
	if ((id = gsrv_slab_strdup(c->slab, subject)) == NULL)
		return "out of memory for the peer's identity";
	gsrv_slab_release(c->slab, c->identity);
	c->identity = id;
	if (gsrv_h2_session_new(c) != 0)
		return "out of memory for the HTTP/2 session";
	return NULL;
}

/*
 * The TLS connection ended, or failed. Before the handshake completed
 * (no HTTP/2 session yet) that is a failed handshake the program hears
 * of, unless the peer went away without sending a byte: a port probe or
 * a load balancer's check is not a TLS client.
 */
void
gsrv_conn_event_cb(struct bufferevent *bev, short events, void *arg)
{
	struct grpc_conn *c = arg;
	int err = errno;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	/* Bytes from the peer, and no HTTP/2 session yet. */
	int handshaking = c->h2 == NULL && ssl != NULL &&
	    BIO_number_read(SSL_get_rbio(ssl)) > 0;
	char why[160];
	const char *r;

	if (events & BEV_EVENT_CONNECTED) {
		if ((r = sconn_tls_ready(c)) != NULL) {
			gsrv_conn_tls_fail(c, r);
			return;
		}
		gsrv_conn_flush(c);
		return;
	}
	if (events & BEV_EVENT_ERROR) {
		unsigned long e = bufferevent_get_openssl_error(bev);
		const char *what = e != 0 ? ERR_reason_error_string(e) : NULL;
		if (what != NULL)
			snprintf(why, sizeof(why), "TLS: %s", what);
		else if (err != 0)
			snprintf(why, sizeof(why), "TLS: %s", strerror(err));
		else
			snprintf(why, sizeof(why), "TLS: the connection ended "
			    "without close_notify");
	} else if (events & (BEV_EVENT_EOF | BEV_EVENT_TIMEOUT))
		snprintf(why, sizeof(why), handshaking ? "TLS: the peer closed "
		    "the connection during the handshake" : "the peer closed "
		    "the connection");
	else
		return;
	if (handshaking)
		gsrv_conn_tls_fail(c, why);
	else
		gsrv_conn_close(c, why);
}
