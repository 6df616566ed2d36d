#!/bin/sh
# t_cli.sh - the redislock(1) command, driven as a user drives it, against
# a private redis-server (tests/with-redis.sh).  Speaks TAP.
#
# Every test names the behaviour it checks; exit statuses are compared
# exactly.  Background instances are waited for by polling Redis, never by
# guessing with sleeps; the few time bounds are wide (they check "at once"
# and "about a second", not speed).  With REDISLOCK_TEST_WRAPPER set (make
# check-valgrind) the tool runs under it, exiting 99 on any error report.
set -u

srcdir=${REDISLOCK_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${REDISLOCK_TEST_BUILDDIR:-$(pwd)}

# Run under our own private server; keep the wrapper for the tool alone
# (not for sh, sleep and redis-cli).
if [ -z "${REDISLOCK_CLI_TEST_INNER:-}" ]; then
    REDISLOCK_CLI_TEST_INNER=1
    REDISLOCK_CLI_WRAPPER=${REDISLOCK_TEST_WRAPPER:-}
    export REDISLOCK_CLI_TEST_INNER REDISLOCK_CLI_WRAPPER
    REDISLOCK_TEST_WRAPPER= exec sh "$srcdir/tests/with-redis.sh" sh "$0" "$@"
fi

work=$(mktemp -d "$REDISLOCK_TEST_TMPDIR/cli.XXXXXX")
wrapper=$REDISLOCK_CLI_WRAPPER
vglogs=
case $wrapper in
    # Its reports go to files, checked by the last test: a tool that ends
    # by a signal cannot turn them into an exit status.
    *valgrind*) vglogs=$work/vg
                mkdir "$vglogs"
                wrapper="$wrapper --trace-children=no --error-exitcode=99"
                wrapper="$wrapper --suppressions=$srcdir/tests/cli-valgrind.supp"
                wrapper="$wrapper --log-file=$vglogs/%p.log" ;;
esac
# cli/redislock is libtool's wrapper script (the tool is installable, so
# not linked -no-install); it execs the real program, keeping its PID.
tool="$builddir/cli/redislock"
# $R runs the tool (under the wrapper, if any, through libtool so that the
# wrapper sees the program itself).  A plain command, not a function, so
# that "$R ... &" makes $! the tool's own PID.
R=$tool
if [ -n "$wrapper" ]; then
    R="$builddir/libtool --mode=execute $wrapper $tool"
fi
# redis-cli, or the one with-redis.sh was given (REDIS_CLI).
rcli=${REDISLOCK_TEST_REDIS_CLI:-redis-cli}
cli() { "$rcli" -p "$REDISLOCK_TEST_PORT" "$@"; }
REDISLOCK_URL="redis://127.0.0.1:$REDISLOCK_TEST_PORT"
export REDISLOCK_URL
unset REDISLOCK_KEY REDISLOCK_OWNER REDISLOCK_TOKEN

n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
diag() { echo "# $*"; }
now_ms() { date +%s%3N; }

# check NAME CONDITION...: one TAP line.  With REDISLOCK_CLI_ONLY set (an
# extended regular expression), only the tests whose function name matches
# run (while working on the tool).
check() {
    name=$1; shift
    if [ -n "${REDISLOCK_CLI_ONLY:-}" ] &&
       ! echo "$1" | grep -Eq "$REDISLOCK_CLI_ONLY"; then
        n=$((n + 1)); echo "ok $n # SKIP not in REDISLOCK_CLI_ONLY"
        return
    fi
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# expect_status WANT GOT WHAT
expect_status() {
    if [ "$2" -ne "$1" ]; then
        diag "$3: exit status $2, want $1"
        return 1
    fi
    return 0
}

# Wait until KEY exists (or not, with -n) in Redis, up to 10 s.
wait_key() {
    want=1
    if [ "$1" = -n ]; then want=0; shift; fi
    i=0
    while [ $i -lt 200 ]; do
        [ "$(cli EXISTS "$1")" = "$want" ] && return 0
        sleep 0.05; i=$((i + 1))
    done
    diag "key $1 never reached EXISTS=$want"
    return 1
}

# Wait until file $1 exists, up to 10 s.
wait_file() {
    i=0
    while [ $i -lt 200 ]; do
        [ -e "$1" ] && return 0
        sleep 0.05; i=$((i + 1))
    done
    diag "file $1 never appeared"
    return 1
}

# gone PID: true once PID has ended (a zombie counts as ended), up to 5 s.
gone() {
    i=0
    while [ $i -lt 100 ]; do
        case $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) in
            Z|"") return 0 ;;
        esac
        sleep 0.05; i=$((i + 1))
    done
    return 1
}

# ---------------------------------------------------------------------------

t_help_and_version() {
    $R --help > "$work/help" 2>&1 || return 1
    grep -q '^Usage: redislock' "$work/help" || return 1
    $R --version > "$work/version" 2>&1 || return 1
    grep -q '^redislock [0-9]' "$work/version"
}
check "--help and --version print and exit 0" t_help_and_version

t_usage_errors() {
    for args in "" "k" "-x k true" "-e 0 k true" "-e abc k true" \
                "-w -1 k true" "-E 300 k true" "-m other k true" \
                "-s NOPE k true" "k -c true extra" "--status k cmd" "k -c"; do
        # shellcheck disable=SC2086
        $R $args > "$work/out" 2>&1
        st=$?
        expect_status 64 $st "redislock $args" || return 1
        grep -q 'redislock: ' "$work/out" || { diag "no message for '$args'"; return 1; }
    done
    $R "" true > /dev/null 2>&1
    expect_status 64 $? "empty KEY" || return 1
    $R --id 'has space' k true > /dev/null 2>&1
    expect_status 64 $? "an owner ID with a space"
}
check "usage errors exit 64 with a message" t_usage_errors

t_bad_url() {
    $R -u 'redis://user:s3cretpw@127.0.0.1:notaport' k true > "$work/out" 2>&1
    expect_status 64 $? "bad port" || return 1
    grep -q port "$work/out" || { diag "$(cat "$work/out")"; return 1; }
    ! grep -q s3cretpw "$work/out"
}
check "a bad URL exits 64, naming the problem, never the password" t_bad_url

t_no_server() {
    t0=$(now_ms)
    $R -u "unix://$work/no-such.sock" k touch "$work/ran" > "$work/out" 2>&1
    expect_status 69 $? "no server" || return 1
    [ ! -e "$work/ran" ] || { diag "COMMAND ran without the lock"; return 1; }
    grep -q 'acquire' "$work/out" || return 1
    $R -u "unix://$work/no-such.sock" --status k > /dev/null 2>&1
    expect_status 69 $? "--status without a server"
}
check "no Redis to talk to exits 69 (COMMAND not run; --status too)" t_no_server

t_status_passes_through() {
    $R k1 sh -c 'exit 3'
    expect_status 3 $? "exit 3" || return 1
    $R k1 true
    expect_status 0 $? "true" || return 1
    $R k1 -c 'exit 42'
    expect_status 42 $? "-c 'exit 42'" || return 1
    [ "$(cli EXISTS k1)" = 0 ]
}
check "COMMAND's exit status passes through; the lock is released" t_status_passes_through

t_environment() {
    REDISLOCK_TOKEN=stale $R k2 sh -c \
        'echo "$REDISLOCK_KEY $REDISLOCK_OWNER ${REDISLOCK_TOKEN:-none}";
         "${REDISLOCK_TEST_REDIS_CLI:-redis-cli}" -p "$REDISLOCK_TEST_PORT" GET k2' > "$work/env1" || return 1
    $R k2 sh -c 'echo "$REDISLOCK_TOKEN"' > "$work/env2" || return 1
    REDISLOCK_TOKEN=stale $R --no-fencing k2 sh -c \
        'echo "${REDISLOCK_TOKEN:-none}"' > "$work/env3" || return 1
    set -- $(head -1 "$work/env1")
    [ "$1" = k2 ] || { diag "REDISLOCK_KEY=$1"; return 1; }
    # The owner ID in the environment is the one stored in the key.
    [ "$2" = "$(sed -n 2p "$work/env1")" ] || { diag "owner $2 not in Redis"; return 1; }
    echo "$2" | grep -Eq '^[0-9a-f]{32}$' || { diag "owner '$2'"; return 1; }
    # Fencing tokens: a number, growing from one holding to the next.
    [ "$3" -ge 1 ] 2>/dev/null || { diag "token '$3'"; return 1; }
    [ "$(cat "$work/env2")" -gt "$3" ] || { diag "token did not grow"; return 1; }
    # Without fencing there is none, and an inherited one is removed.
    [ "$(cat "$work/env3")" = none ]
}
check "COMMAND gets REDISLOCK_KEY, REDISLOCK_OWNER and a growing REDISLOCK_TOKEN" t_environment

t_nonblock_busy() {
    $R k3 sh -c "touch '$work/k3.held'; sleep 30" &
    holder=$!
    wait_file "$work/k3.held" || return 1
    t0=$(now_ms)
    $R -n k3 touch "$work/k3.ran"
    st=$?
    t=$(( $(now_ms) - t0 ))
    $R -n -E 42 k3 true
    st42=$?
    kill -TERM $holder; wait $holder
    expect_status 75 $st "-n on a held key" || return 1
    expect_status 42 $st42 "-n -E 42" || return 1
    [ ! -e "$work/k3.ran" ] || { diag "COMMAND ran"; return 1; }
    [ $t -lt 1500 ] || { diag "took $t ms"; return 1; }
}
check "-n on a held key exits with the busy status at once (-E sets it)" t_nonblock_busy

