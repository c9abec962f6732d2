/*
 * The etcd store's values (store_etcd.h): the core's jobs, nodes, events
 * and rounds as the protobuf messages of proto/rdzv/store/v1/store.proto,
 * and back. Every persisted field of the core has its field; a value
 * missing from an older record reads as protobuf's default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_etcd.h"
#include "text.h"

/* protobuf-c wants char * for the strings it will not write to. */
#define S(x)	((char *)(x))

/* Packs a message into a fresh buffer. */
static uint8_t *
pack(const ProtobufCMessage *m, size_t *len)
{
	uint8_t	*buf;

	*len = protobuf_c_message_get_packed_size(m);
	if ((buf = malloc(*len > 0 ? *len : 1)) == NULL)
		return NULL;
	protobuf_c_message_pack(m, buf);
	return buf;
}

uint8_t *
enc_meta(uint64_t next_node_id, const struct core *c, size_t *len)
{
	Rdzv__Store__V1__Meta	  m = RDZV__STORE__V1__META__INIT;
	Rdzv__Store__V1__Refusal	 *rm = NULL, **rp = NULL;
	uint8_t			 *buf;

	m.format = STORE_ETCD_FORMAT;
	m.next_node_id = next_node_id;
	if (c != NULL && c->n_refusals > 0) {
		if ((rm = calloc(c->n_refusals, sizeof(*rm))) == NULL ||
		    (rp = calloc(c->n_refusals, sizeof(*rp))) == NULL) {
			free(rm);
			return NULL;
		}
		for (size_t i = 0; i < c->n_refusals; i++) {
			const struct core_refusal *r = &c->refusals[i];
			uint64_t left = core_refusal_left(r, c->now);

			if (left == 0)
				continue;
			rdzv__store__v1__refusal__init(&rm[m.n_refusals]);
			rm[m.n_refusals].rdzv_id = S(r->rdzv_id);
			rm[m.n_refusals].identity = S(r->identity);
			rm[m.n_refusals].why = S(r->why);
			rm[m.n_refusals].allocation_nodes = r->allocation_nodes;
			rm[m.n_refusals].attempt = r->attempt;
			rm[m.n_refusals].left_ms = left;
			rp[m.n_refusals] = &rm[m.n_refusals];
			m.n_refusals++;
		}
		m.refusals = rp;
	}
	buf = pack(&m.base, len);
	free(rm);
	free(rp);
	return buf;
}

uint8_t *
enc_job(const struct core_job *j, const struct ejob *ej, size_t *len)
{
	Rdzv__Store__V1__Job	  m = RDZV__STORE__V1__JOB__INIT;
	Rdzv__Store__V1__BucketRef	 *refs, **ptrs;
	uint8_t			 *buf;
	size_t			  i;

	refs = calloc(ej->nb + 1, sizeof(*refs));
	ptrs = calloc(ej->nb + 1, sizeof(*ptrs));
	if (refs == NULL || ptrs == NULL) {
		free(refs);
		free(ptrs);
		return NULL;
	}
	m.rdzv_id = S(j->rdzv_id);
	m.owner = S(j->owner);
	m.min_nodes = j->settings.min_nodes;
	m.max_nodes = j->settings.max_nodes;
	m.last_call_timeout_ms = j->settings.last_call_timeout_ms;
	m.join_timeout_ms = j->settings.join_timeout_ms;
	m.max_restarts = j->settings.max_restarts;
	m.lease_ttl_ms = j->settings.lease_ttl_ms;
	m.reconnect_grace_ms = j->settings.reconnect_grace_ms;
	m.state = j->state;
	m.reason = S(j->reason);
	m.generation = j->generation;
	m.restart_count = j->restart_count;
	m.attempt = j->attempt;
	m.created_ms = j->created_ms;
	m.updated_ms = j->updated_ms;
	m.ended_ms = j->ended_ms;
	m.event_seq = j->event_seq;
	m.last_call_left_ms = j->last_call_left_ms;
	m.join_left_ms = j->join_left_ms;
	m.held_failure = j->held_failure;
	m.held_reason = S(j->held_failure ? j->held_reason : "");
	m.rejoin_timeout_ms = j->settings.rejoin_timeout_ms;
	m.rejoin_lost = S(j->rejoin_lost);
	m.hang_timeout_ms = j->settings.hang_timeout_ms;
	m.rank_policy = j->settings.rank_policy;
	m.restart = j->settings.restart;
	m.n_refused = j->n_refused;
	m.refusal_failed = j->refusal_failed;
	m.preload = S(j->settings.preload);
	m.wver = ej->wver;
	for (i = 0; i < ej->nb; i++) {
		rdzv__store__v1__bucket_ref__init(&refs[i]);
		refs[i].index = ej->bidx[i];
		refs[i].wver = ej->bver[i];
		ptrs[i] = &refs[i];
	}
	m.n_buckets = ej->nb;
	m.buckets = ptrs;
	buf = pack(&m.base, len);
	free(refs);
	free(ptrs);
	return buf;
}

