/*
 * Leases kept alive over a Lease.KeepAlive stream (lib/etcd/etcd.h): granted
 * with a unary LeaseGrant, renewed every TTL/3 on a bidi stream that moves
 * to the next member when its member fails, lost when etcd says so or when
 * no renewal has been answered for a TTL.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "etcd_int.h"

/* A stream that ended is opened again this soon (not at once: when every
 * member refuses at once, that would spin until the lease is lost). */
#define REOPEN_MS	200
/* Send times of keepalives not yet answered that are remembered. */
#define SENT_RING	16
/* A renewal unanswered this long: its member is presumed hung or cut off
 * from the cluster's leader, and the stream moves to the next one (a
 * healthy etcd answers in milliseconds). */
#define ANSWER_MS	1000
#define ANSWER_GRACE_MS	100

struct etcd_lease {
	struct etcd *ec;
	TAILQ_ENTRY(etcd_lease) entry;
	int64_t ttl_req;
	int64_t ttl;			/* granted, seconds */
	int64_t id;
	etcd_lease_fn cb;
	void *arg;

	struct etcd_call *grant;
	uint64_t grant_sent;		/* mono_ms */
	struct grpc_ccall *ka;		/* the KeepAlive stream */
	size_t ka_member;
	int closing_ka;			/* we are cancelling ka ourselves */
	struct event *tick;		/* every TTL/3: renew */
	struct event *expire;		/* a TTL after the last renewal
					   answered was sent */
	struct event *reopen;
	struct event *answer;		/* the oldest renewal unanswered */
	int answer_grace;		/* its timer ran late once */
	uint64_t sent[SENT_RING];	/* send times, oldest first */
	size_t n_sent, sent_head;
	char last_err[512];		/* why the stream ended last */
	int lost;
};

static void
timer_in(struct event *ev, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(ev, &tv);
}

/* Ends the KeepAlive stream without its done callback acting on it. */
static void
ka_close(struct etcd_lease *l)
{
	struct grpc_ccall *cc = l->ka;

	if (cc == NULL)
		return;
	l->ka = NULL;
	l->closing_ka = 1;
	grpc_ccall_cancel(cc);
	l->closing_ka = 0;
}

static void
lease_stop(struct etcd_lease *l)
{
	if (l->tick != NULL)
		event_del(l->tick);
	if (l->expire != NULL)
		event_del(l->expire);
	if (l->reopen != NULL)
		event_del(l->reopen);
	if (l->answer != NULL)
		event_del(l->answer);
	ka_close(l);
}

