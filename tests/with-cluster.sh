#!/bin/sh
# with-cluster.sh - run a command beside a private Redis Cluster: 6
# redis-server processes (3 masters, 3 replicas) with cluster-enabled,
# on free loopback ports in a temporary directory, joined with
# `redis-cli --cluster create`; stopped by PID afterwards, whatever
# happened.
#
# Usage: with-cluster.sh COMMAND [ARG...]
# COMMAND gets REDISLOCK_TEST_CLUSTER_PORTS ("p1 p2 ... p6", masters
# first as created) and REDISLOCK_TEST_CLUSTER_PIDS in its environment.
# REDISLOCK_TEST_CLUSTER_REPLICAS=N (default 1) gives each master N
# replicas (`--cluster-replicas N`, 3 * (N + 1) servers): 0 makes a
# cluster of 3 masters alone (bench/run.sh compares the two).
# COMMAND starts once every node reports cluster_state:ok, every node
# agrees on the slots' owners (a replica is known as one everywhere), and
# every replica has made its first sync and follows its master
# (master_link_status:up).  The nodes run with repl-diskless-sync-delay 0,
# so that the sync starts at once rather than 5 s later.
# It checks that each port is answered by the process it started (INFO's
# process_id).  Exit status: COMMAND's; 77 (skip) when redis-server or
# redis-cli is missing outside CI.
set -u

replicas=${REDISLOCK_TEST_CLUSTER_REPLICAS:-1}
case $replicas in
''|*[!0-9]*)
    echo "with-cluster.sh: REDISLOCK_TEST_CLUSTER_REPLICAS is a number" >&2
    exit 99 ;;
esac
nodes=$((3 * (replicas + 1)))

# REDIS_SERVER and REDIS_CLI as for tests/with-redis.sh.
server=$(command -v "${REDIS_SERVER:-redis-server}" || true)
cli=$(command -v "${REDIS_CLI:-redis-cli}" || true)
if [ -z "$server" ] || [ -z "$cli" ]; then
    what="${REDIS_SERVER:-redis-server}/${REDIS_CLI:-redis-cli}"
    [ "${CI:-}" = true ] && { echo "Bail out! $what not found"; exit 99; }
    echo "1..0 # SKIP $what not found"
    exit 0
fi

here=$(dirname "$0")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-cluster.XXXXXX") || exit 99
pids=
cleanup() {
    # shellcheck disable=SC2086
    sh "$here/stop-servers.sh" $pids
    for port in ${ports:-}; do
        rm -rf "${REDISLOCK_TEST_TMPDIR:-$tmp}/cluster-$port"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' INT TERM HUP

# The ports and their bus ports (+10000) lie below the kernel's
# ephemeral range, which the clients' own connections (and the nodes'
# bus links) draw from: a port there may be taken at any moment.  A
# server that finds its port taken anyway exits, which the check below
# catches, and all of them start again elsewhere.
low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[ -n "$low" ] || low=32768
span=$((low - 10000 - nodes - 11000))
[ $span -gt 100 ] || span=100
start_all() {
    base=$(( ( $(od -An -N2 -tu2 /dev/urandom) % span ) + 11000 ))
    ports=
    pids=
    i=0
    while [ $i -lt $nodes ]; do
        port=$((base + i))
        i=$((i + 1))
        # Under tests/with-redis.sh, in its directory with a pidfile, so
        # that its clean-up stops a node even if we are killed outright.
        dir=${REDISLOCK_TEST_TMPDIR:-$tmp}/cluster-$port
        mkdir -p "$dir"
        ( cd "$dir" && exec "$server" --port "$port" --bind 127.0.0.1 \
            --cluster-enabled yes --cluster-config-file nodes.conf \
            --cluster-node-timeout 2000 --appendonly no --save '' \
            --repl-diskless-sync-delay 0 \
            --pidfile "$dir/redis.pid" \
            --daemonize no --logfile "$dir/log" ) &
        pids="$pids $!"
        ports="$ports $port"
    done
    set -- $pids
    for port in $ports; do
        sh "$here/wait-server.sh" "$1" "$cli" -h 127.0.0.1 -p "$port" ||
            return 1
        shift
    done
    # Join them.  redis-cli waits for the nodes to agree without a limit
    # of its own ("Waiting for the cluster to join"): a node whose bus
    # port another process took meanwhile never joins, and the create
    # would wait for ever (seen as a test's 600 s timeout) - so it gets
    # 60 s, and a failed create starts again on other ports.
    addrs=
    for port in $ports; do addrs="$addrs 127.0.0.1:$port"; done
    # shellcheck disable=SC2086
    timeout 60 "$cli" --cluster create $addrs --cluster-replicas \
        "$replicas" --cluster-yes > "$tmp/create.log" 2>&1 || {
        echo "with-cluster.sh: redis-cli --cluster create failed or took" \
             "60 s (ports $ports); trying other ports:" >&2
        tail -n 5 "$tmp/create.log" >&2
        return 1
    }
    return 0
}

ok=0
for attempt in 1 2 3 4 5 6 7 8; do
    if start_all; then ok=1; break; fi
    cleanup; tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-cluster.XXXXXX") || exit 99
done
[ $ok = 1 ] || {
    echo "with-cluster.sh: could not start and join $nodes servers; their" \
         "logs:" >&2
    for f in "${REDISLOCK_TEST_TMPDIR:-$tmp}"/cluster-*/log; do
        echo "== $f" >&2; tail -n 3 "$f" >&2
    done
    exit 99
}

# Wait (50 ms apart, 30 s at most) until "$@" succeeds; on a timeout say
# what was awaited and fail.
await() {
    what=$1; shift
    i=0
    until "$@"; do
        i=$((i + 1))
        [ $i -lt 600 ] || {
            echo "with-cluster.sh: waited 30 s for $what, in vain" >&2
            exit 99
        }
        sleep 0.05
    done
}
# (Each question within 5 s: a node that hangs is a failed try.)
cluster_ok() { timeout 5 "$cli" -h 127.0.0.1 -p "$1" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok'; }
# Every node's CLUSTER NODES: "master" lines, as "ip:port@bus" sorted.
masters_seen() {
    timeout 5 "$cli" -h 127.0.0.1 -p "$1" CLUSTER NODES 2>/dev/null |
        awk '$3 ~ /master/ { print $2 }' | sort | tr '\n' ' '
}
same_view() {
    first=
    for port in $ports; do
        v=$(masters_seen "$port")
        [ "$(echo "$v" | wc -w)" -eq 3 ] || return 1
        if [ -z "$first" ]; then first=$v; elif [ "$v" != "$first" ]; then return 1; fi
    done
}
synced() {
    [ "$(for port in $ports; do
             timeout 5 "$cli" -h 127.0.0.1 -p "$port" INFO replication 2>/dev/null
         done | grep -c '^master_link_status:up')" -eq $((3 * replicas)) ]
}
for port in $ports; do
    await "cluster_state:ok on $port" cluster_ok "$port"
done
await "every node to know the same 3 masters" same_view
await "all $((3 * replicas)) replicas to finish their first sync (master_link_status:up)" synced

REDISLOCK_TEST_CLUSTER_PORTS=$(echo $ports)
REDISLOCK_TEST_CLUSTER_PIDS=$(echo $pids)
export REDISLOCK_TEST_CLUSTER_PORTS REDISLOCK_TEST_CLUSTER_PIDS
"$@"