/* A GPU's result, a node's or a host's: one message, one way each way. */
void
enc_gpu(const struct core_gpu *g, Rdzv__Store__V1__Gpu *m)
{
	rdzv__store__v1__gpu__init(m);
	m->device = g->device;
	m->ok = g->ok;
	m->name = S(g->name);
	m->uuid = S(g->uuid);
	m->failed_step = S(g->failed_step);
	m->error = S(g->error);
	m->total_mem = g->total_mem;
}

void
dec_gpu(const Rdzv__Store__V1__Gpu *m, struct core_gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->device = m->device;
	g->ok = m->ok;
	textcpy(g->name, sizeof(g->name), m->name);
	textcpy(g->uuid, sizeof(g->uuid), m->uuid);
	textcpy(g->failed_step, sizeof(g->failed_step), m->failed_step);
	textcpy(g->error, sizeof(g->error), m->error);
	g->total_mem = m->total_mem;
}

static void
node_fill(Rdzv__Store__V1__Node *m, Rdzv__Store__V1__Gpu *gm, Rdzv__Store__V1__Gpu **gp,
    const struct core_node *n)
{
	uint32_t	i;

	rdzv__store__v1__node__init(m);
	m->node_id = n->node_id;
	m->session_id.data = (uint8_t *)n->session_id;
	m->session_id.len = CORE_SESSION_LEN;
	m->hostname = S(n->hostname);
	m->advertise_addr = S(n->advertise_addr);
	m->master_port = n->master_port;
	m->nproc = n->nproc;
	m->has_rank_hint = n->has_rank_hint;
	m->rank_hint = n->rank_hint;
	m->state = n->state;
	m->group_rank = n->group_rank;
	m->base_rank = n->base_rank;
	m->generation = n->generation;
	m->arrival = n->arrival;
	m->joined_ms = n->joined_ms;
	m->gpus_healthy = n->gpus_healthy;
	m->gpus_total = n->gpus_total;
	m->has_reason = n->reason != NULL;
	m->reason = S(n->reason != NULL ? n->reason : "");
	m->port_offer = n->port_offer;
	m->has_prev_rank = n->prev_rank >= 0;
	m->prev_rank = n->prev_rank >= 0 ? (uint32_t)n->prev_rank : 0;
	if (n->has_token) {
		m->join_token.data = (uint8_t *)n->join_token;
		m->join_token.len = CORE_TOKEN_LEN;
	}
	m->has_step = n->has_step;
	m->step = n->has_step ? n->step : 0;
	m->step_gen = n->has_step ? n->step_gen : 0;
	m->step_wall_ms = n->has_step ? n->step_wall_ms : 0;
	m->last_seen_ms = n->last_seen_ms;
	for (i = 0; i < n->n_gpus; i++) {
		enc_gpu(&n->gpus[i], &gm[i]);
		gp[i] = &gm[i];
	}
	m->n_gpus = n->n_gpus;
	m->gpus = gp;
}

/* Every node of the job whose id falls in bucket |index| (all of them for
 * STORE_ETCD_BUCKET_ALL). */
uint8_t *
enc_bucket(const struct core_job *j, uint64_t index, size_t *len)
{
	Rdzv__Store__V1__NodeBucket	  b = RDZV__STORE__V1__NODE_BUCKET__INIT;
	Rdzv__Store__V1__Node	 *nm = NULL, **np = NULL;
	Rdzv__Store__V1__Gpu	 *gm = NULL, **gp = NULL;
	const struct core_node	 *n;
	size_t			  k = 0, ng = 0, g = 0;
	uint8_t			 *buf = NULL;

	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (index == STORE_ETCD_BUCKET_ALL ||
		    n->node_id / STORE_ETCD_BUCKET == index) {
			k++;
			ng += n->n_gpus;
		}
	}
	nm = calloc(k + 1, sizeof(*nm));
	np = calloc(k + 1, sizeof(*np));
	gm = calloc(ng + 1, sizeof(*gm));
	gp = calloc(ng + 1, sizeof(*gp));
	if (nm == NULL || np == NULL || gm == NULL || gp == NULL)
		goto out;
	k = 0;
	TAILQ_FOREACH(n, &j->nodes, entry) {
		if (index != STORE_ETCD_BUCKET_ALL &&
		    n->node_id / STORE_ETCD_BUCKET != index)
			continue;
		node_fill(&nm[k], &gm[g], &gp[g], n);
		g += n->n_gpus;
		np[k] = &nm[k];
		k++;
	}
	b.n_nodes = k;
	b.nodes = np;
	buf = pack(&b.base, len);
