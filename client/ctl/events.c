/*
 * rdzvctl events ID [--after SEQ] [--limit N]: a job's event history from
 * rdzvd's database, oldest first; `status ID` shows only the latest.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "rdzvctl.h"

#define DEFAULT_LIMIT	100
#define MAX_LIMIT	10000

static const char *const headers[] = {
	"SEQ", "TIME", "GEN", "KIND", "MESSAGE",
};

static int
events_option(struct ctl *ctl, int ch, const char *arg)
{
	unsigned long long	 v;
	char			*end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0)
		v = 0, end = NULL;
	switch (ch) {
	case 'A':
		if (end == NULL)
			return ctl_usage_error("events: --after %s: give an "
			    "event number (the SEQ column)", arg);
		ctl->after = v;
		return 0;
	case 'n':
		if (end == NULL || v == 0 || v > MAX_LIMIT)
			return ctl_usage_error("events: --limit %s: give a "
			    "number from 1 to %d", arg, MAX_LIMIT);
		ctl->limit = (uint32_t)v;
		return 0;
	}
	return -1;
}

static int
events_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__ListEventsRequest	 req =
	    RDZV__V1__LIST_EVENTS_REQUEST__INIT;
	Rdzv__V1__ListEventsResponse	*resp;
	uint32_t			 limit;
	char				 c[32];
	int				 rc;

	limit = ctl->limit ? ctl->limit : DEFAULT_LIMIT;
	req.rdzv_id = argv[0];
	req.after_seq = ctl->after;
	req.limit = limit;
	if ((rc = ctl_call(ctl, "ListEvents", &req.base,
	    &rdzv__v1__list_events_response__descriptor,
	    (ProtobufCMessage **)&resp)) != CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON) {
		json_t *o = json_object(), *a = json_array();
		json_object_set_new(o, "id", json_string(argv[0]));
		for (size_t i = 0; i < resp->n_events; i++)
			json_array_append_new(a, json_event(resp->events[i]));
		json_object_set_new(o, "events", a);
		rc = json_emit(o, false);
	} else if (resp->n_events == 0) {
		printf("job %s: no events%s\n", argv[0], ctl->after ?
		    " after that one" : "");
	} else {
		struct table *t = table_new(5, headers);
		for (size_t i = 0; i < resp->n_events; i++) {
			const Rdzv__V1__Event *e = resp->events[i];
			table_cell(t, "%" PRIu64, e->seq);
			table_cell(t, "%s", fmt_clock(c, sizeof(c),
			    e->time_unix_ms));
			table_cell(t, "%" PRIu64, e->generation);
			table_cell(t, "%s", e->kind);
			table_cell(t, "%s", e->message);
		}
		table_print(t, stdout, "");
		table_free(t);
		if (resp->n_events == limit)
			printf("(the first %u; --after %" PRIu64 " shows the "
			    "next)\n", limit, resp->events[limit - 1]->seq);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

static const struct option events_longopts[] = {
	{ "after", required_argument, NULL, 'A' },
	{ "limit", required_argument, NULL, 'n' },
	{ NULL, 0, NULL, 0 },
};

const struct ctl_cmd cmd_events_entry = {
	.name = "events",
	.args = "ID",
	.summary = "a job's event history, oldest first",
	.help =
	    "  --after SEQ                   only events after this one\n"
	    "  -n, --limit N                 at most N events (default 100)\n",
	.shortopts = "n:",
	.longopts = events_longopts,
	.min_args = 1,
	.max_args = 1,
	.option = events_option,
	.exec = events_exec,
};
