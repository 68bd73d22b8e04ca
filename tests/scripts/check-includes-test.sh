#!/bin/sh
# Tests scripts/check-includes itself: it passes on the tree as it is and fails, naming the
# file, when a front end includes an internal header (but for the util headers frontend/ may
# pass on) or another front end's it may not use (mcp/ including cli/), a layer includes one it must not use, a file of src/ or guest/ is in
# no layer of src/layers.txt, or the list names a file twice or one that is not there. Each
# case works on a copy of the sources, so the tree is never touched.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fresh() {
	rm -rf "$tmp/src-tree"
	mkdir -p "$tmp/src-tree/scripts" "$tmp/src-tree/python"
	cp -r "$root/include" "$root/src" "$root/guest" "$root/cli" "$root/bench" "$root/mcp" \
		"$root/frontend" "$tmp/src-tree/"
	[ -d "$root/python/snapcell" ] && cp -r "$root/python/snapcell" "$tmp/src-tree/python/"
	cp "$root/scripts/check-includes" "$tmp/src-tree/scripts/"
}
expect_fail() { # what file-that-must-be-named
	if "$tmp/src-tree/scripts/check-includes" >"$tmp/out" 2>&1; then
		echo "FAIL: check-includes accepted $1"
		exit 1
	fi
	grep -q "$2" "$tmp/out" || { echo "FAIL: $1 not named:"; cat "$tmp/out"; exit 1; }
	echo "ok: $1 is refused"
}

fresh
"$tmp/src-tree/scripts/check-includes" || { echo "FAIL: the tree as it is does not pass"; exit 1; }
echo "ok: the tree passes"

fresh
sed -i '0,/#include "cli.h"/s//#include "cli.h"\n#include "core\/core.h"/' "$tmp/src-tree/cli/run.c"
expect_fail "cli/run.c including core/core.h" "cli/run.c:.*core/core.h"

fresh
sed -i '0,/#include "cli.h"/s//#include "cli.h"\n#include "..\/src\/util\/util.h"/' "$tmp/src-tree/cli/artifacts.c"
expect_fail "cli/artifacts.c including ../src/util/util.h" "cli/artifacts.c:.*internal header"

fresh
sed -i '0,/#include "mcp.h"/s//#include "mcp.h"\n#include "..\/cli\/cli.h"/' "$tmp/src-tree/mcp/server.c"
expect_fail "mcp/server.c including ../cli/cli.h" "mcp/server.c:.*cli/cli.h.*may not use"

fresh
sed -i '0,/#include "frontend.h"/s//#include "frontend.h"\n#include "..\/mcp\/snapcell_mcp.h"/' "$tmp/src-tree/frontend/config.c"
expect_fail "frontend/config.c including ../mcp/snapcell_mcp.h" "frontend/config.c:.*snapcell_mcp.h.*may not use"

# The util headers frontend.h passes on: frontend/ may include those three, nothing else of
# src/, and the other front ends reach them only through frontend.h.
fresh
sed -i '0,/#include "frontend.h"/s//#include "frontend.h"\n#include "..\/src\/util\/util.h"/' "$tmp/src-tree/frontend/config.c"
expect_fail "frontend/config.c including ../src/util/util.h" "frontend/config.c:.*internal header"

fresh
sed -i '0,/#include "mcp.h"/s//#include "mcp.h"\n#include "..\/src\/util\/buf.h"/' "$tmp/src-tree/mcp/server.c"
expect_fail "mcp/server.c including ../src/util/buf.h" "mcp/server.c:.*internal header"

fresh
sed -i 's|#include "stage.h"|#include "stage.h"\n#include "core/core.h"|' "$tmp/src-tree/src/stage/stage.c"
expect_fail "src/stage/stage.c including core/core.h" "src/stage/stage.c:.*stage layer"

fresh
sed -i 's|#include "host.h"|#include "host.h"\n#include "guest.h"|' "$tmp/src-tree/src/isolate/spawn.c"
expect_fail "src/isolate/spawn.c including guest.h" "src/isolate/spawn.c:.*isolate-host"
# The isolate files src/meson.build built but the checker once did not know of.
fresh
sed -i 's|#include "guest.h"|#include "guest.h"\n#include "host.h"|' "$tmp/src-tree/src/isolate/hostfs.c"
expect_fail "src/isolate/hostfs.c including host.h" "src/isolate/hostfs.c:.*isolate-guest layer includes host.h"

fresh
sed -i 's|#include "host.h"|#include "host.h"\n#include "guest.h"|' "$tmp/src-tree/src/isolate/level.c"
expect_fail "src/isolate/level.c including guest.h" "src/isolate/level.c:.*isolate-host layer includes guest.h"

fresh
printf '#include "util.h"\n' >"$tmp/src-tree/src/util/stray.c"
expect_fail "a .c file in no layer" "src/util/stray.c: in no layer"

fresh
: >"$tmp/src-tree/guest/stray.h"
expect_fail "a header in no layer" "guest/stray.h: in no layer"

fresh
echo "core          src/util/util.c" >>"$tmp/src-tree/src/layers.txt"
expect_fail "a file in two layers" "src/util/util.c is in the util layer already"

fresh
echo "net           src/net/gone.c" >>"$tmp/src-tree/src/layers.txt"
expect_fail "a listed file that is not there" "src/net/gone.c does not exist"
echo "check-includes-test: all passed"