out:
	free(nm);
	free(np);
	free(gm);
	free(gp);
	return buf;
}

void
enc_chunks_free(uint8_t **bufs, size_t *lens, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(lens);
}

/* Appends the packed |log| as one more chunk. */
static int
chunk_add(Rdzv__Store__V1__Log *log, uint8_t ***bufs, size_t **lens, size_t *n)
{
	uint8_t		**b;
	size_t		 *l;

	if ((b = reallocarray(*bufs, *n + 1, sizeof(*b))) == NULL)
		return -1;
	*bufs = b;
	if ((l = reallocarray(*lens, *n + 1, sizeof(*l))) == NULL)
		return -1;
	*lens = l;
	if ((b[*n] = pack(&log->base, &l[*n])) == NULL)
		return -1;
	(*n)++;
	return 0;
}

/* The messages enc_log() builds for one job's part of a turn, in arrays
 * sized for it and freed together; the log points into them. */
struct log_msgs {
	Rdzv__Store__V1__Event	 *em, **ep;
	Rdzv__Store__V1__Round	 *rm, **rp;
	Rdzv__Store__V1__Member	 *mm, **mp;
};

static int
log_msgs_alloc(struct log_msgs *lm, size_t ne, size_t nr, size_t nm)
{
	lm->em = calloc(ne + 1, sizeof(*lm->em));
	lm->ep = calloc(ne + 1, sizeof(*lm->ep));
	lm->rm = calloc(nr + 1, sizeof(*lm->rm));
	lm->rp = calloc(nr + 1, sizeof(*lm->rp));
	lm->mm = calloc(nm + 1, sizeof(*lm->mm));
	lm->mp = calloc(nm + 1, sizeof(*lm->mp));
	if (lm->em == NULL || lm->ep == NULL || lm->rm == NULL ||
	    lm->rp == NULL || lm->mm == NULL || lm->mp == NULL)
		return -1;
	return 0;
}

static void
log_msgs_free(struct log_msgs *lm)
{
	free(lm->em);
	free(lm->ep);
	free(lm->rm);
	free(lm->rp);
	free(lm->mm);
	free(lm->mp);
}

/* The job's new rounds, all into the first chunk; returns the size they
 * take there. */
static size_t
log_rounds(const struct core *c, const struct core_job *j,
    struct log_msgs *lm, Rdzv__Store__V1__Log *log)
{
	size_t k = 0, nm = 0, size = 0;

	log->rounds = lm->rp;
	for (size_t i = 0; i < c->n_new_rounds; i++) {
		const struct core_round *r = &c->new_rounds[i];
		Rdzv__Store__V1__Round *m = &lm->rm[k];

		if (r->job != j)
			continue;
		rdzv__store__v1__round__init(m);
		m->generation = r->generation;
		m->world_size = r->world_size;
		m->master_addr = S(r->master_addr);
		m->master_port = r->master_port;
		m->restart_count = r->restart_count;
		m->formed_ms = c->now.wall_ms;
		m->members = &lm->mp[nm];
		for (uint32_t x = 0; x < r->n; x++) {
			Rdzv__Store__V1__Member *mm = &lm->mm[nm];

			rdzv__store__v1__member__init(mm);
			mm->node_id = r->members[x].node_id;
			mm->group_rank = r->members[x].group_rank;
			mm->base_rank = r->members[x].base_rank;
			mm->nproc = r->members[x].nproc;
			lm->mp[nm++] = mm;
		}
		m->n_members = r->n;
		lm->rp[k++] = m;
		log->n_rounds++;
		size += rdzv__store__v1__round__get_packed_size(m) + 8;
	}
	return size;
}

