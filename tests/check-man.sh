#!/bin/sh
# check-man.sh - every public function has a man page of its own, and no
# man page names a function that does not exist.  TAP output.
#
#   - For every REDISLOCK_API function F of include/redislock.h there is
#     man/F.3, and either its NAME section lists F, or it is a .so link to
#     a page (not itself a link) whose NAME lists F.  The page documenting
#     F has SYNOPSIS (declaring F), DESCRIPTION, RETURN VALUE, ERRORS,
#     EXAMPLE (or EXAMPLES) and SEE ALSO sections, as libcurl's and
#     hiredis's users expect from `man F`.
#   - No man/redislock_*.3 is left for a function the header no longer
#     declares, and no page names a redislock_* identifier that is neither
#     a function nor a type of the header (a renamed or removed function).
#   - Every page in man/ is in Makefile.am's list, so that it ships.
#   - Every page renders without a warning (groff -man -ww), when groff is
#     installed; skipped otherwise.
set -u
srcdir=${REDISLOCK_TEST_SRCDIR:-.}
man=$srcdir/man
header=$srcdir/include/redislock.h

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

# The functions (as tests/check-exports.sh finds them) and the types.
awk '/REDISLOCK_API/ { api = 1 }
     api && match($0, /redislock_[a-z0-9_]+[ ]*\(/) {
         s = substr($0, RSTART, RLENGTH); sub(/[ ]*\($/, "", s); print s; api = 0 }' \
    "$header" | sort -u > "$tmp/functions"
{
    grep -E '^typedef' "$header" | grep -oE '\(\*redislock_[a-z0-9_]+\)|redislock_[a-z0-9_]+;' |
        tr -d '()*;'
    grep -E '^\}' "$header" | grep -oE 'redislock_[a-z0-9_]+'
} | sort -u > "$tmp/types"
# The adapters' names (header only, include/redislock/*.h): pages may
# document and name them too.
cat "$srcdir"/include/redislock/*.h 2>/dev/null |
    grep -oE 'redislock_[a-z0-9_]*[a-z0-9]' | sort -u > "$tmp/adapters"
if [ ! -s "$tmp/functions" ]; then
    echo "1..0 # SKIP no REDISLOCK_API function found in $header"
    exit 0
fi

# The .so target of page $1 ("" if it is a page of its own).
so_target() {
    awk 'NR == 1 && /^\.so / { print $2 } /^[^.]/ || NR > 1 { exit }' "$1" |
        sed 's,.*/,,'
}
# The names page $1's NAME section lists, one a line.
names() {
    awk '/^\.SH/ { in_name = ($2 == "NAME"); next }
         in_name { printf "%s ", $0 }' "$1" |
        sed 's/\\-.*//; s/\\f[BIRP]//g; s/[,"]/ /g' | tr -s ' ' '\n' | sed '/^$/d'
}
# The section titles of page $1, one a line.
sections() {
    sed -n 's/^\.SH  *//p' "$1" | tr -d '"'
}

n=0
fail=0
ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi
}

nfun=$(wc -l < "$tmp/functions")
echo "1..$((nfun + 5))"

# 1. A page per function.
for f in $(cat "$tmp/functions"); do
    page=$man/$f.3
    why=
    if [ ! -f "$page" ]; then
        why="no man/$f.3"
    else
        t=$(so_target "$page")
        if [ -n "$t" ]; then
            if [ ! -f "$man/$t" ]; then
                why="man/$f.3 links to $t, which does not exist"
            elif [ -n "$(so_target "$man/$t")" ]; then
                why="man/$f.3 links to $t, itself a link"
            else
                page=$man/$t
            fi
        fi
    fi
    if [ -z "$why" ] && [ "${page##*/}" = redislock.3 ]; then
        why="man/$f.3 is only the overview, redislock(3)"
    fi
    if [ -z "$why" ] && ! names "$page" | grep -qx "$f"; then
        why="the NAME section of ${page##*/} does not list $f"
    fi
    if [ -z "$why" ]; then
        sections "$page" > "$tmp/sections"
        for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS "SEE ALSO"; do
            grep -qx "$s" "$tmp/sections" || why="$why ${page##*/} has no $s section;"
        done
        grep -qxE 'EXAMPLES?' "$tmp/sections" || why="$why ${page##*/} has no EXAMPLE section;"
        awk '/^\.SH/ { on = ($2 == "SYNOPSIS"); next } on' "$page" |
            grep -q "$f(" || why="$why its SYNOPSIS does not declare $f;"
    fi
    if [ -z "$why" ]; then
        ok 0 "man $f shows a page that documents it (${page##*/})"
    else
        ok 1 "man $f shows a page that documents it"
        echo "# $why"
    fi