/* The lease is lost: final. The callback may free |l|. */
static void
lease_lose(struct etcd_lease *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
lease_lose(struct etcd_lease *l, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	if (l->lost)
		return;
	l->lost = 1;
	lease_stop(l);
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (l->cb != NULL)
		l->cb(l, ETCD_LEASE_LOST, why, l->arg);
}

static void
ka_msg(struct grpc_ccall *cc, const ProtobufCMessage *msg, void *arg)
{
	const Etcdserverpb__LeaseKeepAliveResponse *rep =
	    (const Etcdserverpb__LeaseKeepAliveResponse *)msg;
	struct etcd_lease *l = arg;
	uint64_t now = mono_ms(), sent = now;

	if (rep->id != l->id)
		return;
	if (rep->ttl <= 0) {
		lease_lose(l, "etcd: lease %" PRIx64 " expired or was revoked",
		    (uint64_t)l->id);
		return;
	}
	/* Answers come in the order of the requests: this one answers the
	 * oldest outstanding, and etcd renewed the lease after we sent it. */
	if (l->n_sent > 0) {
		sent = l->sent[l->sent_head];
		l->sent_head = (l->sent_head + 1) % SENT_RING;
		l->n_sent--;
	}
	l->ttl = rep->ttl;
	uint64_t until = sent + (uint64_t)rep->ttl * 1000;
	event_del(l->expire);
	timer_in(l->expire, until > now ? until - now : 0);
	event_del(l->answer);
	l->answer_grace = 0;
	if (l->n_sent > 0) {
		uint64_t due = l->sent[l->sent_head] + ANSWER_MS;
		timer_in(l->answer, due > now ? due - now : 0);
	}
}

static void
ka_done(struct grpc_ccall *cc, int status, const char *message, void *arg)
{
	struct etcd_lease *l = arg;

	if (l->closing_ka)
		return;
	l->ka = NULL;
	l->n_sent = 0;
	event_del(l->answer);
	snprintf(l->last_err, sizeof(l->last_err), "%s: %s",
	    grpc_status_name(status), message != NULL ? message : "ended");
	etcd_member_failed(l->ec, l->ka_member);
	if (!l->lost)
		timer_in(l->reopen, REOPEN_MS);
}

/* Opens the stream when there is none and sends one renewal. */
static void
ka_send(struct etcd_lease *l)
{
	Etcdserverpb__LeaseKeepAliveRequest req =
	    ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;

	if (l->ka == NULL) {
		struct grpc_client *cli = etcd_member_client(l->ec,
		    &l->ka_member);
		if (cli == NULL)
			return;
		l->n_sent = 0;
		l->answer_grace = 0;
		event_del(l->answer);
		l->ka = grpc_client_stream(cli, ETCD_PATH_LEASE_KEEPALIVE,
		    NULL, &etcdserverpb__lease_keep_alive_response__descriptor,
		    0, ka_msg, ka_done, l);
		if (l->ka == NULL)
			return;
	}
	req.id = l->id;
	if (grpc_ccall_send(l->ka, &req.base) == 0) {
		if (l->n_sent == SENT_RING) {
			/* Forget the oldest: expiry is then measured from a
			 * later send, which only makes it later by a
			 * fraction of the TTL while 16 renewals are
			 * unanswered. */
			l->sent_head = (l->sent_head + 1) % SENT_RING;
			l->n_sent--;
		}
		l->sent[(l->sent_head + l->n_sent) % SENT_RING] = mono_ms();
		if (l->n_sent++ == 0)
			timer_in(l->answer, ANSWER_MS);
	}
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	ka_send(arg);
}

static void
reopen_cb(evutil_socket_t fd, short what, void *arg)
{
	ka_send(arg);
}

/* A renewal went unanswered: leave its member and renew on the next. */
static void
answer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_lease *l = arg;
	uint64_t now = mono_ms(), due = l->sent[l->sent_head] + ANSWER_MS;

	if (l->ka == NULL || l->n_sent == 0)
		return;
	/* Running late means the loop was blocked (in a sync call): the
	 * answer may be waiting unread. Let the loop read once first. */
	if (now > due + ANSWER_GRACE_MS && !l->answer_grace) {
		l->answer_grace = 1;
		timer_in(l->answer, ANSWER_GRACE_MS);
		return;
	}
	snprintf(l->last_err, sizeof(l->last_err), "%s: no answer to a "
	    "renewal within %d ms", l->ec->members[l->ka_member].name,
	    ANSWER_MS);
	ka_close(l);
	etcd_member_failed(l->ec, l->ka_member);
	ka_send(l);
}

static void
expire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_lease *l = arg;

	lease_lose(l, "etcd: lease %" PRIx64 ": no keepalive answered for "
	    "%" PRId64 " s%s%s", (uint64_t)l->id, l->ttl,
	    l->last_err[0] != '\0' ? "; the last error: " : "", l->last_err);
}

