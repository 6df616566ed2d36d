#!/bin/sh
# metrics.sh [BENCH] - what the client's metrics cost (issue 34's bar: U
# with them on at >= 0.99x with them off, in the same run).  The bench's
# U --metrics-ab runs acquire+release cycles through one client on one
# connection in blocks of 500, counting off and on in turn (off first),
# 200,000 cycles in all, and gives the ratio on/off of cycles per second
# (over the sums of each side's blocks, and the median of the pairs'):
# blocks of a few milliseconds, interleaved, see the same load on a shared
# machine, where whole runs one after the other drift by several per cent.
# RUNS such runs (3), then one line with the median of their ratios.  The
# bench holds /dev/cpu_dma_latency at 0 while it measures ("cpu_dma_latency"
# says whether it could).  Run it beside a private server:
#   sh tests/with-redis.sh sh bench/metrics.sh ./bench/redislock-bench
set -eu
bench=${1:-./bench/redislock-bench}
runs=${RUNS:-3}
p=${REDISLOCK_TEST_PORT:?run me through tests/with-redis.sh}
ratios=
i=0
while [ $i -lt "$runs" ]; do
    line=$("$bench" --workload U --url "redis://127.0.0.1:$p" \
           --metrics-ab 500 --n 200000)
    printf '%s\n' "$line"
    ratios="$ratios $(printf '%s\n' "$line" | sed -n 's/.*"ratio":\([0-9.]*\).*/\1/p')"
    i=$((i + 1))
done
# shellcheck disable=SC2086
median=$(printf '%s\n' $ratios | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
# shellcheck disable=SC2086
echo "{\"peer\":\"metrics-on/metrics-off\",\"workload\":\"U\",\"runs\":$runs,\"ratios\":[$(echo $ratios | tr ' ' ',')],\"median_ratio\":$median,\"bar\":0.99}"
