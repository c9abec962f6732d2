/*
 * Control.ServerInfo: what rdzvctl server shows, and the caller's identity
 * as the daemon sees it (SPEC §11), which makes permission problems easy to
 * diagnose. Every replica answers it, a standby too: its role, who leads
 * and the store they share (SPEC §14) are what an operator asks first
 * during a failover.
 */
#include <unistd.h>

#include <stdio.h>

#include "config_store.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzvd.h"
#include "rpc_int.h"
#include "store.h"

void
rpc_server_info(struct grpc_call *call, const ProtobufCMessage *msg,
    void *arg)
{
	Rdzv__V1__ServerInfoResponse resp = RDZV__V1__SERVER_INFO_RESPONSE__INIT;
	char *listeners[RDZVD_MAX_LISTEN];
	char *etcd[CONFIG_MAX_ETCD_ENDPOINTS];
	char store[1200];

	resp.version = (char *)RDZV_VERSION;
	resp.uptime_ms = mono_ms() - rdzvd.started_mono_ms;
	resp.database = (char *)store_path(rdzvd.store);
	resp.connections = (uint32_t)grpc_server_conn_count(rdzvd.srv);
	resp.transactions = store_transactions(rdzvd.store);
	struct core_job *job;
	TAILQ_FOREACH(job, &rdzvd.core->jobs, entry) {
		resp.jobs++;
		if (!core_job_ended(job)) {
			resp.active_jobs++;
			resp.nodes += job->n_state[CORE_NODE_PARTICIPANT] +
			    job->n_state[CORE_NODE_WAITING] +
			    job->n_state[CORE_NODE_SPARE];
		}
	}
	resp.identity = (char *)grpc_call_identity(call);
	resp.pid = (uint32_t)getpid();
	resp.started_unix_ms = rdzvd.started_wall_ms;
	for (size_t i = 0; i < rdzvd.n_listeners; i++)
		listeners[i] = rdzvd.listeners[i];
	resp.n_listeners = rdzvd.n_listeners;
	resp.listeners = listeners;
	resp.role = (char *)role_name();
	resp.leader = rdzvd.leader;
	resp.advertise = rdzvd.advertise;
	config_store_text(store, sizeof(store));
	resp.store = store;
	while (resp.n_etcd_endpoints < CONFIG_MAX_ETCD_ENDPOINTS &&
	    *config_etcd_endpoint(resp.n_etcd_endpoints) != '\0') {
		etcd[resp.n_etcd_endpoints] =
		    (char *)config_etcd_endpoint(resp.n_etcd_endpoints);
		resp.n_etcd_endpoints++;
	}
	resp.etcd_endpoints = etcd;
	grpc_call_reply(call, &resp.base);
}