/* The job's new events after the rounds (|size| so far), closing a chunk
 * whenever the next event would take it past STORE_ETCD_CHUNK, and then
 * the last chunk. */
static int
log_events(const struct core *c, const struct core_job *j,
    struct log_msgs *lm, Rdzv__Store__V1__Log *log, size_t size,
    uint8_t ***bufs, size_t **lens, size_t *n)
{
	size_t k = 0;

	log->events = lm->ep;
	for (size_t i = 0; i < c->n_new_events; i++) {
		const struct core_event *e = &c->new_events[i];
		Rdzv__Store__V1__Event *m = &lm->em[k];
		size_t sz;

		if (e->job != j)
			continue;
		rdzv__store__v1__event__init(m);
		m->seq = e->seq;
		m->wall_ms = e->wall_ms;
		m->generation = e->generation;
		m->kind = S(e->kind);
		m->message = S(e->message);
		sz = rdzv__store__v1__event__get_packed_size(m) + 4;
		if (size + sz > STORE_ETCD_CHUNK &&
		    (log->n_events > 0 || log->n_rounds > 0)) {
			if (chunk_add(log, bufs, lens, n) != 0)
				return -1;
			log->events = &lm->ep[k];
			log->n_events = 0;
			log->n_rounds = 0;
			size = 0;
		}
		lm->ep[k++] = m;
		log->n_events++;
		size += sz;
	}
	if ((log->n_events > 0 || log->n_rounds > 0) &&
	    chunk_add(log, bufs, lens, n) != 0)
		return -1;
	return 0;
}

/*
 * The job's part of the turn's new events and rounds, cut into chunks: a
 * chunk closes when the next item would take it past STORE_ETCD_CHUNK, so
 * that one turn of ten thousand joins still fits etcd's request limit.
 */
int
enc_log(const struct core *c, const struct core_job *j, uint8_t ***bufs,
    size_t **lens, size_t *n)
{
	Rdzv__Store__V1__Log	 log = RDZV__STORE__V1__LOG__INIT;
	struct log_msgs		 lm = { 0 };
	size_t			 ne = 0, nr = 0, nm = 0, size;
	int			 rc = -1;

	*bufs = NULL;
	*lens = NULL;
	*n = 0;
	for (size_t i = 0; i < c->n_new_events; i++)
		ne += c->new_events[i].job == j;
	for (size_t i = 0; i < c->n_new_rounds; i++)
		if (c->new_rounds[i].job == j) {
			nr++;
			nm += c->new_rounds[i].n;
		}
	if (ne == 0 && nr == 0)
		return 0;
	if (log_msgs_alloc(&lm, ne, nr, nm) == 0) {
		size = log_rounds(c, j, &lm, &log);
		rc = log_events(c, j, &lm, &log, size, bufs, lens, n);
	}
	if (rc != 0) {
		enc_chunks_free(*bufs, *lens, *n);
		*bufs = NULL;
		*lens = NULL;
		*n = 0;
	}
	log_msgs_free(&lm);
	return rc;
}

/* ---------------------------------------------------------------- decoding */

