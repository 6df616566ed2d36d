#!/bin/sh
# run.sh - every benchmark workload against one throwaway redis-server
# (started by tests/with-redis.sh); one JSON line each.  `make bench`.
# U runs three times each way, interleaved with the bare-hiredis reference,
# because a shared machine's load drifts between runs.
set -eu
bench=${1:-./bench/redislock-bench}
p=$REDISLOCK_TEST_PORT
for i in 1 2 3; do
    "$bench" --workload U --raw --port "$p"
    "$bench" --workload U --port "$p"
done
"$bench" --workload R --port "$p" --mode gozero
"$bench" --workload R --port "$p" --mode counted
"$bench" --workload C --port "$p"
"$bench" --workload C --port "$p" --wait
"$bench" --workload C --port "$p" --mode counted
"$bench" --workload C --port "$p" --mode counted --wait
"$bench" --workload H --port "$p"
"$bench" --workload H --port "$p" --mode counted
