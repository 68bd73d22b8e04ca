/* util/fdset.c and the descriptor cleanup attribute: every member is closed together, members
 * handed on are not, and errno survives the closing. No sandbox is started. */
#define _GNU_SOURCE
#include <fcntl.h>

#include "helpers.h"
#include "util/cleanup.h"
#include "util/fdset.h"
#include "util/util.h"

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int open_null(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

Test(fdset, close_all_closes_every_member_past_the_inline_ones)
{
	struct sc_fdset set = SC_FDSET_INIT;
	int fds[3 * SC_FDSET_INLINE];
	for (size_t i = 0; i < SC_ARRAY_LEN(fds); i++) {
		fds[i] = sc__fdset_add(&set, open_null());
		cr_assert_geq(fds[i], 0, "member %zu: %s", i, strerror(-fds[i]));
		cr_assert(sc__fdset_has(&set, fds[i]));
	}
	sc__fdset_close_all(&set);
	for (size_t i = 0; i < SC_ARRAY_LEN(fds); i++)
		cr_expect_not(is_open(fds[i]), "member %zu (fd %d) is still open", i, fds[i]);
	cr_expect_eq(set.n, 0);
	cr_expect_null(set.heap);
	int again = sc__fdset_add(&set, open_null());
	cr_assert_geq(again, 0, "a closed set is reusable");
	sc__fdset_close_all(&set);
	cr_expect_not(is_open(again));
}

Test(fdset, a_failed_open_passes_its_errno_through)
{
	struct sc_fdset set = SC_FDSET_INIT;
	int fd = sc__fdset_add(&set, open("/nonexistent/x", O_RDONLY | O_CLOEXEC));
	cr_expect_eq(fd, -ENOENT);
	cr_expect_eq(set.n, 0);
	sc__fdset_close_all(&set);
}

Test(fdset, take_hands_a_member_on_and_close_ends_one)
{
	struct sc_fdset set = SC_FDSET_INIT;
	int p[2];
	cr_assert_eq(sc__fdset_pipe(&set, p, O_CLOEXEC), 0);
	int other = sc__fdset_add(&set, open_null());
	cr_assert_geq(other, 0);
	cr_expect_eq(sc__fdset_take(&set, p[0]), p[0]);
	cr_expect_eq(sc__fdset_take(&set, p[0]), -EBADF, "taken once");
	sc__fdset_close(&set, p[1]);
	cr_expect_not(is_open(p[1]));
	cr_expect_eq(set.n, 1);
	errno = EXDEV;
	sc__fdset_close_all(&set);
	cr_expect_eq(errno, EXDEV, "closing keeps errno for the error path it runs on");
	cr_expect(is_open(p[0]), "a taken member is its new owner's");
	cr_expect_not(is_open(other));
	close(p[0]);
}

Test(fdset, release_hands_every_member_on)
{
	struct sc_fdset set = SC_FDSET_INIT;
	int fds[SC_FDSET_INLINE + 2];
	for (size_t i = 0; i < SC_ARRAY_LEN(fds); i++)
		cr_assert_geq(fds[i] = sc__fdset_add(&set, open_null()), 0);
	sc__fdset_release(&set);
	cr_expect_eq(set.n, 0);
	sc__fdset_close_all(&set);
	for (size_t i = 0; i < SC_ARRAY_LEN(fds); i++) {
		cr_expect(is_open(fds[i]), "fd %d", fds[i]);
		close(fds[i]);
	}
}

static int fail_after_opening(int *seen)
{
	struct sc_fdset set SC_AUTO_FDSET = SC_FDSET_INIT;
	int p[2];
	if (sc__fdset_pipe(&set, p, O_CLOEXEC) < 0)
		return -errno;
	seen[0] = p[0], seen[1] = p[1];
	seen[2] = sc__fdset_add(&set, open_null());
	return -EIO; /* a later step failed */
}

Test(fdset, auto_closes_on_an_error_path)
{
	int seen[3] = {-1, -1, -1};
	cr_expect_eq(fail_after_opening(seen), -EIO);
	for (int i = 0; i < 3; i++) {
		cr_assert_geq(seen[i], 0);
		cr_expect_not(is_open(seen[i]), "fd %d", seen[i]);
	}
}

Test(cleanup, auto_close_and_steal)
{
	int dropped_fd, kept_fd;
	{
		int dropped SC_AUTO_CLOSE = open_null();
		int handed SC_AUTO_CLOSE = open_null();
		int none SC_AUTO_CLOSE = -1;
		(void)none;
		dropped_fd = dropped;
		kept_fd = SC_STEAL_FD(handed);
		cr_expect_eq(handed, -1);
	}
	cr_expect_not(is_open(dropped_fd));
	cr_expect(is_open(kept_fd));
	close(kept_fd);
}
