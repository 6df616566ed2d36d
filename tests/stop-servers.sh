#!/bin/sh
# stop-servers.sh PID... - stop the servers a harness started: TERM to
# all, then up to 5 s for each to exit (a zombie counts as gone), then
# KILL.  Used by tests/with-cluster.sh, tests/with-sentinel.sh and
# bench/run.sh.
set -u
for p in "$@"; do
    kill "$p" 2>/dev/null
done
for p in "$@"; do
    i=0
    while [ $i -lt 50 ] && kill -0 "$p" 2>/dev/null; do
        case $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$p/status" 2>/dev/null) in
            Z|"") break ;;
        esac
        sleep 0.1; i=$((i + 1))
    done
    kill -9 "$p" 2>/dev/null
done
exit 0
