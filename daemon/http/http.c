/*
 * rdzvd's HTTP listener (SPEC §15): /metrics for Prometheus, /healthz and
 * /readyz for probes, and the read-only status page at / with its event
 * stream (http_events.c). libevent's evhttp parses HTTP, after
 * http_conn.c has checked each request head and within its bounds on
 * connections and time. It only reads: no request changes a job. With
 * tls-cert it speaks TLS with rdzvd's certificate, as the gRPC listeners
 * do.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "log.h"
#include "http_int.h"
#include "rdzvd.h"
#include "tls.h"

/* Generated from daemon/http/page/index.html and timeline.js at build
 * time. */
extern const char http_page_index[];
extern const char http_page_timeline[];

/* Headers and request lines beyond this are refused by evhttp. */
#define HTTP_MAX_HEADERS	(16 * 1024)
/* Idle connections close after this (seconds); event streams send a
 * comment more often than that. A request head has http-request-timeout
 * (http_conn.c). */
#define HTTP_TIMEOUT_S		60

static struct evhttp		*http;
static struct evhttp_bound_socket *bound;
/* With tls-cert: the same certificate, HTTP/1.1 by ALPN, and no client
 * certificate asked for (a browser has none; tls-ca is for gRPC). */
static struct tls_ctx		*tls;

static void
on_metrics(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;

	if (http_request_check(req) != 0)
		return;
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	metrics_write(b, http_conn_count(), http_events_count());
	http_reply(req, HTTP_OK, "OK", "text/plain; version=0.0.4; charset=utf-8",
	    b);
	evbuffer_free(b);
}

/* Alive: the event loop answered. */
static void
on_healthz(struct evhttp_request *req, void *arg)
{
	if (http_request_check(req) != 0)
		return;
	http_reply_text(req, HTTP_OK, "OK", "ok");
}

/* Ready: the database is open and calls are served, which under HA means
 * this replica leads (SPEC §14); a standby says who does. */
static void
on_readyz(struct evhttp_request *req, void *arg)
{
	char text[400];

	if (http_request_check(req) != 0)
		return;
	if (rdzvd.store != NULL && rdzvd.serving && !rdzvd.standby &&
	    turn_store_slow()) {
		/* Alive (/healthz), but what changes a job waits on the
		 * disk: a balancer may prefer another replica meanwhile. */
		snprintf(text, sizeof(text), "not ready: the store is slow; a "
		    "commit has been in flight for %llu ms",
		    (unsigned long long)turn_commit_age_ms());
		http_reply_text(req, 503, "Service Unavailable", text);
	} else if (rdzvd.store != NULL && rdzvd.serving && !rdzvd.standby)
		http_reply_text(req, HTTP_OK, "OK", "ready");
	else if (rdzvd.serving && rdzvd.standby) {
		snprintf(text, sizeof(text), "not ready: standby; the leader "
		    "is %s", rdzvd.leader[0] != '\0' ? rdzvd.leader :
		    "not known");
		http_reply_text(req, 503, "Service Unavailable", text);
	} else
		http_reply_text(req, 503, "Service Unavailable", "not ready");
}

static void
on_page(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b;

	if (http_request_check(req) != 0)
		return;
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	/* Everything the page needs is in it: nothing else may load. */
	evhttp_add_header(h, "Content-Security-Policy", "default-src 'none'; "
	    "script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
	    "connect-src 'self'; img-src data:");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evbuffer_add_reference(b, http_page_index, strlen(http_page_index),
	    NULL, NULL);
	http_reply(req, HTTP_OK, "OK", "text/html; charset=utf-8", b);
	evbuffer_free(b);
}

/* The timeline's script, which the page loads from here. */
static void
on_timeline(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;

	if (http_request_check(req) != 0)
		return;
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add_reference(b, http_page_timeline,
	    strlen(http_page_timeline), NULL, NULL);
	http_reply(req, HTTP_OK, "OK", "text/javascript; charset=utf-8", b);
	evbuffer_free(b);
}

