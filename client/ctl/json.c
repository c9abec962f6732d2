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

/* A number, or null where it does not apply. */
static json_t *
maybe(bool applies, int64_t v)
{
	return applies ? integer(v) : json_null();
}

/* An instant, or null when rdzvd sent 0 (not yet, or never). */
static json_t *
instant(int64_t ms)
{
	return maybe(ms != 0, ms);
}

/* The time left until a deadline, or null when none is armed (-1). */
static json_t *
armed(int64_t ms)
{
	return maybe(ms >= 0, ms);
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

/*
 * An object that is its message field for field (protobuf's names are
 * JSON's) is a table of those fields in JSON's order, each with how it
 * reads; protobuf-c's descriptor says where a field is and what type it
 * has. A name that is no field stops rdzvctl (fatalx) the first time it
 * prints that object. Jobs and nodes have rules of their own (states,
 * ranks outside the round, nested objects) and are written out below.
 */
enum how {
	VALUE,		/* a number, string, boolean or list of strings */
	NONEMPTY,	/* a string, or null when empty */
	INSTANT,	/* unix ms, or null when 0 */
};

struct field {
	const char	*name;
	enum how	 how;
};

static const struct field settings_fields[] = {
	{ "min_nodes",			VALUE },
	{ "max_nodes",			VALUE },
	{ "last_call_timeout_ms",	VALUE },
	{ "join_timeout_ms",		VALUE },
	{ "max_restarts",		VALUE },
	{ "lease_ttl_ms",		VALUE },
	{ "reconnect_grace_ms",		VALUE },
	{ NULL,				VALUE },
};

/* Then "steps", each as step_fields says. */
static const struct field gpu_fields[] = {
	{ "device",		VALUE },
	{ "name",		NONEMPTY },
	{ "uuid",		NONEMPTY },
	{ "ok",			VALUE },
	{ "failed_step",	NONEMPTY },
	{ "error",		NONEMPTY },
	{ "total_mem",		VALUE },
	{ NULL,			VALUE },
};

static const struct field step_fields[] = {
	{ "name",		VALUE },
	{ "elapsed_us",		VALUE },
	{ NULL,			VALUE },
};

static const struct field event_fields[] = {
	{ "seq",		VALUE },
	{ "time_unix_ms",	INSTANT },
	{ "generation",		VALUE },
	{ "kind",		VALUE },
	{ "message",		VALUE },
	{ NULL,			VALUE },
};

static const struct field server_fields[] = {
	{ "version",		VALUE },
	{ "pid",		VALUE },
	{ "uptime_ms",		VALUE },
	{ "started_unix_ms",	INSTANT },
	{ "database",		VALUE },
	{ "listeners",		VALUE },
	{ "jobs",		VALUE },
	{ "active_jobs",	VALUE },
	{ "nodes",		VALUE },
	{ "connections",	VALUE },
	{ "transactions",	VALUE },
	{ "identity",		VALUE },
	{ NULL,			VALUE },
};

/* A repeated string field of |m|, as an array. */
static json_t *
strings(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
	const char	*base = (const char *)m;
	char *const	*s = *(char *const *const *)(base + fd->offset);
	size_t		 n = *(const size_t *)(base + fd->quantifier_offset);
	json_t		*a = json_array();

	if (fd->type != PROTOBUF_C_TYPE_STRING)
		fatalx("json: %s.%s: only lists of strings are copied as "
		    "they are", m->descriptor->name, fd->name);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, text(s[i]));
	return a;
}

