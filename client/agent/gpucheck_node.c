/*
 * The agent's side of the GPU check (SPEC §7), through gpucheck_run.h
 * only: the agent process itself never loads libcuda. Before the join it
 * counts and checks its GPUs in child processes and decides how many
 * workers it offers; each worker checks its own GPU between fork and exec,
 * and what a failure means depends on the policy:
 *
 *   warn     report the result to rdzvd, run anyway;
 *   exclude  stop the workers, offer one worker fewer (rdzvd re-rounds),
 *            leave the GPU out of CUDA_VISIBLE_DEVICES;
 *   strict   stop the workers, leave the job, exit 1.
 *
 * This file keeps the results and says which of those a result asks for
 * (enum gpucheck_action); agent.c does it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers.h"
#include "log.h"
#include "text.h"

static const char *
mode_name(const struct agent_opts *o)
{
	switch (o->nproc_mode) {
	case NPROC_GPU:
		return "--nproc-per-node gpu";
	case NPROC_AUTO:
		return "--nproc-per-node auto";
	case NPROC_SLURM:
		return "SLURM_GPUS_ON_NODE";
	default:
		return "--nproc-per-node";
	}
}

static int
set_visible(struct gpucheck_node *g)
{
	g->visible[0] = '\0';
	if (g->policy != GPUCHECK_EXCLUDE)
		return 0;
	return gpucheck_visible_devices(g->use, (size_t)g->n_use, g->visible,
	    sizeof(g->visible));
}

/* How many workers when there is no GPU to check: 0, or an exit status. */
static int
no_gpu(struct agent_opts *o, struct gpucheck_node *g, const char *why,
    uint32_t *nproc)
{
	g->policy = GPUCHECK_OFF;
	switch (o->nproc_mode) {
	case NPROC_GPU:
		fprintf(stderr, "rdzv-agent: --nproc-per-node gpu: no GPU "
		    "found (%s); give a number of workers instead\n", why);
		return AGENT_EXIT_USAGE;
	case NPROC_AUTO:
		log_info("no GPU found (%s): --nproc-per-node auto runs one "
		    "worker", why);
		*nproc = 1;
		return 0;
	case NPROC_SLURM:
		log_warnx("SLURM_GPUS_ON_NODE=%u but no GPU found (%s): "
		    "running %u worker%s without the GPU check", o->nproc,
		    why, o->nproc, plural(o->nproc));
		*nproc = o->nproc;
		return 0;
	default:
		if (o->gpucheck.policy == GPUCHECK_WARN) {
			log_warnx("no GPU found (%s): running %u worker%s "
			    "(--health-check warn)", why, o->nproc,
			    plural(o->nproc));
			*nproc = o->nproc;
			return 0;
		}
		fprintf(stderr, "rdzv-agent: --health-check %s: no GPU found "
		    "(%s); use --health-check off on a node without GPUs\n",
		    gpucheck_policy_name(o->gpucheck.policy), why);
		return AGENT_EXIT_FAILED;
	}
}

/* Counts the GPUs in a child process (policy off). */
static int
count_only(struct agent_opts *o, uint32_t *nproc)
{
	struct gpucheck_node dummy = { 0 };
	char why[256];
	int count = 0;

	if (o->nproc_mode == NPROC_FIXED || o->nproc_mode == NPROC_SLURM) {
		*nproc = o->nproc;
		return 0;
	}
	if (gpucheck_run_count(o->gpucheck.timeout_ms, &count, why,
	    sizeof(why)) != 0)
		return no_gpu(o, &dummy, why, nproc);
	if (count == 0)
		return no_gpu(o, &dummy, "the driver reports 0 devices",
		    nproc);
	*nproc = (uint32_t)count;
	return 0;
}

