/* The agents' requests both harnesses send (core_inputs.h). */
#include <string.h>

#include "core_inputs.h"

void
tick(uint64_t ms)
{
	NOW.mono_ms += ms;
	NOW.wall_ms += (int64_t)ms;
	core_advance(C, NOW);
	turn();
}

struct core_join
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
