/*
 * librdzv-masterwait.so: preloaded into every worker by rdzv-agent
 * (docs/RECOVERY.md, "Plain workers"). A worker that is not rank 0 makes
 * its first connect() to MASTER_ADDR:MASTER_PORT wait, bounded, until that
 * port answers. torch's TCPStore client sleeps a whole second (torch 1.13;
 * a backoff of about that in 2.x) when it finds the master's store not
 * listening yet, which after a restart it nearly always does: rank 0
 * imports torch at the same time as everyone else. Waiting here instead,
 * probing every 10 ms, connects within 10 ms of the store coming up. The
 * script sees nothing but a connect() that took that long.
 *
 * Only a connection to the port in MASTER_PORT is held, only until the
 * first probe of it answers or RDZV_MASTER_WAIT_MS (default 10000) runs
 * out, and only once per process and port: later connections, other
 * ports, rank 0, and a master that refuses past the bound (torch's own
 * retries take over) go straight through. errno is kept as the real
 * connect() sets it. No sanitizer is built in: it loads into python.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROBE_EVERY_MS	10
#define WAIT_DEFAULT_MS	10000

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static _Atomic(connect_fn) real_connect;
static atomic_int done_port;	/* the port already waited for */

static long
env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno != 0 || *end != '\0' || v < 0 ? dflt : v;
}

static int
addr_port(const struct sockaddr *sa, socklen_t len)
{
	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return -1;
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* 1: |sa| answered; 0: it refused (not listening yet); -1: anything else
 * (unreachable, no answer within |ms|): stop waiting. */
static int
probe(connect_fn fn, const struct sockaddr *sa, socklen_t len, long ms)
{
	int s = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0), err = 0, rc;
	socklen_t elen = sizeof(err);
	struct pollfd p;

	if (s < 0)
		return -1;
	if (fn(s, sa, len) == 0)
		rc = 1;
	else if (errno == ECONNREFUSED)
		rc = 0;
	else if (errno != EINPROGRESS)
		rc = -1;
	else {
		p.fd = s;
		p.events = POLLOUT;
		if (poll(&p, 1, (int)ms) != 1 ||
		    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
			rc = -1;
		else
			rc = err == 0 ? 1 : err == ECONNREFUSED ? 0 : -1;
	}
	close(s);
	return rc;
}

static void
wait_for_master(connect_fn fn, const struct sockaddr *sa, socklen_t len)
{
	long deadline = now_ms() + env_long("RDZV_MASTER_WAIT_MS",
	    WAIT_DEFAULT_MS), left;
	struct timespec pause = { 0, PROBE_EVERY_MS * 1000000L };

	while ((left = deadline - now_ms()) > 0) {
		if (probe(fn, sa, len, left) != 0)
			return;
		nanosleep(&pause, NULL);
	}
}

int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	connect_fn fn = atomic_load(&real_connect);
	const char *rank;
	int port, saved;

	if (fn == NULL) {
		fn = (connect_fn)dlsym(RTLD_NEXT, "connect");
		if (fn == NULL) {
			errno = ENOSYS;
			return -1;
		}
		atomic_store(&real_connect, fn);
	}
	port = addr_port(sa, len);
	if (port > 0 && port == env_long("MASTER_PORT", -1) &&
	    atomic_load(&done_port) != port &&
	    (rank = getenv("RANK")) != NULL && strcmp(rank, "0") != 0) {
		saved = errno;
		wait_for_master(fn, sa, len);
		atomic_store(&done_port, port);
		errno = saved;
	}
	return fn(fd, sa, len);
}
