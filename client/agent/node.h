/*
 * A node in a job, shared by join and coproc (SPEC §4, §6): the session
 * on rdzvd (session.c: Health/Check, the Join stream, reconnecting and
 * resuming, on whichever server of --server's list leads), the reminders
 * while the node waits (waiting.c), what the node tells rdzvd after its
 * Join (report.c), the master port it offers (port.c), and the loop, the
 * signals and the one quit path around them (node.c). The session and
 * the reports tell their owner what happened through the callbacks it
 * gave them; they send the node's GPU results (gpucheck_node.c, in
 * workers.h). Internal to client/agent; agent.h maps the module.
 */
#ifndef RDZV_AGENT_NODE_H
#define RDZV_AGENT_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "client.h"
#include "grpc.h"
#include "options.h"
#include "rdzv/v1/rendezvous.pb-c.h"

/* ------------------------------------------------------------ session.c */

enum session_state {
	SESSION_CONNECT,	/* Health/Check before a new Join */
	SESSION_JOIN,		/* Join sent, no Accepted yet */
	SESSION_JOINED,		/* the stream is open */
	SESSION_RETRY,		/* waiting to connect again */
	SESSION_ENDED,		/* the job or this node ended; no more calls */
};

/* What the session tells the hub; each is called with |arg|. */
struct session_events {
	/* rdzvd accepted the node (joined or resumed): the stream is up. */
	void	(*joined)(void *arg);
	void	(*assignment)(void *arg, const Rdzv__V1__Assignment *);
	/* rdzvd says stop the workers of |gen| and older. */
	void	(*stop)(void *arg, uint64_t gen, const char *why);
	/* rdzvd refused to resume node |node_id|: the session joins again
	 * as a new node; what the old one had to say is moot. */
	void	(*resume_refused)(void *arg, uint64_t node_id,
		    const char *why);
	/* The session is over: the job closed or failed, the node was
	 * evicted, rdzvd refused the Join or could not be reached. The
	 * agent should exit with |status|; there is nothing to leave. */
	void	(*ended)(void *arg, int status, const char *msg);
	/* The generation a resume names: the one run or about to be. */
	uint64_t (*resume_generation)(void *arg);
	void	*arg;
};

/* The reminders while the node waits for the others (waiting.c). */
struct waiting_log {
	struct event		*ev;
	uint32_t		 participants;
	uint32_t		 min_nodes;
	uint64_t		 fails_at_ms;	/* monotonic; 0 unknown */
	uint32_t		 every_ms;
};

struct session {
	const struct agent_opts	*opts;
	const struct offer	*offer;
	struct session_events	 ev;
	struct grpc_client_opts	 gopts;
	struct tls_ctx		*tls;
	struct grpc_client	*cli;		/* to the current server */
	struct server_list	 servers;	/* --server's, and leaders */
	bool			 moved;		/* cli is not to the current
						   server: a new one before
						   the next attempt */
	enum session_state	 state;
	bool			 quitting;	/* no more attempts */
	struct grpc_ccall	*call;		/* Health/Check, a spare's
						   Watch, or Join */
	bool			 check_serving;
	uint8_t			 id[32];
	size_t			 id_len;	/* 0: not a node yet */
	/* Drawn for each join as a new node, sent in each retry of it
	 * (docs/PROTOCOL.md). */
	uint8_t			 join_token[16];
	uint64_t		 node_id;
	struct event		*retry_ev;
	uint32_t		 backoff_ms;
	bool			 round_answered; /* a server refused
						   in this round */
	uint64_t		 trying_since;	/* ms, first failed attempt */
	bool			 ever_joined;
	uint32_t		 hang_timeout_ms;	/* the job's; 0 off */
	uint32_t		 lease_ttl_ms;	/* the job's; 0 unknown */
	int			 close_err;	/* the last connection's end */
	bool			 job_restart_inproc;	/* the job's setting */
	/* The job's preload (issue 45), as Accepted told it; "": none. */
	char			 job_preload[256];
	bool			 hang_warned;
	/* A join went to an rdzvd that answered: it may hold our node. */
	bool			 join_sent;
	char			 last_error[512];
	bool			 spare_done;	/* a spare by node order has
						   waited (session.c) */
	struct event		*spare_ev;	/* ... at most this long */
	struct waiting_log	 wait;
};

/* ------------------------------------------------------------- report.c */

/* A Report that must reach rdzvd; resent after a resume. */
struct outcome_report {
	bool			 pending;
	struct grpc_ccall	*cc;		/* in flight */
	unsigned int		 seq, sent_seq;
	uint64_t		 generation;
	Rdzv__V1__Outcome	 outcome;
	const char		*cause;		/* "hang", "stuck", or NULL */
	uint32_t		*absent;	/* ranks that never arrived */
	size_t			 n_absent;
	Rdzv__V1__WorkerExit	*exits;
	int			 n_exits;
	char			 message[AGENT_MESSAGE_MAX + 1];
};

/* The node's latest step for rdzvd: at most one call a second, only the
 * latest step, nothing resent but the latest after a resume. */
struct progress_report {
	bool			 pending;	/* step not sent yet */
	uint64_t		 generation;
	uint64_t		 step;
	struct grpc_ccall	*cc;
	bool			 sent;		/* ever */
	uint64_t		 sent_us;	/* monotonic */
	bool			 unsupported;	/* rdzvd has no Progress */
	struct event		*timer;
};

/* Changes to the node's offer (OUTCOME_UPDATE), merged while one is in
 * flight; each sends the offer's values at the time. */
