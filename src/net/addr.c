/* Address rules: whether the host may connect to an address a name resolved to (or a cell
 * named), judged on the socket address that will be connected, never on text, so every
 * spelling of an address ("127.1", "0x7f000001", "::ffff:127.0.0.1") meets the same rule.
 * Not the exception for an entry that is itself an IP literal: the gate makes that. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "internal.h"

/* The classes an IPv4 address can fall in, and how an IPv6 form that embeds one says so. */
#define V4_CLASSES(w)                                                                              \
	{                                                                                          \
		NULL, w "unspecified", w "this network (0/8)", w "loopback", w "private",          \
			w "carrier-grade NAT", w "cloud metadata", w "link-local",                 \
			w "reserved (192.0.0/24)", w "benchmarking (198.18/15)", w "multicast",    \
			w "broadcast", w "reserved (240/4)",                                       \
	}
enum v4_class {
	PUBLIC,
	UNSPECIFIED,
	THIS_NETWORK,
	LOOPBACK,
	PRIVATE,
	CGNAT,
	METADATA,
	LINK_LOCAL,
	IETF,
	BENCHMARK,
	MULTICAST,
	BROADCAST,
	RESERVED,
};
enum wrapper { PLAIN, MAPPED, COMPATIBLE, NAT64, SIX_TO_FOUR, TEREDO };
static const char *const why_text[][13] = {
	V4_CLASSES(""),		 V4_CLASSES("IPv4-mapped "), V4_CLASSES("IPv4-compatible "),
	V4_CLASSES("NAT64 of "), V4_CLASSES("6to4 of "),     V4_CLASSES("Teredo of "),
};

/* Documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24) count as public: nothing
 * routes them, and refusing them would only break examples. */
static enum v4_class v4_class(const uint8_t a[4])
{
	uint32_t x = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
	static const struct {
		uint32_t net, mask;
		enum v4_class c;
	} table[] = {
		{0x00000000, 0xffffffff, UNSPECIFIED},	{0xffffffff, 0xffffffff, BROADCAST},
		{0xa9fea9fe, 0xffffffff, METADATA}, /* 169.254.169.254 */
		{0xa9feaa02, 0xffffffff, METADATA}, /* 169.254.170.2, ECS task metadata */
		{0x646464c8, 0xffffffff, METADATA}, /* 100.100.100.200, Alibaba */
		{0x00000000, 0xff000000, THIS_NETWORK}, {0x7f000000, 0xff000000, LOOPBACK},
		{0x0a000000, 0xff000000, PRIVATE},	{0xac100000, 0xfff00000, PRIVATE},
		{0xc0a80000, 0xffff0000, PRIVATE},	{0x64400000, 0xffc00000, CGNAT},
		{0xa9fe0000, 0xffff0000, LINK_LOCAL},	{0xc0000000, 0xffffff00, IETF},
		{0xc6120000, 0xfffe0000, BENCHMARK},	{0xe0000000, 0xf0000000, MULTICAST},
		{0xf0000000, 0xf0000000, RESERVED},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if ((x & table[i].mask) == table[i].net)
			return table[i].c;
	return PUBLIC;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int judge_v4(const uint8_t a[4], enum wrapper w, const char **why)
{
	enum v4_class c = v4_class(a);
	if (c == PUBLIC)
		return 0;
	*why = why_text[w][c];
	return -EACCES;
}

static int refuse(const char *text, const char **why)
{
	*why = text;
	return -EACCES;
}

/* IPv6 forms that carry an IPv4 address are judged by it; then IPv6's own ranges. */
static int judge_v6(const uint8_t a[16], const char **why)
{
	static const uint8_t ec2[16] = {0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02};
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	if (zero(a, 16))
		return refuse("unspecified", why);
	if (zero(a, 15) && a[15] == 1)
		return refuse("loopback", why);
	if (zero(a, 10) && a[10] == 0xff && a[11] == 0xff)
		return judge_v4(a + 12, MAPPED, why);
	if (zero(a, 12))
		return judge_v4(a + 12, COMPATIBLE, why);
	if (!memcmp(a, nat64, 12))
		return judge_v4(a + 12, NAT64, why);
	if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1)
		return refuse("NAT64 local-use (64:ff9b:1::/48)", why);
	if (a[0] == 0x20 && a[1] == 0x02)
		return judge_v4(a + 2, SIX_TO_FOUR, why);
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		uint8_t client[4] = {(uint8_t)~a[12], (uint8_t)~a[13], (uint8_t)~a[14],
				     (uint8_t)~a[15]};
		int rc = judge_v4(a + 4, TEREDO, why);
		return rc ? rc : judge_v4(client, TEREDO, why);
	}
	if (!memcmp(a, ec2, 16))
		return refuse("cloud metadata", why);
	if (a[0] == 0xff)
		return refuse("multicast", why);
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return refuse("link-local", why);
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return refuse("site-local", why);
	if ((a[0] & 0xfe) == 0xfc)
		return refuse("private (unique local fc00::/7)", why);
	if (a[0] == 0x01 && a[1] == 0x00 && zero(a + 2, 6))
		return refuse("discard-only (100::/64)", why);
	if ((a[0] & 0xe0) != 0x20)
		return refuse("reserved (outside 2000::/3)", why);
	return 0;
}

int sc__net_addr_check(const struct sockaddr *sa, socklen_t len, const char **why)
{
	const char *ignored;
	why = why ? why : &ignored;
	if (sa && sa->sa_family == AF_INET && len == sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		uint8_t a[4];
		memcpy(a, &in->sin_addr, 4);
		return judge_v4(a, PLAIN, why);
	}
	if (sa && sa->sa_family == AF_INET6 && len == sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		return judge_v6(in6->sin6_addr.s6_addr, why);
	}
	*why = "not an IPv4 or IPv6 socket address";
	return -EINVAL;
}
