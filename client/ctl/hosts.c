/*
 * rdzvctl hosts [--state STATE]: what rdzvd remembers of each host across
 * jobs (docs/HEALTH.md): its state and why, its worker crashes, its GPUs'
 * latest checks, how rdzvd's on-quarantine command went for it. rdzvctl
 * host clear|quarantine HOST --reason TEXT: an admin's action on one host;
 * a quarantine says what that command did (rdzvd waits for it a few
 * seconds), and exits 1 when it failed: the host is quarantined in rdzvd
 * but the scheduler was not told. Every string came from a client and is
 * printed escaped (call.c).
 */
#include <stdio.h>
#include <string.h>

#include "rdzvctl.h"

static const char *
state_word(int s)
{
	switch (s) {
	case RDZV__V1__HOST_STATE__HOST_STATE_OK:
		return "ok";
	case RDZV__V1__HOST_STATE__HOST_STATE_SUSPECT:
		return "suspect";
	case RDZV__V1__HOST_STATE__HOST_STATE_QUARANTINED:
		return "quarantined";
	}
	return "unknown";
}

#define HOOK(s)	RDZV__V1__HOOK_RUN_STATE__HOOK_RUN_STATE_##s

/* "exited 0", "running", "killed", ...; "-" when none ran. */
static const char *
hook_cell(char *buf, size_t len, const Rdzv__V1__HookRun *r)
{
	if (r == NULL)
		return "-";
	if (r->state == HOOK(EXITED))
		snprintf(buf, len, "exited %d", r->exit_code);
	else if (r->state == HOOK(SIGNALED))
		snprintf(buf, len, "signal %d", r->signal);
	else if (r->state == HOOK(NOT_STARTED))
		snprintf(buf, len, "not started");
	else
		snprintf(buf, len, "%s", hook_state_name(r->state));
	return buf;
}

static bool
hook_failed(const Rdzv__V1__HookRun *r)
{
	return r != NULL && r->state != HOOK(QUEUED) &&
	    r->state != HOOK(RUNNING) && !(r->state == HOOK(EXITED) &&
	    r->exit_code == 0);
}

static const struct option hosts_longopts[] = {
	{ "state", required_argument, NULL, 's' },
	{ NULL, 0, NULL, 0 },
};

static int
hosts_option(struct ctl *ctl, int ch, const char *arg)
{
	if (ch != 's')
		return -1;
	for (int s = 1; s <= 3; s++)
		if (strcmp(arg, state_word(s)) == 0) {
			ctl->host_state = s;
			return 0;
		}
	return ctl_usage_error("--state %s: not ok, suspect or quarantined",
	    arg);
}

/* "7/8": GPUs whose latest check passed, of those checked; "-": none. */
static const char *
gpus_cell(char *buf, size_t len, const Rdzv__V1__Host *h)
{
	size_t ok = 0;

	if (h->n_gpus == 0)
		return "-";
	for (size_t i = 0; i < h->n_gpus; i++)
		ok += h->gpus[i]->ok;
	snprintf(buf, len, "%zu/%zu", ok, h->n_gpus);
	return buf;
}

static void
hosts_text(struct ctl *ctl, const Rdzv__V1__ListHostsResponse *r)
{
	static const char *const hdr[] = { "HOST", "STATE", "SINCE",
	    "CRASHES", "GPUS", "HOOK", "REASON" };
	struct table	*t;
	char		 age[32], g[32], hk[32];

	if (r->n_hosts == 0) {
		printf("no host%s\n", ctl->host_state ? " in that state" :
		    " is recorded (a host gets one when a GPU check fails on "
		    "it, a worker crashes or an admin acts on it)");
		return;
	}
	t = table_new(7, hdr);
	for (size_t i = 0; i < r->n_hosts; i++) {
		const Rdzv__V1__Host *h = r->hosts[i];

		table_cell(t, "%s", h->name);
		table_cell(t, "%s", state_word(h->state));
		table_cell(t, "%s", fmt_age(age, sizeof(age), ctl->now_ms,
		    h->since_unix_ms));
		table_cell(t, "%u/%u", h->recent_crashes, h->crashes);
		table_cell(t, "%s", gpus_cell(g, sizeof(g), h));
		table_cell(t, "%s", hook_cell(hk, sizeof(hk), h->hook));
		table_cell(t, "%s", h->reason[0] != '\0' ? h->reason : "-");
	}
	table_print(t, stdout, "");
	table_free(t);
}

