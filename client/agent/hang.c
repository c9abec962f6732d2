/*
 * What the agent can learn of hung workers before it stops them
 * (docs/HEALTH.md). With py-spy on PATH it runs `py-spy dump --pid PID`
 * for each worker, into py-spy.txt beside the worker's logs, and the dump
 * is over when every py-spy has exited (at most HANG_PYSPY_MS). Without
 * it, each worker that catches SIGUSR1 (a Python worker that called
 * faulthandler.register(signal.SIGUSR1), which rdzv.progress does) gets
 * one and writes its stacks to its stderr log; the dump is then over after
 * HANG_SIGNAL_MS. A worker that does not catch SIGUSR1 is not sent one:
 * its default action would kill it before anything is written.
 *
 * The py-spy processes share one pipe whose write end each inherits and
 * none writes: its end of file says they are all gone. Their exits are
 * reaped by workers.c's SIGCHLD handler with everything else.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workers.h"
#include "log.h"

#define HANG_PYSPY_MS	10000	/* the longest wait for py-spy */
#define HANG_SIGNAL_MS	1000	/* time for faulthandler to write */

/* The py-spy that execvp() would run, or "" when there is none. */
static void
find_pyspy(char *buf, size_t len)
{
	const char *path = getenv("PATH");
	struct stat st;

	buf[0] = '\0';
	if (path == NULL)
		return;
	while (*path != '\0') {
		size_t n = strcspn(path, ":");

		snprintf(buf, len, "%.*s/py-spy", (int)n, n ? path : ".");
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(buf, X_OK) == 0)
			return;
		path += n;
		if (*path == ':')
			path++;
	}
	buf[0] = '\0';
}

/* Whether process |pid| catches |sig| (SigCgt in /proc/PID/status). */
static bool
catches(pid_t pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask;
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "SigCgt: %llx", &mask) == 1) {
			yes = (mask >> (sig - 1)) & 1;
			break;
		}
	}
	fclose(f);
	return yes;
}

static void
finish(struct hang *h)
{
	if (!h->active)
		return;
	h->active = false;
	evtimer_del(h->timer);
	if (h->pipe_ev != NULL)
		event_free(h->pipe_ev);
	h->pipe_ev = NULL;
	if (h->pipe_fd >= 0)
		close(h->pipe_fd);
	h->pipe_fd = -1;
	h->done(h->arg);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hang *h = arg;

	if (h->pipe_fd >= 0)
		log_warnx("py-spy still runs after %.0f s: stopping the "
		    "workers anyway", HANG_PYSPY_MS / 1000.0);
	finish(h);
}

static void
pipe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hang *h = arg;
	ssize_t n;
	char c;

	n = read(fd, &c, 1);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		finish(h);
}

/* py-spy on worker |w|, its output in the worker's log directory. The
 * child gets |keep| as an inherited descriptor. */
static int
pyspy(const char *prog, const struct worker *w, int keep)
{
	char out[700], pid[16], *slash;
	sigset_t all, old, none;
	pid_t child;
	int fd, null;

	snprintf(out, sizeof(out), "%s", w->error_file);
	if ((slash = strrchr(out, '/')) == NULL)
		return -1;
	snprintf(slash + 1, sizeof(out) - (size_t)(slash + 1 - out),
	    "py-spy.txt");
	if ((fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) < 0) {
		log_warn("%s", out);
		return -1;
	}
	if ((null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		close(fd);
		return -1;
	}
	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if ((child = fork()) == 0) {
		char *argv[] = { (char *)prog, "dump", "--pid", pid, NULL };

		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 ||
		    fcntl(keep, F_SETFD, 0) != 0)
			_exit(127);
		execv(prog, argv);
		_exit(127);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fd);
	close(null);
	if (child < 0) {
		log_warn("fork");
		return -1;
	}
	log_info("local rank %d: py-spy dump --pid %s > %s", w->local_rank,
	    pid, out);
	return 0;
}

/* The state letter of process |pid| (/proc/PID/stat: R, S, D, T, ...),
 * or 0 when it cannot be read. */
