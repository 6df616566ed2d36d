#!/bin/sh
# t_check.sh - redislock --check against servers set up to trip each
# finding: an evicting maxmemory-policy, no persistence (and RDB only,
# appendfsync no), ACL users without scripting, without BLPOP and WAIT,
# without CONFIG, a replica stopped with SIGSTOP, a slow server; a clean,
# well-configured server (exit 0); unreachable servers (exit 69); a
# quorum, a Cluster and Sentinel.  Speaks TAP.
#
# Every server is the test's own, on loopback (a private port, stopped by
# PID; tests/with-redis.sh stops any left behind through its pidfile);
# with-redis.sh's own server serves as the one without persistence.
# With REDISLOCK_TEST_WRAPPER set (make check-valgrind) the tool runs
# under it.  REDISLOCK_CHECK_ONLY (an extended regular expression) runs
# only the tests whose function name matches.
set -u

srcdir=${REDISLOCK_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${REDISLOCK_TEST_BUILDDIR:-$(pwd)}

if [ -z "${REDISLOCK_CHECK_TEST_INNER:-}" ]; then
    REDISLOCK_CHECK_TEST_INNER=1
    REDISLOCK_CHECK_WRAPPER=${REDISLOCK_TEST_WRAPPER:-}
    export REDISLOCK_CHECK_TEST_INNER REDISLOCK_CHECK_WRAPPER
    REDISLOCK_TEST_WRAPPER= exec sh "$srcdir/tests/with-redis.sh" sh "$0" "$@"
fi

work=$(mktemp -d "$REDISLOCK_TEST_TMPDIR/check.XXXXXX")
wrapper=$REDISLOCK_CHECK_WRAPPER
vglogs=
case $wrapper in
    *valgrind*) vglogs=$work/vg
                mkdir "$vglogs"
                wrapper="$wrapper --trace-children=no --error-exitcode=99"
                wrapper="$wrapper --suppressions=$srcdir/tests/cli-valgrind.supp"
                wrapper="$wrapper --log-file=$vglogs/%p.log" ;;
esac
tool="$builddir/cli/redislock"
R=$tool
if [ -n "$wrapper" ]; then
    R="$builddir/libtool --mode=execute $wrapper $tool"
fi
export R
server=$REDISLOCK_TEST_REDIS_SERVER
# redis-cli, or valkey-cli under make check-valkey.
rcli=${REDISLOCK_TEST_REDIS_CLI:-redis-cli}
unset REDISLOCK_URL

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
diag() { echo "# $*"; }

check() {
    name=$1; shift
    if [ -n "${REDISLOCK_CHECK_ONLY:-}" ] &&
       ! echo "$1" | grep -Eq "$REDISLOCK_CHECK_ONLY"; then
        n=$((n + 1)); echo "ok $n # SKIP not in REDISLOCK_CHECK_ONLY"
        return
    fi
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

expect_status() {
    if [ "$2" -ne "$1" ]; then
        diag "$3: exit status $2, want $1"
        return 1
    fi
    return 0
}

# has FILE LINE-REGEX: FILE has a line matching LINE-REGEX (extended).
has() {
    grep -Eq -- "$2" "$1" && return 0
    diag "no line matching '$2' in:"
    sed 's/^/#   /' "$1"
    return 1
}
lacks() {
    grep -Eq -- "$2" "$1" || return 0
    diag "a line matching '$2' in:"
    sed 's/^/#   /' "$1"
    return 1
}

# json FILE EXPR: print EXPR (Python, on the document J) from the JSON in
# FILE; fails if FILE is not one JSON object.  Without python3, JSON is
# checked by grep alone (json_ok says so).
have_python=
command -v python3 > /dev/null 2>&1 && have_python=1
json() {
    python3 -c 'import json, sys
J = json.load(open(sys.argv[1], encoding="utf-8"))
assert isinstance(J, dict)
print(eval(sys.argv[2]))' "$1" "$2"
}
# json_is FILE EXPR WANT
json_is() {
    [ -n "$have_python" ] || return 0
    got=$(json "$1" "$2" 2>&1) || { diag "$1 is not JSON: $got"; sed 's/^/#   /' "$1"; return 1; }
    [ "$got" = "$3" ] && return 0
    diag "$2 is '$got', want '$3'"
    return 1
}

major=$("$server" --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')
debug=
[ "${major:-0}" -ge 7 ] && debug="--enable-debug-command local"

# Ports for our servers lie below the kernel's ephemeral range (as in
# with-cluster.sh), so that no client's own connection holds one.
low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[ -n "$low" ] || low=32768
span=$((low - 11100))
[ $span -gt 100 ] || span=100

# tcp_server NAME BINARY [ARG...]: a server of the test's own, BINARY
# (redis-server, or valkey-server), on a free loopback port: $port; its
# PID in $spid and in $d/redis.pid ($d: the directory NAME under the
# test's), which with-redis.sh stops if the test does not.
tcp_server() {
    sname=$1; bin=$2; shift 2
    d="$REDISLOCK_TEST_TMPDIR/$sname"
    mkdir -p "$d"
    attempt=0
    while [ $attempt -lt 20 ]; do
        attempt=$((attempt + 1))
        port=$(( ( $(od -An -N2 -tu2 /dev/urandom) % span ) + 11000 ))
        # shellcheck disable=SC2086
        "$bin" --port "$port" --bind 127.0.0.1 --dir "$d" \
            --pidfile "$d/redis.pid" --daemonize no --logfile "$d/log" \
            $debug "$@" < /dev/null > /dev/null 2>&1 &
        spid=$!
        sh "$srcdir/tests/wait-server.sh" "$spid" "$rcli" -h 127.0.0.1 \
            -p "$port" && return 0
        kill "$spid" 2> /dev/null; wait "$spid" 2> /dev/null
    done
    diag "could not start $bin for $sname"
    return 1
}
# stop_server PID: TERM (after CONT: it may be stopped), up to 5 s, then
# KILL (Redis refuses to shut down while it writes its first AOF).
stop_server() {
    kill -CONT "$1" 2> /dev/null
    kill "$1" 2> /dev/null
    i=0
    while [ $i -lt 100 ] && kill -0 "$1" 2> /dev/null; do
        case $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2> /dev/null) in
            Z|"") break ;;
        esac
        sleep 0.05; i=$((i + 1))
    done
    kill -9 "$1" 2> /dev/null
    wait "$1" 2> /dev/null
    return 0
}

# A clean, well-configured server: AOF with appendfsync everysec, no
# maxmemory (noeviction), no replicas.  Its port in $clean.
tcp_server clean "$server" --appendonly yes --appendfsync everysec \
    --save '' --repl-diskless-sync-delay 0 || { echo "Bail out! no server"; exit 99; }
clean=$port
clean_pid=$spid
ccli() { "$rcli" -h 127.0.0.1 -p "$clean" "$@"; }
user_url() { echo "redis://$1:pw@127.0.0.1:$clean"; }

# What the "may run" line says of a user who may run everything: the
# commands the scripts run (go-zero and counted mode, waiting, fencing,
# the status queries), and without scripts each operation's.
script_run='GET yes, SET yes, DEL yes, PEXPIRE yes, PTTL yes, EXISTS yes, HGET yes, HSET yes, HINCRBY yes, TIME yes, ZADD yes, ZREM yes, ZCARD yes, ZCOUNT yes, ZREMRANGEBYSCORE yes, RPUSH yes, BLPOP yes'
plain_run='WATCH yes, UNWATCH yes, MULTI yes, EXEC yes, DISCARD yes, GET yes, SET yes, DEL yes, PEXPIRE yes, PTTL yes, EXISTS yes, HGET yes, TIME yes, ZADD yes, ZREM yes, ZCARD yes, ZCOUNT yes, ZREVRANGEBYSCORE yes, ZREMRANGEBYSCORE yes, RPUSH yes, BLPOP yes'

# ---------------------------------------------------------------------------

