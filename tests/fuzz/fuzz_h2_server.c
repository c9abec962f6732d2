/*
 * Fuzz target for rdzvd as a peer sees it: bytes in on one cleartext
 * connection, the HTTP/2 session (lib/grpc_server*.c on nghttp2) and
 * behind it the daemon's real services, handlers, rendezvous core and
 * SQLite store, wired as daemon/main.c wires them.
 *
 * Every input gets a fresh daemon: an event loop, a core, an empty
 * database in a private temporary directory (on /dev/shm when there is
 * one, so commits cost no disk; the file stays open and is emptied between
 * inputs, see store_empty) and the gRPC server listening on a unix socket
 * there. The target connects to it as a client would (the server accepts
 * through its ordinary listener path, with "uid:N" as identity), writes
 * the input, turns the event loop without blocking (a bounded number of
 * turns) until the server has read everything and has nothing more to do,
 * closes the connection, lets the server see that, and tears the daemon
 * down. Leaks and memory errors show under ASan; a fatal() in the daemon
 * shows as an exit.
 *
 * Input layout (tests/fuzz/make_corpus_h2.py captures the seeds from
 * grpcio talking to a real rdzvd):
 *   byte 0   bit 0: send the HTTP/2 client preface first (the seed does
 *            not carry it); bit 1: half-close right after the last byte,
 *            so the end of input races the answers; bits 2-7: 0 writes
 *            the bytes at once, otherwise in chunks of 1 to 4 * that many
 *            bytes, with an event-loop turn after each chunk
 *   rest     what the client sends
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sqlite3.h>

#include "fuzz.h"
#include "fuzz_peer.h"
#include "log.h"
#include "rdzvd.h"
#include "rpc.h"
#include "store.h"
#include "store_be.h"
#include "store_sqlite.h"

/* The daemon's state, which daemon/main.c defines for rdzvd. */
struct rdzvd rdzvd;

#define PREFACE		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define PREFACE_LEN	(sizeof(PREFACE) - 1)
/* Turns with nothing done before the server counts as idle. */
#define QUIET_TURNS	2
/* Turns beyond one per chunk: answers, commits, the close. */
#define EXTRA_TURNS	256

static int debug;
/* A unix socket's path has room for 107 bytes. */
static char dir[64], sock_path[80], db_path[80];
/* The database, open from the first input to the exit (store_empty). */
static struct store *store;

static void
remove_db(void)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", ".lock" };
	char p[sizeof(db_path) + 8];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", db_path, suffixes[i]);
		unlink(p);
	}
}

static void
cleanup(void)
{
	store_close(store);
	remove_db();
	unlink(sock_path);
	rmdir(dir);
}

static void
setup_once(void)
{

	if (dir[0] != '\0')
		return;
	debug = fuzz_peer_start("rdzvd-fuzz", dir, sizeof(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
	snprintf(db_path, sizeof(db_path), "%s/rdzv.db", dir);
	atexit(cleanup);
}

/*
 * The store, emptied for each input. Opening a database is most of a
 * daemon's start-up (SQLite parses the schema and prepares every
 * statement, ASan watches each allocation of it), so the process opens
 * one and deletes its rows between inputs, which leaves it as a new one
 * is: nodes, events, rounds, assignments and GPUs go with their job (ON
 * DELETE CASCADE), the node counter with meta. Like the store's unit
 * tests, this looks inside the store (store_sqlite.h) only to reach its
 * SQLite connection.
 */
static struct store *
store_empty(char *err, size_t errlen)
{
	struct sqlstore *s;

	if (store == NULL) {
		remove_db();
		if (store_open(db_path, &store, err, errlen) != 0)
			return NULL;
	}
	s = store_backend(store);
	if (sqlite3_exec(s->db, "DELETE FROM jobs; DELETE FROM meta", NULL,
	    NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "emptying %s: %s", db_path,
		    sqlite3_errmsg(s->db));
		return NULL;
	}
	s->next_node_id = 1;
	s->transactions = 0;
	return store;
}

/* The in-memory store never refuses a commit; if it did, that is a bug. */
static void
commit_failed(const char *err)
{
	fprintf(stderr, "fuzz: commit failed: %s\n", err);
	abort();
}

/* daemon/main.c's start-up, on an empty database, listening on sock_path. */
static void
daemon_start(void)
{
	struct core_config cc;
	struct endpoint ep;
	struct timeval tv;
	char err[512];

	memset(&rdzvd, 0, sizeof(rdzvd));
	/* config.c's defaults. */
	rdzvd.cfg.log_level = debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR;
	rdzvd.cfg.max_message = 4 * 1024 * 1024;
	rdzvd.cfg.max_streams = 100;
	rdzvd.cfg.max_conns = 100000;
	rdzvd.cfg.max_nodes_per_job = 10000;
	rdzvd.cfg.retention_s = 7 * 86400;
	rdzvd.cfg.keepalive_ms = 5000;
	rdzvd.cfg.shutdown_timeout_ms = 5000;
	if ((rdzvd.cfg.db = strdup(db_path)) == NULL)
		abort();

	rdzvd.started_mono_ms = mono_ms();
	gettimeofday(&tv, NULL);
	rdzvd.started_wall_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	rdzvd.base = event_base_new();
	if (rdzvd.base == NULL || event_base_priority_init(rdzvd.base, 3) != 0)
		abort();

	rpc_services_core_config(&cc);
	if ((rdzvd.core = core_new(&cc)) == NULL)
		abort();
	if ((rdzvd.store = store_empty(err, sizeof(err))) == NULL ||
	    store_load(rdzvd.store, rdzvd.core, turn_now(), err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "fuzz: %s\n", err);
		abort();
	}
	rpc_services_start(commit_failed);

	struct grpc_server_opts so;

	rpc_services_server_opts(&so);
	rdzvd.srv = grpc_server_new(rdzvd.base, rpc_methods,
	    rpc_n_methods, &so);
	snprintf(rdzvd.listeners[0], sizeof(rdzvd.listeners[0]), "unix:%s",
	    sock_path);
	if (rdzvd.srv == NULL ||
	    endpoint_parse(rdzvd.listeners[0], 0, &ep, NULL, 0) != 0 ||
	    grpc_server_listen(rdzvd.srv, &ep, NULL) != 0)
		abort();
	rdzvd.n_listeners = 1;
	rdzvd.serving = 1;
}

/* daemon/main.c's teardown after its event loop has ended. */
static void
daemon_stop(void)
{
	rpc_services_stop();
	grpc_server_free(rdzvd.srv);
	/* The store stays open for the next input (store_empty). */
	core_free(rdzvd.core);
	event_base_free(rdzvd.base);
	config_free(&rdzvd.cfg);
	memset(&rdzvd, 0, sizeof(rdzvd));
}

static int
client_connect(void)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		perror("fuzz: connect");
		abort();
	}
	return fd;
}

