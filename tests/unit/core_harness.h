/*
 * The harness of the core's unit tests (tests/unit/test_core*.c): a
 * fake clock, agents' requests, and turn(), which ends a daemon loop turn
 * as the daemon will: check the core's invariants, commit its changes to a
 * fake store (so a change the core forgets to persist is caught by the
 * restore tests), and collect the messages for the nodes.
 */
#ifndef CORE_HARNESS_H
#define CORE_HARNESS_H
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "core_inputs.h"
#include "grpc.h"
#include "core_fakestore.h"

extern struct core	*C;
extern struct core_now	 NOW;
extern struct fakestore	 FS;
extern uint32_t		 session_ctr;
extern int		 failed;
extern char		 err[512];

struct rec {
	uint64_t	node_id;
	struct core_msg	m;
};
extern struct rec	*recs;
extern size_t		 nrecs, caprecs;

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

/* Integers, compared as intmax_t, with both values in the report. */
#define CHECK_INT(a, b) do {						\
	intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);		\
	if (a_ != b_) {							\
		fprintf(stderr, "  %s:%d: %s == %s (%jd != %jd)\n",	\
		    __FILE__, __LINE__, #a, #b, a_, b_);		\
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
void	turn(void);

void	setup(const struct core_config *cfg);

void	teardown(void);

struct core_node *join_req(struct core_join *r, int want);

struct core_node *join(const char *id, const char *host, uint32_t nproc,
	    uint32_t min, uint32_t max);

/*
 * |k| nodes a, b, c, ... (one worker each, max_restarts 3) of job |id|,
 * which waits |rejoin_ms| after a departure (-1: unset, the join
 * timeout); the job.
 */
struct core_job *nodes(const char *id, int64_t rejoin_ms, uint32_t min,
	    uint32_t max, struct core_node **n, int k);

/* The last message the node got; one of kind 0 when none. */
struct core_msg *last_msg(const struct core_node *n);

size_t	count_msgs(const struct core_node *n, enum core_msg_kind kind);

bool	last_is(const struct core_node *n, enum core_msg_kind kind);

/* Whether one of the job's kept events of |kind| has |part| in it. */
bool	has_event(const struct core_job *j, const char *kind,
	    const char *part);

int	report(struct core_node *n, uint64_t gen, enum core_outcome o);

int	resume(struct core_node *n, uint64_t gen);

void	disconnect(struct core_node *n);

/*
 * The daemon restarts: a new boot at mono_ms on the monotonic clock,
 * gap_ms later on the wall clock, with a core rebuilt from the fake store.
 * Nodes must be found again by id. False (and the test failed) when the
 * store cannot be restored.
 */
bool	restart(const struct core_config *cfg, uint64_t mono_ms,
	    int64_t gap_ms);

/*
 * The daemon restarts (as restart(), a second later) and every node of
 * n[0..k) but n[away] resumes its generation: n[away] is away without a
 * reconnect grace (its lease is lease_ttl), so a failure reported now is
 * held for it (SPEC §4 rules 5, 11 and 14). n[] is found again.
 */
bool	restart_away(struct core_node **n, int k, int away);

struct test {
	const char	*name;
	void		(*fn)(void);
};

/* Runs every test, or the one named in argv[1]; prints PASS or FAIL. */
int	run_tests(const struct test *t, size_t n, int argc, char **argv);

#endif
