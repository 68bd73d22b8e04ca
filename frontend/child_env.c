/* The environment of the children the CLI and the MCP server start on the host (command tools,
 * stdio downstream MCP servers): an explicit one, not ours. Ours holds secrets a child has no
 * business with: SNAPCELL_MCP_TOKEN, and the variables an allow-list header reads
 * (${env:NAME}), which the library expands into credentials for the egress gate. A child gets
 * PATH, HOME and the locale, what its config names, and never one of those. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

extern char **environ;

#define TOKEN_VARIABLE "SNAPCELL_MCP_TOKEN"

/* The variables headers read: names noted while the options and the config are read, before
 * any child starts (they are only read afterwards, so no lock). */
static char **secrets;
static size_t n_secrets;

static bool is_secret(const char *name, size_t len)
{
	if (len == strlen(TOKEN_VARIABLE) && !strncmp(name, TOKEN_VARIABLE, len))
		return true;
	for (size_t i = 0; i < n_secrets; i++)
		if (strlen(secrets[i]) == len && !strncmp(secrets[i], name, len))
			return true;
	return false;
}

int fe_env_note_secrets(const char *text)
{
	for (const char *p = strstr(text, "${env:"); p; p = strstr(p, "${env:")) {
		p += 6;
		size_t len = strcspn(p, "}");
		if (!p[len] || is_secret(p, len))
			continue;
		if (SC_ARRAY_ADD(secrets, n_secrets, SC_ARRAY_NO_CAP) < 0 ||
		    !(secrets[n_secrets] = strndup(p, len)))
			return -1;
		n_secrets++;
	}
	return 0;
}

const char *fe_env_withheld(const char *name)
{
	size_t len = strlen(name);
	if (len == strlen(TOKEN_VARIABLE) && !strcmp(name, TOKEN_VARIABLE))
		return "it holds the MCP server's token";
	return is_secret(name, len) ? "an allow-list header reads it (${env:...})" : NULL;
}

/* Whether entry ("NAME=VALUE") is one a child gets without asking: PATH, HOME, the locale. */
static bool is_basic(const char *entry, size_t name_len)
{
	static const char *const names[] = {"PATH", "HOME", "LANG", "LANGUAGE"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == name_len && !strncmp(entry, names[i], name_len))
			return true;
	return name_len > 3 && !strncmp(entry, "LC_", 3);
}

static bool named_in(char *const *list, const char *entry, size_t name_len, char sep)
{
	for (size_t i = 0; list && list[i]; i++)
		if (!strncmp(list[i], entry, name_len) && list[i][name_len] == sep)
			return true;
	return false;
}

char **fe_child_env(char *const *inherit, char *const *set)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	while (set && set[k])
		k++;
	char **out = calloc(n + k + 1, sizeof(*out)), **o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t name_len = strcspn(environ[i], "=");
		bool wanted = is_basic(environ[i], name_len) ||
			      named_in(inherit, environ[i], name_len, '\0');
		if (!wanted || is_secret(environ[i], name_len) ||
		    named_in(set, environ[i], name_len, '='))
			continue;
		if (!(*o++ = strdup(environ[i])))
			goto oom;
	}
	for (size_t j = 0; j < k; j++)
		if (!(*o++ = strdup(set[j])))
			goto oom;
	return out;
oom:
	fe_child_env_free(out);
	return NULL;
}

void fe_child_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}