t_clean() {
    $R -u "redis://127.0.0.1:$clean" -e 30 --check > "$work/clean" 2>&1
    expect_status 0 $? "a clean server" || { sed 's/^/#   /' "$work/clean"; return 1; }
    has "$work/clean" '^redislock --check: 1 server, judged against a 30000 ms lease$' &&
    has "$work/clean" "^127\.0\.0\.1:$clean \(master: the URL's server\)$" &&
    has "$work/clean" '^  server: +(Redis|Valkey) [0-9]+\.[0-9]+\.[0-9]+, master$' &&
    has "$work/clean" '^  mode: +scripts: every lock operation runs as a Lua script \(EVALSHA, or EVAL when the server has not cached it\), the URL.s default \(scripts=eval\)$' &&
    has "$work/clean" "^  may run: +EVALSHA yes, EVAL yes, $script_run, WAIT yes\$" &&
    has "$work/clean" '^  persistence: AOF, appendfsync everysec; RDB snapshots off$' &&
    has "$work/clean" '^  memory: +no maxmemory, maxmemory-policy noeviction$' &&
    has "$work/clean" '^  replication: no replicas; min-replicas-to-write 0$' &&
    has "$work/clean" '^  round trip: +median [0-9.]+ ms, p99 [0-9.]+ ms over 300 PINGs \(p99 is .* of the 30000 ms lease\)$' &&
    lacks "$work/clean" '^  (warning|note):' &&
    has "$work/clean" '^no warnings\.$' || return 1
    $R -u "redis://127.0.0.1:$clean" -e 30 --check --json > "$work/clean.json" 2>&1
    expect_status 0 $? "--json of a clean server" || return 1
    [ "$(wc -l < "$work/clean.json")" -eq 1 ] || { diag "not one line"; return 1; }
    json_is "$work/clean.json" 'J["exit_status"], J["warnings"], J["notes"], J["unreachable"], J["lease_ms"], J["pings"]' "(0, 0, 0, 0, 30000, 300)" &&
    json_is "$work/clean.json" 'len(J["servers"])' 1 &&
    json_is "$work/clean.json" '[J["servers"][0][k] for k in ("reached", "expected_role", "role", "mode", "aof", "appendfsync", "rdb", "maxmemory", "maxmemory_policy", "min_replicas_to_write", "replicas", "findings")]' \
        "[True, 'master', 'master', 'scripts', True, 'everysec', False, 0, 'noeviction', 0, [], []]" &&
    json_is "$work/clean.json" 'sorted(J["servers"][0]["may_run"]), all(J["servers"][0]["may_run"].values())' "(['blpop', 'del', 'eval', 'evalsha', 'exists', 'get', 'hget', 'hincrby', 'hset', 'pexpire', 'pttl', 'rpush', 'set', 'time', 'wait', 'zadd', 'zcard', 'zcount', 'zrem', 'zremrangebyscore'], True)" &&
    json_is "$work/clean.json" 'J["servers"][0]["rtt_ms"]["pings"], 0 < J["servers"][0]["rtt_ms"]["median"] <= J["servers"][0]["rtt_ms"]["p99"]' "(300, True)"
}
check "a clean server (AOF everysec, noeviction, no replicas): exit 0, every fact, no finding; --json" t_clean

# What the options beside --check use decides what a missing command is
# (issue 34 part 4, item 2): a warning for what the run will need (by
# default fencing, waiting, go-zero mode), a note for what it will not.
# The lease judged is redislock's (30 s), not the library's 500 ms.
t_check_follows_options() {
    ccli ACL SETUSER nohincrby on '>pw' '~*' '+@all' '-hincrby' > /dev/null
    ccli ACL SETUSER noblpop on '>pw' '~*' '+@all' '-blpop' > /dev/null
    $R -u "$(user_url nohincrby)" --no-auth-warning --check > "$work/o1" 2>&1
    st1=$?
    $R -u "$(user_url nohincrby)" --no-auth-warning --check --json > "$work/o1.json" 2>&1
    $R -u "$(user_url nohincrby)" --no-auth-warning --no-fencing --check > "$work/o2" 2>&1
    st2=$?
    $R -u "$(user_url nohincrby)" --no-auth-warning --no-fencing -m counted --check > "$work/o3" 2>&1
    st3=$?
    $R -u "$(user_url noblpop)" --no-auth-warning -n --check > "$work/o4" 2>&1
    st4=$?
    $R -u "$(user_url noblpop)" --no-auth-warning -w 5 --check > "$work/o5" 2>&1
    st5=$?
    ccli ACL DELUSER nohincrby noblpop > /dev/null
    # The defaults: fencing, so the missing HINCRBY fails the check.
    expect_status 1 $st1 "a user without HINCRBY" || { sed 's/^/#   /' "$work/o1"; return 1; }
    has "$work/o1" '^redislock --check: 1 server, judged against a 30000 ms lease \(redislock.s default; -e sets another, -e 0\.5 the library.s\)$' &&
    has "$work/o1" '^for locks in go-zero mode, with a fencing token, waiting when busy ' &&
    has "$work/o1" '^  warning: the user may not run HINCRBY, which fencing needs: .*give the user \+hincrby \(man redislock-acl\)$' &&
    has "$work/o1" '^  note: the user may not run HINCRBY, which counted mode runs in its scripts' &&
    has "$work/o1" '^1 warning, 1 note\.$' || return 1
    json_is "$work/o1.json" 'J["lease_ms"], J["uses"], J["exit_status"]' "(30000, {'mode': 'gozero', 'fencing': True, 'waiting': True}, 1)" || return 1
    # --no-fencing: nothing the run needs is missing.
    expect_status 0 $st2 "--no-fencing" || { sed 's/^/#   /' "$work/o2"; return 1; }
    has "$work/o2" '^for locks in go-zero mode, without fencing, waiting when busy ' &&
    has "$work/o2" '^  note: the user may not run HINCRBY, which fencing needs' &&
    has "$work/o2" '^no warnings, 2 notes\.$' || return 1
    # -m counted needs HINCRBY for its count.
    expect_status 1 $st3 "-m counted" || { sed 's/^/#   /' "$work/o3"; return 1; }
    has "$work/o3" '^  warning: the user may not run HINCRBY, which counted mode runs in its scripts' &&
    has "$work/o3" '^1 warning, 1 note\.$' || return 1
    # -n does not wait, so BLPOP is not needed; -w is.
    expect_status 0 $st4 "-n without BLPOP" || { sed 's/^/#   /' "$work/o4"; return 1; }
    has "$work/o4" '^  note: the user may not run BLPOP, which waiting and wake-ups need' || return 1
    expect_status 1 $st5 "-w without BLPOP" || { sed 's/^/#   /' "$work/o5"; return 1; }
    has "$work/o5" '^  warning: the user may not run BLPOP, which waiting and wake-ups need'
}
check "--check judges what the options use: redislock's lease, fencing (a user without HINCRBY fails it, --no-fencing not), -m counted, -n" t_check_follows_options

# --check KEY: the lock's keys against the user's key patterns (Redis
# 7.0 and later).  A user of ~locks:* may run every command, but not on
# {locks:x}:fence, which fencing needs: a plain --check was clean, and
# then "redislock locks:x ..." exited 69 (issue 34 part 4, item 2).
t_check_key() {
    ccli ACL SETUSER keysonly on '>pw' '~locks:*' '+@all' > /dev/null
    ccli ACL SETUSER keysall on '>pw' '~locks:*' '~{locks:*}:*' '+@all' > /dev/null
    $R -u "$(user_url keysonly)" --no-auth-warning -e 30 --check locks:x > "$work/y1" 2>&1
    st1=$?
    $R -u "$(user_url keysonly)" --no-auth-warning -e 30 --no-fencing -n --check locks:x > "$work/y2" 2>&1
    st2=$?
    $R -u "$(user_url keysall)" --no-auth-warning -e 30 --check locks:x > "$work/y3" 2>&1
    st3=$?
    $R -u "$(user_url keysonly)" --no-auth-warning -e 30 --check locks:x true > "$work/y4" 2>&1
    st4=$?
    ccli ACL DELUSER keysonly keysall > /dev/null
    if [ "$(ccli INFO server | tr -d '\r' | sed -n 's/^redis_version:\([0-9]*\)\..*/\1/p')" -lt 7 ] 2>/dev/null; then
        has "$work/y1" '^  note: the keys of the lock locks:x were not checked against the user.s key patterns: Redis before 7\.0' || return 1
        return 0
    fi
    expect_status 1 $st1 "a user of ~locks:* for the lock locks:x" || { sed 's/^/#   /' "$work/y1"; return 1; }
    has "$work/y1" '^  warning: the user.s key patterns \(~\.\.\.\) do not cover HGET on \{locks:x\}:fence, HINCRBY on \{locks:x\}:fence, HSET on \{locks:x\}:fence, which fencing needs: .*give the user a key pattern that matches those keys \(man redislock-acl\)$' &&
    has "$work/y1" '^  warning: the user.s key patterns \(~\.\.\.\) do not cover EXISTS on locks:x and \{locks:x\}:turn, ZADD on \{locks:x\}:waiters, .*which waiting and wake-ups need' &&
    lacks "$work/y1" 'which go-zero mode' &&
    has "$work/y1" '^2 warnings, 1 note\.$' || return 1
    # Without fencing and waiting, what is left out is not used.
    expect_status 0 $st2 "--no-fencing -n" || { sed 's/^/#   /' "$work/y2"; return 1; }
    has "$work/y2" '^  note: the user.s key patterns \(~\.\.\.\) do not cover HGET on \{locks:x\}:fence' || return 1
    # Patterns that cover the companions: nothing to say.
    expect_status 0 $st3 "~locks:* ~{locks:*}:*" || { sed 's/^/#   /' "$work/y3"; return 1; }
    lacks "$work/y3" 'key patterns' || return 1
    expect_status 64 $st4 "--check KEY COMMAND" || return 1
    has "$work/y4" '^redislock: --check takes a KEY at most, no COMMAND$'
}
check "--check KEY: the lock's keys against the user's key patterns (a user of ~locks:* fails it for fencing's {locks:x}:fence)" t_check_key

