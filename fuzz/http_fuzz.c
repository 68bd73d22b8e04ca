/* libFuzzer target for the HTTP gate's request parser (src/net/http_parse.c): the bytes a
 * cell sends on a connection. A head, if complete, is parsed (refused with a status and a
 * reason, or accepted with the invariants below); whatever follows is fed to the chunked
 * decoder in two pieces, which must agree with one piece. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const struct sc_http_request *r)
{
	if (!r->method || !r->target || r->target[0] != '/' || !r->host ||
	    strlen(r->method) > SC_NET_METHOD_MAX || r->n_fields > SC_HTTP_FIELDS_MAX)
		abort();
	if (!strcmp(r->method, "CONNECT") || !strcmp(r->method, "TRACE"))
		abort();
	if (r->chunked && sc__http_field(r, "content-length"))
		abort();
	if ((!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD")) &&
	    (r->chunked || r->content_length))
		abort();
	for (const char *p = r->target; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			abort();
	for (size_t i = 0; i < r->n_fields; i++) {
		const char *n = r->fields[i].name, *v = r->fields[i].value;
		if (!*n || strpbrk(n, " \t:\r\n") || strpbrk(v, "\r\n") ||
		    !strcasecmp(n, "upgrade") || !strcasecmp(n, "x-http-method-override"))
			abort();
	}
}

static void check_chunked(const char *in, size_t len)
{
	struct sc_http_chunked a = {0}, b = {0};
	char out_a[4096], out_b[4096];
	uint64_t la = 0, lb = 0;
	size_t ua = 0, ub1 = 0, ub2 = 0;
	int ra = sc__http_chunked_feed(&a, in, len, &ua, out_a, &la, sizeof(out_a));
	size_t half = len / 2;
	int rb = sc__http_chunked_feed(&b, in, half, &ub1, out_b, &lb, sizeof(out_b));
	if (!rb && !b.done)
		rb = sc__http_chunked_feed(&b, in + half, len - half, &ub2, out_b, &lb,
					   sizeof(out_b));
	if (ua > len || la > sizeof(out_a))
		abort();
	if (ra != rb ||
	    (!ra && (a.done != b.done || la != lb || memcmp(out_a, out_b, la) || ua != ub1 + ub2)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2 * SC_HTTP_HEAD_MAX)
		return 0;
	const char *in = (const char *)data;
	size_t head = sc__http_head_len(in, size);
	if (head && head <= SC_HTTP_HEAD_MAX) {
		char *buf = malloc(head);
		if (!buf)
			return 0;
		memcpy(buf, in, head);
		struct sc_http_request r;
		struct sc_http_refusal ref = {0};
		if (sc__http_parse_head(buf, head, &r, &ref) == 0)
			check_request(&r);
		else if (!ref.why || ref.status < 400 || ref.status > 599)
			abort();
		free(buf);
	}
	check_chunked(in + head, size - head);
	return 0;
}
