#!/bin/sh
# check-exports.sh - the shared library exports exactly the symbols listed
# in src/redislock.sym, all of them redislock_*; the header declares
# exactly those functions and tests/header_c.c references each of them.
# TAP output.
set -u
srcdir=${REDISLOCK_TEST_SRCDIR:-.}
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
nm=${NM:-nm}
so=$builddir/src/.libs/libredislock.so

# libtool's NM may carry flags ("/usr/bin/nm -B").
if ! command -v ${nm%% *} >/dev/null 2>&1; then
    echo "1..0 # SKIP nm not found"; exit 0
fi
if [ ! -f "$so" ]; then
    echo "1..0 # SKIP no shared library (built with --disable-shared?)"; exit 0
fi

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
$nm -D --defined-only "$so" | awk 'NF >= 3 { print $3 }' | sort > "$tmp/actual"
grep -v '^#' "$srcdir/src/redislock.sym" | sed '/^$/d' | sort > "$tmp/expected"

# Every function the header declares (REDISLOCK_API ... name( ), and
# every function tests/header_c.c takes the address of.
awk '/REDISLOCK_API/ { api = 1 }
     api && match($0, /redislock_[a-z0-9_]+[ ]*\(/) {
         s = substr($0, RSTART, RLENGTH); sub(/[ ]*\($/, "", s); print s; api = 0 }' \
    "$srcdir/include/redislock.h" | sort -u > "$tmp/declared"
grep -o '(void (\*)(void))redislock_[a-z0-9_]*' "$srcdir/tests/header_c.c" |
    sed 's/.*)//' | sort -u > "$tmp/referenced"

echo "1..6"
if [ -s "$tmp/actual" ]; then
    echo "ok 1 - nm lists the exported symbols"
else
    echo "not ok 1 - nm lists the exported symbols"
fi
if grep -v '^redislock_' "$tmp/actual" > "$tmp/stray"; then
    echo "not ok 2 - only redislock_* symbols are exported"
    sed 's/^/# stray: /' "$tmp/stray"
else
    echo "ok 2 - only redislock_* symbols are exported"
fi
if diff -u "$tmp/expected" "$tmp/actual" > "$tmp/diff"; then
    echo "ok 3 - exports match src/redislock.sym"
else
    echo "not ok 3 - exports match src/redislock.sym"
    sed 's/^/# /' "$tmp/diff"
fi
if [ -s "$tmp/declared" ] && diff -u "$tmp/expected" "$tmp/declared" > "$tmp/diff"; then
    echo "ok 4 - the header declares exactly the functions in src/redislock.sym"
else
    echo "not ok 4 - the header declares exactly the functions in src/redislock.sym"
    sed 's/^/# /' "$tmp/diff"
fi
if [ -s "$tmp/referenced" ] && diff -u "$tmp/expected" "$tmp/referenced" > "$tmp/diff"; then
    echo "ok 5 - tests/header_c.c references every exported function"
else
    echo "not ok 5 - tests/header_c.c references every exported function"
    sed 's/^/# /' "$tmp/diff"
fi
missing=
for f in $(cat "$tmp/expected"); do
    [ -f "$srcdir/man/$f.3" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
    echo "ok 6 - every exported function has a man page (man/NAME.3)"
else
    echo "not ok 6 - every exported function has a man page (man/NAME.3)"
    echo "# missing:$missing"
fi
