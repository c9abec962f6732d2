/*
 * In-process restart (SPEC §4 rule 15, docs/RECOVERY.md): the local socket
 * over which kept workers take a new assignment instead of being stopped
 * and started again. The agent listens on a unix stream socket,
 * <log-dir>/restart.sock (or the abstract name "@rdzv-agent.PID.restart"
 * when that path is too long), named to the workers in RDZV_RESTART_SOCKET. A
 * worker that runs its training under rdzv.elastic connects and speaks in
 * lines of text:
 *
 *   worker -> agent   hello 1 LOCAL_RANK GENERATION
 *                     failed GENERATION MESSAGE   its train function broke
 *                     absent GENERATION RANK...   its round's meeting timed
 *                                                 out waiting for these
 *                                                 global ranks (sent just
 *                                                 before its failed line)
 *                     took GENERATION             it applied an assignment
 *   agent -> worker   assign GENERATION COUNT, COUNT lines NAME=VALUE (the
 *                     variables of SPEC §5), then end
 *
 * A hello is believed only from a process of that worker's process group
 * (SO_PEERCRED). What to do with it is the hub's: this module says when a
 * set can be kept (every worker said hello), hands an assignment to it,
 * and tells the hub of failures and of a set that did not take its
 * assignment within the stop timeout (inproc_events).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "workers.h"
#include "clock.h"
#include "log.h"

#define INPROC_LINE_MAX	1024

static void	peer_drop(struct inproc *, int i);

static int
peer_find(const struct inproc *ip, int fd)
{
	for (int i = 0; i < ip->n_peers; i++)
		if (ip->peers[i].fd == fd)
			return i;
	return -1;
}

/* Whether |pid| runs in the process group of local rank |lr|'s worker. */
static bool
peer_is_worker(const struct workers *ws, int lr, pid_t pid)
{
	pid_t pg;

	if (ws->state != WS_RUNNING || lr < 0 || lr >= ws->n ||
	    ws->w[lr].pid <= 0 || ws->w[lr].exited)
		return false;
	pg = getpgid(pid);
	return pid == ws->w[lr].pid || (pg > 0 && pg == ws->w[lr].pid);
}

static void
took_all(struct inproc *ip)
{
	const struct workers *ws = ip->ws;
	int took = 0;

	if (ip->handing == 0)
		return;
	for (int i = 0; i < ip->n_peers; i++)
		if (ip->peers[i].hello && ip->peers[i].took == ip->handing)
			took++;
	if (took < ws->n)
		return;
	evtimer_del(ip->late_timer);
	log_info("generation %llu: %d worker%s kept (in-process restart)",
	    (unsigned long long)ip->handing, took, took == 1 ? "" : "s");
	ip->handing = 0;
}

/* "absent GEN R1 R2 ...": the ranks, each a number below 2^32, at most
 * as many as a line holds; -1 when the line is not that. */
static int
absent_line(struct inproc *ip, uint64_t gen, const char *s)
{
	uint32_t ranks[INPROC_LINE_MAX / 2];
	size_t n = 0;
	char *end;

	while (*s == ' ') {
		unsigned long r;

		s++;
		errno = 0;
		r = strtoul(s, &end, 10);
		if (end == s || errno != 0 || r > UINT32_MAX ||
		    (*end != ' ' && *end != '\0') ||
		    n == sizeof(ranks) / sizeof(ranks[0]))
			return -1;
		ranks[n++] = (uint32_t)r;
		s = end;
	}
	if (*s != '\0' || n == 0)
		return -1;
	ip->ev.absent(ip->ev.arg, gen, ranks, n);
	return 0;
}

static void
line(struct inproc *ip, struct inproc_peer *p, char *s)
{
	unsigned long long gen;
	int lr, n = 0;

	if (sscanf(s, "hello 1 %d %llu%n", &lr, &gen, &n) == 2 && n > 0) {
		if (!peer_is_worker(ip->ws, lr, p->pid)) {
			log_warnx("restart socket: process %d is not the "
			    "worker of local rank %d; ignored", (int)p->pid,
			    lr);
			return;
		}
		if (!p->hello)
			ip->hellos++;
		p->hello = true;
		p->local_rank = lr;
		log_debug("local rank %d (process %d) restarts in-process",
		    lr, (int)p->pid);
		/* A round may be waiting for this set (inproc_starting). */
		if (ip->ev.ready != NULL)
			ip->ev.ready(ip->ev.arg);
		return;
	}
	if (!p->hello)
		goto bad;
	if (sscanf(s, "took %llu%n", &gen, &n) == 1 && n > 0) {
		p->took = gen;
		took_all(ip);
		return;
	}
	if (sscanf(s, "failed %llu %n", &gen, &n) == 1 && n > 0) {
		ip->ev.failed(ip->ev.arg, gen, p->local_rank, s + n);
		return;
	}
	if (sscanf(s, "absent %llu%n", &gen, &n) == 1 && n > 0 &&
	    absent_line(ip, gen, s + n) == 0)
		return;
bad:
	log_warnx("restart socket: ignoring \"%.60s\" from process %d", s,
	    (int)p->pid);
}

