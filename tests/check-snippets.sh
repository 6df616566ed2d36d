#!/bin/sh
# check-snippets.sh - the C in the docs compiles: every ```c and ```cpp
# block of README.md and the EXAMPLE section of every man/*.3 page, each
# compiled on its own against include/ (compile only: nothing is linked or
# run).  TAP output.
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
# CC (default cc) and CXX (default c++) compile; hiredis's flags come
# from pkg-config.  Skipped without a compiler or hiredis's header.
set -u
srcdir=${REDISLOCK_TEST_SRCDIR:-.}
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
cc=${CC:-cc}
cxx=${CXX:-c++}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if ! command -v ${cc%% *} >/dev/null 2>&1; then
    echo "1..0 # SKIP no C compiler ($cc)"; exit 0
fi
hiredis_cflags=$(pkg-config --cflags hiredis 2>/dev/null || true)
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
' "$srcdir/README.md" "$srcdir"/man/*.3

count=$(ls "$tmp" | grep -c '\.name$')
echo "1..$((count + 1))"
i=0
while [ $i -lt "$count" ]; do
    i=$((i + 1))
    name=$(cat "$tmp/u.$i.name")
    if [ -f "$tmp/u.$i.cc" ]; then
        if [ $have_cxx = no ]; then
            echo "ok $i # SKIP $name: no C++ compiler"; continue
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
            echo "ok $i # SKIP $name: libevent's headers not found"; continue
        fi
        if grep -q '<uv.h>' "$tmp/u.$i.c" &&
           ! printf '#include <uv.h>\n' |
               $cc $cppflags -E -x c - > /dev/null 2>&1; then
            echo "ok $i # SKIP $name: libuv's headers not found"; continue
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
    if "$@" > "$tmp/log" 2>&1; then
        echo "ok $i - $name compiles"
    else
        echo "not ok $i - $name compiles"
        sed 's/^/# /' "$tmp/log" | head -20
    fi
done

# The install snippets: README.md's apt-get lines (its Install section)
# and tools/quickstart.sh's list name every Debian 12 package that make
# check uses - the libraries configure looks for (libevent and libuv
# build the loop tests and examples/lock_server) and the programs tests
# skip without (issue 34 part 4: both lacked libevent-dev).
i=$((count + 1))
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
