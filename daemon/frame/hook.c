/*
 * What rdzvd does when hosts change state (docs/HEALTH.md): each change is
 * logged, and a host newly quarantined runs the on-quarantine command, as
 * `COMMAND HOST REASON` through posix_spawn: the host name and the reason
 * come from clients, so they are arguments, never part of a shell string.
 * The command runs beside the event loop, never blocking it: its output
 * (stdout and stderr together) is read from a pipe, its exit is seen from
 * SIGCHLD, and one that outlives hook-timeout is killed with its process
 * group. Its exit status and output are logged. At most HOOK_MAX_RUNNING
 * run at once; more wait in order, up to HOOK_MAX_QUEUED (then they are
 * dropped with a warning: the log still names the host).
 *
 * How each host's latest run went is kept (in memory, for HOOK_KEPT hosts)
 * for rdzvctl: `host quarantine` waits for it (rpc_set_host.c listens for
 * the ends of runs), `hosts` shows it, `host clear` reminds what it did.
 * How it ended is also written to the host's record in the store (issue
 * 42), and read back at start, so that `hosts` shows it after a restart.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "rdzvd.h"
#include "text.h"
#include "xmalloc.h"

#define HOOK_MAX_RUNNING	8
#define HOOK_MAX_QUEUED	1024
#define HOOK_OUTPUT	4096	/* bytes of output kept for the log */
#define HOOK_KEPT	4096	/* hosts whose latest run is remembered */

extern char **environ;

struct hook_run {
	char		 host[HOST_NAME_MAX_LEN + 1];
	char		 reason[HOST_REASON_MAX];
	char		 brief[HOST_BRIEF_MAX];
	struct hook_last *last;		/* its host's; NULL once superseded */
	pid_t		 pid;		/* 0: not started; -1: reaped */
	int		 status;
	int		 fd;		/* the output pipe; -1 at EOF */
	bool		 killed;
	struct event	*read_ev;
	struct event	*timer_ev;
	char		 out[HOOK_OUTPUT];
	size_t		 out_n;
	bool		 out_cut;
	uint64_t	 started_ms;
	TAILQ_ENTRY(hook_run) entry;
};
TAILQ_HEAD(hook_runs, hook_run);

static struct {
	struct event_base	*base;
	char			*command;	/* NULL: no hook */
	uint32_t		 timeout_ms;
	struct event		*chld_ev;
	struct hook_runs	 running, queued;
	size_t			 n_running, n_queued;
	uint64_t		 runs, failures;
	TAILQ_HEAD(, hook_last)	 lasts;		/* oldest first */
	struct hash		 by_host;
	size_t			 n_lasts;
	void			(*on_end)(const char *host);
} hk = {
	.running = TAILQ_HEAD_INITIALIZER(hk.running),
	.queued = TAILQ_HEAD_INITIALIZER(hk.queued),
	.lasts = TAILQ_HEAD_INITIALIZER(hk.lasts),
};

static void	hook_start_queued(void);

static int
match_last(const void *item, const void *key)
{
	return strcmp(((const struct hook_last *)item)->host, key) == 0;
}

static uint64_t
host_hash(const char *host)
{
	return hash_bytes(host, strlen(host));
}

const struct hook_last *
hook_last(const char *host)
{
	return hash_find(&hk.by_host, host_hash(host), match_last, host);
}

/* |host|'s record, made (and the oldest dropped past HOOK_KEPT) or moved
 * to the end as the newest. */
static struct hook_last *
last_get(const char *host)
{
	struct hook_last *l = (struct hook_last *)hook_last(host);

	if (l != NULL) {
		TAILQ_REMOVE(&hk.lasts, l, entry);
		TAILQ_INSERT_TAIL(&hk.lasts, l, entry);
		return l;
	}
	if (hk.n_lasts == HOOK_KEPT) {
		l = TAILQ_FIRST(&hk.lasts);
		TAILQ_REMOVE(&hk.lasts, l, entry);
		hash_remove(&hk.by_host, host_hash(l->host), l);
		hk.n_lasts--;
		free(l);
	}
	l = xcalloc(1, sizeof(*l));
	textcpy(l->host, sizeof(l->host), host);
	if (hash_insert(&hk.by_host, host_hash(host), l) != 0)
		fatalx("on-quarantine: out of memory");
	TAILQ_INSERT_TAIL(&hk.lasts, l, entry);
	hk.n_lasts++;
	return l;
}

