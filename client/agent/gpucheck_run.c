/*
 * The GPU check run by the agent (SPEC §7). The agent never initialises
 * CUDA in its own process, because a process that has called cuInit must
 * not fork children that use CUDA: every check here runs in a child
 * process that writes its result on a pipe. The parent bounds each check
 * by a deadline, SIGKILLs what is still running at it, and reaps every
 * child it started.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "gpucheck_run.h"
#include "parse.h"

/* How long a SIGKILLed child may take to be reaped (a process stuck in the
 * GPU driver dies only when it leaves the kernel). */
#define REAP_WAIT_MS	2000

/* What a counting child sends back. */
struct count_msg {
	int32_t		rc;
	int32_t		count;
	char		why[256];
};

/*
 * One child process and what it sends: whole messages of one size, each
 * a newer version of its result (a probe child sends its result so far
 * before each step, then the final one), the latest kept in |out|.
 */
struct child {
	pid_t		 pid;		/* -1: not started */
	int		 fd;		/* read end, -1 once done */
	void		*out;		/* the latest whole message */
	size_t		 len;
	union {
		struct gpucheck_result	r;
		struct count_msg	m;
	}		 stage;		/* the message being read */
	size_t		 got;
	unsigned	 msgs;		/* whole messages received */
	int		 final;		/* the latest is the result */
	uint64_t	 msg_ms;	/* when the latest one came */
	uint64_t	 end_ms;	/* when we stopped waiting */
	int		 status;	/* from waitpid */
	int		 killed;	/* by us, at the deadline */
	int		 reaped;
	int		 (*is_final)(const void *);
};

static const char *policy_names[] = {
	[GPUCHECK_OFF] = "off",
	[GPUCHECK_WARN] = "warn",
	[GPUCHECK_EXCLUDE] = "exclude",
	[GPUCHECK_STRICT] = "strict",
};

int
gpucheck_policy_parse(const char *s, enum gpucheck_policy *out)
{
	size_t	i;

	for (i = 0; i < sizeof policy_names / sizeof policy_names[0]; i++) {
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum gpucheck_policy)i;
			return (0);
		}
	}
	return (-1);
}

const char *
gpucheck_policy_name(enum gpucheck_policy p)
{
	if ((size_t)p >= sizeof policy_names / sizeof policy_names[0])
		return ("unknown");
	return (policy_names[p]);
}

size_t
gpucheck_bytes(const struct gpucheck_opts *opts)
{
	const char	*s;
	size_t		 bytes;

	if (opts != NULL && opts->bytes != 0)
		return (opts->bytes);
	/* RDZV_HEALTH_BYTES is its older name, still accepted. */
	s = getenv("RDZV_GPUCHECK_BYTES");
	if (s == NULL || *s == '\0')
		s = getenv("RDZV_HEALTH_BYTES");
	if (s != NULL && *s != '\0' && parse_size(s, &bytes) == 0 &&
	    bytes > 0)
		return (bytes);
	return (GPUCHECK_DEFAULT_BYTES);
}

/*
 * In a new child: die with the agent, and take the default action for the
 * signals the agent handles (its handlers write to the agent's event loop,
 * which is not this process's business).
 */
