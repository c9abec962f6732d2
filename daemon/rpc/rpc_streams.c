/*
 * The Join stream of every connected node. A stream carries the node's
 * messages from the core; its end (the agent's connection closed) starts the
 * node's reconnect grace in the core. A connection that stays silent (no
 * frame, not even a PING answer) for the job's lease_ttl ends the lease at
 * once (SPEC §3). rdzvd PINGs connections silent for --keepalive, so the
 * silence that counts is never shorter than twice that interval.
 *
 * A connection that failed after such silence (TCP_USER_TIMEOUT on our
 * unanswered PINGs: a link or host gone without a FIN) is no closed
 * connection: its node is silent, not gone, and its stream stays here
 * without a call until the node resumes or its lease, counted from its
 * last frame, ends in a sweep like any silent stream's. So a switch that
 * takes several nodes, or rdzvd's own link, is judged by one rule.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "log.h"
#include "rdzvd.h"
#include "rpc_int.h"

#define SWEEP_MS	500

struct stream {
	struct grpc_call	*call;		/* NULL: its connection timed out */
	uint64_t		 node_id;
	uint64_t		 seen;		/* mono ms, when call is NULL */
};

static struct hash	 streams;
static size_t		 n_timed_out;	/* streams without a call */
static struct event	*sweep_ev;

static void	stream_end(struct stream *, int, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));

static int
match_stream(const void *item, const void *key)
{
	return ((const struct stream *)item)->node_id == *(const uint64_t *)key;
}

static struct stream *
find(uint64_t node_id)
{
	return hash_find(&streams, hash_u64(node_id), match_stream, &node_id);
}

/*
 * A node's stream went away while a commit was in flight: the core hears
 * of it when the commit is durable (turn_hold_fn), unless its agent came
 * back meanwhile and the node has a stream again.
 */
static void
disconnected_later(uint64_t node_id)
{
	struct core_node *node;

	if (find(node_id) != NULL ||
	    (node = core_node_find(rdzvd.core, node_id)) == NULL)
		return;
	log_debug("job %s: node %llu disconnected", node->job->rdzv_id,
	    (unsigned long long)node_id);
	core_disconnect(rdzvd.core, turn_now(), node);
	turn_schedule();
}

/*
 * Every Join stream ends here: it leaves the table, its call is finished
 * with |status| and the message (finishing a call the agent's side already
 * ended does nothing) and the stream is freed. With |gone| the core hears
 * that the node went away, which starts its reconnect grace; without, the
 * caller has told the core what happened, or nothing happened to the node.
 */
static void
stream_end(struct stream *s, int gone, int status, const char *fmt, ...)
{
	struct core_node *node;
	char msg[256];
	va_list ap;

	hash_remove(&streams, hash_u64(s->node_id), s);
	if (s->call == NULL)
		n_timed_out--;
	else {
		grpc_call_on_close(s->call, NULL, NULL);
		if (fmt != NULL) {
			va_start(ap, fmt);
			vsnprintf(msg, sizeof(msg), fmt, ap);
			va_end(ap);
			grpc_call_finish(s->call, status, "%s", msg);
		} else
			grpc_call_finish(s->call, status, NULL);
	}
	if (gone && turn_sealed())
		turn_hold_fn(disconnected_later, s->node_id);
	else if (gone && (node = core_node_find(rdzvd.core, s->node_id)) !=
	    NULL) {
		log_debug("job %s: node %llu disconnected", node->job->rdzv_id,
		    (unsigned long long)s->node_id);
		core_disconnect(rdzvd.core, turn_now(), node);
		turn_schedule();
	}
	free(s);
}

/* When (mono ms) the connection of |s| was last heard from. */
static uint64_t
stream_seen(const struct stream *s)
{
	if (s->call == NULL)
		return s->seen;
	return grpc_conn_last_seen_ms(grpc_call_conn(s->call));
}

/*
 * The agent's side went away: its connection, a cancel, a deadline. A
 * connection that timed out in silence leaves the stream without a call.
 */
static void
stream_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct stream *s = arg;
	uint64_t now = mono_ms(), seen = stream_seen(s);

	if (now > seen && now - seen >= 2ULL * rdzvd.cfg.keepalive_ms) {
		log_info("node %llu: its connection failed after %.1f s of "
		    "silence; its lease runs from its last frame",
		    (unsigned long long)s->node_id, (now - seen) / 1000.0);
		s->call = NULL;
		s->seen = seen;
		n_timed_out++;
		return;
	}
	stream_end(s, 1, GRPC_CANCELLED, NULL);
}

