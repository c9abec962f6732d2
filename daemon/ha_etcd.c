/*
 * What the election takes from the store's settings (SPEC §14): the etcd
 * members and TLS files of `--store etcd://...` and `--etcd-*`, the prefix
 * its keys live under, and what ServerInfo shows of them. The election
 * talks to the same members as the store, with a client of its own on
 * rdzvd's loop (the store's is a sync one).
 */
#include <stdio.h>
#include <string.h>

#include "etcd.h"
#include "ha_etcd.h"
#include "rdzvd.h"
#include "store.h"

static struct store_spec spec;
static char endpoints[HA_MAX_ENDPOINTS][300];
static size_t n_endpoints;

int
ha_store_is_etcd(void)
{
	return rdzvd.store != NULL && store_kind_etcd(rdzvd.store);
}

void
ha_store_text(char *buf, size_t len)
{
	if (ha_store_is_etcd())
		snprintf(buf, len, "%s", store_path(rdzvd.store));
	else
		snprintf(buf, len, "sqlite:%s", rdzvd.store != NULL ?
		    store_path(rdzvd.store) : "");
}

const char *
ha_etcd_endpoint(size_t i)
{
	return i < n_endpoints ? endpoints[i] : "";
}

/* The members one by one, for ServerInfo. */
static void
split_endpoints(const char *list)
{
	const char *p = list;

	n_endpoints = 0;
	while (*p != '\0' && n_endpoints < HA_MAX_ENDPOINTS) {
		size_t n = strcspn(p, ",");
		if (n > 0)
			snprintf(endpoints[n_endpoints++], sizeof(endpoints[0]),
			    "%.*s", (int)n, p);
		p += n;
		if (*p == ',')
			p++;
	}
}

int
ha_etcd_conf(struct etcd_opts *o, char *prefix, size_t prefixlen, char *err,
    size_t errlen)
{
	if (store_spec_parse(store_path(rdzvd.store), &spec, err,
	    errlen) != 0)
		return -1;
	if (spec.kind != STORE_ETCD) {
		snprintf(err, errlen, "the election needs an etcd store");
		return -1;
	}
	split_endpoints(spec.endpoints);
	*o = (struct etcd_opts){
		.endpoints = spec.endpoints,
		.ca = rdzvd.cfg.etcd_ca,
		.cert = rdzvd.cfg.etcd_cert,
		.key = rdzvd.cfg.etcd_key,
	};
	snprintf(prefix, prefixlen, "%s/leader/", spec.prefix);
	return 0;
}

void
ha_etcd_revoke(int64_t id)
{
	Etcdserverpb__LeaseRevokeRequest req =
	    ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	struct etcd_opts o;
	struct etcd *ec;
	char prefix[sizeof(spec.prefix) + 16], err[512];

	if (ha_etcd_conf(&o, prefix, sizeof(prefix), err, sizeof(err)) != 0 ||
	    etcd_new(NULL, &o, &ec, err, sizeof(err)) != 0)
		return;
	req.id = id;
	/* Whatever the answer, the lease ends at its TTL at the latest. */
	etcd_call_sync(ec, ETCD_PATH_LEASE_REVOKE, &req.base,
	    &etcdserverpb__lease_revoke_response__descriptor, 1000, NULL,
	    NULL);
	etcd_free(ec);
}
