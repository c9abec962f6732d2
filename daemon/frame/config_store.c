/*
 * The store as configured (SPEC §14), for those beside the store that need
 * it: the etcd members and TLS files of `--store etcd://...` and
 * `--etcd-*` and the prefix keys live under, which the election (ha/) uses
 * to talk to the same members with a client of its own on rdzvd's loop
 * (the store's is a sync one), and what ServerInfo shows of them.
 */
#include <stdio.h>
#include <string.h>

#include "etcd.h"
#include "config_store.h"
#include "rdzvd.h"
#include "store.h"

static struct store_spec spec;
static char endpoints[CONFIG_MAX_ETCD_ENDPOINTS][300];
static size_t n_endpoints;

int
config_store_is_etcd(void)
{
	return rdzvd.store != NULL && store_kind_etcd(rdzvd.store);
}

void
config_store_text(char *buf, size_t len)
{
	if (config_store_is_etcd())
		snprintf(buf, len, "%s", store_path(rdzvd.store));
	else
		snprintf(buf, len, "sqlite:%s", rdzvd.store != NULL ?
		    store_path(rdzvd.store) : "");
}

const char *
config_etcd_endpoint(size_t i)
{
	return i < n_endpoints ? endpoints[i] : "";
}

/* The members one by one, for ServerInfo. */
static void
split_endpoints(const char *list)
{
	const char *p = list;

	n_endpoints = 0;
	while (*p != '\0' && n_endpoints < CONFIG_MAX_ETCD_ENDPOINTS) {
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
config_etcd_opts(struct etcd_opts *o, char *prefix, size_t prefixlen, char *err,
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
