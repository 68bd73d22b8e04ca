/* `snapcell run --approve NAME`: asks the person at the controlling terminal about each call of
 * NAME the code makes, showing the tool and its checked arguments. The terminal is opened
 * directly (/dev/tty), so code given on stdin still works; nothing here reads the answer from
 * anywhere else, and no terminal means no approval. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* What the question shows of the arguments: the code chose them, so it must not be able to
 * move the cursor, rewrite the question or hide part of it. */
#define SHOWN_MAX 4096

/* The arguments as JSON in printable ASCII: jansson escapes non-ASCII and control characters
 * (so no escape sequence, bidi override or C1 control reaches the terminal), DEL is escaped
 * here, and a long text is cut with its length said. malloc'd, or NULL. */
static char *printable(const char *arguments)
{
	json_t *v = json_loads(arguments, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL); /* as the host */
	char *text = v ? json_dumps(v, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_COMPACT |
					       JSON_ENCODE_ANY)
		       : NULL;
	json_decref(v);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *out = malloc(SHOWN_MAX + 64);
	size_t o = 0;
	for (size_t i = 0; out && i < n && o < SHOWN_MAX; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, 8, "\\u%04x", c);
		else
			out[o++] = (char)c;
	}
	if (out)
		snprintf(out + o, 64, o < n ? "... (%zu bytes in all)" : "", n);
	free(text);
	return out;
}

/* One line from fd (without its newline), at most len - 1 bytes kept; false at EOF or an
 * error before any byte (an empty line is an answer). */
static bool read_line(int fd, char *line, size_t len)
{
	size_t n = 0;
	bool any = false;
	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		any = true;
		if (c == '\n')
			break;
		if (n + 1 < len)
			line[n++] = c;
	}
	line[n] = 0;
	return any;
}

enum snapcell_verdict cli_ask_terminal(const struct snapcell_pending_call *p, char *reason,
				       size_t reason_len)
{
	int fd SC_AUTO_CLOSE = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(reason, reason_len,
			 "approval was not possible: no terminal to ask on (/dev/tty: %s)",
			 strerror(errno));
		fprintf(stderr, "snapcell: a call of %s was refused: %s\n", p->name, reason);
		return SNAPCELL_VERDICT_REJECTED;
	}
	/* Nobody is asked about arguments they cannot see. */
	char *shown SC_AUTO_FREE = printable(p->arguments);
	if (!shown) {
		snprintf(reason, reason_len,
			 "approval was not possible: the arguments could not be shown");
		fprintf(stderr, "snapcell: a call of %s was refused: %s\n", p->name, reason);
		return SNAPCELL_VERDICT_REJECTED;
	}
	dprintf(fd, "snapcell: the code calls tool %s with %s\nsnapcell: allow this call? [y/N] ",
		p->name, shown);
	char line[64];
	bool answered = read_line(fd, line, sizeof(line));
	if (answered && (!strcmp(line, "y") || !strcmp(line, "Y")))
		return SNAPCELL_VERDICT_APPROVED;
	snprintf(reason, reason_len, "%s",
		 answered ? "declined at the terminal" : "the terminal gave no answer");
	return SNAPCELL_VERDICT_REJECTED;
}
