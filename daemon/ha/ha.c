/*
 * The replica's role (SPEC §14): leader or standby, and the two paths
 * between them. A leader holds a core loaded from the store and serves; a
 * standby holds an empty core, refuses Rendezvous and Control calls with
 * the leader's address, and campaigns (ha_elect.c). With the SQLite store
 * there is one replica, which leads from the start and never steps down:
 * a failed commit ends it as it always did (SPEC §9).
 *
 * Stepping down drops everything the store has not acknowledged: the
 * streams end with UNAVAILABLE, the calls waiting for the turn's commit
 * are refused, the core goes. What was committed is the new leader's to
 * load, so nothing a client was told is lost.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "ha.h"
#include "ha_elect.h"
#include "config_store.h"
#include "core.h"
#include "log.h"
#include "rdzvd.h"
#include "rpc.h"
#include "store.h"
#include "text.h"

static int shutting_down;
static void (*role_changed)(int leading);

/* A core with no jobs: what a standby shows (ServerInfo, the page). */
static struct core *
empty_core(void)
{
	struct core_config cc;
	struct core *c;

	rpc_services_core_config(&cc);
	if ((c = core_new(&cc)) == NULL)
		fatalx("out of memory");
	return c;
}

int
ha_lead(char *err, size_t errlen)
{
	struct core *c = empty_core();

	if (!rdzvd.standby)
		return 0;
	if (store_load(rdzvd.store, c, turn_now(), err, errlen) != 0) {
		core_free(c);
		return -1;
	}
	core_free(rdzvd.core);
	rdzvd.core = c;
	rdzvd.standby = 0;
	snprintf(rdzvd.leader, sizeof(rdzvd.leader), "%s", rdzvd.advertise);
	rpc_services_start(ha_commit_failed);
	rpc_health_role_changed();
	if (role_changed != NULL)
		role_changed(1);
	log_info("%s %s: %u job%s", config_store_is_etcd() ? "store" : "database",
	    store_path(rdzvd.store), c->n_jobs, plural(c->n_jobs));
	hook_hosts_loaded(c->hosts);
	return 0;
}

void
ha_step_down(const char *why)
{
	char msg[512];

	if (rdzvd.standby)
		return;
	log_warnx("stepping down: %s", why);
	rdzvd.standby = 1;
	/* Our own address is no hint; the replica after us is the likely
	 * leader (already, when our lease ended), and the election tells. */
	snprintf(rdzvd.leader, sizeof(rdzvd.leader), "%s",
	    ha_elect_successor());
	rpc_health_role_changed();
	snprintf(msg, sizeof(msg), "rdzvd stopped leading (%.300s); resume "
	    "on the leader", why);
	rpc_services_step_down(msg);
	core_free(rdzvd.core);
	rdzvd.core = empty_core();
	if (role_changed != NULL)
		role_changed(0);
	if (!shutting_down)
		ha_elect_again();
}

void
ha_commit_failed(const char *err)
{
	if (!config_store_is_etcd())
		fatalx("database %s: commit failed, exiting so that memory "
		    "and disk cannot disagree: %s", store_path(rdzvd.store),
		    err);
	ha_step_down(err);
}

/* The election's outcomes: these paths decide what follows. */
static const struct ha_elect_events elect_events = {
	.won = ha_lead,
	.lost = ha_step_down,
};

void
ha_start(void (*changed)(int leading))
{
	char err[512];

	role_changed = changed;
	rdzvd.standby = 1;
	rdzvd.core = empty_core();
	if (config_store_is_etcd()) {
		ha_elect_start(&elect_events);
		return;
	}
	if (ha_lead(err, sizeof(err)) != 0)
		fatalx("database %s: %s", store_path(rdzvd.store), err);
}

void
ha_wait_settled(void)
{
	uint64_t deadline = mono_ms() + rdzvd.cfg.leader_lease_ms + 2000;

	if (!config_store_is_etcd())
		return;
	/* Bounded: the stall heartbeat wakes the loop every 100 ms. */
	while (!ha_elect_settled() && !shutting_down && mono_ms() < deadline)
		event_base_loop(rdzvd.base, EVLOOP_ONCE);
}

void
ha_shutdown(void)
{
	shutting_down = 1;
	ha_elect_stop();
}

void
ha_free(void)
{
	ha_elect_free();
}
