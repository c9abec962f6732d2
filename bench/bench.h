/*
 * rdzv-bench: simulated nodes, each with its own gRPC connection, join one or
 * many jobs on one event loop; the figures of those rendezvous are printed.
 * rdzv_bench.c parses the options and prints the report, rdzv_bench_run.c
 * drives the nodes, and a mode (rdzv_bench_failover.c's --failover) takes
 * over after the first round through struct bench_mode's hooks. Each node
 * runs lib/grpc's client, or with --client wire rdzv_bench_wire.c's
 * (lib/grpc's bytes, pre-encoded by wire_enc.c, and a small reader).
 */
#ifndef RDZV_BENCH_H
#define RDZV_BENCH_H

#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "grpc.h"
#include "rdzv/v1/rendezvous.pb-c.h"
#include "servers.h"

#define BENCH_MAX_SERVERS	16

enum phase {
	PHASE_CONNECT,		/* one Health/Check per node */
	PHASE_JOIN,		/* Joins sent, waiting for the first round */
	PHASE_KILL,		/* connections closed, waiting for survivors */
	PHASE_FAILOVER,		/* the leader killed, waiting for resumes */
	PHASE_DONE,
};

struct bench;
struct job;
struct wire_conn;
struct wire_server;

/* One simulated node: its own connection and Join stream. */
struct agent {
	struct job		*job;
	int			 idx;		/* within its job */
	struct grpc_client	*cli;
	struct grpc_ccall	*join;
	struct wire_conn	*wc;		/* --client wire: instead of cli */
	char			 hostname[32];
	int			 connected;
	int			 killed;	/* its connection was closed */
	uint64_t		 t_connected;	/* its Health/Check answered */
	uint64_t		 t_join_sent;
	uint64_t		 t_assigned;	/* first round */
	uint64_t		 t_reassigned;	/* round without the killed */
	uint64_t		 generation;	/* of the assignment it holds */
	int			 assigned;
	int			 reassigned;

	/* --failover */
	uint8_t			 session[64];	/* its session_id */
	size_t			 session_len;
	struct server_list	*sl;		/* where it tries next */
	struct event		*retry_ev;
	uint32_t		 backoff_ms;	/* after a round of failures */
	int			 round_answered; /* a replica refused */
	int			 accepted_again;	/* as a resume */
	int			 resumed;	/* and told its generation */
	uint64_t		 t_resumed;
};

struct job {
	struct bench		*b;
	int			 idx;
	char			 rdzv_id[160];
	struct agent		*agents;	/* b->nodes of them */
	uint64_t		 generation;	/* first round's */
	uint64_t		 final_generation;	/* after --kill */
	unsigned char		*rank_seen;	/* b->nodes flags */
	unsigned char		*final_rank_seen;
	int			 n_assigned;
	int			 n_reassigned;
	int			 n_survivors;
};

struct bench {
	struct event_base	*base;
	struct grpc_client_opts	 opts[BENCH_MAX_SERVERS];
	const char		*servers[BENCH_MAX_SERVERS];
	int			 n_servers;

	/* Options. */
	int			 nodes;		/* per job */
	int			 jobs;
	int			 nproc;
	int			 min_nodes;	/* 0: nodes, or nodes - kill */
	int			 kill;		/* per job */
	uint32_t		 grace_ms;	/* reconnect grace; 0 default */
	const char		*id_prefix;
	pid_t			 daemon_pid;
	double			 timeout_s;
	int			 phase_times;	/* print the phases' clock */
	int			 wire;		/* --client wire */

	struct job		*jobv;
	enum phase		 phase;
	int			 total;		/* nodes * jobs */
	int			 n_connected, n_accepted, n_assigned;
	int			 n_killed, n_reassigned, n_survivors;
	int			 n_interim;	/* assignments of rounds between
						   the first and the final */
	int			 errors;
	char			 first_error[512];