/*
 * Hosts whose latest run ended, written to the core by the next turn's
 * release of what it held (turn_hold_fn): a run may end while a commit is
 * in flight (the core is sealed then: turn.c), or within a turn's output
 * (a run that cannot start), after which the core forgets that turn's
 * dirty records.
 */
#define HOOK_SAVE_MAX	64
static char	save_hosts[HOOK_SAVE_MAX][HOST_NAME_MAX_LEN + 1];
static size_t	n_save;
static bool	save_queued;

/* |host|'s latest run as it ended, into its record in the core, which
 * the turn's commit writes. */
static void
save_now(const char *host)
{
	const struct hook_last *l = hook_last(host);
	struct host_hook rec;

	if (l == NULL || rdzvd.core == NULL || rdzvd.standby)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.state = l->state;
	rec.code = l->code;
	rec.sig = l->sig;
	textcpy(rec.output, sizeof(rec.output), l->output);
	textcpy(rec.reason, sizeof(rec.reason), l->reason);
	rec.started_ms = l->started_ms;
	rec.ended_ms = l->ended_ms;
	if (hosts_set_hook(rdzvd.core->hosts, wall_ms(), host, &rec) == 0)
		turn_schedule();
}

static void
save_held(uint64_t arg)
{
	for (size_t i = 0; i < n_save; i++)
		save_now(save_hosts[i]);
	n_save = 0;
	save_queued = false;
}

void
hook_settle(void)
{
	if (n_save > 0)
		save_held(0);
}

static void
save(const char *host)
{
	for (size_t i = 0; i < n_save; i++)
		if (strcmp(save_hosts[i], host) == 0)
			return;
	if (n_save == HOOK_SAVE_MAX) {
		log_warnx("on-quarantine: host %s: too many runs ended before "
		    "their outcomes could be written; its outcome is kept in "
		    "memory only", host);
		return;
	}
	/* Queued once; again when a step-down or shutdown dropped what was
	 * held (turn_refuse_held). */
	if (!save_queued || turn_held_count() == 0) {
		turn_hold_fn(save_held, 0);
		turn_schedule();
		save_queued = true;
	}
	textcpy(save_hosts[n_save++], sizeof(save_hosts[0]), host);
}

/* A run's end, in its host's record when it is the latest, told to the
 * listener. */
static void
run_ended(struct hook_run *r, enum hook_state st, const char *output)
{
	struct hook_last *l = r->last;

	if (l != NULL && l->state <= HOOK_RUNNING) {
		l->state = st;
		l->ended_ms = wall_ms();
		textcpy(l->output, sizeof(l->output), output);
		if (st == HOOK_EXITED)
			l->code = WEXITSTATUS(r->status);
		else if (st == HOOK_SIGNALED)
			l->sig = WTERMSIG(r->status);
		save(r->host);
	}
	if (hk.on_end != NULL)
		hk.on_end(r->host);
}

/* The last line of |out| (its trailing newlines already gone). */
static const char *
last_line(const char *out)
{
	const char *nl = strrchr(out, '\n');

	return nl != NULL ? nl + 1 : out;
}

