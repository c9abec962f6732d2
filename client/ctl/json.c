/*
 * `-o json`: the shape docs/RDZVCTL.md documents, built with jansson. It is
 * rdzvctl's own, not protobuf's JSON mapping, so scripts get snake_case
 * names, states as words, and null where a value does not apply (no rank
 * outside the round, no deadline armed, not ended yet). Fields are only
 * ever added.
 */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "rdzvctl.h"

static void
set(json_t *o, const char *key, json_t *v)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		fatalx("json: cannot set %s", key);
}

static json_t *
integer(int64_t v)
{
	return json_integer((json_int_t)v);
}

/* An instant, or null when rdzvd sent 0 (not yet, or never). */
static json_t *
instant(int64_t ms)
{
	return ms != 0 ? integer(ms) : json_null();
}

/* A string rdzvd sent; jansson refuses text that is not UTF-8. */
static json_t *
text(const char *s)
{
	json_t	*v = json_string(s != NULL ? s : "");

	return v != NULL ? v : json_string("(not UTF-8)");
}

static json_t *
nonempty(const char *s)
{
	return s != NULL && *s != '\0' ? text(s) : json_null();
}

static json_t *
settings(const Rdzv__V1__JobSettings *s)
{
	json_t	*o;

	if (s == NULL)
		return json_null();
	o = json_object();
	set(o, "min_nodes", integer(s->min_nodes));
	set(o, "max_nodes", integer(s->max_nodes));
	set(o, "last_call_timeout_ms", integer(s->last_call_timeout_ms));
	set(o, "join_timeout_ms", integer(s->join_timeout_ms));
	set(o, "rejoin_timeout_ms", integer(s->rejoin_timeout_ms));
	set(o, "max_restarts", integer(s->max_restarts));
	set(o, "lease_ttl_ms", integer(s->lease_ttl_ms));
	set(o, "reconnect_grace_ms", integer(s->reconnect_grace_ms));
	return o;
}

static json_t *
gpu(const Rdzv__V1__GpuResult *g)
{
	json_t	*o = json_object(), *steps = json_array();

	set(o, "device", integer(g->device));
	set(o, "name", nonempty(g->name));
	set(o, "uuid", nonempty(g->uuid));
	set(o, "ok", json_boolean(g->ok));
	set(o, "failed_step", nonempty(g->failed_step));
	set(o, "error", nonempty(g->error));
	set(o, "total_mem", integer((int64_t)g->total_mem));
	for (size_t i = 0; i < g->n_steps; i++) {
		json_t *s = json_object();
		set(s, "name", text(g->steps[i]->name));
		set(s, "elapsed_us", integer((int64_t)g->steps[i]->elapsed_us));
		json_array_append_new(steps, s);
	}
	set(o, "steps", steps);
	return o;
}

json_t *
json_node(const Rdzv__V1__Node *n)
{
	json_t	*o = json_object(), *g = json_object();
	json_t	*devs = json_array();
	bool	 ranked = n->group_rank >= 0;

	set(o, "node_id", integer((int64_t)n->node_id));
	set(o, "hostname", text(n->hostname));
	set(o, "address", nonempty(n->advertise_addr));
	set(o, "state", json_string(node_state_name(n->state)));
	set(o, "group_rank", ranked ? integer(n->group_rank) : json_null());
	set(o, "base_rank", ranked ? integer(n->base_rank) : json_null());
	set(o, "nproc", integer(n->nproc));
	set(o, "rank_hint", n->has_rank_hint ? integer(n->rank_hint) :
	    json_null());
	set(o, "connected", json_boolean(n->connected));
	set(o, "joined_unix_ms", instant(n->joined_unix_ms));
	set(o, "last_seen_unix_ms", instant(n->last_seen_unix_ms));
	set(g, "healthy", integer(n->gpus_healthy));
	set(g, "total", integer(n->gpus_total));
	for (size_t i = 0; i < n->n_gpus; i++)
		json_array_append_new(devs, gpu(n->gpus[i]));
	set(g, "devices", devs);
	set(o, "gpus", g);
	return o;
}

json_t *
json_event(const Rdzv__V1__Event *e)
{
	json_t	*o = json_object();

	set(o, "seq", integer((int64_t)e->seq));
	set(o, "time_unix_ms", instant(e->time_unix_ms));
	set(o, "generation", integer((int64_t)e->generation));
	set(o, "kind", text(e->kind));
	set(o, "message", text(e->message));
	return o;
}

