/* The network layer: allow-list entries (entries.c), address rules (addr.c), the egress gate
 * the host runs for each cell of a sandbox with entries (gate.h), and the HTTP gate that
 * enforces method, path and header rules (http.c). Policy is decided here, once; core only
 * wires it to cells and results. */
#ifndef SC_NET_H
#define SC_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "snapcell.h"

#define SC_NET_INPUT_MAX   4096 /* bytes of a raw target: a URL with its path */
#define SC_NET_HOST_MAX	   253	/* bytes of a host name (RFC 1035), brackets included */
#define SC_NET_LABEL_MAX   63
#define SC_NET_PATH_MAX	   1024 /* bytes of a path prefix */
#define SC_NET_MAX_ENTRIES 256
#define SC_NET_MAX_METHODS 32 /* methods given for one entry, duplicates included */
#define SC_NET_METHOD_MAX  32 /* bytes of one method name */
#define SC_NET_MAX_HEADERS 16 /* headers the host adds for one entry */
#define SC_NET_MAX_PORTS   32 /* distinct ports over all entries of a config */
/* Bytes of a normalised target, NUL included: "https://", a host, ":65535", a path prefix. */
#define SC_NET_TARGET_MAX	(8 + SC_NET_HOST_MAX + 6 + SC_NET_PATH_MAX + 1)
#define SC_NET_HEADER_NAME_MAX	64
#define SC_NET_HEADER_VALUE_MAX 8192 /* bytes of a header value, after expansion */

enum sc_net_kind {
	SC_NET_NAME,	 /* host is a lower-case A-label name: "api.example.com" */
	SC_NET_WILDCARD, /* "*.example.com": host is the suffix "example.com"; subdomains only */
	SC_NET_IPV4,	 /* host is the dotted quad; addr holds it */
	SC_NET_IPV6,	 /* host is the address without brackets, RFC 5952 form; addr holds it */
};

/* How a target was written: an https:// entry is reached over verified TLS only (a request
 * the cell makes to it in cleartext is refused); an http:// entry never carries headers. */
enum sc_net_scheme {
	SC_NET_SCHEME_NONE,  /* "host", "host:port", "host/path": what the cell speaks */
	SC_NET_SCHEME_HTTP,  /* "http://..." */
	SC_NET_SCHEME_HTTPS, /* "https://..." */
};

struct sc_net_header {
	char *name;  /* an HTTP token, as given */
	char *value; /* never logged, described or sent to a cell */
};

struct sc_net_entry {
	/* The normalised text, the entry's key: "host" (ports 80 and 443), "host:port",
	 * "*.suffix[:port]", "[v6]" or "[v6]:port", or with a path rule
	 * "scheme://host[:port]/prefix" (the port shown only when it is not the scheme's) or,
	 * for a path given without a scheme, "host[:port]/prefix" (ports 80 and 443 without
	 * a port). A scheme without a path only sets the port: "https://h" is "h:443". */
	char *target;
	enum sc_net_kind kind;
	enum sc_net_scheme scheme; /* kept beside the target, whose text may not show it */
	char *host;
	uint8_t addr[16]; /* IP literals, network order (IPv4 in the first 4 bytes) */
	uint16_t ports[2];
	size_t n_ports;
	char *path; /* a path prefix starting with '/', matched on segment boundaries; or NULL */
	char **methods; /* upper-case HTTP tokens, sorted, unique; NULL for any method */
	size_t n_methods;
	struct sc_net_header *headers;
	size_t n_headers;
};

/* An entry with methods, a path or headers is enforced per HTTP request (http.c); any other
 * entry lets a TCP stream through once its TLS SNI or HTTP Host names the entry's host. */
static inline bool sc__net_entry_http(const struct sc_net_entry *e)
{
	return e->methods || e->path || e->n_headers;
}

/* Invariant: entries sorted by target (bytewise), targets unique. */
struct sc_net_list {
	struct sc_net_entry *entries;
	size_t n;
};

/* Parses one entry into out (owned by the caller; sc__net_entry_clear), headers empty.
 * 0 or SNAPCELL_E_INVAL (the reason in err), -ENOMEM. */
int sc__net_entry_parse(const char *target, const char *const *methods, size_t n_methods,
			struct sc_net_entry *out, struct snapcell_error *err);
void sc__net_entry_clear(struct sc_net_entry *e);
/* The normalised target text of a user's target, as sc__net_entry_parse would store it
 * (SC_NET_TARGET_MAX always suffices). */
int sc__net_target_normalize(const char *target, char *out, size_t out_len,
			     struct snapcell_error *err);

/* Adds e (taken over whatever happens), replacing the entry with the same target.
 * SNAPCELL_E_TOO_BIG past SC_NET_MAX_ENTRIES or SC_NET_MAX_PORTS, -ENOMEM. */
