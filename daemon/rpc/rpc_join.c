/*
 * Rendezvous.Join: a new node, or a node resuming with its session_id. The
 * call stays open as the node's stream (rpc_streams.c); the core's messages for
 * it go out after this turn's commit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "rdzvd.h"
#include "rpc_int.h"

/*
 * A session id is 16 random bytes, the agent's secret. They come from a pool
 * filled 256 ids at a time: one getrandom call, not one per joining node.
 * Bytes handed out are wiped from the pool.
 */
static int
new_session(uint8_t id[CORE_SESSION_LEN])
{
	static uint8_t pool[256 * CORE_SESSION_LEN];
	static size_t left;

	if (left < CORE_SESSION_LEN) {
		while (left < sizeof(pool)) {
			ssize_t n = getrandom(pool + left, sizeof(pool) - left,
			    0);
			if (n < 0 && errno != EINTR)
				return -1;
			if (n > 0)
				left += (size_t)n;
		}
	}
	left -= CORE_SESSION_LEN;
	memcpy(id, pool + left, CORE_SESSION_LEN);
	explicit_bzero(pool + left, CORE_SESSION_LEN);
	return 0;
}

static int
join(struct grpc_call *call, const Rdzv__V1__JoinRequest *req,
    struct core_node **node, char *err, size_t errlen)
{
	struct core_join j = {
		.rdzv_id = req->rdzv_id,
		.identity = grpc_call_identity(call),
		.settings = {
			.min_nodes = req->min_nodes,
			.max_nodes = req->max_nodes,
			.last_call_timeout_ms = req->last_call_timeout_ms,
			.join_timeout_ms = req->join_timeout_ms,
			.max_restarts = req->max_restarts,
			.lease_ttl_ms = req->lease_ttl_ms,
			.reconnect_grace_ms = req->reconnect_grace_ms,
			.has_rejoin_timeout = req->has_rejoin_timeout,
			.rejoin_timeout_ms = req->rejoin_timeout_ms,
			.hang_timeout_ms = req->hang_timeout_ms,
			/* Out of range stays out of range: refused. */
			.rank_policy = (uint8_t)((unsigned)req->rank_policy >
			    255 ? 255 : req->rank_policy),
			.restart = (uint8_t)((unsigned)req->restart > 255 ?
			    255 : req->restart),
		},
		.hostname = req->hostname,
		/* By default a node is reached where its connection to us
		 * comes from (SPEC §6). */
		.advertise_addr = req->advertise_addr[0] != '\0' ?
		    req->advertise_addr : grpc_call_peer(call),
		.master_port = req->master_port,
		.nproc = req->nproc,
		.has_rank_hint = req->has_rank_hint,
		.rank_hint = req->rank_hint,
		.attempt = req->attempt,
		.allocation_nodes = req->allocation_nodes,
		.preload = req->preload,
	};

	if (req->hostname[0] == '\0') {
		snprintf(err, errlen, "job %s: hostname is empty", req->rdzv_id);
		return GRPC_INVALID_ARGUMENT;
	}
	if (req->join_token.len != 0 && req->join_token.len != CORE_TOKEN_LEN) {
		snprintf(err, errlen, "job %s: join_token is %zu bytes; it must "
		    "be %d random bytes, or empty", req->rdzv_id,
		    req->join_token.len, CORE_TOKEN_LEN);
		return GRPC_INVALID_ARGUMENT;
	}
	if (req->join_token.len == CORE_TOKEN_LEN) {
		j.has_token = true;
		memcpy(j.join_token, req->join_token.data, CORE_TOKEN_LEN);
	}
	struct core_gpu *gpus;
	int rc = convert_gpus(req->gpus, req->n_gpus, &gpus, &j.gpus_healthy,
	    &j.gpus_total, err, errlen);
	if (rc != GRPC_OK)
		return rc;
	j.gpus = gpus;
	j.n_gpus = j.gpus_total;
	if (new_session(j.session_id) != 0) {
		snprintf(err, errlen, "no randomness for a session id: %s",
		    strerror(errno));
		free(gpus);
		return GRPC_INTERNAL;
	}
	rc = rpc_status(core_join(rdzvd.core, turn_now(), &j, node, err,
	    errlen));
	free(gpus);
	return rc;
}

void
rpc_join(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__JoinRequest *req = (const Rdzv__V1__JoinRequest *)msg;
	struct core_node *node = NULL;
	const uint8_t *session;
	char err[512];
	int rc;

	if (req->session_id.len == 0) {
		rc = join(call, req, &node, err, sizeof(err));
	} else if ((session = rpc_session_or_finish(call, req->session_id)) ==
	    NULL) {
		return;
	} else {
		rc = rpc_status(core_resume(rdzvd.core, turn_now(),
		    grpc_call_identity(call),
		    req->rdzv_id[0] != '\0' ? req->rdzv_id : NULL,
		    session, req->generation, &node, err, sizeof(err)));
	}
	/* A refusal may still change state (a stale resume leaves). */
	turn_schedule();
	if (rc != GRPC_OK) {
		log_debug("join %s from %s refused: %s", req->rdzv_id,
		    grpc_call_identity(call), err);
		grpc_call_finish(call, rc, "%s", err);
		return;
	}
	log_debug("job %s: node %llu (%s) %s", node->job->rdzv_id,
	    (unsigned long long)node->node_id, node->hostname,
	    req->session_id.len ? "resumed" : "joined");
	rpc_streams_attach(node, call);
}
