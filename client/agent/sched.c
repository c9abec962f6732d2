/*
 * Defaults from the batch scheduler (SPEC §6), for what neither a flag nor
 * an RDZV_* variable set: Slurm's SLURM_JOB_ID, SLURM_JOB_NUM_NODES,
 * SLURM_NODEID, SLURM_GPUS_ON_NODE and SLURM_RESTART_COUNT (the attempt a
 * requeued job joins with), then PBS's PBS_JOBID and PBS_NODEFILE (one line
 * per slot: the node count is the number of distinct hosts, this node's
 * index the position of its first line among them).
 * A value that does not parse is skipped with a warning: the user did not
 * write it and can override it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "text.h"

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* A count from the environment: 0, or -1 (warned) when it does not parse. */
static int
env_u32(const char *name, uint32_t min, uint32_t *out)
{
	const char *v = env(name);
	char *end;
	unsigned long n;

	if (v == NULL)
		return -1;
	errno = 0;
	n = strtoul(v, &end, 10);
	/* SLURM_GPUS_ON_NODE may be "2(x2)"-like on some versions: the
	 * leading number is the count. */
	if (errno != 0 || end == v || n < min || n > UINT32_MAX ||
	    (*end != '\0' && *end != '(')) {
		log_warnx("%s=%s is not a count; ignored", name, v);
		return -1;
	}
	*out = (uint32_t)n;
	return 0;
}

/*
 * A PBS array job's id has its index in brackets ("4243[1].server"), which
 * an rdzv_id cannot: "4243-1.server" stands for it. Returns |v| itself when
 * it has none.
 */
static const char *
array_id(const char *v)
{
	static char	 buf[RDZV_ID_MAX + 1];
	const char	*open = strchr(v, '['), *close;

	if (open == NULL || (close = strchr(open, ']')) == NULL ||
	    (size_t)snprintf(buf, sizeof(buf), "%.*s-%.*s%s", (int)(open - v),
	    v, (int)(close - open - 1), open + 1, close + 1) >= sizeof(buf))
		return v;
	log_info("PBS_JOBID %s: job id %s (the array index after '-')", v,
	    buf);
	return buf;
}

static void
job_id(struct agent_opts *o, const char *name)
{
	const char *v = env(name);
	char err[256];

	if (o->id != NULL || v == NULL)
		return;
	if (strcmp(name, "PBS_JOBID") == 0)
		v = array_id(v);
	if (rdzv_id_check(v, err, sizeof(err)) != 0) {
		log_warnx("%s=%s cannot be a job id (%s); ignored", name, v,
		    err);
		return;
	}
	o->id = v;
}

static void
slurm(struct agent_opts *o)
{
	uint32_t n;

	job_id(o, "SLURM_JOB_ID");
	if (env("SLURM_JOB_ID") != NULL &&
	    env_u32("SLURM_JOB_NUM_NODES", 1, &n) == 0)
		o->allocation_nodes = n;
	if (o->min_nodes == 0 && env_u32("SLURM_JOB_NUM_NODES", 1, &n) == 0)
		o->min_nodes = o->max_nodes = n;
	if (!o->has_node_rank && env_u32("SLURM_NODEID", 0, &n) == 0) {
		o->has_node_rank = true;
		o->node_rank = n;
	}
	/* A requeued job keeps its id; its run is told apart by this. */
	if (o->attempt == 0 && env_u32("SLURM_RESTART_COUNT", 0, &n) == 0 &&
	    n < UINT32_MAX)
		o->attempt = n + 1;
	if (!o->nproc_set && env_u32("SLURM_GPUS_ON_NODE", 0, &n) == 0 &&
	    n > 0) {
		o->nproc_set = true;
		o->nproc_mode = NPROC_SLURM;
		o->nproc = n;
	}
	/* The host as Slurm names it (rdzvd remembers hosts by it, and
	 * `scontrol update NodeName=` drains it by it): several node names
	 * may share one hostname. */
	const char *node = env("SLURMD_NODENAME");
	if (o->host == NULL && node != NULL && *node != '\0' &&
	    strlen(node) <= 255)
		o->host = node;
}

/* The host name without its domain. */
static void
short_name(const char *host, char *buf, size_t len)
{
	size_t n = strcspn(host, ".");

	if (n >= len)
		n = len - 1;
	memcpy(buf, host, n);
	buf[n] = '\0';
}

/*
 * The distinct hosts seen so far, in the order of their first line, and an
 * open-addressing hash of them (indexes into |hosts|), so that a node file
 * of tens of thousands of slots is read in linear time: a PBS job of 1,000
 * nodes with 64 slots each has 64,000 lines.
 */
struct host_set {
	char		**hosts;
	size_t		  n, cap;
	size_t		 *slots;	/* index + 1; 0 is empty */
	size_t		  nslots;	/* a power of 2, at least 2 * n */
};

/* FNV-1a: short names, no adversary but a fuzzer. */
static size_t
host_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

static int
host_set_grow(struct host_set *hs)
{
	size_t nslots = hs->nslots ? 2 * hs->nslots : 64, *slots;

	if ((slots = calloc(nslots, sizeof(*slots))) == NULL)
		return -1;
	for (size_t i = 0; i < hs->n; i++) {
		size_t k = host_hash(hs->hosts[i]) & (nslots - 1);
		while (slots[k] != 0)
			k = (k + 1) & (nslots - 1);
		slots[k] = i + 1;
	}
	free(hs->slots);
	hs->slots = slots;
	hs->nslots = nslots;
	return 0;
}

/*
 * Adds |host| unless it is there: 1 when added (it is hosts[n - 1]), 0
 * when it was there, -1 out of memory.
 */