t_wait_gives_up() {
    $R k4 sh -c "touch '$work/k4.held'; sleep 30" &
    holder=$!
    wait_file "$work/k4.held" || return 1
    t0=$(now_ms)
    $R -w 1 k4 touch "$work/k4.ran" 2> "$work/k4.err"
    st=$?
    t=$(( $(now_ms) - t0 ))
    # -q: the same, without a word; -q and -v: a usage error.
    $R -q -w 0.2 k4 true 2> "$work/k4q.err"
    stq=$?
    $R -q -v -w 0.2 k4 true 2> "$work/k4qv.err"
    stqv=$?
    kill -TERM $holder; wait $holder
    expect_status 75 $st "-w 1" || return 1
    [ ! -e "$work/k4.ran" ] || { diag "COMMAND ran"; return 1; }
    [ $t -ge 990 ] && [ $t -lt 4000 ] || { diag "gave up after $t ms"; return 1; }
    # One line says what timed out and after how long (issue 34 part 4,
    # item 6: exit 75 came without a word unless -v).
    [ "$(grep -c . "$work/k4.err")" -eq 1 ] &&
    grep -Eq '^redislock: gave up waiting for k4 after [1-3]\.[0-9] s: held by ' "$work/k4.err" ||
        { diag "stderr: $(cat "$work/k4.err")"; return 1; }
    expect_status 75 $stq "-q -w 0.2" || return 1
    [ ! -s "$work/k4q.err" ] || { diag "-q said: $(cat "$work/k4q.err")"; return 1; }
    expect_status 64 $stqv "-q -v" || return 1
    grep -qx 'redislock: give either -q or -v' "$work/k4qv.err" ||
        { diag "$(cat "$work/k4qv.err")"; return 1; }
}
check "-w 1 on a held key gives up after about a second, saying so on one line (-q: silent)" t_wait_gives_up

# Two instances: the second, started while the first holds the lock, runs
# its COMMAND only after the first has finished.
t_two_serialise() {
    : > "$work/order"
    $R k5 sh -c "echo 'A start' >> '$work/order'; touch '$work/k5.held';
                sleep 1; echo 'A end' >> '$work/order'" &
    a=$!
    wait_file "$work/k5.held" || return 1
    $R -w 20 k5 sh -c "echo 'B start' >> '$work/order'; echo 'B end' >> '$work/order'"
    st=$?
    wait $a
    expect_status 0 $st "second instance" || return 1
    printf 'A start\nA end\nB start\nB end\n' | cmp -s - "$work/order" ||
        { diag "order: $(tr '\n' '|' < "$work/order")"; return 1; }
}
check "two instances on one key serialise" t_two_serialise

# Several shell loops appending to one file through redislock: no two
# critical sections interleave, and none is lost.
t_loops_never_interleave() {
    : > "$work/log"
    pids=
    for w in 1 2 3 4; do
        (
            i=0
            while [ $i -lt 5 ]; do
                $R -w 60 k6 sh -c "echo '$w begin' >> '$work/log'; sleep 0.02;
                                  echo '$w end' >> '$work/log'" || exit 1
                i=$((i + 1))
            done
        ) &
        pids="$pids $!"
    done
    st=0
    for job in $pids; do wait "$job" || st=1; done
    [ $st -eq 0 ] || { diag "a loop failed"; return 1; }
    [ "$(wc -l < "$work/log")" -eq 40 ] || { diag "$(wc -l < "$work/log") lines"; return 1; }
    # Lines pair up: "W begin" is always followed by "W end".
    awk 'NR % 2 == 1 { w = $1; if ($2 != "begin") exit 1 }
         NR % 2 == 0 { if ($1 != w || $2 != "end") exit 1 }' "$work/log" ||
        { diag "interleaved: $(tr '\n' '|' < "$work/log")"; return 1; }
}
check "four shell loops through redislock never interleave" t_loops_never_interleave

t_renewal_keeps_lock() {
    # A 1 s lease, renewed every half second; under valgrind (a tool many
    # times slower, on a loaded machine) a 3 s one, so that one late
    # renewal round is not a loss.
    lease=1 hold=3 past=2
    if [ -n "$wrapper" ]; then lease=3 hold=8 past=6; fi
    $R -e $lease k7 sh -c "touch '$work/k7.held'; sleep $hold" &
    holder=$!
    wait_file "$work/k7.held" || return 1
    sleep $past                   # twice the lease
    owner=$(cli GET k7)
    $R -n k7 true
    st=$?
    wait $holder
    hst=$?
    [ -n "$owner" ] || { diag "key gone after 2 s"; return 1; }
    expect_status 75 $st "-n while renewed" || return 1
    expect_status 0 $hst "holder" || return 1
    [ "$(cli EXISTS k7)" = 0 ]
}
check "a COMMAND that outlives the expiry keeps the lock (renewal)" t_renewal_keeps_lock

t_lost_when_deleted() {
    $R -e 1 k8 sh -c "trap 'echo TERM > \"$work/k8.sig\"; exit 9' TERM;
                     touch '$work/k8.held'; sleep 30 & wait" 2> "$work/k8.err" &
    holder=$!
    wait_file "$work/k8.held" || return 1
    cli DEL k8 > /dev/null
    wait $holder
    st=$?
    expect_status 76 $st "lost" || return 1
    [ "$(cat "$work/k8.sig" 2>/dev/null)" = TERM ] || { diag "COMMAND got no TERM"; return 1; }
    grep -q 'lost the lock k8: a renewal found the key no longer ours' "$work/k8.err" ||
        { diag "no reason in: $(cat "$work/k8.err")"; return 1; }
}
check "a deleted key: COMMAND gets TERM, the tool says why and exits 76 (lost)" t_lost_when_deleted

t_lost_kill_after_grace() {
    $R -e 1 -k 0.5 k9 sh -c "trap '' TERM; touch '$work/k9.held';
                            echo \$\$ > '$work/k9.pid';
                            while :; do sleep 0.1; done" 2> /dev/null &
    holder=$!
    wait_file "$work/k9.held" || return 1
    cli DEL k9 > /dev/null
    wait $holder
    st=$?
    expect_status 76 $st "lost" || return 1
    gone "$(cat "$work/k9.pid")" || { diag "COMMAND survived"; return 1; }
}
check "a COMMAND that ignores TERM gets KILL after the grace period" t_lost_kill_after_grace

t_lost_when_stopped() {
    $R -e 1 k10 sh -c "trap 'touch \"$work/k10.term\"; exit 9' TERM;
                       touch '$work/k10.held'; sleep 30 & wait" 2> /dev/null &
    holder=$!
    wait_file "$work/k10.held" || return 1
    kill -STOP $holder
    wait_key -n k10 || { kill -CONT $holder; return 1; }
    $R -n k10 true                 # someone else takes it meanwhile
    other=$?
    kill -CONT $holder
    wait $holder
    st=$?
    expect_status 0 $other "another instance, while the first is stopped" || return 1
    expect_status 76 $st "stopped past its lease" || return 1
    [ -e "$work/k10.term" ] || { diag "COMMAND got no TERM"; return 1; }
}
check "a tool stopped past its lease finds the lock lost, stops COMMAND, exits 76" t_lost_when_stopped

# private_server NAME: a redis-server of the test's own, to stop, on the
# socket $d/sock ($d: a directory NAME under the test's; its PID in $spid
# and in $d/redis.pid, which with-redis.sh stops if the test does not).
private_server() {
    d="$REDISLOCK_TEST_TMPDIR/$1"
    mkdir -p "$d"
    "$REDISLOCK_TEST_REDIS_SERVER" --port 0 --unixsocket "$d/sock" --dir "$d" \
        --save "" --appendonly no --pidfile "$d/redis.pid" --daemonize no \
        > /dev/null 2>&1 &
    spid=$!
    i=0
    until "$rcli" -s "$d/sock" PING > /dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 100 ] || { kill $spid; return 1; }; sleep 0.05
    done
}

# Redis gone: renewals cannot get through, so COMMAND is stopped before
# the lease ends (and the lock could pass to someone else), not after.
t_stopped_before_lease_ends() {
    private_server down || return 1
    $R -u "unix://$d/sock" -e 3 -k 5 k11 sh -c "
        trap 'date +%s%3N > \"$work/k11.term\"; exit 9' TERM
        date +%s%3N > '$work/k11.held'; sleep 30 & wait" 2> "$work/k11.err" &
    holder=$!
    wait_file "$work/k11.held" || { kill $spid; return 1; }
    kill $spid; wait $spid
    wait $holder
    st=$?
    expect_status 76 $st "Redis gone" || return 1
    [ -s "$work/k11.term" ] || { diag "COMMAND got no TERM"; return 1; }
    t=$(( $(cat "$work/k11.term") - $(cat "$work/k11.held") ))
    # Lease 3 s from the acquire: the TERM comes a third before its end.
    [ $t -lt 2700 ] || { diag "TERM $t ms after the acquire"; return 1; }
    grep -q 'cannot renew' "$work/k11.err" || { diag "$(cat "$work/k11.err")"; return 1; }
}
check "Redis gone while COMMAND runs: COMMAND stopped before the lease ends, exit 76" t_stopped_before_lease_ends

# What COMMAND started goes too: it leads a process group, which the loss
# signal reaches as a whole.
t_lost_stops_the_group() {
    $R -e 1 k21 sh -c "sleep 30 & echo \$! > '$work/k21.pid'; wait" 2> /dev/null &
    holder=$!
    wait_file "$work/k21.pid" || return 1
    cli DEL k21 > /dev/null
    wait $holder
    st=$?
    expect_status 76 $st "lost" || return 1
    gone "$(cat "$work/k21.pid")" || { diag "COMMAND's child survived"; return 1; }
}
check "on loss, the processes COMMAND started are signalled too" t_lost_stops_the_group

# Nobody renews the lock of a tool killed outright: COMMAND must not run
# on as if it held it (Linux: the kernel sends it the loss signal).
t_tool_killed() {
    [ "$(uname -s)" = Linux ] || return 0
    $R k23 sh -c "trap 'touch \"$work/k23.term\"; exit 9' TERM;
                  touch '$work/k23.held'; sleep 30 & wait" &
    holder=$!
    wait_file "$work/k23.held" || return 1
    kill -KILL $holder
    wait $holder
    wait_file "$work/k23.term"
}
check "a tool killed by SIGKILL: COMMAND gets the loss signal (Linux)" t_tool_killed

# all_gone FILE MS: every PID listed in FILE has ended (a zombie counts as
# ended) within MS milliseconds, polling /proc.
all_gone() {
    t_end=$(( $(now_ms) + $2 ))
    while :; do
        alive=
        for p in $(cat "$1"); do
            case $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$p/status" 2>/dev/null) in
                Z|"") ;;
                *) alive="$alive $p" ;;
            esac
        done
        [ -z "$alive" ] && return 0
        [ "$(now_ms)" -lt $t_end ] || { diag "still running after $2 ms:$alive"; return 1; }
        sleep 0.02
    done
}

