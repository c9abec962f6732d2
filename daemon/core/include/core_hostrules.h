/*
 * Host memory (docs/HEALTH.md): what rdzvd remembers of each host across
 * jobs, and the policy that makes a host suspect or quarantined. Like the
 * rendezvous core it has no I/O and no clock of its own: every input
 * carries the wall time, and what changed is left on lists that the store
 * (dirty records) and the daemon (state changes, for the log and the
 * on-quarantine hook) drain once per loop turn. The core owns one struct
 * hosts and feeds it joins, reports and operator actions.
 *
 * A host is the machine as the scheduler names it: the hostname a Join
 * carries, which rdzv-agent fills from SLURMD_NODENAME, the hostname, or
 * its --host override.
 */
#ifndef RDZV_CORE_HOSTRULES_H
#define RDZV_CORE_HOSTRULES_H

#include <sys/queue.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

struct core_gpu;

#define HOST_NAME_MAX_LEN	255
#define HOST_REASON_MAX		256
#define HOST_CRASHES_KEPT	64	/* crash times within the window */
#define HOST_GPUS_MAX		64
#define HOST_BRIEF_MAX		64

/* Numbered as rdzv.v1.HostState. */
enum host_state {
	HOST_OK = 1,
	HOST_SUSPECT = 2,
	HOST_QUARANTINED = 3,
};
#define HOST_NSTATES	4

/* What a failed GPU check does to its host. */
enum host_gpu_action {
	HOST_GPU_IGNORE = 0,
	HOST_GPU_SUSPECT = 1,
	HOST_GPU_QUARANTINE = 2,
};

/* rdzvd.conf's host-* settings (defaults in comments); 0 thresholds are
 * off. */
struct host_policy {
	enum host_gpu_action	gpu_failure;		/* suspect */
	uint32_t		suspect_crashes;	/* 2 */
	uint32_t		quarantine_crashes;	/* 0 */
	uint64_t		crash_window_ms;	/* 1 h */
};

/* One GPU's health check result, as the agent reported it (SPEC §7):
 * a node's latest, and a host's latest per device. */
struct core_gpu {
	uint32_t	device;
	bool		ok;
	char		name[96];
	char		uuid[48];
	char		failed_step[24];	/* empty when ok */
	char		error[64];
	uint64_t	total_mem;
};

/*
 * How the on-quarantine command's latest run for a host ended (the
 * daemon's hook.c runs it and reports here; docs/HEALTH.md). Kept with the
 * host's record, so that `rdzvctl hosts` shows it after a restart too.
 */
struct host_hook {
	uint32_t		 state;	/* rdzvd's enum hook_state; 0: none */
	int32_t			 code;	/* its exit status */
	int32_t			 sig;	/* the signal that ended it */
	char			 output[HOST_REASON_MAX];	/* last line */
	char			 reason[HOST_REASON_MAX];	/* given */
	int64_t			 started_ms, ended_ms;		/* wall */
};

struct host {
	char			*name;
	enum host_state		 state;
	char			 reason[HOST_REASON_MAX];
	int64_t			 since_ms;	/* wall: entered its state */
	int64_t			 updated_ms;	/* wall: last change */
	uint32_t		 crashes;	/* ever attributed */
	uint32_t		 gpu_failures;	/* failed results ever */
	int64_t			 crash_ms[HOST_CRASHES_KEPT]; /* oldest first */
	uint32_t		 n_crash;
	struct core_gpu		*gpus;		/* by device, latest result */
	uint32_t		 n_gpus;
	struct host_hook	 hook;		/* the latest on-quarantine run */

	/* Private below. */
	bool			 dirty;
	TAILQ_ENTRY(host)	 entry;		/* hosts->all, by creation */
	TAILQ_ENTRY(host)	 dirty_entry;
};
TAILQ_HEAD(host_list, host);

/* A host's state changed in this turn. */
struct host_change {
	char			 name[HOST_NAME_MAX_LEN + 1];
	enum host_state		 from, to;
	char			 reason[HOST_REASON_MAX];
	/* The gist of the reason, first and short, for a scheduler's
	 * narrow reason column (`sinfo -R`): "GPU1 ECC_UNCORRECTABLE",
	 * "3 worker crashes", an admin's own words. */
	char			 brief[HOST_BRIEF_MAX];
};

