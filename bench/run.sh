#!/bin/sh
# run.sh - every benchmark workload against one throwaway redis-server
# (started by tests/with-redis.sh, which exports REDISLOCK_TEST_PORT): one
# JSON line per run, then a Markdown table of them, headed by the machine,
# for the README.
#
# Usage: run.sh [BENCH]     (BENCH: ./bench/redislock-bench)
#   make bench
#   sh tests/with-redis.sh sh bench/run.sh ./bench/redislock-bench
#
# S (issue 20) first: the server's time per acquire+release cycle (INFO
# commandstats) of each of the library's modes beside go-zero's own two
# scripts (tests/gozero): 9 rounds, in each every mode's 5,000 cycles right
# after 5,000 of go-zero's; in a second table after the first.
# U runs three times each way, interleaved with the bare-hiredis reference,
# because a shared machine's load drifts between runs; the ratio
# library/raw is the median of the three pairs.  The library's client
# (U --url) runs likewise on a local Redis Cluster, with replicas and
# without (tests/with-cluster.sh), against the plain node, and, when the
# bench was built with TLS (its --version), over rediss:// against
# redis:// to a second server of ours with both ports.  The quorum client
# (U --quorum, C --quorum) runs on 5 masters of ours beside node-redlock
# (bench/node-redlock, installed here with npm ci into a temporary
# directory; its rows say why when node, npm or the install is missing).
# T (issue 18): 512 threads on one client at pool_size 16 (the default)
# and 64 (the largest), in three interleaved pairs (ratio 16/64, median),
# each run's most connections seen by a monitoring connection; then 64
# threads at 64, where no thread waits for a connection (the issue saw
# throughput flat from 8 threads).
# A (issue 19): the loop API at depth 256 against a hiredis pipeline of
# the same depth and the blocking U, in the same rounds.  W (issue 19):
# hand-offs among 1,000 waiters of the loop API on one key.
# System calls per operation come from bench/syscalls.sh (strace; skipped
# without it).  A failed run of ours (a self-check difference, a lost
# update) fails the whole; a failed node-redlock run gets a row saying so.
set -eu

usage() {
    sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"
}

case ${1:-} in
-h|--help) usage; exit 0 ;;
-*) usage >&2; exit 2 ;;
esac
bench=${1:-./bench/redislock-bench}
here=$(dirname "$0")
p=${REDISLOCK_TEST_PORT:-}
if [ -z "$p" ]; then
    echo "run.sh: REDISLOCK_TEST_PORT is not set: run me through" \
         "tests/with-redis.sh (make bench)" >&2
    exit 2
fi
server=${REDISLOCK_TEST_REDIS_SERVER:-redis-server}
cli=${REDIS_CLI:-redis-cli}
t_start=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-bench.XXXXXX")
started=                # PIDs of the servers we started, while they run
stop_started() {
    # shellcheck disable=SC2086
    [ -z "$started" ] || sh "$here/../tests/stop-servers.sh" $started
    started=
}
trap 'stop_started; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
rows=$tmp/rows          # the table's rows, in order
: > "$rows"
: > "$tmp/json"

# field LINE NAME: the value of NAME (a string or a number) in a JSON line.
field() {
    printf '%s\n' "$1" |
        sed -n -e "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" -e t \
               -e "s/.*\"$2\":\([^,}\"]*\).*/\1/p"
}

# keep LINES: print JSON lines and keep them for the table's heading.
keep() {
    printf '%s\n' "$1"
    printf '%s\n' "$1" >> "$tmp/json"
}

# run ARGS...: one benchmark run; its line is printed and kept in $last.
run() {
    last=$("$bench" --port "$p" "$@")
    keep "$last"
}

row() {
    printf '| %s | %s | %s | %s | %s | %s |\n' "$@" >> "$rows"
}

# join SEP WORDS...: the words with SEP between them.
join() {
    sep=$1
    shift
    out=$1
    shift
    for w in "$@"; do
        out="$out$sep$w"
    done
    printf '%s' "$out"
}

# S: the server's cost per cycle, each mode against go-zero's scripts.
run --workload S --gozero-dir "$here/../tests/gozero"
sline=$last

