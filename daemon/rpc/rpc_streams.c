/*
 * The Join stream of every connected node. A stream carries the node's
 * messages from the core; its end (the agent's connection closed) starts the
 * node's reconnect grace in the core. A connection that stays silent (no
 * frame, not even a PING answer) for the job's lease_ttl ends the lease at
 * once (SPEC §3). rdzvd PINGs connections silent for --keepalive, so the
 * silence that counts is never shorter than twice that interval.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "log.h"
#include "rdzvd.h"

#define SWEEP_MS	500

struct stream {
	struct grpc_call	*call;
	uint64_t		 node_id;
};

static struct hash	 streams;
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
	grpc_call_on_close(s->call, NULL, NULL);
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		grpc_call_finish(s->call, status, "%s", msg);
	} else
		grpc_call_finish(s->call, status, NULL);
	if (gone && (node = core_node_find(rdzvd.core, s->node_id)) != NULL) {
		log_debug("job %s: node %llu disconnected", node->job->rdzv_id,
		    (unsigned long long)s->node_id);
		core_disconnect(rdzvd.core, turn_now(), node);
		turn_schedule();
	}
	free(s);
}

/* The agent's side went away: its connection, a cancel, a deadline. */
static void
stream_closed(struct grpc_call *call, int cancelled, void *arg)
{
	stream_end(arg, 1, GRPC_CANCELLED, NULL);
}

void
streams_attach(struct core_node *node, struct grpc_call *call)
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
		fatal("streams_attach");
	grpc_call_on_close(call, stream_closed, s);
}

void
streams_send(struct core_node *node, const struct core_msg *msg)
{
	struct stream *s = find(node->node_id);
	Rdzv__V1__JoinEvent ev = RDZV__V1__JOIN_EVENT__INIT;
	struct arena a = { 0 };

	if (s == NULL)
		return;
	if (msg->kind == CORE_MSG_LEFT) {
		stream_end(s, 1, GRPC_OK, NULL);
		return;
	}
	msg_to_pb(&a, node, msg, &ev);
	int rc = grpc_call_send(s->call, &ev.base);
	arena_free(&a);
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
streams_forget(uint64_t node_id)
{
	struct stream *s = find(node_id);

	if (s != NULL)
		stream_end(s, 0, GRPC_NOT_FOUND, "node %llu no longer exists",
		    (unsigned long long)node_id);
}

size_t
streams_count(void)
{
	return streams.n;
}

/*
 * The core records a node's calls; a connected node is also heard from on
 * its HTTP/2 connection (frames, PING answers), which is fresher.
 */
int64_t
streams_last_seen_ms(const struct core_node *node, struct core_now now)
{
	struct stream *s;
	uint64_t seen;
	int64_t wall;

	if (!node->connected || (s = find(node->node_id)) == NULL)
		return node->last_seen_ms;
	/* The connection's time is plain monotonic, not the core's. */
	uint64_t mono = mono_ms();
	seen = grpc_conn_last_seen_ms(grpc_call_conn(s->call));
	if (seen > mono)
		seen = mono;
	wall = now.wall_ms - (int64_t)(mono - seen);
	return wall > node->last_seen_ms ? wall : node->last_seen_ms;
}

/* Ends the leases of nodes whose connection has been silent too long. */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = mono_ms(), floor = 2ULL * rdzvd.cfg.keepalive_ms;
	uint64_t stall = stall_end_ms();
	uint64_t *lost = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < streams.cap; i++) {
		struct stream *s = streams.slots[i].item;
		if (s == NULL)
			continue;
		struct core_node *node = core_node_find(rdzvd.core, s->node_id);
		if (node == NULL)
			continue;
		uint64_t ttl = node->job->settings.lease_ttl_ms;
		uint64_t seen = grpc_conn_last_seen_ms(grpc_call_conn(s->call));
		/* Silence counts only while rdzvd could read. */
		if (seen < stall)
			seen = stall;
		if (ttl < floor)
			ttl = floor;
		if (now <= seen || now - seen <= ttl)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			lost = xreallocarray(lost, cap, sizeof(*lost));
		}
		lost[n++] = s->node_id;
	}
	for (size_t i = 0; i < n; i++) {
		struct core_node *node = core_node_find(rdzvd.core, lost[i]);
		uint32_t ttl = node->job->settings.lease_ttl_ms;
		log_info("job %s: node %llu: connection silent, lease ended",
		    node->job->rdzv_id, (unsigned long long)lost[i]);
		stream_end(find(lost[i]), 0, GRPC_UNAVAILABLE, "connection "
		    "silent for longer than the lease (%u ms)", ttl);
		core_lease_lost(rdzvd.core, turn_now(), node);
	}
	free(lost);
	if (n > 0)
		turn_schedule();
}

void
streams_init(void)
{
	struct timeval tv = { 0, SWEEP_MS * 1000 };

	hash_init(&streams);
	sweep_ev = event_new(rdzvd.base, -1, EV_PERSIST, sweep_cb, NULL);
	if (sweep_ev == NULL || event_add(sweep_ev, &tv) != 0)
		fatalx("streams_init: cannot create the sweep timer");
}

void
streams_shutdown(const char *why)
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
			role_hint(s->call);
			stream_end(s, 0, GRPC_UNAVAILABLE, "%s", why);
		}
	if (sweep_ev != NULL)
		event_del(sweep_ev);
}

void
streams_free(void)
{
	for (size_t i = 0; i < streams.cap; i++) {
		struct stream *s = streams.slots[i].item;
		if (s != NULL) {
			grpc_call_on_close(s->call, NULL, NULL);
			free(s);
		}
	}
	hash_free(&streams);
	if (sweep_ev != NULL)
		event_free(sweep_ev);
	sweep_ev = NULL;
}
