#!/usr/bin/env bash
# The README's first command (install-deps, build, the main job), run as written by root in a
# fresh Debian minbase root of SUITE (bookworm, trixie) with nothing else installed: the
# repository's tracked files copied to /root/snapcell, the root entered by tests/fresh/enter.
# Passes when the command exits 0, leaves the main job's report (out/summary.csv), installed
# none of the test tools, and `snapcell doctor` there reports level namespaces or cgroups.
# Prints one line per check and the time taken; the command's output is kept in
# $SNAPCELL_FRESH_LOGS (default a temporary directory) and its end shown when it fails.
# Usage: tests/fresh/readme-test.sh SUITE
set -u
cd "$(dirname "$0")/../.."
repo=$(pwd)
# shellcheck source=tests/fresh/lib.sh
. tests/fresh/lib.sh
suite=${1:?usage: $0 SUITE}
logs=${SNAPCELL_FRESH_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
log="$logs/readme-$suite.log"
start=$SECONDS

# The README's first command: the indented line that starts with scripts/install-deps and runs
# the main job.
cmd=$(sed -n 's/^    \(scripts\/install-deps && scripts\/build && .*\)$/\1/p' README.md | head -n 1)
[ -n "$cmd" ] || { fresh_say "$suite: no 'scripts/install-deps && scripts/build' command in README.md"; exit 1; }
git rev-parse --git-dir >/dev/null 2>&1 || { fresh_say "$suite: $repo is not a git checkout"; exit 1; }

tar=$(fresh_pristine "$suite") || exit 1
dir=$(fresh_copy "$tar") || exit 1
trap 'fresh_remove "$dir"' EXIT
mkdir -m 700 -p "$dir/root/snapcell"
# What a clone has: the tracked files, not the build trees or the venv.
git ls-files -z | tar --null -T - -cf - | tar -C "$dir/root/snapcell" -xf - || exit 1
fresh_say "$suite: root ready ($((SECONDS - start)) s)"

t0=$SECONDS
fresh_enter "$dir" bash -c "cd /root/snapcell && $cmd" >"$log" 2>&1
rc=$?
fresh_say "$suite: the README's first command exited $rc ($((SECONDS - t0)) s)"
status=0
if [ "$rc" -ne 0 ]; then
	tail -n 40 "$log"
	status=1
fi
summary="$dir/root/snapcell/out/summary.csv"
# csv.writer ends its lines with CRLF.
if [ -s "$summary" ] && head -n 1 "$summary" | tr -d '\r' | grep -qx 'region,usd' &&
	[ "$(wc -l <"$summary")" -ge 2 ]; then
	fresh_say "$suite: the main job left out/summary.csv ($(($(wc -l <"$summary") - 1)) regions)"
else
	fresh_say "$suite: no out/summary.csv with a region,usd table"
	status=1
fi
# Only what the build and the main job need: none of the test tools, nothing pip put into the
# system Python.
extra=$(dpkg-query --admindir="$dir/var/lib/dpkg" -W -f '${db:Status-Abbrev} ${Package}\n' \
	clang clang-format libcriterion-dev haproxy bubblewrap npm nodejs mmdebstrap \
	python3-pandas python3-matplotlib python3-pip 2>/dev/null | awk '/^ii/ { printf " %s", $2 }')
pip_put=$(ls -d "$dir"/usr/local/lib/python3*/dist-packages/* 2>/dev/null | head -n 3)
if [ -n "$extra$pip_put" ]; then
	fresh_say "$suite: install-deps installed more than the build needs:$extra $pip_put"
	status=1
else
	fresh_say "$suite: no test tools installed, nothing pip-installed into the system Python"
fi
# The level the README's build gets there: a root entered like a machine of its own allows user
# namespaces, so anything below namespaces is a regression (or a chroot).
fresh_enter "$dir" sh -c 'cd /root/snapcell && SNAPCELL_HELPER=$PWD/build/snapcell-cell ./build/cli/snapcell doctor --json' \
	>"$logs/doctor-$suite.json" 2>"$logs/doctor-$suite.err"
level=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["level"] if d["level"] == d["sandbox"]["level"] else "mismatch")' "$logs/doctor-$suite.json" 2>/dev/null)
case $level in
namespaces | cgroups) fresh_say "$suite: snapcell doctor: level $level" ;;
*)
	fresh_say "$suite: snapcell doctor: level '${level:-?}', wanted namespaces or cgroups"
	cat "$logs/doctor-$suite.err"
	status=1
	;;
esac
fresh_say "$suite: $([ "$status" -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - start)) s)"
exit "$status"
