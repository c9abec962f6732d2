/*
 * The preloaded fork server (`join --preload MODULES`, or the job's preload
 * setting, docs/AGENT.md "Warm starts"): one python process, started with
 * the agent (--preload) or when rdzvd accepts the node into a job that
 * preloads (the job's setting), that imports the modules while the agent
 * waits for its rendezvous and then forks each worker already imported
 * (python/rdzv/forkserver.py, whose source is built into the agent,
 * forksrv_py.h).
 *
 * Supervision stays the agent's own. The server forks a helper that forks
 * the worker and exits; the agent is a child subreaper
 * (PR_SET_CHILD_SUBREAPER), so the kernel makes the worker the agent's
 * child. Its pid is a real child's: waitpid() in workers.c gets its exit
 * status and signal as for an exec'd worker, its process group is its own,
 * the stop timeout, the hang watch (/proc, SIGUSR1) and the error file work
 * unchanged, and a server that dies takes no worker with it. (The other way,
 * the server reporting its children's exits on the socket, would make the
 * server a second supervisor whose death loses the workers' statuses.) The
 * worker dies with the agent (PR_SET_PDEATHSIG, set once it is ours).
 *
 * LD_PRELOAD does not reach a forked process, so the workers' preload
 * (librdzv-masterwait.so) is the server's: it is started with it, and the
 * library reads MASTER_PORT and RANK when the worker connects, from the
 * environment the worker was given.
 *
 * Anything wrong with the server (it failed to import, died, answered
 * nonsense or not in time) is said once; from then on workers start the
 * ordinary way, by exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "workers.h"
#include "forksrv_py.h"
#include "log.h"

/* How long a worker's start waits for the server to answer: forking a
 * process of a few hundred MB takes milliseconds, seconds on a loaded
 * machine. */
#define SPAWN_WAIT_MS		10000
/* The most the first workers wait for the imports to finish, the agent's
 * loop running meanwhile (forksrv_hold): an exec'd worker would pay the
 * import too, so waiting is never slower unless the server is stuck. */
#define READY_WAIT_MS		30000

extern char **environ;

static json_t	*wait_msg_poll(struct forksrv *, int, char *, size_t);
static void	 read_cb(evutil_socket_t, short, void *);
static void	 wait_cb(evutil_socket_t, short, void *);

/* Workers held for the server (forksrv_hold) may go now. */
static void
notify(struct forksrv *fs)
{
	if (fs->wait_ev != NULL)
		event_del(fs->wait_ev);
	if (fs->holding)
		fs->waited = true;
	if (fs->holding && fs->ready != NULL) {
		fs->holding = false;
		fs->ready(fs->arg);
	}
}

