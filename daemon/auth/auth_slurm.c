/*
 * slurm-job-owner = check (docs/SECURITY.md): a Join that starts a new job
 * under a numeric job id goes through only for the user who owns the
 * Slurm job of that number, as `squeue` says. squeue is a round trip to
 * slurmctld and may hang for as long as slurmctld is down, so it runs on
 * threads of its own (auth.c's owner pool, never the ones that decode
 * credentials), is bounded (SQUEUE_TIMEOUT_MS), and its answers are kept
 * (an owner never changes; a job not found yet is asked again soon, since
 * one just submitted shows up at once).
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_int.h"
#include "clock.h"
#include "grpc.h"
#include "text.h"

#define SQUEUE_TIMEOUT_MS	5000
/* How soon a lookup nobody waits for any more is killed. */
#define CANCEL_POLL_MS		100
#define CACHE_SIZE		1024
#define FOUND_TTL_MS		600000
#define MISSING_TTL_MS		2000

extern char **environ;

struct owner {
	struct slurm_owner o;
	uint64_t	 at_ms;
};

static struct {
	pthread_mutex_t	 mu;
	struct owner	 e[CACHE_SIZE];
	size_t		 next;		/* the slot to fill next (a ring) */
} cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

int
auth_slurm_id(const char *rdzv_id)
{
	size_t n = strlen(rdzv_id);

	if (n == 0 || n >= sizeof(((struct slurm_owner *)0)->job))
		return 0;
	return strspn(rdzv_id, "0123456789") == n;
}

int
auth_slurm_cached(const char *job, struct slurm_owner *out)
{
	uint64_t now = mono_ms();
	int hit = 0;

	pthread_mutex_lock(&cache.mu);
	for (size_t i = 0; i < CACHE_SIZE && !hit; i++) {
		struct owner *o = &cache.e[i];
		if (o->at_ms == 0 || strcmp(o->o.job, job) != 0)
			continue;
		if (now - o->at_ms < (o->o.found ? FOUND_TTL_MS :
		    MISSING_TTL_MS)) {
			*out = o->o;
			hit = 1;
		}
	}
	pthread_mutex_unlock(&cache.mu);
	return hit;
}

static void
cache_put(const struct slurm_owner *o)
{
	pthread_mutex_lock(&cache.mu);
	cache.e[cache.next].o = *o;
	cache.e[cache.next].at_ms = mono_ms();
	cache.next = (cache.next + 1) % CACHE_SIZE;
	pthread_mutex_unlock(&cache.mu);
}

/*
 * Runs `squeue -h -t all -j JOB -o "%U %u"`: 1 with the owner, 0 when
 * Slurm has no such job, -1 with why in |err|; killed once *cancel is
 * set.
 */
static int
squeue(const char *job, struct slurm_owner *o, const int *cancel, char *err,
    size_t errlen)
{
	char *argv[] = { "squeue", "-h", "-t", "all", "-j", (char *)job,
	    "-o", "%U %u", NULL };
	posix_spawn_file_actions_t fa;
	char out[1024];
	size_t len = 0;
	uint64_t deadline = mono_ms() + SQUEUE_TIMEOUT_MS;
	int p[2], rc, status = 0, timed_out = 0, dropped = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	rc = posix_spawnp(&pid, "squeue", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		snprintf(err, errlen, "cannot run squeue: %s", strerror(rc));
		return -1;
	}
	for (;;) {
		uint64_t now = mono_ms();
		struct pollfd pfd = { p[0], POLLIN, 0 };
		if (now >= deadline) {
			timed_out = 1;
			break;
		}
		if (cancel != NULL && __atomic_load_n(cancel,
		    __ATOMIC_RELAXED)) {
			dropped = 1;
			break;
		}
		rc = poll(&pfd, 1, (int)(deadline - now < CANCEL_POLL_MS ?
		    deadline - now : CANCEL_POLL_MS));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			continue;
		ssize_t n = read(p[0], out + len, sizeof(out) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(out) - 1)
			break;
	}
	close(p[0]);
	out[len] = '\0';
	if (timed_out || dropped)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		snprintf(err, errlen, "squeue did not answer within %d ms "
		    "(is slurmctld up?)", SQUEUE_TIMEOUT_MS);
		return -1;
	}
	if (dropped) {
		snprintf(err, errlen, "its squeue was stopped when no call "
		    "waited for it any more; try again");
		return -1;
	}
	out[strcspn(out, "\n")] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (out[0] == '\0')
			return 0;
		if (sscanf(out, "%23s %255s", o->uid, o->user) != 2) {
			snprintf(err, errlen, "squeue said '%.200s'", out);
			return -1;
		}
		return 1;
	}
	if (strstr(out, "Invalid job id") != NULL)
		return 0;
	snprintf(err, errlen, "squeue failed: %.300s", out[0] != '\0' ? out :
	    "no output");
	return -1;
}

int
auth_slurm_ask(const char *job, struct slurm_owner *o, const int *cancel,
    char *err, size_t errlen)
{
	char id[sizeof(o->job)];
	int rc;

	/* |job| may be o->job itself. */
	textcpy(id, sizeof(id), job);
	memset(o, 0, sizeof(*o));
	textcpy(o->job, sizeof(o->job), id);
	if ((rc = squeue(id, o, cancel, err, errlen)) < 0)
		return -1;
	o->found = rc;
	cache_put(o);
	return 0;
}

void
auth_slurm_judge(const struct slurm_owner *o, struct auth_result *r)
{
	char uid[32];

	if (!o->found) {
		r->status = GRPC_PERMISSION_DENIED;
		snprintf(r->msg, sizeof(r->msg), "Slurm has no job %s (squeue); "
		    "with slurm-job-owner = check a numeric job id belongs to "
		    "the Slurm job of that number", o->job);
		return;
	}
	snprintf(uid, sizeof(uid), "uid:%s", o->uid);
	if (strcmp(r->identity, o->user) == 0 || strcmp(r->identity, uid) == 0)
		return;
	r->status = GRPC_PERMISSION_DENIED;
	snprintf(r->msg, sizeof(r->msg), "job %s is Slurm job %s of %.100s; "
	    "%.100s may not join it (slurm-job-owner = check)", o->job, o->job,
	    o->user, r->identity);
}
