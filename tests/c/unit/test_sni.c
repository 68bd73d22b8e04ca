/* The server name the gate reads from a ClientHello it passes through (sni.c): one name, or
 * a refusal for every hello a server could read another name from. */
#include <string.h>

#include "helpers.h"
#include "net/gate.h"

/* An extension: type, then its body. */
static size_t ext(uint8_t *out, unsigned type, const uint8_t *body, size_t len)
{
	out[0] = (uint8_t)(type >> 8), out[1] = (uint8_t)type;
	out[2] = (uint8_t)(len >> 8), out[3] = (uint8_t)len;
	memcpy(out + 4, body, len);
	return 4 + len;
}

/* A server_name extension listing (type, name) pairs; names NULL-ended. */
static size_t sni_ext(uint8_t *out, const unsigned *types, const char *const *names)
{
	uint8_t list[512];
	size_t at = 2;
	for (size_t i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);
		list[at] = (uint8_t)types[i];
		list[at + 1] = (uint8_t)(n >> 8), list[at + 2] = (uint8_t)n;
		memcpy(list + at + 3, names[i], n);
		at += 3 + n;
	}
	list[0] = (uint8_t)((at - 2) >> 8), list[1] = (uint8_t)(at - 2);
	return ext(out, 0, list, at);
}

/* A TLS 1.2-framed record holding a ClientHello with these extensions. */
static size_t hello(uint8_t *out, const uint8_t *exts, size_t exts_len)
{
	static const uint8_t fixed[] = {0x03, 0x03, [34] = 0, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00};
	uint8_t *hs = out + 5, *body = hs + 4;
	memcpy(body, fixed, sizeof(fixed));
	size_t n = sizeof(fixed);
	body[n] = (uint8_t)(exts_len >> 8), body[n + 1] = (uint8_t)exts_len;
	memcpy(body + n + 2, exts, exts_len);
	n += 2 + exts_len;
	hs[0] = 1, hs[1] = 0, hs[2] = (uint8_t)(n >> 8), hs[3] = (uint8_t)n;
	out[0] = 0x16, out[1] = 3, out[2] = 1;
	out[3] = (uint8_t)((n + 4) >> 8), out[4] = (uint8_t)(n + 4);
	return 5 + 4 + n;
}

static int sni_of(const uint8_t *exts, size_t len, char *name)
{
	uint8_t buf[2048];
	size_t n = hello(buf, exts, len);
	return sc__tls_sni(buf, n, name, 256);
}

Test(sni, one_host_name_is_read_lower_cased)
{
	uint8_t e[512];
	char name[256];
	size_t n = sni_ext(e, (unsigned[]){0}, (const char *[]){"API.Example.test", NULL});
	cr_assert_eq(sni_of(e, n, name), 1);
	cr_expect_str_eq(name, "api.example.test");
	cr_expect_eq(sni_of(e, 0, name), 0, "no extensions: no name");
	uint8_t buf[2048];
	size_t len = hello(buf, e, n);
	cr_expect_eq(sc__tls_sni(buf, len - 1, name, 256), -EAGAIN, "the record goes on");
}

Test(sni, a_hello_a_server_could_read_another_name_from_is_refused)
{
	uint8_t e[1024], ech[8] = {0};
	char name[256];
	size_t n = sni_ext(e, (unsigned[]){0, 0},
			   (const char *[]){"api.example.test", "evil.example", NULL});
	cr_expect_eq(sni_of(e, n, name), -EPROTO, "two names in the list");
	n = sni_ext(e, (unsigned[]){1, 0},
		    (const char *[]){"evil.example", "api.example.test", NULL});
	cr_expect_eq(sni_of(e, n, name), -EPROTO, "another name type first");
	n = sni_ext(e, (unsigned[]){0}, (const char *[]){"api.example.test", NULL});
	n += sni_ext(e + n, (unsigned[]){0}, (const char *[]){"evil.example", NULL});
	cr_expect_eq(sni_of(e, n, name), -EPROTO, "two server_name extensions");
	for (unsigned type = 0xfe0d; type; type = type == 0xfe0d ? 0xffce : 0) {
		n = sni_ext(e, (unsigned[]){0}, (const char *[]){"api.example.test", NULL});
		n += ext(e + n, type, ech, sizeof(ech));
		cr_expect_eq(sni_of(e, n, name), -EPROTO, "encrypted client hello %#x", type);
	}
}