done

# 2. No page for a function that is gone.
stray=
for p in "$man"/redislock_*.3; do
    [ -f "$p" ] || continue
    b=${p##*/}
    grep -qx "${b%.3}" "$tmp/functions" "$tmp/adapters" || stray="$stray $b"
done
[ -z "$stray" ]
ok $? "no man/redislock_*.3 for a function the header does not declare"
[ -z "$stray" ] || echo "# stray pages:$stray"

# 3. No page names an identifier the header does not declare (or a
# metric the library does not write: src/metrics.c's names).
grep -oE '"redislock_[a-z0-9_]*[a-z0-9]["{ ]' "$srcdir/src/metrics.c" |
    tr -d '"{ ' | sort -u > "$tmp/metrics"
cat "$tmp/functions" "$tmp/types" "$tmp/adapters" "$tmp/metrics" | sort -u > "$tmp/known"
unknown=
for p in "$man"/*.[0-9]; do
    [ -f "$p" ] || continue
    for w in $(sed 's/\\f[BIRP]//g; s/\\-/-/g' "$p" | grep -oE 'redislock_[a-z0-9_]*[a-z0-9]' | sort -u); do
        grep -qx "$w" "$tmp/known" || unknown="$unknown ${p##*/}:$w"
    done
done
[ -z "$unknown" ]
ok $? "every redislock_* name in the man pages is a function or type of the header"
[ -z "$unknown" ] || echo "# unknown:$unknown"

# ... and every metric the library writes is documented.
undocumented=
for w in $(cat "$tmp/metrics"); do
    sed 's/\\f[BIRP]//g' "$man/redislock_client_metrics.3" | grep -q "$w" ||
        undocumented="$undocumented $w"
done
[ -z "$undocumented" ]
ok $? "every metric the library writes is in redislock_client_metrics(3)"
[ -z "$undocumented" ] || echo "# undocumented:$undocumented"

# 4. Every page ships.
unlisted=
for p in "$man"/*.[0-9]; do
    [ -f "$p" ] || continue
    grep -q "man/${p##*/}" "$srcdir/Makefile.am" || unlisted="$unlisted ${p##*/}"
done
[ -z "$unlisted" ]
ok $? "every man page is listed in Makefile.am"
[ -z "$unlisted" ] || echo "# not listed:$unlisted"

# 5. Every link resolves and every page renders without a warning.
if command -v groff >/dev/null 2>&1; then
    bad=
    for p in "$man"/*.[0-9]; do
        [ -f "$p" ] || continue
        t=$(so_target "$p")
        if [ -n "$t" ]; then
            [ -f "$man/$t" ] || bad="$bad ${p##*/}: .so to missing $t;"
            continue
        fi
        groff -man -Tutf8 -ww -z "$p" > "$tmp/warn" 2>&1
        if [ -s "$tmp/warn" ]; then
            bad="$bad ${p##*/}: $(head -3 "$tmp/warn" | tr '\n' ' ');"
        fi
    done
    [ -z "$bad" ]
    ok $? "every page renders without warnings (groff -man -ww) and every link resolves"
    [ -z "$bad" ] || echo "# $bad"
else
    n=$((n + 1))
    echo "ok $n # SKIP groff not found: pages not rendered"
fi

exit 0
