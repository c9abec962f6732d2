/*
 * rdzvctl server: which rdzvd answers, since when, with which database, how
 * busy it is, and who the caller is to it (SPEC §11), which is the first
 * thing to check when an action is refused. Under HA (SPEC §14) also its
 * role, who leads, and the etcd members it uses: a standby answers this
 * too, so an operator can ask each replica.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdzvctl.h"

static int
server_exec(struct ctl *ctl, int argc, char **argv)
{
	Rdzv__V1__ServerInfoRequest	 req =
	    RDZV__V1__SERVER_INFO_REQUEST__INIT;
	Rdzv__V1__ServerInfoResponse	*r;
	char				 c[32], d[32];
	int				 rc;

	if ((rc = ctl_call(ctl, "ServerInfo", &req.base,
	    &rdzv__v1__server_info_response__descriptor,
	    (ProtobufCMessage **)&r)) != CTL_EXIT_OK)
		return rc;
	if (ctl->output == CTL_OUTPUT_JSON) {
		json_t *o = json_server(r);
		json_object_set_new(o, "server", json_string(ctl->server));
		rc = json_emit(o, false);
	} else {
		printf("%-13s%s\n", "server", ctl->server);
		printf("%-13s%s\n", "version", r->version);
		printf("%-13s%u\n", "pid", r->pid);
		printf("%-13s%s (up %s)\n", "started", fmt_clock(c, sizeof(c),
		    r->started_unix_ms), fmt_duration(d, sizeof(d),
		    (int64_t)r->uptime_ms));
		if (r->role[0] != '\0')
			printf("%-13s%s\n", "role", r->role);
		if (r->leader[0] != '\0' || r->role[0] != '\0')
			printf("%-13s%s\n", "leader", r->leader[0] != '\0' ?
			    r->leader : "(not known)");
		if (r->advertise[0] != '\0')
			printf("%-13s%s\n", "advertise", r->advertise);
		/* SQLite's store is the database line. */
		if (r->store[0] != '\0' && strncmp(r->store, "sqlite:", 7) != 0)
			printf("%-13s%s\n", "store", r->store);
		else
			printf("%-13s%s\n", "database", r->database);
		if (r->n_etcd_endpoints > 0) {
			printf("%-13s", "etcd");
			for (size_t i = 0; i < r->n_etcd_endpoints; i++)
				printf("%s%s", i ? ", " : "",
				    r->etcd_endpoints[i]);
			printf("\n");
		}
		printf("%-13s", "listeners");
		for (size_t i = 0; i < r->n_listeners; i++)
			printf("%s%s", i ? ", " : "", r->listeners[i]);
		printf("\n%-13s%u (%u active)\n", "jobs", r->jobs,
		    r->active_jobs);
		printf("%-13s%u (in active jobs)\n", "nodes", r->nodes);
		printf("%-13s%u\n", "connections", r->connections);
		printf("%-13s%" PRIu64 "\n", "transactions", r->transactions);
		printf("%-13s%s\n", "you are", r->identity);
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return rc;
}

const struct ctl_cmd cmd_server_entry = {
	.name = "server",
	.args = "",
	.summary = "rdzvd's version, uptime, role and leader, store, counts, "
	    "your identity",
	.min_args = 0,
	.max_args = 0,
	.exec = server_exec,
};
