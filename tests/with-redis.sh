#!/bin/sh
# with-redis.sh - run a command beside a private, throwaway redis-server.
#
# Usage: with-redis.sh COMMAND [ARG...]
#
# Starts redis-server in a fresh temporary directory, listening on a free
# loopback port and on a unix socket in that directory, checks that the
# server answering on the port is the very process it started (INFO's
# process_id), runs COMMAND with
#     REDISLOCK_TEST_HOST, REDISLOCK_TEST_PORT, REDISLOCK_TEST_SOCKET,
#     REDISLOCK_TEST_SERVER_PID, REDISLOCK_TEST_REDIS_SERVER,
#     REDISLOCK_TEST_REDIS_CLI, REDISLOCK_TEST_TMPDIR
# in its environment, then stops the server by PID and removes the
# directory, whatever happened.  COMMAND's exit status is passed through.
#
# It is the LOG_COMPILER of the test suite, which speaks TAP on stdout, so
# it prints only TAP there and its own diagnostics on stderr.  When
# redis-server is missing it reports the test as skipped, except under CI
# (CI=true), where that is a hard error.  With REDISLOCK_TEST_WRAPPER set
# (e.g. "valgrind --error-exitcode=1"), COMMAND runs under it.  COMMAND is
# stopped after REDISLOCK_TEST_TIMEOUT seconds (600 by default).
#
# The programs: REDIS_SERVER and REDIS_CLI (default redis-server and
# redis-cli from PATH), and REDIS_SENTINEL for tests/with-sentinel.sh
# (default: REDIS_SERVER --sentinel).  `make check-valkey` sets them to
# valkey-server, valkey-cli and valkey-sentinel; every harness script and
# every server a test starts itself (REDISLOCK_TEST_REDIS_SERVER) follows.
set -u

# A name is looked up in PATH: the tests exec the server by its path.
server=$(command -v "${REDIS_SERVER:-redis-server}" || true)
cli=$(command -v "${REDIS_CLI:-redis-cli}" || true)

if [ -z "$server" ] || [ -z "$cli" ]; then
    what="${REDIS_SERVER:-redis-server}/${REDIS_CLI:-redis-cli}"
    if [ "${CI:-}" = true ]; then
        echo "Bail out! $what not found (install redis-server)"
        exit 99
    fi
    echo "1..0 # SKIP $what not found (apt-get install redis-server)"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-test.XXXXXX") || exit 99
pid=
# Stop process $1 (a child of ours or not): TERM, up to 5 s, then KILL.
stop() {
    kill "$1" 2>/dev/null || return 0
    i=0
    while [ $i -lt 50 ] && kill -0 "$1" 2>/dev/null; do
        # A child that has exited stays a zombie until reaped: done too.
        case $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) in
            Z|"") break ;;
        esac
        sleep 0.1; i=$((i + 1))
    done
    kill -9 "$1" 2>/dev/null
    return 0
}
# The names the servers we start run under (a sentinel's too; and the
# other server's, which a test may start from another binary: t_plain
# runs Valkey and Redis side by side).
names=$(basename "$server")
[ -z "${REDIS_SENTINEL:-}" ] || names="$names
$(basename "$REDIS_SENTINEL")"
names="$names
redis-server
valkey-server"
cleanup() {
    # Servers the tests started themselves write a pidfile under $tmp; a
    # test that failed half-way may have left one running.
    for f in "$tmp"/*/redis.pid; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        # Only if that PID still is one of our servers.
        if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF "$names"; then
            stop "$p"
        fi
    done
    if [ -n "$pid" ]; then
        stop "$pid"
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

major=$("$server" --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')
extra=
if [ "${major:-0}" -ge 7 ]; then
    extra="--enable-debug-command local"
fi

sock=$tmp/redis.sock
attempt=0
port=
while [ $attempt -lt 20 ]; do
    attempt=$((attempt + 1))
    # A pseudo-random port in 20000..59999; a clash is detected below.
    port=$(( ( $(od -An -N2 -tu2 /dev/urandom) % 40000 ) + 20000 ))
    # shellcheck disable=SC2086
    "$server" --port "$port" --bind 127.0.0.1 --unixsocket "$sock" \
        --unixsocketperm 700 --dir "$tmp" --save "" --appendonly no \
        --daemonize no --logfile "$tmp/redis.log" $extra \
        </dev/null >>"$tmp/redis.log" 2>&1 &
    pid=$!
    i=0
    ok=
    while [ $i -lt 400 ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            break   # it exited: port in use, most likely
        fi
        got=$("$cli" -h 127.0.0.1 -p "$port" INFO server 2>/dev/null |
              tr -d '\r' | sed -n 's/^process_id://p')
        if [ "$got" = "$pid" ]; then
            ok=1; break
        fi
        sleep 0.05; i=$((i + 1))
    done
    [ -n "$ok" ] && break
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    pid=
done
if [ -z "$pid" ]; then
    echo "with-redis.sh: could not start redis-server on a free port" >&2
    cat "$tmp/redis.log" >&2 2>/dev/null
    echo "Bail out! could not start redis-server"
    exit 99
fi

REDISLOCK_TEST_HOST=127.0.0.1
REDISLOCK_TEST_PORT=$port
REDISLOCK_TEST_SOCKET=$sock
REDISLOCK_TEST_SERVER_PID=$pid
REDISLOCK_TEST_REDIS_SERVER=$server
REDISLOCK_TEST_REDIS_CLI=$cli
REDISLOCK_TEST_TMPDIR=$tmp
export REDISLOCK_TEST_HOST REDISLOCK_TEST_PORT REDISLOCK_TEST_SOCKET \
       REDISLOCK_TEST_SERVER_PID REDISLOCK_TEST_REDIS_SERVER \
       REDISLOCK_TEST_REDIS_CLI REDISLOCK_TEST_TMPDIR

# A hung test must fail, not stall the whole run: REDISLOCK_TEST_TIMEOUT
# seconds (default 600) of wall clock, then TERM, then KILL.
limit=${REDISLOCK_TEST_TIMEOUT:-600}
# shellcheck disable=SC2086
timeout --kill-after=10 "$limit" ${REDISLOCK_TEST_WRAPPER:-} "$@"
status=$?
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    echo "Bail out! timed out after $limit s"
fi
exit $status
