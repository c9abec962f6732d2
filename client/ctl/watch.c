/*
 * rdzvctl status [ID] --watch: follows rdzv.v1.Control/Watch. rdzvd sends
 * the current state of the matching jobs, then each job again whenever it
 * changed. On a terminal the view of `status` is redrawn in place (and once
 * a second, so ages move); piped, each change becomes one line, flushed at
 * once, so `rdzvctl status --watch | grep` sees it as it happens; with
 * -o json each message is one JSON line.
 *
 * With a server list (SPEC §14) the watch follows the leader: a Watch that
 * ends UNAVAILABLE starts again on the leader a standby named, else on the
 * next server. Once every server has failed, a watch that never began
 * ends as with one server; one that was live goes on trying, a second
 * apart, for the connect timeout plus 10 s after it was lost. rdzvd sends the jobs' state again on the
 * new server, so what changed meanwhile shows.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <inttypes.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "rdzvctl.h"

#define KEEPALIVE_MS	10000
#define NEXT_MS		100	/* another server: almost at once */
#define ROUND_MS	1000	/* every server failed: a second apart */
#define LOST_MS		10000	/* on top of the connect timeout */

struct watch {
	struct ctl		*ctl;
	const char		*rdzv_id;	/* NULL: every job */
	struct event_base	*base;
	struct grpc_client	*cli;
	struct grpc_client_opts	 opts;
	struct grpc_ccall	*cc;
	struct event		*retry;	/* a new Watch after a move */
	bool			 live;	/* this Watch has sent a message */
	bool			 ever_live;	/* one of them has */
	uint64_t		 lost_at;	/* ms; 0 while live */
	struct event		*tick;	/* redrawn each second */
	struct event		*dirty;	/* redraw after this turn */
	bool			 tty;
	bool			 stopping;
	int			 rc;

	/* The jobs as last seen, in the order they first came. */
	Rdzv__V1__Job		**jobs;
	size_t			 n_jobs;
	size_t			 cap;
};

static ssize_t
job_find(const struct watch *w, const char *id)
{
	for (size_t i = 0; i < w->n_jobs; i++)
		if (strcmp(w->jobs[i]->rdzv_id, id) == 0)
			return (ssize_t)i;
	return -1;
}

/* Stores |job| (taking it) in place of |old| at |i|, or appends it. */
static void
job_store(struct watch *w, ssize_t i, Rdzv__V1__Job *job)
{
	if (i >= 0) {
		rdzv__v1__job__free_unpacked(w->jobs[i], NULL);
		w->jobs[i] = job;
		return;
	}
	if (w->n_jobs == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 16;
		w->jobs = xreallocarray(w->jobs, w->cap, sizeof(*w->jobs));
	}
	w->jobs[w->n_jobs++] = job;
}

static void
job_remove(struct watch *w, ssize_t i)
{
	rdzv__v1__job__free_unpacked(w->jobs[i], NULL);
	memmove(&w->jobs[i], &w->jobs[i + 1], (w->n_jobs - (size_t)i - 1) *
	    sizeof(*w->jobs));
	w->n_jobs--;
}

/* ------------------------------------------------------------ line mode */

/* A job's line, or "" for a job not seen before (NULL). */
static void
job_line(char *buf, size_t len, const Rdzv__V1__Job *j)
{
	const Rdzv__V1__JobSettings *s;

	if (j == NULL) {
		buf[0] = '\0';
		return;
	}
	s = j->settings;
	snprintf(buf, len, "%s gen %" PRIu64 " nodes %u of %u:%u world %u "
	    "restarts %u/%u%s%s", job_state_name(j->state), j->generation,
	    j->participants, s ? s->min_nodes : 0, s ? s->max_nodes : 0,
	    j->world_size, j->restart_count, s ? s->max_restarts : 0,
	    j->reason[0] ? ": " : "", j->reason);
}

/* A node's line, or "" for a node not seen before (NULL). */
static void
node_line(char *buf, size_t len, const Rdzv__V1__Node *n)
{
	char	r[32];
	int	k;

	if (n == NULL) {
		buf[0] = '\0';
		return;
	}
	k = snprintf(buf, len, "node %" PRIu64 " %s %s", n->node_id,
	    n->hostname, node_state_name(n->state));
	if (k >= 0 && (size_t)k < len && n->group_rank >= 0)
		k += snprintf(buf + k, len - (size_t)k, " group rank %d ranks "
		    "%s", n->group_rank, fmt_ranks(r, sizeof(r), n));
	if (k >= 0 && (size_t)k < len)
		k += snprintf(buf + k, len - (size_t)k, " nproc %u", n->nproc);
	if (k >= 0 && (size_t)k < len && n->gpus_total > 0)
		k += snprintf(buf + k, len - (size_t)k, " gpus %u/%u",
		    n->gpus_healthy, n->gpus_total);
	if (k >= 0 && (size_t)k < len && !n->connected)
		snprintf(buf + k, len - (size_t)k, " disconnected");
}

static const Rdzv__V1__Node *
node_find(const Rdzv__V1__Job *j, uint64_t node_id)
{
	for (size_t i = 0; j != NULL && i < j->n_nodes; i++)
		if (j->nodes[i]->node_id == node_id)
			return j->nodes[i];
	return NULL;
}

