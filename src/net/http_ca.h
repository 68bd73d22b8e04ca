/* The HTTP gate's certificate authority (http_ca.c): one per gate, a fresh ECDSA P-256 key
 * that lives in memory only, and the leaf certificates it issues for the hosts cells reach,
 * cached per host. Not a general CA: no revocation, no chains, no files. */
#ifndef SC_NET_HTTP_CA_H
#define SC_NET_HTTP_CA_H

#include <gnutls/gnutls.h>

#include "snapcell.h"

struct sc_http_ca;
struct sc_http_leaf;

int sc__http_ca_new(const char *name, struct sc_http_ca **out, struct snapcell_error *err);
/* Every leaf must have been released. NULL does nothing. */
void sc__http_ca_free(struct sc_http_ca *ca);
const char *sc__http_ca_pem(const struct sc_http_ca *ca);

/* A leaf for host (a DNS name, or an IPv4/IPv6 text for an IP SAN), from the cache or made
 * now; thread-safe. Held until sc__http_ca_release. */
int sc__http_ca_leaf(struct sc_http_ca *ca, const char *host, struct sc_http_leaf **out,
		     struct snapcell_error *err);
gnutls_certificate_credentials_t sc__http_leaf_cred(const struct sc_http_leaf *leaf);
void sc__http_ca_release(struct sc_http_ca *ca, struct sc_http_leaf *leaf);

#endif
