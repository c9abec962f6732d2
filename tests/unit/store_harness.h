/*
 * The harness of the store's unit tests (test_store.c, test_store_open.c):
 * a real rendezvous core with a fake clock, agents' requests, and turn(),
 * which ends a loop turn as the daemon does: check the core's invariants,
 * commit to the store, and check that every assignment about to be sent is
 * in the database as sent. reload() is a daemon restart: a fresh core
 * loaded from the store; compare_cores() checks it field by field. The
 * tests look inside the store (store_sqlite.h) only to reach its SQLite
 * connection.
 *
 * One suite, two backends: with RDZV_TEST_ETCD=HOST:PORT in the
 * environment (tests/unit/with_etcd.py starts a real etcd and sets it), S
 * is an etcd store under a prefix of its own per test, and every turn is
 * also committed to an SQLite store at dbpath (S2), which q(), exec_other()
 * and check_sent() read. reload() then loads from etcd, so every
 * compare_cores() checks what etcd holds against the core that wrote it.
 */
#ifndef STORE_HARNESS_H
#define STORE_HARNESS_H

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "core.h"
#include "core_inputs.h"
#include "grpc.h"
#include "store.h"
#include "store_be.h"
#include "store_sqlite.h"

extern char		 dir[64];
extern char		 dbpath[128];
extern struct core_now	 NOW;
extern struct core	*C;
extern struct store	*S;
extern struct store	*S2;		/* the SQLite copy with etcd, or NULL */
extern const char	*test_etcd;	/* NULL: SQLite only */
extern char		 spec[512];	/* S's store spec */
extern uint32_t		 session_ctr;
extern char		 err[1024];

void	fresh_path(const char *name);

/* The SQLite connection of the SQLite store (S2 with etcd, else S). */
sqlite3	*sqlite_db(void);
/* Whether the tests run on etcd. */
#define ON_ETCD	(test_etcd != NULL)

void	setup(const char *name);

void	teardown(void);

extern size_t		 assignments_sent;

/*
 * SPEC §4 rule 2 from the outside: an assignment that is about to be sent
 * is in the database, with the values the node is told.
 */
void	check_sent(sqlite3 *db, const struct core_node *n,
    const struct core_assignment *a);

/*
 * After the commit: the messages go out (each assignment checked against
 * the database) and the turn's changes are forgotten.
 */
void	turn_send(bool committed);

/* The end of a loop turn, as the daemon does it. */
void	turn(void);

/* A join without the end of the turn. */
struct core_node *join_only(struct core_join *r);

struct core_node *join(const char *id, const char *host, uint32_t nproc,
	    uint32_t min, uint32_t max);

void	report(struct core_node *n, enum core_outcome o);

/* A query on a connection of its own, as an operator's sqlite3 would. */
long long	q(const char *sql);

int	exec_other(const char *sql);

char *slurp(const char *path, size_t *len);

/* A fresh core from the file, as after a daemon restart at NOW. */
struct core *reload(void);

void	compare_job(const struct core_job *a, const struct core_job *b);

void	compare_node(const struct core_node *a, const struct core_node *b);

/* Everything the store keeps, job by job and node by node. */
void	compare_cores(const struct core *a, const struct core *b);

void	rmtree(const char *path);

struct test {
	const char	*name;
	void		(*fn)(void);
};

/*
 * Runs every test, or the one named in argv[1], in a temporary directory
 * of its own that is removed afterwards; prints PASS or FAIL per test.
 */
int	run_tests(const char *prog, const struct test *t, size_t n, int argc,
    char **argv);

#endif
