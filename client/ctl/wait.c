/*
 * rdzvctl wait ID [--timeout D] [--attempt N] [--appear-timeout D |
 * --must-exist]: blocks until the job ends and exits with its outcome
 * (SPEC §8): 0 closed, 1 failed (the reason on stderr) or --timeout
 * passed, 3 not found, 5 rdzvd unavailable. Batch scripts end with it,
 * so the scheduler records what became of the job, not the exit status of
 * the worst task (srun returns 137 after a kill -9 even when the job
 * recovered).
 *
 * A job that does not exist yet (a pipeline waits right after sbatch,
 * while the job is pending and no agent has joined) is waited for, up to
 * --appear-timeout (default 10 minutes, rdzv-agent's default join
 * timeout) or --timeout, whichever is sooner; then exit 3. Once it has
 * appeared only --timeout bounds the wait. --must-exist (or
 * --appear-timeout 0) exits 3 at once instead, as a batch script's wait
 * after its agents have exited wants: the job is there by then or never.
 *
 * It follows the job on rdzv.v1.Control/Watch, which sends its state at
 * once and again on every change: no polling. A lost stream (rdzvd
 * restarting, a failover) is followed again after a backoff for up to
 * RECONNECT_MS; a wait that has seen its job once does not give up on the
 * first refused connection, since the job goes on without rdzvd. Past
 * --timeout it exits 1, saying the job had not ended.
 *
 * --attempt N is for a requeued batch job, which keeps its id: only the end
 * of attempt N or a later one is the outcome. The end of an earlier one
 * (the run before the requeue closed, and this run's agents never joined)
 * means attempt N has not started: exit 3, as for a job that is not there,
 * rather than the earlier run's "closed" and 0. Waiting on for it instead
 * would hold a batch job whose agents have all exited until its time limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "parse.h"
#include "rdzvctl.h"

#define KEEPALIVE_MS	10000
#define RECONNECT_MS	60000	/* rdzvd away this long: unavailable */
#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000
#define APPEAR_MS	(600 * 1000)	/* rdzv-agent's default join timeout */

static const struct option wait_longopts[] = {
	{ "timeout", required_argument, NULL, 'T' },
	{ "attempt", required_argument, NULL, 'A' },
	{ "appear-timeout", required_argument, NULL, 'P' },
	{ "must-exist", no_argument, NULL, 'M' },
	{ NULL, 0, NULL, 0 },
};

/* What one Watch call ended with. */
enum watch_end {
	END_ENDED,		/* the job closed or failed: w->job */
	END_REMOVED,		/* the job was deleted */
	END_TIMEOUT,		/* --timeout passed */
	END_LOST,		/* the stream ended; watch again */
};

struct waiter {
	struct ctl		*ctl;
	const char		*rdzv_id;
	struct event_base	*base;
	struct grpc_ccall	*cc;
	enum watch_end		 end;
	int			 status;	/* the stream's, for END_LOST */
	char			 message[512];
	Rdzv__V1__Job		*job;		/* the last state seen; NULL
						   before it appeared */
	bool			 appear;	/* wait for it to appear */
	uint64_t		 away_since;	/* the stream was lost, mono
						   ms; 0: it is not */
	uint64_t		 backoff_ms;	/* before the next try */
};