static char
proc_state(pid_t pid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "PID (COMM) S ...": the name may hold anything but ends at the
	 * last parenthesis. */
	if ((paren = strrchr(buf, ')')) == NULL || paren[1] != ' ')
		return 0;
	return paren[2];
}

/*
 * Whether the hang is this node's own (SPEC §4 rule 17): a worker that is
 * stopped (SIGSTOP, a debugger: state T or t) or in uninterruptible sleep
 * (a stuck driver or file system: D) when no worker made progress for the
 * hang timeout. The other nodes' workers wait for it inside a collective,
 * sleeping (S): they are bystanders. Its local rank, or -1; *state gets
 * the letter.
 */
int
hang_culprit(const struct workers *ws, char *state)
{
	for (int i = 0; i < ws->n; i++) {
		const struct worker *w = &ws->w[i];
		char st;

		if (w->pid <= 0 || w->exited)
			continue;
		st = proc_state(w->pid);
		if (st == 'T' || st == 't' || st == 'D') {
			*state = st;
			return w->local_rank;
		}
	}
	return -1;
}

/* SIGUSR1 to each worker that catches it. */
static void
signal_workers(const struct workers *ws)
{
	for (int i = 0; i < ws->n; i++) {
		const struct worker *w = &ws->w[i];

		if (w->pid <= 0 || w->exited)
			continue;
		if (!catches(w->pid, SIGUSR1)) {
			log_info("local rank %d (pid %d) does not catch "
			    "SIGUSR1: no stack from it (a Python worker can "
			    "call faulthandler.register(signal.SIGUSR1))",
			    w->local_rank, (int)w->pid);
			continue;
		}
		if (kill(w->pid, SIGUSR1) == 0)
			log_info("local rank %d (pid %d): SIGUSR1, its stacks "
			    "go to its stderr log", w->local_rank,
			    (int)w->pid);
	}
}

/*
 * Dumps what can be had of the stacks of |ws|'s running workers; h->done
 * is called on a later loop turn once the dump is over. A dump under way
 * is not started again.
 */
void
hang_dump(struct hang *h, const struct workers *ws)
{
	struct timeval tv = { HANG_SIGNAL_MS / 1000,
	    (HANG_SIGNAL_MS % 1000) * 1000 };
	char prog[4096];
	int p[2], started = 0;

	if (h->active)
		return;
	h->active = true;
	find_pyspy(prog, sizeof(prog));
	if (prog[0] != '\0' && pipe2(p, O_CLOEXEC) == 0) {
		for (int i = 0; i < ws->n; i++) {
			const struct worker *w = &ws->w[i];
			if (w->pid > 0 && !w->exited &&
			    pyspy(prog, w, p[1]) == 0)
				started++;
		}
		close(p[1]);
		if (started > 0) {
			h->pipe_fd = p[0];
			fcntl(h->pipe_fd, F_SETFL, O_NONBLOCK);
			h->pipe_ev = event_new(h->base, h->pipe_fd,
			    EV_READ | EV_PERSIST, pipe_cb, h);
			if (h->pipe_ev == NULL ||
			    event_add(h->pipe_ev, NULL) != 0)
				fatalx("out of memory");
			tv.tv_sec = HANG_PYSPY_MS / 1000;
			tv.tv_usec = (HANG_PYSPY_MS % 1000) * 1000;
		} else
			close(p[0]);
	}
	if (started == 0)
		signal_workers(ws);
	evtimer_add(h->timer, &tv);
}

int
hang_init(struct hang *h, struct event_base *base, void (*done)(void *),
    void *arg)
{
	memset(h, 0, sizeof(*h));
	h->base = base;
	h->done = done;
	h->arg = arg;
	h->pipe_fd = -1;
	h->timer = evtimer_new(base, timer_cb, h);
	return h->timer != NULL ? 0 : -1;
}

/* Accepts a half-built one; calls nothing back. */
void
hang_free(struct hang *h)
{
	if (h->pipe_ev != NULL)
		event_free(h->pipe_ev);
	if (h->pipe_fd >= 0)
		close(h->pipe_fd);
	if (h->timer != NULL)
		event_free(h->timer);
	h->pipe_ev = h->timer = NULL;
	h->pipe_fd = -1;
	h->active = false;
}
