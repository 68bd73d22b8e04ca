/* The sandbox's own certificate authority and the per-host leaves the HTTP gate serves to
 * cells. The CA key never leaves this process; leaves share one key and are short-lived,
 * so a leaked leaf is worth little. Leaves are cached per host (bounded: past the cap an
 * unused one is dropped; if all are in use the new leaf is simply not cached). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/x509.h>

#include "http_ca.h"
#include "net.h"
#include "util/util.h"

#define LEAF_CACHE_MAX	64
#define LEAF_LIFETIME_S (24 * 3600)
#define LEAF_REFRESH_S	(12 * 3600) /* a cached leaf older than this is made again */
#define CA_LIFETIME_S	(365 * 24 * 3600)
#define BACKDATE_S	3600 /* tolerates a cell clock a little behind the host's */

struct sc_http_leaf {
	char host[SC_NET_HOST_MAX + 1];
	gnutls_certificate_credentials_t cred;
	time_t made;
	int refs; /* holders, the cache's own included while cached */
	bool cached;
};

struct sc_http_ca {
	pthread_mutex_t lock; /* guards the cache and every use of the keys */
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	gnutls_x509_privkey_t leaf_key;
	unsigned char ski[64];
	size_t ski_len;
	char *pem;
	struct sc_http_leaf *cache[LEAF_CACHE_MAX];
	size_t n_cache;
};

static int tls_err(struct snapcell_error *err, int rc, const char *step)
{
	return sc__err(err, -EIO, "%s: %s", step, gnutls_strerror(rc));
}

static int new_key(gnutls_x509_privkey_t *k)
{
	int rc = gnutls_x509_privkey_init(k);
	if (rc)
		return rc;
	return gnutls_x509_privkey_generate(*k, GNUTLS_PK_ECDSA,
					    GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
}

/* Version, a random positive serial, validity, subject CN, key and its identifier. */
static int crt_common(gnutls_x509_crt_t c, gnutls_x509_privkey_t key, const char *cn,
		      time_t lifetime_s)
{
	unsigned char serial[16], id[64];
	size_t id_len = sizeof(id);
	time_t now = time(NULL);
	int rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
	serial[0] &= 0x7f;
	serial[0] |= 0x01;
	if (!rc)
		rc = gnutls_x509_crt_set_version(c, 3);
	if (!rc)
		rc = gnutls_x509_crt_set_serial(c, serial, sizeof(serial));
	if (!rc)
		rc = gnutls_x509_crt_set_activation_time(c, now - BACKDATE_S);
	if (!rc)
		rc = gnutls_x509_crt_set_expiration_time(c, now + lifetime_s);
	if (!rc)
		rc = gnutls_x509_crt_set_dn_by_oid(c, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
						   (unsigned)strlen(cn));
	if (!rc)
		rc = gnutls_x509_crt_set_key(c, key);
	if (!rc)
		rc = gnutls_x509_crt_get_key_id(c, GNUTLS_KEYID_USE_SHA1, id, &id_len);
	if (!rc)
		rc = gnutls_x509_crt_set_subject_key_id(c, id, id_len);
	return rc;
}

static int make_ca(struct sc_http_ca *ca, const char *name)
{
	gnutls_datum_t pem = {0};
	char cn[128];
	unsigned char tag[6];
	int rc = gnutls_rnd(GNUTLS_RND_NONCE, tag, sizeof(tag));
	if (rc)
		return rc;
	snprintf(cn, sizeof(cn), "%s %02x%02x%02x%02x%02x%02x", name, tag[0], tag[1], tag[2],
		 tag[3], tag[4], tag[5]);
	if ((rc = new_key(&ca->key)) || (rc = new_key(&ca->leaf_key)) ||
	    (rc = gnutls_x509_crt_init(&ca->crt)) ||
	    (rc = crt_common(ca->crt, ca->key, cn, CA_LIFETIME_S)) ||
	    (rc = gnutls_x509_crt_set_basic_constraints(ca->crt, 1, 0)) ||
	    (rc = gnutls_x509_crt_set_key_usage(ca->crt,
						GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN)) ||
	    (rc = gnutls_x509_crt_sign2(ca->crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0)))
		return rc;
	ca->ski_len = sizeof(ca->ski);
	if ((rc = gnutls_x509_crt_get_subject_key_id(ca->crt, ca->ski, &ca->ski_len, NULL)))
		return rc;
	if ((rc = gnutls_x509_crt_export2(ca->crt, GNUTLS_X509_FMT_PEM, &pem)))
		return rc;
	ca->pem = strndup((const char *)pem.data, pem.size);
	gnutls_free(pem.data);
	return ca->pem ? 0 : GNUTLS_E_MEMORY_ERROR;
}

int sc__http_ca_new(const char *name, struct sc_http_ca **out, struct snapcell_error *err)
{
	struct sc_http_ca *ca = calloc(1, sizeof(*ca));
	if (!ca)
		return sc__err(err, -ENOMEM, "http gate CA");
	pthread_mutex_init(&ca->lock, NULL);
	int rc = make_ca(ca, name);
	if (rc) {
		sc__http_ca_free(ca);
		return tls_err(err, rc, "make the sandbox CA");
	}
	*out = ca;
	return 0;
}

static void leaf_free(struct sc_http_leaf *l)
{
	gnutls_certificate_free_credentials(l->cred);
	free(l);
}

void sc__http_ca_free(struct sc_http_ca *ca)
{
	if (!ca)
		return;
	for (size_t i = 0; i < ca->n_cache; i++)
		leaf_free(ca->cache[i]);
	if (ca->crt)
		gnutls_x509_crt_deinit(ca->crt);
	if (ca->key)
		gnutls_x509_privkey_deinit(ca->key);
	if (ca->leaf_key)
		gnutls_x509_privkey_deinit(ca->leaf_key);
	free(ca->pem);
	pthread_mutex_destroy(&ca->lock);
	free(ca);
}

const char *sc__http_ca_pem(const struct sc_http_ca *ca)
{
	return ca->pem;
}

/* SAN: the IP for an IP text (clients check IP SANs, not DNS ones, for IP literals). */
static int set_san(gnutls_x509_crt_t c, const char *host)
{
	unsigned char ip[16];
	if (inet_pton(AF_INET, host, ip) == 1)
		return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, ip, 4,
							    GNUTLS_FSAN_SET);
	if (inet_pton(AF_INET6, host, ip) == 1)
		return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, ip, 16,
							    GNUTLS_FSAN_SET);
	return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_DNSNAME, host,
						    (unsigned)strlen(host), GNUTLS_FSAN_SET);
}

