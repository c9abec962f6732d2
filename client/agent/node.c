/*
 * The life of one node in a job, the same whether rdzv-agent runs its
 * workers (join, agent.c) or a launcher does (coproc, cmd_coproc.c): the
 * event loop, the session with rdzvd and the reports that ride on it, the
 * step that decides again on the next loop turn, the termination signals,
 * and the exit: decided once, with a leave when it is a planned
 * departure, and a deadline after which whatever still runs is dropped.
 * What differs between the two comes in through struct node_hooks. Both
 * check what rdzvd assigns with assignment_check().
 */
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "text.h"

void
node_names(struct node *n, const char *host)
{
	struct offer	*o = &n->offer;

	if (gethostname(o->machine, sizeof(o->machine)) != 0)
		snprintf(o->machine, sizeof(o->machine), "localhost");
	o->machine[sizeof(o->machine) - 1] = '\0';
	snprintf(o->hostname, sizeof(o->hostname), "%s",
	    host != NULL ? host : o->machine);
}

static void
step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct node *n = arg;

	n->hooks.step(n->hooks.arg);
}

void
node_step(struct node *n)
{
	if (n->step_ev != NULL)
		event_active(n->step_ev, EV_TIMEOUT, 0);
}

/* The last resort of an exit that takes too long. */
static void
quit_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct node *n = arg;

	log_warnx("still not done %.0f s after deciding to exit: exiting now",
	    (double)n->quit_ms / 1000.0);
	if (n->hooks.deadline != NULL)
		n->hooks.deadline(n->hooks.arg);
	event_base_loopbreak(n->base);
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct node *n = arg;

	n->hooks.signal(n->hooks.arg, (int)sig);
}

/* A report's call ended: an exit may have waited for it. */
static void
on_report_done(void *arg)
{
	node_step(arg);
}

int
node_setup(struct node *n, struct agent_opts *o, const struct node_hooks *h,
    const struct session_events *events, uint32_t quit_ms, char *err,
    size_t len)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct report_events rev = { .done = on_report_done, .arg = n };

	n->opts = o;
	n->hooks = *h;
	n->quit_ms = quit_ms;
	if ((n->base = event_base_new()) == NULL ||
	    (n->step_ev = event_new(n->base, -1, 0, step_cb, n)) == NULL ||
	    (n->quit_ev = evtimer_new(n->base, quit_deadline_cb, n)) == NULL) {
		snprintf(err, len, "cannot create the event loop");
		return -1;
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		n->sig_ev[i] = evsignal_new(n->base, sigs[i], signal_cb, n);
		if (n->sig_ev[i] == NULL ||
		    event_add(n->sig_ev[i], NULL) != 0) {
			snprintf(err, len, "cannot handle signals");
			return -1;
		}
	}
	if (report_init(&n->report, n->base, &n->session, &n->offer, o->id,
	    &rev) != 0) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	return session_init(&n->session, n->base, o, &n->offer, events, err,
	    len);
}

int
node_run(struct node *n)
{
	session_start(&n->session);
	event_base_dispatch(n->base);
	return n->exit_status;
}

void
node_quit(struct node *n, int status, bool leave, const char *fmt, ...)
{
	struct timeval tv = { (time_t)(n->quit_ms / 1000),
	    (suseconds_t)(n->quit_ms % 1000) * 1000 };
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	/* The first decision to exit is the one. */
	if (n->quitting) {
		log_debug("also: %s", msg);
		return;
	}
	if (status == AGENT_EXIT_OK || status >= 128)
		log_info("%s", msg);
	else
		log_error("%s", msg);
	n->quitting = true;
	n->exit_status = status;
	if (n->hooks.quitting != NULL)
		n->hooks.quitting(n->hooks.arg);
	session_quit(&n->session);
	report_quit(&n->report);
	if (n->quit_ev != NULL)
		evtimer_add(n->quit_ev, &tv);
	/* Leave at once rather than after the workers stopped: the others'
	 * workers, which lose their peers now, are then already in a round
	 * without us, and their failures are not counted as restarts. */
	if (leave)
		report_leave(&n->report, msg);
	node_step(n);
}

void
node_close(struct node *n)
{
	n->quitting = true;
	report_quit(&n->report);
	/* Cancels the calls in flight: their callbacks see the session
	 * ended and the reports quitting. */
	session_free(&n->session);
	report_free(&n->report);
}

