/*
 * What a replica is now (SPEC §14), as the services see it: leader or
 * standby, and the leader's address a standby hands on in the
 * `rdzv-leader` trailer. ha.c changes the role; the services only read it,
 * so they need nothing of the election.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "rdzvd.h"

const char *
role_name(void)
{
	return rdzvd.standby ? "standby" : "leader";
}

void
role_hint(struct grpc_call *call)
{
	if (rdzvd.standby && rdzvd.leader[0] != '\0')
		grpc_call_set_trailer(call, "rdzv-leader", rdzvd.leader);
}

void
role_refuse(struct grpc_call *call)
{
	role_hint(call);
	if (rdzvd.leader[0] != '\0')
		grpc_call_finish(call, GRPC_UNAVAILABLE, "not the leader; the "
		    "leader is %s", rdzvd.leader);
	else
		grpc_call_finish(call, GRPC_UNAVAILABLE, "not the leader; no "
		    "leader is known yet");
}

void
role_set_leader(const char *addr)
{
	if (strcmp(rdzvd.leader, addr) == 0)
		return;
	snprintf(rdzvd.leader, sizeof(rdzvd.leader), "%s", addr);
	if (rdzvd.standby)
		log_info("the leader is %s", addr[0] != '\0' ? addr :
		    "not known");
}
