/*
 * rdzv-floor: the socket work of rdzv-bench's rendezvous and nothing else,
 * to tell what the kernel alone costs on this machine.
 *
 * A server process (one thread, epoll, as rdzvd) and a client process (one
 * thread, epoll, as rdzv-bench) exchange exactly the bytes rdzvd and
 * rdzv-bench exchange per node over loopback TCP, with the same system
 * calls, and no protocol at all:
 *
 *   connect   the client opens N connections at once; each writes HELLO
 *             bytes (the HTTP/2 preface, SETTINGS and a Health/Check) and
 *             the server answers each with REPLY bytes in one write;
 *   join      once all are connected the client writes JOIN bytes on every
 *             connection in one loop turn; the server, once it holds a
 *             job's N joins, writes ASSIGN bytes to each of its nodes;
 *   close     the client closes every connection, the server its ends.
 *
 * It prints the figures of rdzv-bench under the same names ("connect all",
 * "last join to last assignment", "daemon cpu: ... (connect C, join and
 * after J)"), the server standing for rdzvd: what rdzv's figures would be
 * if HTTP/2, gRPC, protobuf, the core and the store cost nothing.
 *
 *   rdzv-floor [--nodes N] [--jobs J]
 */
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

/* Bytes per node as rdzvd and rdzv-bench exchange them (strace of a run):
 * the client's preface, SETTINGS, HEADERS and DATA of a Health/Check; the
 * server's SETTINGS, ACK and answer; the client's SETTINGS ACK with its
 * Join; the server's assignment (HEADERS and DATA). */
enum { HELLO = 170, REPLY = 109, JOIN = 136, ASSIGN = 160 };

static char	 junk[4096];

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void
die(const char *what)
{
	fprintf(stderr, "rdzv-floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Reads what is there, as rdzvd does: a short read means the socket is
 * empty for now (epoll says when more comes). The count read, 0 at the
 * end, -1 for none now. */
static ssize_t
drain(int fd)
{
	ssize_t n, all = 0;

	while ((n = recv(fd, junk, sizeof(junk), 0)) > 0) {
		all += n;
		if ((size_t)n < sizeof(junk))
			return all;
	}
	if (n == 0)
		return all > 0 ? all : 0;
	if (errno != EAGAIN)
		die("recv");
	return all > 0 ? all : -1;
}

static void
send_all(int fd, size_t len)
{
	if (send(fd, junk, len, MSG_NOSIGNAL) != (ssize_t)len)
		die("send (a small write the socket did not take whole)");
}

/* The server: one epoll loop, as rdzvd's. Exits when every connection it
 * accepted has closed after the joins. */
static void
serve(int lfd, int nodes, int jobs)
{
	struct epoll_event ev, evs[256];
	int ep, total = nodes * jobs, accepted = 0, closed = 0;
	int *joined = calloc((size_t)jobs, sizeof(*joined));
	int **members = calloc((size_t)jobs, sizeof(*members));
	/* Indexed by descriptor: the accepted sockets and a few others. */
	int fd_max = total + 1024;
	size_t *got = calloc((size_t)fd_max, sizeof(*got));
	int *job_of = calloc((size_t)fd_max, sizeof(*job_of));

	if (joined == NULL || members == NULL || got == NULL || job_of == NULL)
		die("calloc");
	for (int j = 0; j < jobs; j++)
		if ((members[j] = calloc((size_t)nodes, sizeof(int))) == NULL)
			die("calloc");
	if ((ep = epoll_create1(0)) < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll_ctl");
	while (closed < total) {
		int n = epoll_wait(ep, evs, 256, -1);

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd, c;
			ssize_t r;

			if (fd == lfd) {
				while ((c = accept4(lfd, NULL, NULL,
				    SOCK_NONBLOCK)) >= 0) {
					if (c >= fd_max) {
						errno = EMFILE;
						die("accept4");
					}
					ev.events = EPOLLIN;
					ev.data.fd = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c,
					    &ev) != 0)
						die("epoll_ctl");
					job_of[c] = accepted++ % jobs;
				}
				if (errno != EAGAIN)
					die("accept4");
				continue;
			}
			if ((r = drain(fd)) < 0)
				continue;
			if (r == 0) {
				close(fd);	/* also leaves the epoll set */
				closed++;
				continue;
			}
			got[fd] += (size_t)r;
			if (got[fd] == HELLO) {
				send_all(fd, REPLY);
			} else if (got[fd] == HELLO + JOIN) {
				int j = job_of[fd];

				members[j][joined[j]++] = fd;
				if (joined[j] == nodes)
					for (int k = 0; k < nodes; k++)
						send_all(members[j][k], ASSIGN);
			}
		}
	}
	exit(0);
}

struct floor_run {
	int		 nodes, jobs, total, ep;
	int		*fd;
	size_t		*got;
	int		 connected, assigned;
	uint64_t	 t0, t_connected, t_joins_sent, t_last;
	double		 cpu0, cpu_connected, cpu_assigned, cpu_all;
	double		 self0, self_connected, self_assigned;
	pid_t		 server;
};

/* One pass of the client's loop: the index of each ready connection is
 * its epoll datum. */