static void
peer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct inproc *ip = arg;
	struct inproc_peer *p;
	char *nl;
	ssize_t n;
	int i;

	if ((i = peer_find(ip, fd)) < 0)
		return;
	p = &ip->peers[i];
	n = read(fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		peer_drop(ip, i);
		return;
	}
	p->len += (size_t)n;
	p->buf[p->len] = '\0';
	while ((nl = strchr(p->buf, '\n')) != NULL) {
		*nl = '\0';
		line(ip, p, p->buf);
		/* line() may have ended the peer's connection: look again. */
		if ((i = peer_find(ip, fd)) < 0)
			return;
		p = &ip->peers[i];
		p->len -= (size_t)(nl + 1 - p->buf);
		memmove(p->buf, nl + 1, p->len + 1);
	}
	if (p->len == sizeof(p->buf) - 1) {
		log_warnx("restart socket: a line over %d bytes from process "
		    "%d; closing it", INPROC_LINE_MAX, (int)p->pid);
		peer_drop(ip, i);
	}
}

static void
accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct inproc *ip = arg;
	struct inproc_peer *p;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int c;

	if ((c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		return;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    (cred.uid != getuid() && cred.uid != 0)) {
		close(c);
		return;
	}
	if (ip->n_peers == ip->cap) {
		ip->cap = ip->cap == 0 ? 8 : ip->cap * 2;
		ip->peers = xreallocarray(ip->peers, (size_t)ip->cap,
		    sizeof(*ip->peers));
	}
	p = &ip->peers[ip->n_peers++];
	memset(p, 0, sizeof(*p));
	p->fd = c;
	p->pid = cred.pid;
	p->local_rank = -1;
	p->ev = event_new(ip->base, c, EV_READ | EV_PERSIST, peer_cb, ip);
	if (p->ev == NULL || event_add(p->ev, NULL) != 0)
		fatalx("out of memory");
}

static void
peer_drop(struct inproc *ip, int i)
{
	struct inproc_peer *p = &ip->peers[i];

	event_free(p->ev);
	close(p->fd);
	ip->peers[i] = ip->peers[--ip->n_peers];
}

static void
late_cb(evutil_socket_t fd, short what, void *arg)
{
	struct inproc *ip = arg;
	uint64_t gen = ip->handing;

	ip->handing = 0;
	if (gen != 0)
		ip->ev.late(ip->ev.arg, gen);
}

static void
start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct inproc *ip = arg;

	if (ip->ev.ready != NULL)
		ip->ev.ready(ip->ev.arg);
}

/* The peer of local rank |lr| that said hello, or NULL. */
static struct inproc_peer *
peer_of(struct inproc *ip, int lr)
{
	for (int i = 0; i < ip->n_peers; i++)
		if (ip->peers[i].hello && ip->peers[i].local_rank == lr)
			return &ip->peers[i];
	return NULL;
}

/* Whether every worker of the running set takes assignments here. */
bool
inproc_ready(struct inproc *ip)
{
	const struct workers *ws = ip->ws;

	if (ws->state != WS_RUNNING || ws->alive != ws->n || ws->n == 0)
		return false;
	for (int i = 0; i < ws->n; i++) {
		struct inproc_peer *p = peer_of(ip, i);
		if (p == NULL || !peer_is_worker(ws, i, p->pid))
			return false;
	}
	return true;
}

/*
 * Whether the running set is still starting: every worker runs, not all
 * of them said hello yet, and less than |window_ms| passed since they
 * started (a new process imports torch before it reaches rdzv.elastic:
 * seconds on a busy host). Then the hub hears ready() at the next hello
 * or when the window ends, and decides again: a round that came
 * meanwhile waits for these workers rather than restart processes that
 * are about to take it. Restarting them instead, with rounds coming more
 * often than a process starts (a kept worker's meeting that times out
 * waiting for them forms the next), restarted them forever (issue 41).
 */
bool
inproc_starting(struct inproc *ip, uint32_t window_ms)
{
	const struct workers *ws = ip->ws;
	uint64_t ran_ms = mono_since(mono_us(), ip->set_us) / 1000, left;
	struct timeval tv;

	if (ws->state != WS_RUNNING || ws->alive != ws->n || ws->n == 0 ||
	    ip->hellos >= ws->n || ran_ms >= window_ms)
		return false;
	left = window_ms - ran_ms;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	evtimer_add(ip->start_timer, &tv);
	return true;
}