	uint64_t		 t_first_connect, t_connected;
	uint64_t		 t_last_join_sent, t_last_assignment;
	uint64_t		 t_kill, t_last_reassignment;
	double			 cpu_connected;	/* the daemon's, once every
						   node is connected; -1 */
	double			 self_cpu_connected;
	struct event		*deadline_ev, *kill_ev;
	int			 timed_out;
	int			 closing;

	/* --client wire: the servers' pre-encoded bytes. */
	struct wire_server	*wire_servers;
	struct wire_conn	*wire_conns;	/* total of them */

	/* The mode after the first round (NULL: none, or --kill). */
	const struct bench_mode	*mode;

	/* --failover: the replicas, the leader killed, the resumes. */
	int			 failover;
	uint32_t		 max_backoff_ms;	/* the agent's: 5 s */
	struct server_list	 replicas;
	pid_t			 leader_pid;
	char			 leader[300];	/* its advertised address */
	struct event		*failover_ev;
	uint64_t		 t_failover, t_first_resumed, t_last_resumed;
	int			 n_resumed;
	uint64_t		 resume_tries;
};

/* rdzv_bench_run.c */
int	bench_setup(struct bench *b);
void	bench_run(struct bench *b);
void	bench_teardown(struct bench *b);
void	bench_fail(struct bench *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* The Join stream's callbacks (grpc_client_call's on_msg and done). */
void	bench_join_msg(struct grpc_ccall *, const ProtobufCMessage *, void *);
void	bench_join_done(struct grpc_ccall *, int, const char *, void *);
/* What both clients report, grpc's callbacks and the wire's reader: a
 * node's Health/Check answered OK, an event of its Join stream, the end
 * of its Join stream (a gRPC status, its message or NULL). */
void	bench_connected(struct agent *);
void	bench_join_event(struct agent *, const Rdzv__V1__JoinEvent *);
void	bench_join_ended(struct agent *, int status, const char *message);

/*
 * rdzv_bench_wire.c: --client wire, nodes that write the bytes lib/grpc's
 * client writes (encoded once, by nghttp2, as lib/grpc configures it) and
 * read the server's frames with a small parser; no nghttp2 session per
 * node. wire_setup makes the servers' bytes (0 or -errno), wire_start
 * connects every node, wire_join writes a node's SETTINGS ACK and Join
 * (0, or -1 after bench_fail), wire_close closes its connection (--kill).
 */
int	wire_setup(struct bench *);
void	wire_start(struct bench *);
int	wire_join(struct agent *, const Rdzv__V1__JoinRequest *);
void	wire_close(struct agent *);
void	wire_teardown(struct bench *);

/*
 * What a mode does at rdzv_bench_run.c's moments: run.c calls these and
 * knows no mode by name. Every hook may be NULL.
 */
struct bench_mode {
	/* After the nodes are made, before they connect. 0 or -errno. */
	int	(*setup)(struct bench *);
	/* Every node holds its first assignment: the mode's phase begins
	 * (b->phase is the mode's to set). */
	void	(*start)(struct bench *);
	/* In the mode's phase: a node's accepted event, its assignment,
	 * and the end of its Join (|hint|: rdzv-leader or NULL). */
	void	(*accepted)(struct agent *, const Rdzv__V1__Accepted *);
	void	(*assignment)(struct agent *, const Rdzv__V1__Assignment *);
	void	(*join_ended)(struct agent *, int status, const char *hint);
	/* Frees what setup made (also after a failed setup). */
	void	(*teardown)(struct bench *);
};

/* rdzv_bench_failover.c: --failover, a mode. */
extern const struct bench_mode failover_mode;
/* The replicas of |list| and the leader's pid (ServerInfo of opts[0],
 * the leader). 0, or -1 with a message. */
int	failover_prepare(struct bench *b, const char *list, char *err,
	    size_t errlen);
void	failover_report(const struct bench *b);

#endif