t_unreachable() {
    $R -u "unix://$work/no-such.sock" --check > "$work/u1" 2>&1
    expect_status 69 $? "a missing socket" || return 1
    has "$work/u1" "^$work/no-such\.sock \(master: the URL's server\)$" &&
    has "$work/u1" '^  cannot be reached: ' &&
    has "$work/u1" '^1 server cannot be reached; no warnings\.$' || return 1
    # A port nobody listens on (a server of ours, stopped), as JSON.
    tcp_server gone "$server" --save '' --appendonly no || return 1
    stop_server "$spid"
    $R -u "redis://127.0.0.1:$port" --check --json > "$work/u2" 2>&1
    expect_status 69 $? "a closed port" || return 1
    json_is "$work/u2" 'J["exit_status"], J["unreachable"], J["servers"][0]["reached"], J["servers"][0]["rtt_ms"]' "(69, 1, False, None)" &&
    json_is "$work/u2" 'J["servers"][0]["error"] is not None' True || return 1
    # A refused login is no way in either.
    $R -u "redis://nobody:wrong@127.0.0.1:$clean" --no-auth-warning --check > "$work/u3" 2>&1
    expect_status 69 $? "a refused login" || return 1
    has "$work/u3" '^  cannot be reached: the login was refused: WRONGPASS'
}
check "a server that cannot be reached, or refuses the login: exit 69, said; --json" t_unreachable

t_no_persistence() {
    $R -u "redis://127.0.0.1:$REDISLOCK_TEST_PORT" --check > "$work/p1" 2>&1
    expect_status 1 $? "no persistence" || return 1
    has "$work/p1" '^  persistence: none$' &&
    has "$work/p1" '^  warning: no persistence \(appendonly no, no RDB save points\): a restart forgets every lock, and fencing counters start again from 0, so tokens go backwards; set appendonly yes \(with appendfsync everysec or always\)$' &&
    has "$work/p1" '^1 warning\.$' || return 1
    $R -u "unix://$REDISLOCK_TEST_SOCKET" --check --json > "$work/p1.json" 2>&1
    expect_status 1 $? "no persistence, --json" || return 1
    json_is "$work/p1.json" 'J["lease_ms"], J["warnings"], J["servers"][0]["aof"], J["servers"][0]["rdb"]' "(30000, 1, False, False)" &&
    json_is "$work/p1.json" '[f["level"] for f in J["servers"][0]["findings"]]' "['warning']" || return 1
    # RDB snapshots only.
    "$rcli" -p "$REDISLOCK_TEST_PORT" CONFIG SET save "3600 1 300 100" > /dev/null
    $R -u "redis://127.0.0.1:$REDISLOCK_TEST_PORT" --check > "$work/p2" 2>&1
    st=$?
    "$rcli" -p "$REDISLOCK_TEST_PORT" CONFIG SET save "" > /dev/null
    expect_status 1 $st "RDB only" || return 1
    has "$work/p2" '^  persistence: RDB snapshots only \(save "3600 1 300 100"\)$' &&
    has "$work/p2" '^  warning: RDB snapshots only \(save "3600 1 300 100", appendonly no\): a restart forgets the locks taken since the last snapshot, and fencing counters go back to it; set appendonly yes' || return 1
    # AOF, but written to disk when the kernel likes.
    ccli CONFIG SET appendfsync no > /dev/null
    $R -u "redis://127.0.0.1:$clean" -e 30 --check > "$work/p3" 2>&1
    st=$?
    ccli CONFIG SET appendfsync everysec > /dev/null
    expect_status 1 $st "appendfsync no" || return 1
    has "$work/p3" '^  warning: appendfsync no: the kernel writes the AOF to disk when it likes \(about every 30 s\), so a machine crash loses that much of the locks and fencing counters; set appendfsync everysec \(or always\)$'
}
check "no persistence, RDB snapshots only, appendfsync no: exit 1, a warning each with what to set" t_no_persistence

t_evicting() {
    ccli CONFIG SET maxmemory 100mb > /dev/null
    ccli CONFIG SET maxmemory-policy allkeys-lru > /dev/null
    $R -u "redis://127.0.0.1:$clean" -e 30 --check > "$work/m1" 2>&1
    st1=$?
    $R -u "redis://127.0.0.1:$clean" -e 30 --check --json > "$work/m1.json" 2>&1
    ccli CONFIG SET maxmemory-policy volatile-ttl > /dev/null
    $R -u "redis://127.0.0.1:$clean" -e 30 --check > "$work/m2" 2>&1
    st2=$?
    # Without a limit, the policy does nothing (yet): a note.
    ccli CONFIG SET maxmemory 0 > /dev/null
    ccli CONFIG SET maxmemory-policy allkeys-lru > /dev/null
    $R -u "redis://127.0.0.1:$clean" -e 30 --check > "$work/m3" 2>&1
    st3=$?
    ccli CONFIG SET maxmemory-policy noeviction > /dev/null
    expect_status 1 $st1 "allkeys-lru" || return 1
    has "$work/m1" '^  memory: +maxmemory 100\.0 MiB, maxmemory-policy allkeys-lru$' &&
    has "$work/m1" '^  warning: maxmemory-policy allkeys-lru with maxmemory 100\.0 MiB: when memory runs short Redis evicts any key, lock keys \(another owner then gets the lock while the first still works\) and fencing counters \(tokens go backwards\); set maxmemory-policy noeviction' || return 1
    json_is "$work/m1.json" 'J["servers"][0]["maxmemory"], J["servers"][0]["maxmemory_policy"], J["exit_status"]' "(104857600, 'allkeys-lru', 1)" || return 1
    expect_status 1 $st2 "volatile-ttl" || return 1
    has "$work/m2" '^  warning: maxmemory-policy volatile-ttl with maxmemory 100\.0 MiB: when memory runs short Redis evicts keys that have an expiry, and every lock key has one' || return 1
    expect_status 0 $st3 "allkeys-lru without maxmemory" || return 1
    has "$work/m3" '^  note: maxmemory-policy allkeys-lru does nothing while maxmemory is 0 \(no limit\), but would evict lock keys once a limit is set; set maxmemory-policy noeviction$'
}
check "an evicting maxmemory-policy: exit 1 (allkeys-*, volatile-*), a note without maxmemory" t_evicting