# kill_tool_check KEY PIDFILE: SIGKILL the tool $holder, then every
# process of COMMAND's tree listed in PIDFILE must be gone within 2 s,
# while the lease (3 s, renewed every second until then) still runs.
kill_tool_check() {
    kill -KILL $holder
    wait $holder 2> /dev/null
    if ! all_gone "$2" 2000; then
        kill -KILL $(cat "$2") 2> /dev/null   # not to hang the harness
        return 1
    fi
    ttl=$(cli PTTL "$1")
    [ "$ttl" -gt 0 ] || { diag "the lease ran out first (PTTL $ttl)"; return 1; }
}

# The tool killed outright: what COMMAND started goes too, before the
# lease can run out (a guardian process kills the tree): children in its
# group, a grandchild, and one that left for a session of its own.
t_tool_killed_tree() {
    [ "$(uname -s)" = Linux ] || return 0
    : > "$work/k50.pids"
    escape=
    command -v setsid > /dev/null 2>&1 &&
        escape="setsid sleep 30 & echo \$! >> '$work/k50.pids';"
    $R -e 3 k50 sh -c "echo \$\$ >> '$work/k50.pids'
        sleep 30 & echo \$! >> '$work/k50.pids'
        sh -c 'sleep 30 & echo \$! >> \"$work/k50.pids\"; wait' &
        echo \$! >> '$work/k50.pids'
        $escape
        touch '$work/k50.held'; wait" &
    holder=$!
    wait_file "$work/k50.held" || return 1
    [ "$(wc -l < "$work/k50.pids")" -ge 4 ] || { diag "pids: $(cat "$work/k50.pids")"; return 1; }
    kill_tool_check k50 "$work/k50.pids"
}
check "a tool killed by SIGKILL: COMMAND's whole tree is gone before the lease ends" t_tool_killed_tree

# A tree that ignores SIGTERM gets SIGKILL, at most a third of the lease
# after the tool's death.
t_tool_killed_term_ignored() {
    [ "$(uname -s)" = Linux ] || return 0
    : > "$work/k51.pids"
    $R -e 3 -k 30 k51 sh -c "trap '' TERM; echo \$\$ >> '$work/k51.pids'
        sleep 30 & echo \$! >> '$work/k51.pids'
        touch '$work/k51.held'; while :; do sleep 0.1; done" &
    holder=$!
    wait_file "$work/k51.held" || return 1
    kill_tool_check k51 "$work/k51.pids"
}
check "a tool killed by SIGKILL: a COMMAND that ignores TERM is killed before the lease ends" t_tool_killed_term_ignored

