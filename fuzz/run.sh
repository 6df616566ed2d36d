#!/bin/sh
# fuzz/run.sh MODE SRCDIR BINDIR WORKDIR TARGET... - run the libFuzzer
# targets (make fuzz, make fuzz-regress), one line per target:
#   fuzz     each target for $FUZZ_SECONDS seconds (default 30), starting
#            from its seeds in SRCDIR/fuzz/corpus/TARGET/ (which it runs
#            first) and SRCDIR/fuzz/TARGET.dict if there is one; what it
#            finds new goes to WORKDIR/TARGET/, never into the sources;
#   regress  each input of SRCDIR/fuzz/corpus/TARGET/ once.
# FUZZ_JOBS=N runs N targets at once.
# A crash, a leak, a sanitizer report or a broken invariant fails the
# target; its input is kept as WORKDIR/TARGET-crash-* (or -leak-,
# -timeout-, -oom-; add it to the corpus with the fix) and the end of the log is shown.  Exit status:
# 0 when every target passed.
set -u
mode=$1 srcdir=$2 bindir=$3 workdir=$4
shift 4
seconds=${FUZZ_SECONDS:-30}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export UBSAN_OPTIONS
mkdir -p "$workdir" || exit 1
failed=0

# FUZZ_JOBS N (> 1): the targets shared out among N runs of this script
# at once, each of them single-threaded as libFuzzer runs (CI: one per
# core); each target's line is printed as it ends.
jobs=${FUZZ_JOBS:-1}
if [ "$jobs" -gt 1 ] && [ $# -gt 1 ]; then
    pids=
    j=0
    while [ $j -lt "$jobs" ]; do
        group=$(printf '%s\n' "$@" | awk -v j=$j -v n="$jobs" '(NR - 1) % n == j')
        j=$((j + 1))
        [ -n "$group" ] || continue
        # shellcheck disable=SC2086
        FUZZ_JOBS=1 sh "$0" "$mode" "$srcdir" "$bindir" "$workdir" $group &
        pids="$pids $!"
    done
    for p in $pids; do
        wait "$p" || failed=1
    done
    exit $failed
fi

for t in "$@"; do
    corpus=$srcdir/fuzz/corpus/$t
    log=$workdir/$t.log
    rm -f "$workdir/$t"-crash-* "$workdir/$t"-leak-* "$workdir/$t"-timeout-* \
        "$workdir/$t"-oom-*
    start=$(date +%s)
    case $mode in
    fuzz)
        mkdir -p "$workdir/$t"
        set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
            -max_len=4096 -print_final_stats=1 \
            -artifact_prefix="$workdir/$t-"
        [ -f "$srcdir/fuzz/$t.dict" ] && set -- "$@" -dict="$srcdir/fuzz/$t.dict"
        set -- "$@" "$workdir/$t"
        [ -d "$corpus" ] && set -- "$@" "$corpus"
        ;;
    regress)
        set -- -artifact_prefix="$workdir/$t-"
        [ -d "$corpus" ] && set -- "$@" $(find "$corpus" -type f | sort)
        if [ $# -eq 1 ]; then
            echo "fuzz-regress $t: no corpus (fuzz/corpus/$t/): SKIP"
            continue
        fi
        ;;
    *)
        echo "run.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
    "$bindir/$t" "$@" > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ "$mode" = fuzz ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        what="${runs:-?} runs"
    else
        what="$(grep -c '^Executed ' "$log") inputs"
    fi
    if [ "$rc" -eq 0 ] && ! grep -q -e '^==[0-9]*==ERROR' -e 'runtime error:' "$log"; then
        result=ok
    else
        result="FAIL (exit $rc; log $log)"
        failed=$((failed + 1))
    fi
    printf '%-12s %-13s %12s in %3d s: %s\n' "$mode" "$t" "$what" "$secs" "$result"
    if [ "$result" != ok ]; then
        grep -E -A30 '^==[0-9]+==ERROR|runtime error:|invariant broken|^SUMMARY' "$log" | head -60 | sed 's/^/    /'
        for a in "$workdir/$t"-crash-* "$workdir/$t"-leak-* \
                 "$workdir/$t"-timeout-* "$workdir/$t"-oom-*; do
            [ -f "$a" ] && echo "    input: $a (once fixed, add it to fuzz/corpus/$t/)"
        done
    fi
done
exit $((failed > 0))
