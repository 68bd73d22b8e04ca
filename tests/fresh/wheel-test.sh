#!/usr/bin/env bash
# The wheel as a new user installs it, on three fresh Debian minbase roots entered by
# tests/fresh/enter: Debian 13 with only python3 and python3-venv; Debian 12 with only python3
# and python3-venv; Debian 12 with no python3 package and this machine's pyenv CPython 3.12
# copied to the same path under /root (mode 0700). In each: a venv of that interpreter, the wheel
# installed with `pip install --no-index` from wheels fetched beforehand on the host, then the
# README's Python example must print "ok 42", and a Sandbox(venv=sys.prefix) cell must print the
# venv's own X.Y and import a package only that venv has (markupsafe, with its compiled
# _speedups). The wheel: $SNAPCELL_WHEEL, else the one dist/snapcell-*.whl, else what
# scripts/build-wheel leaves there; without any, it skips (exit 77) and says why.
# Prints one line per case and "wheel matrix: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/fresh/lib.sh
. tests/fresh/lib.sh
logs=${SNAPCELL_FRESH_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
start=$SECONDS
# pip for fetching the wheels: the test venv's (scripts/install-test-deps).
pip_py=${SNAPCELL_VENV:-$(pwd)/.venv}/bin/python
[ -x "$pip_py" ] || { fresh_say "wheel: no test venv (scripts/install-test-deps makes it)"; exit 1; }

find_wheel() {
	local found
	if [ -n "${SNAPCELL_WHEEL:-}" ]; then
		echo "$SNAPCELL_WHEEL"
		return
	fi
	found=$(ls dist/snapcell-*.whl 2>/dev/null)
	if [ -z "$found" ] && [ -x scripts/build-wheel ]; then
		local t0=$SECONDS
		scripts/build-wheel >"$logs/build-wheel.log" 2>&1 ||
			{ tail -n 30 "$logs/build-wheel.log" >&2; fresh_say "wheel: scripts/build-wheel failed" >&2; return 1; }
		fresh_say "wheel: scripts/build-wheel ($((SECONDS - t0)) s)" >&2
		found=$(ls dist/snapcell-*.whl 2>/dev/null)
	fi
	[ "$(echo "$found" | grep -c .)" -eq 1 ] ||
		{ fresh_say "wheel: want exactly one dist/snapcell-*.whl, found: ${found:-none}" >&2; return 1; }
	echo "$found"
}

if [ -z "${SNAPCELL_WHEEL:-}" ] && ! ls dist/snapcell-*.whl >/dev/null 2>&1 && [ ! -x scripts/build-wheel ]; then
	fresh_say "wheel matrix: skipped: no scripts/build-wheel to make the wheel, no dist/snapcell-*.whl, no \$SNAPCELL_WHEEL"
	exit 77
fi
wheel=$(find_wheel) || { echo "wheel matrix: 0 passed, 1 failed"; exit 1; }
wheel=$(realpath "$wheel")
fresh_say "wheel: $(basename "$wheel")"

# The README's Python example, as written, and the venv check.
example=$(awk '/^```python$/ { code = ""; inside = 1; next }
	/^```$/ { if (inside && code ~ /# ok 42/) { printf "%s", code; exit } inside = 0; next }
	inside { code = code $0 "\n" }' README.md)
[ -n "$example" ] || { fresh_say "wheel: no Python example ending in '# ok 42' in README.md"; exit 1; }
venv_check='
import sys, snapcell
with snapcell.Sandbox(venv=sys.prefix, timeout=30) as sb:
    r = sb.run("import sys, markupsafe, markupsafe._speedups\nprint(\"%d.%d\" % sys.version_info[:2], markupsafe.__name__)")
print(r.status, r.stdout.strip())
if r.status != "ok":
    print(r.stderr[-1000:], file=sys.stderr)
'

# Runs as root inside a root: PY makes the venv, the wheels are in /root/wheels.
inside='set -eu
py=$1
want=$("$py" -c "import sys; print(\"%d.%d\" % sys.version_info[:2])")
if "$py" -c "import markupsafe" 2>/dev/null; then echo "markupsafe is in the base interpreter"; exit 1; fi
"$py" -m venv /root/venv
/root/venv/bin/pip install -q --disable-pip-version-check --no-index --find-links /root/wheels \
	/root/wheels/$(basename "$2") markupsafe
cd /root
out=$(/root/venv/bin/python example.py)
echo "example: $out"
[ "$out" = "ok 42" ]
out=$(/root/venv/bin/python venv_check.py)
echo "venv: $out"
[ "$out" = "ok $want markupsafe" ]
if [ -x /root/venv/bin/snapcell ]; then
	/root/venv/bin/snapcell doctor --json >/root/doctor.json
fi'

passed=0
failed=0
run_case() { # label suite python base-package...
	local label=$1 suite=$2 py=$3
	shift 3
	local t0=$SECONDS tar dir ver
	tar=$(fresh_pristine "$suite" "$@") || { failed=$((failed + 1)); return; }
	dir=$(fresh_copy "$tar") || { failed=$((failed + 1)); return; }
	if [ "$py" != /usr/bin/python3 ]; then
		# The host's interpreter at the same path: a prefix under a 0700 home.
		local prefix
		prefix=$(dirname "$(dirname "$py")")
		mkdir -p "$dir$(dirname "$prefix")"
		cp -a "$prefix" "$dir$prefix"
	fi
	chmod 700 "$dir/root"
	# The interpreter's X.Y decides which dependency wheels pip fetches.
	ver=$(fresh_enter "$dir" "$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
	mkdir -p "$dir/root/wheels"
	cp "$wheel" "$dir/root/wheels/"
	if ! "$pip_py" -m pip download -q --disable-pip-version-check --only-binary=:all: \
		--python-version "${ver:-0}" -d "$dir/root/wheels" "$wheel" markupsafe \
		>"$logs/wheel-$label-download.log" 2>&1; then
		tail -n 20 "$logs/wheel-$label-download.log"
		fresh_say "wheel on $label: the dependency wheels for Python ${ver:-?} did not download"
		failed=$((failed + 1))
		fresh_remove "$dir"
		return
	fi
	printf '%s' "$example" >"$dir/root/example.py"
	printf '%s' "$venv_check" >"$dir/root/venv_check.py"
	if fresh_enter "$dir" sh -c "$inside" sh "$py" "$wheel" >"$logs/wheel-$label.log" 2>&1 &&
		level_ok "$dir/root/doctor.json"; then
		passed=$((passed + 1))
		fresh_say "wheel on $label (Python $ver): passed ($((SECONDS - t0)) s)"
	else
		failed=$((failed + 1))
		tail -n 20 "$logs/wheel-$label.log"
		fresh_say "wheel on $label (Python ${ver:-?}): FAILED ($((SECONDS - t0)) s)"
	fi
	fresh_remove "$dir"
}

# When the wheel has the snapcell console script, its doctor must report namespaces or cgroups.
level_ok() { # doctor.json
	[ -f "$1" ] || return 0
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(d["level"] not in ("namespaces", "cgroups"))' "$1" && return 0
	fresh_say "snapcell doctor in the root: $(head -c 300 "$1")"
	return 1
}

pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
py312=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3 2>/dev/null | sort -V | tail -n 1)
run_case debian13-python3 trixie /usr/bin/python3 python3 python3-venv
run_case debian12-python3 bookworm /usr/bin/python3 python3 python3-venv
if [ -n "$py312" ] && [ "${py312#/root/}" != "$py312" ]; then
	run_case debian12-pyenv3.12 bookworm "$py312"
else
	fresh_say "wheel on debian12-pyenv3.12: no pyenv CPython 3.12 under /root (${py312:-none})"
	failed=$((failed + 1))
fi
fresh_say "wheel matrix: $((SECONDS - start)) s"
echo "wheel matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