# U: library against raw, interleaved, 3 pairs per mode.
for mode in gozero counted; do
    ratios=
    rops='' rp50='' rp99='' lops='' lp50='' lp99=''
    for _ in 1 2 3; do
        run --workload U --raw --mode "$mode"
        raw=$last
        run --workload U --mode "$mode"
        lib=$last
        r=$(awk -v a="$(field "$lib" ops_per_s)" -v b="$(field "$raw" ops_per_s)" \
            'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
        ratios="$ratios $r"
        rops="$rops $(field "$raw" ops_per_s)"
        rp50="$rp50 $(field "$raw" p50_us)"
        rp99="$rp99 $(field "$raw" p99_us)"
        lops="$lops $(field "$lib" ops_per_s)"
        lp50="$lp50 $(field "$lib" p50_us)"
        lp99="$lp99 $(field "$lib" p99_us)"
    done
    # shellcheck disable=SC2086
    median=$(printf '%s\n' $ratios | sort -n | sed -n 2p)
    # shellcheck disable=SC2086
    line="{\"peer\":\"redislock/hiredis-raw\",\"workload\":\"U\",\"mode\":\"$mode\",\"ratios\":[$(join , $ratios)],\"median_ratio\":$median}"
    printf '%s\n' "$line"
    printf '%s\n' "$line" >> "$tmp/json"
    # shellcheck disable=SC2086
    {
        row "U ($mode)" "bare hiredis (\`--raw\`)" "$(join ' / ' $rops)" \
            "$(join ' / ' $rp50)" "$(join ' / ' $rp99)" \
            "acquire+release cycles of the library's 2 EVALSHA; self-check: $(field "$raw" self_check)"
        row "U ($mode)" "redislock" "$(join ' / ' $lops)" \
            "$(join ' / ' $lp50)" "$(join ' / ' $lp99)" \
            "each run right after a raw one; library/raw $(join ' / ' $ratios), **median $median**; $(field "$lib" evalsha_per_op) EVALSHA per lock operation"
    }
done

# T: threads on one client, the pool bounded (issue 18).  pool_size 16 is
# the URL's default (no parameter: what a program gets); 64 the largest.
# A failed T run (a call that failed, e.g. no connection within the
# command timeout, or more connections than pool_size) gets its row and
# fails the whole at the end, after the table.
tthreads=512
tn=60000
t_fail=
# trun ARGS...: one T run; its line in $last (and kept), or $last empty
# and the failure in $t_err (and added to $t_fail).
trun() {
    t_err=
    if last=$("$bench" --port "$p" --workload T "$@" 2>"$tmp/t.err"); then
        keep "$last"
    else
        t_err="exit $?: $(tail -n 1 "$tmp/t.err" | sed 's/^redislock-bench: //')"
        echo "run.sh: T $*: FAILED: $t_err" >&2
        t_fail="$t_fail${t_fail:+; }$t_err"
        last=
    fi
}
# tf NAME: the field NAME of $last, or - when the run failed.
tf() {
    v=$(field "$last" "$1")
    printf '%s' "${v:--}"
}
# median WORDS...: the median of the numbers among WORDS ("-" if none).
median() {
    printf '%s\n' "$@" | grep '^[0-9.][0-9.]*$' | sort -n | awk '
        { v[NR] = $1 }
        END { if (NR == 0) print "-"
              else if (NR % 2) print v[(NR + 1) / 2]
              else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
tratios='' t16ops='' t16p50='' t16p99='' t16conn='' t16max=''
t64ops='' t64p50='' t64p99='' t64conn='' t64max=''
t16bad='' t16why='' t64bad='' t64why=''  # failed runs, the last's failure
# failed BAD WHY: "; run(s) BAD FAILED: WHY", or nothing when none failed.
failed() {
    fwhy=$2
    # shellcheck disable=SC2086
    set -- $1
    [ $# -eq 0 ] || printf '; run%s %s FAILED: %s' \
        "$([ $# -eq 1 ] || echo s)" "$(join ', ' "$@")" "$fwhy"
}
for ti in 1 2 3; do
    trun --threads $tthreads --n $tn --label pool16
    [ -z "$t_err" ] || { t16bad="$t16bad $ti"; t16why=$t_err; }
    t16ops="$t16ops $(tf ops_per_s)"
    t16p50="$t16p50 $(tf p50_us)"
    t16p99="$t16p99 $(tf p99_us)"
    t16conn="$t16conn $(tf max_client_connections)"
    t16max="$t16max $(tf max_connected_clients)"
    ta=$(tf ops_per_s)
    trun --threads $tthreads --n $tn --label pool64 \
        --url "redis://127.0.0.1:$p?pool_size=64"
    [ -z "$t_err" ] || { t64bad="$t64bad $ti"; t64why=$t_err; }
    t64ops="$t64ops $(tf ops_per_s)"
    t64p50="$t64p50 $(tf p50_us)"
    t64p99="$t64p99 $(tf p99_us)"
    t64conn="$t64conn $(tf max_client_connections)"
    t64max="$t64max $(tf max_connected_clients)"
    tb=$(tf ops_per_s)
    if [ "$ta" = - ] || [ "$tb" = - ]; then
        tratios="$tratios -"
    else
        tratios="$tratios $(awk -v a="$ta" -v b="$tb" \
            'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
    fi
done
# shellcheck disable=SC2086
tmedian=$(median $tratios)
# shellcheck disable=SC2086
t16median=$(median $t16ops)
# shellcheck disable=SC2086
keep "{\"peer\":\"pool16/pool64\",\"workload\":\"T\",\"threads\":$tthreads,\"ratios\":[$(join , $tratios | sed 's/-/null/g')],\"median_ratio\":$(printf '%s' "$tmedian" | sed 's/^-$/null/')}"
trun --threads 64 --n $tn --label threads64 \
    --url "redis://127.0.0.1:$p?pool_size=64"
t64err1=${t_err:+; FAILED ($t_err)}
tflat=-
if [ -n "$last" ] && [ "$t16median" != - ]; then
    tflat=$(awk -v a="$t16median" -v b="$(tf ops_per_s)" \
        'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
fi
# shellcheck disable=SC2086
{
    row "T $tthreads threads, one client" "redislock, pool_size=16 (the default)" \
        "$(join ' / ' $t16ops)" "$(join ' / ' $t16p50)" "$(join ' / ' $t16p99)" \
        "$tn acquire+release cycles in all, a key each; connections used at most $(join ' / ' $t16conn) (connected_clients $(join ' / ' $t16max), the monitor's included)$(failed "$t16bad" "$t16why")"
    row "T $tthreads threads, one client" "redislock, pool_size=64 (the largest)" \
        "$(join ' / ' $t64ops)" "$(join ' / ' $t64p50)" "$(join ' / ' $t64p99)" \
        "each right after a pool_size=16 run; 16/64 $(join ' / ' $tratios), **median $tmedian**; connections used at most $(join ' / ' $t64conn) (connected_clients $(join ' / ' $t64max))$(failed "$t64bad" "$t64why")"
    row "T 64 threads, one client" "redislock, pool_size=64" \
        "$(tf ops_per_s)" "$(tf p50_us)" "$(tf p99_us)" \
        "no thread waits for a connection; $tthreads threads at pool_size=16 (median run) reach $tflat of this; connections used at most $(tf max_client_connections)$t64err1"
}

# The library's client (U --url) in 3 interleaved pairs: PAIRS runs them,
# "$0" being the bench: "$1" labelled "$2", then "$3" labelled "$4".
# shellcheck disable=SC2016
pairs='set -e
for _ in 1 2 3; do
    "$0" --workload U --url "$1" --label "$2"
    "$0" --workload U --url "$3" --label "$4"
done'

# compare LINES PEER BASE BASE_PEER OTHER OTHER_PEER [WORKLOAD BASE_NOTE]:
# LINES are 3 interleaved pairs of U lines (a "client" field BASE, then
# one OTHER: PAIRS makes them); print and keep them, then a line PEER
# with the ratios OTHER/BASE and their median, and a row each side
# (workload WORKLOAD, "U (client)" by default; BASE's notes BASE_NOTE).
compare() {
    cwork=${7:-U (client)}
    cnote=${8:-"the library's client, acquire+release cycles"}
    keep "$1"
    # pick LABEL FIELD: the FIELD of LABEL's lines, space-separated.
    pick() {
        printf '%s\n' "$1" | grep "\"client\":\"$2\"" |
            sed "s/.*\"$3\":\([0-9]*\).*/\1/" | tr '\n' ' '
    }
    b_ops=$(pick "$1" "$3" ops_per_s) o_ops=$(pick "$1" "$5" ops_per_s)
    cratios=$(awk -v o="$o_ops" -v b="$b_ops" 'BEGIN {
        n = split(o, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) printf "%.3f ", (y[i] > 0 ? x[i] / y[i] : 0) }')
    # shellcheck disable=SC2086
    cmedian=$(printf '%s\n' $cratios | sort -n | sed -n 2p)
    # shellcheck disable=SC2086
    keep "{\"peer\":\"$2\",\"workload\":\"U\",\"ratios\":[$(join , $cratios)],\"median_ratio\":$cmedian}"
    # shellcheck disable=SC2086,SC2046
    {
        row "$cwork" "$4" "$(join ' / ' $b_ops)" \
            "$(join ' / ' $(pick "$1" "$3" p50_us))" \
            "$(join ' / ' $(pick "$1" "$3" p99_us))" "$cnote"
        row "$cwork" "$6" "$(join ' / ' $o_ops)" \
            "$(join ' / ' $(pick "$1" "$5" p50_us))" \
            "$(join ' / ' $(pick "$1" "$5" p99_us))" \
            "each right after a $3 run; $2 $(join ' / ' $cratios), **median $cmedian**"
    }
}

# Cluster: the client on a local Redis Cluster (tests/with-cluster.sh)
# against the same client on the plain node, twice: 3 masters with a
# replica each, as the tests run it, then 3 masters alone (what the
# replicas cost on this machine).  The pairs start once every replica has
# made its first sync (a fork and a transfer, some 5 s after the cluster
# is created), not during it.  Skipped when the cluster cannot start.
for replicas in 1 0; do
    if [ $replicas = 1 ]; then
        label=cluster what="3 masters + 3 replicas"
    else
        label=cluster-no-replicas what="3 masters, no replicas"
    fi
    clines=$(REDISLOCK_TEST_CLUSTER_REPLICAS=$replicas \
        sh "$here/../tests/with-cluster.sh" sh -c '
            seed=${REDISLOCK_TEST_CLUSTER_PORTS%% *}
            sh -c "$1" "$0" "redis://127.0.0.1:$2" standalone \
                "redis://127.0.0.1:$seed?cluster=1" "$3"' \
        "$bench" "$pairs" "$p" "$label" 2>"$tmp/cluster.err" | grep '^{') ||
        clines=
    if [ "$(printf '%s\n' "$clines" | grep -c '^{')" = 6 ]; then
        compare "$clines" "$label/standalone" standalone "one standalone node" \
            "$label" "Redis Cluster, $what (\`?cluster=1\`)"
    else
        echo "run.sh: no cluster rows ($what):" >&2
        tail -n 5 "$tmp/cluster.err" >&2
        row "U (client)" "Redis Cluster, $what" "-" "-" "-" \
            "skipped: the local cluster did not start, or a run failed"
    fi
done

# TLS: a second redis-server with a plain and a TLS port (throwaway
# certificates from tests/tls-certs.sh), the client over rediss:// against
# the same client over redis:// to that server, 3 pairs: one server for
# both, so that the ratio is TLS's cost alone.

# free_ports N: the first of N free-looking loopback ports in a row below
# the kernel's ephemeral range, which the clients' own connections draw
# from (as tests/with-cluster.sh); a clash shows in serve's check.
free_ports() {
    low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ -n "$low" ] || low=32768
    echo $(( ( $(od -An -N2 -tu2 /dev/urandom) % (low - $1 - 11000) ) + 11000 ))
}

# serve PORT [ARG...]: start a redis-server of ours on loopback PORT
# (ARG: more options), without persistence, in a directory with a
# pidfile under tests/with-redis.sh's (whose clean-up stops it should we
# be killed; its log is $served_dir/log); its PID joins $started; 0 once
# PORT is answered by that process (tests/wait-server.sh).
serve() {
    served_dir=${REDISLOCK_TEST_TMPDIR:-$tmp}/bench-$1
    mkdir -p "$served_dir"
    "$server" --port "$@" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$served_dir" --pidfile "$served_dir/redis.pid" \
        --logfile "$served_dir/log" --daemonize no </dev/null >/dev/null 2>&1 &
    started="$started $!"
    sh "$here/../tests/wait-server.sh" "$!" "$cli" -h 127.0.0.1 -p "$1"
}

# start_with START: run the function START (which serves on free ports)
# up to 8 times, the servers of a failed try stopped before the next (a
# port taken by somebody else fails a try); 0 once one succeeded.
start_with() {
    for _ in 1 2 3 4 5 6 7 8; do
        "$1" && return 0
        stop_started
    done
    return 1
}

# tls_start: start it on two free ports; 0 once both are answered by the
# process we started.
tls_start() {
    plain_port=$(free_ports 2)
    tls_port=$((plain_port + 1))
    serve "$plain_port" --tls-port "$tls_port" \
        --tls-cert-file "$tmp/certs/server.crt" \
        --tls-key-file "$tmp/certs/server.key" \
        --tls-ca-cert-file "$tmp/certs/ca.crt" --tls-auth-clients no &&
    sh "$here/../tests/wait-server.sh" "${started##* }" "$cli" -h 127.0.0.1 \
        -p "$tls_port" --tls --cacert "$tmp/certs/ca.crt"
}
case $("$bench" --version) in
*", with TLS"*)
    sh "$here/../tests/tls-certs.sh" "$tmp/certs"
    if start_with tls_start; then
        # A failed run here fails the whole (set -e), as U's do.
        tlines=$(sh -c "$pairs" "$bench" "redis://127.0.0.1:$plain_port" plain \
            "rediss://127.0.0.1:$tls_port?cacert=$tmp/certs/ca.crt" tls)
        stop_started
        compare "$tlines" tls/plain plain "one node, plain text (\`redis://\`)" \
            tls "the same node over TLS (\`rediss://\`)"
    else
        echo "run.sh: the TLS server did not start; its log:" >&2
        tail -n 5 "$served_dir/log" >&2 || :
        row "U (client)" "TLS (\`rediss://\`)" "-" "-" "-" \
            "skipped: the TLS server did not start"
    fi
    ;;
*)
    row "U (client)" "TLS (\`rediss://\`)" "-" "-" "-" \
        "skipped: built without TLS"
    ;;
esac

# Quorum (issue 11): 5 masters of ours, redislock's quorum client beside
# node-redlock (bench/node-redlock: the npm redlock over ioredis, put in
# a temporary directory by npm ci from its lock file) on the same masters:
# U in 3 interleaved pairs (node-redlock first in each, then ours; the
# ratio is ours/node-redlock); C 8 x 200 with acquire_wait polling every
# 5 ms (a quorum's waiter pauses 1 to 5 ms between tries), with try +
# sleep 1 ms, and node-redlock retrying after 3 +- 2 ms (redlock's
# delay + floor(uniform(-jitter, jitter)): 1 to 4 ms).  Every lease is
# 10500 ms, driftFactor 0.01 both; the racy counter lives on the
# tests/with-redis.sh server for both.  Each node process holds
# /dev/cpu_dma_latency at 0 as redislock-bench does (the JSON says).
qn=5
qn_m=200
quorum_start() {
    qbase=$(free_ports $qn)
    qurls=
    i=0
    while [ $i -lt $qn ]; do
        serve $((qbase + i)) || return 1
        qurls="$qurls${qurls:+,}redis://127.0.0.1:$((qbase + i))"
        i=$((i + 1))
    done
}
# Node and the modules, or why not: $node_skip.
node_dir=$tmp/node-redlock
node_skip=
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    node_skip="node or npm not found"
else
    mkdir -p "$node_dir"
    for f in package.json package-lock.json .npmrc bench.js; do
        cp "$here/node-redlock/$f" "$node_dir/"
    done
    if ! (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) \
            >"$tmp/npm.log" 2>&1; then
        node_skip="npm ci failed ($(grep -v '^npm warn' "$tmp/npm.log" | tail -n 1))"
    fi
fi
if [ -n "$node_skip" ]; then
    echo "run.sh: no node-redlock rows: $node_skip" >&2
fi
# nodebench ARGS...: one node-redlock run; its line in $last, or its
# status and last words in $node_fail.
nodebench() {
    node_fail=
    if last=$(node "$node_dir/bench.js" --masters "$qurls" "$@" 2>"$tmp/node.err"); then
        keep "$last"
    else
        node_fail="failed (exit $?): $(tail -n 1 "$tmp/node.err")"
        echo "run.sh: node-redlock $*: $node_fail" >&2
    fi
}
if ! start_with quorum_start; then
    echo "run.sh: the quorum's masters did not start; a log:" >&2
    tail -n 5 "$served_dir/log" >&2 || :
    row "U (quorum of $qn)" "-" "-" "-" "-" \
        "skipped: the $qn masters did not start"
else
    qwhat="$qn masters (\`redislock_client_open_quorum\`)"
    if [ -z "$node_skip" ]; then
        qlines=
        for _ in 1 2 3; do
            nodebench --workload U --n 10000 || :
            [ -z "$node_fail" ] || break
            qlines="$qlines$last
"
            qlines="$qlines$("$bench" --workload U --n 10000 --quorum "$qurls" \
                --label redislock-quorum)
"
        done
    fi
    if [ -z "$node_skip" ] && [ -z "$node_fail" ]; then
        nline=$(printf '%s' "$qlines" | sed -n 1p)
        compare "$(printf '%s' "$qlines")" redislock-quorum/node-redlock \
            node-redlock "node-redlock $(field "$nline" redlock) (ioredis $(field "$nline" ioredis)), same $qn masters" \
            redislock-quorum "redislock, quorum of $qwhat" "U (quorum of $qn)" \
            "lock+unlock cycles, one connection per master; $(field "$nline" evalsha_per_op) scripts per lock operation on the first master"
    else
        [ -n "$node_skip" ] || node_skip=$node_fail
        qops='' qp50='' qp99=''
        for _ in 1 2 3; do
            run --workload U --n 10000 --quorum "$qurls" --label redislock-quorum
            qops="$qops $(field "$last" ops_per_s)"
            qp50="$qp50 $(field "$last" p50_us)"
            qp99="$qp99 $(field "$last" p99_us)"
        done
        # shellcheck disable=SC2086
        row "U (quorum of $qn)" "redislock, quorum of $qwhat" \
            "$(join ' / ' $qops)" "$(join ' / ' $qp50)" "$(join ' / ' $qp99)" \
            "acquire+release cycles, alone: no node-redlock run"
        row "U (quorum of $qn)" node-redlock "-" "-" "-" "skipped: $node_skip"
    fi
    # C: ours waiting, ours trying, node-redlock retrying.
    for how in wait poll node; do
        case $how in
        wait)
            run --workload C --k 8 --m $qn_m --quorum "$qurls" --wait --poll-ms 5
            peer="redislock, quorum of $qn"
            what="\`acquire_wait\`, poll 5 ms (a pause of 1 to 5 ms between tries)" ;;
        poll)
            run --workload C --k 8 --m $qn_m --quorum "$qurls"
            peer="redislock, quorum of $qn"
            what="try + sleep 1 ms: $(field "$last" refused_tries) refused tries" ;;
        node)
            peer=node-redlock
            if [ -n "$node_skip" ]; then
                row "C 8x$qn_m (quorum of $qn)" "$peer" "-" "-" "-" "skipped: $node_skip"
                continue
            fi
            nodebench --workload C --port "$p" --k 8 --m $qn_m || :
            if [ -n "$node_fail" ]; then
                row "C 8x$qn_m (quorum of $qn)" "$peer" "-" "-" "-" "$node_fail"
                continue
            fi
            what="redlock's retries after 3 +- 2 ms (1 to 4): $(field "$last" refused_tries) refused tries" ;;
        esac
        row "C 8x$qn_m (quorum of $qn)" "$peer" "$(field "$last" ops_per_s)" \
            "$(field "$last" p50_us)" "$(field "$last" p99_us)" \
            "$what; $(field "$last" scripts_per_cs) scripts per section on the first master; counter exact: $(field "$last" counter_ok)"
    done
    stop_started
fi

# System calls per operation (strace: slow, so not timed here).
status=0
sc=$(sh "$here/syscalls.sh" --port "$p" "$bench") || status=$?
if [ $status -eq 0 ]; then
    printf '%s\n' "$sc"
    printf '%s\n' "$sc" >> "$tmp/json"
    printf '%s\n' "$sc" | while IFS= read -r line; do
        peer=$(field "$line" peer)
        [ "$peer" = hiredis-raw ] && peer="bare hiredis (\`--raw\`)"
        per=$(printf '%s\n' "$line" |
              sed 's/.*"per_op":{\(.*\)}}.*/\1/; s/"//g; s/:/ /g; s/,/, /g
                   s/, other 0\.00$//')
        row "U (gozero), under strace" "$peer" "-" "-" "-" \
            "**$(field "$line" syscalls_per_op) system calls per operation** ($per); $(field "$line" cycles_counted) cycles counted"
    done
elif [ $status -eq 77 ]; then
    echo "run.sh: system calls not counted (see bench/syscalls.sh)" >&2
    row "U, under strace" "-" "-" "-" "-" "not run: strace missing or not permitted"
else
    exit $status
fi

# R: re-entry.
for mode in gozero counted; do
    run --workload R --mode "$mode"
    if [ "$mode" = gozero ]; then what="acquire, re-acquire, release"
    else what="acquire, re-acquire, release, release"; fi
    row "R ($mode)" redislock "$(field "$last" ops_per_s)" \
        "$(field "$last" p50_us)" "$(field "$last" p99_us)" "$what (ops = cycles)"
done

# C: contention, 8 x 500 and 64 x 100, polling and waiting, both modes.
for km in "8 500" "64 100"; do
    k=${km% *}
    m=${km#* }
    for mode in gozero counted; do
        for how in poll wait; do
            if [ $how = wait ]; then
                run --workload C --k "$k" --m "$m" --mode "$mode" --wait
                what="\`acquire_wait\`"
            else
                run --workload C --k "$k" --m "$m" --mode "$mode"
                what="try + sleep 1 ms"
            fi
            row "C ${k}x$m ($mode)" redislock "$(field "$last" ops_per_s)" \
                "$(field "$last" p50_us)" "$(field "$last" p99_us)" \
                "$what: $(field "$last" refused_tries) refused tries, $(field "$last" scripts_per_cs) scripts + $(field "$last" blpop_per_cs) BLPOP per section; counter exact: $(field "$last" counter_ok)"
        done
    done
done

# H: hand-off.
for mode in gozero counted; do
    run --workload H --mode "$mode"
    row "H ($mode)" redislock "$(field "$last" ops_per_s)" \
        "$(field "$last" p50_us)" "$(field "$last" p99_us)" \
        "release -> the blocked waiter holds the lock (latency of that)"
done

# A: the event-loop API (issue 19), one thread, 256 operations in flight,
# beside bare hiredis pipelining the same commands 256 at a time and the
# blocking API's one-thread U, in the same rounds.  The semaphore's row
# (each key a semaphore of one permit) runs its own scripts; the bare
# pipeline beside it replays go-zero's commands, the mutex's reference.
for mode in gozero counted semaphore; do
    run --workload A --mode "$mode" --depth 256 --rounds 9
    row "A ($mode), depth 256" "redislock, loop API (poll)" \
        "$(field "$last" median_cycles_per_s)" "$(field "$last" p50_us)" \
        "$(field "$last" p99_us)" \
        "one thread; bare hiredis pipelining 256 at a time $(field "$last" hiredis_pipelined_cycles_per_s) cycles/s, **ratio $(field "$last" ratio_to_hiredis)**; blocking U $(field "$last" blocking_U_cycles_per_s), **ratio $(field "$last" ratio_to_blocking)**; client CPU $(field "$last" client_cpu_us_per_cycle) us/cycle (hiredis $(field "$last" hiredis_client_cpu_us_per_cycle)); medians of 9 rounds"
done

# W: waiters of the event-loop API (issue 19): 1,000 on one key of one
# client in one thread, each holder releasing at once and waiting again
# (the semaphore: one permit handed on).
for mode in gozero counted semaphore; do
    run --workload W --mode "$mode" --waiters 1000 --n 20000
    row "W ($mode), 1000 waiters" "redislock, loop API (poll)" \
        "$(field "$last" ops_per_s)" "$(field "$last" p50_us)" \
        "$(field "$last" p99_us)" \
        "release -> the next of 1000 \`acquire_wait_async\` waiters on one key holds it (one client, one thread, each holder waiting again at once; poll interval 100 ms); **$(field "$last" connections) connections** while they wait (the H rows: one waiter, with a thread and a connection of its own)"
done

# The table, headed by what it was measured on.
dma=$(sed -n 's/.*"cpu_dma_latency":"\([^"]*\)".*/\1/p' "$tmp/json" | sort -u)
if [ "$dma" = "0 held" ]; then
    dma="held at 0 in every run"
else
    dma=$(printf '%s\n' "$dma" | sed 's/$/;/' | tr '\n' ' ' | sed 's/; $//')
fi
if [ -n "${MAKELEVEL:-}" ]; then
    cmd="make bench"
else
    cmd="sh tests/with-redis.sh sh $0 $bench"
fi
cat <<EOF

Benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - t_start)) s:

- Machine: $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | sed -n 1p), $(uname -sr)
- Server: $("$server" --version 2>/dev/null || echo unknown)
- Client: $("$bench" --version | sed 's/^redislock-bench: //')
- /dev/cpu_dma_latency: $dma
- Command: \`$cmd\`

ops/s: cycles (U, R, T), critical sections (C) or hand-offs (H) per
second; p50/p99: one cycle (U, R; T: the wait for a connection
included), the wait for the lock (C), release to the waiter holding it
(H).

| workload | peer | ops/s | p50 µs | p99 µs | notes |
|---|---|---|---|---|---|
EOF
cat "$rows"

# The server's cost (S), a row per mode.
sf() {
    v=$(field "$sline" "$1")
    printf '%s' "${v:--}"
}
cat <<EOF

Server time per acquire+release cycle (workload S: \`INFO commandstats\`
after \`CONFIG RESETSTAT\`, the usec of every command the cycle sends,
the scripts' own commands inside theirs; $(sf rounds) rounds, in each
every mode's $(sf cycles_per_chunk) cycles right after as many of
go-zero's; the medians, and the range of the rounds' ratios):

| mode | a cycle | server µs per cycle | ratio to go-zero's scripts | rounds | bound (issue 20) |
|---|---|---|---|---|---|
| go-zero's own scripts | \`lockscript\` + \`delscript\` (EVALSHA) | $(sf gozero_us) | 1 | - | - |
EOF
for mode in plain nowakeups fencing waiting counted counted_fencing; do
    case $mode in
    plain) what="\`redislock_new\`: the defaults (wake-ups on)" ;;
    nowakeups) what="\`redislock_set_wakeups(lock, false)\`" ;;
    fencing) what="\`redislock_set_fencing(lock, true)\`" ;;
    waiting) what="\`redislock_acquire_wait\` on the free lock" ;;
    counted) what="\`redislock_new_counted\`" ;;
    counted_fencing) what="counted, with fencing" ;;
    esac
    printf '| %s | %s | %s | **%s** | %s to %s | %s |\n' "$mode" "$what" \
        "$(sf "${mode}_us")" "$(sf "${mode}_ratio")" "$(sf "${mode}_min")" \
        "$(sf "${mode}_max")" "$(sf "${mode}_bound")"
done
if [ -n "$t_fail" ]; then
    echo "run.sh: T failed: $t_fail" >&2
    exit 1
fi