# At a terminal (script(1) gives us one), COMMAND shares the tool's process
# group, so ^C reaches it directly, once: the tool does not pass it on again.
# (COMMAND's parent is the tool's guardian, whose parent is the tool.)
t_terminal_foreground() {
    cat > "$work/pgrp.sh" <<'EOS'
tool=$(cut -d' ' -f4 /proc/$PPID/stat)
echo "$(cut -d' ' -f5 /proc/$$/stat) $(cut -d' ' -f5 /proc/$tool/stat)"
EOS
    script -qec "$R ptyk sh '$work/pgrp.sh' > '$work/pty1'" /dev/null > /dev/null
    $R ptyk sh "$work/pgrp.sh" > "$work/pty2"
    set -- $(cat "$work/pty1")
    [ $# -eq 2 ] && [ "$1" = "$2" ] || { diag "at a terminal: groups $*"; return 1; }
    set -- $(cat "$work/pty2")
    [ $# -eq 2 ] && [ "$1" != "$2" ] || { diag "without one: groups $*"; return 1; }
    cat > "$work/ints.sh" <<EOS
c=0
trap 'c=\$((c + 1))' INT
touch '$work/pty.held'
sleep 2 & wait
sleep 1 & wait
echo \$c > '$work/pty.ints'
EOS
    ( wait_file "$work/pty.held" > /dev/null; printf '\003'; sleep 3 ) |
        script -qec "$R -v ptyk sh '$work/ints.sh' 2> '$work/pty.err'" /dev/null > /dev/null
    # COMMAND got the ^C; the tool saw it and did not send it again (two
    # SIGINTs close together may merge into one, so the tool says which).
    [ "$(cat "$work/pty.ints" 2>/dev/null)" = 1 ] ||
        { diag "COMMAND saw $(cat "$work/pty.ints" 2>/dev/null) SIGINTs for one ^C"; return 1; }
    grep -q 'got signal 2$' "$work/pty.err" ||
        { diag "tool: $(tr '\n' '|' < "$work/pty.err")"; return 1; }
}
# At a terminal, COMMAND's tree is in the tool's process group, which the
# guardian cannot signal as a whole (a pipeline's other programs are in
# it too): killing the tool still ends the tree, process by process.
t_terminal_tool_killed() {
    : > "$work/k52.pids"
    # (HUP ignored: the end of the tool, the terminal's session leader,
    # sends the terminal's group a SIGHUP, which would hide the rest.)
    cat > "$work/tree.sh" <<EOS
trap '' HUP
echo \$\$ >> '$work/k52.pids'
sleep 30 & echo \$! >> '$work/k52.pids'
touch '$work/k52.held'; wait
EOS
    script -qec "echo \$\$ > '$work/k52.tool'; exec $R -e 3 k52 sh '$work/tree.sh'" \
        /dev/null > /dev/null &
    term=$!
    wait_file "$work/k52.held" || return 1
    holder=$(cat "$work/k52.tool")
    kill -KILL $holder
    wait $term
    if ! all_gone "$work/k52.pids" 2000; then
        kill -KILL $(cat "$work/k52.pids") 2> /dev/null
        return 1
    fi
    [ "$(cli PTTL k52)" -gt 0 ] || { diag "the lease ran out first"; return 1; }
}
if command -v script > /dev/null 2>&1 && [ "$(uname -s)" = Linux ]; then
    check "at a terminal COMMAND shares the tool's group and gets ^C once" t_terminal_foreground
    check "at a terminal, a tool killed by SIGKILL: COMMAND's tree is gone before the lease ends" t_terminal_tool_killed
else
    n=$((n + 1)); echo "ok $n # SKIP script(1) missing"
    n=$((n + 1)); echo "ok $n # SKIP script(1) missing"
fi

t_usr1_forwarded() {
    $R k22 sh -c "trap 'exit 5' USR1; touch '$work/k22.held'; sleep 30 & wait" &
    holder=$!
    wait_file "$work/k22.held" || return 1
    kill -USR1 $holder
    wait $holder
    expect_status 5 $? "USR1 passed on, COMMAND exits 5"
}
check "SIGUSR1 to the tool is passed on to COMMAND" t_usr1_forwarded

t_term_forwarded() {
    $R k12 sh -c "trap 'exit 9' TERM; touch '$work/k12.held'; sleep 30 & wait" &
    holder=$!
    wait_file "$work/k12.held" || return 1
    kill -TERM $holder
    wait $holder
    st=$?
    expect_status 9 $st "TERM forwarded, COMMAND exits 9" || return 1
    [ "$(cli EXISTS k12)" = 0 ] || { diag "not released"; return 1; }
}
check "SIGTERM to the tool is forwarded; the lock is released" t_term_forwarded

# SIGINT while COMMAND runs (a foreground job's SIGINT: env
# --default-signal undoes the background job's ignored SIGINT).
t_int_forwarded() {
    # shellcheck disable=SC2086
    env --default-signal=INT $R k24 sh -c "trap 'kill \$!; exit 7' INT;
        touch '$work/k24.held'; sleep 30 & wait" &
    holder=$!
    wait_file "$work/k24.held" || return 1
    kill -INT $holder
    wait $holder
    st=$?
    expect_status 7 $st "INT passed on, COMMAND exits 7" || return 1
    [ "$(cli EXISTS k24)" = 0 ] || { diag "not released"; return 1; }
}
if env --default-signal=INT true 2>/dev/null; then
    check "SIGINT to the tool is passed on to COMMAND; the lock is released" t_int_forwarded
else
    n=$((n + 1)); echo "ok $n # SKIP env --default-signal missing (coreutils < 9)"
fi

t_killed_command() {
    $R k13 sh -c "echo \$\$ > '$work/k13.pid'; sleep 30 & wait" &
    holder=$!
    wait_file "$work/k13.pid" || return 1
    sleep 0.1
    kill -TERM "$(cat "$work/k13.pid")"
    wait $holder
    st=$?
    expect_status 143 $st "COMMAND killed by TERM" || return 1
    [ "$(cli EXISTS k13)" = 0 ]
}
check "a COMMAND killed by a signal: the tool ends by it (143) and releases" t_killed_command

# wait_waiting KEY: until one waiter is registered on KEY, up to 10 s.
wait_waiting() {
    i=0
    while [ $i -lt 200 ]; do
        [ "$(cli ZCARD "{$1}:waiters")" = 1 ] && return 0
        sleep 0.05; i=$((i + 1))
    done
    diag "no waiter registered on $1"
    return 1
}

# A signal while waiting: the tool leaves the wait properly (its waiter
# registration is gone at once, which a tool killed outright would leave
# behind for seconds) and ends by the signal, running nothing.
t_term_while_waiting() {
    $R k14 sh -c "touch '$work/k14.held'; sleep 30" &
    holder=$!
    wait_file "$work/k14.held" || return 1
    owner=$(cli GET k14)
    $R k14 touch "$work/k14.ran" &
    waiter=$!
    wait_waiting k14 || return 1
    t0=$(now_ms)
    kill -TERM $waiter
    wait $waiter
    st=$?
    t=$(( $(now_ms) - t0 ))
    left=$(cli ZCARD "{k14}:waiters")
    still=$(cli GET k14)
    kill -TERM $holder; wait $holder
    expect_status 143 $st "SIGTERM while waiting" || return 1
    [ "$left" = 0 ] || { diag "waiter registration left behind"; return 1; }
    [ $t -lt 1500 ] || { diag "took $t ms"; return 1; }
    [ ! -e "$work/k14.ran" ] || { diag "COMMAND ran"; return 1; }
    [ "$still" = "$owner" ] || { diag "the holder lost its lock"; return 1; }
}
check "SIGTERM while waiting: leaves the wait at once, ends by TERM, holder untouched" t_term_while_waiting

# A shell starts background jobs with SIGINT ignored, which the tool then
# leaves alone; env --default-signal gives this one a SIGINT as a
# foreground job would get from ^C.
t_sigint_while_waiting() {
    $R k14b sh -c "touch '$work/k14b.held'; sleep 30" &
    holder=$!
    wait_file "$work/k14b.held" || return 1
    # shellcheck disable=SC2086
    env --default-signal=INT $R k14b touch "$work/k14b.ran" &
    waiter=$!
    wait_waiting k14b || return 1
    kill -INT $waiter
    wait $waiter
    st=$?
    left=$(cli ZCARD "{k14b}:waiters")
    kill -TERM $holder; wait $holder
    expect_status 130 $st "SIGINT while waiting" || return 1
    [ "$left" = 0 ] || { diag "waiter registration left behind"; return 1; }
    [ ! -e "$work/k14b.ran" ]
}
if env --default-signal=INT true 2>/dev/null; then
    check "SIGINT while waiting: leaves the wait at once, ends by SIGINT (130)" t_sigint_while_waiting
else
    n=$((n + 1)); echo "ok $n # SKIP env --default-signal missing (coreutils < 9)"
fi

t_not_runnable() {
    $R k15 no-such-command-here 2> "$work/err"
    expect_status 127 $? "not found" || return 1
    grep -q no-such-command-here "$work/err" || return 1
    printf 'x\n' > "$work/plain"
    chmod 644 "$work/plain"
    $R k15 "$work/plain" 2> /dev/null
    expect_status 126 $? "not executable" || return 1
    [ "$(cli EXISTS k15)" = 0 ] || { diag "not released"; return 1; }
}
check "COMMAND not found exits 127, not executable 126, lock released" t_not_runnable

t_status() {
    $R --status k16 > "$work/s1"
    expect_status 1 $? "--status of a free key" || return 1
    grep -qx 'state: free' "$work/s1" || return 1
    $R -e 10 k16 sh -c "touch '$work/k16.held'; sleep 30" &
    holder=$!
    wait_file "$work/k16.held" || return 1
    $R --status k16 > "$work/s2"
    st=$?
    owner=$(cli GET k16)
    kill -TERM $holder; wait $holder
    expect_status 0 $st "--status of a held key" || return 1
    grep -qx 'state: held' "$work/s2" &&
    grep -qx 'mode: go-zero' "$work/s2" &&
    grep -qx "owner: $owner" "$work/s2" &&
    grep -qx 'holds: 1' "$work/s2" || { diag "$(tr '\n' '|' < "$work/s2")"; return 1; }
    ttl=$(sed -n 's/^ttl_ms: //p' "$work/s2")
    [ "$ttl" -gt 5000 ] && [ "$ttl" -le 10000 ] || { diag "ttl_ms $ttl"; return 1; }
    # A value cannot forge lines of the output (a string without expiry
    # is not a lock: its value is shown as such).
    cli SET k17b "$(printf 'x\nstate: free')" > /dev/null
    $R --status k17b > "$work/s4"
    expect_status 0 $? "--status of a string with a newline" || return 1
    ! grep -qx 'state: free' "$work/s4" || { diag "$(tr '\n' '|' < "$work/s4")"; return 1; }
    grep -qx 'value: x\\x0astate: free' "$work/s4" || { diag "$(tr '\n' '|' < "$work/s4")"; return 1; }
    cli RPUSH k17 x > /dev/null
    $R --status k17 > "$work/s3"
    expect_status 0 $? "--status of a list" || return 1
    grep -qx 'mode: not a lock' "$work/s3"
}
check "--status shows state, mode, owner, holds and TTL" t_status

t_counted_nested() {
    $R -m counted k18 sh -c '
        "$0" -m counted --id "$REDISLOCK_OWNER" -n k18 "$0" --status k18' \
        "$tool" > "$work/nested"
    st=$?
    expect_status 0 $st "nested counted holding" || return 1
    grep -qx 'mode: counted' "$work/nested" &&
    grep -qx 'holds: 2' "$work/nested" || { diag "$(tr '\n' '|' < "$work/nested")"; return 1; }
    [ "$(cli EXISTS k18)" = 0 ]
}
check "counted mode: a nested instance with the same --id re-enters (2 holds)" t_counted_nested

# --permits 2: two instances run at once, a third waits (or with -n is
# busy) and runs once a permit is given back; another number of permits
# while they are held is refused; -m counted and --status with it are
# usage errors.
t_permits() {
    $R --permits 2 ks sh -c "touch '$work/ks.1'; sleep 30" &
    h1=$!
    $R --permits 2 ks sh -c "touch '$work/ks.2'; sleep 30" &
    h2=$!
    wait_file "$work/ks.1" && wait_file "$work/ks.2" || return 1
    $R --permits 2 -n ks touch "$work/ks.n"
    stn=$?
    $R --permits 3 -n ks true 2> "$work/ks3.err"
    st3=$?
    $R --permits 2 -w 20 ks touch "$work/ks.3" &
    w=$!
    sleep 0.3
    [ ! -e "$work/ks.3" ] || { diag "a third ran beside two"; return 1; }
    kill -TERM $h1; wait $h1
    wait $w
    stw=$?
    kill -TERM $h2; wait $h2
    $R --permits 2 -m counted ks true 2> /dev/null
    stm=$?
    $R --permits 2 --status ks 2> /dev/null
    sts=$?
    expect_status 75 $stn "--permits 2 -n beside two holders" || return 1
    [ ! -e "$work/ks.n" ] || { diag "-n ran"; return 1; }
    expect_status 69 $st3 "--permits 3 beside holders of 2" || return 1
    grep -q 'permits' "$work/ks3.err" || { diag "$(cat "$work/ks3.err")"; return 1; }
    expect_status 0 $stw "the waiter, after a permit came back" || return 1
    [ -e "$work/ks.3" ] || { diag "the waiter did not run"; return 1; }
    expect_status 64 $stm "--permits with -m counted" || return 1
    expect_status 64 $sts "--permits with --status" || return 1
    [ "$(cli EXISTS ks)" = 0 ]
}
check "--permits 2: two at once, a third waits for a permit; another N refused" t_permits

# go-zero's own scripts (tests/gozero/) stand for a Go process.
t_gozero_interop() {
    lua=$(cat "$srcdir/tests/gozero/lockscript.lua")
    [ "$(cli EVAL "$lua" 1 k19 goid 5000)" = OK ] || return 1
    $R -n k19 true
    expect_status 75 $? "held by go-zero" || return 1
    cli DEL k19 > /dev/null
    $R k19 sh -c "$rcli -p $REDISLOCK_TEST_PORT EVAL '$lua' 1 k19 goid 5000" > "$work/go"
    expect_status 0 $? "tool holding" || return 1
    # go-zero's acquire got nil (empty output): refused.
    [ -z "$(cat "$work/go")" ] || { diag "go-zero got '$(cat "$work/go")'"; return 1; }
}
check "go-zero and the tool exclude each other on one key" t_gozero_interop

# No raw server or script text (WRONGTYPE, "script: SHA", user_script):
# the message says what the key holds and which option fits it.
t_mode_mismatch() {
    $R -m counted k20 sh -c "touch '$work/k20.held'; sleep 30" &
    holder=$!
    wait_file "$work/k20.held" || return 1
    $R -n k20 true 2> "$work/err"
    st=$?
    kill -TERM $holder; wait $holder
    expect_status 69 $st "go-zero mode meeting a counted key" || return 1
    grep -qx 'redislock: cannot acquire the lock k20: k20 holds a counted lock (or another hash); use -m counted' "$work/err" ||
        { diag "$(cat "$work/err")"; return 1; }
    cli SET k20s some-owner PX 30000 > /dev/null
    $R -m counted -n k20s true 2> "$work/err2"
    expect_status 69 $? "counted mode meeting a string" || return 1
    grep -qx 'redislock: cannot acquire the lock k20s: k20s holds a go-zero-format lock (or another string); leave out -m counted' "$work/err2" ||
        { diag "$(cat "$work/err2")"; return 1; }
    ! grep -Eq 'WRONGTYPE|script|@|\[' "$work/err" "$work/err2"
}
check "a lock of the other mode: exit 69, the message names the mode to use" t_mode_mismatch

# ---------------------------------------------------------------------------
# -v while waiting: who holds the lock at the start of the wait and every
# 5 s (one line each time, not a flood), and how long the wait took.
t_verbose_wait() {
    $R -e 30 k30 sh -c "touch '$work/k30.held'; sleep 60" &
    holder=$!
    wait_file "$work/k30.held" || return 1
    owner=$(cli GET k30)
    $R -v -w 30 k30 true 2> "$work/k30.err" &
    waiter=$!
    # The first report comes 5 s into the wait; then let the holder go.
    i=0
    until grep -q 'still waiting' "$work/k30.err" 2> /dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || { kill -TERM $holder $waiter; wait; diag "no report: $(cat "$work/k30.err")"; return 1; }
        sleep 0.05
    done
    kill -TERM $holder; wait $holder
    wait $waiter
    st=$?
    expect_status 0 $st "the waiter" || return 1
    # At the start: who holds it and for how long.
    grep -Eq "^redislock: waiting for k30 \(up to 30\.0 s\): held by $owner \(go-zero format\); its lease ends in [0-9]+\.[0-9] s unless renewed$" "$work/k30.err" ||
        { diag "start: $(tr '\n' '|' < "$work/k30.err")"; return 1; }
    grep -Eq "^redislock: still waiting for k30 after 5\.[0-9] s: held by $owner " "$work/k30.err" ||
        { diag "report: $(tr '\n' '|' < "$work/k30.err")"; return 1; }
    [ "$(grep -c 'still waiting' "$work/k30.err")" -eq 1 ] ||
        { diag "reports: $(tr '\n' '|' < "$work/k30.err")"; return 1; }
    grep -Eq '^redislock: got the lock k30 after [5-9]\.[0-9] s \(owner [0-9a-f]{32}, token [0-9]+\)$' "$work/k30.err" ||
        { diag "got: $(tr '\n' '|' < "$work/k30.err")"; return 1; }
    # -n says who holds it too.
    cli SET k30 someone PX 20000 > /dev/null
    $R -v -n k30 true 2> "$work/k30.busy"
    expect_status 75 $? "-v -n on a held key" || return 1
    grep -Eq '^redislock: k30 is busy: held by someone \(go-zero format\); its lease ends in' "$work/k30.busy" ||
        { diag "busy: $(cat "$work/k30.busy")"; return 1; }
}
check "-v while waiting: who holds the lock at the start and every 5 s, then how long it took" t_verbose_wait

# -v's reports leave the waiting itself alone: a signal still ends the
# wait at once, leaving the queue of waiters.
t_verbose_wait_signal() {
    $R k31 sh -c "touch '$work/k31.held'; sleep 30" &
    holder=$!
    wait_file "$work/k31.held" || return 1
    $R -v k31 touch "$work/k31.ran" 2> "$work/k31.err" &
    waiter=$!
    wait_waiting k31 || return 1
    t0=$(now_ms)
    kill -TERM $waiter
    wait $waiter
    st=$?
    t=$(( $(now_ms) - t0 ))
    left=$(cli ZCARD "{k31}:waiters")
    kill -TERM $holder; wait $holder
    expect_status 143 $st "SIGTERM while waiting with -v" || return 1
    [ "$left" = 0 ] || { diag "waiter registration left behind"; return 1; }
    [ $t -lt 1500 ] || { diag "took $t ms"; return 1; }
    [ ! -e "$work/k31.ran" ]
}
check "-v while waiting: SIGTERM still ends the wait at once" t_verbose_wait_signal

# json_valid FILE: FILE is one valid JSON value (jq or python3, if any).
json_valid() {
    if command -v jq > /dev/null 2>&1; then
        jq -e . "$1" > /dev/null 2>&1
    elif command -v python3 > /dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$1" 2>/dev/null
    else
        diag "no jq or python3: JSON syntax not checked"
        return 0
    fi
}

# expect_json FILE TEXT: FILE is that one line, and valid JSON.
expect_json() {
    [ "$(cat "$1")" = "$2" ] || { diag "got  $(cat "$1")"; diag "want $2"; return 1; }
    json_valid "$1" || { diag "not valid JSON: $(cat "$1")"; return 1; }
}

t_status_json() {
    $R --status --json k32 > "$work/j1"
    expect_status 1 $? "--status --json of a free key" || return 1
    expect_json "$work/j1" '{"key":"k32","held":false,"mode":null,"owner":null,"ttl_ms":null,"holds":0,"waiters":0,"fence":0}' || return 1
    $R -e 10 k32 sh -c "touch '$work/k32.held'; sleep 30" &
    holder=$!
    wait_file "$work/k32.held" || return 1
    # One waiter, registered before the look.
    $R -w 20 k32 true &
    waiter=$!
    i=0
    until [ "$(cli ZCARD '{k32}:waiters')" = 1 ]; do
        i=$((i + 1)); [ $i -lt 100 ] || { diag "no waiter registered"; return 1; }
        sleep 0.05
    done
    $R --json --status k32 > "$work/j2"
    st=$?
    owner=$(cli GET k32)
    kill -TERM $holder; wait $holder; wait $waiter
    expect_status 0 $st "--status --json of a held key" || return 1
    ttl=$(sed -n 's/.*"ttl_ms":\([0-9]*\),.*/\1/p' "$work/j2")
    [ -n "$ttl" ] && [ "$ttl" -gt 5000 ] && [ "$ttl" -le 10000 ] || { diag "ttl_ms in $(cat "$work/j2")"; return 1; }
    expect_json "$work/j2" "{\"key\":\"k32\",\"held\":true,\"mode\":\"gozero\",\"owner\":\"$owner\",\"ttl_ms\":$ttl,\"holds\":1,\"waiters\":1,\"fence\":1}" || return 1
    # Counted, two holds.
    $R -m counted k33 sh -c '"$0" -m counted --id "$REDISLOCK_OWNER" -n k33 "$0" --status --json k33' \
        "$tool" > "$work/j3" || return 1
    grep -Eq '^\{"key":"k33","held":true,"mode":"counted","owner":"[0-9a-f]{32}","ttl_ms":[0-9]+,"holds":2,"waiters":0,"fence":1\}$' "$work/j3" ||
        { diag "$(cat "$work/j3")"; return 1; }
    json_valid "$work/j3" || return 1
    # Foreign values: a string without expiry, a list.
    cli SET k34 "hello world" > /dev/null
    $R --status --json k34 > "$work/j4"
    expect_status 0 $? "a foreign string" || return 1
    expect_json "$work/j4" '{"key":"k34","held":true,"mode":"foreign","owner":null,"ttl_ms":-1,"holds":0,"waiters":0,"fence":0}' || return 1
    cli RPUSH k35 x > /dev/null
    cli PEXPIRE k35 50000 > /dev/null
    $R --status --json k35 > "$work/j5"
    grep -Eq '^\{"key":"k35","held":true,"mode":"foreign","owner":null,"ttl_ms":[0-9]+,"holds":0,"waiters":0,"fence":0\}$' "$work/j5" ||
        { diag "$(cat "$work/j5")"; return 1; }
    # A key with a quote, a backslash, control characters, UTF-8 and a
    # stray byte: escaped, and still valid UTF-8.  (No newline: libtool's
    # execute mode, under make check-valgrind, would cut the argument.)
    k=$(printf 'a"b\\c\td\001\303\251\377')
    $R --status --json "$k" > "$work/j6"
    expect_status 1 $? "an awkward free key" || return 1
    expect_json "$work/j6" "$(printf '{"key":"a\\"b\\\\c\\u0009d\\u0001\303\251\\ufffd","held":false,"mode":null,"owner":null,"ttl_ms":null,"holds":0,"waiters":0,"fence":0}')" || return 1
    # --json only with --status.
    $R --json k32 true 2> /dev/null
    expect_status 64 $? "--json without --status"
}
check "--status --json: held, mode, owner, ttl_ms, holds, waiters, fence as one JSON object" t_status_json

# A plain string is what a go-zero lock is, and what any other program's
# value is: --status says so, and calls one that cannot be a lock a foreign
# value.
t_status_foreign() {
    cli SET k36 "$(printf '%032x' 7)" PX 20000 > /dev/null
    $R --status k36 > "$work/f1"
    expect_status 0 $? "--status of a string with an expiry" || return 1
    grep -qx 'mode: go-zero' "$work/f1" &&
    grep -q '^note: .*foreign string value would look the same' "$work/f1" ||
        { diag "$(tr '\n' '|' < "$work/f1")"; return 1; }
    cli SET k37 "not an id" PX 20000 > /dev/null
    $R --status k37 > "$work/f2"
    grep -qx 'mode: not a lock' "$work/f2" &&
    grep -qx 'value: not an id' "$work/f2" &&
    grep -q '^note: a string that no owner ID can be' "$work/f2" &&
    ! grep -q '^owner:' "$work/f2" || { diag "$(tr '\n' '|' < "$work/f2")"; return 1; }
}
check "--status: a plain string may be foreign, and one that cannot be a lock is called so" t_status_foreign

# Error messages in the user's terms: no doubled "timeout:", no Lua or
# script text, the step that failed and what to do.
t_error_messages() {
    bad='WRONGTYPE|script|user_script|@|\[|timeout: timeout|connection error or timeout: |Redis replied with an error'
    # A key beside the lock of the wrong type: named among the lock's keys.
    cli SET k38 x PX 30000 > /dev/null
    cli SET "{k38}:waiters" y > /dev/null
    $R -w 1 k38 true 2> "$work/e1"
    expect_status 69 $? "waiters key of the wrong type" || return 1
    grep -q '^redislock: cannot acquire the lock k38: a key beside the lock holds a value of another type than redislock keeps there: of {k38}:fence, {k38}:waiters, {k38}:wake and {k38}:turn, delete' "$work/e1" ||
        { diag "$(cat "$work/e1")"; return 1; }
    # A command of the script refusing a value: the server's words only.
    cli HSET "{k39}:fence" n abc > /dev/null
    $R k39 true 2> "$work/e2"
    expect_status 69 $? "fencing counter not a number" || return 1
    grep -q '^redislock: cannot acquire the lock k39: Redis refused: hash value is not an integer (does one of the keys k39, {k39}:fence' "$work/e2" ||
        { diag "$(cat "$work/e2")"; return 1; }
    # A value of another type in the lock key.
    cli RPUSH k40 x > /dev/null
    $R -n k40 true 2> "$work/e3"
    grep -qx 'redislock: cannot acquire the lock k40: k40 holds a value of another type, not a lock; delete it or use another KEY' "$work/e3" ||
        { diag "$(cat "$work/e3")"; return 1; }
    # A server too slow to answer: said once, with what to change.
    # (CLIENT PAUSE answers once the pause is on: no race with it; long,
    # as the tool may take seconds to start under valgrind, and ended by
    # CLIENT UNPAUSE once the tool is done.)
    cli CLIENT PAUSE 60000 ALL > /dev/null
    $R -u "$REDISLOCK_URL?timeout=300" k41 true 2> "$work/e4"
    st=$?
    cli CLIENT UNPAUSE > /dev/null
    expect_status 69 $st "a timeout" || return 1
    grep -qx "redislock: cannot acquire the lock k41: Redis did not answer in time (the URL's ?timeout=MS sets how long to wait; 5000 by default)" "$work/e4" ||
        { diag "$(cat "$work/e4")"; return 1; }
    # Out of memory.
    cli CONFIG SET maxmemory 1 > /dev/null
    $R k42 true 2> "$work/e5"
    st=$?
    cli CONFIG SET maxmemory 0 > /dev/null
    expect_status 69 $st "out of memory" || return 1
    grep -qx 'redislock: cannot acquire the lock k42: Redis is out of memory (maxmemory reached) and refuses writes' "$work/e5" ||
        { diag "$(cat "$work/e5")"; return 1; }
    # ACL: which keys and commands the lock needs.  A wrong password.
    cli ACL SETUSER clitest on '>pw' '~other:*' '+@all' > /dev/null
    $R -u "redis://clitest:pw@127.0.0.1:$REDISLOCK_TEST_PORT" k43 true 2> "$work/e6"
    expect_status 69 $? "NOPERM" || return 1
    grep -qx 'redislock: cannot acquire the lock k43: the Redis user may not run GET on k43; go-zero mode needs +evalsha +eval +get +set +del +pexpire +pttl on k43 (see redislock(1), NOTES)' "$work/e6" ||
        { diag "$(cat "$work/e6")"; return 1; }
    $R -u "redis://clitest:wrongpw@127.0.0.1:$REDISLOCK_TEST_PORT" k43 true 2> "$work/e7"
    expect_status 69 $? "wrong password" || return 1
    grep -qx 'redislock: cannot acquire the lock k43: Redis refused the user name or password in the URL' "$work/e7" ||
        { diag "$(cat "$work/e7")"; return 1; }
    cli ACL DELUSER clitest > /dev/null
    ! grep -Eq "$bad" "$work"/e[1-7] || { diag "raw text: $(grep -Eh "$bad" "$work"/e[1-7])"; return 1; }
    # -v adds the library's own words, for bug reports.
    $R -v k39 true 2> "$work/e8"
    grep -q '^redislock: (the library said: .*hash value is not an integer' "$work/e8" ||
        { diag "$(cat "$work/e8")"; return 1; }
}
check "error messages: in the user's terms, without script text or a doubled timeout" t_error_messages

# flock(1)'s habits: its options that redislock has not (or has with
# another meaning) get a hint of what to do instead, not just "bad option".
t_flock_habits() {
    for args in "-x" "-o" "-F" "-xn" "--shared" "--exclusive" "--close" \
                "--no-fork" "--unlock"; do
        # shellcheck disable=SC2086
        $R $args k true > "$work/out" 2>&1
        expect_status 64 $? "redislock $args" || return 1
        grep -q "^redislock: '.*' is flock's.*, not an option here: " "$work/out" ||
            { diag "$args: $(cat "$work/out")"; return 1; }
    done
    $R -x k true 2>&1 | grep -q "every redislock lock is exclusive, so leave it out" || return 1
    $R -o k true 2>&1 | grep -q "not on a descriptor COMMAND could inherit" || return 1
    $R -F k true 2>&1 | grep -q "always stays beside COMMAND" || return 1
    # -s, -e and -u take an argument here: a lock name there is a hint.
    $R -s k true > "$work/out" 2>&1
    expect_status 64 $? "flock's -s" || return 1
    grep -q "^redislock: bad signal 'k' for -s; if you meant flock's -s (--shared): redislock has no shared locks" "$work/out" ||
        { diag "$(cat "$work/out")"; return 1; }
    $R -e k true > "$work/out" 2>&1
    expect_status 64 $? "flock's -e" || return 1
    grep -q "^redislock: bad expiry 'k' (seconds, > 0); if you meant flock's -e (--exclusive): every redislock lock is exclusive" "$work/out" ||
        { diag "$(cat "$work/out")"; return 1; }
    $R -u lockfile k true > "$work/out" 2>&1
    expect_status 64 $? "flock's -u" || return 1
    grep -q "if you meant flock's -u (--unlock): a lock is released when COMMAND ends" "$work/out" ||
        { diag "$(cat "$work/out")"; return 1; }
}
check "flock(1)'s -x, -s, -o, -F, -e, -u: exit 64 with what to do instead" t_flock_habits

# A URL from the environment: its errors say where it came from.
t_url_from_env() {
    REDISLOCK_URL='redis://u:s3cretpw@127.0.0.1:notaport' $R k true 2> "$work/u1"
    expect_status 64 $? "a bad \$REDISLOCK_URL" || return 1
    grep -qxF 'redislock: $REDISLOCK_URL (from the environment): port is not a number in 1..65535' "$work/u1" ||
        { diag "$(cat "$work/u1")"; return 1; }
    REDISLOCK_URL="unix://$work/no-such.sock" $R k true 2> "$work/u2"
    expect_status 69 $? "no server at \$REDISLOCK_URL" || return 1
    grep -q '^redislock: cannot acquire the lock k: .* (URL from $REDISLOCK_URL)$' "$work/u2" ||
        { diag "$(cat "$work/u2")"; return 1; }
    $R -u "unix://$work/no-such.sock" k true 2> "$work/u3"
    ! grep -q 'REDISLOCK_URL' "$work/u3" || { diag "$(cat "$work/u3")"; return 1; }
    ! grep -q s3cretpw "$work/u1"
}
check "an error in \$REDISLOCK_URL says it came from the environment" t_url_from_env

# Waiting for a key that holds a value that is not a lock and has no
# expiry waits for ever: said once, without -v.  Waiting for a lock says
# nothing.
t_wait_foreign() {
    cli SET k70 "not a lock" > /dev/null
    $R -w 2.5 k70 true 2> "$work/k70.err"
    st=$?
    cli DEL k70 > /dev/null
    expect_status 75 $st "waiting for a foreign value" || return 1
    # Said once; then the line of any wait that runs out.
    [ "$(grep -c . "$work/k70.err")" -eq 2 ] &&
    grep -q '^redislock: waiting for k70, which holds a value that is not a lock (a string without expiry.*: it will never be freed unless someone deletes it' "$work/k70.err" &&
    tail -n 1 "$work/k70.err" | grep -q '^redislock: gave up waiting for k70 after 2\.[0-9] s' ||
        { diag "$(cat "$work/k70.err")"; return 1; }
    cli SET k71 "$(printf '%032x' 5)" PX 2000 > /dev/null
    $R -w 10 k71 true 2> "$work/k71.err"
    expect_status 0 $? "waiting for a lock" || return 1
    [ ! -s "$work/k71.err" ] || { diag "$(cat "$work/k71.err")"; return 1; }
}
check "a wait for a foreign value without expiry says once that it is never freed" t_wait_foreign

# A password given with -u: hidden from ps and /proc/PID/cmdline once the
# tool has started (the rest of the URL kept), with a warning, which
# --no-auth-warning leaves out; --url-file keeps it off the command line.
# (Under valgrind the command line shown is valgrind's own copy.)
t_password_hidden() {
    cli ACL SETUSER pwuser on '>s3cretpw' '~*' '+@all' > /dev/null
    for u in "redis://pwuser:s3cretpw@127.0.0.1:$REDISLOCK_TEST_PORT/0" \
             "unix://pwuser:s3cretpw@$REDISLOCK_TEST_SOCKET?db=0"; do
        rm -f "$work/k80.held"
        $R -u "$u" k80 sh -c "touch '$work/k80.held'; sleep 30" 2> "$work/k80.err" &
        holder=$!
        wait_file "$work/k80.held" || return 1
        tr '\0' ' ' < "/proc/$holder/cmdline" > "$work/k80.cmdline"
        kill -TERM $holder; wait $holder
        if [ -z "$wrapper" ]; then
            ! grep -q s3cretpw "$work/k80.cmdline" &&
            grep -qF -- "-u $(echo "$u" | sed 's/s3cretpw/xxxxxxxx/') k80 sh -c" "$work/k80.cmdline" ||
                { diag "cmdline: $(cat "$work/k80.cmdline")"; return 1; }
        fi
        [ "$(grep -c 'warning: a password given with -u can be seen by other users' "$work/k80.err")" -eq 1 ] ||
            { diag "stderr: $(cat "$work/k80.err")"; return 1; }
    done
    $R --no-auth-warning -u "redis://pwuser:s3cretpw@127.0.0.1:$REDISLOCK_TEST_PORT" k80 true 2> "$work/k80.err2"
    expect_status 0 $? "--no-auth-warning" || return 1
    [ ! -s "$work/k80.err2" ] || { diag "$(cat "$work/k80.err2")"; return 1; }
    printf 'redis://pwuser:s3cretpw@127.0.0.1:%s\n' "$REDISLOCK_TEST_PORT" > "$work/url"
    $R --url-file "$work/url" k80 sh -c 'echo "$REDISLOCK_KEY"' > "$work/k80.out" 2> "$work/k80.err3"
    expect_status 0 $? "--url-file" || return 1
    [ "$(cat "$work/k80.out")" = k80 ] && [ ! -s "$work/k80.err3" ] ||
        { diag "$(cat "$work/k80.out" "$work/k80.err3")"; return 1; }
    printf 'redis://a\nredis://b\n' > "$work/url2"
    $R --url-file "$work/url2" k80 true 2> "$work/k80.err4"
    expect_status 64 $? "--url-file with two lines" || return 1
    cli ACL DELUSER pwuser > /dev/null
}
check "a password given with -u is hidden from /proc/PID/cmdline, with a warning; --url-file" t_password_hidden

# expect_unreleased FILE STATUS: the message of a failed release says so,
# how COMMAND ended (status STATUS) and how long the lock stays (a lease
# of 30 s, given up a moment ago).
expect_unreleased() {
    grep -Eq "^redislock: cannot release the lock k6[0-9]: .*; COMMAND exited with status $2; the lock stays held until its lease runs out, in about (29|30)\.[0-9] s$" "$1" ||
        { diag "$(cat "$1")"; return 1; }
}

# A release that fails is no success: exit 74, even after COMMAND
# succeeded.  Here the Redis user may acquire (and renew) but not release:
# the release script's DEL is refused.
t_release_refused() {
    cli ACL SETUSER norelease on '>pw' '~*' '+@all' '-del' > /dev/null
    u="redis://norelease:pw@127.0.0.1:$REDISLOCK_TEST_PORT"
    $R -e 30 -u "$u" k60 true 2> "$work/k60.err"
    st=$?
    $R -e 30 -u "$u" k62 sh -c 'exit 3' 2> "$work/k62.err"
    st3=$?
    ttl=$(cli PTTL k60)
    cli ACL DELUSER norelease > /dev/null
    cli DEL k60 k62 > /dev/null
    expect_status 74 $st "release refused after COMMAND succeeded" || return 1
    expect_status 74 $st3 "release refused after COMMAND exited 3" || return 1
    expect_unreleased "$work/k60.err" 0 || return 1
    expect_unreleased "$work/k62.err" 3 || return 1
    grep -q 'the Redis user may not run DEL on k60; go-zero mode needs' "$work/k60.err" ||
        { diag "$(cat "$work/k60.err")"; return 1; }
    [ "$ttl" -gt 25000 ] || { diag "PTTL $ttl"; return 1; }
}
check "a refused release exits 74, says how COMMAND ended and how long the lock stays" t_release_refused

# Redis gone before the release (a private server, stopped by COMMAND).
t_release_server_gone() {
    private_server gone || return 1
    $R -u "unix://$d/sock" -e 30 k61 sh -c \
        "kill $spid; while kill -0 $spid 2> /dev/null; do sleep 0.05; done" \
        2> "$work/k61.err"
    st=$?
    wait $spid
    expect_status 74 $st "Redis gone before the release" || return 1
    expect_unreleased "$work/k61.err" 0
}
check "Redis gone before the release: exit 74, with how long the lock stays" t_release_server_gone

# A lost lock is reported once (by the watch, not again by the release).
t_lost_said_once() {
    $R -e 1 k44 sh -c "touch '$work/k44.held'; sleep 30 & wait" 2> "$work/k44.err" &
    holder=$!
    wait_file "$work/k44.held" || return 1
    cli DEL k44 > /dev/null
    wait $holder
    expect_status 76 $? "lost" || return 1
    [ "$(grep -c 'lost' "$work/k44.err")" -eq 1 ] || { diag "$(tr '\n' '|' < "$work/k44.err")"; return 1; }
}
check "a lost lock is reported once" t_lost_said_once

# The ACL rules of doc/acl.md, sent as written: acl_user NAME creates the
# user NAME (password "secret"), acl_url NAME is its URL.
acl_user() {
    rule=$(grep "^ACL SETUSER $1 " "$srcdir/doc/acl.md") ||
        { diag "doc/acl.md has no rule for $1"; return 1; }
    set -f                            # ~locks:* is no file name
    # shellcheck disable=SC2086
    got=$(cli $rule 2>&1)
    set +f
    [ "$got" = OK ] || { diag "$rule: $got"; return 1; }
}
acl_url() { echo "redis://$1:secret@127.0.0.1:$REDISLOCK_TEST_PORT"; }

# Wait until file $1 has a line matching $2, up to 10 s.
wait_line() {
    i=0
    while [ $i -lt 200 ]; do
        grep -q "$2" "$1" 2> /dev/null && return 0
        sleep 0.05; i=$((i + 1))
    done
    diag "$1 never said $2: $(cat "$1" 2> /dev/null)"
    return 1
}

# The go-zero-only rule: COMMAND runs under the lock and the release
# frees it (without wake-ups, which the user may not touch); fencing says
# which permission is missing and that --no-fencing does without; a wait
# polls; --status says what the lock key says, waiters and fence unknown.
t_acl_gozero_rule() {
    acl_user lock-gozero || return 1
    u=$(acl_url lock-gozero)
    $R -u "$u" --no-auth-warning --no-fencing locks:c1 sh -c 'echo "$REDISLOCK_KEY" > "$0"' "$work/c1.ran" 2> "$work/c1.err"
    expect_status 0 $? "a run of COMMAND" || { diag "$(cat "$work/c1.err")"; return 1; }
    [ "$(cat "$work/c1.ran")" = locks:c1 ] || return 1
    [ "$(cli EXISTS locks:c1 '{locks:c1}:waiters' '{locks:c1}:fence')" = 0 ] || { diag "keys left"; return 1; }
    [ ! -s "$work/c1.err" ] || { diag "$(cat "$work/c1.err")"; return 1; }
    # Fencing cannot do without its counter: nothing is taken.
    $R -u "$u" --no-auth-warning locks:c1 true 2> "$work/c1f.err"
    expect_status 69 $? "fencing refused" || return 1
    grep -qx 'redislock: cannot acquire the lock locks:c1: the Redis user may not run HGET on {locks:c1}:fence; fencing needs +hget +hincrby +hset on {locks:c1}:fence (or give --no-fencing; see redislock(1), NOTES)' "$work/c1f.err" ||
        { diag "$(cat "$work/c1f.err")"; return 1; }
    [ "$(cli EXISTS locks:c1 '{locks:c1}:fence')" = 0 ] || { diag "keys written"; return 1; }
    # -w waits by polling, and gets the lock once the holder lets go.
    $R -e 30 locks:c2 sh -c "touch '$work/c2.held'; while [ ! -e '$work/c2.go' ]; do sleep 0.05; done" &
    holder=$!
    wait_file "$work/c2.held" || return 1
    $R -u "$u" --no-auth-warning --no-fencing -v -w 20 locks:c2 touch "$work/c2.got" 2> "$work/c2.err" &
    waiter=$!
    wait_line "$work/c2.err" 'waiting for locks:c2' || return 1
    # --status meanwhile: the lock key's story; waiters and fence unknown.
    $R -u "$u" --no-auth-warning --status locks:c2 > "$work/c2.status" 2> "$work/c2.status.err"
    expect_status 0 $? "--status of a held lock" || { diag "$(cat "$work/c2.status.err")"; return 1; }
    grep -qx 'waiters: unknown' "$work/c2.status" && grep -qx 'fence: unknown' "$work/c2.status" &&
        grep -qx 'state: held' "$work/c2.status" && grep -qx 'mode: go-zero' "$work/c2.status" &&
        grep -q '^owner: [0-9a-f]\{32\}$' "$work/c2.status" && grep -q '^ttl_ms: [0-9]' "$work/c2.status" ||
        { diag "$(cat "$work/c2.status")"; return 1; }
    $R -u "$u" --no-auth-warning --status --json locks:c2 > "$work/c2.json" 2> "$work/c2.json.err"
    expect_status 0 $? "--status --json of a held lock" || return 1
    grep -Eqx '\{"key":"locks:c2","held":true,"mode":"gozero","owner":"[0-9a-f]{32}","ttl_ms":[0-9]+,"holds":1,"waiters":null,"fence":null\}' "$work/c2.json" ||
        { diag "$(cat "$work/c2.json")"; return 1; }
    $R -u "$u" --no-auth-warning -v --status locks:c2 > /dev/null 2> "$work/c2.v"
    grep -q '^redislock: waiters and fence unknown: the Redis user may not run TIME; the status queries need +get +pttl +hget on locks:c2, +time +zcount on {locks:c2}:waiters and +hget on {locks:c2}:fence' "$work/c2.v" ||
        { diag "$(cat "$work/c2.v")"; return 1; }
    touch "$work/c2.go"
    wait $holder
    expect_status 0 $? "holder" || return 1
    wait $waiter
    expect_status 0 $? "-w by polling" || { diag "$(cat "$work/c2.err")"; return 1; }
    [ -e "$work/c2.got" ] || return 1
    grep -q '^redislock: got the lock locks:c2 after ' "$work/c2.err" || { diag "$(cat "$work/c2.err")"; return 1; }
    [ "$(cli EXISTS locks:c2 '{locks:c2}:waiters')" = 0 ] || { diag "keys left"; return 1; }
    cli ACL DELUSER lock-gozero > /dev/null
}
check "ACL, go-zero rule of doc/acl.md: COMMAND runs, -w polls, fencing named, --status without waiters and fence" t_acl_gozero_rule

# The status rule (read-only): --status and --json tell everything, of
# both modes; taking a free lock is refused, naming the command, with -w
# too (a held one it can only watch).
t_acl_status_rule() {
    acl_user lock-status || return 1
    u=$(acl_url lock-status)
    $R -e 30 locks:c3 sh -c "touch '$work/c3.held'; while [ ! -e '$work/c3.go' ]; do sleep 0.05; done" &
    holder=$!
    $R -m counted -e 30 locks:c4 sh -c "touch '$work/c4.held'; while [ ! -e '$work/c4.go' ]; do sleep 0.05; done" &
    holder4=$!
    wait_file "$work/c3.held" && wait_file "$work/c4.held" || return 1
    $R -u "$u" --no-auth-warning --status locks:c3 > "$work/c3.status" 2>&1
    expect_status 0 $? "--status" || { diag "$(cat "$work/c3.status")"; return 1; }
    grep -qx 'waiters: 0' "$work/c3.status" && grep -Eqx 'fence: [1-9][0-9]*' "$work/c3.status" &&
        grep -qx 'mode: go-zero' "$work/c3.status" || { diag "$(cat "$work/c3.status")"; return 1; }
    $R -u "$u" --no-auth-warning --status --json locks:c4 > "$work/c4.json" 2>&1
    expect_status 0 $? "--status --json" || { diag "$(cat "$work/c4.json")"; return 1; }
    grep -Eqx '\{"key":"locks:c4","held":true,"mode":"counted","owner":"[0-9a-f]{32}","ttl_ms":[0-9]+,"holds":1,"waiters":0,"fence":[1-9][0-9]*\}' "$work/c4.json" ||
        { diag "$(cat "$work/c4.json")"; return 1; }
    $R -u "$u" --no-auth-warning --status locks:c5 > "$work/c5.status" 2>&1
    expect_status 1 $? "--status of a free key" || return 1
    grep -qx 'waiters: 0' "$work/c5.status" || { diag "$(cat "$work/c5.status")"; return 1; }
    # A run of COMMAND: refused, with what is missing; -w does not hide it.
    $R -u "$u" --no-auth-warning locks:c5 touch "$work/c5.ran" 2> "$work/c5.err"
    expect_status 69 $? "a run of COMMAND" || return 1
    $R -u "$u" --no-auth-warning -w 5 locks:c5 touch "$work/c5.ran" 2> "$work/c5w.err"
    expect_status 69 $? "-w" || return 1
    [ ! -e "$work/c5.ran" ] || return 1
    grep -qx 'redislock: cannot acquire the lock locks:c5: the Redis user may not run SET on locks:c5; go-zero mode needs +evalsha +eval +get +set +del +pexpire +pttl on locks:c5 (see redislock(1), NOTES)' "$work/c5.err" ||
        { diag "$(cat "$work/c5.err")"; return 1; }
    cmp -s "$work/c5.err" "$work/c5w.err" || { diag "$(cat "$work/c5w.err")"; return 1; }
    [ "$(cli EXISTS locks:c5 '{locks:c5}:waiters')" = 0 ] || { diag "keys written"; return 1; }
    touch "$work/c3.go" "$work/c4.go"
    wait $holder && wait $holder4 || return 1
    cli ACL DELUSER lock-status > /dev/null
}
check "ACL, status rule of doc/acl.md: --status and --json in full, COMMAND and -w refused by name" t_acl_status_rule

# scripts=none in the URL: go-zero mode on plain commands (no EVALSHA,
# no EVAL reaches the server), which cannot draw a fencing token: none
# by default (no REDISLOCK_TOKEN, no counter key; -v says why); --fencing
# and -m counted, which need the scripts, are usage errors naming why,
# and so is a quorum with scripts=none.  --status works, held and free.
t_scripts_none() {
    u="redis://127.0.0.1:$REDISLOCK_TEST_PORT?scripts=none"
    cli CONFIG RESETSTAT > /dev/null
    $R -u "$u" kn1 sh -c 'echo "${REDISLOCK_TOKEN-unset} $REDISLOCK_KEY" > "$0"; "$1" -u "$2" --status kn1 > "$0.status"' \
        "$work/kn1" "$tool" "$u" 2> "$work/kn1.err"
    expect_status 0 $? "a run with scripts=none" || { diag "$(cat "$work/kn1.err")"; return 1; }
    [ "$(cat "$work/kn1")" = "unset kn1" ] || { diag "$(cat "$work/kn1")"; return 1; }
    [ ! -s "$work/kn1.err" ] || { diag "$(cat "$work/kn1.err")"; return 1; }
    grep -qx 'state: held' "$work/kn1.status" && grep -qx 'mode: go-zero' "$work/kn1.status" &&
        grep -qx 'fence: 0' "$work/kn1.status" || { diag "$(cat "$work/kn1.status")"; return 1; }
    [ "$(cli EXISTS kn1 '{kn1}:fence' '{kn1}:waiters')" = 0 ] || { diag "keys left"; return 1; }
    # And on the free lock: exit 1, "free" (inspect's owner is "").
    $R -u "$u" --status kn1 > "$work/kn1.free" 2>&1
    expect_status 1 $? "--status of a free lock with scripts=none" || { diag "$(cat "$work/kn1.free")"; return 1; }
    grep -qx 'state: free' "$work/kn1.free" || { diag "$(cat "$work/kn1.free")"; return 1; }
    cli INFO commandstats | tr -d '\r' > "$work/kn1.stats"
    if grep -Eq '^cmdstat_(evalsha|eval|fcall):' "$work/kn1.stats" ||
       ! grep -q '^cmdstat_exec:' "$work/kn1.stats"; then
        diag "scripts sent, or no transaction: $(grep -E '^cmdstat_(eval|evalsha|fcall|exec|multi|watch):' "$work/kn1.stats" | tr '\n' ' ')"
        return 1
    fi
    # -v says why there is no token.
    $R -u "$u" -v -n kn1 true 2> "$work/kn1v.err"
    expect_status 0 $? "-v" || { diag "$(cat "$work/kn1v.err")"; return 1; }
    grep -qx 'redislock: no fencing token: the URL says scripts=none (go-zero mode on plain commands, which cannot draw a token with the lock); REDISLOCK_TOKEN is not set' "$work/kn1v.err" ||
        { diag "$(cat "$work/kn1v.err")"; return 1; }
    # And no "token 0" beside it (issue 34 part 4, item 6).
    grep -Eqx 'redislock: got the lock kn1 after [0-9.]+ s \(owner [0-9a-f]{32}, no fencing token\)' "$work/kn1v.err" &&
    ! grep -q 'token 0' "$work/kn1v.err" ||
        { diag "$(cat "$work/kn1v.err")"; return 1; }
    # From $REDISLOCK_URL as well.
    REDISLOCK_URL=$u $R kn1 sh -c 'echo "${REDISLOCK_TOKEN-unset}" > "$0"' "$work/kn1e" 2> "$work/kn1e.err"
    expect_status 0 $? "scripts=none from REDISLOCK_URL" || { diag "$(cat "$work/kn1e.err")"; return 1; }
    [ "$(cat "$work/kn1e")" = unset ] || return 1
    # What cannot run without scripts: a usage error, nothing sent.
    $R -u "$u" --fencing kn1 touch "$work/kn1.ran" 2> "$work/kn1f.err"
    expect_status 64 $? "--fencing with scripts=none" || return 1
    grep -qx 'redislock: --fencing needs the library.s scripts (a token is drawn with the lock, atomically), and the URL says scripts=none: drop scripts=none from the URL, or leave out --fencing' "$work/kn1f.err" ||
        { diag "$(cat "$work/kn1f.err")"; return 1; }
    $R -u "$u" -m counted --no-fencing kn1 touch "$work/kn1.ran" 2> "$work/kn1c.err"
    expect_status 64 $? "-m counted with scripts=none" || return 1
    grep -qx 'redislock: -m counted needs the library.s scripts (a hold count changes with the lock, atomically), and the URL says scripts=none: drop scripts=none from the URL, or leave out -m counted' "$work/kn1c.err" ||
        { diag "$(cat "$work/kn1c.err")"; return 1; }
    q="redis://127.0.0.1:$REDISLOCK_TEST_PORT"
    $R -u "$q" -u "$u" -u "$q" kn1 touch "$work/kn1.ran" 2> "$work/kn1q.err"
    expect_status 64 $? "a quorum with scripts=none" || return 1
    grep -q '^redislock: scripts=none: a quorum (several -u) needs the library.s scripts; drop scripts=none from its URLs$' "$work/kn1q.err" ||
        { diag "$(cat "$work/kn1q.err")"; return 1; }
    $R -u "$q" -u "$q" -u "$q" --fencing kn1 touch "$work/kn1.ran" 2> "$work/kn1qf.err"
    expect_status 64 $? "--fencing on a quorum" || return 1
    grep -q '^redislock: --fencing: a quorum (several -u) has no fencing counter' "$work/kn1qf.err" ||
        { diag "$(cat "$work/kn1qf.err")"; return 1; }
    [ ! -e "$work/kn1.ran" ] || return 1
    [ "$(cli EXISTS kn1)" = 0 ] || return 1
    # --fencing with scripts: a token, as by default.
    $R --fencing kn1 sh -c 'echo "$REDISLOCK_TOKEN" > "$0"' "$work/kn1t" || return 1
    grep -Eqx '[1-9][0-9]*' "$work/kn1t" || { diag "$(cat "$work/kn1t")"; return 1; }
    cli DEL '{kn1}:fence' > /dev/null
}
check "scripts=none: no fencing token by default (-v says why), no script sent; --fencing, -m counted and a quorum are usage errors" t_scripts_none

# A user who may not run scripts (the scripts=none rule of doc/acl.md,
# lock-plain), with the default URL: go-zero mode runs on plain commands
# with --no-fencing, and is woken as a waiter by a scripted release; the
# default (a fencing token) and -m counted fail, having written nothing,
# saying what to do.
t_acl_plain_rule() {
    acl_user lock-plain || return 1
    u=$(acl_url lock-plain)
    $R -u "$u" --no-auth-warning --no-fencing locks:p1 sh -c 'echo "${REDISLOCK_TOKEN-unset} $REDISLOCK_KEY" > "$0"' "$work/p1.ran" 2> "$work/p1.err"
    expect_status 0 $? "a run with --no-fencing" || { diag "$(cat "$work/p1.err")"; return 1; }
    [ "$(cat "$work/p1.ran")" = "unset locks:p1" ] || return 1
    [ ! -s "$work/p1.err" ] || { diag "$(cat "$work/p1.err")"; return 1; }
    $R -u "$u" --no-auth-warning locks:p1 touch "$work/p1.fenced" 2> "$work/p1f.err"
    expect_status 69 $? "fencing without scripts" || return 1
    grep -qx 'redislock: cannot acquire the lock locks:p1: Redis will not run the library.s scripts (EVALSHA, EVAL) for this user, and the fencing token needs them: add --no-fencing (go-zero mode then runs on plain commands, without a token) or allow +evalsha +eval (see redislock(1), NOTES)' "$work/p1f.err" ||
        { diag "$(cat "$work/p1f.err")"; return 1; }
    $R -u "$u" --no-auth-warning -m counted locks:p1 touch "$work/p1.fenced" 2> "$work/p1c.err"
    expect_status 69 $? "counted mode without scripts" || return 1
    grep -qx 'redislock: cannot acquire the lock locks:p1: Redis will not run the library.s scripts (EVALSHA, EVAL) for this user, and counted mode needs them: leave out -m counted and add --no-fencing (go-zero mode then runs on plain commands, without a token), or allow +evalsha +eval (see redislock(1), NOTES)' "$work/p1c.err" ||
        { diag "$(cat "$work/p1c.err")"; return 1; }
    [ ! -e "$work/p1.fenced" ] || return 1
    [ "$(cli EXISTS locks:p1 '{locks:p1}:fence' '{locks:p1}:waiters')" = 0 ] || { diag "keys written"; return 1; }
    # A waiter without scripts, woken by a holder with them.
    $R -e 30 locks:p2 sh -c "touch '$work/p2.held'; while [ ! -e '$work/p2.go' ]; do sleep 0.05; done" &
    holder=$!
    wait_file "$work/p2.held" || return 1
    $R -u "$u" --no-auth-warning --no-fencing -v -w 20 locks:p2 touch "$work/p2.got" 2> "$work/p2.err" &
    waiter=$!
    wait_key '{locks:p2}:waiters' || return 1
    touch "$work/p2.go"
    wait $holder
    expect_status 0 $? "holder" || return 1
    wait $waiter
    expect_status 0 $? "the waiter" || { diag "$(cat "$work/p2.err")"; return 1; }
    [ -e "$work/p2.got" ] || return 1
    grep -q '^redislock: got the lock locks:p2 after ' "$work/p2.err" || { diag "$(cat "$work/p2.err")"; return 1; }
    [ "$(cli EXISTS locks:p2 '{locks:p2}:waiters')" = 0 ] || { diag "keys left"; return 1; }
    cli ACL DELUSER lock-plain > /dev/null
}
check "ACL, scripts=none rule of doc/acl.md: --no-fencing runs on plain commands and is woken; fencing and -m counted say add --no-fencing or allow +evalsha +eval" t_acl_plain_rule

if [ -n "$vglogs" ]; then
    t_valgrind_clean() {
        bad=$(find "$vglogs" -name '*.log' -size +0c)
        [ -z "$bad" ] || { for f in $bad; do sed 's/^/# /' "$f"; done; return 1; }
    }
    check "valgrind reported nothing for any run of the tool" t_valgrind_clean
fi

echo "1..$n"
rm -rf "$work"
[ $failed -eq 0 ]
