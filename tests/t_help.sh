#!/bin/sh
# t_help.sh - every example and benchmark program answers --help: usage on
# standard output, exit status 0, without needing a server.  TAP output.
set -u
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
progs="examples/basic examples/demo examples/fencing bench/redislock-bench"
[ -x "$builddir/examples/cxx_guard" ] && progs="$progs examples/cxx_guard"
[ -x "$builddir/examples/leader" ] && progs="$progs examples/leader"
# Built with libevent (issue 34 part 4: it did not answer --help).
[ -x "$builddir/examples/lock_server" ] && progs="$progs examples/lock_server"
n=0
set -- $progs
echo "1..$#"
for p in $progs; do
    n=$((n + 1))
    out=$(REDISLOCK_URL=redis://127.0.0.1:1 timeout 10 "$builddir/$p" --help 2>/dev/null)
    st=$?
    if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -qi 'usage'; then
        echo "ok $n - $p --help"
    else
        echo "not ok $n - $p --help (exit $st)"
    fi
done
