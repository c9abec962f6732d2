/*
 * The rdzvd replicas a client may talk to, and which one to talk to next
 * (SPEC §14): `--server a:29400,b:29400,unix:/run/rdzv/rdzvd.sock` or the
 * same in RDZV_SERVER.
 *
 * The choosing rule. Calls go to the current server until one fails:
 *   - refused by a standby: UNAVAILABLE with the trailer `rdzv-leader:
 *     HOST:PORT` naming the leader. The leader is tried next, at once; it
 *     joins the list when it is not in it (a leader that moved to a new
 *     host is still found from an old list).
 *   - any other failure the caller would retry (no connection, a daemon
 *     shutting down, a standby that knows no leader yet): the next server
 *     of the list, at once.
 *   - every server failed once since the last success: a round is over.
 *     The agent backs off (exponentially, as it does with one server);
 *     rdzvctl gives up.
 * A round follows at most as many hints as there are servers, so replicas
 * that name a dead leader or each other (a stale view during a failover)
 * cannot make a client spin: further hints count as absent. After a hint
 * the rotation goes on from the server that gave it, so every server of
 * the list is still tried each round.
 *
 * With one server given nothing changes: every failure ends a round.
 */
#ifndef RDZV_SERVERS_H
#define RDZV_SERVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "endpoint.h"

/* The most servers in a list, those named by hints included. */
#define SERVER_LIST_MAX		16
/* The trailer in which a standby names the leader. */
#define SERVER_LEADER_TRAILER	"rdzv-leader"

struct server_entry {
	struct endpoint	 ep;
	char		 name[300];	/* endpoint_format()'s text */
};

struct server_list {
	struct server_entry	 s[SERVER_LIST_MAX];
	size_t			 n;		/* entries */
	size_t			 n_given;	/* the first n_given were given;
						   the others came as hints */
	size_t			 cur;		/* the one calls go to */
	size_t			 pos;		/* the rotation's place: cur,
						   unless a hint moved it */
	unsigned int		 fails;		/* failures without a hint
						   since the round began */
	unsigned int		 hints;		/* hints followed in it */
};

/* Where the next call goes after a failure. */
enum server_move {
	SERVER_MOVE_HINT,	/* to the leader a standby named: at once */
	SERVER_MOVE_NEXT,	/* to the next server of the list: at once */
	SERVER_MOVE_ROUND,	/* every server failed once since the last
				   success: back off, or give up */
};

/*
 * Parses a comma-separated list of endpoints (HOST:PORT, [V6]:PORT, HOST,
 * unix:PATH; the port defaults to |default_port|), blanks around each
 * ignored. Empty entries,
 * duplicates and more than SERVER_LIST_MAX entries are refused. Returns 0,
 * or -1 with a message naming the entry in |err|. The current server is
 * the first.
 */
int	server_list_parse(struct server_list *, const char *spec,
	    uint16_t default_port, char *err, size_t errlen);

/* The server calls go to now. */
const struct server_entry *server_list_current(const struct server_list *);

/* The list as given, "a:29400,b:29400", for messages; |buf| returned. */
const char *server_list_format(const struct server_list *, char *buf,
	    size_t len);

/* A call succeeded on the current server: a new round begins. */
void	server_list_ok(struct server_list *);

/*
 * A call on the current server failed in a way the caller would retry;
 * |hint| is the rdzv-leader trailer it ended with, or NULL. Moves the
 * current server by the rule above and says how. A hint that does not
 * parse, names the current server, or would be followed a second time in
 * a round is ignored (the move is then NEXT or ROUND).
 */
enum server_move server_list_failed(struct server_list *, const char *hint);

/*
 * The pauses between rounds (SPEC §6): 100 ms, doubling up to |max_ms|
 * (the agent's 5 s). While a server answered in the round that ended (a
 * standby refusing: a leader is elected within its lease), the pause stays
 * at most SERVER_BACKOFF_REPLICA_MS, so that a failover is not stretched by
 * the backoff. |*backoff_ms| (0 at first) is updated; the pause to wait,
 * jittered over its upper half, is returned.
 */
#define SERVER_BACKOFF_MIN_MS		100
#define SERVER_BACKOFF_MAX_MS		5000
#define SERVER_BACKOFF_REPLICA_MS	1000
uint32_t server_backoff_next(uint32_t *backoff_ms, uint32_t max_ms,
	    bool server_answered);

/* |ms| jittered over its upper half: the pause before trying the next
 * server, so that the nodes of a failover spread over a moment. */
uint32_t server_jitter(uint32_t ms);

/* 1 when a call that ended with |status| should try another server:
 * UNAVAILABLE (no connection, a standby, a daemon going away). */
int	server_list_should_move(int status);

#endif