void
node_free(struct node *n)
{
	for (size_t i = 0; i < sizeof(n->sig_ev) / sizeof(n->sig_ev[0]); i++)
		if (n->sig_ev[i] != NULL)
			event_free(n->sig_ev[i]);
	if (n->step_ev != NULL)
		event_free(n->step_ev);
	if (n->quit_ev != NULL)
		event_free(n->quit_ev);
	if (n->base != NULL)
		event_base_free(n->base);
	memset(n, 0, sizeof(*n));
}

/* ---------------------------------------------------------- assignments */

/* What MASTER_ADDR can hold (struct assignment, env.h). */
#define ADDR_CAP	sizeof(((struct assignment *)0)->master_addr)

/*
 * "node rank" (the group rank) beside the session's "node id" (rdzvd's
 * counter across jobs): two numbers a reader must not mix up.
 */
void
assignment_log(const Rdzv__V1__Assignment *pb)
{
	log_info("generation %llu: node rank %u of %u node%s, worker ranks %u "
	    "to %u of %u, master %s:%u, restart %u of max %u",
	    (unsigned long long)pb->generation, pb->group_rank,
	    pb->group_world_size, plural(pb->group_world_size), pb->base_rank,
	    pb->base_rank + pb->local_world_size - 1, pb->world_size,
	    pb->master_addr, pb->master_port, pb->restart_count,
	    pb->max_restarts);
}

/*
 * An assignment must fit what this node offered and describe a world at
 * all; a server that says otherwise is broken or lying, and its numbers
 * would fork workers or hand out ranks (issue 12). |gen_seen| is the
 * newest generation seen so far, |nproc| the workers offered at the join.
 * Returns 0, or -1 with what was wrong in |why|. join (agent.c) and
 * coproc (cmd_coproc.c) check with it.
 */
int
assignment_check(const char *job_id, uint32_t nproc, uint64_t gen_seen,
    const Rdzv__V1__Assignment *pb, char *why, size_t len)
{
	uint64_t end = (uint64_t)pb->base_rank + pb->local_world_size;

	if (pb->generation < gen_seen) {
		snprintf(why, len, "generation %llu after generation %llu: "
		    "generations only grow", (unsigned long long)pb->generation,
		    (unsigned long long)gen_seen);
		return -1;
	}
	if (pb->rdzv_id != NULL && pb->rdzv_id[0] != '\0' &&
	    strcmp(pb->rdzv_id, job_id) != 0) {
		snprintf(why, len, "an assignment for job '%.*s', not %s",
		    (int)utf8_prefix(pb->rdzv_id, 128), pb->rdzv_id, job_id);
		return -1;
	}
	if (pb->local_world_size > nproc) {
		snprintf(why, len, "generation %llu asks for %u worker%s; this "
		    "node offered %u", (unsigned long long)pb->generation,
		    pb->local_world_size, plural(pb->local_world_size), nproc);
		return -1;
	}
	if (end > pb->world_size) {
		snprintf(why, len, "generation %llu: ranks %u to %llu are "
		    "outside a world of %u", (unsigned long long)pb->generation,
		    pb->base_rank, (unsigned long long)end - 1, pb->world_size);
		return -1;
	}
	/* The workers are told these as MASTER_ADDR and MASTER_PORT: a port
	 * no socket can have, or an address cut short, would only fail
	 * later and somewhere else. */
	if (pb->master_port == 0 || pb->master_port > 65535) {
		snprintf(why, len, "generation %llu: master port %u is not a "
		    "TCP port (1 to 65535)", (unsigned long long)pb->generation,
		    pb->master_port);
		return -1;
	}
	if (pb->master_addr == NULL || pb->master_addr[0] == '\0' ||
	    strlen(pb->master_addr) >= ADDR_CAP) {
		snprintf(why, len, "generation %llu: master address of %zu "
		    "bytes (1 to %zu)", (unsigned long long)pb->generation,
		    pb->master_addr != NULL ? strlen(pb->master_addr) : 0,
		    ADDR_CAP - 1);
		return -1;
	}
	if (pb->group_rank >= pb->group_world_size) {
		snprintf(why, len, "generation %llu: node rank %u is outside a "
		    "group of %u", (unsigned long long)pb->generation,
		    pb->group_rank, pb->group_world_size);
		return -1;
	}
	return 0;
}
