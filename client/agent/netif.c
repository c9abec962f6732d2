/*
 * The interface gloo and NCCL should use (docs/AGENT.md). Without
 * GLOO_SOCKET_IFNAME, gloo binds the address the host name resolves to;
 * where that is loopback (Debian's 127.0.1.1 in /etc/hosts, or no DNS
 * entry for the host), workers on other hosts cannot reach it and the job
 * fails at init. The interface that reaches rdzvd reaches the cluster:
 * when the host name resolves only to loopback and rdzvd is reached
 * through another interface, the workers get that interface's name in
 * GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (where they are unset).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

static bool
is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)->
		    sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)
		    (const void *)sa)->sin6_addr);
	return false;
}

/* Whether the host name resolves to loopback addresses only (or, with
 * *unresolved, not at all): what gloo would bind is then useless to other
 * hosts. */
static bool
hostname_on_loopback(char *host, size_t len, bool *unresolved)
{
	struct addrinfo hints, *res = NULL, *ai;
	bool only_lo = true;

	*unresolved = false;
	if (gethostname(host, len) != 0)
		return false;
	host[len - 1] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0) {
		*unresolved = true;
		return true;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next)
		if (!is_loopback(ai->ai_addr))
			only_lo = false;
	freeaddrinfo(res);
	return only_lo;
}

/* The name of the interface that holds address |addr|, or false. */
static bool
interface_of(const char *addr, char *ifname, size_t len)
{
	struct ifaddrs *ifs, *i;
	char buf[INET6_ADDRSTRLEN];
	bool found = false;

	if (getifaddrs(&ifs) != 0)
		return false;
	for (i = ifs; i != NULL && !found; i = i->ifa_next) {
		const void *in;

		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			in = &((struct sockaddr_in *)(void *)i->ifa_addr)->
			    sin_addr;
		else if (i->ifa_addr->sa_family == AF_INET6)
			in = &((struct sockaddr_in6 *)(void *)i->ifa_addr)->
			    sin6_addr;
		else
			continue;
		if (inet_ntop(i->ifa_addr->sa_family, in, buf,
		    sizeof(buf)) != NULL && strcmp(buf, addr) == 0 &&
		    !(i->ifa_flags & IFF_LOOPBACK)) {
			snprintf(ifname, len, "%s", i->ifa_name);
			found = true;
		}
	}
	freeifaddrs(ifs);
	return found;
}

/* Once, on the first join: chooses a->ifname for the workers, or none. */
void
netif_choose(struct agent *a)
{
	const char *local = grpc_client_local_addr(a->node.session.cli);
	char host[256];
	bool unresolved;

	if (a->ifname_chosen || local == NULL)
		return;
	a->ifname_chosen = true;
	if ((getenv("GLOO_SOCKET_IFNAME") != NULL &&
	    getenv("NCCL_SOCKET_IFNAME") != NULL) ||
	    strcmp(local, "unix") == 0 ||
	    !hostname_on_loopback(host, sizeof(host), &unresolved) ||
	    !interface_of(local, a->ifname, sizeof(a->ifname))) {
		a->ifname[0] = '\0';
		return;
	}
	log_info("the host name %s %s, where other hosts cannot reach gloo "
	    "or NCCL: the workers get GLOO_SOCKET_IFNAME and "
	    "NCCL_SOCKET_IFNAME %s, the interface that reaches rdzvd, where "
	    "unset", host, unresolved ? "does not resolve" :
	    "resolves to loopback only", a->ifname);
}