struct update_report {
	bool			 pending;
	struct grpc_ccall	*cc;
	unsigned int		 seq, sent_seq;
	bool			 nproc;
	bool			 master_port;
	bool			 gpucheck;
	uint64_t		 port_taken_gen;	/* see report_port_taken */
};

/* Whether the node's workers are starting as new processes (UPDATE
 * "starting" until "started", rule 17): only the latest state goes. */
struct start_report {
	bool			 pending;
	struct grpc_ccall	*cc;
	unsigned int		 seq, sent_seq;
	bool			 starting;	/* the state to tell */
	uint64_t		 generation;	/* of the set */
};

/* What the reports tell the hub. */
struct report_events {
	/* A call ended: an exiting agent may have waited for it. */
	void	(*done)(void *arg);
	void	*arg;
};

struct report {
	const struct session	*session;
	const struct offer	*offer;
	const char		*job_id;
	struct report_events	 ev;
	bool			 quitting;	/* outcomes are moot */
	struct outcome_report	 outcome;
	struct update_report	 update;
	struct start_report	 start;
	struct progress_report	 progress;
	struct event		*retry_ev;
	struct grpc_ccall	*leave_cc;
	bool			 left;
};

/*
 * A node's life in a job (node.c), shared by join and coproc: the loop,
 * the session and its reports, the step, the signals, the exit.
 */
struct node_hooks {
	/* Decide again (the step event, on its own loop turn). */
	void	(*step)(void *arg);
	/* The exit was just decided: take no more work. NULL: nothing. */
	void	(*quitting)(void *arg);
	/* The exit's deadline passed: drop what still runs. NULL: nothing. */
	void	(*deadline)(void *arg);
	/* SIGINT, SIGTERM or SIGHUP arrived. */
	void	(*signal)(void *arg, int sig);
	void	*arg;
};

struct node {
	struct agent_opts	*opts;
	struct event_base	*base;
	struct offer		 offer;
	struct session		 session;
	struct report		 report;
	struct node_hooks	 hooks;
	struct event		*step_ev;
	struct event		*quit_ev;	/* the exit's deadline */
	uint32_t		 quit_ms;
	struct event		*sig_ev[3];
	bool			 quitting;
	int			 exit_status;
};

/* session.c */
int	session_init(struct session *, struct event_base *,
	    const struct agent_opts *, const struct offer *,
	    const struct session_events *, char *err, size_t errlen);
void	session_start(struct session *);
void	session_quit(struct session *);
void	session_free(struct session *);
bool	session_connected(const struct session *);
const char *session_server(const struct session *);
void	session_event(struct session *, const Rdzv__V1__JoinEvent *);

/* waiting.c */
int	waiting_init(struct session *, struct event_base *);
void	waiting_news(struct session *, const Rdzv__V1__Waiting *);
void	waiting_over(struct session *);
void	waiting_free(struct session *);

/* report.c */
int	report_init(struct report *, struct event_base *,
	    const struct session *, const struct offer *, const char *job_id,
	    const struct report_events *);
void	report_outcome(struct report *, uint64_t gen, Rdzv__V1__Outcome,
	    const int *status, int n, const char *message);
void	report_hang(struct report *, uint64_t gen, const char *message,
	    bool culprit);
void	report_absent(struct report *, uint64_t gen, const char *message,
	    const uint32_t *absent, size_t n_absent);
void	report_progress(struct report *, uint64_t gen, uint64_t step);
void	report_update(struct report *, bool nproc, bool master_port,
	    bool gpucheck);
/* The master port of |generation| was taken: the update of the new port
 * asks for a new round that counts no restart. */
void	report_port_taken(struct report *, uint64_t generation);
/* The workers of |generation| start as new processes (true) or all of
 * them reached rdzv.elastic, or the set ended (false). */
void	report_starting(struct report *, uint64_t generation, bool starting);
void	report_flush(struct report *);
void	report_forget(struct report *);
void	report_leave(struct report *, const char *reason);
void	report_quit(struct report *);
bool	report_busy(const struct report *);
void	report_free(struct report *);

/* node.c */
/* The loop, the signals, the reports and the session of |n|, for job
 * o->id; |quit_ms| bounds an exit. 0, or -1 with a message. */
int	node_setup(struct node *n, struct agent_opts *o,
	    const struct node_hooks *, const struct session_events *,
	    uint32_t quit_ms, char *err, size_t len);
/* The offer's machine (gethostname) and its name for rdzvd: |host|
 * (--host), else the machine's. */
void	node_names(struct node *, const char *host);
/* Joins and runs the loop until the exit; the exit status. */
int	node_run(struct node *);
/* Decides again on the next loop turn: no decision runs inside another. */
void	node_step(struct node *);
/* The exit with |status| (|leave|: leave the job first), the one quit
 * path of join and coproc. The first decision to exit is the one; its
 * message is logged as its status wants. */
void	node_quit(struct node *, int status, bool leave, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/* Ends the session and the reports (their calls cancelled), then frees
 * the loop: the owner frees its own parts between the two. Both accept a
 * half-built node. */
void	node_close(struct node *);
void	node_free(struct node *);
/* Checks an assignment against what this node offered (join and coproc):
 * 0, or -1 with what was wrong in |why|. */
int	assignment_check(const char *job_id, uint32_t nproc,
	    uint64_t gen_seen, const Rdzv__V1__Assignment *, char *why,
	    size_t len);
/* Logs an assignment in the words of docs/AGENT.md. */
void	assignment_log(const Rdzv__V1__Assignment *);

/* port.c: the master port this node offers, held until it is used. */
uint16_t port_next(uint16_t in_use);
bool	port_usable(uint16_t port);
bool	port_master_taken(struct node *, const Rdzv__V1__Assignment *);

#endif