static int
host_set_add(struct host_set *hs, const char *host)
{
	size_t k;

	if (2 * (hs->n + 1) > hs->nslots && host_set_grow(hs) != 0)
		return -1;
	k = host_hash(host) & (hs->nslots - 1);
	for (; hs->slots[k] != 0; k = (k + 1) & (hs->nslots - 1))
		if (strcmp(hs->hosts[hs->slots[k] - 1], host) == 0)
			return 0;
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? 2 * hs->cap : 16;
		char **h = realloc(hs->hosts, cap * sizeof(*h));
		if (h == NULL)
			return -1;
		hs->hosts = h;
		hs->cap = cap;
	}
	if ((hs->hosts[hs->n] = strdup(host)) == NULL)
		return -1;
	hs->slots[k] = ++hs->n;
	return 1;
}

static void
host_set_free(struct host_set *hs)
{
	for (size_t i = 0; i < hs->n; i++)
		free(hs->hosts[i]);
	free(hs->hosts);
	free(hs->slots);
}

int
sched_pbs_nodes(const char *nodefile, const char *hostname, uint32_t *count,
    uint32_t *index, char *err, size_t errlen)
{
	FILE *f;
	char line[512], me[256], s[256];
	struct host_set hs = { NULL, 0, 0, NULL, 0 };
	bool found = false;
	int rc = 0, added;

	if ((f = fopen(nodefile, "r")) == NULL) {
		snprintf(err, errlen, "cannot read %s: %s", nodefile,
		    strerror(errno));
		return -1;
	}
	short_name(hostname, me, sizeof(me));
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, " \t\r\n")] = '\0';
		if (line[0] == '\0')
			continue;
		if ((added = host_set_add(&hs, line)) < 0) {
			rc = -1;
			break;
		}
		if (added == 0 || found)
			continue;
		short_name(line, s, sizeof(s));
		if (strcmp(line, hostname) == 0 || strcmp(s, me) == 0) {
			found = true;
			*index = (uint32_t)(hs.n - 1);
		}
	}
	fclose(f);
	host_set_free(&hs);
	if (rc != 0) {
		snprintf(err, errlen, "%s: out of memory", nodefile);
		return -1;
	}
	if (hs.n == 0) {
		snprintf(err, errlen, "%s lists no host", nodefile);
		return -1;
	}
	if (hs.n > UINT32_MAX) {
		snprintf(err, errlen, "%s lists too many hosts", nodefile);
		return -1;
	}
	*count = (uint32_t)hs.n;
	if (!found)
		*index = UINT32_MAX;
	return 0;
}

static void
pbs(struct agent_opts *o)
{
	const char *nodefile = env("PBS_NODEFILE");
	char host[256], err[512];
	uint32_t count, index;

	job_id(o, "PBS_JOBID");
	if (nodefile == NULL || (o->min_nodes != 0 && o->has_node_rank))
		return;
	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	if (sched_pbs_nodes(nodefile, host, &count, &index, err,
	    sizeof(err)) != 0) {
		log_warnx("PBS_NODEFILE: %s; ignored", err);
		return;
	}
	o->allocation_nodes = count;
	if (o->min_nodes == 0)
		o->min_nodes = o->max_nodes = count;
	if (!o->has_node_rank && index != UINT32_MAX) {
		o->has_node_rank = true;
		o->node_rank = index;
	} else if (!o->has_node_rank) {
		log_warnx("PBS_NODEFILE %s does not list this host (%s): no "
		    "rank hint", nodefile, host);
	}
}

/*
 * Rule 13: in a Slurm or PBS allocation no node can come to replace one
 * that went (srun and pbsdsh never restart a task), so a job of a fixed
 * size asks for rejoin_timeout 0: a node lost, left or evicted fails it at
 * once, naming the node, instead of idling the survivors for the join
 * timeout. Spares in the
 * allocation (more nodes than --nnodes) still replace a lost node, and an
 * elastic --nnodes MIN:MAX, or --rejoin-timeout, keeps the job's default.
 */
static void
fixed_allocation(struct agent_opts *o, bool allocated)
{
	if (!allocated || o->has_rejoin_timeout || o->min_nodes == 0 ||
	    o->min_nodes != o->max_nodes)
		return;
	o->has_rejoin_timeout = true;
	o->rejoin_timeout_ms = 0;
	log_info("a fixed allocation of %u node%s: a node lost fails the "
	    "job at once, one that left or was evicted 1 s later (rejoin "
	    "timeout 0; --rejoin-timeout or an elastic --nnodes MIN:MAX "
	    "changes that)", o->min_nodes, plural(o->min_nodes));
}

/*
 * A Slurm allocation with more nodes than the job (train-spare.sbatch:
 * --nodes 5 with --nnodes 4) holds spares; the nodes ranked max_nodes and
 * above in node order are they, and join once the others formed the round
 * (session.c), so that which node is the spare follows SLURM_NODEID rather
 * than who joined last. Not PBS: a node file's index is no such promise.
 */
static void
spare_by_order(struct agent_opts *o)
{
	uint32_t n;

	if (env("SLURM_JOB_ID") == NULL ||
	    env_u32("SLURM_JOB_NUM_NODES", 1, &n) != 0 || o->max_nodes == 0 ||
	    n <= o->max_nodes || !o->has_node_rank ||
	    o->node_rank < o->max_nodes)
		return;
	o->spare_by_order = true;
}

void
sched_defaults(struct agent_opts *o)
{
	slurm(o);
	pbs(o);
	spare_by_order(o);
	fixed_allocation(o, (env("SLURM_JOB_ID") != NULL &&
	    env("SLURM_JOB_NUM_NODES") != NULL) || env("PBS_NODEFILE") != NULL);
}
