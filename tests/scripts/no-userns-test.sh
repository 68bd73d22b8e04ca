#!/bin/sh
# Hosts where snapcell's peers refuse to run, simulated, and what snapcell does there: it runs at
# level rlimits, says why not namespaces and what to change, and its rlimits suite passes.
#   (a) user namespaces without capabilities inside, as Ubuntu 24.04's AppArmor restriction
#       leaves them (tests/c/simhost.c --userns-nocaps: mount, pivot_root and the other
#       namespaces fail with EPERM; this kernel has no AppArmor)
#   (b) a seccomp filter shaped like Docker's default profile (simhost --docker-seccomp)
#   (c) that, as root without CAP_SYS_ADMIN (simhost --no-sys-admin)
#   (d) a user namespace of our own (unshare -U -r) with user.max_user_namespaces=0 inside, so
#       the sandbox's own cannot be made (ENOSPC); root there maps no other uid, so cells run
#       as root's uid. There the C suites are checked as a distro build host sees them: the
#       unit binary passes, the integration binary skips as a whole with the reason unless
#       asked for the rlimits suite, SNAPCELL_REQUIRE_ALL=1 turns that skip into a failure.
# On a host that cannot make even the outer namespace, that part runs directly.
# Usage: no-userns-test.sh BUILD_DIR
set -eu
build=$(cd "${1:?usage: no-userns-test.sh BUILD_DIR}" && pwd)
export SNAPCELL_HELPER="$build/snapcell-cell"
# At level rlimits a root caller's sandbox runs as a uid of its own with no root of its own:
# the interpreter must be one that uid can reach (Debian's, not a pyenv build under /root).
[ -x /usr/bin/python3 ] && PATH="/usr/bin:$PATH"
unset SNAPCELL_REQUIRE_ALL
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

# The level, the advice naming the cause, a run that works and reports its level, and a config
# requiring namespaces refused with the same cause.
check_cli() { # NAME CAUSE [SIMHOST OPTIONS...]
	name=$1 cause=$2
	shift 2
	[ $# -eq 0 ] || set -- "$build/tests/simhost" "$@" --
	"$@" "$build/cli/snapcell" doctor >"$out" 2>&1 || fail "$name: doctor failed"
	grep -q '^level: *rlimits$' "$out" || fail "$name: doctor did not report level rlimits"
	grep -q "^advice: .*$cause.*for level namespaces" "$out" ||
		fail "$name: doctor gave no advice naming '$cause'"
	grep -q "^sandbox: *works at level 'rlimits'" "$out" || fail "$name: no sandbox works"
	echo 'print(6 * 7)' | "$@" "$build/cli/snapcell" run --json - >"$out" 2>&1 ||
		fail "$name: snapcell run failed"
	grep -q '"isolation": "rlimits"' "$out" || fail "$name: the result does not say rlimits"
	rc=0
	echo 'print(1)' | "$@" "$build/cli/snapcell" run --require-isolation namespaces - \
		>"$out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "$name: --require-isolation namespaces ran anyway"
	grep -q "isolation level 'namespaces' required, this host gives 'rlimits': .*$cause" "$out" ||
		fail "$name: --require-isolation namespaces gave no clear reason"
	echo "ok: $name: level rlimits; $(head -c 150 "$out")"
}

rlimits_suite() { # NAME [SIMHOST OPTIONS...]
	name=$1
	shift
	[ $# -eq 0 ] || set -- "$build/tests/simhost" "$@" --
	rc=0
	"$@" env SNAPCELL_TEST_LEVEL=rlimits "$build/tests/snapcell-integration" --jobs=2 \
		--filter 'rlimits/*' >"$out" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "$name: the rlimits suite failed (exit $rc)"
	grep -q 'Failing: 0 | Crashing: 0' "$out" || fail "$name: the rlimits suite reported failures"
	grep -q 'Tested: [1-9]' "$out" || fail "$name: the rlimits suite ran no test"
	echo "ok: $name: rlimits suite: $(grep Synthesis "$out" | sed 's/.*Synthesis: //')"
}

if [ "${SC_NO_USERNS_INNER:-}" != 1 ]; then
	for sim in "userns-nocaps|no capabilities inside a user namespace|--userns-nocaps" \
		"docker-seccomp|refused by a seccomp filter|--docker-seccomp" \
		"root-without-sys-admin|refused by a seccomp filter|--docker-seccomp --no-sys-admin"; do
		name=${sim%%|*} rest=${sim#*|}
		cause=${rest%%|*} opts=${rest#*|}
		# shellcheck disable=SC2086 # the options are words
		check_cli "$name" "$cause" $opts
		# shellcheck disable=SC2086
		rlimits_suite "$name" $opts
	done
	# Neither level: a Docker-like filter on a kernel without Landlock.
	"$build/tests/simhost" --docker-seccomp --no-landlock -- "$build/cli/snapcell" doctor \
		>"$out" 2>&1 && fail "no-landlock: doctor succeeded"
	grep -q '^level: *none$' "$out" || fail "no-landlock: doctor did not report level none"
	rc=0
	echo 'print(1)' | "$build/tests/simhost" --docker-seccomp --no-landlock -- \
		"$build/cli/snapcell" run - >"$out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "no-landlock: a sandbox ran without any isolation level"
	grep -q "no isolation level on this host: 'rlimits' needs Landlock.*'namespaces': user namespaces: refused by a seccomp filter" \
		"$out" || fail "no-landlock: no clear reason"
	echo "ok: no-landlock: level none; $(head -c 150 "$out")"
	export SC_NO_USERNS_INNER=1
	if unshare -U -r true 2>/dev/null; then
		exec unshare -U -r sh -c 'echo 0 >/proc/sys/user/max_user_namespaces && exec "$0" "$1"' \
			"$0" "$build"
	fi
	echo "no-userns-test: cannot make a user namespace here; checking this host as it is"
fi

if unshare -U true 2>/dev/null; then
	fail "user namespaces still work: the simulation did not take"
fi

check_cli max-user-namespaces-0 'user.max_user_namespaces=0'
rlimits_suite max-user-namespaces-0

"$build/tests/snapcell-unit" --jobs=2 >"$out" 2>&1 || fail "the unit binary failed without user namespaces"
grep -q 'Failing: 0 | Crashing: 0' "$out" || fail "the unit binary reported failures"
echo "ok: unit binary: $(grep Synthesis "$out" | sed 's/.*Synthesis: //')"

rc=0
"$build/tests/snapcell-integration" >"$out" 2>&1 || rc=$?
[ "$rc" -eq 77 ] || fail "the integration binary exited $rc, not 77 (skip)"
grep -q '^SKIP: .*level rlimits' "$out" || fail "the integration binary gave no reason"
echo "ok: integration binary skipped: $(head -n 1 "$out")"

rc=0
SNAPCELL_REQUIRE_ALL=1 "$build/tests/snapcell-integration" --filter 'run/captures*' >"$out" 2>&1 ||
	rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || fail "SNAPCELL_REQUIRE_ALL=1 did not turn the skip into a failure"
grep -q 'required feature missing' "$out" || fail "SNAPCELL_REQUIRE_ALL=1 failure gave no reason"
echo "ok: SNAPCELL_REQUIRE_ALL=1 fails instead (exit $rc)"

"$build/tests/race-session-free" "$build/snapcell-cell" 3 >"$out" 2>&1 ||
	fail "race-session-free failed at level rlimits"
echo "ok: race-session-free at level rlimits"
echo "no-userns-test: all passed"
