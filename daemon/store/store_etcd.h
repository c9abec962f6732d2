/*
 * The etcd backend of the store (store.h), shared by store_etcd*.c only.
 * The key layout (docs/STORE.md, "The etcd layout"), under PREFIX:
 *
 *   meta                       Meta: format, next_node_id
 *   job/ID                     Job: the whole job record, with its write
 *                              version WVER and the node buckets it uses
 *   node/ID/WVER/INDEX         NodeBucket: the job's nodes with
 *                              node_id / STORE_ETCD_BUCKET == INDEX, as
 *                              written at the job's version WVER; a job
 *                              of at most STORE_ETCD_BUCKET nodes has
 *                              them all in one, INDEX ffffffff
 *   log/ID/WVER/CHUNK          Log: the events and rounds the turn that
 *                              wrote version WVER added to the job
 *   host/NAME                  Host: what rdzvd remembers of a host
 *                              (docs/HEALTH.md), written whole
 *
 * Values are protobuf (proto/rdzv/store/v1/store.proto). A job's record is
 * the point where its change happens: buckets and log chunks of a version
 * the record does not name yet are unreachable, so a job whose change needs
 * several Txns is never seen half written. WVER and INDEX are 16 and 8 hex
 * digits, CHUNK 4, so that keys sort in number order.
 */
#ifndef RDZV_STORE_ETCD_H
#define RDZV_STORE_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "etcd.h"
#include "hash.h"
#include "rdzv/store/v1/store.pb-c.h"
#include "store.h"
#include "store_etcd_plan.h"

#define STORE_ETCD_FORMAT	1
#define STORE_ETCD_BUCKET	128		/* node ids per bucket */
#define STORE_ETCD_BUCKET_ALL	0xffffffffULL	/* a small job's one bucket */
#define STORE_ETCD_CHUNK	(256 * 1024)	/* bytes per log chunk */
/* Room for the longest key: a job's, or a host's. */
#define STORE_ETCD_KEY_MAX	(STORE_PREFIX_MAX + RDZV_ID_MAX + \
				 HOST_NAME_MAX_LEN + 64)
/* What a Txn carries besides its operations: the fence compare, the meta
 * put, and protobuf and raft framing. */
#define STORE_ETCD_TXN_BYTES	4096

/* What the store remembers of a job it wrote or loaded. */
struct ejob {
	char		 rdzv_id[RDZV_ID_MAX + 1];
	uint64_t	 hv;
	uint64_t	 wver;		/* as in its record; 0: never written */
	uint64_t	*bidx;		/* bucket index -> version, sorted */
	uint64_t	*bver;
	size_t		 nb;
	bool		 touched;	/* in this turn's commit */
	uint32_t	 ord;		/* ... as its ord-th job */
};

struct estore {
	struct etcd	*ec;
	char		 prefix[STORE_PREFIX_MAX];
	char		 desc[STORE_ENDPOINTS_MAX + STORE_PREFIX_MAX + 16];
	uint32_t	 timeout_ms;
	char		*fence_key;	/* NULL: no fence */
	int64_t		 fence_rev;
	bool		 read_only;	/* store_opts.read_only */
	uint64_t	 next_node_id;	/* as saved in meta */
	struct pending	*pending;	/* a commit's Txns, begun, not sent */
	uint64_t	 transactions;
	uint64_t	 bytes;
	struct hash	 jobs;		/* struct ejob by rdzv_id */
	struct plan_limits limits;
};

/* store_etcd.c */
struct ejob	*estore_job(struct estore *, const char *rdzv_id, bool create);
void		 estore_job_drop(struct estore *, struct ejob *);
void		 estore_jobs_clear(struct estore *);
/* "PREFIX/job/ID" etc. into buf (STORE_ETCD_KEY_MAX). */
void		 estore_key(const struct estore *, char *buf, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));
/* Adds the fence (when set) to a Txn: the compare, and a read of the
 * leader key on failure that says what became of it. 0 or -ENOMEM. */
