/*
 * rdzvctl, the operator's view of rdzvd (SPEC §8): one file per command,
 * each exporting a struct ctl_cmd that main.c lists, as tmux's cmd-*.c do;
 * shared helpers for talking to rdzvd, tables, JSON and times.
 *
 * Calls: lib/base, lib/grpc, proto, client/common.
 * Called by: none (a program).
 */
#ifndef RDZVCTL_H
#define RDZVCTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "exitcodes.h"
#include "grpc.h"
#include "helpfmt.h"
#include "names.h"
#include "rdzv/v1/control.pb-c.h"
#include "rdzv/v1/types.pb-c.h"

/* Exit statuses: one table for the three programs (exitcodes.h). */
enum {
	CTL_EXIT_OK = RDZV_EXIT_OK,
	CTL_EXIT_ERROR = RDZV_EXIT_FAILED,
	CTL_EXIT_USAGE = RDZV_EXIT_USAGE,
	CTL_EXIT_NOT_FOUND = RDZV_EXIT_NOT_FOUND,
	CTL_EXIT_DENIED = RDZV_EXIT_REFUSED,
	CTL_EXIT_UNAVAILABLE = RDZV_EXIT_UNAVAILABLE,
};

enum ctl_output {
	CTL_OUTPUT_TEXT,
	CTL_OUTPUT_JSON,
};

/* Everything a command needs: the options given and the clock. */
struct ctl {
	struct client_opts	 client;
	struct server_list	 servers;	/* --server's; n 0 until the
						   first call parses it */
	char			 server[300];	/* the one called, as errors
						   name it */
	enum ctl_output		 output;
	int64_t			 now_ms;	/* wall clock, unix ms */
	bool			 fixed_times;	/* ctl_received() */

	/* Command options; each command reads those it takes. */
	bool			 all;
	bool			 watch;
	const char		*reason;
	uint32_t		 limit;
	uint32_t		 max_jobs;	/* status --limit; 0 all */
	uint64_t		 after;
	uint64_t		 timeout_ms;	/* wait --timeout; 0 none */
	uint32_t		 attempt;	/* wait --attempt; 0 any */
	uint64_t		 appear_ms;	/* wait --appear-timeout; 0
						   the default */
	bool			 must_exist;	/* wait --must-exist */
	bool			 quiet_not_found; /* ctl_call: NOT_FOUND
						   is the caller's to tell */
	int			 host_state;	/* hosts --state; 0 all */
};

/* One command. Its options come on top of the shared ones. */
struct ctl_cmd {
	const char		*name;
	const char		*args;		/* "ID NODE" */
	const char		*summary;	/* one line for the list */
	const char		*help;		/* its option lines */
	const char		*shortopts;	/* its own short options */
	const struct option	*longopts;	/* NULL-terminated */
	int			 min_args;
	int			 max_args;
	/* Applies one of its own options: 0, or an exit status. */
	int			(*option)(struct ctl *, int, const char *);
	/* Runs with the positional arguments: an exit status. */
	int			(*exec)(struct ctl *, int argc, char **argv);
};

extern const struct ctl_cmd cmd_status_entry;
extern const struct ctl_cmd cmd_close_entry;
extern const struct ctl_cmd cmd_abort_entry;
extern const struct ctl_cmd cmd_evict_entry;
extern const struct ctl_cmd cmd_events_entry;
extern const struct ctl_cmd cmd_server_entry;
extern const struct ctl_cmd cmd_wait_entry;
extern const struct ctl_cmd cmd_hosts_entry;
extern const struct ctl_cmd cmd_host_entry;

