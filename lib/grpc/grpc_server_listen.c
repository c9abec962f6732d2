/*
 * The gRPC server's listeners and accepting: TCP and unix sockets (with the
 * unix socket file's mode and group), pausing instead of spinning when
 * accept fails (out of descriptors), refusing connections past max_conns,
 * and telling the program when new clients stop being served and when they
 * are again. The connection an accepted socket becomes is grpc_server.c's.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "grpc_server_int.h"

/* How long accepting pauses when we are out of file descriptors. */
#define ACCEPT_PAUSE_MS		500

/* Accepting again after a pause: a descriptor may be free now. */
static void
accept_resume(struct grpc_server *srv)
{
	srv->accept_paused = 0;
	evtimer_del(srv->accept_ev);
	if (srv->shutting_down)
		return;
	for (size_t i = 0; i < srv->n_listeners; i++)
		evconnlistener_enable(srv->listeners[i]->evl);
}

static void
accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	accept_resume(arg);
}

int
grpc_server_port(const struct grpc_server *srv, size_t listener)
{
	if (listener >= srv->n_listeners)
		return -1;
	return srv->listeners[listener]->port;
}

/*
 * Out of descriptors (or another accept error): stop accepting instead of
 * spinning on a listener that stays readable. The next of our connections
 * to close frees a descriptor and resumes accepting (gsrv_conn_close); the
 * timer covers descriptors freed elsewhere (relayd does the same). The
 * program hears of the first failure of an episode, and of each.
 *
 * libevent accepts until accept fails, and with the descriptor table full
 * that is EMFILE even when no client waits: no failure until one does, and
 * the listener, not readable, costs nothing meanwhile.
 */
static void
accept_error_cb(struct evconnlistener *evl, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	struct timeval tv = ms_tv(ACCEPT_PAUSE_MS);
	int err = errno;
	struct pollfd pfd = { evconnlistener_get_fd(evl), POLLIN, 0 };

	if (poll(&pfd, 1, 0) == 0)
		return;
	for (size_t i = 0; i < srv->n_listeners; i++)
		evconnlistener_disable(srv->listeners[i]->evl);
	srv->accept_paused = 1;
	evtimer_add(srv->accept_ev, &tv);
	if (srv->accept_err == 0) {
		srv->accept_err = err;
		srv->accept_failed_ms = mono_ms();
		srv->accept_failures = 0;
		if (srv->opts.accept_blocked != NULL)
			srv->opts.accept_blocked(err, 0, 0, 0,
			    srv->opts.cb_arg);
	}
	srv->accept_failures++;
	if (srv->opts.accept_paused != NULL)
		srv->opts.accept_paused(err, ACCEPT_PAUSE_MS, srv->opts.cb_arg);
}

/*
 * TCP_NODELAY: replies are small and must not wait for an ACK. And our
 * keepalive PINGs make a dead peer's kernel stop ACKing: with
 * TCP_USER_TIMEOUT the connection then fails after three intervals instead
 * of TCP's quarter of an hour. A live client that is merely slow to answer
 * PINGs (grpcio polls only during calls) is kept. Set on the listening
 * socket, they hold for every connection it accepts on Linux, which saves
 * two system calls per connection.
 */
static void
tcp_sockopts(const struct grpc_server *srv, int fd)
{
	unsigned int uto = srv->opts.keepalive_ms * 3;
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (uto > 0)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto,
		    sizeof(uto));
}

/*
 * A socket accepted: the end of an episode of failed accepts, and a new
 * connection unless max_conns are open. Refused connections are closed at
 * once (a client would rather be told than wait); the program hears of the
 * first of an episode.
 */
static void
accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	uint64_t now;
	char why[160];

	if (srv->accept_err != 0) {
		now = mono_ms();
		if (srv->opts.accept_blocked != NULL)
			srv->opts.accept_blocked(srv->accept_err, 1,
			    mono_since(now, srv->accept_failed_ms), srv->accept_failures,
			    srv->opts.cb_arg);
		srv->accept_err = 0;
	}
	if (srv->shutting_down) {
		evutil_closesocket(fd);
		return;
	}
	if (srv->n_conns >= srv->opts.max_conns) {
		snprintf(why, sizeof(why), "max-connections (%u) reached",
		    srv->opts.max_conns);
		if (gsrv_limits_make_room(srv, NULL, why) == 0)
			goto serve;
	}
	if (srv->n_conns >= srv->opts.max_conns) {
		if (srv->full_ms == 0) {
			srv->full_ms = mono_ms();
			srv->full_refused = 0;
			if (srv->opts.accept_blocked != NULL)
				srv->opts.accept_blocked(0, 0, 0, 0,
				    srv->opts.cb_arg);
		}
		srv->full_refused++;
		snprintf(why, sizeof(why), "rdzvd: max-connections (%u) "
		    "reached, and each connection made an authenticated call",
		    srv->opts.max_conns);
		gsrv_limits_refuse(fd, l->tls != NULL, why);
		return;
	}
