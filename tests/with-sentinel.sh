#!/bin/sh
# with-sentinel.sh - run a command beside a private Sentinel setup: a
# master, 2 replicas and 3 sentinels (redis-server --sentinel) watching it
# as "redislock-test" (quorum 2, down-after 1000 ms), on free loopback
# ports in a temporary directory; stopped by PID afterwards, whatever
# happened.
#
# Usage: with-sentinel.sh COMMAND [ARG...]
# COMMAND gets in its environment:
#   REDISLOCK_TEST_SENTINEL_PORTS   "s1 s2 s3", the sentinels
#   REDISLOCK_TEST_SENTINEL_DATA    "m r1 r2", master first (as started)
#   REDISLOCK_TEST_SENTINEL_PIDS    "m r1 r2 s1 s2 s3"
#   REDISLOCK_TEST_SENTINEL_MASTER  the master's name
# It checks that each port is answered by the process it started (INFO's
# process_id), that both replicas are in sync and that every sentinel
# knows the other two and both replicas.  Exit status: COMMAND's; when
# redis-server or redis-cli is missing, a TAP skip (exit 0) outside CI and
# a hard error (99) under CI.
#
# REDIS_SERVER and REDIS_CLI as for tests/with-redis.sh; the sentinels
# run as REDIS_SENTINEL CONFIG (e.g. valkey-sentinel) when it is set, as
# REDIS_SERVER CONFIG --sentinel otherwise.
set -u

server=$(command -v "${REDIS_SERVER:-redis-server}" || true)
cli=$(command -v "${REDIS_CLI:-redis-cli}" || true)
if [ -z "$server" ] || [ -z "$cli" ]; then
    what="${REDIS_SERVER:-redis-server}/${REDIS_CLI:-redis-cli}"
    [ "${CI:-}" = true ] && { echo "Bail out! $what not found"; exit 99; }
    echo "1..0 # SKIP $what not found"
    exit 0
fi
if [ -n "${REDIS_SENTINEL:-}" ]; then
    sentinel=$(command -v "$REDIS_SENTINEL" || true)
    [ -n "$sentinel" ] || {
        [ "${CI:-}" = true ] && { echo "Bail out! $REDIS_SENTINEL not found"; exit 99; }
        echo "1..0 # SKIP $REDIS_SENTINEL not found"
        exit 0
    }
else
    sentinel=