void
rpc_streams_attach(struct core_node *node, struct grpc_call *call)
{
	struct stream *s = find(node->node_id);

	/* A resume replaces the node's older stream. */
	if (s != NULL)
		stream_end(s, 0, GRPC_ABORTED, "node %llu resumed on another "
		    "stream", (unsigned long long)node->node_id);
	s = xcalloc(1, sizeof(*s));
	s->call = call;
	s->node_id = node->node_id;
	if (hash_insert(&streams, hash_u64(s->node_id), s) != 0)
		fatal("rpc_streams_attach");
	grpc_call_on_close(call, stream_closed, s);
}

void
rpc_streams_send(struct core_node *node, const struct core_msg *msg)
{
	struct stream *s = find(node->node_id);
	Rdzv__V1__JoinEvent ev = RDZV__V1__JOIN_EVENT__INIT;
	struct convert_arena a = { 0 };

	if (s == NULL)
		return;
	if (s->call == NULL) {
		/* Silent: it is told its place afresh when it resumes. */
		if (msg->kind == CORE_MSG_LEFT || msg->kind == CORE_MSG_CLOSED ||
		    msg->kind == CORE_MSG_FAILED ||
		    msg->kind == CORE_MSG_EVICTED || msg->kind == CORE_MSG_LOST)
			stream_end(s, 1, GRPC_OK, NULL);
		return;
	}
	if (msg->kind == CORE_MSG_LEFT) {
		stream_end(s, 1, GRPC_OK, NULL);
		return;
	}
	if (msg->kind == CORE_MSG_LOST) {
		/* As a refused resume: its agent stops its workers and joins
		 * again as a new node (rule 17). */
		stream_end(s, 1, GRPC_NOT_FOUND, "%s", msg->reason);
		return;
	}
	convert_msg(&a, node, msg, &ev);
	int rc = grpc_call_send(s->call, &ev.base);
	convert_free(&a);
	if (rc == -ENOBUFS) {
		/*
		 * It does not read: its connection holds as much output as
		 * it may (grpc_server_opts.out_cap). End the stream rather
		 * than queue without limit; on resume the node is told its
		 * place afresh.
		 */
		stream_end(s, 1, GRPC_RESOURCE_EXHAUSTED, "node %llu does not "
		    "read its stream; resume to continue",
		    (unsigned long long)node->node_id);
		return;
	}
	switch (msg->kind) {
	case CORE_MSG_CLOSED:
	case CORE_MSG_FAILED:
	case CORE_MSG_EVICTED:
		stream_end(s, 1, GRPC_OK, NULL);
		break;
	default:
		break;
	}
}

void
rpc_streams_forget(uint64_t node_id)
{
	struct stream *s = find(node_id);

	if (s != NULL)
		stream_end(s, 0, GRPC_NOT_FOUND, "node %llu no longer exists",
		    (unsigned long long)node_id);
}

size_t
rpc_streams_count(void)
{
	return streams.n - n_timed_out;
}

/*
 * The core records a node's calls; a connected node is also heard from on
 * its HTTP/2 connection (frames, PING answers), which is fresher.
 */
int64_t
rpc_streams_last_seen_ms(const struct core_node *node, struct core_now now)
{
	struct stream *s;
	uint64_t seen;
	int64_t wall;

	if (!node->connected || (s = find(node->node_id)) == NULL)
		return node->last_seen_ms;
	/* The connection's time is plain monotonic, not the core's. */
	uint64_t mono = mono_ms();
	seen = stream_seen(s);
	if (seen > mono)
		seen = mono;
	wall = now.wall_ms - (int64_t)(mono - seen);
	return wall > node->last_seen_ms ? wall : node->last_seen_ms;
}

/*
 * rdzvd's own outage (SPEC §4 rule 13): when a lease ends while rdzvd has
 * heard from none of its two or more nodes, of any job, for at least that
 * lease, it is rdzvd's network or host that failed, not every node at
 * once. No lease ends then; once any node is heard again, every silence
 * counts from that moment, as after a daemon restart (rule 11). One node
 * alone cannot tell the two apart: its lease ends as usual.
 */
static bool	 outage;
static uint64_t	 outage_start;	/* mono ms the outage was noticed */
static uint64_t	 outage_end;	/* mono ms a node was heard again */

/* True while the sweep holds every lease for rdzvd's own outage. */
static bool
outage_holds(bool nobody, size_t total, uint64_t now)
{
	if (nobody) {
		if (!outage) {
			outage = true;
			outage_start = now;
			log_warnx("no node of any job was heard for its lease "
			    "(%zu connections silent): rdzvd's own network or "
			    "host failed, not the nodes; the jobs are held for "
			    "their nodes to resume", total);
		}
		return true;
	}
	if (outage) {
		outage = false;
		outage_end = now;
		log_warnx("a node was heard again after %.1f s of rdzvd's own "
		    "outage; every silent node has a whole lease from now",
		    mono_since(now, outage_start) / 1000.0);
	}
	return false;
}

