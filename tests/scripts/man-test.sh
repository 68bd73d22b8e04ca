#!/bin/sh
# The man page keeps up with the CLI: every command `snapcell --help` lists and every option
# `snapcell run --help` and `snapcell bench --help` name appear in docs/man/snapcell.1.
# Usage: man-test.sh SNAPCELL_BIN MAN_PAGE
set -eu
bin=$1 page=$2
missing=0
for word in $({ "$bin" run --help; "$bin" bench --help; } 2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	escaped=$(printf '%s' "$word" | sed 's/-/\\\\-/g')
	grep -q -- "$escaped" "$page" || { echo "man page lacks $word"; missing=1; }
done
for cmd in $("$bin" --help 2>&1 | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
	grep -q "^\.B.* $cmd\|^\.B $cmd" "$page" || { echo "man page lacks the command $cmd"; missing=1; }
done
[ "$missing" -eq 0 ] && echo "man-test: the man page names every command and option"
exit "$missing"