int
dec_job(struct core *c, const Rdzv__Store__V1__Job *m, char *err, size_t errlen)
{
	struct core_job	*j;

	if ((j = core_restore_job(c, m->rdzv_id, m->owner)) == NULL)
		return errf(-1, err, errlen, "job '%.128s': invalid or "
		    "duplicate id", m->rdzv_id);
	if (m->state < CORE_JOB_WAITING || m->state > CORE_JOB_FAILED)
		return errf(-1, err, errlen, "job %s: unknown state %u",
		    j->rdzv_id, m->state);
	j->settings.min_nodes = m->min_nodes;
	j->settings.max_nodes = m->max_nodes;
	j->settings.last_call_timeout_ms = m->last_call_timeout_ms;
	j->settings.join_timeout_ms = m->join_timeout_ms;
	j->settings.max_restarts = m->max_restarts;
	j->settings.lease_ttl_ms = m->lease_ttl_ms;
	j->settings.reconnect_grace_ms = m->reconnect_grace_ms;
	j->state = (enum core_job_state)m->state;
	snprintf(j->reason, sizeof(j->reason), "%s", m->reason);
	j->generation = m->generation;
	j->restart_count = m->restart_count;
	j->attempt = m->attempt;
	j->created_ms = m->created_ms;
	j->updated_ms = m->updated_ms;
	j->ended_ms = m->ended_ms;
	j->event_seq = m->event_seq;
	j->last_call_left_ms = m->last_call_left_ms < 0 ? -1 :
	    m->last_call_left_ms;
	j->join_left_ms = m->join_left_ms < 0 ? -1 : m->join_left_ms;
	j->held_failure = m->held_failure;
	if (m->held_failure)
		snprintf(j->held_reason, sizeof(j->held_reason), "%s",
		    m->held_reason);
	j->settings.has_rejoin_timeout = true;
	j->settings.rejoin_timeout_ms = m->rejoin_timeout_ms;
	j->settings.hang_timeout_ms = m->hang_timeout_ms;
	j->settings.rank_policy = m->rank_policy == CORE_RANK_STABLE ?
	    CORE_RANK_STABLE : CORE_RANK_ORDERED;
	j->settings.restart = m->restart == CORE_RESTART_IN_PROCESS ?
	    CORE_RESTART_IN_PROCESS : CORE_RESTART_PROCESS;
	snprintf(j->rejoin_lost, sizeof(j->rejoin_lost), "%s", m->rejoin_lost);
	j->n_refused = m->n_refused;
	j->refusal_failed = m->refusal_failed;
	if (strlen(m->preload) > CORE_PRELOAD_MAX)
		return errf(-1, err, errlen, "job %s: preload is over %d bytes",
		    j->rdzv_id, CORE_PRELOAD_MAX);
	snprintf(j->settings.preload, sizeof(j->settings.preload), "%s",
	    m->preload);
	return 0;
}

int
dec_node(struct core *c, struct core_job *j, const Rdzv__Store__V1__Node *m,
    char *err, size_t errlen)
{
	struct core_node	*n;
	struct core_gpu		*g;

	if (m->session_id.len != CORE_SESSION_LEN)
		return errf(-1, err, errlen, "node %llu: session_id is not %d "
		    "bytes", (unsigned long long)m->node_id, CORE_SESSION_LEN);
	if (m->state < 1 || m->state >= CORE_NODE_NSTATES)
		return errf(-1, err, errlen, "node %llu of job %s: unknown "
		    "state %u", (unsigned long long)m->node_id, j->rdzv_id,
		    m->state);
	if (m->group_rank < -1)
		return errf(-1, err, errlen, "node %llu of job %s: a value is "
		    "out of range", (unsigned long long)m->node_id, j->rdzv_id);
	n = core_restore_node(c, j, m->node_id, m->session_id.data,
	    m->hostname, m->advertise_addr);
	if (n == NULL)
		return errf(-1, err, errlen, "node %llu: invalid or duplicate "
		    "id or session", (unsigned long long)m->node_id);
	n->master_port = m->master_port;
	n->nproc = m->nproc;
	n->has_rank_hint = m->has_rank_hint;
	n->rank_hint = m->rank_hint;
	n->state = (enum core_node_state)m->state;
	n->group_rank = m->group_rank;
	n->base_rank = m->base_rank;
	n->generation = m->generation;
	n->arrival = m->arrival;
	n->joined_ms = m->joined_ms;
	n->gpus_healthy = m->gpus_healthy;
	n->gpus_total = m->gpus_total;
	n->port_offer = m->port_offer;
	n->prev_rank = m->has_prev_rank && m->prev_rank <= INT32_MAX ?
	    (int32_t)m->prev_rank : -1;
	if (m->join_token.len == CORE_TOKEN_LEN)
		core_restore_node_token(n, m->join_token.data);
	core_restore_node_progress(n, m->step, m->has_step ? m->step_gen : 0,
	    m->step_wall_ms, m->last_seen_ms);
	if (m->has_reason)
		core_node_set_reason(n, m->reason);
	if (m->n_gpus == 0)
		return 0;
	if ((g = calloc(m->n_gpus, sizeof(*g))) == NULL)
		return errf(-1, err, errlen, "out of memory");
	for (size_t i = 0; i < m->n_gpus; i++)
		dec_gpu(m->gpus[i], &g[i]);
	core_node_set_gpus(n, g, (uint32_t)m->n_gpus);
	free(g);
	return 0;
}

void
dec_event(const Rdzv__Store__V1__Event *m, struct core_event *e)
{
	memset(e, 0, sizeof(*e));
	e->seq = m->seq;
	e->wall_ms = m->wall_ms;
	e->generation = m->generation;
	snprintf(e->kind, sizeof(e->kind), "%s", m->kind);
	snprintf(e->message, sizeof(e->message), "%s", m->message);
}