/*
 * Ends the leases of nodes whose connection has been silent too long, all
 * in one call to the core, so that a switch taking several nodes is one
 * failure per job.
 */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = mono_ms(), floor = 2ULL * rdzvd.cfg.keepalive_ms;
	uint64_t stall = stall_end_ms();
	struct core_node **lost = NULL;
	uint64_t *silent = NULL, heard = 0, min_ttl = UINT64_MAX;
	size_t n = 0, cap = 0, total = 0;

	/* The core is sealed while a commit is in flight (turn.c); the next
	 * sweep after it judges, and a slow commit counts for no lease. */
	if (turn_sealed())
		return;

	if (stall < outage_end)
		stall = outage_end;
	for (size_t i = 0; i < streams.cap; i++) {
		struct stream *s = streams.slots[i].item;
		if (s == NULL)
			continue;
		struct core_node *node = core_node_find(rdzvd.core, s->node_id);
		if (node == NULL)
			continue;
		total++;
		uint64_t ttl = node->job->settings.lease_ttl_ms;
		uint64_t seen = stream_seen(s);
		/* Silence counts only while rdzvd could read. */
		if (seen < stall)
			seen = stall;
		if (seen > heard)
			heard = seen;
		if (ttl < floor)
			ttl = floor;
		if (now <= seen || now - seen <= ttl)
			continue;
		if (ttl < min_ttl)
			min_ttl = ttl;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			lost = xreallocarray(lost, cap, sizeof(*lost));
			silent = xreallocarray(silent, cap, sizeof(*silent));
		}
		silent[n] = now - seen;
		lost[n++] = node;
	}
	/* Heard from nobody for the shortest lease that would end. The
	 * sweep that ends an outage ends no lease either: the silences above
	 * were measured from before it, and every silent node now has a
	 * whole lease from this moment to reconnect (the next sweeps count
	 * from outage_end). */
	bool held = outage;
	if (outage_holds(total >= 2 && n > 0 && now > heard &&
	    now - heard > min_ttl, total, now) || held)
		n = 0;
	/* The others fall silent too, just not yet past their leases (their
	 * last frames came up to a keepalive after this one's): the next
	 * sweeps tell rdzvd's own outage from this node's loss. A live
	 * node's keepalive is never older than the floor. */
	if (n > 0 && total >= 2 && now > heard && now - heard > floor)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		struct core_node *node = lost[i];
		uint32_t ttl = node->job->settings.lease_ttl_ms;
		log_info("job %s: node %llu: connection silent, lease ended",
		    node->job->rdzv_id, (unsigned long long)node->node_id);
		stream_end(find(node->node_id), 0, GRPC_UNAVAILABLE,
		    "connection silent for longer than the lease (%u ms)", ttl);
	}
	if (n > 0) {
		core_leases_lost(rdzvd.core, turn_now(), lost, silent, n);
		turn_schedule();
	}
	free(lost);
	free(silent);
}

void
rpc_streams_init(void)
{
	struct timeval tv = { 0, SWEEP_MS * 1000 };

	hash_init(&streams);
	n_timed_out = 0;
	outage = false;
	outage_start = outage_end = 0;
	sweep_ev = event_new(rdzvd.base, -1, EV_PERSIST, sweep_cb, NULL);
	if (sweep_ev == NULL || event_add(sweep_ev, &tv) != 0)
		fatalx("rpc_streams_init: cannot create the sweep timer");
}

void
rpc_streams_shutdown(const char *why)
{
	/*
	 * Not a disconnect: the node keeps its place and resumes when the
	 * daemon is back (SPEC §4 rule 11). Removal may shift a later entry
	 * into the slot just emptied but never fills an empty slot: end what
	 * each slot holds until it is empty, and those behind stay empty.
	 */
	for (size_t i = 0; i < streams.cap; i++)
		while (streams.slots[i].item != NULL) {
			struct stream *s = streams.slots[i].item;
			if (s->call != NULL)
				role_hint(s->call);
			stream_end(s, 0, GRPC_UNAVAILABLE, "%s", why);
		}
	if (sweep_ev != NULL)
		event_del(sweep_ev);
}

void
rpc_streams_free(void)
{
	for (size_t i = 0; i < streams.cap; i++) {
		struct stream *s = streams.slots[i].item;
		if (s != NULL) {
			if (s->call != NULL)
				grpc_call_on_close(s->call, NULL, NULL);
			free(s);
		}
	}
	hash_free(&streams);
	if (sweep_ev != NULL)
		event_free(sweep_ev);
	sweep_ev = NULL;
}
