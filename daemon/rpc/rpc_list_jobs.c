/*
 * Control.ListJobs: every active job, or every job with `all`, as
 * summaries (no nodes, no events): what `rdzvctl status` shows. Paged
 * (proto/rdzv/v1/control.proto): a daemon holding tens of thousands of
 * ended jobs answers in pages that fit a message, never "too large". The
 * order is the jobs' creation (created_ms, then rdzv_id), and the page
 * token is the last job's place in it, "CREATED_MS/RDZV_ID", so a page
 * needs no state kept between calls and survives jobs coming and going.
 * Each job is shown as last committed (committed.c): a job whose changes
 * are not durable yet shows its state before them, and a job no commit
 * has held yet is not shown, so that no client sees what a crash could
 * take back, also while a slow commit is in flight.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzvd.h"
#include "rpc_int.h"

#define PAGE_DEFAULT	1000

/* A list holds summaries: no nodes, no events. */
static const struct convert_job_view summary;
#define PAGE_MAX	10000
#define PAGE_BYTES	(1024 * 1024)

struct place {
	int64_t		 created_ms;
	char		 id[RDZV_ID_MAX + 1];
};

static int
place_cmp(const struct core_job *j, const struct place *p)
{
	if (j->created_ms != p->created_ms)
		return j->created_ms < p->created_ms ? -1 : 1;
	return strcmp(j->rdzv_id, p->id);
}

static int
by_creation(const void *a, const void *b)
{
	const struct core_job *x = *(struct core_job *const *)a;
	const struct core_job *y = *(struct core_job *const *)b;

	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->rdzv_id, y->rdzv_id);
}

/* "CREATED_MS/RDZV_ID" -> *p; -1 when it is not one of ours. */
static int
token_parse(const char *t, struct place *p)
{
	char *end;
	const char *id;

	p->created_ms = strtoll(t, &end, 10);
	if (end == t || *end != '/')
		return -1;
	id = end + 1;
	if (*id == '\0' || strlen(id) > RDZV_ID_MAX)
		return -1;
	snprintf(p->id, sizeof(p->id), "%s", id);
	return 0;
}

void
rpc_list_jobs(struct grpc_call *call, const ProtobufCMessage *msg, void *arg)
{
	const Rdzv__V1__ListJobsRequest *req =
	    (const Rdzv__V1__ListJobsRequest *)msg;
	Rdzv__V1__ListJobsResponse resp = RDZV__V1__LIST_JOBS_RESPONSE__INIT;
	struct core_now now = turn_now();
	struct convert_arena a = { 0 };
	struct core_job *job, **v;
	struct place from = { 0 };
	bool has_from = req->page_token[0] != '\0';
	size_t n = 0, bytes = 0, budget, size;
	uint32_t page = req->page_size;
	char token[64 + RDZV_ID_MAX];

	if (has_from && token_parse(req->page_token, &from) != 0) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "page_token is "
		    "not one this rdzvd gave (send next_page_token back as "
		    "it came)");
		return;
	}
	if (page == 0)
		page = PAGE_DEFAULT;
	if (page > PAGE_MAX)
		page = PAGE_MAX;
	budget = rdzvd.cfg.max_message / 2;
	if (budget > PAGE_BYTES)
		budget = PAGE_BYTES;

	v = convert_alloc(&a, (rdzvd.core->n_jobs + 1) * sizeof(*v));
	TAILQ_FOREACH(job, &rdzvd.core->jobs, entry) {
		const struct core_job *seen = committed_job(job);
		if (seen != NULL && (req->all || !core_job_ended(seen)) &&
		    (!has_from || place_cmp(seen, &from) > 0))
			v[n++] = (struct core_job *)seen;
	}
	qsort(v, n, sizeof(*v), by_creation);

	resp.jobs = convert_alloc(&a, (page < n ? page : n + 1) *
	    sizeof(*resp.jobs));
	for (size_t i = 0; i < n && resp.n_jobs < page; i++) {
		Rdzv__V1__Job *pb = convert_job(&a, v[i], now, &summary);
		/* The field's tag and length, then the job. */
		size = protobuf_c_message_get_packed_size(&pb->base) + 6;
		if (resp.n_jobs > 0 && bytes + size > budget)
			break;
		bytes += size;
		resp.jobs[resp.n_jobs++] = pb;
	}
	if (resp.n_jobs < n) {
		job = v[resp.n_jobs - 1];
		snprintf(token, sizeof(token), "%" PRId64 "/%s",
		    job->created_ms, job->rdzv_id);
		resp.next_page_token = token;
	}
	if (grpc_call_reply(call, &resp.base) == -EMSGSIZE)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "job %s does "
		    "not fit in one message; raise --max-message",
		    resp.jobs[0]->rdzv_id);
	convert_free(&a);
}