static void
child_setup(pid_t parent)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD,
	    SIGPIPE, SIGUSR1, SIGUSR2 };
	sigset_t	all;
	size_t		i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		signal(sigs[i], SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

/*
 * Starts a child that runs fn(arg, write end) and exits. 0, or -errno
 * (the child is not started).
 */
static int
child_start(struct child *c, void (*fn)(void *, int), void *arg)
{
	pid_t	parent = getpid();
	int	p[2];

	c->pid = -1;
	c->fd = -1;
	if (pipe2(p, O_CLOEXEC) == -1)
		return (-errno);
	c->pid = fork();
	if (c->pid == -1) {
		close(p[0]);
		close(p[1]);
		return (-errno);
	}
	if (c->pid == 0) {
		close(p[0]);
		child_setup(parent);
		fn(arg, p[1]);
		_exit(0);
	}
	close(p[1]);
	c->fd = p[0];
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	return (0);
}

static void
child_close(struct child *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->end_ms = mono_ms();
}

/* Reads what |c| has sent, keeping the latest whole message; done at EOF
 * or once the final message is in. */
static void
child_read(struct child *c)
{
	ssize_t	n;

	while (c->fd != -1) {
		n = read(c->fd, (char *)&c->stage + c->got, c->len - c->got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		if (n <= 0) {
			child_close(c);
			return;
		}
		c->got += (size_t)n;
		if (c->got < c->len)
			continue;
		memcpy(c->out, &c->stage, c->len);
		c->got = 0;
		c->msgs++;
		c->msg_ms = mono_ms();
		if (c->is_final == NULL || c->is_final(c->out)) {
			c->final = 1;
			child_close(c);
		}
	}
}

/* Reaps |c| if it has ended within |until|; SIGKILLs it at |until| when
 * |kill_late|. */
static void
child_reap(struct child *c, uint64_t until, int kill_late)
{
	struct timespec	 ts = { 0, 5 * 1000 * 1000 };
	pid_t		 r;

	while (c->pid > 0 && !c->reaped) {
		r = waitpid(c->pid, &c->status, WNOHANG);
		if (r == c->pid || (r == -1 && errno != EINTR)) {
			/* ECHILD: someone else reaped it. */
			c->reaped = 1;
			return;
		}
		if (r == 0 && mono_ms() >= until) {
			if (kill_late && !c->killed) {
				kill(c->pid, SIGKILL);
				c->killed = 1;
				until = mono_ms() + REAP_WAIT_MS;
				continue;
			}
			return;	/* stuck in the kernel: leave it */
		}
		if (r == 0)
			nanosleep(&ts, NULL);
	}
}

/*
 * Waits for every child's result until |timeout_ms| from now (0: no
 * limit), SIGKILLs those still running then, and reaps them all. A child
 * that sent its result but does not exit (stuck in the driver's teardown)
 * is killed after REAP_WAIT_MS.
 */
static void
children_wait(struct child *cs, int n, uint32_t timeout_ms)
{
	struct pollfd	*pfd;
	uint64_t	 deadline = mono_ms() + timeout_ms, t;
	int		 i, k, wait_ms;

	if ((pfd = calloc((size_t)n, sizeof *pfd)) == NULL)
		timeout_ms = 1;	/* cannot poll: give up at once */
	for (;;) {
		for (i = k = 0; pfd != NULL && i < n; i++) {
			if (cs[i].fd == -1)
				continue;
			pfd[k].fd = cs[i].fd;
			pfd[k].events = POLLIN;
			k++;
		}
		if (k == 0)
			break;
		t = mono_ms();
		if (timeout_ms != 0 && t >= deadline)
			break;
		wait_ms = timeout_ms == 0 ? -1 : (int)(deadline - t);
		if (poll(pfd, (nfds_t)k, wait_ms) == -1 && errno != EINTR)
			break;
		for (i = 0; i < n; i++)
			child_read(&cs[i]);
	}
	free(pfd);

	for (i = 0; i < n; i++) {
		if (cs[i].fd == -1)
			continue;
		child_close(&cs[i]);
		if (cs[i].pid > 0) {
			kill(cs[i].pid, SIGKILL);
			cs[i].killed = 1;
		}
	}
	t = mono_ms() + REAP_WAIT_MS;
	for (i = 0; i < n; i++)
		child_reap(&cs[i], t, 1);
}

/* "1 s", "1500 ms". */
static void
format_ms(uint32_t ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%u s", ms / 1000);
	else
		snprintf(buf, len, "%u ms", ms);
}

/* Why a child gave no final result. */
static void
child_why(const struct child *c, uint32_t timeout_ms, char *buf, size_t len)
{
	char	t[32];

	format_ms(timeout_ms, t, sizeof t);
	if (c->pid <= 0)
		snprintf(buf, len, "could not start the check");
	else if (c->killed)
		snprintf(buf, len, "timeout after %s", t);
	else if (c->reaped && WIFSIGNALED(c->status))
		snprintf(buf, len, "check died: %s",
		    strsignal(WTERMSIG(c->status)));
	else if (c->reaped && WIFEXITED(c->status))
		snprintf(buf, len, "check exited %d early",
		    WEXITSTATUS(c->status));
	else
		snprintf(buf, len, "check ended early");
}

static void
count_child(void *arg, int fd)
{
	struct count_msg m;

	memset(&m, 0, sizeof m);
	m.rc = gpucheck_count(&m.count, m.why, sizeof m.why);
	(void)!write(fd, &m, sizeof m);
}

int
gpucheck_run_count(uint32_t timeout_ms, int *count, char *why, size_t len)
{
	struct count_msg	m;
	struct child		c;
	int			rc;

	*count = 0;
	memset(&m, 0, sizeof m);
	memset(&c, 0, sizeof c);
	c.out = &m;
	c.len = sizeof m;
	if ((rc = child_start(&c, count_child, NULL)) != 0) {
		snprintf(why, len, "cannot start the GPU count: %s",
		    strerror(-rc));
		return (-1);
	}
	children_wait(&c, 1, timeout_ms);
	if (!c.final) {
		child_why(&c, timeout_ms, why, len);
		return (-1);
	}
	m.why[sizeof m.why - 1] = '\0';
	if (m.rc != 0) {
		snprintf(why, len, "%s", m.why);
		return (-1);
	}
	*count = m.count;
	return (0);
}

struct probe_arg {
	int	device;
	size_t	bytes;
	int	fd;
};

/*
 * The result so far, sent before each step: ok false, failed_step the
 * step that starts, error empty. A final result that failed always has an
 * error, so the parent tells the two apart.
 */
static void
probe_progress(const struct gpucheck_result *sofar, const char *step, void *arg)
{
	struct probe_arg	*a = arg;
	struct gpucheck_result	 r = *sofar;

	r.ok = false;
	snprintf(r.failed_step, sizeof r.failed_step, "%s", step);
	r.error[0] = '\0';
	gpucheck_result_write(a->fd, &r);
}

static int
probe_final(const void *msg)
{
	const struct gpucheck_result *r = msg;

	return (r->ok || r->error[0] != '\0');
}

static void
probe_child(void *arg, int fd)
{
	struct probe_arg	*a = arg;
	struct gpucheck_result	 r;

	a->fd = fd;
	/* The child exits next: the driver's teardown at exit frees what
	 * the check took, after the parent has the result. */
	gpucheck_device_flags(a->device, a->bytes, GPUCHECK_KEEP_CONTEXT, &r,
	    probe_progress, a);
	gpucheck_result_write(fd, &r);
}

/*
 * The result of a check that did not finish: what it had done, the step
 * it was in with the time spent there, and why it ended.
 */
static void
probe_unfinished(const struct child *c, uint32_t timeout_ms, int device,
    struct gpucheck_result *r)
{
	char		 why[sizeof r->error];
	struct gpucheck_step	*s;

	child_why(c, timeout_ms, why, sizeof why);
	if (c->msgs == 0 || r->device != device) {
		gpucheck_result_failed(r, device, why);
		return;
	}
	snprintf(r->error, sizeof r->error, "%s", why);
	if (r->n_steps < GPUCHECK_STEPS_MAX && r->failed_step[0] != '\0') {
		s = &r->steps[r->n_steps++];
		snprintf(s->name, sizeof s->name, "%s", r->failed_step);
		s->elapsed_us = (c->end_ms - c->msg_ms) * 1000;
	}
}

int
gpucheck_run_devices(const struct gpucheck_opts *opts, const int *devices,
    int n, struct gpucheck_result *results)
{
	struct child		*cs;
	struct probe_arg	 a;
	int			 i, passed = 0;

	if (n <= 0)
		return (0);
	if ((cs = calloc((size_t)n, sizeof *cs)) == NULL) {
		for (i = 0; i < n; i++)
			gpucheck_result_failed(&results[i], devices[i],
			    "out of memory");
		return (0);
	}
	memset(&a, 0, sizeof a);
	a.bytes = gpucheck_bytes(opts);
	for (i = 0; i < n; i++) {
		memset(&results[i], 0, sizeof results[i]);
		cs[i].out = &results[i];
		cs[i].len = sizeof results[i];
		cs[i].is_final = probe_final;
		a.device = devices[i];
		child_start(&cs[i], probe_child, &a);
	}
	children_wait(cs, n, opts->timeout_ms);
	for (i = 0; i < n; i++) {
		if (!cs[i].final)
			probe_unfinished(&cs[i], opts->timeout_ms, devices[i],
			    &results[i]);
		if (results[i].ok)
			passed++;
	}
	free(cs);
	return (passed);
}

int
gpucheck_run(const struct gpucheck_opts *opts, int n,
    struct gpucheck_result *results)
{
	int	*devices, i, passed;

	if (n <= 0)
		return (0);
	if ((devices = calloc((size_t)n, sizeof *devices)) == NULL) {
		for (i = 0; i < n; i++)
			gpucheck_result_failed(&results[i], i, "out of memory");
		return (0);
	}
	for (i = 0; i < n; i++)
		devices[i] = i;
	passed = gpucheck_run_devices(opts, devices, n, results);
	free(devices);
	return (passed);
}

int
gpucheck_run_worker(const struct gpucheck_opts *opts, int device, int fd)
{
	struct gpucheck_result	r;

	/* The worker execs next (or exits on a failure): the context goes
	 * with the process image, as a worker's own CUDA start needs none
	 * of it. */
	gpucheck_device_flags(device, gpucheck_bytes(opts),
	    GPUCHECK_KEEP_CONTEXT, &r, NULL, NULL);
	gpucheck_result_write(fd, &r);
	close(fd);
	return (r.ok ? 0 : -1);
}

/*
 * Entry |i| of a comma-separated list, copied to |out|. 0, or -1 when the
 * list is shorter.
 */
static int
list_entry(const char *list, size_t i, char *out, size_t len)
{
	const char	*p = list, *end;
	size_t		 k;

	for (k = 0; k < i; k++) {
		if ((p = strchr(p, ',')) == NULL)
			return (-1);
		p++;
	}
	end = strchr(p, ',');
	k = end != NULL ? (size_t)(end - p) : strlen(p);
	if (k == 0 || k >= len)
		return (-1);
	memcpy(out, p, k);
	out[k] = '\0';
	return (0);
}

int
gpucheck_visible_devices(const int *devices, size_t n, char *buf, size_t len)
{
	const char	*cvd = getenv("CUDA_VISIBLE_DEVICES");
	char		 entry[128];
	size_t		 i, off = 0;
	int		 k;

	if (len == 0)
		return (-1);
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		if (devices[i] < 0)
			return (-1);
		if (cvd != NULL && *cvd != '\0') {
			if (list_entry(cvd, (size_t)devices[i], entry,
			    sizeof entry) != 0)
				return (-1);
		} else
			snprintf(entry, sizeof entry, "%d", devices[i]);
		k = snprintf(buf + off, len - off, "%s%s", i > 0 ? "," : "",
		    entry);
		if (k < 0 || (size_t)k >= len - off) {
			buf[off] = '\0';
			return (-1);
		}
		off += (size_t)k;
	}
	return (0);
}

void
gpucheck_to_pb(const struct gpucheck_result *r, Rdzv__V1__GpuResult *pb,
    Rdzv__V1__GpuStep *steps, Rdzv__V1__GpuStep **step_ptrs)
{
	uint32_t	i, n = r->n_steps;

	if (n > GPUCHECK_STEPS_MAX)
		n = GPUCHECK_STEPS_MAX;
	rdzv__v1__gpu_result__init(pb);
	pb->device = (uint32_t)r->device;
	pb->uuid = (char *)r->uuid;
	pb->name = (char *)r->name;
	pb->ok = r->ok;
	pb->failed_step = (char *)r->failed_step;
	pb->error = (char *)r->error;
	pb->total_mem = r->total_mem;
	for (i = 0; i < n; i++) {
		rdzv__v1__gpu_step__init(&steps[i]);
		steps[i].name = (char *)r->steps[i].name;
		steps[i].elapsed_us = r->steps[i].elapsed_us;
		step_ptrs[i] = &steps[i];
	}
	pb->n_steps = n;
	pb->steps = n > 0 ? step_ptrs : NULL;
}

uint64_t
gpucheck_elapsed_us(const struct gpucheck_result *r)
{
	uint64_t	us = 0;
	uint32_t	i;

	for (i = 0; i < r->n_steps && i < GPUCHECK_STEPS_MAX; i++)
		us += r->steps[i].elapsed_us;
	return (us);
}

void
gpucheck_describe(const struct gpucheck_result *r, char *buf, size_t len)
{
	char	who[192];

	if (r->name[0] != '\0' && r->uuid[0] != '\0')
		snprintf(who, sizeof who, "device %d (%s, %s)", r->device,
		    r->name, r->uuid);
	else if (r->name[0] != '\0')
		snprintf(who, sizeof who, "device %d (%s)", r->device,
		    r->name);
	else
		snprintf(who, sizeof who, "device %d", r->device);
	if (r->ok)
		snprintf(buf, len, "%s: passed in %.1f ms", who,
		    (double)gpucheck_elapsed_us(r) / 1000.0);
	else
		snprintf(buf, len, "%s: %s failed: %s", who, r->failed_step,
		    r->error);
}
