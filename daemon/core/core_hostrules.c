/*
 * Host memory and the quarantine policy (core_hostrules.h, docs/HEALTH.md). Pure:
 * no I/O, no clock; the caller passes the wall time, which is what a crash
 * window spanning daemon restarts must be measured in.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "core_hostrules.h"
#include "text.h"
#include "xmalloc.h"

static int
match_host(const void *item, const void *key)
{
	return strcmp(((const struct host *)item)->name, key) == 0;
}

static uint64_t
name_hash(const char *name)
{
	return hash_bytes(name, strlen(name));
}

void
host_policy_defaults(struct host_policy *p)
{
	memset(p, 0, sizeof(*p));
	/* Taking a machine out of service is the operator's choice to make
	 * (rdzvd.conf): by default a host is only marked, and the agent's
	 * exclude policy (SPEC §7) keeps its meaning. */
	p->gpu_failure = HOST_GPU_SUSPECT;
	p->suspect_crashes = 2;
	p->quarantine_crashes = 0;
	p->crash_window_ms = 3600ULL * 1000;
}

struct hosts *
hosts_new(const struct host_policy *policy)
{
	struct hosts	*h = xcalloc(1, sizeof(*h));

	if (policy != NULL)
		h->policy = *policy;
	else
		host_policy_defaults(&h->policy);
	TAILQ_INIT(&h->all);
	TAILQ_INIT(&h->dirty);
	hash_init(&h->by_name);
	return h;
}

static void
host_free(struct host *r)
{
	free(r->name);
	free(r->gpus);
	free(r);
}

void
hosts_free(struct hosts *h)
{
	struct host	*r;

	if (h == NULL)
		return;
	while ((r = TAILQ_FIRST(&h->all)) != NULL) {
		TAILQ_REMOVE(&h->all, r, entry);
		host_free(r);
	}
	hash_free(&h->by_name);
	free(h->changes);
	free(h);
}

struct host *
hosts_find(const struct hosts *h, const char *name)
{
	return hash_find(&h->by_name, name_hash(name), match_host, name);
}

static struct host *
host_get(struct hosts *h, const char *name, int64_t now_ms)
{
	struct host	*r;

	if ((r = hosts_find(h, name)) != NULL)
		return r;
	r = xcalloc(1, sizeof(*r));
	r->name = xstrdup(name);
	r->state = HOST_OK;
	r->since_ms = r->updated_ms = now_ms;
	if (hash_insert(&h->by_name, name_hash(name), r) != 0)
		abort();
	TAILQ_INSERT_TAIL(&h->all, r, entry);
	h->n++;
	h->n_state[HOST_OK]++;
	return r;
}

static void
host_dirty(struct hosts *h, struct host *r, int64_t now_ms)
{
	r->updated_ms = now_ms;
	if (r->dirty)
		return;
	r->dirty = true;
	TAILQ_INSERT_TAIL(&h->dirty, r, dirty_entry);
}

/* Moves a host to |to| with |reason| (|brief| its gist), noting the
 * change for the daemon. */
static void
host_set_state(struct hosts *h, struct host *r, enum host_state to,
    int64_t now_ms, const char *reason, const char *brief)
{
	struct host_change	*c;

	if (r->state == to && strcmp(r->reason, reason) == 0)
		return;
	if (h->n_changes == h->changes_cap) {
		h->changes_cap = h->changes_cap ? h->changes_cap * 2 : 8;
		h->changes = xreallocarray(h->changes, h->changes_cap,
		    sizeof(*h->changes));
	}
	c = &h->changes[h->n_changes++];
	textcpy(c->name, sizeof(c->name), r->name);
	c->from = r->state;
	c->to = to;
	textcpy(c->reason, sizeof(c->reason), reason);
	textcpy(c->brief, sizeof(c->brief), brief);
	if (r->state != to) {
		h->n_state[r->state]--;
		h->n_state[to]++;
		r->since_ms = now_ms;
	}
	r->state = to;
	textcpy(r->reason, sizeof(r->reason), reason);
	host_dirty(h, r, now_ms);
}

