/* Dropping privilege. The template locks what every cell inherits (securebits, an empty
 * bounding and ambient set, no_new_privs) once; it keeps its effective capabilities only to
 * mount and unshare for cells. Each cell then clears those, and holds no capability in any
 * namespace and no way to gain one. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util/util.h"

/* Whether this process holds any capability at all (root's euid gains them at exec). */
static bool holds_capabilities(void)
{
	if (geteuid() == 0)
		return true;
	cap_t caps = cap_get_proc(), none = cap_init();
	bool held = !caps || !none || cap_compare(caps, none) != 0;
	cap_free(caps);
	cap_free(none);
	return held;
}

int sc__caps_lock(struct snapcell_error *err)
{
	/* A helper that is not root and holds nothing (the rlimits level as a uid of its own or
	 * the caller's) has nothing to lock, and no CAP_SETPCAP to lock it with. */
	if (!holds_capabilities()) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			return sc__err(err, -errno, "set no_new_privs");
		return 0;
	}
	/* Lock root's special treatment off while CAP_SETPCAP is still held. */
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return sc__err(err, -errno, "set securebits");
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return sc__err(err, -errno, "drop bounding capability %d", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return sc__err(err, -errno, "clear ambient capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return sc__err(err, -errno, "set no_new_privs");
	return 0;
}

int sc__caps_clear(struct snapcell_error *err)
{
	cap_t none = cap_init();
	if (!none)
		return sc__err(err, -ENOMEM, "cap_init");
	int rc = cap_set_proc(none);
	int saved = errno;
	cap_free(none);
	return rc < 0 ? sc__err(err, -saved, "drop capabilities") : 0;
}
