/*
 * What `rdzvd --check-config` does besides reading: the settings checked
 * against each other (config_validate) and the effective settings printed
 * in the file's own syntax (config_print). config.c reads them.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "buildconf.h"
#include "log.h"
#include "parse.h"
#include "rdzvd.h"
#include "store.h"

/* The store settings: a spec that parses, TLS files only for etcd. */
static int
validate_store(const struct config *cfg, char *err, size_t errlen)
{
	struct store_spec *sp;
	char e[512];
	int rc = -1;

	if (cfg->store == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((sp = malloc(sizeof(*sp))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (cfg->db_given != 0 && cfg->db_given == cfg->store_given &&
	    (strncmp(cfg->store, "sqlite:", 7) != 0 ||
	    strcmp(cfg->store + 7, cfg->db) != 0)) {
		snprintf(err, errlen, "%s %s and %s %s both name the store: give "
		    "one of them (db PATH is store sqlite:PATH)",
		    cfg->db_given == 2 ? "--db" : "db =", cfg->db,
		    cfg->db_given == 2 ? "--store" : "store =", cfg->store);
		goto out;
	}
	if (store_spec_parse(cfg->store, sp, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "--%s", e);
		goto out;
	}
	if (sp->kind != STORE_ETCD && (cfg->etcd_ca != NULL ||
	    cfg->etcd_cert != NULL || cfg->etcd_key != NULL)) {
		snprintf(err, errlen, "--%s is for an etcd store, and the store "
		    "is %s", cfg->etcd_ca != NULL ? "etcd-ca" :
		    cfg->etcd_cert != NULL ? "etcd-cert" : "etcd-key",
		    cfg->store);
		goto out;
	}
	if ((cfg->etcd_cert == NULL) != (cfg->etcd_key == NULL)) {
		snprintf(err, errlen, "--etcd-cert and --etcd-key go together");
		goto out;
	}
	const char *files[] = { cfg->etcd_ca, cfg->etcd_cert, cfg->etcd_key };
	const char *names[] = { "etcd-ca", "etcd-cert", "etcd-key" };
	for (size_t i = 0; i < 3; i++) {
		if (files[i] != NULL && access(files[i], R_OK) != 0) {
			snprintf(err, errlen, "--%s %s: %s", names[i],
			    files[i], strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	free(sp);
	return rc;
}

/* auth = munge needs libmunge; admin-group and munge-socket need it on. */
static int
validate_auth(const struct config *cfg, char *err, size_t errlen)
{
	if (cfg->auth == AUTH_MUNGE && !HAVE_MUNGE) {
		snprintf(err, errlen, "auth = munge: this rdzvd was built "
		    "without MUNGE (build it with libmunge-dev installed)");
		return -1;
	}
	if (cfg->auth != AUTH_MUNGE && (cfg->admin_group != NULL ||
	    cfg->munge_socket != NULL || cfg->slurm_job_owner)) {
		snprintf(err, errlen, "--%s needs auth = munge (--auth munge): "
		    "without it callers have no uid", cfg->admin_group != NULL ?
		    "admin-group" : cfg->munge_socket != NULL ? "munge-socket" :
		    "slurm-job-owner check");
		return -1;
	}
	if (cfg->admin_group != NULL && getgrnam(cfg->admin_group) == NULL) {
		snprintf(err, errlen, "--admin-group %s: no such group",
		    cfg->admin_group);
		return -1;
	}
	return 0;
}

/* HOST:PORT, [V6]:PORT: what a client can dial. */
static int
advertise_ok(const char *s)
{
	struct endpoint ep;

	if (strchr(s, ':') == NULL || strncmp(s, "unix:", 5) == 0 ||
	    endpoint_parse(s, 0, &ep, NULL, 0) != 0)
		return 0;
	return ep.kind == ENDPOINT_TCP && ep.port != 0 && ep.host[0] != '\0';
}

int
config_validate(const struct config *cfg, char *err, size_t errlen)
{
	char addr[300];

	if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
		snprintf(err, errlen, "--tls-cert and --tls-key go together");
		return -1;
	}
	if (cfg->tls_ca != NULL && cfg->tls_cert == NULL) {
		snprintf(err, errlen, "--tls-ca needs --tls-cert and --tls-key");
		return -1;
	}
	for (size_t i = 0; i < cfg->n_listen; i++) {
		const struct endpoint *ep = &cfg->listen[i];
		if (ep->kind == ENDPOINT_TCP && cfg->tls_cert == NULL &&
		    !endpoint_is_loopback(ep) && !cfg->insecure) {
			endpoint_format(ep, addr, sizeof(addr));
			snprintf(err, errlen, "--listen %s would accept cleartext "
			    "from the network: give --tls-cert and --tls-key, or "
			    "--insecure if that network is trusted", addr);
			return -1;
		}
	}
	/* The HTTP listener follows the gRPC listeners' rule: TLS with
	 * rdzvd's certificate, or cleartext on loopback or with --insecure. */
	if (!cfg->http_off && cfg->tls_cert == NULL &&
	    !endpoint_is_loopback(&cfg->http_listen) && !cfg->insecure) {
		endpoint_format(&cfg->http_listen, addr, sizeof(addr));
		snprintf(err, errlen, "--http-listen %s would serve the status "
		    "page and metrics in cleartext to the network: give "
		    "--tls-cert and --tls-key, or --insecure if that network "
		    "is trusted", addr);
		return -1;
	}
	/* Empty, as --check-config prints it unset: the default. */
	if (cfg->advertise != NULL && cfg->advertise[0] != '\0' &&
	    !advertise_ok(cfg->advertise)) {
		snprintf(err, errlen, "--advertise %s is not HOST:PORT",
		    cfg->advertise);
		return -1;
	}
	if (cfg->leader_lease_ms % 1000 != 0) {
		snprintf(err, errlen, "--leader-lease %ums is not whole "
		    "seconds (etcd's leases are)", cfg->leader_lease_ms);
		return -1;
	}
	if (validate_store(cfg, err, errlen) != 0 ||
	    validate_auth(cfg, err, errlen) != 0)
		return -1;
	if (cfg->migrate_from != NULL) {
		struct store_spec sp;
		char e[512];
		if (store_spec_parse(cfg->migrate_from, &sp, e, sizeof(e)) != 0 ||
		    store_spec_parse(cfg->migrate_to, &sp, e, sizeof(e)) != 0) {
			snprintf(err, errlen, "--migrate-%s", e);
			return -1;
		}
	}
	/* A command named by a path must be there; a bare name is looked
	 * up in PATH when it runs. */
	if (cfg->on_quarantine != NULL && strchr(cfg->on_quarantine, '/') &&
	    access(cfg->on_quarantine, X_OK) != 0) {
		snprintf(err, errlen, "--on-quarantine %s: %s",
		    cfg->on_quarantine, strerror(errno));
		return -1;
	}
	if (cfg->max_message < 1024) {
		snprintf(err, errlen, "--max-message %zu is below 1 KiB",
		    cfg->max_message);
		return -1;
	}
	return 0;
}

void
config_print(const struct config *cfg, FILE *f)
{
	char addr[300];

	fprintf(f, "config = %s\n", cfg->file != NULL ? cfg->file : "(none)");
	for (size_t i = 0; i < cfg->n_listen; i++) {
		endpoint_format(&cfg->listen[i], addr, sizeof(addr));
		fprintf(f, "listen = %s\n", addr);
	}
	if (cfg->http_off)
		fprintf(f, "http-listen = none\n");
	else {
		endpoint_format(&cfg->http_listen, addr, sizeof(addr));
		fprintf(f, "http-listen = %s\n", addr);
	}
	fprintf(f, "db = %s\n", cfg->db);
	fprintf(f, "store = %s\n", cfg->store != NULL ? cfg->store : "");
	fprintf(f, "etcd-ca = %s\n", cfg->etcd_ca ? cfg->etcd_ca : "");
	fprintf(f, "etcd-cert = %s\n", cfg->etcd_cert ? cfg->etcd_cert : "");
	fprintf(f, "etcd-key = %s\n", cfg->etcd_key ? cfg->etcd_key : "");
	fprintf(f, "tls-cert = %s\n", cfg->tls_cert ? cfg->tls_cert : "");
	fprintf(f, "tls-key = %s\n", cfg->tls_key ? cfg->tls_key : "");
	fprintf(f, "tls-ca = %s\n", cfg->tls_ca ? cfg->tls_ca : "");
	fprintf(f, "insecure = %s\n", cfg->insecure ? "true" : "false");
	fprintf(f, "log-level = %s\n", log_level_name(cfg->log_level));
	for (size_t i = 0; i < cfg->n_admins; i++)
		fprintf(f, "admin = %s\n", cfg->admins[i]);
	fprintf(f, "admin-group = %s\n", cfg->admin_group != NULL ?
	    cfg->admin_group : "");
	fprintf(f, "auth = %s\n", cfg->auth == AUTH_MUNGE ? "munge" : "none");
	fprintf(f, "munge-socket = %s\n", cfg->munge_socket != NULL ?
	    cfg->munge_socket : "");
	fprintf(f, "slurm-job-owner = %s\n", cfg->slurm_job_owner ? "check" :
	    "off");
	fprintf(f, "max-message = %zu\n", cfg->max_message);
	fprintf(f, "max-streams = %u\n", cfg->max_streams);
	fprintf(f, "max-connections = %u\n", cfg->max_conns);
	fprintf(f, "max-connections-per-address = %u\n",
	    cfg->max_conns_per_addr);
	fprintf(f, "unauthenticated-idle-timeout = %ums\n",
	    cfg->unauth_idle_timeout_ms);
	fprintf(f, "max-health-watchers = %u\n", cfg->max_health_watchers);
	fprintf(f, "http-max-connections = %u\n", cfg->http_max_conns);
	fprintf(f, "http-request-timeout = %ums\n",
	    cfg->http_request_timeout_ms);
	fprintf(f, "max-nodes-per-job = %u\n", cfg->max_nodes_per_job);
	fprintf(f, "max-jobs-per-identity = %u\n", cfg->max_jobs_per_identity);
	fprintf(f, "max-ended-jobs-per-identity = %u\n",
	    cfg->max_ended_jobs_per_identity);
	fprintf(f, "max-join-timeout = %ums\n", cfg->max_join_timeout_ms);
	fprintf(f, "retention = %us\n", cfg->retention_s);
	fprintf(f, "straggler-steps = %u\n", cfg->straggler_steps);
	fprintf(f, "straggler-seconds = %ums\n", cfg->straggler_ms);
	fprintf(f, "keepalive = %ums\n", cfg->keepalive_ms);
	fprintf(f, "preface-timeout = %ums\n", cfg->preface_timeout_ms);
	fprintf(f, "idle-timeout = %ums\n", cfg->idle_timeout_ms);
	fprintf(f, "shutdown-timeout = %ums\n", cfg->shutdown_timeout_ms);
	fprintf(f, "advertise = %s\n", cfg->advertise != NULL ?
	    cfg->advertise : "");
	fprintf(f, "leader-lease = %us\n", cfg->leader_lease_ms / 1000);
	if (cfg->unix_mode != 0)
		fprintf(f, "unix-mode = %04o\n", cfg->unix_mode);
	else
		fprintf(f, "unix-mode = \n");
	fprintf(f, "unix-group = %s\n", cfg->unix_group != NULL ?
	    cfg->unix_group : "");
	fprintf(f, "host-gpu-failure = %s\n",
	    host_gpu_action_name((enum host_gpu_action)cfg->host_gpu_failure));
	fprintf(f, "host-suspect-crashes = %u\n", cfg->host_suspect_crashes);
	fprintf(f, "host-quarantine-crashes = %u\n",
	    cfg->host_quarantine_crashes);
	fprintf(f, "host-crash-window = %ums\n", cfg->host_crash_window_ms);
	fprintf(f, "on-quarantine = %s\n", cfg->on_quarantine != NULL ?
	    cfg->on_quarantine : "");
	fprintf(f, "on-quarantine-timeout = %ums\n",
	    cfg->on_quarantine_timeout_ms);
}