int
gpucheck_node_plan(struct agent_opts *o, struct gpucheck_node *g,
    uint32_t *nproc)
{
	char why[256], desc[512];
	int count = 0, n, passed;

	memset(g, 0, sizeof(*g));
	g->policy = o->gpucheck.policy;
	if (g->policy == GPUCHECK_OFF)
		return count_only(o, nproc);
	if (gpucheck_run_count(o->gpucheck.timeout_ms, &count, why,
	    sizeof(why)) != 0)
		return no_gpu(o, g, why, nproc);
	if (count == 0)
		return no_gpu(o, g, "the driver reports 0 devices", nproc);

	n = count;
	if (o->nproc_mode == NPROC_FIXED && o->nproc < (uint32_t)count)
		n = (int)o->nproc;
	if (o->nproc_mode == NPROC_FIXED && o->nproc > (uint32_t)count &&
	    g->policy != GPUCHECK_WARN) {
		fprintf(stderr, "rdzv-agent: --nproc-per-node %u with "
		    "--health-check %s: this node has only %d GPU%s\n",
		    o->nproc, gpucheck_policy_name(g->policy), count,
		    plural(count));
		return AGENT_EXIT_USAGE;
	}
	if (o->nproc_mode == NPROC_SLURM && o->nproc != (uint32_t)count)
		log_warnx("SLURM_GPUS_ON_NODE=%u but %d GPUs are visible: "
		    "one worker per visible GPU", o->nproc, count);
	g->results = xcalloc((size_t)n, sizeof(*g->results));
	g->use = xcalloc((size_t)n, sizeof(*g->use));
	g->n = n;
	passed = gpucheck_run(&o->gpucheck, n, g->results);
	log_info("GPU check: %d of %d GPU%s passed", passed, n,
	    plural(n));
	for (int d = 0; d < n; d++) {
		if (g->results[d].ok || g->policy == GPUCHECK_WARN)
			g->use[g->n_use++] = d;
		if (g->results[d].ok)
			continue;
		gpucheck_describe(&g->results[d], desc, sizeof(desc));
		if (g->policy == GPUCHECK_STRICT)
			fprintf(stderr, "rdzv-agent: GPU check failed: %s "
			    "(--health-check strict: not joining)\n", desc);
		else
			log_warnx("GPU check failed: %s%s", desc,
			    g->policy == GPUCHECK_EXCLUDE ? "; left out" :
			    "; used anyway (--health-check warn)");
	}
	if (g->policy == GPUCHECK_STRICT && passed < n)
		return AGENT_EXIT_FAILED;
	if (g->n_use == 0) {
		fprintf(stderr, "rdzv-agent: no GPU passed the check: not "
		    "joining\n");
		return AGENT_EXIT_FAILED;
	}
	if (set_visible(g) != 0)
		fatalx("CUDA_VISIBLE_DEVICES does not fit");
	/* Under warn a fixed count may exceed the GPUs: the extra workers
	 * run unchecked. */
	*nproc = o->nproc_mode == NPROC_FIXED && g->policy == GPUCHECK_WARN ?
	    o->nproc : (uint32_t)g->n_use;
	log_debug("%s: %u worker%s, GPU policy %s", mode_name(o), *nproc,
	    plural(*nproc), gpucheck_policy_name(g->policy));
	return 0;
}

int
gpucheck_node_device(const struct gpucheck_node *g, int local_rank)
{
	if (g->policy == GPUCHECK_OFF || local_rank >= g->n_use)
		return -1;
	return g->use[local_rank];
}

void
gpucheck_node_record(struct gpucheck_node *g, const struct gpucheck_result *r)
{
	if (r->device >= 0 && r->device < g->n)
		g->results[r->device] = *r;
}

/* Leaves |devices| out; returns how many GPUs remain in use. */
int
gpucheck_node_exclude(struct gpucheck_node *g, const int *devices, int n)
{
	int k = 0;

	for (int i = 0; i < g->n_use; i++) {
		bool drop = false;
		for (int j = 0; j < n; j++)
			drop = drop || devices[j] == g->use[i];
		if (!drop)
			g->use[k++] = g->use[i];
	}
	g->n_use = k;
	if (set_visible(g) != 0)
		fatalx("CUDA_VISIBLE_DEVICES does not fit");
	return k;
}

