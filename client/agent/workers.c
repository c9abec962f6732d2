/*
 * The workers of one generation (SPEC §6): spawned with their own process
 * group, killed with the agent (PR_SET_PDEATHSIG), stdin from /dev/null;
 * their exits come from SIGCHLD, never from polling. A close-on-exec pipe
 * per worker tells us that exec happened (EOF) or failed (errno); with a
 * GPU check it first carries the check's result (SPEC §7). Under
 * --preload the fork server (forksrv.c) forks them instead, as children of
 * ours all the same, and the pipe says when the script starts.
 *
 * The set ends once every worker was reaped: on its own (all exited 0, or
 * one failed and we stopped the rest) or because the agent stopped it. It
 * then tells the agent (workers_events.ended), which decides what that
 * means; so it does with each worker's GPU check result.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workers.h"
#include "log.h"
#include "text.h"

#define MASTERWAIT_SO	"librdzv-masterwait.so"

extern char **environ;

static void	set_ended(struct workers *);
static void	stop_set(struct workers *, const char *why);

const char *
workers_describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by SIG%s",
		    sigabbrev_np(WTERMSIG(status)) != NULL ?
		    sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(buf, len, "ended with status %#x", status);
	return buf;
}

/* ------------------------------------------------------------- the child */

struct spawn {
	const struct agent_opts	*opts;
	pid_t			 agent_pid;
	int			 devnull;
	int			 out;		/* becomes fd 1 */
	int			 err;		/* becomes fd 2 */
	int			 pipe_w;	/* exec pipe, close-on-exec */
	int			 device;	/* GPU to check, -1 none */
	char			**envp;
};

/*
 * Between fork and exec. The agent is single-threaded, so anything goes,
 * but no libevent: its signal handlers are reset first. (fork() rather
 * than vfork(): the children exec in parallel, which on two cores beat
 * vfork()'s one at a time by half in bench/spawn.sh.)
 */
static void __attribute__((noreturn))
child(const struct spawn *s)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD,
	    SIGPIPE };
	const struct agent_opts *o = s->opts;
	sigset_t none;
	int e, fd;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	setpgid(0, 0);
	/* Die with the agent, even if it is gone already. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
	    getppid() != s->agent_pid)
		_exit(126);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(s->devnull, 0) < 0 || dup2(s->out, 1) < 0 ||
	    dup2(s->err, 2) < 0)
		goto fail;
	/* What the agent has open is not the worker's (as torchrun's
	 * subprocesses, which close their fds). */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (s->device >= 0 && o->gpucheck.policy != GPUCHECK_OFF) {
		if ((fd = dup(s->pipe_w)) < 0)
			goto fail;
		if (gpucheck_run_worker(&o->gpucheck, s->device, fd) != 0 &&
		    o->gpucheck.policy != GPUCHECK_WARN)
			_exit(GPUCHECK_EXIT);
		/* What libcuda opened for the check (its context is left
		 * to the exec) is not the worker's either. */
		close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	}
	execvpe(o->argv[0], o->argv, s->envp);
fail:
	e = errno;
	if (write(s->pipe_w, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* ------------------------------------------------------------ the parent */

static struct worker *
find(struct workers *ws, pid_t pid)
{
	for (int i = 0; i < ws->n; i++)
		if (ws->w[i].pid == pid && !ws->w[i].exited)
			return &ws->w[i];
	return NULL;
}

static void
pipe_close(struct worker *w)
{
	if (w->pipe_ev != NULL)
		event_free(w->pipe_ev);
	w->pipe_ev = NULL;
	if (w->pipe_fd >= 0)
		close(w->pipe_fd);
	w->pipe_fd = -1;
}

/* A worker's check result goes to the agent. A worker whose check
 * failed does not exec, unless the policy is warn (as child() does). */
static void
checked(struct worker *w, const struct gpucheck_result *r)
{
	struct workers *ws = w->ws;

	if (!r->ok && ws->opts->gpucheck.policy != GPUCHECK_WARN)
		w->check_failed = true;
	ws->ev.checked(ws->ev.arg, w, r);
}

/* The check result on the pipe (whole: it is written at once). */
static void
pipe_check(struct worker *w)
{
	struct gpucheck_result r;

	w->check_pending = false;
	event_del(w->check_timer);
	if (gpucheck_result_read(w->pipe_fd, &r) != 0) {
		pipe_close(w);
		/* Killed while checking, by us or by a crash. */
		if (w->ws->state != WS_RUNNING)
			return;
		gpucheck_result_failed(&r, w->device, "the check's process "
		    "ended without a result");
	}
	checked(w, &r);
}

/* exec happened (EOF) or failed (an errno). */
static void
pipe_exec(struct worker *w)
{
	struct workers *ws = w->ws;
	int e = 0;
	ssize_t n;

	do {
		n = read(w->pipe_fd, &e, sizeof(e));
	} while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n == (ssize_t)sizeof(e)) {
		w->exec_errno = e;
		log_warnx("generation %llu: cannot run %s for local rank %d: "
		    "%s", (unsigned long long)ws->generation,
		    ws->opts->argv[0], w->local_rank, strerror(e));
	} else if (!w->check_failed) {
		w->execd = true;
		if (++ws->execd == ws->n) {
			log_debug("generation %llu: %d worker%s exec'd in %.3f "
			    "ms after the assignment arrived",
			    (unsigned long long)ws->generation, ws->n,
			    plural(ws->n),
			    (double)(mono_us() - ws->arrived_us) / 1000.0);
			/* Now there is time for the next one's files. */
			ws->ev.execd(ws->ev.arg);
		}
	}
	pipe_close(w);
}

static void
pipe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	if (w->check_pending)
		pipe_check(w);
	else
		pipe_exec(w);
}

