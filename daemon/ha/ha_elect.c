/*
 * The election on etcd (SPEC §14), etcd's own recipe (NOTES.md; clientv3's
 * concurrency/election.go). Every replica holds a lease of leader-lease
 * and puts PREFIX/leader/<lease id in hex> = its advertised address with it,
 * in a Txn `if create_revision(key) == 0 then put else get`; the key with
 * the lowest create_revision leads. Each replica watches the keys under
 * PREFIX/leader/ (two or three: the herd is small), and after every change
 * reads them in create_revision order: the first names the leader, which
 * standbys send clients to; a replica whose own key comes first fences the
 * store with it and leads (ha.c).
 *
 * A replica leads no more when its lease is lost (etcd says it ended, or no
 * keepalive was answered for a whole TTL, so etcd may have ended it), when
 * its key is gone, or when a commit fails (the fence: a Txn comparing the
 * key's create_revision, so a deposed leader cannot write, however late it
 * learns of it). It steps down at once, gives its lease back (revoked, so
 * the next replica leads without waiting for it to expire) and campaigns
 * again with a new lease, which puts it behind every replica already
 * waiting.
 *
 * The key's value is the advertised address, then this process's
 * instance: "ADDR instance=HEX pid=PID boot=BOOT_ID", HEX random at start.
 * Clients are sent to the address alone. A key with our address and
 * another instance is an earlier rdzvd at this address only if it ran on
 * this boot of this host and its pid is gone; then its lease is revoked so
 * that a restarted replica leads at once. Any other is a second live
 * replica given our --advertise: an error names the clash, and we never
 * revoke its key (two replicas doing so to each other campaign without
 * end, issue 21); the key created first leads, the other stands by.
 *
 * Everything here runs on rdzvd's event loop through the async etcd client;
 * the store commits through its own sync client. A commit holds the loop
 * for milliseconds; the keepalives go every TTL/3.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/event.h>

#include "etcd.h"
#include "ha_elect.h"
#include "config_store.h"
#include "log.h"
#include "rdzvd.h"
#include "store.h"

/* Campaigning again after a failure, or after stepping down. */
#define RETRY_MS	1000

static struct {
	const struct ha_elect_events *ev;
	struct etcd		*ec;
	struct etcd_lease	*lease;
	struct etcd_watch	*watch;
	struct etcd_call	*call;		/* the campaign's Txn or a
						   Range, one at a time */
	struct event		*retry_ev;	/* campaign again */
	struct event		*rewatch_ev;	/* watch again */
	struct event		*recheck_ev;	/* read the keys again */
	int			 again;		/* a change came during the
						   Range: read once more */
	int			 stopped;
	int			 settled;	/* the first campaign ended */
	char			 prefix[512];	/* PREFIX/leader/ */
	char			 key[600];	/* ours; "" before the put */
	int64_t			 rev;		/* its create_revision */
	char			 endpoints[CONFIG_MAX_ETCD_ENDPOINTS][300];
	size_t			 n_endpoints;
	char			 last_err[256];	/* not logged twice running */
	char			 successor[300];	/* leading: the address of
						   the key after ours */
	char			 instance[17];	/* random, for the process */
	char			 boot[40];	/* the host's boot id */
	char			 value[512];	/* of our key */
	char			 clash[64];	/* the instance last named */
} el;

/* What a leader key with our address is to us. */
enum kv_kind {
	KV_OTHER,		/* another replica's address */
	KV_STALE,		/* an earlier rdzvd at our address: revoke */
	KV_CLASH,		/* a live replica at our address: leave it */
};

static void	campaign(evutil_socket_t, short, void *);
static void	check(void);

/* Logs a failure once, not at every retry while it lasts. */
static void
elect_warn(const char *what, const char *why)
{
	char msg[sizeof(el.last_err)];

	/* A longer message is cut: it only has to tell repeats apart. */
	if (snprintf(msg, sizeof(msg), "%s: %s", what, why) >= (int)sizeof(msg))
		msg[sizeof(msg) - 2] = '~';
	if (strcmp(msg, el.last_err) == 0)
		return;
	snprintf(el.last_err, sizeof(el.last_err), "%s", msg);
	log_warnx("election: %s", msg);
}

static void
retry_later(struct event *ev, uint32_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	if (!el.stopped)
		evtimer_add(ev, &tv);
}

/* Drops the campaign: the Range or Txn, the watch, and the lease, which
 * is revoked unless lost, so that our key goes at once. */
