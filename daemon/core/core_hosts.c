/*
 * Where the rendezvous meets host memory (core_hostrules.h, docs/HEALTH.md): a
 * quarantined host's join is refused for every job, GPU results and
 * crashed workers are held against their host, and a host that becomes
 * quarantined loses its live nodes in every job, as an eviction (rule 9),
 * so that spares or the elastic range take over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "text.h"

/* Every live node on |host|, in every job, is evicted. */
static void
host_evict(struct core *c, const char *host, const char *reason)
{
	struct core_job		*j;
	struct core_node	*n, *next;
	struct core_msg		 m;
	char			 why[CORE_REASON_MAX];

	textf(why, sizeof(why), "host %s quarantined: %s", host, reason);
	TAILQ_FOREACH(j, &c->jobs, entry) {
		if (core_job_ended(j))
			continue;
		bool touched = false;
		for (n = TAILQ_FIRST(&j->nodes); n != NULL; n = next) {
			next = TAILQ_NEXT(n, entry);
			if (!core_node_live(n) || strcmp(n->hostname, host) != 0)
				continue;
			core_msg_init(&m, CORE_MSG_EVICTED);
			textcpy(m.reason, sizeof(m.reason), why);
			core_msg_queue(n, &m);
			core_event_add(j, "evicted", "node %s (node %llu) "
			    "evicted: %s", n->hostname,
			    (unsigned long long)n->node_id, why);
			core_node_end(n, CORE_NODE_EVICTED, why);
			touched = true;
		}
		if (touched)
			core_settle(j);
	}
}

/*
 * The host changes since |from| (an index into hosts->changes): each is
 * told in |j|'s events (when the change came from one of its nodes), and
 * a quarantine evicts the host's nodes.
 */
void
core_host_changed(struct core *c, size_t from, struct core_job *j)
{
	const struct host_change	*hc;

	for (size_t i = from; i < c->hosts->n_changes; i++) {
		hc = &c->hosts->changes[i];
		if (j != NULL && !j->removed)
			core_event_add(j, "host", "host %s %s: %s", hc->name,
			    host_state_name(hc->to), hc->reason);
		if (hc->to == HOST_QUARANTINED)
			host_evict(c, hc->name, hc->reason);
	}
}

int
core_join_host(struct core *c, const struct core_join *req, size_t *from,
    char *err, size_t errlen)
{
	char		 what[RDZV_ID_MAX + 8];
	int		 rc;

	*from = c->hosts->n_changes;
	if (req->hostname == NULL || *req->hostname == '\0')
		return 0;
	if ((rc = hosts_refusal(c->hosts, req->hostname, err, errlen)) != 0)
		return rc;
	textf(what, sizeof(what), "job %s", req->rdzv_id);
	hosts_gpus(c->hosts, c->now.wall_ms, req->hostname, req->gpus,
	    req->n_gpus, what);
	hosts_seen(c->hosts, c->now.wall_ms, req->hostname);
	if ((rc = hosts_refusal(c->hosts, req->hostname, err, errlen)) != 0) {
		/* A join whose own GPU check quarantined its host goes no
		 * further; the host's other nodes go. */
		core_host_changed(c, *from, core_job_find(c, req->rdzv_id));
		return rc;
	}
	return 0;
}

void
core_report_host(struct core_node *n, const struct core_report *r)
{
	struct core	*c = n->job->core;
	struct core_job	*j = n->job;
	size_t		 from = c->hosts->n_changes;
	char		 what[CORE_REASON_MAX];
	bool		 crashed = false;

	if (n->hostname == NULL || *n->hostname == '\0')
		return;
	textf(what, sizeof(what), "job %s", j->rdzv_id);
	if (r->has_gpus)
		hosts_gpus(c->hosts, c->now.wall_ms, n->hostname, r->gpus,
		    r->n_gpus, what);
	if (r->outcome == CORE_OUTCOME_FAILED) {
		for (uint32_t i = 0; i < r->n_exits && !crashed; i++)
			crashed = hosts_exit_is_crash(r->exits[i].exit_code,
			    r->exits[i].signal, r->message);
	}
	if (crashed) {
		textf(what, sizeof(what), "job %s generation %llu",
		    j->rdzv_id, (unsigned long long)r->generation);
		hosts_crash(c->hosts, c->now.wall_ms, n->hostname, what);
	}
	core_host_changed(c, from, j);
}

int
core_host_set(struct core *c, struct core_now now, const char *identity,
    bool is_admin, const char *host, enum host_state to, const char *reason,
    char *err, size_t errlen)
{
	const char	*verb = to == HOST_OK ? "clear" : "quarantine";
	char		 why[HOST_REASON_MAX], brief[HOST_BRIEF_MAX];
	size_t		 from;

	core_set_now(c, now);
	if (identity == NULL)
		identity = "anonymous";
	if (!is_admin) {
		textf(err, errlen, "%s may not %s host %s (only an admin may)",
		    identity, verb, host);
		return CORE_DENIED;
	}
	if (host == NULL || *host == '\0' || strlen(host) > HOST_NAME_MAX_LEN) {
		textf(err, errlen, "a host name is 1 to %d bytes",
		    HOST_NAME_MAX_LEN);
		return CORE_INVALID;
	}
	if (to != HOST_OK && to != HOST_QUARANTINED) {
		textf(err, errlen, "a host can be cleared or quarantined, not "
		    "set %s", host_state_name(to));
		return CORE_INVALID;
	}
	textf(why, sizeof(why), "%s by %s: %s", to == HOST_OK ? "cleared" :
	    "quarantined", identity, reason != NULL && *reason != '\0' ?
	    reason : "no reason given");
	/* The admin's own words are the gist. */
	if (reason != NULL && *reason != '\0')
		textf(brief, sizeof(brief), "%.*s", (int)utf8_prefix(reason,
		    sizeof(brief) - 1), reason);
	else
		textf(brief, sizeof(brief), "%s by %.*s", to == HOST_OK ?
		    "cleared" : "quarantined", (int)utf8_prefix(identity, 32),
		    identity);
	from = c->hosts->n_changes;
	if (hosts_set(c->hosts, now.wall_ms, host, to, why, brief) != 0) {
		textf(err, errlen, "rdzvd has no record of host %s", host);
		return CORE_NOT_FOUND;
	}
	core_host_changed(c, from, NULL);
	return 0;
}
