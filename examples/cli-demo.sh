#!/bin/sh
# cli-demo.sh - the redislock command: shell loops appending to one file.
#
# Three loops each append "N begin" and "N end" to one log file, with a
# pause in between, five times: first without a lock, then each time
# through `redislock demo:log -c ...`.  Then it checks the log: every
# "begin" must be followed by its own "end".
#
# Usage: cli-demo.sh PATH/TO/redislock  (run by `make demo` beside a
# throwaway redis-server; the URL comes from REDISLOCK_TEST_PORT or
# REDISLOCK_URL)
set -eu
tool=$1
if [ -n "${REDISLOCK_TEST_PORT:-}" ]; then
    REDISLOCK_URL=redis://127.0.0.1:$REDISLOCK_TEST_PORT
    export REDISLOCK_URL
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/redislock-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# run_loops LOG [redislock options...]: three loops, five sections each.
run_loops() {
    log=$1; shift
    : > "$log"
    pids=
    for w in 1 2 3; do
        (
            for i in 1 2 3 4 5; do
                section="echo '$w begin' >> '$log'; sleep 0.05; echo '$w end' >> '$log'"
                if [ $# -gt 0 ]; then
                    "$@" -c "$section"
                else
                    sh -c "$section"
                fi
            done
        ) &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
}

# Count the begin lines not followed by their own end.
broken() {
    awk 'NR % 2 == 1 { w = $1; ok = ($2 == "begin") }
         NR % 2 == 0 { if (!ok || $1 != w || $2 != "end") bad++ }
         END { print bad + 0 }' "$1"
}

echo "== without a lock: 3 shell loops x 5 sections append to one file"
run_loops "$dir/plain.log"
echo "   first lines:" $(head -6 "$dir/plain.log" | tr '\n' '|')
echo "   interleaved sections: $(broken "$dir/plain.log")"

echo "== through redislock: the same loops, each section under the lock demo:log"
echo "   loop body: $tool -w 30 demo:log -c \"echo N begin >> log; sleep 0.05; echo N end >> log\""
run_loops "$dir/locked.log" "$tool" -w 30 demo:log
echo "   first lines:" $(head -6 "$dir/locked.log" | tr '\n' '|')
bad=$(broken "$dir/locked.log")
lines=$(wc -l < "$dir/locked.log")
echo "   interleaved sections: $bad, lines: $lines (want 0 and 30)"
echo "== the lock's state now:"
"$tool" --status demo:log || true
[ "$bad" -eq 0 ] && [ "$lines" -eq 30 ]