# A user who may not run scripts: the library runs go-zero mode without
# them (mode none, by the server's refusal: a warning, as counted mode
# and fencing fail), if it may run the plain commands, which are tried
# (EVAL being refused, no script can ask); without MULTI as well, no mode
# can run.  The same on a quorum's master, which does not fall back.
t_acl_no_scripting() {
    ccli ACL SETUSER noscript on '>pw' '~*' '+@all' '-@scripting' > /dev/null
    $R -u "$(user_url noscript)" --no-auth-warning -e 30 --check > "$work/a1" 2>&1
    st=$?
    $R -u "$(user_url noscript)" --no-auth-warning -e 30 --check --json > "$work/a1.json" 2>&1
    # EVALSHA alone is no mode either: EVAL loads a script the server
    # does not have.
    ccli ACL SETUSER noeval on '>pw' '~*' '+@all' '-eval' > /dev/null
    $R -u "$(user_url noeval)" --no-auth-warning -e 30 --check > "$work/a2" 2>&1
    st2=$?
    ccli ACL SETUSER nomulti on '>pw' '~*' '+@all' '-@scripting' '-multi' > /dev/null
    $R -u "$(user_url nomulti)" --no-auth-warning -e 30 --check > "$work/a3" 2>&1
    st3=$?
    $R -u "$(user_url nomulti)" --no-auth-warning -e 30 --check --json > "$work/a3.json" 2>&1
    # A quorum's master does not fall back (three URLs of one server: one
    # server checked, as the quorum's first master).
    $R -u "$(user_url noscript)" -u "$(user_url noscript)" -u "$(user_url noscript)" \
        --no-auth-warning -e 30 --check > "$work/a4" 2>&1
    st4=$?
    ccli ACL DELUSER noscript noeval nomulti > /dev/null
    expect_status 1 $st "a user without scripting" || return 1
    has "$work/a1" '^  mode: +none \(plain commands; go-zero mode without fencing\): this user may not run EVALSHA, EVAL, which the URL.s mode, scripts, needs: the library runs go-zero mode on plain commands instead \(the reads under WATCH, the writes in MULTI \.\.\. EXEC\), and tries scripts again every 30 s; counted mode and fencing cannot run$' &&
    has "$work/a1" '^  may run: +EVALSHA no, EVAL no, WATCH yes, UNWATCH yes, MULTI yes, EXEC yes, DISCARD yes, GET yes, SET yes, DEL yes, PEXPIRE yes, PTTL yes, EXISTS yes, HGET yes, HSET yes, HINCRBY yes, TIME yes, ZADD yes, ZREM yes, ZCARD yes, ZCOUNT yes, ZREVRANGEBYSCORE yes, ZREMRANGEBYSCORE yes, RPUSH yes, BLPOP yes, WAIT yes$' &&
    has "$work/a1" '^  one-command: SET IFEQ (yes|no), DELIFEQ (yes|no), DELEX (yes|no) \(a re-entry takes [23] round trips, an extend [12], a release without wake-ups [12]\)$' &&
    has "$work/a1" '^  warning: the library runs go-zero mode here without scripts, as this user may not run them: counted mode and fencing fail \(and so does redislock without --no-fencing\); give the user \+evalsha \+eval \(man redislock-acl\), or put scripts=none in the URL to choose this mode \(redislock then issues no fencing token\)$' &&
    has "$work/a1" '^1 warning\.$' || return 1
    json_is "$work/a1.json" 'J["servers"][0]["mode"], {k: v for k, v in J["servers"][0]["may_run"].items() if k in ("evalsha", "eval", "watch", "multi", "exec", "discard", "blpop", "wait")}, sorted(J["servers"][0]["plain_forms"])' "('none', {'evalsha': False, 'eval': False, 'watch': True, 'multi': True, 'exec': True, 'discard': True, 'blpop': True, 'wait': True}, ['delex', 'delifeq', 'set_ifeq'])" || return 1
    expect_status 1 $st2 "a user without EVAL" || return 1
    has "$work/a2" '^  mode: +none \(plain commands; go-zero mode without fencing\): this user may not run EVAL, which the URL.s mode, scripts, needs: ' &&
    has "$work/a2" '^  may run: +EVALSHA yes, EVAL no, WATCH yes,' || return 1
    expect_status 1 $st3 "a user without scripting and MULTI" || return 1
    has "$work/a3" '^  mode: +unusable: this user may not run EVALSHA, EVAL, which the URL.s mode, scripts, needs, and go-zero mode without scripts, which the library falls back to, needs MULTI, which this user may not run either$' &&
    has "$work/a3" '^  may run: +EVALSHA no, EVAL no, WATCH yes, UNWATCH yes, MULTI no, EXEC yes, ' &&
    has "$work/a3" '^  warning: this user may not run EVALSHA, EVAL, .*: no lock operation can run; give the user \+evalsha \+eval \(man redislock-acl\), or \+get \+set \+del \+pexpire \+pttl \+exists \+watch \+unwatch \+multi \+exec \+discard for go-zero mode without scripts$' &&
    lacks "$work/a3" '^  one-command:' || return 1
    json_is "$work/a3.json" 'J["servers"][0]["mode"], J["servers"][0]["plain_forms"], J["exit_status"]' "('unusable', None, 1)" || return 1
    expect_status 1 $st4 "a quorum's master without scripting" || return 1
    has "$work/a4" '^  mode: +unusable: the URL.s mode, scripts, needs EVALSHA, EVAL, which this user may not run \(a quorum client does not fall back to plain commands\)$' &&
    has "$work/a4" "^  warning: EVAL is refused here \(NOPERM .*'eval'.*\): no lock operation of a quorum can run, every one being a script; give the user \+evalsha \+eval \(man redislock-acl\)"
}
check "an ACL user without scripting (or EVAL): mode none by the refusal (a warning), unusable without MULTI or on a quorum; what to give it" t_acl_no_scripting

# What a server has of the one-command forms (Redis's and Valkey's release
# notes: SET IFEQ from Valkey 8.1 and Redis 8.4, DELIFEQ from Valkey 9.0,
# DELEX from Redis 8.4), for the server whose redis-cli is given ($1...),
# as the check's line says it: "SET IFEQ yes, DELIFEQ no, DELEX no".
expected_forms() {
    "$@" INFO server | tr -d '\r' | awk -F: '
        $1 == "server_name" { name = $2 }
        $1 == "valkey_version" { v = $2 }
        $1 == "redis_version" && v == "" { rv = $2 }
        END {
            if (name == "valkey") ver = v; else ver = rv
            split(ver, p, "."); n = p[1] * 100 + p[2]
            if (name == "valkey") { ifeq = n >= 801; delifeq = n >= 900; delex = 0 }
            else { ifeq = n >= 804; delifeq = 0; delex = n >= 804 }
            printf "SET IFEQ %s, DELIFEQ %s, DELEX %s\n", ifeq ? "yes" : "no",
                delifeq ? "yes" : "no", delex ? "yes" : "no"
        }'
}

# scripts=none in the URL: the plain commands, and waiting's, told; which
# one-command forms the server has (an informational line); no warning.
# The doc/acl.md rule for it (lock-plain, no INFO, no COMMAND, keys
# locks:* only) sees them too, SET IFEQ but unknown.  With scripts=none on
# a quorum: nothing can run.
t_scripts_none() {
    u="redis://127.0.0.1:$clean?scripts=none"
    want=$(expected_forms ccli)
    $R -u "$u" -e 30 --check > "$work/n1" 2>&1
    st=$?
    $R -u "$u" -e 30 --check --json > "$work/n1.json" 2>&1
    st1=$?
    expect_status 0 $st "scripts=none, a clean server" || { sed 's/^/#   /' "$work/n1"; return 1; }
    has "$work/n1" '^  mode: +none \(plain commands; go-zero mode without fencing\): every go-zero operation runs as plain commands \(the reads under WATCH, the writes in MULTI \.\.\. EXEC\), as the URL asks \(scripts=none\); counted mode and fencing cannot run$' &&
    has "$work/n1" "^  may run: +$plain_run, WAIT yes\$" &&
    has "$work/n1" "^  one-command: $want \\(" &&
    has "$work/n1" '^no warnings\.$' || return 1
    expect_status 0 $st1 "scripts=none, --json" || return 1
    json_is "$work/n1.json" 'J["servers"][0]["mode"], J["servers"][0]["mode_reason"][:29], J["servers"][0]["may_run"]["exec"], J["servers"][0]["findings"]' "('none', 'every go-zero operation runs ', True, [])" &&
    json_is "$work/n1.json" '", ".join("%s %s" % (n, "yes" if J["servers"][0]["plain_forms"][k] else "no") for n, k in (("SET IFEQ", "set_ifeq"), ("DELIFEQ", "delifeq"), ("DELEX", "delex")))' "$want" || return 1
    rule=$(grep "^ACL SETUSER lock-plain " "$srcdir/doc/acl.md") ||
        { diag "doc/acl.md has no rule lock-plain"; return 1; }
    set -f
    # shellcheck disable=SC2086
    got=$(ccli $rule 2>&1)
    set +f
    [ "$got" = OK ] || { diag "$rule: $got"; return 1; }
    $R -u "redis://lock-plain:secret@127.0.0.1:$clean?scripts=none" --no-auth-warning -e 30 --check > "$work/n2" 2>&1
    st=$?
    ccli ACL DELUSER lock-plain > /dev/null
    expect_status 0 $st "the lock-plain rule of doc/acl.md" || { sed 's/^/#   /' "$work/n2"; return 1; }
    has "$work/n2" '^  may run: +WATCH yes, UNWATCH yes, MULTI yes, EXEC yes, DISCARD yes, GET yes, SET yes, DEL yes, PEXPIRE yes, PTTL yes, EXISTS yes, HGET no, TIME yes, ZADD yes, ZREM yes, ZCARD yes, ZCOUNT no, ZREVRANGEBYSCORE yes, ZREMRANGEBYSCORE yes, RPUSH yes, BLPOP yes, WAIT no$' &&
    has "$work/n2" "^  one-command: SET IFEQ unknown, ${want#SET IFEQ *, } \\(" &&
    # What doc/acl.md says to add for --status.
    has "$work/n2" '^  note: the user may not run HGET, ZCOUNT, which reading the waiters and the fencing counter \(the status queries\) needs: redislock --status shows waiters and fence as unknown, and redislock_inspect_companions\(\) fails; give the user \+hget \+zcount \(man redislock-acl\)$' &&
    lacks "$work/n2" '^  warning:' || return 1
    $R -u "$u" -u "$u" -u "$u" -e 30 --check > "$work/n3" 2>&1
    expect_status 1 $? "scripts=none on a quorum" || return 1
    has "$work/n3" '^  mode: +unusable: the URL asks for scripts=none, and a quorum client needs the library.s scripts on every master \(the library refuses its every operation\)$' &&
    has "$work/n3" '^  warning: .*: no lock operation can run; drop scripts=none from the quorum.s URLs$'
}
check "scripts=none: mode none, the plain commands and one-command forms told, no warning; the lock-plain rule; a quorum cannot" t_scripts_none