struct hosts {
	struct host_policy	 policy;
	struct host_list	 all;
	uint32_t		 n;
	uint32_t		 n_state[HOST_NSTATES];
	struct hash		 by_name;
	struct host_list	 dirty;		/* to write in this turn */
	struct host_change	*changes;	/* this turn's, in order */
	size_t			 n_changes, changes_cap;
};

/* The defaults above. */
void		 host_policy_defaults(struct host_policy *);
/* policy NULL: the defaults. Memory exhaustion aborts, as in the core. */
struct hosts	*hosts_new(const struct host_policy *policy);
void		 hosts_free(struct hosts *);
struct host	*hosts_find(const struct hosts *, const char *name);

/*
 * Whether |name| may join a job: 0, or CORE_REFUSED with a
 * message naming the host, its reason and how to clear it.
 */
int		 hosts_refusal(const struct hosts *, const char *name,
		    char *err, size_t errlen);

/*
 * A node on |name| reported GPU check results (a Join, or a Report): the
 * latest per device is kept once the host has a record (a failed result
 * makes one; passing results of a host without a record are not kept),
 * and a failed one not recorded before is a failure of the host under
 * policy.gpu_failure (agents resend every device's latest result). |what| says where it came from ("job X").
 * Returns the host's state afterwards (HOST_OK when nothing is recorded).
 */
enum host_state	 hosts_gpus(struct hosts *, int64_t now_ms, const char *name,
		    const struct core_gpu *gpus, uint32_t n, const char *what);

/*
 * Whether a worker's exit is a crash to hold against its host: a death by
 * a signal other than those a supervisor stops workers with (SIGTERM,
 * SIGKILL, SIGINT, SIGHUP), or a non-zero exit whose error message names
 * a CUDA error.
 */
bool		 hosts_exit_is_crash(int32_t exit_code, int32_t signal,
		    const char *message);

/*
 * Workers on |name| crashed (one report counts once however many of its
 * workers died): crashes within policy.crash_window_ms make the host
 * suspect, then quarantined. Returns the host's state afterwards.
 */
enum host_state	 hosts_crash(struct hosts *, int64_t now_ms, const char *name,
		    const char *what);

/*
 * A node of |name| joins (after its GPU results were taken): crashes older
 * than the window are forgotten, and a suspect host whose latest GPU
 * results all pass and whose window holds fewer crashes than make it
 * suspect is ok again. Returns the host's state.
 */
enum host_state	 hosts_seen(struct hosts *, int64_t now_ms, const char *name);

/*
 * An operator's action: HOST_OK clears the host (its crash window and
 * GPU results too, so that a failure after it counts as new),
 * HOST_QUARANTINED quarantines it (a record is made for a host never
 * seen). |brief|: the gist of |reason| (struct host_change). Clearing
 * an unknown host returns -1; else 0.
 */
int		 hosts_set(struct hosts *, int64_t now_ms, const char *name,
		    enum host_state, const char *reason, const char *brief);

/*
 * A host's record as the store kept it (a copy is made; dirty not set).
 * Replaces a record of the same name.
 */
void		 hosts_restore(struct hosts *, const struct host *);

/* The latest on-quarantine run of |name| ended as |hk|: kept in its
 * record, which is written with the turn. -1 when there is no record. */
int		 hosts_set_hook(struct hosts *, int64_t now_ms, const char *name,
		    const struct host_hook *hk);

/* Every record to be written (rdzvd --migrate-store). */
void		 hosts_dirty_all(struct hosts *);

/* After the commit: forgets the dirty list and the changes. */
void		 hosts_changes_clear(struct hosts *);

const char	*host_state_name(enum host_state);
/* "ok", "suspect", "quarantined" -> state; 0 when unknown. */
enum host_state	 host_state_parse(const char *);
const char	*host_gpu_action_name(enum host_gpu_action);
int		 host_gpu_action_parse(const char *, enum host_gpu_action *);

#endif