int		 estore_txn_fence(struct estore *, struct etcd_txn *);
/* A Txn's outcome: 0, or -1 with a message (etcd's error, or the fence's
 * compare failed). */
int		 estore_txn_result(struct estore *, int status, const char *msg,
		    const Etcdserverpb__TxnResponse *, const char *what,
		    char *err, size_t errlen);
/* Runs a Txn builder, fenced, synchronously: 0, or -1 + message. */
int		 estore_txn_run(struct estore *, struct etcd_txn *,
		    const char *what, char *err, size_t errlen);

/* store_etcd_commit.c */
/* estore_commit in two halves (store_be.h): the Txns are built on the
 * loop, and sent from the commit thread. */
int		 estore_commit_rows(void *, struct core *, bool write_meta,
		    char *err, size_t errlen);
int		 estore_commit_end(void *, char *err, size_t errlen);
int		 estore_commit(void *, struct core *, bool write_meta, char *err,
		    size_t errlen);

/* store_etcd_enc.c: core <-> protobuf. Encoders return a malloc'd buffer
 * and its length in *len, or NULL when out of memory. */
uint8_t		*enc_job(const struct core_job *, const struct ejob *,
		    size_t *len);
uint8_t		*enc_bucket(const struct core_job *, uint64_t index,
		    size_t *len);
/* The meta record; with |c|, its kept refusals too. */
uint8_t		*enc_meta(uint64_t next_node_id, const struct core *c,
		    size_t *len);
/* The turn's events and rounds of |j| as Log chunks of at most
 * STORE_ETCD_CHUNK bytes each: *n chunks in a malloc'd array of malloc'd
 * buffers (free with enc_chunks_free). -1 when out of memory. */
int		 enc_log(const struct core *, const struct core_job *,
		    uint8_t ***bufs, size_t **lens, size_t *n);
void		 enc_chunks_free(uint8_t **bufs, size_t *lens, size_t n);
/* Restores a job record or a bucket into the core; 0, or -1 + message. */
int		 dec_job(struct core *, const Rdzv__Store__V1__Job *, char *err,
		    size_t errlen);
int		 dec_node(struct core *, struct core_job *,
		    const Rdzv__Store__V1__Node *, char *err, size_t errlen);
void		 dec_event(const Rdzv__Store__V1__Event *, struct core_event *);
/* A GPU's result (a node's or a host's) into a message whose strings
 * point into |g|, and back. */
void		 enc_gpu(const struct core_gpu *g, Rdzv__Store__V1__Gpu *);
void		 dec_gpu(const Rdzv__Store__V1__Gpu *, struct core_gpu *g);

/* store_etcd_hosts.c */
/* The Host record of |h|: a malloc'd buffer, or NULL. */
uint8_t		*enc_host(const struct host *, size_t *len);
/* Every PREFIX/host/ record into the core's hosts; 0, or -1 + message. */
int		 estore_load_hosts(struct estore *, struct core *, char *err,
		    size_t errlen);

/* store_etcd_load.c */
/* Calls |each| with every key under |prefix| (values too unless
 * keys_only), |page| keys per request, at one revision. */
int		 estore_scan(struct estore *, const char *prefix, int64_t page,
		    bool keys_only, int (*each)(const Mvccpb__KeyValue *,
		    void *, char *, size_t), void *arg, char *err,
		    size_t errlen);
int		 estore_load(void *, struct core *, struct core_now, char *err,
		    size_t errlen);
int		 estore_events(void *, const char *rdzv_id, uint64_t after_seq,
		    uint32_t limit, int (*cb)(const struct core_event *, void *),
		    void *arg, char *err, size_t errlen);
int		 estore_empty(void *, char *err, size_t errlen);
int		 estore_read_meta(struct estore *, bool *exists,
		    struct core *c, char *err, size_t errlen);

#endif