static int
wait_option(struct ctl *ctl, int ch, const char *arg)
{
	uint64_t		 ms;
	char			*end;
	unsigned long long	 n;

	if (ch == 'A') {
		errno = 0;
		n = strtoull(arg, &end, 10);
		if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0 ||
		    n == 0 || n > UINT32_MAX)
			return ctl_usage_error("wait: --attempt %s: give the "
			    "scheduler's run of the job, a number from 1", arg);
		ctl->attempt = (uint32_t)n;
		return 0;
	}
	if (ch == 'M') {
		ctl->must_exist = true;
		return 0;
	}
	if (ch == 'P') {
		if (parse_duration(arg, 1000, &ms) != 0)
			return ctl_usage_error("wait: --appear-timeout %s: give "
			    "a duration such as 30s, 90m or 2h (0: the job must "
			    "exist now)", arg);
		ctl->appear_ms = ms;
		if (ms == 0)
			ctl->must_exist = true;
		return 0;
	}
	if (ch != 'T')
		return -1;
	if (parse_duration(arg, 1000, &ms) != 0 || ms == 0)
		return ctl_usage_error("wait: --timeout %s: give a duration "
		    "such as 30s, 90m or 2h", arg);
	ctl->timeout_ms = ms;
	return 0;
}

static bool
job_ended(const Rdzv__V1__Job *j)
{
	return j->state == RDZV__V1__JOB_STATE__JOB_STATE_CLOSED ||
	    j->state == RDZV__V1__JOB_STATE__JOB_STATE_FAILED;
}

static bool	missing(const struct waiter *);

static void
job_keep(struct waiter *w, Rdzv__V1__Job *job)
{
	if (w->job != NULL)
		protobuf_c_message_free_unpacked(&w->job->base, NULL);
	w->job = job;
}

static void
finish(struct waiter *w, enum watch_end end)
{
	w->end = end;
	ctl_watch_end(&w->cc, w->base);
}

static void
on_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct waiter			*w = arg;
	const Rdzv__V1__WatchEvent	*ev =
	    (const Rdzv__V1__WatchEvent *)msg;

	bool				 was;

	if (ev->job == NULL || w->cc == NULL)
		return;
	was = missing(w);
	if (ev->removed) {
		/* An earlier attempt's end, gone with its retention: the one
		 * waited for may still come. */
		if (w->appear && missing(w))
			job_keep(w, NULL);
		else
			finish(w, END_REMOVED);
		return;
	}
	job_keep(w, ctl_job_copy(ev->job));
	ctl_received(w->ctl, &w->job->base);
	/* An earlier attempt's end is not the outcome of the one waited
	 * for, which may still appear: the loop's deadline changes. */
	if (job_ended(w->job) && !(w->appear && missing(w)))
		finish(w, END_ENDED);
	else if (missing(w) != was)
		finish(w, END_ENDED);
}

static void
on_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct waiter	*w = arg;

	if (w->cc == NULL)
		return;		/* finish() cancelled it */
	w->cc = NULL;
	w->status = status;
	snprintf(w->message, sizeof(w->message), "%s", message != NULL ?
	    message : grpc_status_name(status));
	w->end = END_LOST;
	event_base_loopbreak(w->base);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	finish(arg, END_TIMEOUT);
}

/* One Watch of the job until it ends, the stream ends, or |left_ms| (0:
 * no limit) passes. */
static enum watch_end
watch_once(struct waiter *w, uint64_t left_ms)
{
	struct grpc_client_opts	 o;
	struct tls_ctx		*tls = NULL;
	struct grpc_client	*cli;
	struct event		*timer = NULL;
	struct timeval		 tv;

	if (ctl_client_opts(w->ctl, &o, &tls) != CTL_EXIT_OK)
		fatalx("wait: the client options changed");
	o.keepalive_ms = KEEPALIVE_MS;
	if ((w->base = event_base_new()) == NULL ||
	    (cli = grpc_client_new(w->base, &o, NULL, NULL)) == NULL)
		fatalx("wait: cannot create the event loop");
	if (left_ms > 0) {
		tv.tv_sec = (time_t)(left_ms / 1000);
		tv.tv_usec = (suseconds_t)(left_ms % 1000) * 1000;
		if ((timer = evtimer_new(w->base, on_timeout, w)) == NULL ||
		    evtimer_add(timer, &tv) != 0)
			fatalx("wait: cannot set the timeout");
	}
	w->status = GRPC_OK;
	w->end = END_LOST;
	w->cc = ctl_watch_start(cli, w->rdzv_id, false, on_msg, on_done, w);
	event_base_dispatch(w->base);
	ctl_watch_end(&w->cc, NULL);
	grpc_client_free(cli);
	tls_free(tls);
	if (timer != NULL)
		event_free(timer);
	event_base_free(w->base);
	w->base = NULL;
	return w->end;
}