/* A GPU check that does not come back in time counts as failed. */
static void
check_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct gpucheck_result r;
	char why[64];

	if (!w->check_pending || w->exited)
		return;
	w->check_pending = false;
	w->check_failed = true;
	snprintf(why, sizeof(why), "timeout after %.1f s",
	    w->ws->opts->gpucheck.timeout_ms / 1000.0);
	gpucheck_result_failed(&r, w->device, why);
	kill(-w->pid, SIGKILL);
	checked(w, &r);
}

static void
spawn_fail(struct workers *ws, struct worker *w, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A worker that could not start counts as one that failed (code 127). */
static void
spawn_fail(struct workers *ws, struct worker *w, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warnx("generation %llu: local rank %d: %s",
	    (unsigned long long)ws->generation, w->local_rank, msg);
	w->exited = true;
	w->status = 127 << 8;
	if (ws->first_failed < 0)
		ws->first_failed = w->local_rank;
	ws->end = WS_END_FAILED;
}

/*
 * The workers' preload (masterwait.c, docs/RECOVERY.md): beside the agent
 * in a build tree, else where it is installed; none where neither exists
 * or RDZV_MASTER_WAIT is 0. Looked up once.
 */
const char *
workers_masterwait_path(void)
{
	static char path[PATH_MAX + 64];
	static bool looked;
	const char *off = getenv("RDZV_MASTER_WAIT");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (looked)
		return path[0] != '\0' ? path : NULL;
	looked = true;
	if (off != NULL && strcmp(off, "0") == 0)
		return NULL;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s", exe, MASTERWAIT_SO);
			if (access(path, R_OK) == 0)
				return path;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", RDZV_MASTERWAIT_DIR,
	    MASTERWAIT_SO);
	if (access(path, R_OK) == 0)
		return path;
	log_debug("no %s beside the agent or in %s: workers connect to "
	    "their master's store unaided", MASTERWAIT_SO,
	    RDZV_MASTERWAIT_DIR);
	path[0] = '\0';
	return NULL;
}

static void
spawn(struct workers *ws, const struct assignment *asg, struct worker *w,
    int devnull, const char *visible)
{
	const struct agent_opts *o = ws->opts;
	struct spawn s = { .opts = o, .agent_pid = getpid(),
	    .devnull = devnull, .device = w->device };
	struct env_worker ew = { .local_rank = w->local_rank,
	    .run_id = o->id, .role = o->role, .error_file = w->error_file,
	    .visible = visible, .progress = ws->progress_env,
	    .ifname = ws->ifname, .restart = ws->restart_env,
	    .preload = workers_masterwait_path() };
	struct env_vars ev;
	int out = -1, err = -1, po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	int ep[2] = { -1, -1 };
	uint32_t rank = asg->base_rank + (uint32_t)w->local_rank;
	char msg[512];
	pid_t pid;

	if (logs_worker_open(ws->logs, asg->generation, w->local_rank,
	    w->error_file, sizeof(w->error_file), &out, &err, msg,
	    sizeof(msg)) != 0) {
		spawn_fail(ws, w, "%s", msg);
		return;
	}
	if ((o->tee && (pipe2(po, O_CLOEXEC) != 0 ||
	    pipe2(pe, O_CLOEXEC) != 0)) || pipe2(ep, O_CLOEXEC) != 0) {
		spawn_fail(ws, w, "pipe: %s", strerror(errno));
		goto out;
	}
	s.out = o->tee ? po[1] : out;
	s.err = o->tee ? pe[1] : err;
	s.pipe_w = ep[1];
	env_vars(&ev, asg, &ew, environ);
	if ((s.envp = env_merge(&ev, environ)) == NULL) {
		spawn_fail(ws, w, "out of memory");
		goto out;
	}
	/* Preloaded (forksrv.c): the same worker, forked from a python that
	 * imported its modules already; else, or when that fails, exec. */
	if (ws->fs == NULL || !forksrv_usable(ws->fs) ||
	    forksrv_spawn(ws->fs, o, s.envp, (const int[4]){ devnull, s.out,
	    s.err, s.pipe_w }, o->gpucheck.policy != GPUCHECK_OFF ?
	    s.device : -1, &pid) != 0) {
		if ((pid = fork()) < 0) {
			spawn_fail(ws, w, "fork: %s", strerror(errno));
			goto out;
		}
		if (pid == 0)
			child(&s);
	}
	/* Both sides set the group, so signals reach it whoever runs
	 * first. */
	setpgid(pid, pid);
	w->pid = pid;
	ws->alive++;
	w->pipe_fd = ep[0];
	ep[0] = -1;
	fcntl(w->pipe_fd, F_SETFL, fcntl(w->pipe_fd, F_GETFL) | O_NONBLOCK);
	w->pipe_ev = event_new(ws->base, w->pipe_fd, EV_READ | EV_PERSIST,
	    pipe_cb, w);
	if (w->pipe_ev == NULL || event_add(w->pipe_ev, NULL) != 0)
		fatalx("out of memory");
	if (s.device >= 0 && o->gpucheck.policy != GPUCHECK_OFF) {
		struct timeval tv = { o->gpucheck.timeout_ms / 1000,
		    (o->gpucheck.timeout_ms % 1000) * 1000 };
		w->check_pending = true;
		evtimer_add(w->check_timer, &tv);
	}
	if (o->tee) {
		w->out = tee_new(ws->base, po[0], out, 1, rank);
		w->err = tee_new(ws->base, pe[0], err, 2, rank);
		po[0] = pe[0] = out = err = -1;
	}
out:
	free(s.envp);
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	if (out >= 0)
		close(out);
	if (err >= 0)
		close(err);
}