# Issue 30: doc/acl.md's lock-plain rule lacked +discard, which every
# extend or release of a lock another owner holds sends without scripts.
# That rule (today's less +discard) gets a warning naming DISCARD, what
# sends it and +discard, for a scripts=none URL (in --json too); today's
# rule gets no finding naming it.
t_plain_discard() {
    rule=$(grep "^ACL SETUSER lock-plain " "$srcdir/doc/acl.md") ||
        { diag "doc/acl.md has no rule lock-plain"; return 1; }
    old=$(echo "$rule" | sed 's/ +discard / /')
    [ "$old" != "$rule" ] || { diag "doc/acl.md's lock-plain lacks +discard: $rule"; return 1; }
    u="redis://lock-plain:secret@127.0.0.1:$clean?scripts=none"
    set -f
    # shellcheck disable=SC2086
    made=$(ccli $old 2>&1)
    set +f
    [ "$made" = OK ] || { diag "$old: $made"; return 1; }
    $R -u "$u" --no-auth-warning -e 30 --check > "$work/pd1" 2>&1
    st1=$?
    $R -u "$u" --no-auth-warning -e 30 --check --json > "$work/pd1.json" 2>&1
    set -f
    # shellcheck disable=SC2086
    made=$(ccli $rule 2>&1)
    set +f
    $R -u "$u" --no-auth-warning -e 30 --check > "$work/pd2" 2>&1
    st2=$?
    ccli ACL DELUSER lock-plain > /dev/null
    expect_status 1 $st1 "the old lock-plain rule" || { sed 's/^/#   /' "$work/pd1"; return 1; }
    has "$work/pd1" '^  mode: +none \(plain commands; ' &&
    has "$work/pd1" '^  may run: +WATCH yes, UNWATCH yes, MULTI yes, EXEC yes, DISCARD no, GET yes, ' &&
    has "$work/pd1" '^  warning: the user may not run DISCARD, which go-zero mode without scripts sends to end a conversation that writes nothing \(DISCARD after its MULTI, UNWATCH without one\): an extend or a release of a lock another owner holds \(or that has lapsed\), and a release that finds waiters, fail \(REDISLOCK_ERR_PROTOCOL, naming the command refused\) and close their connection, the server having kept the transaction open; give the user \+discard \(man redislock-acl\)$' &&
    has "$work/pd1" '^1 warning, ' || return 1
    json_is "$work/pd1.json" 'J["servers"][0]["mode"], J["servers"][0]["may_run"]["discard"], [f["level"] for f in J["servers"][0]["findings"] if "+discard" in f["text"]]' "('none', False, ['warning'])" || return 1
    [ "$made" = OK ] || { diag "$rule: $made"; return 1; }
    expect_status 0 $st2 "today's lock-plain rule" || { sed 's/^/#   /' "$work/pd2"; return 1; }
    has "$work/pd2" '^  may run: +WATCH yes, UNWATCH yes, MULTI yes, EXEC yes, DISCARD yes, ' &&
    lacks "$work/pd2" 'discard \(doc' &&
    lacks "$work/pd2" '^  warning:'
}
check "scripts=none without +discard (doc/acl.md's old lock-plain rule): a warning naming DISCARD and +discard; today's rule: none" t_plain_discard

# The one-command forms on the servers that have them, when present:
# REDISLOCK_TEST_FORMS_SERVERS lists their programs (e.g. a Valkey 9.1
# and a Redis 8.6 built from Debian's sid and experimental sources).
t_forms_servers() {
    [ -n "${REDISLOCK_TEST_FORMS_SERVERS:-}" ] ||
        { diag "REDISLOCK_TEST_FORMS_SERVERS not set: skipped"; return 0; }
    nf=0
    for bin in $REDISLOCK_TEST_FORMS_SERVERS; do
        nf=$((nf + 1))
        tcp_server "forms$nf" "$bin" --appendonly yes --save '' || return 1
        fpid=$spid; fport=$port
        want=$(expected_forms "$rcli" -h 127.0.0.1 -p "$fport")
        $R -u "redis://127.0.0.1:$fport?scripts=none" -e 30 --check > "$work/fs$nf" 2>&1
        st=$?
        stop_server $fpid
        diag "$bin: $want"
        expect_status 0 $st "$bin" || { sed 's/^/#   /' "$work/fs$nf"; return 1; }
        has "$work/fs$nf" "^  one-command: $want \\(" || return 1
    done
}
check "the one-command forms of newer servers (REDISLOCK_TEST_FORMS_SERVERS, when present)" t_forms_servers

t_acl_no_blpop_wait() {
    ccli ACL SETUSER nowait on '>pw' '~locks:*' '+@all' '-blpop' '-wait' > /dev/null
    $R -u "$(user_url nowait)" --no-auth-warning -e 30 --check > "$work/b1" 2>&1
    st=$?
    ccli ACL DELUSER nowait > /dev/null
    expect_status 1 $st "a user without BLPOP and WAIT" || return 1
    has "$work/b1" '^  mode: +scripts: ' &&
    has "$work/b1" "^  may run: +EVALSHA yes, EVAL yes, ${script_run%BLPOP yes}BLPOP no, WAIT no\$" &&
    has "$work/b1" '^  warning: the user may not run BLPOP, which waiting and wake-ups need: waiters \(redislock -w, redislock_acquire_wait\(\)\) poll instead of being woken, and may lose their place in line; give the user \+blpop \(man redislock-acl\)$' &&
    # Without replicas, WAIT is a note only.
    has "$work/b1" '^  note: the user may not run WAIT: replica acknowledgement \(redislock_set_min_replicas\(\)\) fails here; give the user \+wait if you use it$' &&
    has "$work/b1" '^1 warning, 1 note\.$'
}
check "an ACL user without BLPOP and WAIT: scripts still, a warning for BLPOP, a note for WAIT" t_acl_no_blpop_wait

# A user whose keys are limited (~locks:*) and who may run scripts: the
# script that asks Redis is given each command alone, but SET, which
# Redis 7.0 and Valkey 8.0 read arguments of for keys that are not there
# (the server crashed), is tried on a key of the check's own; the server
# still answers afterwards.  Both modes: the scripts' commands, and
# without scripts each operation's.
t_acl_key_patterns() {
    ccli ACL SETUSER lockkeys on '>pw' '~locks:*' '+@all' > /dev/null
    $R -u "$(user_url lockkeys)" --no-auth-warning -e 30 --check > "$work/k1" 2>&1
    st1=$?
    $R -u "$(user_url lockkeys)?scripts=none" --no-auth-warning -e 30 --check > "$work/k2" 2>&1
    st2=$?
    pong=$(ccli PING 2>&1)
    ccli ACL DELUSER lockkeys > /dev/null
    [ "$pong" = PONG ] || { diag "the server after the check: $pong"; return 1; }
    expect_status 0 $st1 "a user with key patterns" || { sed 's/^/#   /' "$work/k1"; return 1; }
    has "$work/k1" "^  may run: +EVALSHA yes, EVAL yes, $script_run, WAIT yes\$" || return 1
    expect_status 0 $st2 "a user with key patterns, scripts=none" || { sed 's/^/#   /' "$work/k2"; return 1; }
    has "$work/k2" "^  may run: +$plain_run, WAIT yes\$"
}
check "a user with key patterns who may run scripts: every command told (SET tried, not asked), the server unharmed" t_acl_key_patterns

t_acl_no_config() {
    ccli ACL SETUSER noconfig on '>pw' '~*' '+@all' '-config' > /dev/null
    $R -u "$(user_url noconfig)" --no-auth-warning -e 30 --check > "$work/c1" 2>&1
    st1=$?
    # What CONFIG GET would say comes from INFO: the policy still warns.
    ccli CONFIG SET maxmemory 100mb > /dev/null
    ccli CONFIG SET maxmemory-policy allkeys-lfu > /dev/null
    $R -u "$(user_url noconfig)" --no-auth-warning -e 30 --check > "$work/c2" 2>&1
    st2=$?
    ccli CONFIG SET maxmemory 0 > /dev/null
    ccli CONFIG SET maxmemory-policy noeviction > /dev/null
    ccli ACL DELUSER noconfig > /dev/null
    expect_status 0 $st1 "CONFIG GET refused, on a clean server" || return 1
    has "$work/c1" '^  persistence: AOF, appendfsync unknown; RDB snapshots unknown$' &&
    has "$work/c1" "^  note: could not read everything: CONFIG GET was refused \(NOPERM .*\); appendfsync is unknown; whether RDB snapshots are on is unknown$" || return 1
    expect_status 1 $st2 "CONFIG GET refused, allkeys-lfu" || return 1
    has "$work/c2" '^  warning: maxmemory-policy allkeys-lfu with maxmemory 100\.0 MiB: '
}
check "CONFIG GET refused: INFO's values serve, what is unknown is said (a note)" t_acl_no_config