/*
 * GetJob without a word on stderr: the gRPC status, with the job in *job
 * on OK. A wait that retries says what went wrong only when it gives up.
 */
static int
get_job_quiet(struct waiter *w, Rdzv__V1__Job **job)
{
	Rdzv__V1__GetJobRequest	 req = RDZV__V1__GET_JOB_REQUEST__INIT;
	struct grpc_client_opts	 o;
	struct tls_ctx		*tls = NULL;
	char			*msg = NULL;
	int			 status;

	*job = NULL;
	if (ctl_client_opts(w->ctl, &o, &tls) != CTL_EXIT_OK)
		fatalx("wait: the client options changed");
	req.rdzv_id = (char *)w->rdzv_id;
	status = grpc_unary_sync(&o, "/rdzv.v1.Control/GetJob", &req.base,
	    &rdzv__v1__job__descriptor, o.connect_timeout_ms + 10000,
	    (ProtobufCMessage **)job, &msg);
	tls_free(tls);
	w->status = status;
	snprintf(w->message, sizeof(w->message), "%s", msg != NULL ? msg :
	    grpc_status_name(status));
	free(msg);
	if (status == GRPC_OK)
		ctl_received(w->ctl, &(*job)->base);
	return status;
}

/* An ended attempt before --attempt's: the one asked for never started. */
static bool
attempt_missing(const struct waiter *w)
{
	return job_ended(w->job) && w->job->attempt < w->ctl->attempt;
}

/* The job, or the attempt asked for, has not appeared (yet). */
static bool
missing(const struct waiter *w)
{
	return w->job == NULL || attempt_missing(w);
}

static int
not_started(struct waiter *w)
{
	const Rdzv__V1__Job	*j = w->job;

	fprintf(stderr, "rdzvctl: job %s has no attempt %u: its attempt %u "
	    "%s (%s) and no later one started\n", j->rdzv_id, w->ctl->attempt,
	    j->attempt, job_state_name(j->state), j->reason);
	return CTL_EXIT_NOT_FOUND;
}

/* The job's outcome: printed, and as the exit status. */
static int
outcome(struct waiter *w)
{
	const Rdzv__V1__Job	*j = w->job;
	bool			 closed =
	    j->state == RDZV__V1__JOB_STATE__JOB_STATE_CLOSED;

	if (w->ctl->output == CTL_OUTPUT_JSON) {
		int rc = json_emit(json_job(j, true), false);
		if (rc != CTL_EXIT_OK)
			return rc;
	} else if (closed)
		printf("job %s closed: %s\n", j->rdzv_id, j->reason);
	if (!closed)
		fprintf(stderr, "rdzvctl: job %s failed: %s\n", j->rdzv_id,
		    j->reason);
	fflush(stdout);
	return closed ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}

/* Said once, when the wait for a job that is not there begins: a wait
 * that prints nothing for minutes looks hung. */
static void
say_waiting(const struct waiter *w, uint64_t until_ms, uint64_t now_ms)
{
	time_t		 until = time(NULL) + (time_t)((until_ms - now_ms +
			    999) / 1000);
	struct tm	 tm;
	char		 at[32], what[64] = "";

	if (localtime_r(&until, &tm) == NULL ||
	    strftime(at, sizeof(at), "%H:%M:%S", &tm) == 0)
		snprintf(at, sizeof(at), "%llu s from now",
		    (unsigned long long)((until_ms - now_ms) / 1000));
	if (w->job != NULL)
		snprintf(what, sizeof(what), " (attempt %u)", w->ctl->attempt);
	fprintf(stderr, "rdzvctl: job %s%s does not exist yet; waiting for it "
	    "to appear until %s (--appear-timeout; --must-exist does not "
	    "wait)\n", w->rdzv_id, what, at);
}