static void
release(struct workers *ws)
{
	for (int i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		pipe_close(w);
		if (w->check_timer != NULL)
			event_free(w->check_timer);
		tee_free(w->out);
		tee_free(w->err);
	}
	free(ws->w);
	ws->w = NULL;
	ws->n = 0;
}

/*
 * Starts the workers of |asg|, worker i on the GPU that |g| gives local
 * rank i and with its CUDA_VISIBLE_DEVICES. 0, or -1 when none could be
 * started; a worker that could not start ends the set as failed.
 */
int
workers_start(struct workers *ws, const struct assignment *asg,
    const struct gpucheck_node *g)
{
	sigset_t all, old;
	int devnull;

	release(ws);
	if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		log_warn("/dev/null");
		return -1;
	}
	if ((ws->w = calloc(asg->local_world_size, sizeof(*ws->w))) == NULL) {
		close(devnull);
		return -1;
	}
	ws->n = (int)asg->local_world_size;
	ws->state = WS_RUNNING;
	ws->end = WS_END_SUCCEEDED;
	ws->generation = asg->generation;
	ws->base_rank = asg->base_rank;
	ws->arrived_us = asg->arrived_us;
	ws->alive = ws->execd = 0;
	ws->first_failed = -1;
	ws->killed = false;
	for (int i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		w->ws = ws;
		w->local_rank = i;
		w->pipe_fd = -1;
		w->device = gpucheck_node_device(g, i);
		if ((w->check_timer = evtimer_new(ws->base, check_timeout_cb,
		    w)) == NULL)
			fatalx("out of memory");
	}
	/* No signal may run libevent's handler in a child before it resets
	 * them: block all around the forks. */
	sigfillset(&all);
	logs_generation(ws->logs, asg->generation);
	sigprocmask(SIG_BLOCK, &all, &old);
	for (int i = 0; i < ws->n; i++)
		spawn(ws, asg, &ws->w[i], devnull, g->visible);
	sigprocmask(SIG_SETMASK, &old, NULL);
	logs_generation_done(ws->logs, asg->generation, ws->n);
	close(devnull);
	log_info("generation %llu: started %d worker%s (ranks %u to %u of %u)",
	    (unsigned long long)asg->generation, ws->n, plural(ws->n),
	    asg->base_rank, asg->base_rank + asg->local_world_size - 1,
	    asg->world_size);
	if (ws->end == WS_END_FAILED)
		stop_set(ws, "a worker could not start");
	return 0;
}

/* Signals the process group of each worker not yet reaped. (A reaped
 * worker's group was killed when it was reaped: later its number may
 * belong to someone else.) */
static void
kill_groups(struct workers *ws, int sig)
{
	for (int i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		if (w->pid > 0 && !w->exited && kill(-w->pid, sig) != 0 &&
		    errno != ESRCH)
			log_warn("kill %d", (int)-w->pid);
	}
}

