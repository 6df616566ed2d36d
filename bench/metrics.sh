#!/bin/sh
# metrics.sh [BENCH] - what the client's metrics cost (issue 34): U through
# the library's client (acquire+release cycles on one key), metrics on
# against --no-metrics, in PAIRS interleaved pairs (7; off first in each,
# as the machine's load drifts between runs).  The ratio of each pair is
# on/off in operations per second; the line at the end gives their median
# (issue 34's bar: >= 0.99).  The bench holds /dev/cpu_dma_latency at 0
# while it measures (each JSON line's "cpu_dma_latency" says whether it
# could).  Run it beside a private server:
#   sh tests/with-redis.sh sh bench/metrics.sh ./bench/redislock-bench
set -eu
bench=${1:-./bench/redislock-bench}
pairs=${PAIRS:-7}
n=${N:-20000}
p=${REDISLOCK_TEST_PORT:?run me through tests/with-redis.sh}
url="redis://127.0.0.1:$p"
ratios=
i=0
while [ $i -lt "$pairs" ]; do
    off=$("$bench" --workload U --url "$url" --label metrics-off --no-metrics --n "$n")
    on=$("$bench" --workload U --url "$url" --label metrics-on --n "$n")
    printf '%s\n%s\n' "$off" "$on"
    r=$(printf '%s\n%s\n' "$off" "$on" |
        sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' | tr '\n' ' ' |
        awk '{ printf "%.3f", ($1 > 0 ? $2 / $1 : 0) }')
    ratios="$ratios $r"
    i=$((i + 1))
done
# shellcheck disable=SC2086
median=$(printf '%s\n' $ratios | sort -n | sed -n "$(( (pairs + 1) / 2 ))p")
dma=$(printf '%s\n' "$on" | sed -n 's/.*"cpu_dma_latency":"\{0,1\}\([^",}]*\).*/\1/p')
echo "{\"peer\":\"metrics-on/metrics-off\",\"workload\":\"U\",\"pairs\":$pairs,\"ratios\":[$(echo $ratios | tr ' ' ',')],\"median_ratio\":$median,\"cpu_dma_latency\":\"$dma\"}"