/* It did not appear within |ms|: not found. */
static int
not_appeared(struct waiter *w, uint64_t ms)
{
	char	d[32];

	fmt_duration(d, sizeof(d), (int64_t)ms);
	if (w->job == NULL)
		fprintf(stderr, "rdzvctl: job %s not found: no agent joined it "
		    "within %s\n", w->rdzv_id, d);
	else
		fprintf(stderr, "rdzvctl: job %s has no attempt %u: its attempt "
		    "%u %s (%s) and no later one started within %s\n",
		    w->rdzv_id, w->ctl->attempt, w->job->attempt,
		    job_state_name(w->job->state), w->job->reason, d);
	return CTL_EXIT_NOT_FOUND;
}

static int
timed_out(struct waiter *w)
{
	char	d[32];

	fmt_duration(d, sizeof(d), (int64_t)w->ctl->timeout_ms);
	if (w->job != NULL)
		fprintf(stderr, "rdzvctl: job %s has not ended within %s (it "
		    "is %s%s%s)\n", w->rdzv_id, d, job_state_name(w->job->state),
		    w->job->reason[0] != '\0' ? ": " : "", w->job->reason);
	else
		fprintf(stderr, "rdzvctl: job %s has not ended within %s (no "
		    "agent has joined it yet)\n", w->rdzv_id, d);
	return CTL_EXIT_ERROR;
}

