/* What the Streamable HTTP transport's files share: http.c (the endpoint, its checks and its
 * JSON answers) and http_sse.c (a tools/call answered as an SSE stream). */
#ifndef SNAPCELL_MCP_HTTP_H
#define SNAPCELL_MCP_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp.h"

/* The error code of an answer, 0 for a result. */
static inline json_int_t mcp_http_error_code(const json_t *msg)
{
	return json_integer_value(json_object_get(json_object_get(msg, "error"), "code"));
}

/* http.c: a JSON body of len bytes at text + off, text (malloc'd) stolen, with session's
 * Mcp-Session-Id when set; charged bytes of srv's result memory are given back once
 * libmicrohttpd has sent and freed it (srv may be NULL). */
enum MHD_Result mcp_http_respond_owned(struct MHD_Connection *con, unsigned status, char *text,
				       size_t off, size_t len, const char *session,
				       struct mcp_server *srv, size_t charged);
/* The HTTP status of an answer with this error code (0: none) in era. */
unsigned mcp_http_answer_status(json_int_t code, enum mcp_era era);
/* An error body (code, why) with an HTTP status. */
enum MHD_Result mcp_http_refuse(struct MHD_Connection *con, unsigned status, int code,
				const char *why);

/* http_sse.c: whether the request msg on con is answered as an SSE stream (asks: the
 * client may be asked to approve calls). */
bool mcp_http_wants_stream(struct MHD_Connection *con, const struct mcp_message *msg, bool asks);
/* Hands msg (cleared here) to srv with an SSE stream as its sink and queues the response. */
enum MHD_Result mcp_http_stream(struct mcp_server *srv, struct MHD_Connection *con,
				struct mcp_message *msg, uint64_t scope, bool elicits);

#endif
