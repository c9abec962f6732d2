/*
 * What a worker thread does for one call under auth = munge: munge_decode
 * (a round trip to munged over its unix socket), the credential's checks,
 * and the identity: the uid's user name where the passwd database has one
 * (else "uid:N"), and whether the user belongs to admin-group. Nothing
 * here touches the event loop; auth.c hands the result back to it.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth_int.h"
#include "buildconf.h"
#include "clock.h"
#include "grpc.h"
#include "rdzvd.h"

#define DEFAULT_SOCKET	"/run/munge/munge.socket.2"
/* How long a read of admin-group's members is used before it is read
 * again: membership changes reach rdzvd within this. */
#define GROUP_TTL_MS	60000
/* A credential is remembered this long past its expiry: munged decides
 * expiry by its own clock, a second or so after ours. */
#define REPLAY_MARGIN_S	5

#if HAVE_MUNGE
#include <munge.h>

/* admin-group as last read, shared by the threads. */
static struct {
	pthread_mutex_t	 mu;
	char		*name;		/* the group it is for */
	uint64_t	 read_ms;	/* 0: never */
	int		 found;
	gid_t		 gid;
	char		**members;	/* NULL-terminated */
} grp_cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

int
auth_munge_built(void)
{
	return 1;
}

static void
members_free(char **m)
{
	if (m == NULL)
		return;
	for (char **p = m; *p != NULL; p++)
		free(*p);
	free(m);
}

/* Reads |name| from the group database into the cache (mu held). */
static void
group_read(const char *name)
{
	struct group gr, *res = NULL;
	size_t len = 16384;
	char *buf = NULL;
	int rc;

	for (;;) {
		free(buf);
		if ((buf = malloc(len)) == NULL)
			return;
		rc = getgrnam_r(name, &gr, buf, len, &res);
		if (rc != ERANGE || len >= (1u << 24))
			break;
		len *= 2;
	}
	/* A failed lookup keeps what was read before, if anything. */
	if (rc != 0 && grp_cache.read_ms != 0) {
		free(buf);
		return;
	}
	members_free(grp_cache.members);
	grp_cache.members = NULL;
	grp_cache.found = res != NULL;
	if (res != NULL) {
		size_t n = 0;
		grp_cache.gid = gr.gr_gid;
		while (gr.gr_mem[n] != NULL)
			n++;
		if ((grp_cache.members = calloc(n + 1, sizeof(char *))) != NULL)
			for (size_t i = 0; i < n; i++)
				grp_cache.members[i] = strdup(gr.gr_mem[i]);
	}
	free(grp_cache.name);
	grp_cache.name = strdup(name);
	grp_cache.read_ms = mono_ms();
	free(buf);
}

/*
 * Whether the user is in |group|: its gid is the credential's (the
 * calling process's) or the user's primary one, or the group lists the
 * user as a member.
 */
static int
in_group(const char *group, const char *user, gid_t gid, gid_t pw_gid,
    int has_pw)
{
	int yes = 0;

	pthread_mutex_lock(&grp_cache.mu);
	if (grp_cache.read_ms == 0 || grp_cache.name == NULL ||
	    strcmp(grp_cache.name, group) != 0 ||
	    mono_ms() - grp_cache.read_ms >= GROUP_TTL_MS)
		group_read(group);
	if (grp_cache.found) {
		yes = gid == grp_cache.gid || (has_pw && pw_gid ==
		    grp_cache.gid);
		for (char **m = grp_cache.members; !yes && user != NULL &&
		    m != NULL && *m != NULL; m++)
			yes = strcmp(*m, user) == 0;
	}
	pthread_mutex_unlock(&grp_cache.mu);
	return yes;
}

/* The uid's name, or "uid:N" when the passwd database has none; -1 when
 * the lookup itself failed (an NSS server down): no identity then. */
