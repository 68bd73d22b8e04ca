/* The egress gate's ClientHello reader (src/net/sni.c): the server name of a hello as a TLS
 * client sends it, none, a hello cut short, and what is no hello. */
#include <errno.h>

#include "helpers.h"
#include "net/gate.h"

/* A TLS 1.2 record holding a ClientHello with the given extensions block. */
static size_t hello(uint8_t *out, const uint8_t *exts, size_t exts_len)
{
	uint8_t body[512];
	size_t n = 0;
	body[n++] = 3, body[n++] = 3; /* client_version */
	memset(body + n, 0xab, 32), n += 32;
	body[n++] = 0;		      /* session id */
	body[n++] = 0, body[n++] = 2; /* one cipher suite */
	body[n++] = 0x13, body[n++] = 0x01;
	body[n++] = 1, body[n++] = 0; /* null compression */
	if (exts) {
		body[n++] = (uint8_t)(exts_len >> 8), body[n++] = (uint8_t)exts_len;
		memcpy(body + n, exts, exts_len), n += exts_len;
	}
	size_t hs = n + 4, m = 0;
	out[m++] = 0x16, out[m++] = 3, out[m++] = 1;
	out[m++] = (uint8_t)(hs >> 8), out[m++] = (uint8_t)hs;
	out[m++] = 1, out[m++] = 0, out[m++] = (uint8_t)(n >> 8), out[m++] = (uint8_t)n;
	memcpy(out + m, body, n);
	return m + n;
}

static size_t sni_ext(uint8_t *out, const char *name)
{
	size_t len = strlen(name), m = 0;
	out[m++] = 0, out[m++] = 0; /* server_name */
	out[m++] = 0, out[m++] = (uint8_t)(len + 5);
	out[m++] = 0, out[m++] = (uint8_t)(len + 3);
	out[m++] = 0; /* host_name */
	out[m++] = 0, out[m++] = (uint8_t)len;
	memcpy(out + m, name, len);
	return m + len;
}

Test(sni_hello, reads_the_server_name_lower_cased)
{
	uint8_t ext[128], rec[600];
	char name[256];
	size_t n = hello(rec, ext, sni_ext(ext, "API.Example.test"));
	cr_expect_eq(sc__tls_sni(rec, n, name, sizeof(name)), 1);
	cr_expect_str_eq(name, "api.example.test");
}

Test(sni_hello, a_hello_without_one_has_none)
{
	uint8_t rec[600], other[4] = {0, 10, 0, 0};
	char name[256];
	cr_expect_eq(sc__tls_sni(rec, hello(rec, NULL, 0), name, sizeof(name)), 0);
	cr_expect_eq(sc__tls_sni(rec, hello(rec, other, sizeof(other)), name, sizeof(name)), 0);
}

Test(sni_hello, a_hello_cut_short_needs_more_and_junk_is_refused)
{
	uint8_t ext[128], rec[600];
	char name[256];
	size_t n = hello(rec, ext, sni_ext(ext, "a.example.test"));
	for (size_t cut = 1; cut < n; cut++)
		cr_expect_eq(sc__tls_sni(rec, cut, name, sizeof(name)), -EAGAIN, "cut %zu", cut);
	cr_expect_eq(sc__tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, sizeof(name)),
		     -EPROTO);
	/* A name that does not fit, and one with a space, are malformed. */
	cr_expect_eq(sc__tls_sni(rec, n, name, 8), -EPROTO);
	n = hello(rec, ext, sni_ext(ext, "a b.test"));
	cr_expect_eq(sc__tls_sni(rec, n, name, sizeof(name)), -EPROTO);
	/* An extension longer than the hello claims. */
	n = hello(rec, ext, sni_ext(ext, "a.example.test"));
	rec[n - 20] = 0xff;
	cr_expect_lt(sc__tls_sni(rec, n, name, sizeof(name)), 1);
}