int
hosts_refusal(const struct hosts *h, const char *name, char *err,
    size_t errlen)
{
	const struct host	*r = hosts_find(h, name);
	char			 when[64];

	if (r == NULL || r->state != HOST_QUARANTINED)
		return 0;
	core_fmt_wall(when, sizeof(when), r->since_ms);
	textf(err, errlen, "host %s is quarantined since %s: %s (an admin "
	    "clears it with `rdzvctl host clear %s`)", r->name, when,
	    r->reason, r->name);
	return CORE_REFUSED;
}

/* Drops crashes older than the window; true if any went. */
static bool
crash_prune(const struct host_policy *p, struct host *r, int64_t now_ms)
{
	uint32_t	i = 0;

	while (i < r->n_crash && now_ms - r->crash_ms[i] >=
	    (int64_t)p->crash_window_ms)
		i++;
	if (i == 0)
		return false;
	memmove(r->crash_ms, r->crash_ms + i, (r->n_crash - i) *
	    sizeof(r->crash_ms[0]));
	r->n_crash -= i;
	return true;
}

static bool
gpu_same(const struct core_gpu *a, const struct core_gpu *b)
{
	return a->device == b->device && a->ok == b->ok &&
	    strcmp(a->uuid, b->uuid) == 0 &&
	    strcmp(a->failed_step, b->ok ? "" : b->failed_step) == 0 &&
	    strcmp(a->error, b->ok ? "" : b->error) == 0;
}

/* The stored result of |dev| on |r|, or NULL. */
static struct core_gpu *
gpu_find(const struct host *r, uint32_t dev)
{
	for (uint32_t j = 0; j < r->n_gpus; j++)
		if (r->gpus[j].device == dev)
			return &r->gpus[j];
	return NULL;
}

enum host_state
hosts_gpus(struct hosts *h, int64_t now_ms, const char *name,
    const struct core_gpu *gpus, uint32_t n, const char *what)
{
	const struct core_gpu	*bad = NULL;
	struct host		*r = hosts_find(h, name);
	struct core_gpu		*g;
	uint32_t		 i, failed = 0;
	bool			 changed = false;
	char			 why[HOST_REASON_MAX], brief[HOST_BRIEF_MAX];
	const char		*e;

	if (n == 0)
		return r != NULL ? r->state : HOST_OK;
	if (n > HOST_GPUS_MAX)
		n = HOST_GPUS_MAX;
	/*
	 * Agents send every device's latest result with each report: only a
	 * failure not already recorded counts, once.
	 */
	for (i = 0; i < n; i++) {
		if (gpus[i].ok)
			continue;
		g = r != NULL ? gpu_find(r, gpus[i].device) : NULL;
		if (g != NULL && gpu_same(g, &gpus[i]))
			continue;
		failed++;
		if (bad == NULL)
			bad = &gpus[i];
	}
	/*
	 * A healthy host is not written until something is held against it:
	 * a join storm of ten thousand good nodes costs no host writes. Its
	 * results are on its nodes' rows meanwhile.
	 */
	if (r == NULL && failed == 0)
		return HOST_OK;
	if (r == NULL) {
		r = host_get(h, name, now_ms);
		changed = true;
	}
	for (i = 0; i < n; i++) {
		if ((g = gpu_find(r, gpus[i].device)) != NULL &&
		    gpu_same(g, &gpus[i]))
			continue;
		if (g == NULL) {
			r->gpus = xreallocarray(r->gpus, r->n_gpus + 1,
			    sizeof(*r->gpus));
			g = &r->gpus[r->n_gpus++];
		}
		memset(g, 0, sizeof(*g));
		g->device = gpus[i].device;
		g->ok = gpus[i].ok;
		textcpy(g->uuid, sizeof(g->uuid), gpus[i].uuid);
		if (!g->ok) {
			textcpy(g->failed_step, sizeof(g->failed_step),
			    gpus[i].failed_step);
			textcpy(g->error, sizeof(g->error), gpus[i].error);
		}
		changed = true;
	}
	r->gpu_failures += failed;
	if (changed)
		host_dirty(h, r, now_ms);
	if (bad == NULL || h->policy.gpu_failure == HOST_GPU_IGNORE ||
	    r->state == HOST_QUARANTINED)
		return r->state;
	textf(why, sizeof(why), "GPU check failed on device %u (%s: %s) in "
	    "%s", bad->device, bad->failed_step[0] ? bad->failed_step : "?",
	    bad->error[0] ? bad->error : "?", what);
	e = bad->error[0] ? bad->error : bad->failed_step;
	if (strncmp(e, "CUDA_ERROR_", 11) == 0)
		e += 11;
	textf(brief, sizeof(brief), "GPU%u %s", bad->device, *e ? e :
	    "check failed");
	if (h->policy.gpu_failure == HOST_GPU_QUARANTINE)
		host_set_state(h, r, HOST_QUARANTINED, now_ms, why, brief);
	else if (r->state == HOST_OK)
		host_set_state(h, r, HOST_SUSPECT, now_ms, why, brief);
	return r->state;
}

