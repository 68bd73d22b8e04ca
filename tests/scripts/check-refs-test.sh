#!/bin/sh
# Tests scripts/check-refs itself: it passes on the tree as it is, and fails, naming the file
# and the reference, when a comment or a doc names a path that is not there, a line past a
# file's end or outside the function named beside it, a name a file does not have, a section
# a document does not have, something outside the repository, the tracker, or a commit (or a
# file at a commit) git does not know. Each case plants one reference in a copy of the tree
# (the files git knows, and new ones), so the tree is never touched; references that resolve,
# and bad text outside comments, are planted too and must pass.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
GIT_DIR=$(git -C "$root" rev-parse --absolute-git-dir)
export GIT_DIR
head=$(git -C "$root" rev-parse --short=12 HEAD)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/pristine"
(cd "$root" && git ls-files -z -c -o --exclude-standard) |
	(cd "$root" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$tmp/pristine"
tree=$tmp/tree
fresh() {
	rm -rf "$tree"
	cp -a "$tmp/pristine" "$tree"
}
# The line of a C function's definition (its name's line) in a file of the copy.
def_line() { # file name
	grep -n "^[a-z].*[ *]$2(" "$tree/$1" | head -n 1 | cut -d: -f1
}
# Appends a C comment to a file of the copy.
c_comment() { # file text
	printf '/* %s */\n' "$2" >>"$tree/$1"
}
expect_fail() { # what text-that-must-be-in-the-report
	if "$tree/scripts/check-refs" >"$tmp/out" 2>&1; then
		echo "FAIL: check-refs accepted $1"
		exit 1
	fi
	grep -qF -- "$2" "$tmp/out" || { echo "FAIL: $1 not reported as \"$2\":"; cat "$tmp/out"; exit 1; }
	echo "ok: $1 is refused"
}
expect_pass() { # what
	"$tree/scripts/check-refs" >"$tmp/out" 2>&1 || {
		echo "FAIL: check-refs refused $1:"
		cat "$tmp/out"
		exit 1
	}
	echo "ok: $1 passes"
}

fresh
expect_pass "the tree as it is"

# Paths.
fresh
c_comment src/util/util.c "The rest is in src/util/gone.c."
expect_fail "a C comment naming a missing file" \
	"src/util/util.c:$(wc -l <"$tree/src/util/util.c"): src/util/gone.c does not exist"
fresh
printf '\nSee tests/c/unit/test_gone.c.\n' >>"$tree/docs/architecture.md"
expect_fail "a doc naming a missing file" "tests/c/unit/test_gone.c does not exist"
fresh
printf '# Built from src/core/gone/ and cli/*.gone.\n' >>"$tree/scripts/build"
expect_fail "a shell comment naming a missing folder" "scripts/build:"
grep -qF "cli/*.gone does not exist" "$tmp/out" || { echo "FAIL: a glob matching nothing not named"; exit 1; }
fresh
printf 'x = 1  # kept in guest/gone.py\n' >>"$tree/tests/python/conftest.py"
expect_fail "a Python comment naming a missing file" "guest/gone.py does not exist"
fresh
printf 'static const char *planted = "src/util/gone.c";\n' >>"$tree/src/util/util.c"
printf 'planted = "guest/gone.py"\n' >>"$tree/tests/python/conftest.py"
expect_pass "a missing file named in code, not in a comment"
fresh
c_comment src/util/util.c "Built as tests/simhost and fuzz/frame-fuzz (meson), results in bench/peers/results.md."
expect_pass "paths the build writes"

# Lines.
fresh
c_comment src/core/run.c "As src/util/util.c:99999 says."
expect_fail "a line past the end of a file" "src/util/util.c:99999 is past the end of src/util/util.c"
fresh
l=$(def_line src/util/util.c sc__write_all)
c_comment src/core/run.c "See sc__write_all() at src/util/util.c:$((l + 2))."
printf '\nThe split: guest/prelude.py:%s (`_split_last`).\n' \
	"$(($(grep -n 'def _split_last' "$tree/guest/prelude.py" | cut -d: -f1) + 1))" >>"$tree/docs/architecture.md"
expect_pass "lines inside the functions named beside them"
fresh
c_comment src/core/run.c "See \`sc__write_all()\` (src/util/util.c:$((l - 10)))."
expect_fail "a C line outside the function named before it" \
	"src/util/util.c:$((l - 10)) is not inside sc__write_all"
fresh
printf '\nThe split: guest/prelude.py:1 (`_split_last`).\n' >>"$tree/docs/architecture.md"
expect_fail "a Python line outside the function named after it" "guest/prelude.py:1 is not inside _split_last"
fresh
c_comment src/core/run.c "See src/util/util.c:$l, sc__gone()."
expect_fail "a line beside a function the file lacks" "src/util/util.c:$l: no function sc__gone"

# Names beside a file.
fresh
printf '\nWrites go through `sc__write_all()` in src/util/util.c and `_split_last` of guest/prelude.py.\n' \
	>>"$tree/docs/architecture.md"
expect_pass "names their files have"
fresh
printf '\nWrites go through `sc__write_everything()` in src/util/util.c.\n' >>"$tree/docs/architecture.md"
expect_fail "a name before a file that lacks it" "src/util/util.c has no sc__write_everything"
fresh
c_comment src/core/run.c "The same as guest/prelude.py's \`_split_first\`."
expect_fail "a name after a file that lacks it" "guest/prelude.py has no _split_first"

# Sections.
fresh
printf '\nSee docs/architecture.md, "Layering", and docs/security.md, "Known limits".\n' >>"$tree/README.md"
expect_pass "sections that are there"
fresh
printf '\nSee docs/architecture.md, "Layers and tiers".\n' >>"$tree/README.md"
expect_fail "a section a document lacks" 'docs/architecture.md has no section "Layers and tiers"'
fresh
printf '# As architecture.md, "No such\n# heading", says.\n' >>"$tree/tests/meson.build"
expect_fail "a section of a bare name, across lines" 'docs/architecture.md has no section "No such heading"'

# Outside the repository.
fresh
c_comment guest/cell.c "In the order of ../shared/docs/notes.md."
expect_fail "a path to ../shared" "../shared/docs/notes.md is outside the repository"
fresh
printf '\nBuilt in /work/main/build.\n' >>"$tree/docs/performance.md"
expect_fail "a path under /work" "/work/main/build is outside the repository"

# The tracker.
fresh
c_comment src/core/run.c "The page tables (issue 9, item 6)."
expect_fail "issue N, item M" 'src/core/run.c:'
grep -qF 'tracker reference "issue 9"' "$tmp/out" || { echo "FAIL: issue 9 not named"; exit 1; }
fresh
printf '\n## Cold start (issue #19)\n' >>"$tree/docs/performance.md"
expect_fail "(issue #N)" 'tracker reference "issue #19"'
fresh
printf '\n\ndef planted():\n    """Issue 21 item 10: statfs."""\n' >>"$tree/tests/python/conftest.py"
expect_fail "a docstring's Issue N item M" 'tracker reference "Issue 21"'

# Commits.
fresh
printf '\nMeasured against the build at commit %s, whose src/util/util.c was %s:src/util/util.c.\n' \
	"$head" "$head" >>"$tree/docs/performance.md"
expect_pass "a commit and a file at it that git knows"
fresh
printf '\nMeasured against the build at commit 0123456789ab.\n' >>"$tree/docs/performance.md"
expect_fail "a commit git does not know" "commit 0123456789ab is not in the repository"
fresh
c_comment src/core/run.c "As $head:src/util/gone.c had it."
expect_fail "a file not at a commit" "$head:src/util/gone.c is not in the repository"
echo "check-refs-test: all passed"