# The rule of doc/acl.md for everything the tool does: no INFO, no
# CONFIG, no PING.  The mode and permissions are still told; the rest is
# unknown, which notes say (exit 0: nothing found to warn about).
t_acl_doc_rule() {
    rule=$(grep "^ACL SETUSER lock-fence " "$srcdir/doc/acl.md") ||
        { diag "doc/acl.md has no rule lock-fence"; return 1; }
    set -f
    # shellcheck disable=SC2086
    got=$(ccli $rule 2>&1)
    set +f
    [ "$got" = OK ] || { diag "$rule: $got"; return 1; }
    $R -u "redis://lock-fence:secret@127.0.0.1:$clean" --no-auth-warning -e 30 --check > "$work/d1" 2>&1
    st=$?
    $R -u "redis://lock-fence:secret@127.0.0.1:$clean" --no-auth-warning -e 30 --check --json > "$work/d1.json" 2>&1
    ccli ACL DELUSER lock-fence > /dev/null
    expect_status 0 $st "the doc/acl.md rule" || { sed 's/^/#   /' "$work/d1"; return 1; }
    has "$work/d1" '^  server: +unknown \(INFO was refused\)$' &&
    has "$work/d1" '^  mode: +scripts: ' &&
    has "$work/d1" "^  may run: +EVALSHA yes, EVAL yes, $(echo "$script_run" | sed 's/ZCOUNT yes/ZCOUNT no/'), WAIT no\$" &&
    has "$work/d1" '^  note: the user may not run ZCOUNT, which reading the waiters and the fencing counter \(the status queries\) needs: redislock --status shows waiters and fence as unknown, and redislock_inspect_companions\(\) fails; give the user \+zcount \(man redislock-acl\)$' &&
    has "$work/d1" '^  persistence: unknown$' &&
    has "$work/d1" '^  note: persistence is unknown \(neither INFO nor CONFIG GET answered\)' &&
    has "$work/d1" "^  note: could not read everything: INFO was refused \(NOPERM .*\): the version, the role and the replicas are unknown; CONFIG GET was refused" &&
    has "$work/d1" '^  round trip: +median ' &&
    has "$work/d1" '^no warnings, 4 notes\.$' || return 1
    json_is "$work/d1.json" 'J["servers"][0]["server"], J["servers"][0]["aof"], J["servers"][0]["maxmemory"], J["warnings"], J["notes"]' "(None, None, None, 0, 4)" || return 1
    # The go-zero rule alone: the commands its scripts run, but not
    # waiting's nor fencing's (warnings: the tool waits and fences by
    # default), nor counted mode's and the status's (notes).
    rule=$(grep "^ACL SETUSER lock-gozero " "$srcdir/doc/acl.md") ||
        { diag "doc/acl.md has no rule lock-gozero"; return 1; }
    set -f
    # shellcheck disable=SC2086
    got=$(ccli $rule 2>&1)
    set +f
    [ "$got" = OK ] || { diag "$rule: $got"; return 1; }
    $R -u "redis://lock-gozero:secret@127.0.0.1:$clean" --no-auth-warning -e 30 --check > "$work/d2" 2>&1
    st=$?
    ccli ACL DELUSER lock-gozero > /dev/null
    expect_status 1 $st "doc/acl.md's lock-gozero" || { sed 's/^/#   /' "$work/d2"; return 1; }
    has "$work/d2" '^  may run: +EVALSHA yes, EVAL yes, GET yes, SET yes, DEL yes, PEXPIRE yes, PTTL yes, EXISTS no, HGET no, HSET no, HINCRBY no, TIME no, ZADD no, ZREM no, ZCARD no, ZCOUNT no, ZREMRANGEBYSCORE no, RPUSH no, BLPOP no, WAIT no$' &&
    lacks "$work/d2" 'which go-zero mode' &&
    has "$work/d2" '^  note: the user may not run EXISTS, HGET, HSET, HINCRBY, which counted mode runs in its scripts: counted locks \(redislock -m counted, redislock_new_counted\(\)\) fail, having written nothing; give the user \+exists \+hget \+hset \+hincrby \(man redislock-acl\)$' &&
    has "$work/d2" '^  warning: the user may not run EXISTS, TIME, ZADD, ZREM, ZCARD, ZREMRANGEBYSCORE, RPUSH, BLPOP, which waiting and wake-ups need: .*; give the user \+exists \+time \+zadd \+zrem \+zcard \+zremrangebyscore \+rpush \+blpop \(man redislock-acl\)$' &&
    has "$work/d2" '^  warning: the user may not run HGET, HSET, HINCRBY, which fencing needs: an acquire with a fencing token \(redislock without --no-fencing, redislock_set_fencing\(\)\) fails, having written nothing; give the user \+hget \+hset \+hincrby \(man redislock-acl\)$' &&
    has "$work/d2" '^  note: the user may not run HGET, TIME, ZCOUNT, which reading the waiters and the fencing counter ' &&
    has "$work/d2" '^2 warnings, ' || return 1
    # A user without SET: go-zero mode itself.
    ccli ACL SETUSER noset on '>pw' '~*' '+@all' '-set' > /dev/null
    $R -u "$(user_url noset)" --no-auth-warning -e 30 --check > "$work/d3" 2>&1
    st=$?
    ccli ACL DELUSER noset > /dev/null
    expect_status 1 $st "a user without SET" || return 1
    has "$work/d3" '^  warning: the user may not run SET, which go-zero mode \(the default\) runs in its scripts: its operations \(redislock, redislock_new\(\)\) fail, having written nothing; give the user \+set \(man redislock-acl\)$' &&
    has "$work/d3" '^1 warning\.$'
}
check "an ACL user as doc/acl.md makes it (no INFO, CONFIG, PING): mode and permissions told, the rest noted as unknown" t_acl_doc_rule

# Functions mode (scripts=functions in the URL): FCALL and FUNCTION LOAD;
# a user who may not load the library runs once it is loaded (a note),
# not before (a warning).
t_functions() {
    [ "${major:-0}" -ge 7 ] || { diag "no Functions before 7.0: skipped"; return 0; }
    u="redis://127.0.0.1:$clean?scripts=functions"
    ccli FUNCTION FLUSH > /dev/null
    $R -u "$u" -e 30 --check > "$work/f1" 2>&1
    st1=$?
    $R -u "$u" k-functions true || { diag "a lock in functions mode"; return 1; }
    $R -u "$u" -e 30 --check --json > "$work/f2.json" 2>&1
    st2=$?
    ccli ACL SETUSER noload on '>pw' '~*' '+@all' '-function|load' > /dev/null
    fu="redis://noload:pw@127.0.0.1:$clean?scripts=functions"
    $R -u "$fu" --no-auth-warning -e 30 --check > "$work/f3" 2>&1
    st3=$?
    ccli FUNCTION FLUSH > /dev/null
    $R -u "$fu" --no-auth-warning -e 30 --check > "$work/f4" 2>&1
    st4=$?
    ccli ACL DELUSER noload > /dev/null
    expect_status 0 $st1 "functions, not loaded yet" || { sed 's/^/#   /' "$work/f1"; return 1; }
    has "$work/f1" '^  mode: +functions: every lock operation is an FCALL of redislock.s Redis Function library, loaded where it is missing \(FUNCTION LOAD\), as the URL asks \(scripts=functions\); not loaded here yet \(the first operation loads it\)$' &&
    has "$work/f1" "^  may run: +FCALL yes, FUNCTION LOAD yes, $script_run, WAIT yes\$" || return 1
    expect_status 0 $st2 "functions, loaded" || return 1
    json_is "$work/f2.json" 'J["servers"][0]["mode"], J["servers"][0]["may_run"]["fcall"], [l[:10] for l in J["servers"][0]["function_libraries"]]' "('functions', True, ['redislock_'])" || return 1
    expect_status 0 $st3 "a user who may not load, the library loaded" || return 1
    has "$work/f3" "^  may run: +FCALL yes, FUNCTION LOAD no, $script_run, WAIT yes\$" &&
    has "$work/f3" '^  note: the user may not load the Function library \(FUNCTION LOAD\): lock operations run while an administrator keeps this redislock version.s library loaded' || return 1
    expect_status 1 $st4 "a user who may not load, no library" || return 1
    has "$work/f4" '^  mode: +unusable: the URL.s mode, functions \(scripts=functions\), needs FUNCTION LOAD, which this user may not run, and no redislock Function library is loaded here$' &&
    has "$work/f4" '^  warning: .*: no lock operation can run; give the user \+function\|load \(man redislock-acl\), or have an administrator load the library$'
}
check "functions mode (scripts=functions): FCALL, FUNCTION LOAD, the library loaded or not" t_functions

