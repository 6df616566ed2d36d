#!/bin/sh
# t_syscalls.sh - in steady state each acquire, extend, ttl, held and
# release makes one write and one read system call (hiredis 1.x reads
# with recv, which strace names recvfrom) (at most 2.05 system
# calls per operation over all), on a borrowed context (through the
# executor) and on a client's handle (on the loop's machine, driven for
# the blocking calls by src/drive.c).  Counted with strace -f -c over two
# run lengths, whose
# difference cancels start-up and connection.  TAP output; skipped
# without strace (CI installs it).  Run by tests/with-redis.sh.
set -u
srcdir=${REDISLOCK_TEST_SRCDIR:-.}
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
# A private redis-server, unless one was given (the count is under strace,
# never under valgrind).
if [ -z "${REDISLOCK_TEST_PORT:-}" ]; then
    REDISLOCK_TEST_WRAPPER= exec sh "$srcdir/tests/with-redis.sh" sh "$0" "$@"
fi
short=200
long=2200
ops=$(( (long - short) * 5 ))

if ! command -v strace >/dev/null 2>&1 ||
   ! strace -f -c -o /dev/null true >/dev/null 2>&1; then
    echo "1..0 # SKIP strace missing or cannot trace (apt-get install strace)"
    exit 0
fi
# LeakSanitizer cannot run under ptrace: the count does without it.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-t_syscalls.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# count N MODE NAME: "syscall calls" lines of strace -c into $tmp/NAME.
count() {
    strace -f -c -o "$tmp/$3.raw" "$loop" "$1" $2 || return 1
    awk '$NF != "total" && $(NF-1) ~ /^[0-9]+$/ { print $NF, $(NF-1) }
         $NF != "total" && NF == 6 { print $NF, $4 }' "$tmp/$3.raw" |
        awk '{ c[$1] = $2 } END { for (k in c) print k, c[k] }' > "$tmp/$3"
}

echo "1..2"
n=0
loop=$builddir/tests/syscall_loop
for mode in borrowed client; do
    n=$((n + 1))
    arg=; [ $mode != borrowed ] && arg=client
    if ! count $short "$arg" s || ! count $long "$arg" l; then
        echo "not ok $n - $mode: the loop ran under strace"
        continue
    fi
    # Per-operation figures from the difference of the two runs.
    res=$(awk -v ops=$ops 'NR == FNR { s[$1] = $2; next } { l[$1] = $2 }
        END { for (k in l) { d = l[k] - s[k]; all += d
                  if (k == "read" || k == "recvfrom" || k == "recvmsg") r += d
                  else if (k == "write" || k == "sendto" || k == "sendmsg") w += d
                  else other = other " " k ":" d }
              printf "%.3f %.3f %.3f%s\n", all / ops, w / ops, r / ops, other }' \
        "$tmp/s" "$tmp/l")
    set -- $res
    total=$1 writes=$2 reads=$3
    shift 3
    if awk -v t="$total" -v w="$writes" -v r="$reads" \
        'BEGIN { exit !(t <= 2.05 && w >= 0.99 && w <= 1.01 && r >= 0.99 && r <= 1.01) }'; then
        echo "ok $n - $mode: $total system calls per operation ($writes writes, $reads reads)"
    else
        echo "not ok $n - $mode: $total system calls per operation ($writes writes, $reads reads; others:$*)"
    fi
done
