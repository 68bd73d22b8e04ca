#define _GNU_SOURCE
/* Names for codes, statuses and levels: the one table each, shared by every front end. */
#include <string.h>

#include "snapcell.h"

const char *snapcell_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case SNAPCELL_E_INVAL:
		return "invalid argument";
	case SNAPCELL_E_ISOLATION:
		return "required isolation unavailable";
	case SNAPCELL_E_HELPER:
		return "sandbox helper failed";
	case SNAPCELL_E_TEMPLATE:
		return "sandbox template died";
	case SNAPCELL_E_PROTOCOL:
		return "protocol violation";
	case SNAPCELL_E_TOO_BIG:
		return "input too large";
	}
	if (code < 0 && code >= -4095)
		return strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown system error";
	return "unknown error";
}

const char *snapcell_status_name(enum snapcell_status status)
{
	static const char *const names[] = {"ok",     "error",	      "timeout",      "memory",
					    "killed", "output-limit", "setup-failure"};
	return (unsigned)status < sizeof(names) / sizeof(names[0]) ? names[status] : NULL;
}

const char *snapcell_isolation_name(enum snapcell_isolation level)
{
	static const char *const names[] = {"none", "rlimits", "namespaces", "cgroups"};
	return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : NULL;
}
