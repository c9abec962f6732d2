/*
 * Host records on etcd (store_etcd.h): PREFIX/host/NAME holds a Host
 * message, written whole in the turn's commit when the record changed,
 * and read back by a load (a restart, or a standby that becomes leader).
 */
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "store_etcd.h"
#include "text.h"

#define S(x)	((char *)(x))
#define SCAN_PAGE_HOSTS	1000

uint8_t *
enc_host(const struct host *h, size_t *len)
{
	Rdzv__Store__V1__Host	 m = RDZV__STORE__V1__HOST__INIT;
	Rdzv__Store__V1__Gpu	 gm[HOST_GPUS_MAX], *gp[HOST_GPUS_MAX];
	int64_t			 crash[HOST_CRASHES_KEPT];
	uint8_t			*buf;

	m.name = S(h->name);
	m.state = h->state;
	m.reason = S(h->reason);
	m.since_ms = h->since_ms;
	m.updated_ms = h->updated_ms;
	m.crashes = h->crashes;
	m.gpu_failures = h->gpu_failures;
	m.hook_state = h->hook.state;
	m.hook_code = h->hook.code;
	m.hook_sig = h->hook.sig;
	m.hook_output = (char *)h->hook.output;
	m.hook_reason = (char *)h->hook.reason;
	m.hook_started_ms = h->hook.started_ms;
	m.hook_ended_ms = h->hook.ended_ms;
	m.n_crash_ms = h->n_crash;
	memcpy(crash, h->crash_ms, h->n_crash * sizeof(crash[0]));
	m.crash_ms = crash;
	m.n_gpus = h->n_gpus < HOST_GPUS_MAX ? h->n_gpus : HOST_GPUS_MAX;
	for (size_t i = 0; i < m.n_gpus; i++) {
		enc_gpu(&h->gpus[i], &gm[i]);
		gp[i] = &gm[i];
	}
	m.gpus = gp;
	*len = protobuf_c_message_get_packed_size(&m.base);
	if ((buf = malloc(*len > 0 ? *len : 1)) == NULL)
		return NULL;
	protobuf_c_message_pack(&m.base, buf);
	return buf;
}

static int
each_host(const Mvccpb__KeyValue *kv, void *arg, char *err, size_t errlen)
{
	struct core		*c = arg;
	Rdzv__Store__V1__Host	*m;
	struct core_gpu		 gpus[HOST_GPUS_MAX];
	struct host		 h;

	m = rdzv__store__v1__host__unpack(NULL, kv->value.len, kv->value.data);
	if (m == NULL || m->name[0] == '\0' || m->state < HOST_OK ||
	    m->state > HOST_QUARANTINED) {
		if (m != NULL)
			rdzv__store__v1__host__free_unpacked(m, NULL);
		return errf(-1, err, errlen, "%.*s: not a host record",
		    (int)kv->key.len, (const char *)kv->key.data);
	}
	memset(&h, 0, sizeof(h));
	h.name = m->name;
	h.state = (enum host_state)m->state;
	textcpy(h.reason, sizeof(h.reason), m->reason);
	h.since_ms = m->since_ms;
	h.updated_ms = m->updated_ms;
	h.crashes = m->crashes;
	h.gpu_failures = m->gpu_failures;
	h.hook.state = m->hook_state;
	h.hook.code = m->hook_code;
	h.hook.sig = m->hook_sig;
	snprintf(h.hook.output, sizeof(h.hook.output), "%s", m->hook_output);
	snprintf(h.hook.reason, sizeof(h.hook.reason), "%s", m->hook_reason);
	h.hook.started_ms = m->hook_started_ms;
	h.hook.ended_ms = m->hook_ended_ms;
	h.n_crash = m->n_crash_ms < HOST_CRASHES_KEPT ?
	    (uint32_t)m->n_crash_ms : HOST_CRASHES_KEPT;
	if (h.n_crash > 0)
		memcpy(h.crash_ms, m->crash_ms, h.n_crash *
		    sizeof(h.crash_ms[0]));
	h.n_gpus = m->n_gpus < HOST_GPUS_MAX ? (uint32_t)m->n_gpus :
	    HOST_GPUS_MAX;
	for (uint32_t i = 0; i < h.n_gpus; i++)
		dec_gpu(m->gpus[i], &gpus[i]);
	h.gpus = gpus;
	hosts_restore(c->hosts, &h);
	rdzv__store__v1__host__free_unpacked(m, NULL);
	return 0;
}

int
estore_load_hosts(struct estore *s, struct core *c, char *err, size_t errlen)
{
	char	key[STORE_ETCD_KEY_MAX];

	estore_key(s, key, "host/");
	return estore_scan(s, key, SCAN_PAGE_HOSTS, false, each_host, c, err,
	    errlen);
}