static void
grant_done(struct etcd_call *c, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	const Etcdserverpb__LeaseGrantResponse *rep =
	    (const Etcdserverpb__LeaseGrantResponse *)reply;
	struct etcd_lease *l = arg;

	l->grant = NULL;
	if (status != GRPC_OK) {
		lease_lose(l, "etcd: LeaseGrant: %s: %s",
		    grpc_status_name(status), message);
		return;
	}
	if (rep->error != NULL && *rep->error != '\0') {
		lease_lose(l, "etcd: LeaseGrant: %s", rep->error);
		return;
	}
	if (rep->id == 0 || rep->ttl <= 0) {
		lease_lose(l, "etcd: LeaseGrant answered lease %" PRIx64
		    " with TTL %" PRId64, (uint64_t)rep->id, rep->ttl);
		return;
	}
	l->id = rep->id;
	l->ttl = rep->ttl;
	uint64_t period = (uint64_t)l->ttl * 1000 / 3;
	struct timeval tv = { (time_t)(period / 1000),
	    (suseconds_t)(period % 1000) * 1000 };
	evtimer_add(l->tick, &tv);
	uint64_t now = mono_ms(), until = l->grant_sent +
	    (uint64_t)l->ttl * 1000;
	timer_in(l->expire, until > now ? until - now : 0);
	ka_send(l);
	if (l->cb != NULL)
		l->cb(l, ETCD_LEASE_GRANTED, NULL, l->arg);
}

static void
lease_free_mem(struct etcd_lease *l)
{
	if (l->tick != NULL)
		event_free(l->tick);
	if (l->expire != NULL)
		event_free(l->expire);
	if (l->reopen != NULL)
		event_free(l->reopen);
	if (l->answer != NULL)
		event_free(l->answer);
	free(l);
}

struct etcd_lease *
etcd_lease_new(struct etcd *ec, int64_t ttl_s, etcd_lease_fn cb, void *arg)
{
	Etcdserverpb__LeaseGrantRequest req =
	    ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	struct etcd_lease *l;

	if (ec == NULL || ec->own_base || ttl_s < 1) {
		errno = EINVAL;
		return NULL;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	l->ec = ec;
	l->ttl_req = l->ttl = ttl_s;
	l->cb = cb;
	l->arg = arg;
	l->tick = event_new(ec->base, -1, EV_PERSIST, tick_cb, l);
	l->expire = evtimer_new(ec->base, expire_cb, l);
	l->reopen = evtimer_new(ec->base, reopen_cb, l);
	l->answer = evtimer_new(ec->base, answer_cb, l);
	if (l->tick == NULL || l->expire == NULL || l->reopen == NULL ||
	    l->answer == NULL) {
		lease_free_mem(l);
		errno = ENOMEM;
		return NULL;
	}
	req.ttl = ttl_s;
	l->grant_sent = mono_ms();
	if ((l->grant = etcd_call(ec, ETCD_PATH_LEASE_GRANT, &req.base,
	    &etcdserverpb__lease_grant_response__descriptor, 0, grant_done,
	    l)) == NULL) {
		lease_free_mem(l);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&ec->leases, l, entry);
	return l;
}

int64_t
etcd_lease_id(const struct etcd_lease *l)
{
	return l->id;
}

int64_t
etcd_lease_ttl(const struct etcd_lease *l)
{
	return l->ttl;
}

/* Stops everything of |l| without callbacks; |revoke|: tell etcd. */
static void
lease_drop(struct etcd_lease *l, int revoke)
{
	struct etcd *ec = l->ec;

	TAILQ_REMOVE(&ec->leases, l, entry);
	l->cb = NULL;
	lease_stop(l);
	if (l->grant != NULL) {
		etcd_call_cancel(l->grant);	/* grant_done: no callback */
		l->grant = NULL;
	}
	if (revoke && l->id != 0 && !l->lost) {
		Etcdserverpb__LeaseRevokeRequest req =
		    ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
		req.id = l->id;
		/* In the background, owned by the client; its result does
		 * not matter: the lease expires anyway. */
		(void)etcd_call(ec, ETCD_PATH_LEASE_REVOKE, &req.base,
		    &etcdserverpb__lease_revoke_response__descriptor, 0, NULL,
		    NULL);
	}
	lease_free_mem(l);
}

void
etcd_lease_free(struct etcd_lease *l)
{
	if (l != NULL)
		lease_drop(l, 1);
}

void
etcd_lease_drop_all(struct etcd *ec)
{
	struct etcd_lease *l;

	while ((l = TAILQ_FIRST(&ec->leases)) != NULL)
		lease_drop(l, 0);
}