bool
hosts_exit_is_crash(int32_t exit_code, int32_t signal, const char *message)
{
	if (signal > 0)
		return signal != SIGTERM && signal != SIGKILL &&
		    signal != SIGINT && signal != SIGHUP;
	if (exit_code == 0 || message == NULL)
		return false;
	return strstr(message, "CUDA error") != NULL ||
	    strstr(message, "CUDA_ERROR_") != NULL ||
	    strstr(message, "cudaError") != NULL;
}

enum host_state
hosts_crash(struct hosts *h, int64_t now_ms, const char *name,
    const char *what)
{
	const struct host_policy	*p = &h->policy;
	struct host			*r = host_get(h, name, now_ms);
	char				 why[HOST_REASON_MAX];
	char				 win[32], brief[HOST_BRIEF_MAX];

	crash_prune(p, r, now_ms);
	if (r->n_crash == HOST_CRASHES_KEPT) {
		memmove(r->crash_ms, r->crash_ms + 1, (r->n_crash - 1) *
		    sizeof(r->crash_ms[0]));
		r->n_crash--;
	}
	r->crash_ms[r->n_crash++] = now_ms;
	r->crashes++;
	host_dirty(h, r, now_ms);
	if (r->state == HOST_QUARANTINED)
		return r->state;
	core_fmt_secs(win, sizeof(win), p->crash_window_ms);
	textf(why, sizeof(why), "%u worker crash%s within %s, the latest in "
	    "%s", r->n_crash, r->n_crash == 1 ? "" : "es", win, what);
	textf(brief, sizeof(brief), "%u worker crash%s", r->n_crash,
	    r->n_crash == 1 ? "" : "es");
	if (p->quarantine_crashes > 0 && r->n_crash >= p->quarantine_crashes)
		host_set_state(h, r, HOST_QUARANTINED, now_ms, why, brief);
	else if (p->suspect_crashes > 0 && r->n_crash >= p->suspect_crashes)
		host_set_state(h, r, HOST_SUSPECT, now_ms, why, brief);
	return r->state;
}

enum host_state
hosts_seen(struct hosts *h, int64_t now_ms, const char *name)
{
	struct host	*r = hosts_find(h, name);
	char		 win[32];

	if (r == NULL)
		return HOST_OK;
	if (crash_prune(&h->policy, r, now_ms))
		host_dirty(h, r, now_ms);
	if (r->state != HOST_SUSPECT || (h->policy.suspect_crashes > 0 &&
	    r->n_crash >= h->policy.suspect_crashes))
		return r->state;
	for (uint32_t i = 0; i < r->n_gpus; i++)
		if (!r->gpus[i].ok)
			return r->state;
	core_fmt_secs(win, sizeof(win), h->policy.crash_window_ms);
	char why[HOST_REASON_MAX];
	textf(why, sizeof(why), "its GPUs pass and %u worker crash%s within "
	    "%s", r->n_crash, r->n_crash == 1 ? "" : "es", win);
	host_set_state(h, r, HOST_OK, now_ms, why, "GPUs pass");
	return r->state;
}

