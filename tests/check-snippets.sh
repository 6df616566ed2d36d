#!/bin/sh
# check-snippets.sh - the C in the docs compiles, and its programs run:
# every ```c and ```cpp block of README.md and doc/*.md and the EXAMPLE
# section of every man/*.3 page, each compiled on its own against
# include/; each complete program (one with a main()) is then linked with
# the library built here and run to its end beside a private
# redis-server (tests/with-redis.sh), and must exit 0 within
# REDISLOCK_SNIPPET_TIMEOUT seconds (30; 120 under a wrapper such as
# valgrind, REDISLOCK_TEST_WRAPPER, which runs them).  TAP output.
# (man/redislock.1's examples are shell commands: tests/t_cli.sh runs
# the tool.)
#
# A C block that has a line holding only "{" (a function body, this
# project's style) is a file of its own; any other is a fragment, compiled
# as the body of a function whose parameters are `redislock *lock` and
# `redislock_client *client`.  Both get the common headers first (stdio,
# stdlib, string, stdbool, stdint, stdatomic, poll, unistd, hiredis,
# redislock).  A C++ block without main() is a function body too, after
# <redislock.hpp>, <iostream> and <mutex>.  A man page's example is the
# text of its .nf/.fi (or .EX/.EE) blocks, unescaped.
#
# A program runs against the test server: "redis://127.0.0.1:6379",
# "redis://127.0.0.1" and redisConnect("127.0.0.1", 6379) are rewritten to
# its port.  A program that still names another server is not run: it
# must be one of the few below that need a kind of server with-redis.sh
# does not start (each with its reason), or it fails - the docs' programs
# talk to loopback only.
#
# CC (default cc) and CXX (default c++) compile; hiredis's flags come
# from pkg-config; a program is linked with REDISLOCK_TEST_LINK_FLAGS too
# (the build's sanitizer, coverage and link flags: make check sets it).  Skipped without a compiler or hiredis's header.
set -u
srcdir=${REDISLOCK_TEST_SRCDIR:-.}
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
cc=${CC:-cc}
cxx=${CXX:-c++}

# The programs run beside a private server: run this script again under
# tests/with-redis.sh (which, under CI, fails when there is none), keeping
# the wrapper for the programs alone.
if [ -z "${REDISLOCK_SNIPPETS_INNER:-}" ]; then
    REDISLOCK_SNIPPETS_INNER=1
    REDISLOCK_SNIPPETS_WRAPPER=${REDISLOCK_TEST_WRAPPER:-}
    export REDISLOCK_SNIPPETS_INNER REDISLOCK_SNIPPETS_WRAPPER
    if { command -v "${REDIS_SERVER:-redis-server}" &&
         command -v "${REDIS_CLI:-redis-cli}"; } >/dev/null 2>&1 ||
       [ "${CI:-}" = true ]; then
        REDISLOCK_TEST_WRAPPER= exec sh "$srcdir/tests/with-redis.sh" sh "$0" "$@"
    fi
fi
wrapper=${REDISLOCK_SNIPPETS_WRAPPER:-}
limit=${REDISLOCK_SNIPPET_TIMEOUT:-30}
[ -z "$wrapper" ] || limit=${REDISLOCK_SNIPPET_TIMEOUT:-120}

# The programs that are compiled only: PATTERN|REASON, the first whose
# fixed string PATTERN the program holds.  Keep it short.
# A string literal naming a server, or a hiredis connect.
other='"(rediss?|rediss?-sentinel|unix)://|redisConnect(Unix)?[(]'
compile_only='cluster=1|needs a Redis Cluster (tests/with-cluster.sh; t_cluster covers it)
redis-sentinel://|needs Sentinel (tests/with-sentinel.sh; t_sentinel covers it)
rediss://|needs a TLS server (t_tls covers it)
redislock_client_open_quorum|needs a quorum of 5 masters (t_quorum covers it)'

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if ! command -v ${cc%% *} >/dev/null 2>&1; then
    echo "1..0 # SKIP no C compiler ($cc)"; exit 0
