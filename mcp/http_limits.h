/* What an HTTP client may hold of the server before its request is served (http_limits.c):
 * a connection slot only until its request head is complete or a deadline passes, and bytes
 * of request bodies in flight only within a server-wide budget. */
#ifndef SNAPCELL_MCP_HTTP_LIMITS_H
#define SNAPCELL_MCP_HTTP_LIMITS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* Defaults of --http-head-timeout, --http-max-connections and --http-request-memory. */
#define MCP_HEAD_TIMEOUT_S_DEFAULT  10u
#define MCP_MAX_CONNECTIONS_DEFAULT 256u
#define MCP_REQUEST_MEMORY_DEFAULT  (256u << 20)
#define MCP_HEAD_TIMEOUT_S_MAX	    3600u
#define MCP_MAX_CONNECTIONS_MAX	    4096u

struct mcp_http_limits;

/* Starts the thread that closes connections whose head is late. NULL after a message. */
struct mcp_http_limits *mcp_http_limits_new(unsigned head_timeout_s, unsigned max_connections,
					    size_t request_memory);
/* After the daemon stopped: no connection is tracked any more. */
void mcp_http_limits_free(struct mcp_http_limits *l);
/* MHD_OPTION_NOTIFY_CONNECTION's callback, cls the limits: tracks each connection from accept
 * to close. */
void mcp_http_limits_track(void *cls, struct MHD_Connection *con, void **socket_context,
			   enum MHD_ConnectionNotificationCode code);
/* The connection's request head arrived: its deadline no longer applies. */
void mcp_http_limits_head_done(struct mcp_http_limits *l, struct MHD_Connection *con);
/* A request on the connection was answered: the next head (keep-alive) has its own deadline
 * from now. */
void mcp_http_limits_request_done(struct mcp_http_limits *l, struct MHD_Connection *con);
/* Whether a connection slot is left besides the caller's (what /healthz reports). */
bool mcp_http_limits_slot_free(struct mcp_http_limits *l);
/* Takes n bytes of the request budget: false (nothing taken) when they do not fit. */
bool mcp_http_limits_charge(struct mcp_http_limits *l, size_t n);
void mcp_http_limits_uncharge(struct mcp_http_limits *l, size_t n);
/* The budget, for messages. */
size_t mcp_http_limits_budget(const struct mcp_http_limits *l);

#endif