fi
name=redislock-test
here=$(dirname "$0")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-sentinel.XXXXXX") || exit 99
root=${REDISLOCK_TEST_TMPDIR:-$tmp}
pids=
ports=
cleanup() {
    # shellcheck disable=SC2086
    sh "$here/stop-servers.sh" $pids
    for port in $ports; do
        # A server the test restarted itself, if it left one: only a
        # REDIS_SERVER, named by the pidfile in our directory.
        f=$root/sentinel-$port/redis.pid
        p=$(cat "$f" 2>/dev/null)
        if [ -n "$p" ] && { tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null |
                grep -qF "$(basename "$server")"; then
            kill -9 "$p" 2>/dev/null
        fi
        rm -rf "$root/sentinel-$port"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' INT TERM HUP

# start PORT ARGS...: a REDIS_SERVER (or $prog, when set) in
# $root/sentinel-PORT (with a pidfile, so that with-redis.sh's clean-up
# stops it even if we are killed outright); its PID appended to $pids.
prog=
start() {
    port=$1; shift
    dir=$root/sentinel-$port
    mkdir -p "$dir"
    ( cd "$dir" && exec "${prog:-$server}" "$@" --port "$port" --bind 127.0.0.1 \
        --pidfile "$dir/redis.pid" --daemonize no --logfile "$dir/log" \
        </dev/null >/dev/null 2>&1 ) &
    pids="$pids $!"
    ports="$ports $port"
}

# Ports below the kernel's ephemeral range (see with-cluster.sh).
low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[ -n "$low" ] || low=32768
span=$((low - 11000 - 10))
[ $span -gt 100 ] || span=100

start_all() {
    base=$(( ( $(od -An -N2 -tu2 /dev/urandom) % span ) + 11000 ))
    pids= ports=
    m=$base
    # No delay before a diskless sync: a demoted master resyncs at once.
    start "$m" --save '' --appendonly no --repl-diskless-sync-delay 0
    start $((base + 1)) --save '' --appendonly no --repl-diskless-sync-delay 0 \
        --replicaof 127.0.0.1 "$m"
    start $((base + 2)) --save '' --appendonly no --repl-diskless-sync-delay 0 \
        --replicaof 127.0.0.1 "$m"
    for i in 3 4 5; do
        dir=$root/sentinel-$((base + i))
        mkdir -p "$dir"
        cat > "$dir/sentinel.conf" <<EOF
sentinel monitor $name 127.0.0.1 $m 2
sentinel down-after-milliseconds $name 1000
sentinel failover-timeout $name 2000
sentinel parallel-syncs $name 2
EOF
        if [ -n "$sentinel" ]; then
            prog=$sentinel
            start $((base + i)) "$dir/sentinel.conf"
            prog=
        else
            start $((base + i)) "$dir/sentinel.conf" --sentinel
        fi
    done
    set -- $pids
    for port in $ports; do
        sh "$here/wait-server.sh" "$1" "$cli" -h 127.0.0.1 -p "$port" ||
            return 1
        shift
    done
    return 0
}

ok=0
for attempt in 1 2 3 4 5 6 7 8; do
    if start_all; then ok=1; break; fi
    cleanup
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-sentinel.XXXXXX") || exit 99
    root=${REDISLOCK_TEST_TMPDIR:-$tmp}
done
[ $ok = 1 ] || {
    echo "with-sentinel.sh: could not start the servers; their logs:" >&2
    for f in "$root"/sentinel-*/log; do
        echo "== $f" >&2; tail -n 3 "$f" >&2
    done
    exit 99
}

# nth N WORDS...: the Nth word.
nth() { n=$1; shift; eval "printf '%s' \"\${$n}\""; }
# shellcheck disable=SC2086
data="$(nth 1 $ports) $(nth 2 $ports) $(nth 3 $ports)"
# shellcheck disable=SC2086
sentinels="$(nth 4 $ports) $(nth 5 $ports) $(nth 6 $ports)"
# Replicas in sync, sentinels acquainted (each sees 2 replicas and 2
# other sentinels), within 30 s.
i=0
while :; do
    ready=1
    for r in ${data#* }; do
        "$cli" -p "$r" INFO replication 2>/dev/null |
            grep -q 'master_link_status:up' || ready=
    done
    for s in $sentinels; do
        info=$("$cli" -p "$s" SENTINEL MASTER "$name" 2>/dev/null | tr -d '\r')
        printf '%s\n' "$info" | grep -A1 -x 'num-slaves' | grep -qx 2 || ready=
        printf '%s\n' "$info" | grep -A1 -x 'num-other-sentinels' | grep -qx 2 || ready=
    done
    [ -n "$ready" ] && break
    i=$((i + 1))
    [ $i -lt 600 ] || { echo "with-sentinel.sh: sentinels not ready" >&2; exit 99; }
    sleep 0.05
done

REDISLOCK_TEST_SENTINEL_PORTS=$sentinels
REDISLOCK_TEST_SENTINEL_DATA=$data
REDISLOCK_TEST_SENTINEL_PIDS=$(echo $pids)
REDISLOCK_TEST_SENTINEL_MASTER=$name
export REDISLOCK_TEST_SENTINEL_PORTS REDISLOCK_TEST_SENTINEL_DATA \
       REDISLOCK_TEST_SENTINEL_PIDS REDISLOCK_TEST_SENTINEL_MASTER
"$@"
