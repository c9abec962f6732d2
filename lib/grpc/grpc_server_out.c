/*
 * What the server holds for clients that do not read (docs/SECURITY.md,
 * "Limits that keep the service up"). Answers wait in a call's queue
 * until nghttp2 takes them, which it does only as far as the client's
 * HTTP/2 flow-control window allows: a client that never opens its
 * window would have the server hold whatever it asked for. So:
 *
 * - a connection holds at most out_cap bytes before a stream's message
 *   is refused (-ENOBUFS, which the program turns into the end of the
 *   stream), and at most out_cap bytes of unary answers before another
 *   is refused (RESOURCE_EXHAUSTED);
 * - all connections together hold at most out_total_cap: past it, the
 *   connection holding the most (at least OUT_VICTIM_MIN) is closed to
 *   make room, else the new output is refused;
 * - a connection with output waiting that none of it was taken for
 *   OUT_STALL_MS is closed: its window stayed shut (or it read nothing);
 * - once OUT_TRIM_BYTES have been let go since the last time and little
 *   is held, the heap is trimmed, so that a burst's peak is given back.
 */
#include <stdio.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "grpc_server_int.h"

#define OUT_VICTIM_MIN	(64 * 1024)
#define OUT_TRIM_BYTES	(16u << 20)

void
gsrv_out_add(struct grpc_call *call, size_t n)
{
	struct grpc_conn *c = call->conn;

	if (call->unary)
		c->unary_queued += n;
	if (c->queued == 0)
		c->out_progress_ms = mono_ms();
	c->queued += n;
	c->srv->out_total += n;
	if (c->timer != NULL && c->queued == n)
		gsrv_conn_timer_arm(c);
}

void
gsrv_out_sub(struct grpc_call *call, size_t n, int sent)
{
	struct grpc_conn *c = call->conn;
	struct grpc_server *srv = c->srv;

	if (call->unary)
		c->unary_queued -= n;
	c->queued -= n;
	srv->out_total -= n;
	if (sent)
		c->out_progress_ms = mono_ms();
	srv->out_released += n;
	if (srv->out_released >= OUT_TRIM_BYTES &&
	    srv->out_total < srv->opts.out_cap) {
		srv->out_released = 0;
#ifdef __GLIBC__
		malloc_trim(0);
#endif
	}
}

/*
 * Drops what |v| holds now and marks it to be closed at the end of the
 * turn (flush_cb): closing it here could free calls whose owner is
 * iterating over them, but its memory must come back at once, or a turn
 * that serves many such clients would hold all of theirs.
 */
static void
out_kill(struct grpc_conn *v, size_t total)
{
	struct grpc_call *call;
	struct outbuf *ob;

	gsrv_conn_reason(v, "its client had not read %zu bytes of answers "
	    "when the server's output budget (%zu bytes) ran out: closed to "
	    "make room", v->queued, total);
	v->out_dying = 1;
	v->srv->out_evicted++;
	TAILQ_FOREACH(call, &v->calls, entry)
		while ((ob = STAILQ_FIRST(&call->out)) != NULL) {
			STAILQ_REMOVE_HEAD(&call->out, entry);
			gsrv_out_sub(call, ob->len - ob->off, 0);
			free(ob->buf);
			free(ob);
		}
	gsrv_conn_schedule_flush(v);
}

int
gsrv_out_room(struct grpc_call *call, char *why, size_t whylen)
{
	struct grpc_conn *c = call->conn;
	struct grpc_server *srv = c->srv;
	size_t cap = srv->opts.out_total_cap;
	size_t q = call->unary ? c->unary_queued : gsrv_conn_queued(c);
	struct grpc_conn *v, *best = NULL;

	if (c->out_dying) {
		snprintf(why, whylen, "rdzvd: this connection is being closed: "
		    "its client did not read its answers");
		return -1;
	}
	if (q >= srv->opts.out_cap) {
		snprintf(why, whylen, "rdzvd: %zu bytes of answers on this "
		    "connection are not read yet (its flow-control window is "
		    "closed?), the most a connection may hold is %zu; read "
		    "them and try again", q, srv->opts.out_cap);
		return -1;
	}
	if (srv->out_total < cap)
		return 0;
	TAILQ_FOREACH(v, &srv->conns, entry)
		if (v != c && !v->out_dying && (best == NULL ||
		    v->queued > best->queued))
			best = v;
	if (best != NULL && best->queued >= OUT_VICTIM_MIN &&
	    best->queued > c->queued) {
		out_kill(best, cap);
		return 0;
	}
	snprintf(why, whylen, "rdzvd: its output budget (%zu bytes) is held "
	    "by answers clients have not read; try again", cap);
	return -1;
}

int
gsrv_out_stalled(struct grpc_conn *c, uint64_t now, uint64_t *due)
{
	*due = 0;
	if (c->queued == 0)
		return 0;
	if (now - c->out_progress_ms >= OUT_STALL_MS) {
		gsrv_conn_closef(c, "its client took none of the %zu bytes of "
		    "answers waiting for it for %u ms (its flow-control window "
		    "stayed closed)", c->queued, OUT_STALL_MS);
		return -1;
	}
	*due = c->out_progress_ms + OUT_STALL_MS;
	return 0;
}
