#!/bin/sh
# wait-server.sh PID CLI [ARG...] - wait until the redis-server that
# `CLI ARG... INFO server` reaches is process PID (its process_id), so
# that a port somebody else held is never taken for ours.  Exit status 0
# then; 1 when PID has exited first or after 20 s.
# Used by tests/with-cluster.sh, tests/with-sentinel.sh and bench/run.sh (ARG: -h, -p, --tls...).
set -u
pid=$1
shift
i=0
while :; do
    got=$("$@" INFO server 2>/dev/null |
          sed -n 's/^process_id:\([0-9]*\).*/\1/p')
    [ "$got" = "$pid" ] && exit 0
    kill -0 "$pid" 2>/dev/null || exit 1
    i=$((i + 1))
    [ $i -lt 400 ] || exit 1
    sleep 0.05
done