/*
 * A worker's check result: recorded, logged, and what it asks of the
 * agent under the policy. A GPU that fails under exclude is remembered,
 * to be left out once the set has ended (gpucheck_node_ended). |desc|
 * gets the failure described, for the agent's message.
 */
enum gpucheck_action
gpucheck_node_worker(struct gpucheck_node *g, uint64_t gen, int local_rank,
    const struct gpucheck_result *r, char *desc, size_t len)
{
	gpucheck_node_record(g, r);
	if (r->ok) {
		log_debug("generation %llu: local rank %d: GPU %d passed its "
		    "check", (unsigned long long)gen, local_rank, r->device);
		return GPUCHECK_DO_NOTHING;
	}
	gpucheck_describe(r, desc, len);
	switch (g->policy) {
	case GPUCHECK_WARN:
		log_warnx("generation %llu: local rank %d: GPU check failed: "
		    "%s; running anyway (--health-check warn)",
		    (unsigned long long)gen, local_rank, desc);
		return GPUCHECK_DO_REPORT;
	case GPUCHECK_STRICT:
		return GPUCHECK_DO_LEAVE;
	default:
		log_warnx("generation %llu: local rank %d: GPU check failed: "
		    "%s; leaving the GPU out", (unsigned long long)gen,
		    local_rank, desc);
		if (g->n_failed < (int)(sizeof(g->failed) /
		    sizeof(g->failed[0])))
			g->failed[g->n_failed++] = r->device;
		return GPUCHECK_DO_STOP;
	}
}

/*
 * The set of workers ended: the GPUs that failed in it under exclude are
 * left out. Returns how many GPUs remain in use when that changed them
 * (the node offers that many workers from now on, and rdzvd re-rounds
 * without a restart counted; 0: none is left), or -1 when nothing changed.
 */
int
gpucheck_node_ended(struct gpucheck_node *g)
{
	int left;

	if (g->n_failed == 0 || g->policy != GPUCHECK_EXCLUDE) {
		g->n_failed = 0;
		return -1;
	}
	left = gpucheck_node_exclude(g, g->failed, g->n_failed);
	g->n_failed = 0;
	return left;
}

int
gpucheck_pb_new(const struct gpucheck_node *g, struct gpucheck_pb *pb)
{
	size_t n = (size_t)g->n;

	memset(pb, 0, sizeof(*pb));
	if (n == 0)
		return 0;
	pb->ptrs = calloc(n, sizeof(*pb->ptrs));
	pb->res = calloc(n, sizeof(*pb->res));
	pb->steps = calloc(n * GPUCHECK_STEPS_MAX, sizeof(*pb->steps));
	pb->step_ptrs = calloc(n * GPUCHECK_STEPS_MAX, sizeof(*pb->step_ptrs));
	if (pb->ptrs == NULL || pb->res == NULL || pb->steps == NULL ||
	    pb->step_ptrs == NULL) {
		gpucheck_pb_free(pb);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		rdzv__v1__gpu_result__init(&pb->res[i]);
		gpucheck_to_pb(&g->results[i], &pb->res[i],
		    pb->steps + i * GPUCHECK_STEPS_MAX,
		    pb->step_ptrs + i * GPUCHECK_STEPS_MAX);
		pb->ptrs[i] = &pb->res[i];
	}
	pb->n = n;
	return 0;
}

void
gpucheck_pb_free(struct gpucheck_pb *pb)
{
	free(pb->ptrs);
	free(pb->res);
	free(pb->steps);
	free(pb->step_ptrs);
	memset(pb, 0, sizeof(*pb));
}

void
gpucheck_node_free(struct gpucheck_node *g)
{
	free(g->results);
	free(g->use);
	memset(g, 0, sizeof(*g));
}
