/*
 * The harness of the core's unit tests (test_core.c, test_core_life.c): a
 * fake clock, agents' requests, and turn(), which ends a daemon loop turn
 * as the daemon will: check the core's invariants, commit its changes to a
 * fake store (so a change the core forgets to persist is caught by the
 * restore tests), and collect the messages for the nodes.
 */
#ifndef CORE_HARNESS_H
#define CORE_HARNESS_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "grpc.h"
#include "core_fakestore.h"

static struct core	*C;
static struct core_now	 NOW;
static struct fakestore	 FS;
static uint32_t		 session_ctr;
static int		 failed;
static char		 err[512];

struct rec {
	uint64_t	node_id;
	struct core_msg	m;
};
static struct rec	*recs;
static size_t		 nrecs, caprecs;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "  %s:%d: CHECK failed: %s\n",		\
		    __FILE__, __LINE__, #cond);				\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_RC(rc, want) do {						\
	int rc_ = (rc);							\
	if (rc_ != (want)) {						\
		fprintf(stderr, "  %s:%d: status %s, want %s (%s)\n",	\
		    __FILE__, __LINE__, grpc_status_name(rc_),		\
		    grpc_status_name(want), err);			\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_STR(s, want) do {						\
	if (strcmp((s), (want)) != 0) {					\
		fprintf(stderr, "  %s:%d: got \"%s\"\n  want \"%s\"\n",	\
		    __FILE__, __LINE__, (s), (want));			\
		failed = 1;						\
	}								\
} while (0)

#define CHECK_HAS(s, part) do {						\
	if (strstr((s), (part)) == NULL) {				\
		fprintf(stderr, "  %s:%d: \"%s\" lacks \"%s\"\n",	\
		    __FILE__, __LINE__, (s), (part));			\
		failed = 1;						\
	}								\
} while (0)

/* The end of a loop turn: check, commit, collect messages, clear. */
static inline void
turn(void)
{
	struct core_node	*n;
	struct core_msg		 m;
	char			 e[512];

	if (core_check(C, e, sizeof(e)) != 0) {
		fprintf(stderr, "  invariant broken: %s\n", e);
		failed = 1;
	}
	fs_commit(&FS, C);
	while (core_outbox_pop(C, &n, &m)) {
		if (nrecs == caprecs) {
			caprecs = caprecs == 0 ? 256 : caprecs * 2;
			recs = realloc(recs, caprecs * sizeof(*recs));
			if (recs == NULL)
				abort();
		}
		recs[nrecs].node_id = n->node_id;
		recs[nrecs++].m = m;
	}
	core_changes_clear(C);
}

static inline void
setup(const struct core_config *cfg)
{
	C = core_new(cfg);
	NOW.mono_ms = 1000000;
	NOW.wall_ms = 1700000000000LL;	/* 2023-11-14T22:13:20Z */
	nrecs = 0;
	memset(&FS, 0, sizeof(FS));
}

static inline void
teardown(void)
{
	turn();
	core_free(C);
	C = NULL;
	fs_free(&FS);
}

#include "core_inputs.h"

static inline struct core_node *
join_req(struct core_join *r, int want)
{
	struct core_node	*n = NULL;

	err[0] = '\0';
	CHECK_RC(core_join(C, NOW, r, &n, err, sizeof(err)), want);
	turn();
	return want == 0 ? n : NULL;
}

static inline struct core_node *
join(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r = req(id, host, nproc, min, max);

	return join_req(&r, 0);
}

/* The last message the node got; one of kind 0 when none. */
static inline struct core_msg *
last_msg(const struct core_node *n)
{
	static struct core_msg	none;
	size_t			i;

	for (i = nrecs; i > 0; i--)
		if (recs[i - 1].node_id == n->node_id)
			return &recs[i - 1].m;
	memset(&none, 0, sizeof(none));
	return &none;
}

static inline size_t
count_msgs(const struct core_node *n, enum core_msg_kind kind)
{
	size_t	i, k = 0;

	for (i = 0; i < nrecs; i++)
		if (recs[i].node_id == n->node_id && recs[i].m.kind == kind)
			k++;
	return k;
}

static inline bool
last_is(const struct core_node *n, enum core_msg_kind kind)
{
	struct core_msg	*m = last_msg(n);

	if (m->kind != kind) {
		fprintf(stderr, "  node %llu: last message %s, want %s\n",
		    (unsigned long long)n->node_id, core_msg_kind_name(m->kind),
		    core_msg_kind_name(kind));
		return false;
	}
	return true;
}

static inline int
report(struct core_node *n, uint64_t gen, enum core_outcome o)
{
	struct core_report	r;
	int			rc;

	memset(&r, 0, sizeof(r));
	r.session_id = n->session_id;
	r.generation = gen;
	r.outcome = o;
	r.message = "CUDA error: out of memory";
	err[0] = '\0';
	rc = core_report(C, NOW, "alice", &r, NULL, err, sizeof(err));
	turn();
	return rc;
}

static inline int
resume(struct core_node *n, uint64_t gen)
{
	int	rc;

	err[0] = '\0';
	rc = core_resume(C, NOW, "alice", n->job->rdzv_id, n->session_id, gen,
	    NULL, err, sizeof(err));
	turn();
	return rc;
}

static inline void
disconnect(struct core_node *n)
{
	core_disconnect(C, NOW, n);
	turn();
}

/*
 * The daemon restarts: a new boot at mono_ms on the monotonic clock,
 * gap_ms later on the wall clock, with a core rebuilt from the fake store.
 * Nodes must be found again by id. False (and the test failed) when the
 * store cannot be restored.
 */
static inline bool
restart(const struct core_config *cfg, uint64_t mono_ms, int64_t gap_ms)
{
	char	e[256];

	core_free(C);
	NOW.mono_ms = mono_ms;
	NOW.wall_ms += gap_ms;
	if ((C = fs_restore(&FS, cfg, NOW, e, sizeof(e))) == NULL) {
		fprintf(stderr, "  restore: %s\n", e);
		failed = 1;
		return false;
	}
	turn();
	return true;
}

struct test {
	const char	*name;
	void		(*fn)(void);
};

/* Runs every test, or the one named in argv[1]; prints PASS or FAIL. */
static inline int
run_tests(const struct test *t, size_t n, int argc, char **argv)
{
	size_t	i;
	int	nfailed = 0;

	for (i = 0; i < n; i++) {
		if (argc > 1 && strcmp(argv[1], t[i].name) != 0)
			continue;
		failed = 0;
		session_ctr = 0;
		t[i].fn();
		printf("%s %s\n", failed ? "FAIL" : "PASS", t[i].name);
		nfailed += failed;
	}
	free(recs);
	printf("%d failed\n", nfailed);
	return nfailed == 0 ? 0 : 1;
}

#endif