json_t *
json_job(const Rdzv__V1__Job *j, bool detail)
{
	json_t	*o = json_object(), *m;

	set(o, "id", text(j->rdzv_id));
	set(o, "state", json_string(job_state_name(j->state)));
	set(o, "reason", nonempty(j->reason));
	set(o, "held_failure", nonempty(j->held_failure));
	set(o, "owner", text(j->owner));
	set(o, "attempt", integer(j->attempt));
	set(o, "generation", integer((int64_t)j->generation));
	set(o, "restart_count", integer(j->restart_count));
	set(o, "world_size", integer(j->world_size));
	if (j->master_addr[0] != '\0') {
		m = json_object();
		set(m, "addr", text(j->master_addr));
		set(m, "port", integer(j->master_port));
	} else
		m = json_null();
	set(o, "master", m);
	set(o, "participants", integer(j->participants));
	set(o, "waiting", integer(j->waiting));
	set(o, "spares", integer(j->spares));
	set(o, "settings", settings(j->settings));
	set(o, "created_unix_ms", instant(j->created_unix_ms));
	set(o, "updated_unix_ms", instant(j->updated_unix_ms));
	set(o, "ended_unix_ms", instant(j->ended_unix_ms));
	set(o, "last_call_in_ms", j->last_call_in_ms >= 0 ?
	    integer(j->last_call_in_ms) : json_null());
	set(o, "join_timeout_in_ms", j->join_timeout_in_ms >= 0 ?
	    integer(j->join_timeout_in_ms) : json_null());
	if (!detail)
		return o;

	json_t *nodes = json_array(), *events = json_array();
	for (size_t i = 0; i < j->n_nodes; i++)
		json_array_append_new(nodes, json_node(j->nodes[i]));
	for (size_t i = 0; i < j->n_events; i++)
		json_array_append_new(events, json_event(j->events[i]));
	set(o, "nodes", nodes);
	set(o, "events", events);
	return o;
}

json_t *
json_server(const Rdzv__V1__ServerInfoResponse *r)
{
	json_t	*o = json_object(), *l = json_array();

	set(o, "version", text(r->version));
	set(o, "pid", integer(r->pid));
	set(o, "uptime_ms", integer((int64_t)r->uptime_ms));
	set(o, "started_unix_ms", instant(r->started_unix_ms));
	set(o, "database", text(r->database));
	set(o, "role", text(r->role));
	set(o, "leader", text(r->leader));
	set(o, "advertise", text(r->advertise));
	set(o, "store", text(r->store));
	json_t *e = json_array();
	for (size_t i = 0; i < r->n_etcd_endpoints; i++)
		json_array_append_new(e, text(r->etcd_endpoints[i]));
	set(o, "etcd_endpoints", e);
	for (size_t i = 0; i < r->n_listeners; i++)
		json_array_append_new(l, text(r->listeners[i]));
	set(o, "listeners", l);
	set(o, "jobs", integer(r->jobs));
	set(o, "active_jobs", integer(r->active_jobs));
	set(o, "nodes", integer(r->nodes));
	set(o, "connections", integer(r->connections));
	set(o, "transactions", integer((int64_t)r->transactions));
	set(o, "identity", text(r->identity));
	return o;
}

int
json_emit(json_t *j, bool compact)
{
	int	rc;

	rc = json_dumpf(j, stdout, compact ? JSON_COMPACT :
	    JSON_INDENT(2));
	json_decref(j);
	if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		fprintf(stderr, "rdzvctl: cannot write the JSON output\n");
		return CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

/* A host record (docs/HEALTH.md), as `rdzvctl hosts -o json` lists it. */
json_t *
json_host(const Rdzv__V1__Host *h)
{
	static const char *const states[] = { "unknown", "ok", "suspect",
	    "quarantined" };
	json_t	*o = json_object(), *gpus = json_array();

	set(o, "name", text(h->name));
	set(o, "state", text(h->state >= 1 && h->state <= 3 ?
	    states[h->state] : states[0]));
	set(o, "reason", text(h->reason));
	set(o, "since_unix_ms", instant(h->since_unix_ms));
	set(o, "updated_unix_ms", instant(h->updated_unix_ms));
	set(o, "crashes", integer(h->crashes));
	set(o, "recent_crashes", integer(h->recent_crashes));
	set(o, "gpu_failures", integer(h->gpu_failures));
	for (size_t i = 0; i < h->n_gpus; i++)
		json_array_append_new(gpus, gpu(h->gpus[i]));
	set(o, "gpus", gpus);
	return o;
}
