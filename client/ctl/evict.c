/*
 * rdzvctl evict ID NODE [--reason TEXT]: that agent stops its workers and
 * exits; the job re-rounds without it, as for a planned leave (SPEC §4 rule
 * 9). NODE is a node id, or the hostname of exactly one live node, since
 * operators think in hosts and `status ID` shows both.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzvctl.h"

static bool
live(const Rdzv__V1__Node *n)
{
	return n->state == RDZV__V1__NODE_STATE__NODE_STATE_PARTICIPANT ||
	    n->state == RDZV__V1__NODE_STATE__NODE_STATE_WAITING ||
	    n->state == RDZV__V1__NODE_STATE__NODE_STATE_SPARE;
}

/* A hostname to the node id of the one live node on it. */
static int
resolve_host(struct ctl *ctl, const char *id, const char *host,
    uint64_t *node_id)
{
	Rdzv__V1__Job	*job;
	char		 ids[256] = "";
	size_t		 found = 0, len = 0;
	int		 rc;

	if ((rc = ctl_get_job(ctl, id, 1, &job)) != CTL_EXIT_OK)
		return rc;
	for (size_t i = 0; i < job->n_nodes; i++) {
		const Rdzv__V1__Node *n = job->nodes[i];
		if (!live(n) || strcmp(n->hostname, host) != 0)
			continue;
		*node_id = n->node_id;
		found++;
		if (len < sizeof(ids))
			len += (size_t)snprintf(ids + len, sizeof(ids) - len,
			    "%s%" PRIu64, found > 1 ? ", " : "", n->node_id);
	}
	protobuf_c_message_free_unpacked(&job->base, NULL);
	if (found == 0) {
		fprintf(stderr, "rdzvctl: %s: job %s has no live node on host "
		    "%s (rdzvctl status %s lists its nodes)\n", ctl->server,
		    id, host, id);
		return CTL_EXIT_NOT_FOUND;
	}
	if (found > 1)
		return ctl_usage_error("job %s runs nodes %s on host %s; name "
		    "one by its node id", id, ids, host);
	return CTL_EXIT_OK;
}

static int
evict_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__EvictNodeRequest	 req =
	    RDZV__V1__EVICT_NODE_REQUEST__INIT;
	unsigned long long		 v;
	char				*end, done[64];
	int				 rc;

	req.rdzv_id = argv[0];
	req.reason = (char *)(ctl->reason != NULL ? ctl->reason : "");
	errno = 0;
	v = strtoull(argv[1], &end, 10);
	if (argv[1][0] >= '0' && argv[1][0] <= '9' && *end == '\0' &&
	    errno == 0)
		req.node_id = v;
	else if ((rc = resolve_host(ctl, argv[0], argv[1], &req.node_id)) !=
	    CTL_EXIT_OK)
		return rc;
	snprintf(done, sizeof(done), "node %" PRIu64 " evicted", req.node_id);
	return action_run(ctl, "EvictNode", &req.base, done);
}

const struct ctl_cmd cmd_evict_entry = {
	.name = "evict",
	.args = "ID NODE",
	.summary = "one node's agent stops its workers; the job re-rounds",
	.help =
	    "  NODE is a node id, or the hostname of one live node\n"
	    "  -r, --reason TEXT             why, for the agent and the log\n",
	.shortopts = "r:",
	.longopts = action_longopts,
	.min_args = 2,
	.max_args = 2,
	.option = action_option,
	.exec = evict_exec,
};
