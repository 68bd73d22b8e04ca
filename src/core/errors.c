#define _GNU_SOURCE
/* Names for codes, statuses and levels, and the library's version: the one table each, shared
 * by every front end. Messages are built elsewhere (util's sc__err); this file only names. */
#include <string.h>

#include "snapcell.h"

/* Our own codes: snapcell_strerror() and snapcell_error_name() both read this table. */
static const struct {
	int code;
	const char *name;
	const char *description;
} own_codes[] = {
	{0, "OK", "success"},
	{SNAPCELL_E_INVAL, "SNAPCELL_E_INVAL", "invalid argument"},
	{SNAPCELL_E_ISOLATION, "SNAPCELL_E_ISOLATION", "required isolation unavailable"},
	{SNAPCELL_E_HELPER, "SNAPCELL_E_HELPER", "sandbox helper failed"},
	{SNAPCELL_E_TEMPLATE, "SNAPCELL_E_TEMPLATE", "sandbox template died"},
	{SNAPCELL_E_PROTOCOL, "SNAPCELL_E_PROTOCOL", "protocol violation"},
	{SNAPCELL_E_TOO_BIG, "SNAPCELL_E_TOO_BIG", "input too large"},
	{SNAPCELL_E_EXHAUSTED, "SNAPCELL_E_EXHAUSTED", "every outside uid of the range is in use"},
};

static int own_index(int code)
{
	for (size_t i = 0; i < sizeof(own_codes) / sizeof(own_codes[0]); i++)
		if (own_codes[i].code == code)
			return (int)i;
	return -1;
}

static bool is_errno(int code)
{
	return code < 0 && code >= -4095;
}

const char *snapcell_strerror(int code)
{
	int i = own_index(code);
	if (i >= 0)
		return own_codes[i].description;
	if (is_errno(code))
		return strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown system error";
	return "unknown error";
}

const char *snapcell_error_name(int code)
{
	int i = own_index(code);
	if (i >= 0)
		return own_codes[i].name;
	if (is_errno(code) && strerrorname_np(-code))
		return strerrorname_np(-code);
	return "UNKNOWN";
}

const char *snapcell_status_name(enum snapcell_status status)
{
	static const char *const names[] = {"ok",     "error",	      "timeout",       "memory",
					    "killed", "output-limit", "setup-failure", "cancelled",
					    "paused", "expired"};
	return (unsigned)status < sizeof(names) / sizeof(names[0]) ? names[status] : NULL;
}

const char *snapcell_value_state_name(enum snapcell_value_state state)
{
	static const char *const names[] = {"not_evaluated", "present",	 "no_expression",
					    "none",	     "not_json", "too_large"};
	return (unsigned)state < sizeof(names) / sizeof(names[0]) ? names[state] : NULL;
}

const char *snapcell_verdict_name(enum snapcell_verdict verdict)
{
	static const char *const names[] = {"approved", "rejected", "value", "expired", "closed"};
	return (unsigned)verdict < sizeof(names) / sizeof(names[0]) ? names[verdict] : NULL;
}

const char *snapcell_isolation_name(enum snapcell_isolation level)
{
	static const char *const names[] = {"none", "rlimits", "namespaces", "cgroups"};
	return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : NULL;
}

const char *snapcell_version(void)
{
	return SNAPCELL_VERSION;
}
