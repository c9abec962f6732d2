/*
 * The randomized test of the core (test_core_random.c): its world (agents,
 * jobs, the fake clock and store) and the helpers its inputs
 * (core_random_inputs.c) share with the checks and the main loop.
 */
#ifndef RDZV_CORE_RANDOM_H
#define RDZV_CORE_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "core_fakestore.h"

#define NJOBIDS		12
#define NAGENTS		160
#define DEFAULT_STEPS	100000
#define NHOSTS		7

struct agent {
	bool		 used;
	uint64_t	 node_id;
	uint8_t		 session[CORE_SESSION_LEN];
	int		 job;		/* index into job_ids */
	uint64_t	 gen;		/* generation its workers run; 0 */
	uint64_t	 last_assign;	/* newest ASSIGNMENT generation */
	bool		 attached;
	bool		 expect_accepted;
	uint8_t		 token[CORE_TOKEN_LEN];	/* of its join */
};

struct jobinfo {
	bool			 known;		/* the core has the job */
	uint64_t		 max_gen;	/* highest generation seen */
	uint32_t		 attempt;
	struct core_settings	 s;		/* what its agents ask for */
	const char		*owner;
	uint32_t		 restarts;	/* restart_count last turn */
	/* The worker ranks each node was assigned in generation held_gen,
	 * the newest any node was told of: no two nodes hold one rank. */
	uint64_t		 held_gen;
	struct {
		uint64_t	 node_id;
		uint32_t	 base, n;
	}			 held[NAGENTS];
	int			 nheld;
};

enum { S_JOIN, S_JOIN_OK, S_JOIN_RETRY, S_RESUME, S_RESUME_OK, S_REPORT, S_REPORT_OK,
    S_LEAVE, S_DISC, S_LOST, S_EVICT, S_CLOSE, S_ABORT, S_TICK, S_RESTART,
    S_ROUNDS, S_FAILED_JOBS, S_CLOSED_JOBS, S_REMOVED, S_MSGS, S_RESUME_NF,
    S_RESUME_FP, S_PROGRESS, S_PROGRESS_OK };

extern const char *const job_ids[NJOBIDS];
extern const char *const hosts[NHOSTS];
extern struct core	*C;
extern struct core_config CFG;
extern struct core_now	 NOW;
extern struct fakestore	 FS;
extern struct agent	 agents[NAGENTS];
extern struct jobinfo	 jobs[NJOBIDS];
extern uint64_t		 rng_state;
extern uint32_t		 session_ctr;
extern unsigned long	 step, nfail;
extern unsigned long	 stats[32];
extern char		 err[512];

/* test_core_random.c: the world's helpers and the checks. */
uint64_t	 rnd(void);
uint32_t	 rndn(uint32_t n);
bool		 chance(uint32_t percent);
void		 die(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
struct agent	*agent_of(uint64_t node_id);
void		 agent_exit(struct agent *);
void		 check_told(const struct core_node *, const char *what);
int		 job_index(const char *id);
void		 deliver(struct core_node *, const struct core_msg *);
void		 turn(void);
struct agent	*random_agent(bool attached);
void		 check_outside(void);

/* core_random_inputs.c: one random input each. */
void		 do_join(void);
void		 do_join_retry(void);
void		 do_resume(void);
void		 do_report(void);
void		 do_progress(void);
void		 do_leave(void);
void		 do_disconnect(bool silent);
void		 do_operator(void);
void		 do_tick(void);

#endif