static void
sleep_ms(uint64_t ms)
{
	struct timespec	ts = { (time_t)(ms / 1000),
			    (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * The Watch stream ended: rdzvd restarted or went away. Waits a backoff,
 * then reads the job again, so that wait_exec() watches it again once
 * rdzvd answers; the job goes on meanwhile. -1: watch again; else the exit
 * status (rdzvd refused, stayed away too long, or the job was deleted).
 */
static int
watch_lost(struct waiter *w, uint64_t deadline)
{
	struct ctl	*ctl = w->ctl;
	Rdzv__V1__Job	*job;
	uint64_t	 now = mono_ms();
	int		 status;

	if (w->away_since == 0)
		w->away_since = now;
	if (w->status != GRPC_UNAVAILABLE &&
	    w->status != GRPC_DEADLINE_EXCEEDED &&
	    w->status != GRPC_RESOURCE_EXHAUSTED &&
	    w->status != GRPC_OK && w->status != GRPC_CANCELLED)
		return ctl_fail(ctl, w->status, w->message);
	if (mono_since(now, w->away_since) >= RECONNECT_MS) {
		fprintf(stderr, "rdzvctl: %s: lost for %d s while waiting for "
		    "job %s: %s\n", ctl->server, RECONNECT_MS / 1000,
		    w->rdzv_id, w->message);
		return CTL_EXIT_UNAVAILABLE;
	}
	sleep_ms(deadline != 0 && deadline - now < w->backoff_ms ?
	    deadline - now : w->backoff_ms);
	w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
	    w->backoff_ms * 2;
	status = get_job_quiet(w, &job);
	if (status == GRPC_OK) {
		job_keep(w, job);
		w->away_since = 0;
	} else if (status == GRPC_NOT_FOUND && w->appear && missing(w)) {
		job_keep(w, NULL);
		w->away_since = 0;
	} else if (status == GRPC_NOT_FOUND) {
		fprintf(stderr, "rdzvctl: job %s was deleted before it "
		    "ended\n", w->rdzv_id);
		return CTL_EXIT_NOT_FOUND;
	} else if (status != GRPC_UNAVAILABLE &&
	    status != GRPC_DEADLINE_EXCEEDED)
		return ctl_fail(ctl, status, w->message);
	return -1;
}

static int
wait_exec(struct ctl *ctl, int argc, char **argv)
{
	struct waiter	 w;
	Rdzv__V1__Job	*job;
	uint64_t	 start = mono_ms(), deadline = 0, now, left = 0;
	uint64_t	 appear_ms, appear_at = 0;
	bool		 was_missing = false, said = false;
	int		 rc;

	memset(&w, 0, sizeof(w));
	w.ctl = ctl;
	w.backoff_ms = BACKOFF_MIN_MS;
	w.rdzv_id = argv[0];
	w.appear = !ctl->must_exist;
	if (ctl->timeout_ms > 0)
		deadline = start + ctl->timeout_ms;
	appear_ms = ctl->appear_ms > 0 ? ctl->appear_ms : APPEAR_MS;

	/* A first answer that is an error is the answer; not found is one
	 * only with --must-exist. Watch then sends the job when it appears. */
	ctl->quiet_not_found = w.appear;
	rc = ctl_get_job(ctl, w.rdzv_id, 0, &job);
	ctl->quiet_not_found = false;
	if (rc == CTL_EXIT_OK)
		job_keep(&w, job);
	else if (rc != CTL_EXIT_NOT_FOUND || !w.appear)
		return rc;
	for (;;) {
		if (!w.appear && attempt_missing(&w)) {
			rc = not_started(&w);
			break;
		}
		if (!missing(&w) && job_ended(w.job)) {
			rc = outcome(&w);
			break;
		}
		now = mono_ms();
		/* The window opens when it is found missing: at the start, or
		 * when the attempt before the one asked for ended. */
		if (missing(&w) && !was_missing) {
			appear_at = now + appear_ms;
			if (!said)
				say_waiting(&w, deadline != 0 && deadline <
				    appear_at ? deadline : appear_at, now);
			said = true;
		}
		was_missing = missing(&w);
		if (missing(&w) && now >= appear_at && (deadline == 0 ||
		    appear_at <= deadline)) {
			rc = not_appeared(&w, appear_ms);
			break;
		}
		if (deadline != 0 && now >= deadline) {
			rc = timed_out(&w);
			break;
		}
		left = deadline != 0 ? deadline - now : 0;
		if (missing(&w) && (left == 0 || appear_at - now < left))
			left = appear_at - now;
		switch (watch_once(&w, left)) {
		case END_ENDED:
		case END_TIMEOUT:
			continue;	/* the checks above say what it means */
		case END_REMOVED:
			fprintf(stderr, "rdzvctl: job %s was deleted before "
			    "it ended\n", w.rdzv_id);
			rc = CTL_EXIT_NOT_FOUND;
			goto out;
		case END_LOST:
			break;
		}
		if ((rc = watch_lost(&w, deadline)) != -1)
			goto out;
	}
out:
	if (w.job != NULL)
		protobuf_c_message_free_unpacked(&w.job->base, NULL);
	return rc;
}

const struct ctl_cmd cmd_wait_entry = {
	.name = "wait",
	.args = "ID",
	.summary = "block until the job ends: exit 0 closed, 1 failed",
	.help = "  --timeout DURATION            give up after this (exit 1; "
	    "default never)\n"
	    "  --appear-timeout DURATION     wait this long for a job that "
	    "does not\n"
	    "                                exist yet (exit 3; default 10m)"
	    "\n"
	    "  --must-exist                  a job that does not exist: exit "
	    "3 at\n"
	    "                                once (--appear-timeout 0)\n"
	    "  --attempt N                   the end of attempt N or a later "
	    "one\n"
	    "                                counts (a requeued batch job); "
	    "an\n"
	    "                                earlier attempt's end: wait for "
	    "N to\n"
	    "                                appear, or with --must-exist "
	    "exit 3\n",
	.longopts = wait_longopts,
	.min_args = 1,
	.max_args = 1,
	.option = wait_option,
	.exec = wait_exec,
};