static void
run_free(struct hook_run *r)
{
	if (r->read_ev != NULL)
		event_free(r->read_ev);
	if (r->timer_ev != NULL)
		event_free(r->timer_ev);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

/* Logs the end of a run once it exited and its output ended. */
static void
run_done(struct hook_run *r)
{
	char	out[HOOK_OUTPUT * 4 + 1], why[64], line[HOST_REASON_MAX * 4];
	size_t	n = r->out_n;
	enum hook_state st;

	if (r->pid != -1 || r->fd >= 0)
		return;
	while (n > 0 && (r->out[n - 1] == '\n' || r->out[n - 1] == '\r'))
		n--;
	r->out[n] = '\0';
	vis_buf(out, sizeof(out), r->out);
	vis_buf(line, sizeof(line), last_line(r->out));
	st = r->killed ? HOOK_KILLED : WIFEXITED(r->status) ? HOOK_EXITED :
	    HOOK_SIGNALED;
	if (r->killed)
		snprintf(why, sizeof(why), "was killed after %u ms",
		    hk.timeout_ms);
	else if (WIFEXITED(r->status))
		snprintf(why, sizeof(why), "exited %d", WEXITSTATUS(r->status));
	else if (WIFSIGNALED(r->status))
		snprintf(why, sizeof(why), "died of signal %d",
		    WTERMSIG(r->status));
	else
		snprintf(why, sizeof(why), "ended (status %d)", r->status);
	if (!r->killed && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)
		log_info("on-quarantine for host %s %s%s%s%s", r->host, why,
		    n > 0 ? ": " : "", out, r->out_cut ? " [...]" : "");
	else {
		hk.failures++;
		log_warnx("on-quarantine for host %s %s%s%s%s", r->host, why,
		    n > 0 ? ": " : "", out, r->out_cut ? " [...]" : "");
	}
	TAILQ_REMOVE(&hk.running, r, entry);
	hk.n_running--;
	run_ended(r, st, line);
	run_free(r);
	hook_start_queued();
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hook_run	*r = arg;
	char		 buf[4096];
	ssize_t		 n;

	for (;;) {
		n = read(r->fd, buf, sizeof(buf));
		if (n > 0) {
			size_t room = sizeof(r->out) - 1 - r->out_n;
			size_t take = (size_t)n < room ? (size_t)n : room;

			memcpy(r->out + r->out_n, buf, take);
			r->out_n += take;
			if (take < (size_t)n)
				r->out_cut = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		break;	/* EOF or an error: the output has ended */
	}
	event_del(r->read_ev);
	close(r->fd);
	r->fd = -1;
	run_done(r);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hook_run	*r = arg;

	if (r->pid > 0) {
		/* Its own process group: whatever it started goes too. */
		r->killed = true;
		kill(-r->pid, SIGKILL);
		kill(r->pid, SIGKILL);
	}
	/* A grandchild that keeps the pipe open no longer holds us up. */
	if (r->fd >= 0) {
		event_del(r->read_ev);
		close(r->fd);
		r->fd = -1;
	}
	run_done(r);
}

static void
chld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct hook_run	*r, *next;
	int		 status;

	/* Only our own children, by pid: rdzvd reaps nothing else. */
	for (r = TAILQ_FIRST(&hk.running); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (r->pid <= 0)
			continue;
		if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
			r->pid = -1;
			r->status = status;
			run_done(r);
		}
	}
}

static int
run_start(struct hook_run *r)
{
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 at;
	sigset_t			 none, dfl;
	char				*argv[4], **envp, brief[HOST_BRIEF_MAX + 16];
	int				 p[2], rc;
	size_t				 n = 0;
	struct timeval			 tv;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		log_warn("on-quarantine for host %s: pipe", r->host);
		run_ended(r, HOOK_NOT_STARTED, strerror(errno));
		return -1;
	}
	/* rdzvd's environment, and the gist of the reason for a narrow
	 * column (rdzv-drain puts it first in Slurm's reason). */
	while (environ[n] != NULL)
		n++;
	envp = xreallocarray(NULL, n + 2, sizeof(*envp));
	n = 0;
	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, "RDZV_BRIEF=", 11) != 0)
			envp[n++] = *e;
	snprintf(brief, sizeof(brief), "RDZV_BRIEF=%s", r->brief);
	envp[n++] = brief;
	envp[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGCHLD);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGINT);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	argv[0] = hk.command;
	argv[1] = r->host;
	argv[2] = r->reason;
	argv[3] = NULL;
	rc = posix_spawnp(&r->pid, hk.command, &fa, &at, argv, envp);
	free(envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(p[1]);
	if (rc != 0) {
		errno = rc;
		log_warn("on-quarantine for host %s: cannot run %s", r->host,
		    hk.command);
		close(p[0]);
		r->pid = 0;
		run_ended(r, HOOK_NOT_STARTED, strerror(rc));
		return -1;
	}
	r->fd = p[0];
	r->started_ms = mono_ms();
	r->read_ev = event_new(hk.base, r->fd, EV_READ | EV_PERSIST, read_cb,
	    r);
	r->timer_ev = evtimer_new(hk.base, timeout_cb, r);
	if (r->read_ev == NULL || r->timer_ev == NULL)
		fatalx("on-quarantine: cannot create events");
	tv.tv_sec = hk.timeout_ms / 1000;
	tv.tv_usec = (suseconds_t)(hk.timeout_ms % 1000) * 1000;
	event_add(r->read_ev, NULL);
	event_add(r->timer_ev, &tv);
	hk.runs++;
	if (r->last != NULL) {
		r->last->state = HOOK_RUNNING;
		r->last->pid = (int)r->pid;
		r->last->started_ms = wall_ms();
	}
	log_info("on-quarantine for host %s: running %s (pid %d)", r->host,
	    hk.command, (int)r->pid);
	return 0;
}

