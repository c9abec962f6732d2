/*
 * Module daemon/http/ (librdzvhttp): the HTTP listener (SPEC §15) on
 * evhttp: /metrics, /healthz and /readyz, the status page and its
 * server-sent events, /hosts, /api/events, and the connections' limits.
 * It reads the core and the store, and the frame's counters, followers
 * and role; the program (daemon/main.c) starts and stops it. Its
 * internals are in http_int.h.
 *
 * Calls: lib/base, daemon/core, daemon/store, daemon/convert, daemon/frame.
 * Called by: daemon.
 */
#ifndef RDZVD_HTTP_H
#define RDZVD_HTTP_H

/* http.c: the HTTP listener: /metrics, /healthz, /readyz, the page. */
/* Listens on http-listen unless it is none; 0, or -1 when the default
 * address is taken (logged; an address asked for is fatal). */
int		 http_start(void);
void		 http_stop(void);
/* Ends the status page's event streams, which then connect again: they
 * show the core they started on, and the role changed (ha.c). */
void		 http_pages_reset(void);

#endif