static int
identity_of(uid_t uid, char *out, size_t outlen, gid_t *pw_gid,
    int *has_pw, int *err)
{
	struct passwd pw, *res = NULL;
	char buf[16384];
	int rc = getpwuid_r(uid, &pw, buf, sizeof(buf), &res);

	*has_pw = 0;
	if (res != NULL) {
		snprintf(out, outlen, "%s", pw.pw_name);
		*pw_gid = pw.pw_gid;
		*has_pw = 1;
		return 0;
	}
	/* Not found is 0 or one of these (getpwuid_r(3)). */
	if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF ||
	    rc == EPERM) {
		snprintf(out, outlen, "uid:%u", (unsigned int)uid);
		return 0;
	}
	*err = rc;
	return -1;
}

static void
set_msg(struct auth_result *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_msg(struct auth_result *r, int status, const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/* Why munged would not decode the credential, in the words a user needs:
 * munged's own failures are UNAVAILABLE (try again), the credential's are
 * UNAUTHENTICATED. */
static void
decode_failed(struct auth_result *r, munge_ctx_t ctx, munge_err_t e,
    const char *sock)
{
	const char *why = munge_ctx_strerror(ctx) != NULL ?
	    munge_ctx_strerror(ctx) : munge_strerror(e);

	switch (e) {
	case EMUNGE_CRED_REPLAYED:
		set_msg(r, GRPC_UNAUTHENTICATED, "MUNGE credential replayed: "
		    "munged has decoded it before, and each credential is "
		    "good for one call");
		break;
	case EMUNGE_CRED_EXPIRED:
		set_msg(r, GRPC_UNAUTHENTICATED, "MUNGE credential expired: "
		    "it is older than its time to live (are this node's and "
		    "rdzvd's clocks in sync?)");
		break;
	case EMUNGE_CRED_REWOUND:
		set_msg(r, GRPC_UNAUTHENTICATED, "MUNGE credential rewound: "
		    "it was made in rdzvd's future (are this node's and "
		    "rdzvd's clocks in sync?)");
		break;
	case EMUNGE_SOCKET:
	case EMUNGE_TIMEOUT:
	case EMUNGE_SNAFU:
	case EMUNGE_NO_MEMORY:
		r->munged_down = 1;
		set_msg(r, GRPC_UNAVAILABLE, "rdzvd cannot decode MUNGE "
		    "credentials: munged at %s: %s", sock, why);
		break;
	default:
		set_msg(r, GRPC_UNAUTHENTICATED, "invalid MUNGE credential: %s "
		    "(does this node's munged use the cluster's key?)", why);
		break;
	}
}

/*
 * munged forgets what it decoded when it restarts; rdzvd does not until the
 * credential expires (auth_replay.c), whatever it was made for. 0 for a
 * credential not seen before.
 */
static int
check_replay(struct auth_result *r, munge_ctx_t ctx, const char *cred)
{
	uint8_t key[AUTH_CRED_KEY_LEN];
	const char *why = NULL;
	time_t made = 0;
	int ttl = 0, seen;

	munge_ctx_get(ctx, MUNGE_OPT_ENCODE_TIME, &made);
	munge_ctx_get(ctx, MUNGE_OPT_TTL, &ttl);
	/* auth.c let through only a canonical text, whose key this is. */
	seen = auth_cred_key(cred, key, &why) != 0 ? -1 :
	    auth_replay_seen(key, made + (ttl > 0 ? ttl : 0) +
	    REPLAY_MARGIN_S, &r->replay_forgot);
	if (seen == 0)
		return 0;
	set_msg(r, seen > 0 ? GRPC_UNAUTHENTICATED : GRPC_INTERNAL,
	    seen > 0 ? "MUNGE credential replayed: rdzvd has seen it "
	    "before, and each credential is good for one call" :
	    "rdzvd could not check its record of credentials (out of "
	    "memory, or the replicas' shared record in etcd did not "
	    "answer); try again");
	return -1;
}

/*
 * The client names the call and digests its request in the payload
 * (credbind.h): a credential taken from one call is no good for
 * another, nor for the same method with another request. 0 when the
 * payload is |want|.
 */
static int
check_binding(struct auth_result *r, const void *payload, int len,
    const char *path, const char *want)
{
	if (payload == NULL || (size_t)len < strlen(path) + 1 ||
	    memcmp(payload, path, strlen(path)) != 0 ||
	    ((const char *)payload)[strlen(path)] != ' ') {
		set_msg(r, GRPC_UNAUTHENTICATED, "MUNGE credential made for "
		    "another call than %s", path);
		return -1;
	}
	if ((size_t)len != strlen(want) || memcmp(payload, want,
	    (size_t)len) != 0) {
		set_msg(r, GRPC_UNAUTHENTICATED, "MUNGE credential made for "
		    "another request than this %s: a credential is good only "
		    "for the exact request it was made for", path);
		return -1;
	}
	return 0;
}

void
auth_munge_decode(const char *socket, const char *admin_group,
    const char *cred, const char *path, const char *want,
    struct auth_result *r)
{
	const char *sock = socket != NULL ? socket : DEFAULT_SOCKET;
	munge_ctx_t ctx;
	munge_err_t e;
	void *payload = NULL;
	int len = 0, has_pw = 0, err = 0;
	uid_t uid;
	gid_t gid, pw_gid = 0;

	memset(r, 0, sizeof(*r));
	if ((ctx = munge_ctx_create()) == NULL) {
		set_msg(r, GRPC_INTERNAL, "rdzvd: out of memory for a MUNGE "
		    "context");
		return;
	}
	if (socket != NULL)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, (char *)socket);
	e = munge_decode(cred, ctx, &payload, &len, &uid, &gid);
	if (e != EMUNGE_SUCCESS) {
		decode_failed(r, ctx, e, sock);
		goto out;
	}
	if (check_replay(r, ctx, cred) != 0 ||
	    check_binding(r, payload, len, path, want) != 0)
		goto out;
	if (identity_of(uid, r->identity, sizeof(r->identity), &pw_gid,
	    &has_pw, &err) != 0) {
		set_msg(r, GRPC_UNAVAILABLE, "rdzvd cannot look up uid %u: %s",
		    (unsigned int)uid, strerror(err));
		goto out;
	}
	if (admin_group != NULL && in_group(admin_group, has_pw ?
	    r->identity : NULL, gid, pw_gid, has_pw))
		r->flags |= AUTH_FLAG_ADMIN;
	r->status = GRPC_OK;
out:
	free(payload);
	munge_ctx_destroy(ctx);
}

int
auth_munge_probe(const char *socket, char *err, size_t errlen)
{
	const char *sock = socket != NULL ? socket : DEFAULT_SOCKET;
	munge_ctx_t ctx = munge_ctx_create();
	munge_err_t e;
	char *cred = NULL;
	uid_t uid;
	gid_t gid;

	if (ctx == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (socket != NULL)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, (char *)socket);
	if ((e = munge_encode(&cred, ctx, NULL, 0)) == EMUNGE_SUCCESS)
		e = munge_decode(cred, ctx, NULL, NULL, &uid, &gid);
	if (e != EMUNGE_SUCCESS)
		snprintf(err, errlen, "munged at %s: %s", sock,
		    munge_ctx_strerror(ctx) != NULL ? munge_ctx_strerror(ctx) :
		    munge_strerror(e));
	free(cred);
	munge_ctx_destroy(ctx);
	return e == EMUNGE_SUCCESS ? 0 : -1;
}

void
auth_munge_free(void)
{
	pthread_mutex_lock(&grp_cache.mu);
	members_free(grp_cache.members);
	grp_cache.members = NULL;
	free(grp_cache.name);
	grp_cache.name = NULL;
	grp_cache.read_ms = 0;
	pthread_mutex_unlock(&grp_cache.mu);
}

#else

int
auth_munge_built(void)
{
	return 0;
}

void
auth_munge_decode(const char *socket, const char *admin_group,
    const char *cred, const char *path, const char *want,
    struct auth_result *r)
{
	memset(r, 0, sizeof(*r));
	r->status = GRPC_UNAUTHENTICATED;
	snprintf(r->msg, sizeof(r->msg), "this rdzvd was built without MUNGE");
}

int
auth_munge_probe(const char *socket, char *err, size_t errlen)
{
	snprintf(err, errlen, "this rdzvd was built without MUNGE");
	return -1;
}

void
auth_munge_free(void)
{
}

#endif