static void
hook_start_queued(void)
{
	struct hook_run	*r;

	while (hk.n_running < HOOK_MAX_RUNNING &&
	    (r = TAILQ_FIRST(&hk.queued)) != NULL) {
		TAILQ_REMOVE(&hk.queued, r, entry);
		hk.n_queued--;
		if (run_start(r) != 0) {
			hk.failures++;
			run_free(r);
			continue;
		}
		TAILQ_INSERT_TAIL(&hk.running, r, entry);
		hk.n_running++;
	}
}

void
hook_init(struct event_base *base, const char *command, uint32_t timeout_ms)
{
	hk.base = base;
	hk.timeout_ms = timeout_ms;
	hash_init(&hk.by_host);
	if (command == NULL || *command == '\0')
		return;
	hk.command = xstrdup(command);
	hk.chld_ev = evsignal_new(base, SIGCHLD, chld_cb, NULL);
	if (hk.chld_ev == NULL || event_add(hk.chld_ev, NULL) != 0)
		fatalx("on-quarantine: cannot watch SIGCHLD");
}

void
hook_hosts_changed(const struct hosts *hs)
{
	const struct host_change	*hc;
	struct hook_run			*r;
	struct hook_last		*l;

	for (size_t i = 0; i < hs->n_changes; i++) {
		hc = &hs->changes[i];
		log_info("host %s %s (was %s): %s", hc->name,
		    host_state_name(hc->to), host_state_name(hc->from),
		    hc->reason);
		/* A new quarantine, or a new reason for one (an admin's
		 * second quarantine): the scheduler's reason follows. */
		if (hc->to != HOST_QUARANTINED || hk.command == NULL)
			continue;
		l = last_get(hc->name);
		memset(l->output, 0, sizeof(l->output));
		l->state = HOOK_QUEUED;
		l->pid = l->code = l->sig = 0;
		l->started_ms = l->ended_ms = 0;
		textcpy(l->reason, sizeof(l->reason), hc->reason);
		/* An older run of the host no longer writes its record. */
		TAILQ_FOREACH(r, &hk.queued, entry)
			if (r->last == l)
				r->last = NULL;
		TAILQ_FOREACH(r, &hk.running, entry)
			if (r->last == l)
				r->last = NULL;
		if (hk.n_queued >= HOOK_MAX_QUEUED) {
			log_warnx("on-quarantine for host %s: %zu runs wait "
			    "already; not run", hc->name, hk.n_queued);
			hk.failures++;
			l->state = HOOK_DROPPED;
			save(hc->name);
			l->ended_ms = wall_ms();
			textf(l->output, sizeof(l->output), "%zu runs waited "
			    "already", hk.n_queued);
			if (hk.on_end != NULL)
				hk.on_end(hc->name);
			continue;
		}
		r = xcalloc(1, sizeof(*r));
		r->fd = -1;
		r->last = l;
		textcpy(r->host, sizeof(r->host), hc->name);
		textcpy(r->reason, sizeof(r->reason), hc->reason);
		textcpy(r->brief, sizeof(r->brief), hc->brief);
		TAILQ_INSERT_TAIL(&hk.queued, r, entry);
		hk.n_queued++;
	}
	hook_start_queued();
}

#define LOADED_NAMED	10	/* quarantined hosts named at start */