static void
kill_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct workers *ws = arg;

	log_warnx("generation %llu: %d worker%s still running %.1f s after "
	    "SIGTERM: SIGKILL", (unsigned long long)ws->generation,
	    ws->alive, plural(ws->alive),
	    ws->opts->stop_timeout_ms / 1000.0);
	workers_kill(ws);
}

/* Stops the set (SIGTERM now, SIGKILL after --stop-timeout), as the agent
 * asks or because a worker failed and the others go with it (SPEC §6). */
static void
stop_set(struct workers *ws, const char *why)
{
	uint32_t ms = ws->opts->stop_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (ws->state != WS_RUNNING)
		return;
	ws->state = WS_STOPPING;
	if (ws->alive == 0) {
		set_ended(ws);
		return;
	}
	log_info("generation %llu: stopping %d worker%s: %s",
	    (unsigned long long)ws->generation, ws->alive,
	    plural(ws->alive), why);
	kill_groups(ws, SIGTERM);
	/* A stopped worker (SIGSTOP, a debugger) takes its SIGTERM only
	 * once it runs again, as systemd's stop does. */
	kill_groups(ws, SIGCONT);
	if (ms == 0)
		workers_kill(ws);
	else
		evtimer_add(ws->kill_timer, &tv);
}

/* Stops a running set; |end| says why (WS_END_STOPPED: we want it gone,
 * WS_END_GPUCHECK: a GPU check failed). */
void
workers_stop(struct workers *ws, enum ws_end end, const char *why)
{
	if (ws->state == WS_RUNNING)
		ws->end = end;
	stop_set(ws, why);
}

void
workers_kill(struct workers *ws)
{
	if (ws->state == WS_IDLE)
		return;
	ws->killed = true;
	kill_groups(ws, SIGKILL);
}

static bool
status_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void
reaped(struct workers *ws, struct worker *w, int status)
{
	char how[64];

	/* A check result or exec error may still sit in the pipe. */
	if (w->pipe_fd >= 0 && w->check_pending)
		pipe_check(w);
	if (w->pipe_fd >= 0)
		pipe_exec(w);
	pipe_close(w);
	event_del(w->check_timer);
	w->check_pending = false;
	w->exited = true;
	w->status = status;
	ws->alive--;
	/* What the worker left in its group goes with it, now, while the
	 * group's number cannot have been given to another process. */
	kill(-w->pid, SIGKILL);
	if (ws->state == WS_RUNNING && !status_ok(status)) {
		log_info("generation %llu: rank %u (local rank %d) %s",
		    (unsigned long long)ws->generation,
		    ws->base_rank + (uint32_t)w->local_rank, w->local_rank,
		    workers_describe_status(status, how, sizeof(how)));
		if (ws->first_failed < 0)
			ws->first_failed = w->local_rank;
		if (ws->end != WS_END_GPUCHECK)
			ws->end = WS_END_FAILED;
		stop_set(ws, "a worker failed");
		return;		/* stop_set ends the set if it was the last */
	}
	if (ws->alive == 0)
		set_ended(ws);
}

static void
sigchld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct workers *ws = arg;
	struct worker *w;
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if ((w = find(ws, pid)) == NULL) {
			log_debug("reaped process %d, not a worker", (int)pid);
			continue;
		}
		reaped(ws, w, status);
	}
}

/* Every worker was reaped. */
static void
set_ended(struct workers *ws)
{
	event_del(ws->kill_timer);
	for (int i = 0; i < ws->n; i++) {
		tee_free(ws->w[i].out);
		tee_free(ws->w[i].err);
		ws->w[i].out = ws->w[i].err = NULL;
	}
	ws->state = WS_IDLE;
	ws->ev.ended(ws->ev.arg);
}

/* |ev| tells the agent what happens to the workers; |logs| gives them
 * their files. */
int
workers_init(struct workers *ws, struct event_base *base,
    const struct agent_opts *opts, struct logs *logs,
    const struct workers_events *ev)
{
	ws->base = base;
	ws->opts = opts;
	ws->logs = logs;
	ws->ev = *ev;
	ws->state = WS_IDLE;
	ws->sigchld = evsignal_new(base, SIGCHLD, sigchld_cb, ws);
	ws->kill_timer = evtimer_new(base, kill_timer_cb, ws);
	if (ws->sigchld == NULL || ws->kill_timer == NULL ||
	    event_add(ws->sigchld, NULL) != 0)
		return -1;
	return 0;
}

/* At exit: workers still running are killed (they would die with us
 * anyway, by PR_SET_PDEATHSIG). */
void
workers_free(struct workers *ws)
{
	if (ws->state != WS_IDLE)
		kill_groups(ws, SIGKILL);
	release(ws);
	if (ws->sigchld != NULL)
		event_free(ws->sigchld);
	if (ws->kill_timer != NULL)
		event_free(ws->kill_timer);
	ws->sigchld = ws->kill_timer = NULL;
}
