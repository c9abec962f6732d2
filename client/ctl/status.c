/*
 * rdzvctl status [ID]: what an operator needs at a glance (SPEC §8). The
 * list answers which jobs exist and which are stuck; one job in detail
 * answers why it waits and for how long, who holds which ranks, which GPUs
 * failed, and what happened last.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzvctl.h"

#define DEFAULT_EVENTS	10
#define PAGE_SIZE	1000	/* jobs asked for per ListJobs page */

/*
 * Page after page (ListJobs is paged: a daemon may hold tens of thousands
 * of ended jobs), until the last page or --limit jobs.
 */
static int
status_list(struct ctl *ctl)
{
	Rdzv__V1__ListJobsRequest	 req =
	    RDZV__V1__LIST_JOBS_REQUEST__INIT;
	Rdzv__V1__ListJobsResponse	*resp, **pages = NULL;
	Rdzv__V1__Job			**jobs = NULL;
	size_t				 n_pages = 0, n = 0;
	char				*token = NULL;
	bool				 more = false;
	int				 rc = CTL_EXIT_OK;

	req.all = ctl->all;
	for (;;) {
		req.page_size = PAGE_SIZE;
		if (ctl->max_jobs != 0 && ctl->max_jobs - n < PAGE_SIZE)
			req.page_size = (uint32_t)(ctl->max_jobs - n);
		req.page_token = token != NULL ? token : (char *)"";
		if ((rc = ctl_call(ctl, "ListJobs", &req.base,
		    &rdzv__v1__list_jobs_response__descriptor,
		    (ProtobufCMessage **)&resp)) != CTL_EXIT_OK)
			goto out;
		if ((pages = reallocarray(pages, n_pages + 1,
		    sizeof(*pages))) == NULL ||
		    (jobs = reallocarray(jobs, n + resp->n_jobs + 1,
		    sizeof(*jobs))) == NULL) {
			fprintf(stderr, "rdzvctl: out of memory\n");
			protobuf_c_message_free_unpacked(&resp->base, NULL);
			rc = CTL_EXIT_ERROR;
			goto out;
		}
		pages[n_pages++] = resp;
		for (size_t i = 0; i < resp->n_jobs &&
		    (ctl->max_jobs == 0 || n < ctl->max_jobs); i++)
			jobs[n++] = resp->jobs[i];
		token = resp->next_page_token;
		more = token != NULL && *token != '\0';
		/* A page with no job and a token would loop for ever. */
		if (!more || resp->n_jobs == 0 ||
		    (ctl->max_jobs != 0 && n >= ctl->max_jobs))
			break;
	}
	if (ctl->output == CTL_OUTPUT_JSON) {
		json_t *arr = json_array(), *o = json_object();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_job(jobs[i], false));
		json_object_set_new(o, "jobs", arr);
		rc = json_emit(o, false);
	} else
		jobtext_list(ctl, stdout, jobs, n);
	if (more)
		fprintf(stderr, "rdzvctl: the first %zu jobs shown (--limit); "
		    "rdzvd holds more\n", n);
out:
	for (size_t i = 0; i < n_pages; i++)
		protobuf_c_message_free_unpacked(&pages[i]->base, NULL);
	free(pages);
	free(jobs);
	return rc;
}

static int
status_one(struct ctl *ctl, const char *id)
{
	Rdzv__V1__Job	*job;
	uint32_t	 events = ctl->limit ? ctl->limit : DEFAULT_EVENTS;
	int		 rc;

	if ((rc = ctl_get_job(ctl, id, events, &job)) != CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON)
		rc = json_emit(json_job(job, true), false);
	else
		jobtext_detail(ctl, stdout, job, true);
	protobuf_c_message_free_unpacked(&job->base, NULL);
	return rc;
}

static int
status_option(struct ctl *ctl, int ch, const char *arg)
{
	char	*end;
	unsigned long v;

	switch (ch) {
	case 'a':
		ctl->all = true;
		return 0;
	case 'w':
		ctl->watch = true;
		return 0;
	case 'n':
		v = strtoul(arg, &end, 10);
		if (*arg == '\0' || *end != '\0' || v == 0 || v > 10000)
			return ctl_usage_error("status: --events %s: give a "
			    "number of events from 1 to 10000", arg);
		ctl->limit = (uint32_t)v;
		return 0;
	case 'l':
		v = strtoul(arg, &end, 10);
		if (*arg == '\0' || *end != '\0' || v == 0 || v > 100000000)
			return ctl_usage_error("status: --limit %s: give a "
			    "number of jobs from 1 to 100000000", arg);
		ctl->max_jobs = (uint32_t)v;
		return 0;
	}
	return -1;
}

static int
status_exec(struct ctl *ctl, int argc, char **argv)
{
	if (ctl->watch)
		return watch_run(ctl, argc > 0 ? argv[0] : NULL);
	return argc > 0 ? status_one(ctl, argv[0]) : status_list(ctl);
}

static const struct option status_longopts[] = {
	{ "all", no_argument, NULL, 'a' },
	{ "watch", no_argument, NULL, 'w' },
	{ "events", required_argument, NULL, 'n' },
	{ "limit", required_argument, NULL, 'l' },
	{ NULL, 0, NULL, 0 },
};

const struct ctl_cmd cmd_status_entry = {
	.name = "status",
	.args = "[ID]",
	.summary = "jobs at a glance, or one job in detail",
	.help =
	    "  -a, --all                     also list ended jobs\n"
	    "  -w, --watch                   follow changes live (redrawn on\n"
	    "                                a terminal, a line per change\n"
	    "                                when piped)\n"
	    "  -n, --events N                latest events to show with ID\n"
	    "                                (default 10)\n"
	    "  -l, --limit N                 list at most N jobs (the first\n"
	    "                                N created; default all)\n",
	.shortopts = "awn:l:",
	.longopts = status_longopts,
	.min_args = 0,
	.max_args = 1,
	.option = status_option,
	.exec = status_exec,
};