int sc__net_list_put(struct sc_net_list *l, struct sc_net_entry *e, struct snapcell_error *err);
/* Removes the entry with this normalised target; -ENOENT if there is none. */
int sc__net_list_remove(struct sc_net_list *l, const char *target);
int sc__net_list_copy(const struct sc_net_list *src, struct sc_net_list *dst);
void sc__net_list_free(struct sc_net_list *l);
/* Adds a header to the entry with this normalised target: -ENOENT without one; value is
 * the text to send (already expanded). SNAPCELL_E_INVAL for a name that is no token, a
 * hop-by-hop or framing header (Host, Connection, Content-Length, Transfer-Encoding,
 * Upgrade, TE, Trailer, Keep-Alive, Proxy-*) or a method override (X-HTTP-Method-Override,
 * X-HTTP-Method, X-Method-Override), an empty value or a control byte in it other than tab
 * (CR, LF, NUL), or an entry written "http://..." (its headers would travel in cleartext).
 * The same name (case-insensitive) replaces; SNAPCELL_E_TOO_BIG past SC_NET_MAX_HEADERS. */
int sc__net_list_add_header(struct sc_net_list *l, const char *target, const char *name,
			    const char *value, struct snapcell_error *err);
/* A header value as a user writes it made into the text to send: "${env:NAME}" is the host
 * environment variable (an error if unset), "${file:PATH}" the whole file (one trailing
 * newline dropped; an error if it cannot be read or is over SC_NET_HEADER_VALUE_MAX bytes),
 * "$$" a '$'; any other '$' is an error. *out is malloc'd. */
int sc__net_header_expand(const char *value, char **out, struct snapcell_error *err);

/* The distinct ports of all entries, ascending; returns how many (<= SC_NET_MAX_PORTS). */
size_t sc__net_list_ports(const struct sc_net_list *l, uint16_t ports[SC_NET_MAX_PORTS]);

/* The entries that allow connections to (host, port): host is a lower-case name or an IP
 * text (dotted quad, or IPv6 without brackets). Exact names and IP literals first, then
 * wildcards, each group in list order. An IP text matches only IP-literal entries of its
 * own family with the same address bytes ("::ffff:1.2.3.4" is not the entry "1.2.3.4"; list
 * "[::ffff:1.2.3.4]" for it), never a name or wildcard; a name that is no IP text but reads
 * as a number to some parser ("127.1") matches nothing. "*.example.com" matches
 * "a.example.com" and "a.b.example.com", never "example.com". Returns how many matched (at
 * most cap are stored). */
size_t sc__net_match_host(const struct sc_net_list *l, const char *host, uint16_t port,
			  const struct sc_net_entry **out, size_t cap);
/* The first of the candidates (all for one host and port) that allows a request: its method
 * among the entry's (or any), and its path (the request target's path, before '?') equal to
 * the prefix or continuing it at a '/' boundary ("/v1" allows "/v1" and "/v1/x", not
 * "/v10"; bytewise, so case-sensitive; "%xx" hex digits compared case-insensitively).
 * Entries with a path refuse, rather than guess at, a path that is not origin-form or has
 * "%2f", "%2e", "%5c", "%25", "%3b" or "%00", a ';', a "." or ".." segment, "//", a
 * backslash, '#', a space, a control or non-ASCII byte, a bad "%", percent-encoded bytes
 * that are not strict UTF-8 (overlong forms included), or a percent-encoded character that
 * servers fold into '.', '/', '\', ';', '?', '#' or '%' (U+FF0E, U+2024, U+2215, ...:
 * match.c, docs/security.md). NULL if none allows;
 * why (why_len bytes, always terminated) then says which rule refused ("POST is not allowed
 * for api.example.com (GET)"), naming the candidate that came closest. */
const struct sc_net_entry *sc__net_match_request(const struct sc_net_entry *const *cands, size_t n,
						 const char *method, const char *path, char *why,
						 size_t why_len);

/* Address rules (addr.c). 0 when a connection to sa may be made: a public unicast address.
 * Otherwise -EACCES with *why naming the class ("loopback", "private", "link-local",
 * "carrier-grade NAT", "cloud metadata", "multicast", "broadcast", "unspecified",
 * "IPv4-mapped loopback", "NAT64 of private", ...): loopback, RFC 1918, link-local,
 * CGNAT 100.64/10, 0/8, 169.254.169.254, 169.254.170.2, fd00:ec2::254 and 100.100.100.200,
 * multicast, broadcast, reserved 240/4, 192.0.0/24, 198.18/15, ULA fc00::/7, site-local,
 * 100::/64, anything outside 2000::/3, and IPv6 forms that embed an IPv4 address
 * (::ffff:0:0/96, ::/96 compatible, 64:ff9b::/96, 2002::/16, Teredo 2001::/32) judged by the
 * address they embed (64:ff9b:1::/48 refused). Documentation ranges (192.0.2/24,
 * 198.51.100/24, 203.0.113/24, 2001:db8::/32) count as public. -EINVAL (and a *why) for
 * anything but a sockaddr_in or sockaddr_in6 of exactly its size. why may be NULL. */
int sc__net_addr_check(const struct sockaddr *sa, socklen_t len, const char **why);

#endif