t_replica_stopped() {
    tcp_server replica "$server" --appendonly yes --save '' \
        --replicaof 127.0.0.1 "$clean" || return 1
    rpid=$spid
    rport=$port
    i=0
    # In sync, and done writing its first AOF (a replica stopped in the
    # middle of it would refuse to shut down).
    until [ "$("$rcli" -p "$rport" INFO | tr -d '\r' |
               grep -Ec '^(master_link_status:up|aof_rewrite_in_progress:0|aof_rewrite_scheduled:0)$')" -eq 3 ]; do
        i=$((i + 1)); [ $i -lt 400 ] || { diag "the replica never synced"; stop_server $rpid; return 1; }
        sleep 0.05
    done
    # In sync, but the master grants locks before any replica has them.
    $R -u "redis://127.0.0.1:$clean?timeout=500" -e 30 --check > "$work/r1" 2>&1
    st1=$?
    # min-replicas-to-write 1: a well-configured pair.
    ccli CONFIG SET min-replicas-to-write 1 > /dev/null
    ccli CONFIG SET min-replicas-max-lag 10 > /dev/null
    $R -u "redis://127.0.0.1:$clean?timeout=500" -e 30 --check > "$work/r2" 2>&1
    st2=$?
    # The replica stopped: the master sees its acknowledgements stop.
    kill -STOP $rpid
    i=0
    until "$rcli" -p "$clean" INFO replication | grep -Eq "^slave0:.*,lag=([2-9]|[1-9][0-9]+)"; do
        i=$((i + 1)); [ $i -lt 200 ] || { diag "no lag"; stop_server $rpid; return 1; }
        sleep 0.05
    done
    $R -u "redis://127.0.0.1:$clean?timeout=500&connect_timeout=500" -e 30 --check > "$work/r3" 2>&1
    st3=$?
    $R -u "redis://127.0.0.1:$clean?timeout=500&connect_timeout=500" -e 30 --check --json > "$work/r3.json" 2>&1
    # A replica that lags past min-replicas-max-lag: no write is taken.
    ccli CONFIG SET min-replicas-max-lag 1 > /dev/null
    i=0
    until ccli INFO replication | tr -d '\r' | grep -qx 'min_slaves_good_slaves:0'; do
        i=$((i + 1)); [ $i -lt 100 ] || break
        sleep 0.05
    done
    $R -u "redis://127.0.0.1:$clean?timeout=500&connect_timeout=500" -e 30 --check > "$work/r4" 2>&1
    st4=$?
    ccli CONFIG SET min-replicas-to-write 0 > /dev/null
    stop_server $rpid
    ccli REPLICAOF NO ONE > /dev/null
    expect_status 1 $st1 "a replica, min-replicas-to-write 0" || return 1
    has "$work/r1" "^127\.0\.0\.1:$rport \(replica: a replica of 127\.0\.0\.1:$clean\)$" &&
    has "$work/r1" "^  replication: 1 replica: 127\.0\.0\.1:$rport online, lag [01] s, [0-9]+ bytes behind; min-replicas-to-write 0$" &&
    has "$work/r1" "^  replication: replica of 127\.0\.0\.1:$clean, link up$" &&
    has "$work/r1" '^  warning: 1 replica and min-replicas-to-write 0: the master grants a lock before any replica has it, so after a failover the new master can grant it again; set min-replicas-to-write 1 and min-replicas-max-lag 10' &&
    has "$work/r1" '^1 warning\.$' || return 1
    expect_status 0 $st2 "a replica, min-replicas-to-write 1" || { sed 's/^/#   /' "$work/r2"; return 1; }
    expect_status 1 $st3 "a replica stopped" || return 1
    has "$work/r3" "^  warning: replica 127\.0\.0\.1:$rport last acknowledged [0-9]+ s ago.*: it is stopped, overloaded or cut off" &&
    has "$work/r3" '^  cannot be reached: no answer within 500 ms' &&
    has "$work/r3" '^  warning: this replica cannot be read: it may be stopped or cut off' || return 1
    json_is "$work/r3.json" '[(s["expected_role"], s["reached"]) for s in J["servers"]]' "[('master', True), ('replica', False)]" &&
    json_is "$work/r3.json" 'J["servers"][0]["replicas"][0]["lag_s"] >= 2, J["exit_status"]' "(True, 1)" || return 1
    expect_status 1 $st4 "too few good replicas" || return 1
    has "$work/r4" '^  warning: min-replicas-to-write is 1, but 0 replicas acknowledged within min-replicas-max-lag: Redis refuses writes \(NOREPLICAS\), lock acquires included'
}
check "replicas: min-replicas-to-write 0 warns; a replica stopped (SIGSTOP) shows its lag, cannot be read, and leaves too few good replicas" t_replica_stopped

# A slow server: another client keeps it busy 10 ms at a time (DEBUG
# SLEEP), so that a round trip waits for it; against a 50 ms lease the
# 99th percentile is well over a tenth.
t_round_trip() {
    "$rcli" -p "$clean" DEBUG SLEEP 0 > /dev/null 2>&1 ||
        { diag "DEBUG not available: skipped"; return 0; }
    debug_calls() {
        ccli INFO commandstats | tr -d '\r' |
            sed -n 's/^cmdstat_debug:calls=\([0-9]*\),.*/\1/p'
    }
    before=$(debug_calls)
    "$rcli" -p "$clean" -r 1500 DEBUG SLEEP 0.01 > /dev/null 2>&1 &
    busy=$!
    # Busy before the check begins (a loaded machine may start it late,
    # after the PINGs, which take milliseconds).
    i=0
    while [ "$(debug_calls)" -lt $((before + 2)) ] && [ $i -lt 100 ]; do
        sleep 0.05; i=$((i + 1))
    done
    $R -u "redis://127.0.0.1:$clean" -e 0.05 --check > "$work/t1" 2>&1
    st=$?
    kill $busy 2> /dev/null; wait $busy 2> /dev/null
    expect_status 1 $st "a slow server" || return 1
    has "$work/t1" '^redislock --check: 1 server, judged against a 50 ms lease$' &&
    has "$work/t1" "^  warning: the round trip's 99th percentile, [0-9.]+ ms, is [0-9]+% of the 50 ms lease \(a warning from 10%\): renewals, and a quorum's decisions, may not finish in time; use a longer lease \(-e, redislock_set_expire_ms\(\)\) or a server closer to the clients$"
}
check "a round trip whose 99th percentile is a tenth of the lease or more: a warning (exit 1)" t_round_trip

t_quorum() {
    tcp_server q2 "$server" --appendonly yes --save '' || return 1
    q2=$port; q2pid=$spid
    $R -u "redis://127.0.0.1:$clean" -u "redis://127.0.0.1:$q2" \
        -u "unix://$REDISLOCK_TEST_SOCKET" -e 30 --check > "$work/q1" 2>&1
    st1=$?
    stop_server $q2pid
    $R -u "redis://127.0.0.1:$clean" -u "redis://127.0.0.1:$q2" \
        -u "unix://$REDISLOCK_TEST_SOCKET" -e 30 --check --json > "$work/q2" 2>&1
    st2=$?
    expect_status 1 $st1 "a quorum, one master without persistence" || return 1
    has "$work/q1" '^redislock --check: 3 servers, ' &&
    has "$work/q1" "^127\.0\.0\.1:$clean \(master: master 1 of the quorum's 3\)$" &&
    has "$work/q1" "^127\.0\.0\.1:$q2 \(master: master 2 of the quorum's 3\)$" &&
    has "$work/q1" "^$REDISLOCK_TEST_SOCKET \(master: master 3 of the quorum's 3\)$" &&
    has "$work/q1" '^1 warning\.$' || return 1
    expect_status 69 $st2 "a quorum, one master down" || return 1
    json_is "$work/q2" '[(s["url"], s["reached"]) for s in J["servers"]], J["unreachable"]' "([(1, True), (2, False), (3, True)], 1)"
}
check "a quorum: every master checked (one without persistence: 1; one down: 69)" t_quorum

t_valkey() {
    command -v valkey-server > /dev/null 2>&1 ||
        { diag "valkey-server not installed: skipped"; return 0; }
    tcp_server valkey valkey-server --appendonly yes --save '' || return 1
    vpid=$spid
    $R -u "redis://127.0.0.1:$port" -e 30 --check > "$work/v1" 2>&1
    st=$?
    stop_server $vpid
    expect_status 0 $st "Valkey, clean" || { sed 's/^/#   /' "$work/v1"; return 1; }
    has "$work/v1" '^  server: +Valkey [0-9]+\.[0-9]+\.[0-9]+, master$'
}
check "Valkey is named as such (when valkey-server is installed)" t_valkey