serve:
#ifndef __linux__
	/* Linux copies these from the listening socket (tcp_sockopts). */
	if (!l->unix_socket)
		tcp_sockopts(srv, fd);
#endif
	gsrv_conn_new(l, fd, sa);
}

void
gsrv_listen_conn_gone(struct grpc_server *srv)
{
	if (srv->accept_paused)
		accept_resume(srv);
	if (srv->full_ms != 0 && srv->n_conns < srv->opts.max_conns) {
		if (srv->opts.accept_blocked != NULL)
			srv->opts.accept_blocked(0, 1, mono_ms() - srv->full_ms,
			    srv->full_refused, srv->opts.cb_arg);
		srv->full_ms = 0;
	}
}

static int
listen_socket(const struct endpoint *ep, int *port)
{
	struct addrinfo hints, *res, *ai;
	char portstr[16];
	int fd = -1, err = -EADDRNOTAVAIL, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof(portstr), "%u", ep->port);
	int rc = getaddrinfo(ep->host, portstr, &hints, &res);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;

	/* The first address that binds: one listener per endpoint. */
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			    sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 1024) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		return err;

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

/*
 * The socket file's mode and group, between bind and listen: until it
 * listens nobody can connect, so no client ever connects under the
 * umask's permissions. chown only when the group differs, since it needs
 * privileges (and a system call that sandboxes often forbid) that a file
 * created with the right group does not.
 */
static int
unix_perms(const struct grpc_server *srv, const char *path)
{
	struct stat st;

	if (srv->opts.unix_mode != 0 &&
	    chmod(path, srv->opts.unix_mode & 07777) == -1)
		return -errno;
	if (!srv->opts.unix_set_gid)
		return 0;
	if (stat(path, &st) == -1)
		return -errno;
	if (st.st_gid != srv->opts.unix_gid &&
	    chown(path, (uid_t)-1, srv->opts.unix_gid) == -1)
		return -errno;
	return 0;
}

/* A socket file left by an earlier run is removed; anything else is not. */
static int
listen_unix(const struct grpc_server *srv, const struct endpoint *ep)
{
	struct sockaddr_un sun;
	struct stat st;
	int err;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(ep->path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, ep->path);
	if (lstat(ep->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(ep->path);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		err = -errno;
		close(fd);
		return err;
	}
	err = unix_perms(srv, ep->path);
	if (err == 0 && listen(fd, 1024) == -1)
		err = -errno;
	if (err != 0) {
		unlink(ep->path);
		close(fd);
		return err;
	}
	return fd;
}

int
grpc_server_listen(struct grpc_server *srv, const struct endpoint *ep,
    struct tls_ctx *tls)
{
	struct grpc_listener *l, **ls;
	int fd, port = -1;

	if (srv->shutting_down)
		return -ESHUTDOWN;
	if (srv->accept_ev == NULL &&
	    (srv->accept_ev = evtimer_new(srv->base, accept_resume_cb,
	    srv)) == NULL)
		return -ENOMEM;
	if (ep->kind == ENDPOINT_UNIX)
		fd = listen_unix(srv, ep);
	else
		fd = listen_socket(ep, &port);
	if (fd < 0)
		return fd;
	if (ep->kind != ENDPOINT_UNIX)
		tcp_sockopts(srv, fd);

	l = calloc(1, sizeof(*l));
	ls = reallocarray(srv->listeners, srv->n_listeners + 1, sizeof(*ls));
	if (ls != NULL)
		srv->listeners = ls;
	if (l == NULL || ls == NULL) {
		free(l);
		close(fd);
		return -ENOMEM;
	}
	l->srv = srv;
	l->tls = tls;
	l->unix_socket = ep->kind == ENDPOINT_UNIX;
	l->port = port;
	if (l->unix_socket) {
		struct stat st;
		snprintf(l->path, sizeof(l->path), "%s", ep->path);
		if (stat(l->path, &st) == 0) {
			l->dev = st.st_dev;
			l->ino = st.st_ino;
		}
	}
	/* libevent's default backlog (128) drops SYNs when a whole cluster
	 * connects at once, and each dropped client waits a second to retry;
	 * the kernel caps this at net.core.somaxconn. */
	l->evl = evconnlistener_new(srv->base, accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 65535, fd);
	if (l->evl == NULL) {
		free(l);
		close(fd);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(l->evl, accept_error_cb);
	srv->listeners[srv->n_listeners++] = l;
	return 0;
}

void
gsrv_listeners_free(struct grpc_server *srv)
{
	for (size_t i = 0; i < srv->n_listeners; i++) {
		struct grpc_listener *l = srv->listeners[i];
		struct stat st;
		/* Our socket file, unless someone has replaced it since. */
		if (l->unix_socket && stat(l->path, &st) == 0 &&
		    st.st_dev == l->dev && st.st_ino == l->ino)
			unlink(l->path);
		evconnlistener_free(l->evl);
		free(l);
	}
	free(srv->listeners);
	srv->listeners = NULL;
	srv->n_listeners = 0;
	if (srv->accept_ev != NULL)
		evtimer_del(srv->accept_ev);
}