/* The field |f| of |m|, as |f| says it reads. */
static json_t *
value(const ProtobufCMessage *m, const struct field *f)
{
	const ProtobufCFieldDescriptor	*fd;
	const void			*p;
	int64_t				 v;

	fd = protobuf_c_message_descriptor_get_field_by_name(m->descriptor,
	    f->name);
	if (fd == NULL)
		fatalx("json: %s has no field %s", m->descriptor->name,
		    f->name);
	if (fd->label == PROTOBUF_C_LABEL_REPEATED)
		return strings(m, fd);
	p = (const char *)m + fd->offset;
	switch (fd->type) {
	case PROTOBUF_C_TYPE_STRING:
		if (f->how == NONEMPTY)
			return nonempty(*(char *const *)p);
		return text(*(char *const *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_INT32:
		v = *(const int32_t *)p;
		break;
	case PROTOBUF_C_TYPE_UINT32:
		v = *(const uint32_t *)p;
		break;
	case PROTOBUF_C_TYPE_INT64:
		v = *(const int64_t *)p;
		break;
	case PROTOBUF_C_TYPE_UINT64:
		v = (int64_t)*(const uint64_t *)p;
		break;
	default:
		fatalx("json: %s.%s has a type json.c cannot copy",
		    m->descriptor->name, f->name);
	}
	return f->how == INSTANT ? instant(v) : integer(v);
}

/* The object of the fields of |m| that |f| lists, in that order. */
static json_t *
object(const ProtobufCMessage *m, const struct field *f)
{
	json_t	*o = json_object();

	for (; f->name != NULL; f++)
		set(o, f->name, value(m, f));
	return o;
}

static json_t *
settings(const Rdzv__V1__JobSettings *s)
{
	return s != NULL ? object(&s->base, settings_fields) : json_null();
}

static json_t *
gpu(const Rdzv__V1__GpuResult *g)
{
	json_t	*o = object(&g->base, gpu_fields), *steps = json_array();

	for (size_t i = 0; i < g->n_steps; i++)
		json_array_append_new(steps, object(&g->steps[i]->base,
		    step_fields));
	set(o, "steps", steps);
	return o;
}

/* A node's GPU check: the counts, then each device. */
static json_t *
gpus(const Rdzv__V1__Node *n)
{
	json_t	*o = json_object(), *devs = json_array();

	set(o, "healthy", integer(n->gpus_healthy));
	set(o, "total", integer(n->gpus_total));
	for (size_t i = 0; i < n->n_gpus; i++)
		json_array_append_new(devs, gpu(n->gpus[i]));
	set(o, "devices", devs);
	return o;
}

/* Where the round's workers rendezvous, or null before the first round. */
static json_t *
master(const Rdzv__V1__Job *j)
{
	json_t	*o;

	if (j->master_addr[0] == '\0')
		return json_null();
	o = json_object();
	set(o, "addr", text(j->master_addr));
	set(o, "port", integer(j->master_port));
	return o;
}

json_t *
json_node(const Rdzv__V1__Node *n)
{
	json_t	*o = json_object();
	bool	 ranked = n->group_rank >= 0;

	set(o, "node_id", integer((int64_t)n->node_id));
	set(o, "hostname", text(n->hostname));
	set(o, "address", nonempty(n->advertise_addr));
	set(o, "state", json_string(fmt_node_state(n->state)));
	set(o, "group_rank", maybe(ranked, n->group_rank));
	set(o, "base_rank", maybe(ranked, n->base_rank));
	set(o, "nproc", integer(n->nproc));
	set(o, "rank_hint", maybe(n->has_rank_hint, n->rank_hint));
	set(o, "connected", json_boolean(n->connected));
	set(o, "joined_unix_ms", instant(n->joined_unix_ms));
	set(o, "last_seen_unix_ms", instant(n->last_seen_unix_ms));
	set(o, "gpus", gpus(n));
	return o;
}

json_t *
json_event(const Rdzv__V1__Event *e)
{
	return object(&e->base, event_fields);
}

json_t *
json_job(const Rdzv__V1__Job *j, bool detail)
{
	json_t	*o = json_object();

	set(o, "id", text(j->rdzv_id));
	set(o, "state", json_string(fmt_job_state(j->state)));
	set(o, "reason", nonempty(j->reason));
	set(o, "owner", text(j->owner));
	set(o, "attempt", integer(j->attempt));
	set(o, "generation", integer((int64_t)j->generation));
	set(o, "restart_count", integer(j->restart_count));
	set(o, "world_size", integer(j->world_size));
	set(o, "master", master(j));
	set(o, "participants", integer(j->participants));
	set(o, "waiting", integer(j->waiting));
	set(o, "spares", integer(j->spares));
	set(o, "settings", settings(j->settings));
	set(o, "created_unix_ms", instant(j->created_unix_ms));
	set(o, "updated_unix_ms", instant(j->updated_unix_ms));
	set(o, "ended_unix_ms", instant(j->ended_unix_ms));
	set(o, "last_call_in_ms", armed(j->last_call_in_ms));
	set(o, "join_timeout_in_ms", armed(j->join_timeout_in_ms));
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
	return object(&r->base, server_fields);
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
