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
# U runs three times each way, interleaved with the bare-hiredis reference,
# because a shared machine's load drifts between runs; the ratio
# library/raw is the median of the three pairs.  System calls per
# operation come from bench/syscalls.sh (strace; skipped without it).  A
# failed run (a self-check difference, a lost update) fails the whole.
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
started=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rows=$tmp/rows          # the table's rows, in order
: > "$rows"
: > "$tmp/json"

# field LINE NAME: the value of NAME (a string or a number) in a JSON line.
field() {
    printf '%s\n' "$1" |
        sed -n -e "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" -e t \
               -e "s/.*\"$2\":\([^,}\"]*\).*/\1/p"
}

# run ARGS...: one benchmark run; its line is printed and kept in $last.
run() {
    last=$("$bench" --port "$p" "$@")
    printf '%s\n' "$last"
    printf '%s\n' "$last" >> "$tmp/json"
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

# Cluster: the library's client on a local Redis Cluster (3 masters, 3
# replicas, tests/with-cluster.sh) against the same client on the plain
# node, interleaved, 3 pairs; skipped when the cluster cannot start.
here=$(dirname "$0")
clines=$(sh "$here/../tests/with-cluster.sh" sh -c '
    plain=$1
    set -- $REDISLOCK_TEST_CLUSTER_PORTS "$plain"
    for _ in 1 2 3; do
        "$0" --workload U --url "redis://127.0.0.1:$plain" --label standalone
        "$0" --workload U --url "redis://127.0.0.1:$1?cluster=1" --label cluster
    done' "$bench" "$p" 2>/dev/null | grep '^{') || clines=
if [ -n "$clines" ]; then
    printf '%s\n' "$clines" >> "$tmp/json"
    printf '%s\n' "$clines"
    s_ops=$(printf '%s\n' "$clines" | grep '"client":"standalone"' |
            sed 's/.*"ops_per_s":\([0-9]*\).*/\1/' | tr '\n' ' ')
    c_ops=$(printf '%s\n' "$clines" | grep '"client":"cluster"' |
            sed 's/.*"ops_per_s":\([0-9]*\).*/\1/' | tr '\n' ' ')
    # pick CLIENT FIELD: the FIELD of the CLIENT's lines, space-separated.
    pick() {
        printf '%s\n' "$clines" | grep "\"client\":\"$1\"" |
            sed "s/.*\"$2\":\([0-9]*\).*/\1/" | tr '\n' ' '
    }
    s50=$(pick standalone p50_us) s99=$(pick standalone p99_us)
    c50=$(pick cluster p50_us) c99=$(pick cluster p99_us)
    # shellcheck disable=SC2086
    printf '%s\n' $c_ops > "$tmp/c_ops"
    # shellcheck disable=SC2086
    printf '%s\n' $s_ops > "$tmp/s_ops"
    cratios=$(paste -d' ' "$tmp/c_ops" "$tmp/s_ops" |
              awk '{ printf "%.3f ", ($2 > 0 ? $1 / $2 : 0) }')
    # shellcheck disable=SC2086
    cmedian=$(printf '%s\n' $cratios | sort -n | sed -n 2p)
    line="{\"peer\":\"cluster/standalone\",\"workload\":\"U\",\"ratios\":[$(join , $cratios)],\"median_ratio\":$cmedian}"
    printf '%s\n' "$line"
    printf '%s\n' "$line" >> "$tmp/json"
    # shellcheck disable=SC2086
    {
        row "U (client)" "one standalone node" \
            "$(join ' / ' $s_ops)" "$(join ' / ' $s50)" "$(join ' / ' $s99)" \
            "the library's client, acquire+release cycles"
        row "U (client)" "Redis Cluster, 3 masters (\`?cluster=1\`)" \
            "$(join ' / ' $c_ops)" "$(join ' / ' $c50)" "$(join ' / ' $c99)" \
            "each right after a standalone run; cluster/standalone $(join ' / ' $cratios), **median $cmedian**"
    }
else
    row "U (client)" "Redis Cluster" "-" "-" "-" "skipped: the local cluster did not start"
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

# The table, headed by what it was measured on.
server=${REDISLOCK_TEST_REDIS_SERVER:-redis-server}
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

Benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - started)) s:

- Machine: $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | sed -n 1p), $(uname -sr)
- Server: $("$server" --version 2>/dev/null || echo unknown)
- Client: $("$bench" --version | sed 's/^redislock-bench: //')
- /dev/cpu_dma_latency: $dma
- Command: \`$cmd\`

ops/s: cycles (U, R), critical sections (C) or hand-offs (H) per second;
p50/p99: one cycle (U, R), the wait for the lock (C), release to the
waiter holding it (H).

| workload | peer | ops/s | p50 µs | p99 µs | notes |
|---|---|---|---|---|---|
EOF
cat "$rows"