/* One line for each thing that differs between |old| and |job|: the
 * watch's callback below prints with it, and tests/fuzz/fuzz_ctl.c. */
void
watch_print_changes(struct ctl *ctl, const Rdzv__V1__Job *old,
    const Rdzv__V1__Job *job, bool removed)
{
	char	 t[32], a[1024], b[1024];
	int64_t	 now;

	now = ctl->fixed_times ? ctl->now_ms : wall_ms();
	fmt_clock_short(t, sizeof(t), now);
	if (removed) {
		printf("%s %s removed\n", t, job->rdzv_id);
		return;
	}
	job_line(a, sizeof(a), old);
	job_line(b, sizeof(b), job);
	if (strcmp(a, b) != 0)
		printf("%s %s %s\n", t, job->rdzv_id, b);
	for (size_t i = 0; i < job->n_nodes; i++) {
		node_line(a, sizeof(a), node_find(old,
		    job->nodes[i]->node_id));
		node_line(b, sizeof(b), job->nodes[i]);
		if (strcmp(a, b) != 0)
			printf("%s %s %s\n", t, job->rdzv_id, b);
	}
}

/* -------------------------------------------------------- terminal mode */

static void
redraw(struct watch *w)
{
	char	*text = NULL, t[32], *line, *next;
	size_t	 len = 0;
	FILE	*f;

	if (!w->ctl->fixed_times)
		w->ctl->now_ms = wall_ms();
	if ((f = open_memstream(&text, &len)) == NULL)
		fatal("watch");
	fprintf(f, "rdzvctl status%s%s --watch  %s  %s  (^C to stop)\n\n",
	    w->rdzv_id ? " " : "", w->rdzv_id ? w->rdzv_id : "",
	    w->ctl->server, fmt_clock_short(t, sizeof(t), w->ctl->now_ms));
	if (w->rdzv_id == NULL)
		jobtext_list(w->ctl, f, w->jobs, w->n_jobs);
	else if (w->n_jobs > 0)
		jobtext_detail(w->ctl, f, w->jobs[0], false);
	else
		fprintf(f, "job %s: no news yet\n", w->rdzv_id);
	fclose(f);

	/* Home, each line cleared to its end, then the rest of the screen:
	 * no flicker from clearing everything first. */
	fputs("\033[H", stdout);
	for (line = text; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		printf("%s\033[K\n", line);
	}
	fputs("\033[J", stdout);
	fflush(stdout);
	free(text);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	redraw(arg);
}

/* Several changes read in one go (the first state of many jobs) make one
 * redraw, after the loop turn that read them. */
static void
redraw_soon(struct watch *w)
{
	struct timeval	now = { 0, 0 };

	if (!evtimer_pending(w->dirty, NULL))
		evtimer_add(w->dirty, &now);
}

/* ------------------------------------------------------------- the call */

static void
stop(struct watch *w, int rc)
{
	if (w->stopping)
		return;
	w->stopping = true;
	w->rc = rc;
	ctl_watch_end(&w->cc, w->base);
}

static void
on_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	struct watch			*w = arg;
	const Rdzv__V1__WatchEvent	*ev =
	    (const Rdzv__V1__WatchEvent *)msg;
	Rdzv__V1__Job			*job;
	ssize_t				 i;

	if (ev->job == NULL || w->stopping)
		return;
	if (!w->live) {
		w->live = w->ever_live = true;
		w->lost_at = 0;
		server_list_ok(&w->ctl->servers);
	}
	job = ctl_job_copy(ev->job);
	ctl_received(w->ctl, &job->base);
	i = job_find(w, job->rdzv_id);
	if (w->ctl->output == CTL_OUTPUT_JSON) {
		json_t *o = json_object();
		json_object_set_new(o, "job", json_job(job,
		    w->rdzv_id != NULL));
		json_object_set_new(o, "removed", json_boolean(ev->removed));
		if (json_emit(o, true) != CTL_EXIT_OK)
			stop(w, CTL_EXIT_OK);
	} else if (!w->tty) {
		watch_print_changes(w->ctl, i >= 0 ? w->jobs[i] : NULL, job,
		    ev->removed);
		/* A reader that went away (| head) ends the watch quietly. */
		if (fflush(stdout) != 0 || ferror(stdout))
			stop(w, CTL_EXIT_OK);
	}
	if (ev->removed) {
		rdzv__v1__job__free_unpacked(job, NULL);
		if (i >= 0)
			job_remove(w, i);
	} else
		job_store(w, i, job);
	if (w->dirty != NULL)
		redraw_soon(w);
}

static void	on_done(struct grpc_ccall *, int, const char *, void *);

static void
start_watch(struct watch *w)
{
	w->live = false;
	w->cc = ctl_watch_start(w->cli, w->rdzv_id, w->ctl->all, on_msg,
	    on_done, w);
}

