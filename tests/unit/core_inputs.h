/*
 * Inputs the core's and the store's test harnesses share. Include after
 * defining C, NOW, session_ctr and turn(): each harness ends a loop turn its
 * own way (a fake store or the real one).
 */
#ifndef RDZV_TEST_CORE_INPUTS_H
#define RDZV_TEST_CORE_INPUTS_H

/* Time passes and the daemon's timer fires. */
static inline void
tick(uint64_t ms)
{
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	core_advance(C, NOW);
	turn();
}

/* A join request with a fresh, distinct session id. */
static inline struct core_join
req(const char *id, const char *host, uint32_t nproc, uint32_t min,
    uint32_t max)
{
	struct core_join	r;

	memset(&r, 0, sizeof(r));
	r.rdzv_id = id;
	r.identity = "alice";
	r.hostname = host;
	r.advertise_addr = host;
	r.master_port = 29500;
	r.nproc = nproc;
	r.settings.min_nodes = min;
	r.settings.max_nodes = max;
	session_ctr++;
	memcpy(r.session_id, &session_ctr, sizeof(session_ctr));
	r.session_id[15] = 0xa5;
	return r;
}

#endif
