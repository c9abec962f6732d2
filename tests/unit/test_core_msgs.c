/*
 * Unit tests of the core's message queue: a queued message keeps only the
 * bytes its kind uses (core_outbox.c), and what comes out of the outbox is
 * what went in, at the longest strings a message can hold.
 */
/* core_msg_init, core_msg_queue and core_msg_drop are the core's own. */
#include "core_harness.h"
#include "core_int.h"

static void
fill(char *buf, size_t len, char c)
{
	memset(buf, c, len - 1);
	buf[len - 1] = '\0';
}

/* Every kind, its fields and its longest strings, through the queue. */
static void
test_round_trip(void)
{
	struct core_node	*n;
	struct core_msg		 m[5];
	size_t			 before, i;

	setup(NULL);
	n = join("q", "host0", 1, 2, 2);
	turn();
	before = nrecs;

	core_msg_init(&m[0], CORE_MSG_ASSIGNMENT);
	m[0].u.assignment.generation = 7;
	m[0].u.assignment.group_rank = 3;
	m[0].u.assignment.group_world_size = 4;
	m[0].u.assignment.base_rank = 5;
	m[0].u.assignment.local_world_size = 6;
	m[0].u.assignment.world_size = 8;
	m[0].u.assignment.master_port = 29500;
	m[0].u.assignment.restart_count = 2;
	m[0].u.assignment.max_restarts = 9;
	fill(m[0].u.assignment.master_addr,
	    sizeof(m[0].u.assignment.master_addr), 'a');

	core_msg_init(&m[1], CORE_MSG_STOP);
	m[1].u.stop.generation = 6;
	fill(m[1].reason, sizeof(m[1].reason), 'r');

	core_msg_init(&m[2], CORE_MSG_WAITING);
	m[2].u.waiting.state = CORE_NODE_WAITING;
	m[2].u.waiting.participants = 1;
	m[2].u.waiting.min_nodes = 2;
	m[2].u.waiting.max_nodes = 3;
	snprintf(m[2].reason, sizeof(m[2].reason), "waiting");

	core_msg_init(&m[3], CORE_MSG_ACCEPTED);
	m[3].u.accepted.node_id = n->node_id;
	memset(m[3].u.accepted.session_id, 0xab, CORE_SESSION_LEN);
	m[3].u.accepted.settings.max_nodes = 2;
	m[3].u.accepted.settings.hang_timeout_ms = 1234;
	m[3].u.accepted.resumed = true;
	m[3].u.accepted.attempt = 3;

	core_msg_init(&m[4], CORE_MSG_EVICTED);	/* no reason at all */

	for (i = 0; i < 5; i++)
		core_msg_queue(n, &m[i]);
	CHECK(n->out_n == 5 && n->out_head->kind == CORE_MSG_ASSIGNMENT &&
	    n->out_tail->kind == CORE_MSG_EVICTED);
	turn();
	CHECK(nrecs == before + 5);
	for (i = 0; i < 5 && before + i < nrecs; i++) {
		CHECK(recs[before + i].node_id == n->node_id);
		/* Both come cleared: whole structs compare. */
		CHECK(memcmp(&recs[before + i].m, &m[i], sizeof(m[i])) == 0);
	}
	CHECK(n->out_head == NULL && n->out_n == 0);
	teardown();
}

/* A node that is not connected is told nothing; a dropped queue is
 * freed. */
static void
test_not_connected(void)
{
	struct core_node	*n;
	struct core_msg		 m;
	size_t			 before;

	setup(NULL);
	n = join("q", "host0", 1, 2, 2);
	turn();
	before = nrecs;
	core_msg_init(&m, CORE_MSG_STOP);
	snprintf(m.reason, sizeof(m.reason), "stop");
	core_msg_queue(n, &m);
	core_msg_queue(n, &m);
	CHECK(n->out_n == 2);
	core_msg_drop(C, n);
	CHECK(n->out_n == 0 && n->out_head == NULL && n->out_tail == NULL);
	core_disconnect(C, NOW, n);
	core_msg_queue(n, &m);
	CHECK(n->out_n == 0 && n->out_head == NULL);
	turn();
	CHECK(nrecs == before);
	teardown();
}

static const struct test tests[] = {
	{ "round_trip", test_round_trip },
	{ "not_connected", test_not_connected },
};

int
main(int argc, char **argv)
{
	return run_tests(tests, sizeof(tests) / sizeof(tests[0]), argc,
	    argv);
}
