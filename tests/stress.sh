#!/bin/sh
# stress.sh RUNS COMMAND [ARG...] - shake the test suite: run COMMAND (a
# `make check TESTS=...`) RUNS times in a row while every core is kept busy
# by a CPU hog (one busy shell loop per core, nice 0) that this script
# starts and stops itself, by PID.  A test that passes only when the
# machine is idle, or only as fast as the tests before it happen to run,
# fails here.
#
# Each run writes its own automake log, test-suite-stress-N.log
# (TEST_SUITE_LOG); test-suite-stress.log adds them up in the same
# "# PASS: / # FAIL: ..." form, so that CI counts every test of every run.
# Exit status: 0 when every run passed, 1 otherwise.
# Used by `make check-stress` (STRESS_RUNS, STRESS_TESTS).
set -u

runs=${1:?usage: stress.sh RUNS COMMAND [ARG...]}
shift
case $runs in ''|*[!0-9]*) echo "stress.sh: RUNS is a number" >&2; exit 2 ;; esac

cores=$(nproc 2>/dev/null || echo 2)
hogs=
stop_hogs() {
    for p in $hogs; do kill "$p" 2>/dev/null; done
    for p in $hogs; do wait "$p" 2>/dev/null; done
    hogs=
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM HUP

i=0
while [ $i -lt "$cores" ]; do
    nice -n 0 sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
done
echo "stress.sh: $cores CPU hog(s) running (PIDs$hogs); $runs run(s) of: $*"

status=0
pass=0 fail=0 error=0 skip=0 xpass=0 total=0
n=1
while [ $n -le "$runs" ]; do
    log=test-suite-stress-$n.log
    rm -f "$log"
    start=$(date +%s)
    "$@" TEST_SUITE_LOG="$log"
    rc=$?
    [ $rc -eq 0 ] || status=1
    echo "stress.sh: run $n of $runs: exit $rc in $(( $(date +%s) - start )) s"
    if [ -f "$log" ]; then
        for f in TOTAL PASS FAIL ERROR SKIP XPASS; do
            v=$(sed -n "s/^# $f: *//p" "$log" | head -1)
            case $f in
                TOTAL) total=$((total + ${v:-0})) ;;
                PASS) pass=$((pass + ${v:-0})) ;;
                FAIL) fail=$((fail + ${v:-0})) ;;
                ERROR) error=$((error + ${v:-0})) ;;
                SKIP) skip=$((skip + ${v:-0})) ;;
                XPASS) xpass=$((xpass + ${v:-0})) ;;
            esac
        done
        grep -E '^(FAIL|ERROR):' "$log"
    else
        error=$((error + 1))
    fi
    n=$((n + 1))
done
stop_hogs

{
    echo "stress: $runs run(s) beside $cores CPU hog(s): $*"
    echo "# TOTAL: $total"
    echo "# PASS:  $pass"
    echo "# SKIP:  $skip"
    echo "# XFAIL: 0"
    echo "# FAIL:  $fail"
    echo "# XPASS: $xpass"
    echo "# ERROR: $error"
} > test-suite-stress.log
cat test-suite-stress.log
exit $status
