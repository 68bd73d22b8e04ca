# Shared by the fresh-machine tests (sourced, bash): pristine Debian minbase roots made with
# mmdebstrap and cached outside the work tree, a new copy of one per test, and the steps'
# timing. Not a test itself.

# Where the pristine roots live: one tarball per release and package set, rebuilt when older
# than a week (a fresh machine gets today's packages, not last month's).
fresh_cache=${SNAPCELL_FRESH_CACHE:-/var/cache/snapcell-fresh}
# Where the copies go: a disk-backed directory (a root plus a build is about 1.5 GB).
fresh_work=${SNAPCELL_FRESH_WORK:-/var/tmp}
fresh_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fresh_say() { printf 'fresh: %s\n' "$*"; }

# Prints the path of the pristine root tarball of SUITE (bookworm, trixie) with PACKAGES added to
# minbase, building it first when it is absent or stale. Concurrent runs wait on a lock.
fresh_pristine() { # suite [package...]
	local suite=$1
	shift
	local name=$suite
	[ $# -eq 0 ] || name="$suite-$(IFS=+; echo "$*")"
	local tar="$fresh_cache/$name.tar"
	mkdir -p "$fresh_cache"
	(
		flock 9
		if [ -f "$tar" ] && [ -z "$(find "$tar" -mtime +7)" ]; then
			exit 0
		fi
		local t0=$SECONDS include=""
		[ $# -eq 0 ] || include="--include=$(IFS=,; echo "$*")"
		# shellcheck disable=SC2086 # $include is one word or none
		if ! mmdebstrap --quiet --variant=minbase $include "$suite" "$fresh_cache/.$name.partial.tar" \
			>"$fresh_cache/$name.log" 2>&1; then
			tail -n 20 "$fresh_cache/$name.log" >&2
			rm -f "$fresh_cache/.$name.partial.tar"
			exit 1
		fi
		mv "$fresh_cache/.$name.partial.tar" "$tar"
		fresh_say "made the pristine $name root ($((SECONDS - t0)) s, $tar)" >&2
	) 9>"$fresh_cache/.lock" || { fresh_say "mmdebstrap of $name failed" >&2; return 1; }
	echo "$tar"
}

# Unpacks a pristine root tarball into a new directory under $fresh_work and prints its path.
fresh_copy() { # tarball
	local dir
	dir=$(mktemp -d "$fresh_work/snapcell-fresh.XXXXXX")
	chmod 755 "$dir"
	tar -C "$dir" --numeric-owner -xpf "$1" || { rm -rf --one-file-system "$dir"; return 1; }
	echo "$dir"
}

# Removes a copy. The mounts of tests/fresh/enter live in its own mount namespace, gone with
# it, so nothing here is a host mount; --one-file-system guards that all the same.
fresh_remove() { # dir
	case $1 in "$fresh_work"/snapcell-fresh.*) rm -rf --one-file-system "$1" ;; esac
}

fresh_enter() { # dir command...
	"$fresh_dir/enter" "$@"
}
