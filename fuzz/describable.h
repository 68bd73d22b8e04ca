/* For the front-end targets: a config a front end accepted must be describable to a model,
 * as --describe, --instructions and the MCP server's tools/list would describe it. */
#ifndef SC_FUZZ_DESCRIBABLE_H
#define SC_FUZZ_DESCRIBABLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "snapcell.h"

/* Aborts unless text is non-empty UTF-8 (jansson refuses anything else in a string). */
static inline void fuzz_check_text(const char *what, char *text)
{
	json_t *s = text ? json_string(text) : NULL;
	if (!s || !*text) {
		fprintf(stderr, "fuzz: %s: empty or not UTF-8\n", what);
		abort();
	}
	json_decref(s);
	free(text);
}

static inline void fuzz_check_describable(const struct snapcell_config *cfg)
{
	static const enum snapcell_describe_format formats[] = {SNAPCELL_DESCRIBE_COMPACT,
								SNAPCELL_DESCRIBE_JSON};
	struct snapcell_error err = {0};
	char *text = NULL;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		text = NULL;
		if (snapcell_config_describe(cfg, formats[i], &text, &err) < 0) {
			fprintf(stderr, "fuzz: accepted, but describe failed: %s\n", err.message);
			abort();
		}
		fuzz_check_text("description", text);
	}
	text = NULL;
	if (snapcell_config_instructions(cfg, &text, &err) < 0) {
		fprintf(stderr, "fuzz: accepted, but instructions failed: %s\n", err.message);
		abort();
	}
	fuzz_check_text("instructions", text);
}

#endif
