/* The server name of a TLS ClientHello (RFC 8446 §4.1.2, RFC 6066 §3), read from the first
 * record of a connection the gate passes through, so an allowed address cannot carry a TLS
 * session for another name. Bounded by the record; every length is checked against what
 * contains it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "gate.h"

struct cursor {
	const uint8_t *p;
	size_t left;
};

static bool take(struct cursor *c, size_t n, struct cursor *sub)
{
	if (n > c->left)
		return false;
	if (sub)
		*sub = (struct cursor){c->p, n};
	c->p += n;
	c->left -= n;
	return true;
}

static bool number(struct cursor *c, size_t bytes, size_t *out)
{
	if (bytes > c->left)
		return false;
	size_t v = 0;
	for (size_t i = 0; i < bytes; i++)
		v = v << 8 | c->p[i];
	c->p += bytes;
	c->left -= bytes;
	*out = v;
	return true;
}

/* A vector with a length prefix of `bytes` bytes. */
static bool vector(struct cursor *c, size_t bytes, struct cursor *sub)
{
	size_t n;
	return number(c, bytes, &n) && take(c, n, sub);
}

/* Exactly one host_name: a list a server could read another name from (a second entry, or
 * another type it might take for one) is refused. */
static int server_name(struct cursor ext, char *out, size_t out_len)
{
	struct cursor list, name;
	size_t type;
	if (!vector(&ext, 2, &list) || ext.left || !number(&list, 1, &type) || type != 0 ||
	    !vector(&list, 2, &name) || list.left)
		return -EPROTO;
	if (name.left == 0 || name.left >= out_len)
		return -EPROTO;
	for (size_t i = 0; i < name.left; i++) {
		char ch = (char)name.p[i];
		if (ch <= 0x20 || ch >= 0x7f)
			return -EPROTO;
		out[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
	}
	out[name.left] = 0;
	return 1;
}

int sc__tls_sni(const uint8_t *buf, size_t len, char *out, size_t out_len)
{
	struct cursor rec = {buf, len}, body, hello;
	size_t type, version, hs_type;
	if (len < 5)
		return len > 0 && buf[0] != 0x16 ? -EPROTO : -EAGAIN;
	if (!number(&rec, 1, &type) || type != 0x16 || !number(&rec, 2, &version) ||
	    (version >> 8) != 3)
		return -EPROTO;
	size_t rec_len = 0;
	if (!number(&rec, 2, &rec_len) || rec_len == 0 || rec_len > (1u << 14))
		return -EPROTO;
	if (!take(&rec, rec_len, &body))
		return -EAGAIN;
	/* The whole hello in this first record: clients send it so (it is far below 16 KiB). */
	if (!number(&body, 1, &hs_type) || hs_type != 1 || !vector(&body, 3, &hello))
		return -EPROTO;
	struct cursor skip;
	if (!take(&hello, 2 + 32, NULL) || !vector(&hello, 1, &skip) || !vector(&hello, 2, &skip) ||
	    !vector(&hello, 1, &skip))
		return -EPROTO;
	if (hello.left == 0)
		return 0; /* no extensions */
	struct cursor exts;
	if (!vector(&hello, 2, &exts) || hello.left)
		return -EPROTO;
	int found = 0;
	while (exts.left) {
		size_t ext_type;
		struct cursor ext;
		if (!number(&exts, 2, &ext_type) || !vector(&exts, 2, &ext))
			return -EPROTO;
		/* Encrypted Client Hello (and its ESNI draft) carries the real name where the
		 * gate cannot read it: the outer one would be a front. */
		if (ext_type == 0xfe0d || ext_type == 0xffce)
			return -EPROTO;
		if (ext_type != 0)
			continue;
		if (found) /* a second server_name: which one a server reads is its choice */
			return -EPROTO;
		if ((found = server_name(ext, out, out_len)) < 0)
			return found;
	}
	return found;
}