static void
reset(void)
{
	struct etcd_call *call = el.call;

	/* First: the cancelled call's callback sees no campaign, and ends. */
	el.key[0] = '\0';
	el.call = NULL;
	if (call != NULL)
		etcd_call_cancel(call);
	etcd_watch_free(el.watch);
	el.watch = NULL;
	etcd_lease_free(el.lease);
	el.lease = NULL;
	el.rev = 0;
	el.again = 0;
	el.successor[0] = '\0';
	evtimer_del(el.rewatch_ev);
	evtimer_del(el.recheck_ev);
}

/* Our key leads: fence the store with it and load. */
static void
lead(void)
{
	char err[512];

	if (store_fence(rdzvd.store, el.key, el.rev) != 0)
		snprintf(err, sizeof(err), "cannot fence the store with %s",
		    el.key);
	else if (el.ev->won(err, sizeof(err)) == 0)
		err[0] = '\0';
	if (err[0] != '\0') {
		elect_warn("cannot lead", err);
		/* Let another replica try; we campaign again behind it. */
		reset();
		retry_later(el.retry_ev, RETRY_MS);
		return;
	}
	el.last_err[0] = '\0';
	log_info("election: leading with %s (create revision %" PRId64 ")",
	    el.key, el.rev);
}

static int
kv_key_is(const Mvccpb__KeyValue *kv, const char *key)
{
	size_t len = strlen(key);
	return kv->key.len == len && memcmp(kv->key.data, key, len) == 0;
}

static void
revoke_done(struct etcd_call *call, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	/* Not found: it ended meanwhile. Else the watch tells what changed. */
	if (status != GRPC_OK && status != GRPC_NOT_FOUND &&
	    status != GRPC_CANCELLED)
		elect_warn("revoking an earlier lease of this address", message);
}

/* The address part of a key's value. */
static size_t
kv_addr_len(const Mvccpb__KeyValue *kv)
{
	const void *sp = memchr(kv->value.data, ' ', kv->value.len);

	return sp != NULL ? (size_t)((const uint8_t *)sp - kv->value.data) :
	    kv->value.len;
}

/* The value of field |name| ("instance=") of a key's value, or "". */
static void
kv_field(const Mvccpb__KeyValue *kv, const char *name, char *out,
    size_t outlen)
{
	char v[sizeof(el.value)], *p, *e;

	snprintf(v, sizeof(v), "%.*s", (int)kv->value.len,
	    (const char *)kv->value.data);
	out[0] = '\0';
	for (p = v; (p = strchr(p, ' ')) != NULL; ) {
		p++;
		if (strncmp(p, name, strlen(name)) != 0)
			continue;
		p += strlen(name);
		if ((e = strchr(p, ' ')) != NULL)
			*e = '\0';
		snprintf(out, outlen, "%s", p);
		return;
	}
}

/* Whether process |pid| of this host runs rdzvd still (a zombie, killed
 * and not yet reaped, does not). */