static int
hosts_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__ListHostsRequest	 req = RDZV__V1__LIST_HOSTS_REQUEST__INIT;
	Rdzv__V1__ListHostsResponse	*r;
	int				 rc;

	req.state = (Rdzv__V1__HostState)ctl->host_state;
	if ((rc = ctl_call(ctl, "ListHosts", &req.base,
	    &rdzv__v1__list_hosts_response__descriptor,
	    (ProtobufCMessage **)&r)) != CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON) {
		json_t *a = json_array();
		for (size_t i = 0; i < r->n_hosts; i++)
			json_array_append_new(a, json_host(r->hosts[i]));
		json_t *o = json_object();
		json_object_set_new(o, "hosts", a);
		rc = json_emit(o, false);
	} else
		hosts_text(ctl, r);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

const struct ctl_cmd cmd_hosts_entry = {
	.name = "hosts",
	.args = "",
	.summary = "hosts rdzvd remembers across jobs: state, reason, "
	    "crashes, GPUs",
	.help =
	    "  -s, --state ok|suspect|quarantined  only hosts in that state\n",
	.shortopts = "s:",
	.longopts = hosts_longopts,
	.min_args = 0,
	.max_args = 0,
	.option = hosts_option,
	.exec = hosts_exec,
};

/* What the on-quarantine command did with this quarantine. */
static void
quarantine_note(const Rdzv__V1__Host *h)
{
	const Rdzv__V1__HookRun *r = h->hook;
	char cell[32];

	if (r == NULL)
		return;		/* no command set */
	if (r->state == HOOK(QUEUED) || r->state == HOOK(RUNNING)) {
		printf("on-quarantine: %s %s still %s; `rdzvctl hosts` shows "
		    "how it ends\n", r->command, h->name, r->state ==
		    HOOK(QUEUED) ? "waits to run" : "runs");
		return;
	}
	if (!hook_failed(r)) {
		printf("on-quarantine: %s %s exited 0%s%s\n", r->command,
		    h->name, *r->output ? ": " : "", r->output);
		return;
	}
	fprintf(stderr, "rdzvctl: host %s is quarantined in rdzvd, but its "
	    "on-quarantine command failed (%s%s%s): the scheduler may still "
	    "place jobs there\n", h->name, hook_cell(cell, sizeof(cell), r),
	    *r->output ? ": " : "", r->output);
}

/* A cleared host whose quarantine ran the command: what it did (a Slurm
 * drain) is still in force; rdzvd does not undo it. */
static void
clear_note(const Rdzv__V1__Host *h)
{
	const Rdzv__V1__HookRun *r = h->hook;
	char cell[32];

	if (r == NULL || r->started_unix_ms == 0)
		return;
	printf("note: rdzvd's on-quarantine command ran for %s (%s%s%s) and "
	    "is not undone by a clear; undo it where it acted (under Slurm: "
	    "scontrol update NodeName=%s State=RESUME)\n", h->name,
	    hook_cell(cell, sizeof(cell), r), *r->output ? ": " : "",
	    r->output, h->name);
}

static int
host_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__SetHostRequest	 req = RDZV__V1__SET_HOST_REQUEST__INIT;
	Rdzv__V1__Host			*h;
	int				 rc;

	if (strcmp(argv[0], "clear") == 0)
		req.state = RDZV__V1__HOST_STATE__HOST_STATE_OK;
	else if (strcmp(argv[0], "quarantine") == 0)
		req.state = RDZV__V1__HOST_STATE__HOST_STATE_QUARANTINED;
	else
		return ctl_usage_error("host: '%s' is not clear or quarantine",
		    argv[0]);
	req.host = argv[1];
	req.reason = (char *)(ctl->reason != NULL ? ctl->reason : "");
	if ((rc = ctl_call(ctl, "SetHost", &req.base,
	    &rdzv__v1__host__descriptor, (ProtobufCMessage **)&h)) !=
	    CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON)
		rc = json_emit(json_host(h), false);
	else {
		printf("host %s: %s: %s\n", h->name, state_word(h->state),
		    h->reason);
		if (req.state == RDZV__V1__HOST_STATE__HOST_STATE_OK)
			clear_note(h);
		else
			quarantine_note(h);
	}
	if (rc == CTL_EXIT_OK &&
	    req.state == RDZV__V1__HOST_STATE__HOST_STATE_QUARANTINED &&
	    hook_failed(h->hook))
		rc = CTL_EXIT_ERROR;
	protobuf_c_message_free_unpacked(&h->base, NULL);
	return rc;
}

const struct ctl_cmd cmd_host_entry = {
	.name = "host",
	.args = "clear|quarantine HOST",
	.summary = "an admin clears a host, or quarantines it (its nodes are "
	    "evicted)",
	.help =
	    "  -r, --reason TEXT             why, for the record and the "
	    "hook\n",
	.shortopts = "r:",
	.longopts = action_longopts,
	.min_args = 2,
	.max_args = 2,
	.option = action_option,
	.exec = host_exec,
};
