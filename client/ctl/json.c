/*
 * `-o json`: the shape docs/RDZVCTL.md documents, built with jansson. It is
 * rdzvctl's own, so scripts get null where a value does not apply (no rank
 * outside the round, no deadline armed, not ended yet) and a few fields
 * grouped (master, gpus); names are the proto's, states are words. Fields
 * are only ever added: any field of a message that this file does not
 * write in its own way follows as the status page's JSON has it (lib's
 * pbjson, docs/PROTOCOL.md "JSON"), so a field added to the proto shows up
 * here with no more code.
 */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "pbjson.h"
#include "rdzvctl.h"

static void
set(json_t *o, const char *key, json_t *v)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		fatalx("json: cannot set %s", key);
}

/* The rest of |m|'s fields, past those of |mapped|. */
static void
rest(json_t *o, const ProtobufCMessage *m, const char *const *mapped)
{
	if (pbjson_add_rest(o, m, mapped) != 0)
		fatalx("json: out of memory");
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
	set(o, "hang_timeout_ms", integer(s->hang_timeout_ms));
	set(o, "rank_policy", text(s->rank_policy ==
	    RDZV__V1__RANK_POLICY__RANK_POLICY_STABLE ? "stable" : "ordered"));
	set(o, "restart", text(s->restart ==
	    RDZV__V1__RESTART_MODE__RESTART_MODE_IN_PROCESS ? "in-process" :
	    "process"));
	/* Issue 45: the modules its agents preload; "": none. */
	set(o, "preload", text(s->preload));
	rest(o, &s->base, (const char *const[]){ NULL });
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
		rest(s, &g->steps[i]->base, (const char *const[]){ NULL });
		json_array_append_new(steps, s);
	}
	set(o, "steps", steps);
	rest(o, &g->base, (const char *const[]){ NULL });
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
	/* Training progress (docs/HEALTH.md); null: no step reported in
	 * the current generation. */
	if (n->has_step) {
		json_t *p = json_object();
		set(p, "step", integer((int64_t)n->step));
		set(p, "step_unix_ms", instant(n->step_unix_ms));
		set(p, "steps_behind", integer((int64_t)n->steps_behind));
		set(p, "behind_ms", integer(n->behind_ms));
		set(p, "straggler", json_boolean(n->straggler));
		set(o, "progress", p);
	} else
		set(o, "progress", json_null());
	rest(o, &n->base, (const char *const[]){ "advertise_addr",
	    "has_rank_hint", "gpus_healthy", "gpus_total", "has_step", "step",
	    "step_unix_ms", "steps_behind", "behind_ms", "straggler", NULL });
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
	rest(o, &e->base, (const char *const[]){ NULL });
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
	/* Summaries have no nodes and events to show. */
	rest(o, &j->base, (const char *const[]){ "rdzv_id", "master_addr",
	    "master_port", "nodes", "events", "has_lead_step", "lead_step",
	    "stragglers", NULL });
	if (!detail)
		return o;
	set(o, "lead_step", j->has_lead_step ? integer((int64_t)j->lead_step) :
	    json_null());
	set(o, "stragglers", integer(j->stragglers));

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
	rest(o, &r->base, (const char *const[]){ NULL });
	return o;
}

/* Written with pbjson_dumps: a C1 or bidi control a client sent is
 * \u-escaped, never raw on the operator's terminal. */
int
json_emit(json_t *j, bool compact)
{
	char	*s;
	int	 rc;

	s = pbjson_dumps(j, compact ? JSON_COMPACT : JSON_INDENT(2));
	json_decref(j);
	rc = s != NULL && fputs(s, stdout) != EOF ? 0 : -1;
	free(s);
	if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		fprintf(stderr, "rdzvctl: cannot write the JSON output\n");
		return CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

/* A host record (docs/HEALTH.md), as `rdzvctl hosts -o json` lists it. */
/* The on-quarantine command's latest run for a host; null when none. */
static json_t *
hook_run(const Rdzv__V1__HookRun *r)
{
	json_t	*o;

	if (r == NULL)
		return json_null();
	o = json_object();
	set(o, "state", json_string(hook_state_name(r->state)));
	set(o, "command", text(r->command));
	set(o, "pid", r->pid != 0 ? integer(r->pid) : json_null());
	set(o, "exit_code", r->state ==
	    RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_EXITED ?
	    integer(r->exit_code) : json_null());
	set(o, "signal", r->state ==
	    RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_SIGNALED ?
	    integer(r->signal) : json_null());
	set(o, "output", text(r->output));
	set(o, "started_unix_ms", instant(r->started_unix_ms));
	set(o, "ended_unix_ms", instant(r->ended_unix_ms));
	set(o, "reason", text(r->reason));
	return o;
}

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
	set(o, "hook", hook_run(h->hook));
	return o;
}