void
hook_hosts_loaded(const struct hosts *hs)
{
	const struct host	*h;
	char			 names[LOADED_NAMED * 40 + 32];
	size_t			 len = 0;
	uint32_t		 n = hs->n_state[HOST_QUARANTINED], k = 0;

	/* How each host's latest run ended, as the store kept it. */
	TAILQ_FOREACH(h, &hs->all, entry) {
		struct hook_last *l;

		if (h->hook.state < HOOK_EXITED || h->hook.state > HOOK_DROPPED)
			continue;
		l = last_get(h->name);
		l->state = (enum hook_state)h->hook.state;
		l->pid = 0;
		l->code = h->hook.code;
		l->sig = h->hook.sig;
		textcpy(l->output, sizeof(l->output), h->hook.output);
		textcpy(l->reason, sizeof(l->reason), h->hook.reason);
		l->started_ms = h->hook.started_ms;
		l->ended_ms = h->hook.ended_ms;
	}
	if (n == 0)
		return;
	names[0] = '\0';
	TAILQ_FOREACH(h, &hs->all, entry) {
		if (h->state != HOST_QUARANTINED)
			continue;
		if (k++ == LOADED_NAMED) {
			textf(names + len, sizeof(names) - len, " and %u more",
			    n - LOADED_NAMED);
			break;
		}
		textf(names + len, sizeof(names) - len, "%s%.*s",
		    k > 1 ? ", " : "", (int)utf8_prefix(h->name, 32), h->name);
		len = strlen(names);
	}
	log_info("%u host%s quarantined, %s refused: %s (rdzvctl hosts "
	    "--state quarantined; an admin clears one with rdzvctl host "
	    "clear)", n, plural(n), n == 1 ? "its joins" : "their joins",
	    names);
}

void
hook_counts(uint64_t *runs, uint64_t *failures)
{
	*runs = hk.runs;
	*failures = hk.failures;
}

const char *
hook_command(void)
{
	return hk.command;
}

_Static_assert((int)HOOK_QUEUED ==
    RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_QUEUED &&
    (int)HOOK_DROPPED == RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_DROPPED,
    "enum hook_state is numbered as rdzv.v1.HookRunState");

/* How the on-quarantine command's latest run for a host went; NULL when
 * none ran since rdzvd started. */
static Rdzv__V1__HookRun *
run_to_pb(struct convert_arena *a, const struct hook_last *l)
{
	Rdzv__V1__HookRun *m;

	if (l == NULL)
		return NULL;
	m = convert_alloc(a, sizeof(*m));
	rdzv__v1__hook_run__init(m);
	m->state = (Rdzv__V1__HookRunState)l->state;
	m->command = (char *)(hook_command() != NULL ? hook_command() : "");
	m->pid = l->pid;
	m->exit_code = l->code;
	m->signal = l->sig;
	m->output = (char *)l->output;
	m->started_unix_ms = l->started_ms;
	m->ended_unix_ms = l->ended_ms;
	m->reason = (char *)l->reason;
	return m;
}

/* A host record and its hook's latest run, as Control.ListHosts, SetHost
 * and the page show it. */
Rdzv__V1__Host *
hook_host_to_pb(struct convert_arena *a, const struct host *h,
    struct core_now now)
{
	Rdzv__V1__Host *m = convert_host(a, h, now,
	    rdzvd.core->hosts->policy.crash_window_ms);

	m->hook = run_to_pb(a, hook_last(h->name));
	return m;
}

bool
hook_pending(const char *host)
{
	const struct hook_last *l = hook_last(host);

	return l != NULL && l->state <= HOOK_RUNNING;
}

void
hook_on_end(void (*fn)(const char *host))
{
	hk.on_end = fn;
}

void
hook_free(void)
{
	struct hook_run	*r;
	struct hook_last *l;

	/* Runs still going are left to finish on their own; only our
	 * bookkeeping goes. */
	while ((r = TAILQ_FIRST(&hk.running)) != NULL) {
		TAILQ_REMOVE(&hk.running, r, entry);
		if (r->pid > 0)
			log_warnx("on-quarantine for host %s (pid %d) still "
			    "runs at exit", r->host, (int)r->pid);
		run_free(r);
	}
	while ((r = TAILQ_FIRST(&hk.queued)) != NULL) {
		TAILQ_REMOVE(&hk.queued, r, entry);
		log_warnx("on-quarantine for host %s: not run (rdzvd exits)",
		    r->host);
		run_free(r);
	}
	hk.n_running = hk.n_queued = 0;
	while ((l = TAILQ_FIRST(&hk.lasts)) != NULL) {
		TAILQ_REMOVE(&hk.lasts, l, entry);
		free(l);
	}
	hk.n_lasts = 0;
	hash_free(&hk.by_host);
	hk.on_end = NULL;
	if (hk.chld_ev != NULL)
		event_free(hk.chld_ev);
	hk.chld_ev = NULL;
	free(hk.command);
	hk.command = NULL;
}