static int
pid_is_rdzvd(long pid)
{
	char path[64], stat[256] = "", *close;
	FILE *f;

	if (pid <= 0 || pid == (long)getpid() ||
	    (kill((pid_t)pid, 0) != 0 && errno != EPERM))
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 1;
	if (fgets(stat, sizeof(stat), f) == NULL)
		stat[0] = '\0';
	fclose(f);
	/* "PID (COMM) STATE ..." */
	if ((close = strrchr(stat, ')')) == NULL)
		return 1;
	if (close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X'))
		return 0;
	return strstr(stat, "(rdzvd") != NULL;
}

/*
 * Another key with our advertised address (see the top). A value with no
 * instance is an older rdzvd's: taken for an earlier self, as before.
 */
static enum kv_kind
kv_kind(const Mvccpb__KeyValue *kv)
{
	size_t len = strlen(rdzvd.advertise);
	char inst[64], pid[32], boot[64];

	if (len == 0 || kv_addr_len(kv) != len ||
	    memcmp(kv->value.data, rdzvd.advertise, len) != 0)
		return KV_OTHER;
	kv_field(kv, "instance=", inst, sizeof(inst));
	if (inst[0] == '\0' || strcmp(inst, el.instance) == 0)
		return KV_STALE;
	kv_field(kv, "pid=", pid, sizeof(pid));
	kv_field(kv, "boot=", boot, sizeof(boot));
	if (el.boot[0] != '\0' && strcmp(boot, el.boot) == 0 &&
	    !pid_is_rdzvd(strtol(pid, NULL, 10)))
		return KV_STALE;
	return KV_CLASH;
}

/* A second live replica with our --advertise: said once per instance. */
static void
clash_error(const Mvccpb__KeyValue *kv, int in_front)
{
	char inst[64], pid[32], boot[64];

	kv_field(kv, "instance=", inst, sizeof(inst));
	if (strcmp(inst, el.clash) == 0)
		return;
	snprintf(el.clash, sizeof(el.clash), "%s", inst);
	kv_field(kv, "pid=", pid, sizeof(pid));
	kv_field(kv, "boot=", boot, sizeof(boot));
	log_error("election: another rdzvd (instance %s, pid %s%s) campaigns "
	    "with our advertised address %s (we are instance %s, pid %ld): "
	    "give each replica its own --advertise (docs/HA.md); its key is "
	    "not revoked, %s", inst, pid, strcmp(boot, el.boot) == 0 ?
	    " on this host" : " on another host or boot", rdzvd.advertise,
	    el.instance, (long)getpid(), in_front ? "and this replica stands "
	    "by behind it" : "and it stands by behind this replica");
}

static void
revoke_stale(const Mvccpb__KeyValue *kv)
{
	Etcdserverpb__LeaseRevokeRequest req =
	    ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	size_t plen = strlen(el.prefix);
	char hex[32], *end;

	if (kv->key.len <= plen || kv->key.len - plen >= sizeof(hex))
		return;
	memcpy(hex, kv->key.data + plen, kv->key.len - plen);
	hex[kv->key.len - plen] = '\0';
	req.id = (int64_t)strtoull(hex, &end, 16);
	if (*end != '\0' || req.id == 0 || kv->lease != req.id)
		return;
	log_info("election: revoking lease %s of an earlier rdzvd at %s",
	    hex, rdzvd.advertise);
	if (etcd_call(el.ec, ETCD_PATH_LEASE_REVOKE, &req.base,
	    &etcdserverpb__lease_revoke_response__descriptor, 0, revoke_done,
	    NULL) == NULL)
		elect_warn("revoking an earlier lease of this address",
		    strerror(errno));
}

/* The leader keys in create_revision order: who leads, and whether we do. */
static void
range_done(struct etcd_call *call, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	const Etcdserverpb__RangeResponse *r =
	    (const Etcdserverpb__RangeResponse *)reply;
	char leader[300];
	size_t mine = SIZE_MAX;

	el.call = NULL;
	if (status == GRPC_CANCELLED && el.key[0] == '\0')
		return;
	if (status != GRPC_OK) {
		el.settled = 1;
		elect_warn("reading the leader keys", message);
		/* The change that made us read may be the one that makes us
		 * lead: read again, now if a change came meanwhile. */
		retry_later(el.recheck_ev, el.again ? 0 : RETRY_MS);
		el.again = 0;
		return;
	}
	for (size_t i = 0; i < r->n_kvs; i++) {
		if (kv_key_is(r->kvs[i], el.key))
			mine = i;
		else if (kv_kind(r->kvs[i]) == KV_STALE)
			revoke_stale(r->kvs[i]);
		else if (kv_kind(r->kvs[i]) == KV_CLASH)
			clash_error(r->kvs[i], mine == SIZE_MAX);
	}
	/* An earlier rdzvd at our address in front: we lead once its revoke
	 * shows in the watch. */
	if (mine != 0 && mine != SIZE_MAX && kv_kind(r->kvs[0]) == KV_STALE) {
		if (el.again && el.key[0] != '\0') {
			el.again = 0;
			check();
		}
		return;
	}
	el.settled = 1;
	if (mine == SIZE_MAX) {
		char why[700];
		snprintf(why, sizeof(why), "etcd: our leader key %s is gone",
		    el.key);
		if (!rdzvd.standby)
			el.ev->lost(why);	/* campaigns again */
		else {
			elect_warn("campaign", why);
			reset();
			retry_later(el.retry_ev, 0);
		}
		return;
	}
	snprintf(leader, sizeof(leader), "%.*s",
	    (int)kv_addr_len(r->kvs[0]), (const char *)r->kvs[0]->value.data);
	/* Who would lead after us: the hint of our last words. */
	if (mine == 0 && r->n_kvs > 1)
		snprintf(el.successor, sizeof(el.successor), "%.*s",
		    (int)kv_addr_len(r->kvs[1]),
		    (const char *)r->kvs[1]->value.data);
	else if (mine == 0)
		el.successor[0] = '\0';
	if (mine == 0 && rdzvd.standby)
		lead();
	else if (mine != 0)
		role_set_leader(leader);
	if (el.again && el.key[0] != '\0') {
		el.again = 0;
		check();
	}
}

/* Reads the leader keys (one Range at a time; a change meanwhile reads
 * again after it). */
static void
check(void)
{
	Etcdserverpb__RangeRequest req;
	uint8_t end[sizeof(el.prefix)];
	size_t n;

	if (el.call != NULL) {
		el.again = 1;
		return;
	}
	etcd_range_init(&req, el.prefix);
	n = etcd_prefix_end(el.prefix, strlen(el.prefix), end);
	req.range_end.data = end;
	req.range_end.len = n;
	req.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
	req.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
	if ((el.call = etcd_range(el.ec, &req, 0, range_done, NULL)) == NULL)
		elect_warn("reading the leader keys", strerror(errno));
}

static void
watch_event(struct etcd_watch *w, const Mvccpb__Event *ev, int64_t rev,
    void *arg)
{
	check();
}

/* Every change after |rev| is reported: read what is there now. */
static void
watch_created(struct etcd_watch *w, int64_t rev, void *arg)
{
	check();
}

static void	start_watch(void);

static void
watch_end(struct etcd_watch *w, int status, const char *message, void *arg)
{
	etcd_watch_free(w);
	el.watch = NULL;
	elect_warn("watching the leader keys", message != NULL ? message :
	    grpc_status_name(status));
	/* Leading goes on while the lease holds: the fence guards every
	 * write. */
	retry_later(el.rewatch_ev, RETRY_MS);
}

static void
start_watch(void)
{
	struct etcd_watch_opts o = { .key = el.prefix, .prefix = 1 };

	if ((el.watch = etcd_watch_new(el.ec, &o, watch_event, watch_created,
	    watch_end, NULL)) == NULL) {
		elect_warn("watching the leader keys", strerror(errno));
		retry_later(el.rewatch_ev, RETRY_MS);
	}
}

static void
recheck(evutil_socket_t fd, short what, void *arg)
{
	if (el.key[0] != '\0')
		check();
}

static void
rewatch(evutil_socket_t fd, short what, void *arg)
{
	if (el.key[0] != '\0' && el.watch == NULL)
		start_watch();
}

/* The campaign's Txn: our key is there; its create_revision orders us. */
static void
put_done(struct etcd_call *call, int status, const char *message,
    const ProtobufCMessage *reply, void *arg)
{
	const Etcdserverpb__TxnResponse *r =
	    (const Etcdserverpb__TxnResponse *)reply;

	el.call = NULL;
	if (status == GRPC_CANCELLED && el.key[0] == '\0')
		return;
	if (status != GRPC_OK) {
		el.settled = 1;
		elect_warn("campaign", message);
		reset();
		retry_later(el.retry_ev, RETRY_MS);
		return;
	}
	if (r->succeeded)
		el.rev = r->header != NULL ? r->header->revision : 0;
	else if (r->n_responses == 1 && r->responses[0]->response_case ==
	    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
	    r->responses[0]->response_range->n_kvs == 1)
		/* Put before, by a try the client made again. */
		el.rev = r->responses[0]->response_range->kvs[0]->
		    create_revision;
	if (el.rev <= 0) {
		elect_warn("campaign", "etcd did not say our key's revision");
		reset();
		retry_later(el.retry_ev, RETRY_MS);
		return;
	}
	log_info("election: campaigning as %s = %s (create revision %"
	    PRId64 ")", el.key, el.value, el.rev);
	start_watch();
}

static void
lease_event(struct etcd_lease *l, enum etcd_lease_event ev, const char *why,
    void *arg)
{
	struct etcd_txn *t;

	if (ev == ETCD_LEASE_LOST) {
		etcd_lease_free(l);
		el.lease = NULL;
		if (!rdzvd.standby) {
			el.ev->lost(why);	/* campaigns again */
			return;
		}
		el.settled = 1;
		elect_warn("lease", why);
		reset();
		retry_later(el.retry_ev, RETRY_MS);
		return;
	}
	snprintf(el.key, sizeof(el.key), "%s%" PRIx64, el.prefix,
	    (uint64_t)etcd_lease_id(l));
	if ((t = etcd_txn_new()) == NULL ||
	    etcd_txn_cmp_create(t, el.key,
	    ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, 0) != 0 ||
	    etcd_txn_put(t, ETCD_SUCCESS, el.key, el.value,
	    strlen(el.value), etcd_lease_id(l)) != 0 ||
	    etcd_txn_range(t, ETCD_FAILURE, el.key, 0) != 0 ||
	    (el.call = etcd_txn(el.ec, etcd_txn_request(t), 0, put_done,
	    NULL)) == NULL) {
		elect_warn("campaign", strerror(errno != 0 ? errno : ENOMEM));
		reset();
		retry_later(el.retry_ev, RETRY_MS);
	}
	etcd_txn_free(t);
}

/* A new lease, then our key with it. */
static void
campaign(evutil_socket_t fd, short what, void *arg)
{
	int64_t ttl = rdzvd.cfg.leader_lease_ms / 1000;

	if (el.stopped || el.lease != NULL)
		return;
	if ((el.lease = etcd_lease_new(el.ec, ttl, lease_event, NULL)) ==
	    NULL) {
		elect_warn("lease", strerror(errno));
		retry_later(el.retry_ev, RETRY_MS);
	}
}

/* This process's instance id and the host's boot id, once. */
static void
instance_init(void)
{
	uint8_t b[8];
	FILE *f;

	if (el.instance[0] != '\0')
		return;
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		fatal("getrandom for the instance id");
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(el.instance + 2 * i, 3, "%02x", b[i]);
	if ((f = fopen("/proc/sys/kernel/random/boot_id", "r")) != NULL) {
		if (fgets(el.boot, sizeof(el.boot), f) == NULL)
			el.boot[0] = '\0';
		el.boot[strcspn(el.boot, "\n")] = '\0';
		fclose(f);
	}
	snprintf(el.value, sizeof(el.value), "%s instance=%s pid=%ld boot=%s",
	    rdzvd.advertise, el.instance, (long)getpid(),
	    el.boot[0] != '\0' ? el.boot : "-");
}

void
ha_elect_start(const struct ha_elect_events *ev)
{
	struct etcd_opts o = { 0 };
	char err[512];

	el.ev = ev;
	instance_init();
	if (config_etcd_opts(&o, el.prefix, sizeof(el.prefix), err,
	    sizeof(err)) != 0)
		fatalx("%s", err);
	if (etcd_new(rdzvd.base, &o, &el.ec, err, sizeof(err)) != 0)
		fatalx("%s", err);
	el.retry_ev = evtimer_new(rdzvd.base, campaign, NULL);
	el.rewatch_ev = evtimer_new(rdzvd.base, rewatch, NULL);
	el.recheck_ev = evtimer_new(rdzvd.base, recheck, NULL);
	if (el.retry_ev == NULL || el.rewatch_ev == NULL ||
	    el.recheck_ev == NULL)
		fatalx("ha_elect_start: cannot create timers");
	log_info("election: standby on etcd %s under %s, instance %s at %s",
	    o.endpoints, el.prefix, el.instance, rdzvd.advertise);
	retry_later(el.retry_ev, 0);
}

/* After stepping down: at once, so that the new leader is known soon (a
 * failure on the way waits RETRY_MS). */
const char *
ha_elect_successor(void)
{
	return el.successor;
}

int
ha_elect_settled(void)
{
	return el.settled;
}

void
ha_elect_again(void)
{
	if (el.ec == NULL)
		return;
	reset();
	retry_later(el.retry_ev, 0);
}

/* Revokes lease |id| and waits for the answer (a second at most). */
static void
etcd_revoke(int64_t id)
{
	Etcdserverpb__LeaseRevokeRequest req =
	    ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	struct etcd_opts o;
	struct etcd *ec;
	char prefix[STORE_PREFIX_MAX + 16], err[512];

	if (config_etcd_opts(&o, prefix, sizeof(prefix), err, sizeof(err)) != 0 ||
	    etcd_new(NULL, &o, &ec, err, sizeof(err)) != 0)
		return;
	req.id = id;
	/* Whatever the answer, the lease ends at its TTL at the latest. */
	etcd_call_sync(ec, ETCD_PATH_LEASE_REVOKE, &req.base,
	    &etcdserverpb__lease_revoke_response__descriptor, 1000, NULL,
	    NULL);
	etcd_free(ec);
}

/*
 * At shutdown: our lease is revoked now, with a call of its own that we
 * wait for (a second at most), so that a standby leads at once rather than
 * when the lease would have expired.
 */
void
ha_elect_stop(void)
{
	int64_t id = el.lease != NULL ? etcd_lease_id(el.lease) : 0;

	if (el.ec == NULL || el.stopped)
		return;
	el.stopped = 1;
	evtimer_del(el.retry_ev);
	if (id != 0)
		etcd_revoke(id);
	reset();
}

void
ha_elect_free(void)
{
	ha_elect_stop();
	etcd_free(el.ec);
	el.ec = NULL;
	if (el.retry_ev != NULL)
		event_free(el.retry_ev);
	if (el.rewatch_ev != NULL)
		event_free(el.rewatch_ev);
	if (el.recheck_ev != NULL)
		event_free(el.recheck_ev);
	el.retry_ev = el.rewatch_ev = el.recheck_ev = NULL;
}

