/* A cell's network namespace, made by the template just before it forks the cell: loopback
 * up, the network entries' IP literals on it, and the listeners the host accepts the cell's
 * connections on (src/net/gate.c). What the cell may connect to is seccomp's and the gate's
 * business, not this file's. */
#define _GNU_SOURCE
#include "guest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* An address of the entries on loopback, so a connection to it stays in the namespace and
 * reaches a listener. */
static int add_address(int s4, int s6, unsigned index, const char *text)
{
	struct ifreq ifr = {0};
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	if (inet_pton(AF_INET, text, &sin->sin_addr) == 1) {
		if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127)
			return 0; /* loopback's own already */
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:%u", index);
		sin->sin_family = AF_INET;
		if (ioctl(s4, SIOCSIFADDR, &ifr) < 0)
			return -errno;
		inet_pton(AF_INET, "255.255.255.255", &sin->sin_addr);
		return ioctl(s4, SIOCSIFNETMASK, &ifr) < 0 ? -errno : 0;
	}
	struct { /* struct in6_ifreq of <linux/ipv6.h>, which clashes with <netinet/in.h> */
		struct in6_addr addr;
		uint32_t prefixlen;
		int ifindex;
	} r6 = {.prefixlen = 128, .ifindex = (int)if_nametoindex("lo")};
	if (inet_pton(AF_INET6, text, &r6.addr) != 1 || r6.ifindex == 0)
		return -EINVAL;
	return ioctl(s6, SIOCSIFADDR, &r6) < 0 && errno != EEXIST ? -errno : 0;
}

static int listen_on(int family, uint16_t port)
{
	int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	int rc = s < 0 ? -errno : 0;
	if (rc == 0 && family == AF_INET6 &&
	    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		rc = -errno;
	if (rc == 0 && (family == AF_INET ? bind(s, (struct sockaddr *)&a4, sizeof(a4))
					  : bind(s, (struct sockaddr *)&a6, sizeof(a6))) < 0)
		rc = -errno;
	if (rc == 0 && listen(s, 128) < 0)
		rc = -errno;
	int high = rc == 0 ? fcntl(s, F_DUPFD_CLOEXEC, 10) : -1;
	if (rc == 0 && high < 0)
		rc = -EMFILE;
	if (s >= 0)
		close(s);
	return rc < 0 ? rc : high;
}

int sc__netns_enter(const struct sc_netns *ns, int *fds, size_t *n)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int s4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int s6 = ns->v6 ? socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int rc = s4 < 0 || (ns->v6 && s6 < 0) ? -errno : 0;
	if (rc == 0 && ioctl(s4, SIOCGIFFLAGS, &ifr) < 0)
		rc = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0 && ioctl(s4, SIOCSIFFLAGS, &ifr) < 0)
		rc = -errno;
	for (size_t i = 0; rc == 0 && i < ns->n_addrs; i++)
		rc = add_address(s4, s6, (unsigned)i, ns->addrs[i]);
	for (size_t i = 0; rc == 0 && i < ns->n_ports; i++)
		for (int v6 = 0; rc == 0 && v6 <= (ns->v6 ? 1 : 0); v6++) {
			int fd = listen_on(v6 ? AF_INET6 : AF_INET, ns->ports[i]);
			if (fd < 0)
				rc = fd;
			else
				fds[(*n)++] = fd;
		}
	if (s4 >= 0)
		close(s4);
	if (s6 >= 0)
		close(s6);
	return rc;
}