static int
send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Hands |asg| to every worker of the running set (inproc_ready() said
 * yes); |ew| is the workers' part of SPEC §5 (local_rank is set here).
 * They have stop_timeout_ms to take it, else the hub hears late(). 0, or
 * -1 when it could not be sent to every worker (then the hub stops the set
 * as it would without in-process restart).
 */
int
inproc_hand(struct inproc *ip, const struct assignment *asg,
    struct env_worker ew, uint32_t stop_timeout_ms)
{
	const struct workers *ws = ip->ws;
	struct timeval tv = { stop_timeout_ms / 1000,
	    (stop_timeout_ms % 1000) * 1000 };
	struct env_vars ev;
	char *msg;
	size_t len;

	msg = xmalloc(sizeof(ev.buf) + 128);
	for (int i = 0; i < ws->n; i++) {
		struct inproc_peer *p = peer_of(ip, i);

		ew.local_rank = i;
		ew.error_file = ws->w[i].error_file;
		env_vars(&ev, asg, &ew, environ);
		len = (size_t)snprintf(msg, 128, "assign %llu %zu\n",
		    (unsigned long long)asg->generation, ev.n);
		for (size_t k = 0; k < ev.n; k++) {
			if (strchr(ev.vars[k], '\n') != NULL)
				goto fail;
			len += (size_t)sprintf(msg + len, "%s\n", ev.vars[k]);
		}
		len += (size_t)sprintf(msg + len, "end\n");
		if (p == NULL || send_all(p->fd, msg, len) != 0)
			goto fail;
	}
	free(msg);
	ip->handing = asg->generation;
	evtimer_add(ip->late_timer, &tv);
	return 0;
fail:
	free(msg);
	return -1;
}

/* A new set of processes starts: the connections of the old one go. */
void
inproc_reset(struct inproc *ip)
{
	ip->handing = 0;
	ip->hellos = 0;
	ip->set_us = mono_us();
	if (ip->late_timer != NULL)
		evtimer_del(ip->late_timer);
	if (ip->start_timer != NULL)
		evtimer_del(ip->start_timer);
	while (ip->n_peers > 0)
		peer_drop(ip, ip->n_peers - 1);
}

/* The socket in the log directory |dir|, for the workers of |ws|. */
int
inproc_init(struct inproc *ip, struct event_base *base, const char *dir,
    const struct workers *ws, const struct inproc_events *ev, char *err,
    size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len = sizeof(sun);
	char cwd[256];

	ip->base = base;
	ip->ws = ws;
	ip->ev = *ev;
	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL)
		snprintf(ip->path, sizeof(ip->path), "%s/%s/restart.sock",
		    cwd, dir);
	else
		snprintf(ip->path, sizeof(ip->path), "%s/restart.sock", dir);
	if (strlen(ip->path) < sizeof(sun.sun_path)) {
		memcpy(sun.sun_path, ip->path, strlen(ip->path) + 1);
		snprintf(ip->env, sizeof(ip->env), "%s", ip->path);
		unlink(ip->path);	/* one a killed agent left */
	} else {
		ip->path[0] = '\0';
		snprintf(ip->env, sizeof(ip->env), "@rdzv-agent.%ld.restart",
		    (long)getpid());
		memcpy(sun.sun_path + 1, ip->env + 1, strlen(ip->env) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
		    strlen(ip->env));
	}
	if ((ip->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0 || bind(ip->fd, (struct sockaddr *)&sun,
	    len) != 0 || listen(ip->fd, 64) != 0) {
		snprintf(err, errlen, "restart socket %s: %s", ip->env,
		    strerror(errno));
		return -1;
	}
	if (ip->path[0] != '\0')
		chmod(ip->path, 0600);
	ip->accept_ev = event_new(base, ip->fd, EV_READ | EV_PERSIST,
	    accept_cb, ip);
	ip->late_timer = evtimer_new(base, late_cb, ip);
	ip->start_timer = evtimer_new(base, start_cb, ip);
	if (ip->accept_ev == NULL || ip->late_timer == NULL ||
	    ip->start_timer == NULL ||
	    event_add(ip->accept_ev, NULL) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* Accepts a half-built one (fd -1). */
void
inproc_free(struct inproc *ip)
{
	inproc_reset(ip);
	free(ip->peers);
	ip->peers = NULL;
	ip->cap = 0;
	if (ip->accept_ev != NULL)
		event_free(ip->accept_ev);
	if (ip->late_timer != NULL)
		event_free(ip->late_timer);
	if (ip->start_timer != NULL)
		event_free(ip->start_timer);
	ip->accept_ev = ip->late_timer = ip->start_timer = NULL;
	if (ip->fd >= 0)
		close(ip->fd);
	ip->fd = -1;
	if (ip->path[0] != '\0')
		unlink(ip->path);
	ip->path[0] = '\0';
}