/* The Watch again, on the server the list now names. */
static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct watch	*w = arg;
	const struct server_entry *cur = server_list_current(&w->ctl->servers);

	if (w->stopping)
		return;
	grpc_client_free(w->cli);
	w->opts.server = cur->ep;
	snprintf(w->ctl->server, sizeof(w->ctl->server), "%s", cur->name);
	if ((w->cli = grpc_client_new(w->base, &w->opts, NULL, NULL)) == NULL)
		fatalx("watch: cannot create a client");
	start_watch(w);
}

/*
 * The Watch ended UNAVAILABLE: true when it starts again elsewhere (or
 * on the same list's next round), false when the watch should end.
 */
static bool
follow(struct watch *w, const char *hint)
{
	struct ctl	*ctl = w->ctl;
	enum server_move move;
	struct timeval	 tv = { 0, NEXT_MS * 1000 };
	uint64_t	 now = mono_ms();
	char		 from[sizeof(ctl->server)];

	if (ctl->servers.n < 2 && hint == NULL)
		return false;
	if (w->live || w->lost_at == 0)
		w->lost_at = now;
	snprintf(from, sizeof(from), "%s", ctl->server);
	move = server_list_failed(&ctl->servers, hint);
	if (move == SERVER_MOVE_ROUND) {
		/* A watch that never began ends like any call. */
		if (!w->ever_live || mono_since(now, w->lost_at) >
		    ctl->client.connect_timeout_ms + LOST_MS)
			return false;
		tv.tv_sec = ROUND_MS / 1000;
		tv.tv_usec = (ROUND_MS % 1000) * 1000;
	}
	if (move == SERVER_MOVE_HINT)
		log_info("following leader hint %s from %s",
		    server_list_current(&ctl->servers)->name, from);
	evtimer_add(w->retry, &tv);
	return true;
}

static void
on_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct watch	*w = arg;

	if (w->stopping)
		return;
	w->cc = NULL;
	if (server_list_should_move(status) && follow(w,
	    grpc_ccall_trailer(cc, SERVER_LEADER_TRAILER)))
		return;
	if (status == GRPC_OK)
		fprintf(stderr, "rdzvctl: %s: rdzvd ended the watch\n",
		    w->ctl->server);
	stop(w, status == GRPC_OK ? CTL_EXIT_OK : ctl_fail(w->ctl, status,
	    message));
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	stop(arg, CTL_EXIT_OK);
}

/* A job watched by id must exist: Watch alone would wait in silence. */
static int
check_job(struct ctl *ctl, const char *id)
{
	Rdzv__V1__Job	*job;
	int		 rc;

	if ((rc = ctl_get_job(ctl, id, 1, &job)) == CTL_EXIT_OK)
		protobuf_c_message_free_unpacked(&job->base, NULL);
	return rc;
}

int
watch_run(struct ctl *ctl, const char *rdzv_id)
{
	struct grpc_client_opts	 o;
	struct tls_ctx		*tls = NULL;
	struct event		*sigint = NULL, *sigterm = NULL;
	struct watch		 w;
	struct timeval		 second = { 1, 0 };
	int			 rc;

	if (rdzv_id != NULL && (rc = check_job(ctl, rdzv_id)) != CTL_EXIT_OK)
		return rc;
	if ((rc = ctl_client_opts(ctl, &o, &tls)) != CTL_EXIT_OK)
		return rc;
	o.keepalive_ms = KEEPALIVE_MS;
	memset(&w, 0, sizeof(w));
	w.ctl = ctl;
	w.rdzv_id = rdzv_id;
	w.tty = isatty(STDOUT_FILENO);
	w.opts = o;
	if ((w.base = event_base_new()) == NULL ||
	    (w.cli = grpc_client_new(w.base, &o, NULL, NULL)) == NULL ||
	    (w.retry = evtimer_new(w.base, retry_cb, &w)) == NULL)
		fatalx("watch: cannot create the event loop");
	sigint = evsignal_new(w.base, SIGINT, signal_cb, &w);
	sigterm = evsignal_new(w.base, SIGTERM, signal_cb, &w);
	if (sigint == NULL || sigterm == NULL || event_add(sigint, NULL) != 0 ||
	    event_add(sigterm, NULL) != 0)
		fatalx("watch: cannot catch signals");
	if (w.tty && ctl->output == CTL_OUTPUT_TEXT) {
		if ((w.tick = event_new(w.base, -1, EV_PERSIST, tick_cb, &w)) ==
		    NULL || event_add(w.tick, &second) != 0 ||
		    (w.dirty = evtimer_new(w.base, tick_cb, &w)) == NULL)
			fatalx("watch: cannot start the clock");
		fputs("\033[H\033[2J", stdout);
		redraw(&w);
	}

	start_watch(&w);
	event_base_dispatch(w.base);

	grpc_client_free(w.cli);
	event_free(w.retry);
	tls_free(tls);
	if (w.tick != NULL)
		event_free(w.tick);
	if (w.dirty != NULL)
		event_free(w.dirty);
	event_free(sigint);
	event_free(sigterm);
	event_base_free(w.base);
	for (size_t i = 0; i < w.n_jobs; i++)
		rdzv__v1__job__free_unpacked(w.jobs[i], NULL);
	free(w.jobs);
	return w.rc;
}
