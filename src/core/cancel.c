/* Cancellation tokens and the run options that carry them. A token is an eventfd: firing it
 * is one write (async-signal-safe), and a run polls it beside the cell's descriptors. The
 * counter is never read back, so a fired token stays fired. Not the place for the kill
 * itself: run.c ends a cancelled run the way it ends one past its wall clock. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core.h"
#include "util/util.h"

/* The first version's struct ends after cancel; larger structs come from newer headers. */
#define OPTIONS_V1_SIZE	 (offsetof(struct snapcell_run_options, cancel) + sizeof(void *))
#define OPTIONS_MAX_SIZE 4096

struct snapcell_cancel {
	int fd;
};

int snapcell_cancel_new(struct snapcell_cancel **out, struct snapcell_error *err)
{
	if (!out)
		return sc__err(err, SNAPCELL_E_INVAL, "cancel_new: NULL argument");
	struct snapcell_cancel *c = malloc(sizeof(*c));
	if (!c)
		return sc__err(err, -ENOMEM, "cancel_new");
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->fd < 0) {
		int rc = sc__err(err, -errno, "cancel_new: eventfd");
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void snapcell_cancel_fire(struct snapcell_cancel *c)
{
	if (!c)
		return;
	uint64_t one = 1;
	int saved = errno; /* callable from a signal handler: leave errno as it was */
	/* EAGAIN only when the counter is already near its maximum: fired either way. */
	(void)!write(c->fd, &one, sizeof(one));
	errno = saved;
}

void snapcell_cancel_free(struct snapcell_cancel *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c);
}

bool sc__cancel_fired(int fd)
{
	struct pollfd pf = {fd, POLLIN, 0};
	return fd >= 0 && poll(&pf, 1, 0) == 1;
}

/* Whether opts, of the size the caller compiled, has the field that ends at end. */
#define HAS_FIELD(opts, field)                                                                     \
	((opts)->size >= offsetof(struct snapcell_run_options, field) + sizeof((opts)->field))

int sc__run_options(const struct snapcell_run_options *opts, int *cancel_fd,
		    const struct snapcell_config **tools, struct snapcell_error *err)
{
	*cancel_fd = -1;
	*tools = NULL;
	if (!opts)
		return 0;
	if (opts->size < OPTIONS_V1_SIZE || opts->size > OPTIONS_MAX_SIZE)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "run options: size %zu; set it to sizeof(struct "
			       "snapcell_run_options)",
			       opts->size);
	/* Fields from a newer header that this library does not know must be unset: a caller
	 * asking for something we cannot do gets an error, not a silent default. */
	const unsigned char *bytes = (const unsigned char *)opts;
	for (size_t i = sizeof(*opts); i < opts->size; i++)
		if (bytes[i])
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run options: set fields that snapcell %s does not know",
				       SNAPCELL_VERSION);
	if (opts->cancel)
		*cancel_fd = opts->cancel->fd;
	if (HAS_FIELD(opts, tools))
		*tools = opts->tools;
	return 0;
}

size_t sc__run_options_files(const struct snapcell_run_options *opts,
			     const struct snapcell_run_file **files)
{
	*files = NULL;
	if (!opts || !HAS_FIELD(opts, n_files) || !opts->n_files)
		return 0;
	*files = opts->files;
	return opts->n_files;
}
