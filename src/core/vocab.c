/* The execute_code tool's input schema, the one every front end offers a model (the MCP
 * server, the Python package's framework adapters): static JSON text, so no front end keeps a
 * copy of its own. Tool descriptions are describe.c's; this file is the arguments only. */
#include <stddef.h>

#include "snapcell.h"

#define CODE_FRESH "Python code to run in a fresh sandbox."
#define CODE_STATEFUL                                                                              \
	"Python code to run; state persists: variables, imports and /tmp files from this "         \
	"tool's earlier calls are still there."
#define CODE_SESSION                                                                               \
	"Python code to run: in the session named by session when given (its state persists), "    \
	"else in a fresh sandbox."
#define SESSION                                                                                    \
	"A session handle from session_new: the code runs in that session, where variables, "      \
	"imports and functions from its earlier calls still exist. Omit it to run in a fresh, "    \
	"empty cell."

#define SCHEMA(code_description, more)                                                             \
	"{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"description\":"      \
	"\"" code_description "\"}" more                                                           \
	"},\"required\":[\"code\"],\"additionalProperties\":false}"

#define SESSION_PROPERTY ",\"session\":{\"type\":\"string\",\"description\":\"" SESSION "\"}"

const char *snapcell_execute_code_schema(unsigned flags)
{
	static const char *const schemas[] = {
		SCHEMA(CODE_FRESH, ""),
		SCHEMA(CODE_STATEFUL, ""),
		SCHEMA(CODE_SESSION, SESSION_PROPERTY),
		SCHEMA(CODE_STATEFUL, SESSION_PROPERTY),
	};
	return flags < sizeof(schemas) / sizeof(schemas[0]) ? schemas[flags] : NULL;
}