/* Any other path: the exact paths are set with evhttp_set_cb. */
static void
on_other(struct evhttp_request *req, void *arg)
{
	if (http_request_check(req) != 0)
		return;
	http_reply_text(req, HTTP_NOTFOUND, "Not Found", "not found: this server "
	    "has /, /metrics, /healthz, /readyz, /events, /hosts and "
	    "/api/events");
}

static void
setup_tls(void)
{
	struct tls_opts o = {
		.cert = rdzvd.cfg.tls_cert,
		.key = rdzvd.cfg.tls_key,
		.http1 = 1,
	};
	char err[512];

	if (tls_server_new(&o, &tls, err, sizeof(err)) != 0)
		fatalx("HTTP listener: %s", err);
}

static uint16_t
bound_port(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(bound);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int
http_start(void)
{
	const struct config *cfg = &rdzvd.cfg;
	struct endpoint ep = cfg->http_listen;
	char addr[300];

	if (cfg->http_off)
		return 0;
	if ((http = evhttp_new(rdzvd.base)) == NULL)
		fatalx("cannot create the HTTP server");
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(http, HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(http, 0);
	evhttp_set_timeout(http, HTTP_TIMEOUT_S);
	evhttp_set_cb(http, "/", on_page, NULL);
	evhttp_set_cb(http, "/metrics", on_metrics, NULL);
	evhttp_set_cb(http, "/healthz", on_healthz, NULL);
	evhttp_set_cb(http, "/readyz", on_readyz, NULL);
	evhttp_set_cb(http, "/events", http_events_request, NULL);
	evhttp_set_cb(http, "/hosts", http_hosts_request, NULL);
	evhttp_set_cb(http, "/timeline.js", on_timeline, NULL);
	evhttp_set_cb(http, "/api/events", http_api_events_request, NULL);
	evhttp_set_gencb(http, on_other, NULL);
	if (cfg->tls_cert != NULL)
		setup_tls();

	bound = evhttp_bind_socket_with_handle(http, ep.host, ep.port);
	endpoint_format(&ep, addr, sizeof(addr));
	if (bound == NULL) {
		int err = errno;
		evhttp_free(http);
		http = NULL;
		tls_free(tls);
		tls = NULL;
		/* Only a listener someone asked for is worth stopping for:
		 * the default port may be another rdzvd's on this host. */
		if (cfg->http_given)
			fatalx("cannot listen for HTTP on %s: %s (--http-listen "
			    "none turns it off)", addr, strerror(err));
		log_warnx("cannot listen for HTTP on %s: %s; serving no "
		    "metrics and no status page (set --http-listen)", addr,
		    strerror(err));
		return -1;
	}
	/* evhttp listens with a backlog of 128: at the connection cap under
	 * a churn of new connections, a probe's SYN would be dropped (and
	 * sent again a second later) where it could wait its turn. Linux
	 * takes a second listen() as a new backlog. */
	(void)listen(evhttp_bound_socket_get_fd(bound), SOMAXCONN);
	ep.port = bound_port();
	endpoint_format(&ep, addr, sizeof(addr));
	http_conn_start(http, bound, tls);
	http_events_start();
	/* Not "listening on": that line names the gRPC listeners. */
	const char *scheme = tls != NULL ? "https" : "http";
	log_info("serving HTTP on %s%s: status page %s://%s/, metrics "
	    "%s://%s/metrics", addr, tls != NULL ? " (TLS)" : "", scheme, addr,
	    scheme, addr);
	return 0;
}

void
http_pages_reset(void)
{
	if (http == NULL)
		return;
	http_events_end_all();
}

void
http_stop(void)
{
	if (http != NULL) {
		http_events_stop();
		http_conn_stop();
		evhttp_free(http);
	}
	http = NULL;
	bound = NULL;
	tls_free(tls);
	tls = NULL;
}
