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

static int server_name(struct cursor ext, char *out, size_t out_len)
{
	struct cursor list;
	if (!vector(&ext, 2, &list) || ext.left)
		return -EPROTO;
	while (list.left) {
		size_t type;
		struct cursor name;
		if (!number(&list, 1, &type) || !vector(&list, 2, &name))
			return -EPROTO;
		if (type != 0)
			continue;
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
	return 0;
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
	size_t rec_len;
	number(&rec, 2, &rec_len);
	if (rec_len == 0 || rec_len > (1u << 14))
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
	while (exts.left) {
		size_t ext_type;
		struct cursor ext;
		if (!number(&exts, 2, &ext_type) || !vector(&exts, 2, &ext))
			return -EPROTO;
		if (ext_type == 0)
			return server_name(ext, out, out_len);
	}
	return 0;
}
