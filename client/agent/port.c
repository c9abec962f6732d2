/*
 * The master port this node offers (docs/AGENT.md, "The master port").
 *
 * A port that is merely free when offered (bind port 0, read it, close)
 * comes from the kernel's ephemeral range, where any outgoing connection
 * on the host may take it before rank 0's store binds it, and a round is
 * lost for nothing (issue 44: `failed to bind to [::]:33391 (errno: 98 -
 * Address already in use)` on a busy host). So the agent keeps the port
 * bound from the moment the kernel hands it out until the generation that
 * used it is replaced: a bound port is never chosen by connect(), which
 * skips ports that have a bound owner. The socket has SO_REUSEADDR and
 * never listens, so the store of rank 0, which binds with SO_REUSEADDR
 * (torch's c10d sockets do, checked on torch 1.13), may bind and listen
 * on it beside ours; a second listener may not.
 *
 * One node runs per process (join or coproc), so the held sockets are
 * this file's: the port offered for the next round, and the one of the
 * generation that runs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node.h"
#include "log.h"

#define FALLBACK_PORT	29500	/* torch's default MASTER_PORT */

static struct held {
	int		fd;
	uint16_t	port;
} held[2] = { { -1, 0 }, { -1, 0 } };

/* A TCP socket on the wildcard address as torch's store makes it: IPv6
 * dual-stack where the host has IPv6, else IPv4; SO_REUSEADDR set. */
static int
store_socket(uint16_t port, uint16_t *bound)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, on = 1, off = 0;

	memset(&ss, 0, sizeof(ss));
	if ((fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off,
		    sizeof(off));
		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	} else if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC,
	    0)) >= 0) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		s4->sin_port = htons(port);
		len = sizeof(*s4);
	} else
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/*
 * A new master port for the next round, held from now on. |in_use| is the
 * master port of the generation now starting: it stays held if it is ours;
 * any other port held before is let go.
 */
uint16_t
port_next(uint16_t in_use)
{
	uint16_t port = 0;
	int fd, e = 0;

	for (int i = 0; i < 2; i++) {
		if (held[i].fd >= 0 && (in_use == 0 ||
		    held[i].port != in_use)) {
			close(held[i].fd);
			held[i].fd = -1;
			held[i].port = 0;
		}
	}
	/* Port 0: the kernel's choice, which is never a bound port, ours
	 * included. */
	if ((fd = store_socket(0, &port)) < 0) {
		e = -fd;
		log_warnx("cannot reserve a master port (%s); offering %d",
		    strerror(e), FALLBACK_PORT);
		return FALLBACK_PORT;
	}
	for (int i = 0; i < 2; i++) {
		if (held[i].fd < 0) {
			held[i].fd = fd;
			held[i].port = port;
			return port;
		}
	}
	/* Unreachable: at most |in_use| survived the sweep. */
	close(fd);
	return port;
}

/*
 * Whether rank 0's store can bind |port| now: false only when another
 * socket listens on it (or holds it without SO_REUSEADDR), which is what
 * makes torch's bind fail with EADDRINUSE. Other errors say yes: the
 * store then tells what is wrong.
 */
bool
port_usable(uint16_t port)
{
	uint16_t got;
	int fd;

	if ((fd = store_socket(port, &got)) >= 0) {
		close(fd);
		return true;
	}
	return fd != -EADDRINUSE;
}

/*
 * Before a generation starts: when it makes this node the master (group
 * rank 0, on the port this node offered) and that port is taken after
 * all, no worker of the round could start its store. Rather than let
 * rank 0 fail and a restart be counted, a new port is offered and rdzvd
 * is asked for a new round that counts none (ReportRequest.cause
 * "master_port"). True: the assignment is skipped; the new round comes.
 */
bool
port_master_taken(struct node *n, const Rdzv__V1__Assignment *pb)
{
	uint16_t port = (uint16_t)pb->master_port;

	bool ours = false;

	for (int i = 0; i < 2; i++)
		ours |= held[i].fd >= 0 && held[i].port == port;
	if (n->opts->master_port != 0 || pb->group_rank != 0 || !ours ||
	    pb->master_port > 65535 || port_usable(port))
		return false;
	n->offer.master_port = port_next(0);
	log_warnx("generation %llu: master port %u is taken on this host "
	    "(another program listens on it); offering port %u and asking "
	    "rdzvd for a new round, with no restart counted",
	    (unsigned long long)pb->generation, port, n->offer.master_port);
	report_port_taken(&n->report, pb->generation);
	return true;
}