static void
client_turn(struct floor_run *f)
{
	struct epoll_event evs[256], ev;
	int n = epoll_wait(f->ep, evs, 256, 10000);

	if (n == 0) {
		fprintf(stderr, "rdzv-floor: nothing for 10 s (%d of %d "
		    "connected, %d assigned)\n", f->connected, f->total,
		    f->assigned);
		exit(1);
	}
	if (n < 0 && errno != EINTR)
		die("epoll_wait");
	for (int i = 0; i < n; i++) {
		int k = (int)evs[i].data.u32, fd = f->fd[k];
		ssize_t r;

		if (evs[i].events & EPOLLOUT) {
			/* Connected: the hello, then wait for reading. */
			ev.events = EPOLLIN;
			ev.data.u32 = (uint32_t)k;
			if (epoll_ctl(f->ep, EPOLL_CTL_MOD, fd, &ev) != 0)
				die("epoll_ctl");
			send_all(fd, HELLO);
			continue;
		}
		if ((r = drain(fd)) <= 0) {
			if (r == 0)
				die("the server closed a connection");
			continue;
		}
		f->got[k] += (size_t)r;
		if (f->got[k] == REPLY && ++f->connected == f->total) {
			f->t_connected = now_us();
			f->cpu_connected = proc_cpu_seconds(f->server);
			f->self_connected = self_cpu_seconds();
			for (int j = 0; j < f->total; j++)
				send_all(f->fd[j], JOIN);
			f->t_joins_sent = now_us();
		} else if (f->got[k] == REPLY + ASSIGN &&
		    ++f->assigned == f->total) {
			f->t_last = now_us();
			f->cpu_assigned = proc_cpu_seconds(f->server);
			f->self_assigned = self_cpu_seconds();
		}
	}
}

static void
client(struct floor_run *f, const struct sockaddr_in *sa)
{
	struct epoll_event ev;
	struct rusage ru;
	int status;

	if ((f->ep = epoll_create1(0)) < 0)
		die("epoll_create1");
	f->cpu0 = proc_cpu_seconds(f->server);
	f->self0 = self_cpu_seconds();
	f->t0 = now_us();
	for (int k = 0; k < f->total; k++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;

		if (fd < 0)
			die("socket");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
		    errno != EINPROGRESS)
			die("connect");
		ev.events = EPOLLOUT;
		ev.data.u32 = (uint32_t)k;
		if (epoll_ctl(f->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			die("epoll_ctl");
		f->fd[k] = fd;
	}
	while (f->assigned < f->total)
		client_turn(f);
	for (int k = 0; k < f->total; k++)
		close(f->fd[k]);
	/* The server's CPU is read from /proc while it lives; its whole
	 * time, the close included, when it has exited. */
	if (wait4(f->server, &status, 0, &ru) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "rdzv-floor: the server failed\n");
		exit(1);
	}
	f->cpu_all = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int
main(int argc, char **argv)
{
	struct floor_run f = { .nodes = 10000, .jobs = 1 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int lfd, one = 1;
	uint64_t nofile;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
			f.nodes = atoi(argv[++i]);
		else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
			f.jobs = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: rdzv-floor [--nodes N] "
			    "[--jobs J]\n");
			return 2;
		}
	}
	if (f.nodes < 1 || f.jobs < 1 || f.nodes > 1000000 / f.jobs) {
		fprintf(stderr, "rdzv-floor: --nodes and --jobs: 1 or more, "
		    "at most 1,000,000 nodes in all\n");
		return 2;
	}
	f.total = f.nodes * f.jobs;
	nofile = raise_nofile();
	if ((uint64_t)f.total + 64 > nofile) {
		fprintf(stderr, "rdzv-floor: %d connections need more than the "
		    "%" PRIu64 " open files allowed\n", f.total, nofile);
		return 1;
	}
	if ((f.fd = calloc((size_t)f.total, sizeof(int))) == NULL ||
	    (f.got = calloc((size_t)f.total, sizeof(size_t))) == NULL)
		die("calloc");

	/* As rdzvd's listener: loopback, the kernel's largest backlog,
	 * TCP_NODELAY inherited by every accepted socket. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) < 0 ||
	    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(lfd, SOMAXCONN) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) != 0)
		die("listen");
	if ((f.server = fork()) < 0)
		die("fork");
	if (f.server == 0)
		serve(lfd, f.nodes, f.jobs);
	close(lfd);
	client(&f, &sa);

	printf("nodes:                 %d (%d jobs of %d)\n", f.total, f.jobs,
	    f.nodes);
	printf("connect all:           %.1f ms\n",
	    (double)(f.t_connected - f.t0) / 1e3);
	printf("last join to last assignment: %.1f ms\n",
	    (double)(f.t_last - f.t_joins_sent) / 1e3);
	printf("first connect to last assignment: %.1f ms\n",
	    (double)(f.t_last - f.t0) / 1e3);
	printf("bench cpu:             %.1f ms (connect %.1f, join and after "
	    "%.1f)\n", (f.self_assigned - f.self0) * 1e3,
	    (f.self_connected - f.self0) * 1e3,
	    (f.self_assigned - f.self_connected) * 1e3);
	printf("daemon cpu:            %.1f ms (connect %.1f, join and after "
	    "%.1f)\n", (f.cpu_assigned - f.cpu0) * 1e3,
	    (f.cpu_connected - f.cpu0) * 1e3,
	    (f.cpu_assigned - f.cpu_connected) * 1e3);
	printf("daemon cpu, close:     %.1f ms\n",
	    (f.cpu_all - f.cpu_assigned) * 1e3);
	return 0;
}