fi
# The hiredis the library was built with (make check passes configure's
# flags: a build against another hiredis than the system's, as CI's
# hiredis 1.x step, must not mix the two in one program), else
# pkg-config's.
hiredis_cflags=${REDISLOCK_TEST_HIREDIS_CFLAGS-$(pkg-config --cflags hiredis 2>/dev/null || true)}
cppflags="-I$builddir/include -I$srcdir/include $hiredis_cflags"
printf '#include <hiredis/hiredis.h>\n' > "$tmp/probe.c"
# shellcheck disable=SC2086
if ! $cc $cppflags -c -o "$tmp/probe.o" "$tmp/probe.c" 2>/dev/null; then
    echo "1..0 # SKIP hiredis's header not found"; exit 0
fi
have_cxx=no
command -v ${cxx%% *} >/dev/null 2>&1 && have_cxx=yes

cat > "$tmp/prelude.h" <<'EOF'
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <redislock.h>
EOF

# Split the docs into units: $tmp/u.N.{c,cc} with $tmp/u.N.name.
awk -v dir="$tmp" '
    function open_unit(lang, name) {
        n++; file = dir "/u." n "." lang; printf "" > file
        print name > (dir "/u." n ".name"); close(dir "/u." n ".name")
    }
    FNR == 1 { inblk = 0; man = FILENAME ~ /\.3$/; ex = 0; started = 0
               src = FILENAME; sub(/.*\//, "", src) }
    !man && /^```(c|cpp)$/ {
        open_unit($0 == "```c" ? "c" : "cc", src " block at line " FNR)
        inblk = 1; next }
    !man && inblk && /^```/ { close(file); inblk = 0; next }
    !man && inblk { print > file; next }
    man && /^\.SH/ {
        if (started) { close(file); started = 0 }
        ex = ($2 ~ /^"?EXAMPLES?"?$/); inblk = 0; next }
    man && ex && /^\.(nf|EX)/ {
        if (!started) { open_unit("c", src " EXAMPLE"); started = 1 }
        inblk = 1; next }
    man && ex && /^\.(fi|EE)/ { inblk = 0; next }
    man && ex && inblk {
        line = $0
        gsub(/\\-/, "-", line); gsub(/\\\(aq/, "\047", line)
        gsub(/\\\(dq/, "\"", line); gsub(/\\&/, "", line)
        gsub(/\\e/, "\\", line)
        print line > file; next }
' "$srcdir/README.md" "$srcdir"/doc/*.md "$srcdir"/man/*.3

count=$(ls "$tmp" | grep -c '\.name$')
progs=$(grep -l 'main(' "$tmp"/u.*.c "$tmp"/u.*.cc 2>/dev/null | wc -l)
# Each unit's compile line, each program's run line, the package lists.
echo "1..$((count + progs + 1))"
i=0
t=0                     # the TAP number of the last line printed

# Link the program $tmp/t.o (language $1: CC or CXX, with the libraries
# $2) with the library built here and run it to its end; one TAP line.
run_program() {
    t=$((t + 1))
    if [ -n "${REDISLOCK_TEST_PORT:-}" ]; then :; else
        echo "ok $t # SKIP $name: no redis-server to run it against"; return
    fi
    if [ ! -f "$builddir/src/libredislock.la" ] || [ ! -x "$builddir/libtool" ]; then
        echo "ok $t # SKIP $name: the library is not built in $builddir"; return
    fi
    for what in $(printf '%s\n' "$compile_only" | cut -d'|' -f1); do
        if grep -qF -- "$what" "$src"; then
            why=$(printf '%s\n' "$compile_only" | grep -F -- "$what|" | head -1 | cut -d'|' -f2)
            echo "ok $t # SKIP $name runs: $why"; return
        fi
    done
    # Another server named (a URL or a hiredis connect, in the code)?
    if grep -vF -e "127.0.0.1:$REDISLOCK_TEST_PORT" \
                -e "\"127.0.0.1\", $REDISLOCK_TEST_PORT" "$src" |
           grep -qE "$other"; then
        echo "not ok $t - $name runs: it names a server other than the test's"
        grep -nE "$other" "$src" | sed 's/^/# /'
        return
    fi
    # shellcheck disable=SC2086
    if ! "$builddir/libtool" --quiet --mode=link --tag=$1 \
            $([ "$1" = CXX ] && echo "$cxx" || echo "$cc") -no-install \
            ${REDISLOCK_TEST_LINK_FLAGS:-} \
            -o "$tmp/prog" "$tmp/t.o" "$builddir/src/libredislock.la" $2 \
            > "$tmp/log" 2>&1; then
        echo "not ok $t - $name links"
        sed 's/^/# /' "$tmp/log" | head -20
        return
    fi
    # shellcheck disable=SC2086
    (cd "$tmp" && timeout -k 5 "$limit" $wrapper ./prog < /dev/null) > "$tmp/log" 2>&1
    st=$?
    if [ $st -eq 0 ]; then
        echo "ok $t - $name runs to its end (exit 0)"
    elif [ $st -eq 124 ] || [ $st -eq 137 ]; then
        echo "not ok $t - $name runs to its end: still running after $limit s"
        sed 's/^/# /' "$tmp/log" | tail -20
    else
        echo "not ok $t - $name runs to its end: exit $st"
        sed 's/^/# /' "$tmp/log" | tail -20
    fi
}

# Unit $i is skipped for reason $1 (its run too, if it is a program).
skip_unit() {
    t=$((t + 1)); echo "ok $t # SKIP $name: $1"
    if grep -q 'main(' "$src"; then
        t=$((t + 1)); echo "ok $t # SKIP $name runs: $1"
    fi
}

hiredis_libs=${REDISLOCK_TEST_HIREDIS_LIBS:-$(pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)}
while [ $i -lt "$count" ]; do
    i=$((i + 1))
    name=$(cat "$tmp/u.$i.name")
    src=$tmp/u.$i.c lang=CC libs=$hiredis_libs
    [ -f "$src" ] || src=$tmp/u.$i.cc lang=CXX
    # A program talks to the test server.
    if grep -q 'main(' "$src" && [ -n "${REDISLOCK_TEST_PORT:-}" ]; then
        sed -i -e "s#redis://127\.0\.0\.1:6379#redis://127.0.0.1:$REDISLOCK_TEST_PORT#g" \
               -e "s#\"redis://127\.0\.0\.1\"#\"redis://127.0.0.1:$REDISLOCK_TEST_PORT\"#g" \
               -e "s#\"127\.0\.0\.1\", 6379#\"127.0.0.1\", $REDISLOCK_TEST_PORT#g" "$src"
    fi
    if [ -f "$tmp/u.$i.cc" ]; then
        if [ $have_cxx = no ]; then
            skip_unit "no C++ compiler"; continue
        fi
        if grep -q 'main(' "$tmp/u.$i.cc"; then
            cp "$tmp/u.$i.cc" "$tmp/t.cc"
        else
            { printf '#include <iostream>\n#include <mutex>\n#include <redislock.hpp>\n'
              printf 'void snippet(void);\nvoid snippet(void)\n{\n'
              cat "$tmp/u.$i.cc"; printf '}\n'; } > "$tmp/t.cc"
        fi
        # shellcheck disable=SC2086
        set -- $cxx -std=c++11 -Wall -Wextra -Werror $cppflags -c -o "$tmp/t.o" "$tmp/t.cc"
    else
        # shellcheck disable=SC2086
        if grep -q '<event2/' "$tmp/u.$i.c" &&
           ! printf '#include <event2/event.h>\n' |
               $cc $cppflags -E -x c - > /dev/null 2>&1; then
            skip_unit "libevent's headers not found"; continue
        fi
        if grep -q '<event2/' "$src"; then
            libs="$libs $(pkg-config --libs libevent_core 2>/dev/null || echo -levent_core)"
        fi
        if grep -q '<uv.h>' "$tmp/u.$i.c" &&
           ! printf '#include <uv.h>\n' |
               $cc $cppflags -E -x c - > /dev/null 2>&1; then
            skip_unit "libuv's headers not found"; continue
        fi
        if grep -q '<uv.h>' "$src"; then
            libs="$libs $(pkg-config --libs libuv 2>/dev/null || echo -luv)"
        fi
        if grep -qx '{' "$tmp/u.$i.c"; then
            { cat "$tmp/prelude.h"; cat "$tmp/u.$i.c"; } > "$tmp/t.c"
        else
            { cat "$tmp/prelude.h"
              printf 'int snippet(redislock *lock, redislock_client *client);\n'
              printf 'int snippet(redislock *lock, redislock_client *client)\n{\n'
              printf '    (void)lock; (void)client;\n    {\n'
              cat "$tmp/u.$i.c"; printf '    }\n    return 0;\n}\n'; } > "$tmp/t.c"
        fi
        # shellcheck disable=SC2086
        set -- $cc -std=gnu11 -Wall -Wextra -Werror -Wno-unused-variable \
            -Wno-unused-but-set-variable -Wno-unused-function $cppflags \
            -c -o "$tmp/t.o" "$tmp/t.c"
    fi
    compiled=no
    if "$@" > "$tmp/log" 2>&1; then
        t=$((t + 1)); echo "ok $t - $name compiles"
        compiled=yes
    else
        t=$((t + 1)); echo "not ok $t - $name compiles"
        sed 's/^/# /' "$tmp/log" | head -20
    fi
    grep -q 'main(' "$src" || continue
    if [ $compiled = no ]; then
        t=$((t + 1)); echo "not ok $t - $name runs: it does not compile"
        continue
    fi
    run_program "$lang" "$libs"
done

# The install snippets: README.md's apt-get lines (its Install section)
# and tools/quickstart.sh's list name every Debian 12 package that make
# check uses - the libraries configure looks for (libevent and libuv
# build the loop tests and examples/lock_server) and the programs tests
# skip without (issue 34 part 4: both lacked libevent-dev).
i=$((t + 1))
want="libhiredis-dev libsodium-dev libcmocka-dev libevent-dev libuv1-dev
      g++ pkg-config redis-server redis-tools strace python3 groff-base"
for m in $(sed -n 's/^PKG_CHECK_MODULES(\[[A-Z_]*\], *\[\([a-z_]*\).*/\1/p' \
               "$srcdir/configure.ac"); do
    case $m in
        hiredis|libsodium|libevent_core|libuv|cmocka) ;;
        hiredis_ssl|openssl) ;;        # TLS: backports (README, TLS)
        *) want="$want unknown-package-for-$m" ;;
    esac
done
readme=$(awk '/^## Install/ { on = 1; next } on && /^## / { exit }
              on && /^apt-get install/ { take = 1 }
              take { print; if ($0 !~ /\\$/) take = 0 }' "$srcdir/README.md" |
         sed 's/#.*//' | tr -d '\\')
quick=$(awk '/^pkgs="/ { take = 1 } take { print; if (/"$/ && !/^pkgs="[^"]*$/) exit }
             /^pkgs="[^"]*"$/ { exit }' "$srcdir/tools/quickstart.sh" | tr -d '"')
lacks=
for p in $want; do
    case " $(echo $readme) " in *" $p "*) ;; *) lacks="$lacks README:$p" ;; esac
    case " $(echo $quick) " in *" $p "*) ;; *) lacks="$lacks quickstart:$p" ;; esac
done
if [ -z "$lacks" ]; then
    echo "ok $i - README.md's and tools/quickstart.sh's package lists name what make check uses"
else
    echo "not ok $i - README.md's and tools/quickstart.sh's package lists name what make check uses"
    echo "# missing:$lacks"
fi
exit 0
