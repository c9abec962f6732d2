/*
 * rdzvd's own record of the MUNGE credentials it accepted, kept until each
 * expires (docs/SECURITY.md). munged refuses a credential it decoded
 * before, but its replay cache lives in its memory: after munged restarts,
 * a captured credential that has not expired would be good once more. A
 * credential is recorded by an opaque digest (auth_cred.c: of its MAC,
 * not of its text, which munged lets a client write in many ways), with
 * the wall time it expires (munged's encode time plus its time to live).
 *
 * Memory is bounded: at most REPLAY_MAX records. The oldest go first when
 * they expire; when the record is full of live ones the oldest is
 * forgotten (munged still refuses it unless it restarted too), which
 * auth.c logs. Called from auth.c's threads; never logs.
 */
#include <sys/queue.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth_int.h"
#include "hash.h"

#define REPLAY_MAX		200000

struct seen {
	uint8_t			 md[AUTH_CRED_KEY_LEN];
	uint64_t		 hv;
	time_t			 expires;
	TAILQ_ENTRY(seen)	 entry;		/* oldest first */
};

static struct {
	pthread_mutex_t		 mu;
	struct hash		 by_md;
	TAILQ_HEAD(, seen)	 fifo;
	size_t			 n;
	int			 init;
} R = { .mu = PTHREAD_MUTEX_INITIALIZER };

/*
 * Issue 42: a record shared by every replica (auth_replay_etcd.c), asked
 * about a credential this replica has not recorded, by the record's key
 * (opaque to it) and expiry. Kept apart from the rest of this file on
 * purpose: what the key is (a digest of the header text today) is this
 * file's to choose.
 */
static int	(*shared_seen)(const uint8_t *, size_t, time_t, void *);
static void	*shared_arg;

void
auth_replay_share(int (*seen)(const uint8_t *, size_t, time_t, void *),
    void *arg)
{
	shared_seen = seen;
	shared_arg = arg;
}

static int
match_md(const void *item, const void *key)
{
	return memcmp(((const struct seen *)item)->md, key,
	    AUTH_CRED_KEY_LEN) == 0;
}

static void
drop_oldest(void)
{
	struct seen *s = TAILQ_FIRST(&R.fifo);

	TAILQ_REMOVE(&R.fifo, s, entry);
	hash_remove(&R.by_md, s->hv, s);
	free(s);
	R.n--;
}

int
auth_replay_seen(const uint8_t md[AUTH_CRED_KEY_LEN], time_t expires,
    int *forgot)
{
	time_t now = time(NULL);
	struct seen *s;
	uint64_t hv;
	int rc = 0;

	hv = hash_bytes(md, AUTH_CRED_KEY_LEN);
	pthread_mutex_lock(&R.mu);
	if (!R.init) {
		hash_init(&R.by_md);
		TAILQ_INIT(&R.fifo);
		R.init = 1;
	}
	while ((s = TAILQ_FIRST(&R.fifo)) != NULL && s->expires < now)
		drop_oldest();
	if (hash_find(&R.by_md, hv, match_md, md) != NULL) {
		rc = 1;
		goto out;
	}
	if (shared_seen != NULL) {
		/* A round trip: not under the lock. */
		pthread_mutex_unlock(&R.mu);
		rc = shared_seen(md, 32, expires, shared_arg);
		pthread_mutex_lock(&R.mu);
		if (rc != 0)
			goto out;
		if (hash_find(&R.by_md, hv, match_md, md) != NULL) {
			rc = 1;
			goto out;
		}
	}
	if (R.n >= REPLAY_MAX) {
		drop_oldest();
		*forgot = 1;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		rc = -1;
		goto out;
	}
	memcpy(s->md, md, AUTH_CRED_KEY_LEN);
	s->hv = hv;
	s->expires = expires;
	if (hash_insert(&R.by_md, hv, s) != 0) {
		free(s);
		rc = -1;
		goto out;
	}
	TAILQ_INSERT_TAIL(&R.fifo, s, entry);
	R.n++;
out:
	pthread_mutex_unlock(&R.mu);
	return rc;
}

void
auth_replay_free(void)
{
	pthread_mutex_lock(&R.mu);
	while (R.init && !TAILQ_EMPTY(&R.fifo))
		drop_oldest();
	if (R.init)
		hash_free(&R.by_md);
	R.init = 0;
	pthread_mutex_unlock(&R.mu);
}
