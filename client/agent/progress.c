/*
 * The workers' progress (docs/HEALTH.md). Each worker finds in
 * RDZV_PROGRESS a unix datagram socket of the agent and sends it one small
 * datagram per training step: "1 LOCAL_RANK STEP" (the format's version,
 * then decimal numbers, single spaces, an optional newline). The socket is
 * <log-dir>/progress.sock, or, when that path is too long for a socket
 * address, the abstract name "@rdzv-agent.PID.progress" (the '@' stands
 * for the leading NUL, as in systemd's NOTIFY_SOCKET). Datagrams from
 * another user are dropped (SO_PASSCRED), as are malformed ones.
 *
 * A report whose step differs from that worker's last is progress. The
 * node's step is its slowest reporting worker's; the hub hears when it
 * moves (and forwards it to rdzvd, rate-limited by report.c). With a hang
 * timeout, a libevent timer restarted on each progress fires once when no
 * worker made progress for that long after the first report: the hub then
 * dumps the workers' stacks and fails the node as hung. No polling.
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
#include "log.h"
#include "progress_msg.h"

#define PROGRESS_READS_MAX	256	/* datagrams per wakeup */

/* The node's step: the slowest reporting worker's. */
static uint64_t
slowest_step(const struct progress_watch *p)
{
	uint64_t min = UINT64_MAX;

	for (int i = 0; i < p->n; i++)
		if (p->seen[i] && p->steps[i] < min)
			min = p->steps[i];
	return min;
}

static void
take(struct progress_watch *p, uint32_t rank, uint64_t step)
{
	struct timeval tv = { p->hang_ms / 1000, (p->hang_ms % 1000) * 1000 };
	uint64_t node;

	if (p->generation == 0 || p->hung || rank >= (uint32_t)p->n) {
		p->dropped++;
		return;
	}
	if (p->seen[rank] && p->steps[rank] == step)
		return;		/* the same step again is no progress */
	p->seen[rank] = true;
	p->steps[rank] = step;
	p->moved_us = mono_us();
	if (p->hang_ms > 0)
		evtimer_add(p->hang_timer, &tv);
	node = slowest_step(p);
	if (p->has_step && node == p->step)
		return;
	p->has_step = true;
	p->step = node;
	p->ev.moved(p->ev.arg, p->generation, node);
}

/* One datagram; false when none is left. */
static bool
read_one(struct progress_watch *p)
{
	char buf[PROGRESS_MSG_MAX + 1];
	union {
		struct cmsghdr	h;
		char		b[CMSG_SPACE(sizeof(struct ucred))];
	} cm;
	struct iovec iov = { buf, PROGRESS_MSG_MAX };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = &cm, .msg_controllen = sizeof(cm) };
	struct cmsghdr *c;
	const struct ucred *cred = NULL;
	uint32_t rank;
	uint64_t step;
	ssize_t n;

	do {
		n = recvmsg(p->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return false;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET &&
		    c->cmsg_type == SCM_CREDENTIALS)
			cred = (const struct ucred *)CMSG_DATA(c);
	}
	/* Only our own user (or root) may say how training goes. */
	if (cred == NULL || (cred->uid != getuid() && cred->uid != 0) ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
	    progress_msg_parse(buf, (size_t)n, &rank, &step) != 0) {
		if (p->dropped++ == 0)
			log_warnx("progress: ignoring a malformed or foreign "
			    "message on %s (expected \"1 LOCAL_RANK STEP\")",
			    p->env);
		return true;
	}
	take(p, rank, step);
	return true;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct progress_watch *p = arg;

	for (int i = 0; i < PROGRESS_READS_MAX && read_one(p); i++)
		;
}

static void
hang_cb(evutil_socket_t fd, short what, void *arg)
{
	struct progress_watch *p = arg;

	if (p->generation == 0 || p->hung)
		return;
	p->hung = true;
	p->ev.hung(p->ev.arg);
}

/* Watches the |n| workers of generation |gen|; |hang_ms| 0: no hang
 * detection. What an earlier set sent and nobody read is dropped. */
int
progress_start(struct progress_watch *p, uint64_t gen, int n, uint32_t hang_ms)
{
	char buf[PROGRESS_MSG_MAX];

	progress_stop(p);
	while (p->fd >= 0 && recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
	if ((p->steps = calloc((size_t)n, sizeof(*p->steps))) == NULL ||
	    (p->seen = calloc((size_t)n, sizeof(*p->seen))) == NULL)
		return -1;
	p->n = n;
	p->generation = gen;
	p->hang_ms = hang_ms;
	return 0;
}

/* The workers are gone: nothing is watched until the next start. */
void
progress_stop(struct progress_watch *p)
{
	if (p->hang_timer != NULL)
		evtimer_del(p->hang_timer);
	free(p->steps);
	free(p->seen);
	p->steps = NULL;
	p->seen = NULL;
	p->n = 0;
	p->generation = 0;
	p->has_step = p->hung = false;
	p->step = 0;
}

/* The socket's address: a file in |dir|, else an abstract name. */
static socklen_t
address(struct progress_watch *p, const char *dir, struct sockaddr_un *sun)
{
	char cwd[256];

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	/* Absolute, so that a worker that changes directory still finds it. */
	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL)
		snprintf(p->path, sizeof(p->path), "%s/%s/progress.sock", cwd,
		    dir);
	else
		snprintf(p->path, sizeof(p->path), "%s/progress.sock", dir);
	if (strlen(p->path) < sizeof(sun->sun_path)) {
		memcpy(sun->sun_path, p->path, strlen(p->path) + 1);
		snprintf(p->env, sizeof(p->env), "%s", p->path);
		return (socklen_t)sizeof(*sun);
	}
	p->path[0] = '\0';
	snprintf(p->env, sizeof(p->env), "@rdzv-agent.%ld.progress",
	    (long)getpid());
	memcpy(sun->sun_path + 1, p->env + 1, strlen(p->env) - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    strlen(p->env));
}

/* The socket in (or for) the log directory |dir|; |ev| hears what the
 * workers' progress means. */
int
progress_init(struct progress_watch *p, struct event_base *base,
    const char *dir, const struct progress_events *ev, char *err,
    size_t errlen)
{
	struct sockaddr_un sun;
	socklen_t len;
	int one = 1;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->base = base;
	p->ev = *ev;
	len = address(p, dir, &sun);
	if (p->path[0] != '\0')
		unlink(p->path);	/* one a killed agent left */
	if ((p->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0 || bind(p->fd, (struct sockaddr *)&sun,
	    len) != 0 || setsockopt(p->fd, SOL_SOCKET, SO_PASSCRED, &one,
	    sizeof(one)) != 0) {
		snprintf(err, errlen, "progress socket %s: %s", p->env,
		    strerror(errno));
		return -1;
	}
	if (p->path[0] != '\0')
		chmod(p->path, 0600);
	p->read_ev = event_new(base, p->fd, EV_READ | EV_PERSIST, read_cb, p);
	p->hang_timer = evtimer_new(base, hang_cb, p);
	if (p->read_ev == NULL || p->hang_timer == NULL ||
	    event_add(p->read_ev, NULL) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	log_debug("workers report progress to %s", p->env);
	return 0;
}

/* Accepts a half-built watch. */
void
progress_free(struct progress_watch *p)
{
	progress_stop(p);
	if (p->read_ev != NULL)
		event_free(p->read_ev);
	if (p->hang_timer != NULL)
		event_free(p->hang_timer);
	p->read_ev = p->hang_timer = NULL;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	if (p->path[0] != '\0')
		unlink(p->path);
	p->path[0] = '\0';
}