/*
 * One connection's life: the input goes out as |flags| say, the loop turns
 * until the server has read all of it and stays quiet, then the client
 * closes and the server gets turns to notice and clean up.
 */
static void
converse(const uint8_t *in, size_t len, uint8_t flags)
{
	uint32_t state = 0x9e3779b9u ^ flags;
	size_t pos = 0, maxchunk = 4 * (size_t)(flags >> 2);
	size_t turns = EXTRA_TURNS + (maxchunk > 0 ? len : 1);
	int fd = client_connect(), quiet = 0, server_gone = 0;
	int half_closed = 0;
	size_t received = 0, turns_used = 0;

	for (size_t turn = 0; turn < turns && quiet < QUIET_TURNS; turn++) {
		if (pos < len && !server_gone && fuzz_send_chunk(fd, in, len,
		    &pos, maxchunk, &state) != 0)
			server_gone = 1;
		if ((pos == len || server_gone) && (flags & 2) &&
		    !half_closed) {
			shutdown(fd, SHUT_WR);
			half_closed = 1;
		}
		event_base_loop(rdzvd.base, EVLOOP_NONBLOCK);
		ssize_t got = fuzz_drain(fd);
		if (got < 0)
			server_gone = 1;
		else
			received += (size_t)got;
		turns_used = turn + 1;
		if ((pos == len || server_gone) && got <= 0 &&
		    fuzz_unread(fd) == 0 && !fuzz_loop_active(rdzvd.base))
			quiet++;
		else
			quiet = 0;
	}

	if (debug)
		fprintf(stderr, "fuzz: %zu of %zu bytes sent, %zu received, "
		    "%zu turns\n", pos, len, received, turns_used);
	/* The client goes away; the server sees it and cleans up. */
	close(fd);
	for (size_t turn = 0; turn < EXTRA_TURNS; turn++) {
		if (grpc_server_conn_count(rdzvd.srv) == 0 &&
		    !fuzz_loop_active(rdzvd.base))
			break;
		event_base_loop(rdzvd.base, EVLOOP_NONBLOCK);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *in;
	size_t len;

	if (size < 1 || size > 256 * 1024)
		return 0;
	setup_once();
	len = size - 1 + (data[0] & 1 ? PREFACE_LEN : 0);
	if ((in = malloc(len > 0 ? len : 1)) == NULL)
		return 0;
	if (data[0] & 1) {
		memcpy(in, PREFACE, PREFACE_LEN);
		memcpy(in + PREFACE_LEN, data + 1, size - 1);
	} else
		memcpy(in, data + 1, size - 1);

	daemon_start();
	converse(in, len, data[0]);
	daemon_stop();
	free(in);
	return 0;
}