int
hosts_set(struct hosts *h, int64_t now_ms, const char *name,
    enum host_state to, const char *reason, const char *brief)
{
	struct host	*r;

	if (to == HOST_OK) {
		if ((r = hosts_find(h, name)) == NULL)
			return -1;
		/* A fresh start: the next failure counts as new. */
		r->n_crash = 0;
		free(r->gpus);
		r->gpus = NULL;
		r->n_gpus = 0;
		host_dirty(h, r, now_ms);
	} else
		r = host_get(h, name, now_ms);
	host_set_state(h, r, to, now_ms, reason, brief);
	return 0;
}

void
hosts_restore(struct hosts *h, const struct host *src)
{
	struct host	*r;

	if (src->state < HOST_OK || src->state > HOST_QUARANTINED)
		return;
	r = host_get(h, src->name, src->since_ms);
	h->n_state[r->state]--;
	r->state = src->state;
	h->n_state[r->state]++;
	textcpy(r->reason, sizeof(r->reason), src->reason);
	r->since_ms = src->since_ms;
	r->updated_ms = src->updated_ms;
	r->crashes = src->crashes;
	r->gpu_failures = src->gpu_failures;
	r->n_crash = src->n_crash < HOST_CRASHES_KEPT ? src->n_crash :
	    HOST_CRASHES_KEPT;
	memcpy(r->crash_ms, src->crash_ms, r->n_crash * sizeof(r->crash_ms[0]));
	r->hook = src->hook;
	free(r->gpus);
	r->gpus = NULL;
	r->n_gpus = src->n_gpus < HOST_GPUS_MAX ? src->n_gpus : HOST_GPUS_MAX;
	if (r->n_gpus > 0) {
		r->gpus = xcalloc(r->n_gpus, sizeof(*r->gpus));
		memcpy(r->gpus, src->gpus, r->n_gpus * sizeof(*r->gpus));
	}
}

int
hosts_set_hook(struct hosts *h, int64_t now_ms, const char *name,
    const struct host_hook *hk)
{
	struct host	*r = hosts_find(h, name);

	if (r == NULL)
		return -1;
	r->hook = *hk;
	if (!r->dirty) {
		r->dirty = true;
		TAILQ_INSERT_TAIL(&h->dirty, r, dirty_entry);
	}
	return 0;
}

void
hosts_dirty_all(struct hosts *h)
{
	struct host	*r;

	TAILQ_FOREACH(r, &h->all, entry) {
		if (!r->dirty) {
			r->dirty = true;
			TAILQ_INSERT_TAIL(&h->dirty, r, dirty_entry);
		}
	}
}

void
hosts_changes_clear(struct hosts *h)
{
	struct host	*r;

	while ((r = TAILQ_FIRST(&h->dirty)) != NULL) {
		TAILQ_REMOVE(&h->dirty, r, dirty_entry);
		r->dirty = false;
	}
	h->n_changes = 0;
}

const char *
host_state_name(enum host_state s)
{
	switch (s) {
	case HOST_OK:
		return "ok";
	case HOST_SUSPECT:
		return "suspect";
	case HOST_QUARANTINED:
		return "quarantined";
	}
	return "unknown";
}

enum host_state
host_state_parse(const char *s)
{
	for (int i = HOST_OK; i <= HOST_QUARANTINED; i++)
		if (strcmp(s, host_state_name((enum host_state)i)) == 0)
			return (enum host_state)i;
	return 0;
}

const char *
host_gpu_action_name(enum host_gpu_action a)
{
	switch (a) {
	case HOST_GPU_IGNORE:
		return "ignore";
	case HOST_GPU_SUSPECT:
		return "suspect";
	case HOST_GPU_QUARANTINE:
		return "quarantine";
	}
	return "unknown";
}

int
host_gpu_action_parse(const char *s, enum host_gpu_action *out)
{
	for (int i = HOST_GPU_IGNORE; i <= HOST_GPU_QUARANTINE; i++)
		if (strcmp(s, host_gpu_action_name((enum host_gpu_action)i)) ==
		    0) {
			*out = (enum host_gpu_action)i;
			return 0;
		}
	return -1;
}
