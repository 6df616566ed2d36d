#!/bin/sh
# run.sh - every benchmark workload against one throwaway redis-server
# (started by tests/with-redis.sh); one JSON line each.  `make bench`.
set -eu
bench=${1:-./bench/redislock-bench}
p=$REDISLOCK_TEST_PORT
"$bench" --workload U --raw --port "$p"
"$bench" --workload U --port "$p"
"$bench" --workload U --raw --port "$p"
"$bench" --workload U --port "$p"
"$bench" --workload R --port "$p" --mode gozero
"$bench" --workload R --port "$p" --mode counted
"$bench" --workload C --port "$p"
"$bench" --workload C --port "$p" --wait
"$bench" --workload C --port "$p" --mode counted --wait
"$bench" --workload H --port "$p"