/* Says once why the server is not used, and makes sure it is gone. */
static void
gone(struct forksrv *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
gone(struct forksrv *fs, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	if (fs->state == FS_GONE || fs->state == FS_OFF)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warnx("fork server (%s %s): %s; workers start the "
	    "ordinary way from now on (a new python each)", fs->origin,
	    fs->modules, why);
	fs->state = FS_GONE;
	if (fs->ev != NULL)
		event_del(fs->ev);
	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
	/* Reaped by the workers' SIGCHLD handler, as any child not a
	 * worker. */
	if (fs->pid > 0)
		kill(fs->pid, SIGKILL);
	fs->pid = 0;
	notify(fs);
}

/* The server's environment: ours, with the workers' preload in front. */
static char **
server_env(const char *masterwait)
{
	size_t n = 0, i, j = 0;
	const char *old = getenv("LD_PRELOAD");
	char **envp, *pre = NULL;

	while (environ[n] != NULL)
		n++;
	if ((envp = calloc(n + 2, sizeof(*envp))) == NULL)
		return NULL;
	if (masterwait != NULL && asprintf(&pre, "LD_PRELOAD=%s%s%s",
	    masterwait, old != NULL && *old != '\0' ? ":" : "",
	    old != NULL ? old : "") < 0) {
		free(envp);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (pre == NULL || strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
			envp[j++] = environ[i];
	if (pre != NULL)
		envp[j++] = pre;
	envp[j] = NULL;
	return envp;
}

/* In the server's child, before exec. */
static void __attribute__((noreturn))
server_child(int sock, pid_t agent, char **argv, char **envp)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD,
	    SIGPIPE };
	sigset_t none;
	int null;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	/* Its own group: a ^C meant for the agent is the agent's to pass
	 * on, and the server ends with it anyway. */
	setpgid(0, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != agent)
		_exit(126);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((null = open("/dev/null", O_RDONLY)) < 0 || dup2(null, 0) < 0 ||
	    dup2(2, 1) < 0 || dup2(sock, 3) < 0)
		_exit(127);
	close_range(4, ~0U, CLOSE_RANGE_CLOEXEC);
	execvpe(argv[0], argv, envp);
	_exit(127);
}

/* Whether |cmd| names a python (python, python3, python3.11, a path to
 * one): the fork server runs it. */
bool
forksrv_python(const char *cmd)
{
	const char *base = strrchr(cmd, '/');

	base = base != NULL ? base + 1 : cmd;
	return strncmp(base, "python", 6) == 0 &&
	    strspn(base + 6, "0123456789.") == strlen(base + 6);
}

/* A byte of a module name's part: an ASCII letter, digit or '_'. */
static bool
ident_byte(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || ch == '_';
}

/*
 * Whether |v| is a preload `import` takes, by the rule rdzvd checks a
 * job's by (daemon/core/core_join.c): names separated by single commas,
 * each of dotted parts of letters, digits and '_' that start with no
 * digit, FORKSRV_MODULES_MAX bytes at most.
 */
bool
forksrv_modules_ok(const char *v)
{
	size_t	len = strlen(v);
	bool	part_start = true;

	if (len == 0 || len > FORKSRV_MODULES_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (ch == ',' || ch == '.') {
			if (part_start)
				return false;	/* an empty name or part */
			part_start = true;
			continue;
		}
		if (!ident_byte(ch) || (part_start && ch >= '0' && ch <= '9'))
			return false;
		part_start = false;
	}
	return !part_start;
}

void
forksrv_init(struct forksrv *fs)
{
	memset(fs, 0, sizeof(*fs));
	fs->fd = -1;
	fs->state = FS_OFF;
}

/* Watches the server from the agent's loop, once both are there. 0, or -1
 * out of memory. */
static int
watch(struct forksrv *fs)
{
	if (fs->fd < 0 || fs->base == NULL || fs->ev != NULL)
		return 0;
	fs->ev = event_new(fs->base, fs->fd, EV_READ | EV_PERSIST, read_cb,
	    fs);
	fs->wait_ev = evtimer_new(fs->base, wait_cb, fs);
	if (fs->ev == NULL || fs->wait_ev == NULL ||
	    event_add(fs->ev, NULL) != 0)
		return -1;
	return 0;
}

/*
 * Starts the server importing |modules| for the workers of |o|, where none
 * was started yet (forksrv_init), unless it cannot be: then it says why,
 * once, and the workers start by exec. |origin| names where the modules
 * came from in what it says ("--preload", "the job's preload"). Called
 * first thing for --preload, so that the imports run while the GPUs are
 * checked and the node joins; for the job's setting, when rdzvd accepts
 * the node, so that they run while it waits for the other nodes.
 */
void
forksrv_start(struct forksrv *fs, const struct agent_opts *o,
    const char *modules, const char *origin, const char *masterwait)
{
	char exe[PATH_MAX], pidbuf[32], **argv = NULL, **envp = NULL;
	int sv[2] = { -1, -1 }, n = 0;
	ssize_t len;
	pid_t pid;

	if (fs->state != FS_OFF || modules == NULL || modules[0] == '\0' ||
	    o->argc == 0)
		return;
	snprintf(fs->modules, sizeof(fs->modules), "%s", modules);
	fs->origin = origin;
	fs->state = FS_STARTING;
	fs->started_us = mono_us();
	/* --preload was checked with the options; a job's comes from rdzvd,
	 * which checks it too, but it is this node's python that runs it. */
	if (!forksrv_modules_ok(modules)) {
		gone(fs, "not a list of module names");
		return;
	}
	if (!forksrv_python(o->argv[0])) {
		gone(fs, "the workers' command is %s, not a python", o->argv[0]);
		return;
	}
	if ((len = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0) {
		gone(fs, "cannot find the agent's own program: %s",
		    strerror(errno));
		return;
	}
	exe[len] = '\0';
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
	/* The workers' python, its source, its words, then the command. */
	if ((argv = calloc((size_t)o->argc + 8, sizeof(*argv))) == NULL ||
	    (envp = server_env(masterwait)) == NULL) {
		gone(fs, "out of memory");
		goto out;
	}
	argv[n++] = o->argv[0];
	argv[n++] = (char *)"-c";
	argv[n++] = (char *)forksrv_py;
	argv[n++] = fs->modules;
	argv[n++] = pidbuf;
	argv[n++] = exe;
	argv[n++] = (char *)(masterwait != NULL ? masterwait : "");
	for (int i = 0; i < o->argc; i++)
		argv[n++] = o->argv[i];
	argv[n] = NULL;
	/* Workers the server forks become ours when their helper exits. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		gone(fs, "cannot become a subreaper: %s", strerror(errno));
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		gone(fs, "socketpair: %s", strerror(errno));
		goto out;
	}
	if ((pid = fork()) < 0) {
		gone(fs, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		server_child(sv[1], getppid(), argv, envp);
	fs->pid = pid;
	fs->fd = sv[0];
	sv[0] = -1;
	log_debug("fork server %d: importing %s (%s) with %s", (int)pid,
	    fs->modules, origin, o->argv[0]);
	if (watch(fs) != 0)
		gone(fs, "out of memory");
out:
	if (envp != NULL) {
		for (int i = 0; envp[i] != NULL; i++)
			if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0 &&
			    masterwait != NULL)
				free(envp[i]);
		free(envp);
	}
	free(argv);
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
}

/* One message from the server, as JSON; NULL at its end or on nonsense
 * (|why| says which), or with errno EAGAIN when none is there. */
static json_t *
recv_msg(struct forksrv *fs, char *why, size_t len)
{
	char buf[4096];
	json_error_t jerr;
	json_t *m;
	ssize_t n;

	do {
		n = recv(fs->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return NULL;
	if (n <= 0) {
		snprintf(why, len, "it ended%s%s", n < 0 ? ": " : "",
		    n < 0 ? strerror(errno) : "");
		errno = EPIPE;
		return NULL;
	}
	buf[n] = '\0';
	if ((m = json_loads(buf, 0, &jerr)) == NULL || !json_is_object(m)) {
		json_decref(m);
		snprintf(why, len, "it said something not JSON: %.80s", buf);
		errno = EPROTO;
		return NULL;
	}
	return m;
}

/* The server's first word: ready, or why it cannot serve. */
static void
on_hello(struct forksrv *fs, json_t *m)
{
	const char *error = json_string_value(json_object_get(m, "error"));

	if (error != NULL) {
		gone(fs, "its preload failed: %s", error);
		return;
	}
	if (!json_is_true(json_object_get(m, "ready"))) {
		gone(fs, "it said neither ready nor why not");
		return;
	}
	fs->state = FS_READY;
	notify(fs);
	log_info("fork server %d: %s imported in %.2f s (ready %.2f s after "
	    "the agent started)", (int)fs->pid, fs->modules,
	    (double)json_integer_value(json_object_get(m, "import_ms")) /
	    1000.0, (double)(mono_us() - fs->started_us) / 1e6);
}

/*
 * Waits up to |ms| for the server's next message; NULL with |why| and
 * errno ETIMEDOUT when none came in time. The agent's loop waits too: its
 * cached time is brought up to date after, or the timers the caller adds
 * next (a worker's GPU check timeout) would count from before the wait
 * and could fire at once.
 */
static json_t *
wait_msg(struct forksrv *fs, int ms, char *why, size_t len)
{
	json_t *m;
	int saved;

	m = wait_msg_poll(fs, ms, why, len);
	saved = errno;
	if (fs->ev != NULL)
		event_base_update_cache_time(event_get_base(fs->ev));
	errno = saved;
	return m;
}

static json_t *
wait_msg_poll(struct forksrv *fs, int ms, char *why, size_t len)
{
	uint64_t until = mono_us() + (uint64_t)ms * 1000;
	struct pollfd p = { .fd = fs->fd, .events = POLLIN };
	json_t *m;
	int left;

	for (;;) {
		errno = 0;
		if ((m = recv_msg(fs, why, len)) != NULL || errno != EAGAIN)
			return m;
		left = (int)(((int64_t)until - (int64_t)mono_us()) / 1000);
		if (left <= 0) {
			snprintf(why, len, "no answer within %.1f s",
			    ms / 1000.0);
			errno = ETIMEDOUT;
			return NULL;
		}
		if (poll(&p, 1, left) < 0 && errno != EINTR) {
			snprintf(why, len, "poll: %s", strerror(errno));
			errno = EIO;
			return NULL;
		}
	}
}

/* What the server says between workers: its readiness, or its end. */
static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct forksrv *fs = arg;
	char why[256];
	json_t *m;

	errno = 0;
	if ((m = recv_msg(fs, why, sizeof(why))) == NULL) {
		if (errno != EAGAIN)
			gone(fs, "%s", why);
		return;
	}
	if (fs->state == FS_STARTING)
		on_hello(fs, m);
	else
		gone(fs, "it spoke out of turn");
	json_decref(m);
}

/* The agent's loop, which watches the server from now on (and one
 * started later). 0, or -1 out of memory. */
int
forksrv_attach(struct forksrv *fs, struct event_base *base)
{
	fs->base = base;
	return watch(fs);
}

/* The server's imports took longer than the first workers would wait. */
static void
wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct forksrv *fs = arg;

	if (fs->state != FS_STARTING)
		return;
	log_warnx("fork server (%s %s): still importing %.0f s after "
	    "the workers were due: these start the ordinary way, later ones "
	    "from the server once it is ready", fs->origin, fs->modules,
	    READY_WAIT_MS / 1000.0);
	notify(fs);
}

/*
 * Whether workers due now should wait for the server's imports: true
 * while it still imports, the first time for up to READY_WAIT_MS; |ready|
 * (forksrv_start's caller sets it) is called when they may go, from the
 * loop. False once it is ready, gone, or was waited for once.
 */
bool
forksrv_hold(struct forksrv *fs)
{
	struct timeval tv = { READY_WAIT_MS / 1000,
	    (READY_WAIT_MS % 1000) * 1000 };

	if (fs->state != FS_STARTING || fs->waited || fs->wait_ev == NULL)
		return false;
	if (!fs->holding) {
		fs->holding = true;
		evtimer_add(fs->wait_ev, &tv);
		log_debug("fork server: the workers wait for its imports");
	}
	return true;
}

/* The request for one worker: its command, environment and directory,
 * and its GPU check. NULL when one of them is not UTF-8 (JSON carries no
 * other bytes; such a worker starts by exec) or out of memory. */
static char *
request(const struct agent_opts *o, char *const *envp, int device)
{
	json_t *req, *argv, *env;
	char cwd[PATH_MAX], *s = NULL;
	bool ok;

	/* The object owns the arrays from the start: one decref frees all. */
	req = json_pack("{s:[], s:[], s:s, s:i}", "argv", "env", "cwd",
	    getcwd(cwd, sizeof(cwd)) != NULL ? cwd : "/", "device", device);
	if (req == NULL)
		return NULL;
	argv = json_object_get(req, "argv");
	env = json_object_get(req, "env");
	ok = device < 0 || json_object_set_new(req, "check", json_pack(
	    "{s:s, s:I}", "policy", gpucheck_policy_name(o->gpucheck.policy),
	    "bytes", (json_int_t)o->gpucheck.bytes)) == 0;
	for (int i = 0; ok && i < o->argc; i++)
		ok = json_array_append_new(argv, json_string(o->argv[i])) == 0;
	for (int i = 0; ok && envp[i] != NULL; i++)
		ok = json_array_append_new(env, json_string(envp[i])) == 0;
	if (ok)
		s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return s;
}

static int
send_request(int sock, const char *msg, const int fds[5])
{
	char ctl[CMSG_SPACE(5 * sizeof(int))];
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	ssize_t n;

	memset(ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(5 * sizeof(int));
	memcpy(CMSG_DATA(c), fds, 5 * sizeof(int));
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

/*
 * Starts one worker through the server: |o|'s command with |envp|, stdio
 * and the exec pipe in |fds| (stdin, stdout, stderr, pipe), the GPU check
 * of |device| first unless it is -1. 0 with *pid, the worker's (already
 * our child, in its own process group); -1 when the server is not there
 * or failed (said once): start it the ordinary way.
 */
int
forksrv_spawn(struct forksrv *fs, const struct agent_opts *o,
    char *const *envp, const int fds[4], int device, pid_t *pid)
{
	char why[256], *msg;
	const char *error;
	int go[2], all[5];
	json_t *m = NULL;
	int rc = -1;

	/* Still importing past forksrv_hold's wait: exec, this time. */
	if (fs->state != FS_READY)
		return -1;
	if ((msg = request(o, envp, device)) == NULL) {
		log_warnx("fork server (%s %s): the worker's command, "
		    "environment or directory is not UTF-8: it starts the "
		    "ordinary way", fs->origin, fs->modules);
		return -1;
	}
	/* The worker goes on only once we know its pid (a byte on this
	 * pipe): one forked by a server that died before it told us
	 * reads EOF and exits, so that no worker runs unknown to us beside
	 * the one we then exec in its place. */
	if (pipe2(go, O_CLOEXEC) != 0) {
		log_warn("fork server: pipe");
		free(msg);
		return -1;
	}
	memcpy(all, fds, 4 * sizeof(int));
	all[4] = go[0];
	if (send_request(fs->fd, msg, all) != 0) {
		/* A message larger than the socket's buffer (an environment
		 * of hundreds of KB) is this worker's problem, not the
		 * server's. */
		if (errno == EMSGSIZE)
			log_warnx("fork server (%s %s): the worker's "
			    "request (%zu bytes) does not fit its socket: it "
			    "starts the ordinary way", fs->origin, fs->modules,
			    strlen(msg));
		else
			gone(fs, "cannot send it a worker: %s",
			    strerror(errno));
		goto out;
	}
	close(go[0]);
	go[0] = -1;
	if ((m = wait_msg(fs, SPAWN_WAIT_MS, why, sizeof(why))) == NULL) {
		gone(fs, "starting a worker: %s", why);
		goto out;
	}
	error = json_string_value(json_object_get(m, "error"));
	if (error != NULL || json_integer_value(json_object_get(m, "pid")) <=
	    0) {
		gone(fs, "it could not start a worker: %s", error != NULL ?
		    error : "no pid in its answer");
		goto out;
	}
	if (write(go[1], "g", 1) != 1) {
		gone(fs, "cannot tell a worker to go on: %s", strerror(errno));
		goto out;
	}
	*pid = (pid_t)json_integer_value(json_object_get(m, "pid"));
	rc = 0;
out:
	json_decref(m);
	free(msg);
	if (go[0] >= 0)
		close(go[0]);
	close(go[1]);
	return rc;
}

bool
forksrv_usable(const struct forksrv *fs)
{
	return fs->state == FS_STARTING || fs->state == FS_READY;
}

/* At exit: the server goes (it would with us anyway, PR_SET_PDEATHSIG). */
void
forksrv_free(struct forksrv *fs)
{
	if (fs->ev != NULL)
		event_free(fs->ev);
	if (fs->wait_ev != NULL)
		event_free(fs->wait_ev);
	fs->ev = fs->wait_ev = NULL;
	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
	if (fs->pid > 0) {
		kill(fs->pid, SIGKILL);
		waitpid(fs->pid, NULL, 0);
	}
	fs->pid = 0;
	fs->state = FS_OFF;
}
