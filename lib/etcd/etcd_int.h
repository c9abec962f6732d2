/*
 * Internals of the etcd client shared by etcd.c (the client, members,
 * unary calls and failover), etcd_lease.c and etcd_watch.c (the helpers on
 * bidi streams). etcd_txn.c needs none of it.
 */
#ifndef RDZV_ETCD_INT_H
#define RDZV_ETCD_INT_H

#include <sys/queue.h>

#include "etcd.h"

#define ETCD_DEFAULT_PORT	2379

struct etcd_member {
	struct endpoint ep;
	char name[300];			/* "host:port" for messages */
	struct grpc_client *cli;	/* made on first use */
};

TAILQ_HEAD(etcd_call_list, etcd_call);
TAILQ_HEAD(etcd_lease_list, etcd_lease);
TAILQ_HEAD(etcd_watch_list, etcd_watch);

struct etcd {
	struct event_base *base;
	int own_base;			/* the sync form: base is ours */
	int running;			/* a _sync call or etcd_wait runs the
					   private loop */
	char *endpoints;
	struct etcd_member *members;
	size_t n_members;
	size_t cur;			/* the member in use */
	struct tls_ctx *tls;
	uint32_t timeout_ms;
	uint32_t connect_timeout_ms;
	uint32_t keepalive_ms;
	size_t max_message;

	struct etcd_call_list calls;	/* pending */
	size_t n_calls;
	struct etcd_lease_list leases;
	struct etcd_watch_list watches;
};

/* The member in use and its gRPC client (made now if need be); NULL with
 * errno ENOMEM. *idx gets the member's index for etcd_member_failed. */
struct grpc_client *etcd_member_client(struct etcd *ec, size_t *idx);

/* Member |idx| failed a call: when it is still the member in use, the
 * client moves to the next one. */
void etcd_member_failed(struct etcd *ec, size_t idx);

/* etcd_lease.c, etcd_watch.c: drop everything without callbacks (from
 * etcd_free). */
void etcd_lease_drop_all(struct etcd *ec);
void etcd_watch_drop_all(struct etcd *ec);

#endif
