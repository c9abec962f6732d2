/*
 * The core's test harness (core_harness.h): the fake clock, turn() and
 * the requests the core's tests send.
 */
#include "core_harness.h"

struct core	*C;
struct core_now	 NOW;
struct fakestore	 FS;
uint32_t		 session_ctr;
int		 failed;
char		 err[512];
struct rec	*recs;
size_t		 nrecs, caprecs;

void
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

void
setup(const struct core_config *cfg)
{
	C = core_new(cfg);
	NOW.mono_ms = 1000000;
	NOW.wall_ms = 1700000000000LL;	/* 2023-11-14T22:13:20Z */
	nrecs = 0;
	memset(&FS, 0, sizeof(FS));
}

void
teardown(void)
{
	turn();
	core_free(C);
	C = NULL;
	fs_free(&FS);
}

struct core_node *
join_req(struct core_join *r, int want)
{
	struct core_node	*n = NULL;

	err[0] = '\0';
	CHECK_RC(core_join(C, NOW, r, &n, err, sizeof(err)), want);
	turn();
	return want == 0 ? n : NULL;
}

struct core_node *
join(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r = req(id, host, nproc, min, max);

	return join_req(&r, 0);
}

struct core_job *
nodes(const char *id, int64_t rejoin_ms, uint32_t min, uint32_t max,
    struct core_node **n, int k)
{
	static const char *const hosts[] = { "a", "b", "c", "d", "e" };
	struct core_join	 r;
	int			 i;

	for (i = 0; i < k && i < 5; i++) {
		r = req(id, hosts[i], 1, min, max);
		r.settings.max_restarts = 3;
		if (rejoin_ms >= 0) {
			r.settings.has_rejoin_timeout = true;
			r.settings.rejoin_timeout_ms = (uint32_t)rejoin_ms;
		}
		n[i] = join_req(&r, 0);
	}
	return n[0]->job;
}

struct core_msg *
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

size_t
count_msgs(const struct core_node *n, enum core_msg_kind kind)
{
	size_t	i, k = 0;

	for (i = 0; i < nrecs; i++)
		if (recs[i].node_id == n->node_id && recs[i].m.kind == kind)
			k++;
	return k;
}

bool
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

int
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

int
resume(struct core_node *n, uint64_t gen)
{
	int	rc;

	err[0] = '\0';
	rc = core_resume(C, NOW, "alice", n->job->rdzv_id, n->session_id, gen,
	    NULL, err, sizeof(err));
	turn();
	return rc;
}

void
disconnect(struct core_node *n)
{
	core_disconnect(C, NOW, n);
	turn();
}

bool
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

bool
restart_away(struct core_node **n, int k, int away)
{
	uint64_t	 id[16];
	int		 i;

	for (i = 0; i < k && i < 16; i++)
		id[i] = n[i]->node_id;
	if (!restart(NULL, NOW.mono_ms, 1000))
		return false;
	for (i = 0; i < k && i < 16; i++) {
		n[i] = core_node_find(C, id[i]);
		if (i != away && resume(n[i], n[i]->generation) != 0) {
			fprintf(stderr, "  resume: %s\n", err);
			failed = 1;
			return false;
		}
	}
	return true;
}

int
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

bool
has_event(const struct core_job *j, const char *kind, const char *part)
{
	for (uint32_t i = 0; i < j->events_n; i++) {
		const struct core_event *e =
		    &j->events[(j->events_start + i) % j->events_cap];
		if (strcmp(e->kind, kind) == 0 && strstr(e->message, part))
			return true;
	}
	return false;
}
