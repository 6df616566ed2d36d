#!/bin/sh
# syscalls.sh - system calls per lock operation, library against the bare
# hiredis loop, counted by strace.  One JSON line per peer:
#   {"peer":P,"workload":"U","mode":M,"cycles_counted":N,"syscalls_per_op":S,
#    "per_op":{"write":W,"read":R,...,"other":O}}
# An operation is one acquire or one release (a cycle is both).
#
# Runs workload U under `strace -f -c` twice per peer, with N cycles and
# with 1000, and divides the difference by the difference in operations
# (cycles_counted = N - 1000, times 2), so that start-up, connection,
# self-check and warm-up cancel out exactly.
#
# Usage: syscalls.sh [--n N] [--mode gozero|counted] [--port P] [BENCH]
#   BENCH   the benchmark binary (./bench/redislock-bench)
#   --n N   cycles of the long run (100000)
#   --port  the server (default $REDISLOCK_TEST_PORT, as set by
#           tests/with-redis.sh); e.g.
#   sh tests/with-redis.sh sh bench/syscalls.sh ./bench/redislock-bench
# Exits 77 when strace is missing or cannot trace (apt-get install strace).
set -eu

usage() {
    sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"
}

n=100000
base=1000
mode=gozero
port=${REDISLOCK_TEST_PORT:-}
bench=./bench/redislock-bench
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) usage; exit 0 ;;
    --n) n=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    -*) usage >&2; exit 2 ;;
    *) bench=$1; shift ;;
    esac
done
case $mode in gozero|counted) ;; *) usage >&2; exit 2 ;; esac
if [ -z "$port" ] || [ "$n" -le "$base" ]; then
    usage >&2
    exit 2
fi
if ! command -v strace >/dev/null 2>&1; then
    echo "syscalls.sh: strace not found (apt-get install strace)" >&2
    exit 77
fi
if ! strace -f -c -o /dev/null true >/dev/null 2>&1; then
    echo "syscalls.sh: strace cannot trace here (ptrace not permitted?)" >&2
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-syscalls.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# strace -c's table: "% time seconds usecs/call calls [errors] syscall".
# Prints "syscall calls" lines.
calls() {
    awk '$1 ~ /^[0-9.]+$/ && $NF != "total" { print $NF, $4 }' "$1"
}

for peer in redislock hiredis-raw; do
    raw=
    [ "$peer" = hiredis-raw ] && raw=--raw
    for cycles in "$n" "$base"; do
        # shellcheck disable=SC2086
        strace -f -c -o "$tmp/$cycles" "$bench" --workload U --port "$port" \
            --mode "$mode" --n "$cycles" $raw >/dev/null
        calls "$tmp/$cycles" > "$tmp/$cycles.calls"
    done
    # Per operation: (long - base) / ((n - base) * 2), write and read
    # first, then the others by count; those under 0.005 go to "other".
    awk -v peer="$peer" -v mode="$mode" -v cycles=$((n - base)) '
        FNR == NR { base[$1] = $2; next }
        { long[$1] = $2 }
        END {
            ops = cycles * 2
            for (s in base) if (!(s in long)) long[s] = 0
            total = 0; other = 0; k = 0
            for (s in long) {
                d = (long[s] - base[s]) / ops
                total += d
                if (s == "write" || s == "read") continue
                if (d < 0.005 && d > -0.005) { other += d; continue }
                name[++k] = s; val[k] = d
            }
            for (i = 1; i <= k; i++)        # sort by count, largest first
                for (j = i + 1; j <= k; j++)
                    if (val[j] > val[i]) {
                        t = val[i]; val[i] = val[j]; val[j] = t
                        t = name[i]; name[i] = name[j]; name[j] = t
                    }
            printf "{\"peer\":\"%s\",\"workload\":\"U\",\"mode\":\"%s\",", peer, mode
            printf "\"cycles_counted\":%d,\"syscalls_per_op\":%.2f,\"per_op\":{", cycles, total
            printf "\"write\":%.2f,\"read\":%.2f", \
                (long["write"] - base["write"]) / ops, (long["read"] - base["read"]) / ops
            for (i = 1; i <= k; i++)
                printf ",\"%s\":%.2f", name[i], val[i]
            printf ",\"other\":%.2f}}\n", other
        }' "$tmp/$base.calls" "$tmp/$n.calls"
done