/* main.c */
int	ctl_usage_error(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

/* call.c */
/*
 * One unary call of rdzv.v1.Control/|method|. Returns CTL_EXIT_OK with
 * *reply set (free with protobuf_c_message_free_unpacked), or prints what
 * went wrong on stderr, naming the server, and returns the exit status.
 * With several servers the call follows client/common/servers.h: a
 * standby's leader hint, else the next server, until each has failed once;
 * ctl->server then names the one that answered.
 */
int	ctl_call(struct ctl *, const char *method,
	    const ProtobufCMessage *req,
	    const ProtobufCMessageDescriptor *reply_desc,
	    ProtobufCMessage **reply);
/* GetJob of |rdzv_id| with its latest |events| events, as ctl_call. */
int	ctl_get_job(struct ctl *, const char *rdzv_id, uint32_t events,
	    Rdzv__V1__Job **job);
/* The exit status for a gRPC status. */
int	ctl_exit_for(int grpc_status);
/* Prints "rdzvctl: SERVER: MESSAGE[ (hint)]"; returns the exit status. */
int	ctl_fail(struct ctl *, int grpc_status, const char *message);
/* Options for a long-lived client of our own (--watch), to the server the
 * last call reached (the first of the list before any). 0 or exit
 * status. */
int	ctl_client_opts(struct ctl *, struct grpc_client_opts *,
	    struct tls_ctx **);
/*
 * The two followers of rdzv.v1.Control/Watch (status --watch, wait) start
 * and end their streams here. ctl_watch_start: a Watch of |rdzv_id| (NULL:
 * every job, ended ones too with |all|) on |cli|. ctl_watch_end: cancels
 * *ccp if it is set, clearing it first, and breaks |base|'s loop if given.
 */
struct grpc_ccall *ctl_watch_start(struct grpc_client *, const char *rdzv_id,
	    bool all, grpc_msg_fn, grpc_done_fn, void *arg);
void	ctl_watch_end(struct grpc_ccall **, struct event_base *);
/*
 * What rdzvctl does to every message it receives, before any formatting:
 * for text output, every string is escaped for a terminal (JSON escapes
 * its own); with RDZVCTL_TEST_NOW_MS set (tests only), every instant and
 * remaining time rdzvd sent is replaced by fixed values, so output is the
 * same on every run.
 */
void	ctl_received(struct ctl *, ProtobufCMessage *m);
/* A copy of |j| to keep: a stream's message is freed after its callback.
 * Free it with protobuf_c_message_free_unpacked. */
Rdzv__V1__Job *ctl_job_copy(const Rdzv__V1__Job *j);

/* table.c */
struct table;
/* A table with |ncols| columns named by |headers| (copied). */
struct table	*table_new(size_t ncols, const char *const *headers);
/* Appends one cell; a row ends after ncols cells. */
void		 table_cell(struct table *, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
size_t		 table_rows(const struct table *);
/* Prints the columns aligned, each line prefixed by |indent|. */
void		 table_print(const struct table *, FILE *,
		    const char *indent);
void		 table_free(struct table *);

/* format.c (states by name: names.h) */
/* "0s", "450ms", "45s", "1m30s", "2h5m", "3d4h": the two largest units. */
char		*fmt_duration(char *buf, size_t len, int64_t ms);
/* The time since |t_ms| ("1m30s"), or "-" when t_ms is 0. */
char		*fmt_age(char *buf, size_t len, int64_t now_ms,
		    int64_t t_ms);
/* "2024-01-01 12:00:00" in local time, or "-" when t_ms is 0. */
char		*fmt_clock(char *buf, size_t len, int64_t t_ms);
/* "HH:MM:SS" in local time. */
char		*fmt_clock_short(char *buf, size_t len, int64_t t_ms);
/* A node's global ranks: "4-5", "6", or "-" outside the round. */
char		*fmt_ranks(char *buf, size_t len, const Rdzv__V1__Node *);
/* "host:port", "[v6]:port". */
char		*fmt_hostport(char *buf, size_t len, const char *host,
		    uint32_t port);
/* Wall clock now, unix ms. */

/* json.c */
/* The documented JSON shape of a job: summary, or with nodes and events. */
json_t	*json_job(const Rdzv__V1__Job *, bool detail);
json_t	*json_node(const Rdzv__V1__Node *);
json_t	*json_event(const Rdzv__V1__Event *);
json_t	*json_server(const Rdzv__V1__ServerInfoResponse *);
json_t	*json_host(const Rdzv__V1__Host *);
/* Prints |j| indented (or compact, one line) and frees it. 0 or exit. */
int	 json_emit(json_t *j, bool compact);

/* jobtext.c */
/* The detailed view of one job, as `status ID` prints it. */
void	jobtext_detail(struct ctl *, FILE *, const Rdzv__V1__Job *,
	    bool with_events);
/* The job list, as `status` prints it. */
void	jobtext_list(struct ctl *, FILE *, Rdzv__V1__Job *const *jobs,
	    size_t n);

/* action.c */
/* --reason TEXT, which abort and evict take. */
extern const struct option action_longopts[];
int	action_option(struct ctl *, int, const char *);
/*
 * Calls the action |method| with |req| and prints the job as the action
 * left it (text or JSON): an exit status. |done|, when not NULL, says what
 * the action did, in a text line of its own before the job's state.
 */
int	action_run(struct ctl *, const char *method,
	    const ProtobufCMessage *req, const char *done);

/* watch.c */
/* Follows rdzv.v1.Control/Watch for one job (|rdzv_id|) or all (NULL). */
int	watch_run(struct ctl *, const char *rdzv_id);
/* What a piped --watch prints of one message, on stdout: a line for each
 * thing of |job| that differs from |old| (NULL: not seen before), or that
 * it was removed. */
void	watch_print_changes(struct ctl *, const Rdzv__V1__Job *old,
	    const Rdzv__V1__Job *job, bool removed);

#endif
