#!/bin/sh
# Simulates a distro build host without user namespaces and checks what the C suites do there:
# the unit binary passes, the integration binary (and race-session-free) skip as a whole with
# the reason (exit 77), and SNAPCELL_REQUIRE_ALL=1 turns that skip into a failure.
# The simulation: a user namespace of our own (unshare -U -r) with user.max_user_namespaces
# set to 0 inside, so the sandbox's own user namespace cannot be made (ENOSPC). On a host that
# cannot even make that outer namespace, the checks run directly: it already is such a host.
# Usage: no-userns-test.sh BUILD_DIR
set -eu
build=$(cd "${1:?usage: no-userns-test.sh BUILD_DIR}" && pwd)
if [ "${SC_NO_USERNS_INNER:-}" != 1 ]; then
	export SC_NO_USERNS_INNER=1
	if unshare -U -r true 2>/dev/null; then
		exec unshare -U -r sh -c 'echo 0 >/proc/sys/user/max_user_namespaces && exec "$0" "$1"' \
			"$0" "$build"
	fi
	echo "no-userns-test: cannot make a user namespace here; checking this host as it is"
fi
unset SNAPCELL_REQUIRE_ALL
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

if unshare -U true 2>/dev/null; then
	fail "user namespaces still work: the simulation did not take"
fi

"$build/tests/snapcell-unit" --jobs=2 >"$out" 2>&1 || fail "the unit binary failed without user namespaces"
grep -q 'Failing: 0 | Crashing: 0' "$out" || fail "the unit binary reported failures"
echo "ok: unit binary: $(grep Synthesis "$out" | sed 's/.*Synthesis: //')"

rc=0
"$build/tests/snapcell-integration" >"$out" 2>&1 || rc=$?
[ "$rc" -eq 77 ] || fail "the integration binary exited $rc, not 77 (skip)"
grep -q '^SKIP: .*user namespace' "$out" || fail "the integration binary gave no reason"
echo "ok: integration binary skipped: $(head -n 1 "$out")"

rc=0
"$build/tests/race-session-free" "$build/snapcell-cell" 1 >"$out" 2>&1 || rc=$?
[ "$rc" -eq 77 ] || fail "race-session-free exited $rc, not 77 (skip)"
echo "ok: race-session-free skipped: $(head -n 1 "$out")"

rc=0
SNAPCELL_REQUIRE_ALL=1 "$build/tests/snapcell-integration" --filter 'run/captures*' >"$out" 2>&1 ||
	rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || fail "SNAPCELL_REQUIRE_ALL=1 did not turn the skip into a failure"
grep -q 'required feature missing' "$out" || fail "SNAPCELL_REQUIRE_ALL=1 failure gave no reason"
echo "ok: SNAPCELL_REQUIRE_ALL=1 fails instead (exit $rc)"
echo "no-userns-test: all passed"
