/*
 * What waits for the commit in flight (turn.c, issue 42): calls that would
 * change the core while its last changes are on their way to the disk, and
 * reads of something not yet durable. Each is kept with its request packed
 * again (the server frees the decoded one when the handler returns) and
 * runs, in the order it came, once the commit is durable and its output is
 * out: the held writes then form the next group commit. A call whose
 * client goes away (or whose deadline passes) meanwhile is forgotten.
 * Besides calls, a stream's end is held (turn_hold_fn): it would mark its
 * node disconnected.
 */
#include <sys/queue.h>

#include <stdlib.h>

#include "log.h"
#include "rdzvd.h"
#include "xmalloc.h"

struct held {
	struct grpc_call			*call;	/* NULL: a function */
	grpc_handler_fn				 fn;
	void					*arg;
	const ProtobufCMessageDescriptor	*desc;
	uint8_t					*buf;
	size_t					 len;
	void					(*later)(uint64_t);
	uint64_t				 later_arg;
	uint64_t				 round;	/* of turn_release */
	bool					 read;	/* changes nothing */
	TAILQ_ENTRY(held)			 entry;
};
TAILQ_HEAD(helds, held);

static struct helds	 held = TAILQ_HEAD_INITIALIZER(held);
static uint64_t		 release_round;	/* turn_release()s so far */
static size_t		 n_held;

static void
held_free(struct held *h)
{
	TAILQ_REMOVE(&held, h, entry);
	n_held--;
	free(h->buf);
	free(h);
}

static void
held_gone(struct grpc_call *call, int cancelled, void *arg)
{
	held_free(arg);
}

static void
hold(struct grpc_call *call, grpc_handler_fn fn, const ProtobufCMessage *req,
    void *arg, bool read)
{
	struct held *h = xcalloc(1, sizeof(*h));

	h->read = read;
	h->call = call;
	h->fn = fn;
	h->arg = arg;
	h->desc = req->descriptor;
	h->len = protobuf_c_message_get_packed_size(req);
	h->buf = xmalloc(h->len > 0 ? h->len : 1);
	protobuf_c_message_pack(req, h->buf);
	h->round = release_round;
	TAILQ_INSERT_TAIL(&held, h, entry);
	n_held++;
	grpc_call_on_close(call, held_gone, h);
}

void
turn_hold(struct grpc_call *call, grpc_handler_fn fn,
    const ProtobufCMessage *req, void *arg)
{
	hold(call, fn, req, arg, false);
}

void
turn_hold_read(struct grpc_call *call, grpc_handler_fn fn,
    const ProtobufCMessage *req, void *arg)
{
	hold(call, fn, req, arg, true);
}

void
turn_hold_fn(void (*fn)(uint64_t), uint64_t arg)
{
	struct held *h = xcalloc(1, sizeof(*h));

	h->later = fn;
	h->later_arg = arg;
	h->round = release_round;
	TAILQ_INSERT_TAIL(&held, h, entry);
	n_held++;
}

/* Runs |h| and forgets it. */
static void
run(struct held *h)
{
	struct grpc_call *call = h->call;
	ProtobufCMessage *req;

	TAILQ_REMOVE(&held, h, entry);
	n_held--;
	if (call == NULL) {
		h->later(h->later_arg);
		free(h);
		return;
	}
	grpc_call_on_close(call, NULL, NULL);
	req = protobuf_c_message_unpack(h->desc, NULL, h->len, h->buf);
	if (req == NULL)
		grpc_call_finish(call, GRPC_INTERNAL, "rdzvd could not decode "
		    "again a request it held while a commit was in flight");
	else {
		h->fn(call, req, h->arg);
		protobuf_c_message_free_unpacked(req, NULL);
	}
	free(h->buf);
	free(h);
}

void
turn_release(void)
{
	struct held *h, *next;
	uint64_t upto = release_round++;

	/*
	 * The reads first: the core holds only what is durable now, and a
	 * read that waited for that is answered before the writes held
	 * beside it change the core again (under a steady stream of writes
	 * it would otherwise wait for ever). Then those held before this
	 * release, in order.
	 */
	for (h = TAILQ_FIRST(&held); h != NULL; h = next) {
		next = TAILQ_NEXT(h, entry);
		if (h->round > upto)
			break;
		if (!h->read)
			continue;
		/* Running it may end calls; none of those is held. */
		run(h);
	}
	while (!turn_sealed() && (h = TAILQ_FIRST(&held)) != NULL &&
	    h->round <= upto)
		run(h);
}

void
turn_refuse_held(const char *why)
{
	struct held *h;

	while ((h = TAILQ_FIRST(&held)) != NULL) {
		if (h->call == NULL) {
			/* The core is going (stepping down, shutting down):
			 * a stream's end no longer matters to it. */
			held_free(h);
			continue;
		}
		struct grpc_call *call = h->call;
		grpc_call_on_close(call, NULL, NULL);
		held_free(h);
		role_hint(call);
		grpc_call_finish(call, GRPC_UNAVAILABLE, "%s", why);
	}
}

size_t
turn_held_count(void)
{
	return n_held;
}
