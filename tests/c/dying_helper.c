/* Stand-ins for a helper that cannot start, for the tests that the host reports what it said
 * on its stderr: one executable per way of failing, chosen at build time (a helper gets no
 * arguments and no environment). A script would not do: the helper is exec'd by a descriptor
 * that is close-on-exec, which the kernel refuses for a "#!" file. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rpc/control.h"

static __attribute__((unused)) void say(const char *s)
{
	(void)!write(2, s, strlen(s));
}

int main(void)
{
#if defined(SC_DYING_LOADER) /* what ld.so says for a missing library */
	say("snapcell-cell: error while loading shared libraries: libpython3.11.so.1.0: cannot "
	    "open shared object file: No such file or directory\n");
	return 127;
#elif defined(SC_DYING_CONTROL) /* an escape sequence, a tab, CR, DEL, bytes that are not UTF-8 */
	say("bad \x1b[31mred\x1b[0m\tand\r\x7f \xff\xfe end: caf\xc3\xa9\nsecond line\n\n");
	return 1;
#elif defined(SC_DYING_HUGE)	/* 1 MiB of numbered lines, then the last words */
	char line[32];
	for (int i = 0; i < 65536; i++) {
		snprintf(line, sizeof(line), "noise line %05d\n", i);
		say(line);
	}
	say("the last words\n");
	return 2;
#elif defined(SC_DYING_CRASH)	/* a real fault: pid 1 of a namespace ignores raise() */
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none);
	volatile int *nowhere = NULL;
	*nowhere = 1;
	return 0;
#elif defined(SC_DYING_SILENT)	/* says nothing and waits for the host to give up */
	char byte;
	while (read(SC_CONTROL_FD, &byte, 1) > 0)
		;
	return 0;
#elif defined(SC_DYING_GREETS)	/* greets, then dies as an interpreter would at its start */
	if (sc__hello_send(SC_CONTROL_FD) < 0)
		return 3;
	say("Fatal Python error: init_fs_encoding: failed to get the Python codec of the "
	    "filesystem encoding\n");
	return 1;
#else
#error "build with one of -DSC_DYING_LOADER, _CONTROL, _HUGE, _CRASH, _SILENT, _GREETS"
#endif
}