/* Called with the lock held: the keys are not to be used from two threads at once. */
static int make_leaf(struct sc_http_ca *ca, const char *host, struct sc_http_leaf **out)
{
	gnutls_x509_crt_t c = NULL;
	struct sc_http_leaf *l = calloc(1, sizeof(*l));
	if (!l)
		return GNUTLS_E_MEMORY_ERROR;
	snprintf(l->host, sizeof(l->host), "%s", host);
	int rc;
	if ((rc = gnutls_x509_crt_init(&c)) ||
	    (rc = crt_common(c, ca->leaf_key, host, LEAF_LIFETIME_S)) || (rc = set_san(c, host)) ||
	    (rc = gnutls_x509_crt_set_basic_constraints(c, 0, -1)) ||
	    (rc = gnutls_x509_crt_set_key_usage(c, GNUTLS_KEY_DIGITAL_SIGNATURE)) ||
	    (rc = gnutls_x509_crt_set_key_purpose_oid(c, GNUTLS_KP_TLS_WWW_SERVER, 0)) ||
	    (rc = gnutls_x509_crt_set_authority_key_id(c, ca->ski, ca->ski_len)) ||
	    (rc = gnutls_x509_crt_sign2(c, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0)) ||
	    (rc = gnutls_certificate_allocate_credentials(&l->cred)) ||
	    (rc = gnutls_certificate_set_x509_key(l->cred, &c, 1, ca->leaf_key))) {
		if (c)
			gnutls_x509_crt_deinit(c);
		if (l->cred)
			gnutls_certificate_free_credentials(l->cred);
		free(l);
		return rc;
	}
	gnutls_x509_crt_deinit(c);
	l->made = time(NULL);
	l->refs = 1;
	*out = l;
	return 0;
}

/* Drops a cache slot (the lock held); the leaf goes when its last holder releases it. */
static void uncache(struct sc_http_ca *ca, size_t i)
{
	struct sc_http_leaf *l = ca->cache[i];
	ca->cache[i] = ca->cache[--ca->n_cache];
	l->cached = false;
	if (--l->refs == 0)
		leaf_free(l);
}

int sc__http_ca_leaf(struct sc_http_ca *ca, const char *host, struct sc_http_leaf **out,
		     struct snapcell_error *err)
{
	if (strlen(host) > SC_NET_HOST_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "leaf for a host of %zu bytes", strlen(host));
	pthread_mutex_lock(&ca->lock);
	time_t now = time(NULL);
	for (size_t i = 0; i < ca->n_cache; i++) {
		struct sc_http_leaf *l = ca->cache[i];
		if (strcmp(l->host, host))
			continue;
		if (now - l->made < LEAF_REFRESH_S) {
			l->refs++;
			pthread_mutex_unlock(&ca->lock);
			*out = l;
			return 0;
		}
		uncache(ca, i);
		break;
	}
	struct sc_http_leaf *l;
	int rc = make_leaf(ca, host, &l);
	if (rc) {
		pthread_mutex_unlock(&ca->lock);
		return tls_err(err, rc, "make a leaf certificate");
	}
	for (size_t i = 0; ca->n_cache == LEAF_CACHE_MAX && i < ca->n_cache; i++)
		if (ca->cache[i]->refs == 1)
			uncache(ca, i);
	if (ca->n_cache < LEAF_CACHE_MAX) {
		l->cached = true;
		l->refs++;
		ca->cache[ca->n_cache++] = l;
	}
	pthread_mutex_unlock(&ca->lock);
	*out = l;
	return 0;
}

gnutls_certificate_credentials_t sc__http_leaf_cred(const struct sc_http_leaf *leaf)
{
	return leaf->cred;
}

void sc__http_ca_release(struct sc_http_ca *ca, struct sc_http_leaf *leaf)
{
	if (!leaf)
		return;
	pthread_mutex_lock(&ca->lock);
	bool last = --leaf->refs == 0;
	pthread_mutex_unlock(&ca->lock);
	if (last)
		leaf_free(leaf);
}