t_cluster() {
    REDISLOCK_TEST_CLUSTER_REPLICAS=1 sh "$srcdir/tests/with-cluster.sh" sh -c '
        set -- $REDISLOCK_TEST_CLUSTER_PORTS
        $R -u "redis://127.0.0.1:$1?cluster=1" --check --json > "$0.json" 2>&1
        echo $? > "$0.st"
        $R -u "redis://127.0.0.1:$1?cluster=1" --check > "$0" 2>&1
        # A Cluster node given without cluster=1.
        $R -u "redis://127.0.0.1:$1" --check > "$0.plain" 2>&1
        exit 0' "$work/cl" \
        > "$work/cl.harness" 2>&1 || { diag "$(cat "$work/cl.harness")"; return 1; }
    expect_status 1 "$(cat "$work/cl.st")" "a Cluster without persistence" || return 1
    json_is "$work/cl.json" 'sorted([s["expected_role"] for s in J["servers"]])' "['master', 'master', 'master', 'replica', 'replica', 'replica']" &&
    json_is "$work/cl.json" 'sorted(set(s["found"] for s in J["servers"])), all(s["reached"] and s["cluster"] for s in J["servers"])' "(['cluster', 'replica'], True)" &&
    json_is "$work/cl.json" '[{k: v for k, v in s["may_run"].items() if k in ("evalsha", "eval", "discard", "blpop", "wait", "cluster_slots", "asking")} for s in J["servers"] if s["expected_role"] == "master"][0], all(all(s["may_run"].values()) for s in J["servers"] if s["expected_role"] == "master")' "({'evalsha': True, 'eval': True, 'blpop': True, 'wait': True, 'cluster_slots': True, 'asking': True}, True)" || return 1
    has "$work/cl" '^redislock --check: 6 servers, ' &&
    has "$work/cl" "\(master: a master in the Cluster's slot map\)$" &&
    # (Redis lists a replica in CLUSTER SLOTS once it has replicated
    # something; before that, its master's INFO names it.)
    has "$work/cl" "\(replica: a replica of 127\.0\.0\.1:[0-9]+( in the Cluster's slot map)?\)$" &&
    has "$work/cl" '^  server: +(Redis|Valkey) [0-9.]+, master in a Cluster$' || return 1
    has "$work/cl.plain" '^  warning: this server is a Redis Cluster node: add \?cluster=1 to the URL'
}
check "a Cluster: every master and replica of the slot map; a node without cluster=1 warns" t_cluster

t_sentinel() {
    sh "$srcdir/tests/with-sentinel.sh" sh -c '
        set -- $REDISLOCK_TEST_SENTINEL_PORTS
        u="redis-sentinel://127.0.0.1:$1,127.0.0.1:$2/$REDISLOCK_TEST_SENTINEL_MASTER"
        $R -u "$u" --check --json > "$0.json" 2>&1
        echo $? > "$0.st"
        $R -u "$u" --check > "$0" 2>&1
        $R -u "redis-sentinel://127.0.0.1:$1/no-such-master" --check > "$0.nomaster" 2>&1
        echo $? > "$0.nomaster.st"
        exit 0' "$work/se" \
        > "$work/se.harness" 2>&1 || { diag "$(cat "$work/se.harness")"; return 1; }
    expect_status 1 "$(cat "$work/se.st")" "Sentinel, no persistence" || return 1
    json_is "$work/se.json" '[(s["expected_role"], s["found"], s["reached"]) for s in J["servers"]]' "[('master', 'sentinel', True), ('replica', 'replica', True), ('replica', 'replica', True)]" &&
    json_is "$work/se.json" 'J["servers"][0]["may_run"]["role"]' True || return 1
    has "$work/se" '\(master: the master sentinel 127\.0\.0\.1:[0-9]+ names for redislock-test\)$' &&
    has "$work/se" '^  warning: 2 replicas and min-replicas-to-write 0: ' || return 1
    expect_status 69 "$(cat "$work/se.nomaster.st")" "an unknown master" || return 1
    # (The sentinel's answer in the words of redislockp_sentinel_ask(),
    # which asked it.)
    has "$work/se.nomaster" '^  cannot be reached: no sentinel named the master \(sentinel 127\.0\.0\.1:[0-9]+ does not know a master named .no-such-master.\)$'
}
check "Sentinel: the master the sentinels name and its replicas; an unknown master: 69" t_sentinel

# rediss://: the check reaches the server through the library only (a
# TLS build, and a redis-server with TLS; skipped otherwise).
t_tls() {
    $R -u "rediss://127.0.0.1:1" --check > "$work/tls0" 2>&1
    if grep -q 'built without TLS' "$work/tls0"; then
        diag "built without TLS: skipped"; return 0
    fi
    sh "$srcdir/tests/tls-certs.sh" "$work/certs" || return 1
    d="$REDISLOCK_TEST_TMPDIR/tls"
    mkdir -p "$d"
    tpid=
    attempt=0
    while [ $attempt -lt 20 ] && [ -z "$tpid" ]; do
        attempt=$((attempt + 1))
        tport=$(( ( $(od -An -N2 -tu2 /dev/urandom) % span ) + 11000 ))
        "$server" --port 0 --tls-port "$tport" --bind 127.0.0.1 \
            --tls-cert-file "$work/certs/server.crt" \
            --tls-key-file "$work/certs/server.key" \
            --tls-ca-cert-file "$work/certs/ca.crt" --tls-auth-clients no \
            --dir "$d" --pidfile "$d/redis.pid" --daemonize no \
            --logfile "$d/log" --appendonly yes --save '' \
            < /dev/null > /dev/null 2>&1 &
        tpid=$!
        sh "$srcdir/tests/wait-server.sh" "$tpid" "$rcli" --tls \
            --cacert "$work/certs/ca.crt" -h 127.0.0.1 -p "$tport" ||
            { stop_server "$tpid"; tpid=; }
        # A redis-server without TLS exits at once: no use trying again.
        grep -q -i 'tls' "$d/log" 2> /dev/null && [ -z "$tpid" ] &&
            ! grep -q 'Address already in use' "$d/log" &&
            { diag "redis-server without TLS: skipped"; return 0; }
    done
    [ -n "$tpid" ] || { diag "no TLS server"; return 1; }
    u="rediss://127.0.0.1:$tport?cacert=$work/certs/ca.crt"
    $R -u "$u" -e 30 --check > "$work/tls1" 2>&1
    st=$?
    stop_server "$tpid"
    expect_status 1 $st "over TLS" || return 1
    has "$work/tls1" "^127\.0\.0\.1:$tport \(master: over TLS\)$" &&
    has "$work/tls1" '^  round trip: +median [0-9.]+ ms, p99 [0-9.]+ ms over 300 PINGs through the library ' &&
    has "$work/tls1" '^  warning: over TLS the check reaches the server only through the library: it answers, but its version, persistence, memory policy, replicas and this user.s permissions were not read' || return 1
    $R -u "$u" --check > "$work/tls2" 2>&1
    expect_status 69 $? "over TLS, the server gone" || return 1
    has "$work/tls2" '^  cannot be reached: '
}
check "rediss:// (a TLS build): reached through the library only, which a warning says; 69 when gone" t_tls

t_usage() {
    for args in "--check k true" "--check --status k" "--check -c true" \
                "--check -- k true"; do
        # shellcheck disable=SC2086
        $R $args > "$work/us" 2>&1
        expect_status 64 $? "redislock $args" || return 1
        has "$work/us" '^redislock: ' || return 1
    done
    $R --check "" > "$work/us" 2>&1
    expect_status 64 $? "an empty KEY" || return 1
    $R -u 'redis://127.0.0.1:notaport' --check > "$work/us" 2>&1
    expect_status 64 $? "a bad URL" || return 1
    has "$work/us" '^redislock: URL: port is not a number' || return 1
    $R -u "redis://127.0.0.1:$clean" -u "redis://127.0.0.1:$clean" --check > "$work/us" 2>&1
    expect_status 64 $? "two URLs (an even quorum)"
}
check "--check with a COMMAND, an empty KEY, --status or a bad URL: exit 64" t_usage

if [ -n "$vglogs" ]; then
    t_valgrind_clean() {
        bad=$(find "$vglogs" -name '*.log' -size +0c)
        [ -z "$bad" ] || { for f in $bad; do sed 's/^/# /' "$f"; done; return 1; }
    }
    check "valgrind reported nothing for any run of the tool" t_valgrind_clean
fi

stop_server $clean_pid
echo "1..$n"
rm -rf "$work"
[ $failed -eq 0 ]
