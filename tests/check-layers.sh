#!/bin/sh
# check-layers.sh - the library's files call each other in layers, read
# off the object files with nm (1 to 4) and the sources (5) (TAP output):
#   1. only src/transport.c sends commands or reads replies: no other
#      object uses hiredis's command and reply functions or send();
#   2. the calls between files have no cycle (the machine's files,
#      machine*.c, count as one);
#   3. the transport and the script runner call nothing above them
#      (no handles, pools, watchdog or lock operations), and the KEYS/ARGV
#      layouts (calls.c) nothing but the runner's helpers;
#   4. the lock operations, the waiters and the watchdog (lock.c, wait.c,
#      watchdog.c) reach a server only through the executor (exec.c):
#      they take no connection from a pool, connect nothing, and send and
#      read nothing themselves;
#   5. and they read replies only through the views of src/transport.h:
#      their sources (read from REDISLOCK_TEST_SRCDIR) name no hiredis
#      type, function, macro or header, and read no reply's or context's
#      fields (->element, ->elements, ->integer, ctx->), comments included;
#   6. the redislock(1) command (cli/*.c, read from the sources) reads URLs
#      and asks sentinels only through the library (src/url.c,
#      src/sentinel.c): it defines no function named like a URL parser
#      (parse_url, url_parse, userinfo) and sends no SENTINEL
#      GET-MASTER-ADDR-BY-NAME of its own;
#   7. the rules both executors obey (src/engine.c: what follows a leg, a
#      fan-out's clock, the renewal ledger, what follows a waiter's try)
#      do no I/O and never block: the object refers only to an allowed
#      list - the reply views and messages, the clock, the route's and
#      slot map's bookkeeping, the scripts=none refusal tests, a mutex -
#      so no poll(), sleep, condition variable, connection, pool or
#      executor can come in unseen;
#   8. the machine (machine*.c: operations as steps, routes, quorums,
#      waiters, renewals) does no I/O of its own and never blocks: of the
#      C library it refers only to the allowed list of rule 7, and of the
#      library to no connect, dial, poll driver, blocking executor,
#      hiredis send or read, sleep or thread; it reaches a socket only
#      through a connection of aconn.c (requests queued, replies handed
#      back, told the time), which is the I/O layer.
set -u
builddir=${REDISLOCK_TEST_BUILDDIR:-.}
srcdir=${REDISLOCK_TEST_SRCDIR:-$(dirname "$0")/..}
nm=${NM:-nm}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

echo "1..8"

# Rule 5 reads the sources: it needs neither nm nor a build.
rule5() {
    name="lock operations, waiters and watchdog read replies only through the views"
    hiredis='redis[A-Z][A-Za-z]*|REDIS_[A-Z_]+|freeReplyObject|hiredis[./]'
    fields='->(elements?|integer)([^A-Za-z0-9_]|$)|(^|[^A-Za-z0-9_])ctx->'
    missing=
    : > "$tmp/names"
    for f in lock wait watchdog; do
        if [ -f "$srcdir/src/$f.c" ]; then
            grep -nE "$hiredis|$fields" "$srcdir/src/$f.c" |
                sed "s|^|src/$f.c:|" >> "$tmp/names"
        else
            missing="$missing src/$f.c"
        fi
    done
    if [ -n "$missing" ]; then
        echo "ok 5 - $name # SKIP not in $srcdir:$missing"
    elif [ ! -s "$tmp/names" ]; then
        echo "ok 5 - $name"
    else
        echo "not ok 5 - $name"
        sed 's/^/# /' "$tmp/names"
    fi
}

# Rule 6 reads the command's sources, as rule 5 the library's.
rule6() {
    name="the command reads URLs and asks sentinels only through the library"
    if ! ls "$srcdir"/cli/*.c > /dev/null 2>&1; then
        echo "ok 6 - $name # SKIP no cli/*.c in $srcdir"
        return
    fi
    # A definition starts a line (house style); calls are indented.
    grep -nE '^[a-z].*(parse_url|url_parse|userinfo)[a-z_]*[ ]*\(|GET-MASTER-ADDR-BY-NAME' \
        "$srcdir"/cli/*.c | sed "s|^$srcdir/||" > "$tmp/cli"
    if [ ! -s "$tmp/cli" ]; then
        echo "ok 6 - $name"
    else
        echo "not ok 6 - $name"
        sed 's/^/# /' "$tmp/cli"
    fi
}

skip=
if ! command -v ${nm%% *} >/dev/null 2>&1; then
    skip="nm not found"
else
    # The library's objects: those of its convenience library, which the
    # shared library and the command are made of.
    objs=$(ls "$builddir"/src/.libs/libredislock_core_la-*.o 2>/dev/null ||
           ls "$builddir"/src/libredislock_core_la-*.o 2>/dev/null)
    [ -n "$objs" ] || skip="no object files of the library"
fi
if [ -n "$skip" ]; then
    for i in 1 2 3 4 7 8; do
        echo "ok $i - read off the object files # SKIP $skip"
    done
    rule5
    rule6
    exit 0
fi

# name (e.g. "transport") defined-symbol / undefined-symbol lines
for o in $objs; do
    # The machine's files are one unit: one state machine, split by
    # subject (routes, conversations, quorums, waiters, renewals), whose
    # steps call each other both ways; the layers are around it.
    name=$(basename "$o" .o | sed 's/^libredislock_core_la-//; s/^machine_.*/machine/')
    $nm "$o" | awk -v n="$name" '
        $1 == "U" { print n, $2 >> "'"$tmp/undef"'" }
        NF == 3 && $2 ~ /^[TDBR]$/ { print $3, n >> "'"$tmp/def"'" }'
done
# The edges between files: FILE uses a function DEFINED in another.
awk 'NR == FNR { where[$1] = $2; next }
     ($2 in where) && where[$2] != $1 { print $1, where[$2] }' \
    "$tmp/def" "$tmp/undef" | sort -u > "$tmp/edges"

# hiredis's functions, or hiredict's (its hiredis shims are macros: the
# objects name redictCommand and the like).
io='^(send|sendto|sendmsg|redi(s|ct)(Command|vCommand|CommandArgv|AppendCommand|vAppendCommand|AppendCommandArgv|AppendFormattedCommand|GetReply|GetReplyFromReader|BufferWrite|BufferRead))$'
awk -v io="$io" '$1 != "transport" && $2 ~ io' "$tmp/undef" > "$tmp/stray"
if [ -s "$tmp/edges" ] && [ ! -s "$tmp/stray" ]; then
    echo "ok 1 - only transport.c sends commands and reads replies"
else
    echo "not ok 1 - only transport.c sends commands and reads replies"
    sed 's/^/# /' "$tmp/stray"
fi

if tsort "$tmp/edges" > /dev/null 2> "$tmp/loop"; then
    echo "ok 2 - no cycle among the files' calls"
else
    echo "not ok 2 - no cycle among the files' calls"
    sed 's/^/# /' "$tmp/loop"
fi

awk '($1 == "transport" || $1 == "scripts") &&
     $2 !~ /^(transport|alloc|clock|error)$/ { print }
     $1 == "calls" && $2 !~ /^(scripts|transport|alloc)$/ { print }' \
    "$tmp/edges" > "$tmp/upward"
if [ ! -s "$tmp/upward" ]; then
    echo "ok 3 - transport, runner and layouts call nothing above them"
else
    echo "not ok 3 - transport, runner and layouts call nothing above them"
    sed 's/^/# uses: /' "$tmp/upward"
fi
direct='^redislockp_(pool_get|pool_put|pool_drop|conn_back|connect|tx_send|tx_recv|tx_call|tx_command|tx_next_reply|tx_ready)$'
awk -v d="$direct" '($1 == "lock" || $1 == "wait" || $1 == "watchdog") &&
     $2 ~ d { print }' "$tmp/undef" > "$tmp/direct"
if [ ! -s "$tmp/direct" ]; then
    echo "ok 4 - lock operations, waiters and watchdog run commands only through the executor"
else
    echo "not ok 4 - lock operations, waiters and watchdog run commands only through the executor"
    sed 's/^/# uses: /' "$tmp/direct"
fi
rule5
rule6
# What the engine may refer to: compiler and sanitizer runtime (__*),
# string and message functions (and those a compiler puts for them:
# clang's bcmp for a memcmp), a mutex, libsodium's random numbers, and
# the library's functions that only read or note (no I/O, no waiting:
# the metrics' counters are atomics and a leaf lock).
engine_ok='^(__.*|snprintf|vsnprintf|strcmp|strncmp|strlen|strnlen|strchr|strrchr|strstr|memcpy|memmove|memset|memcmp|memchr|bcmp|strtol|strtoll|strtoul|strtoull|pthread_mutex_lock|pthread_mutex_unlock|randombytes_uniform|redislockp_(val_[a-z_]+|tx_fail|tx_failed|fail|took|metric_[a-z_]+|metrics_of|now_us|tx_describe|tx_val_error|now_ms|cluster_stale|cluster_moved|node_named|node_url|redirect_parse|reply_nofunc|reply_noscript|not_master|plain_can|plain_refusal|ack_enough|majority))$'
name="the engine's rules do no I/O and never block (src/engine.c)"
if ! grep -q '^engine ' "$tmp/undef" && ! grep -q ' engine$' "$tmp/def"; then
    echo "not ok 7 - $name"
    echo "# no object src/engine.o among the library's"
else
    awk -v ok="$engine_ok" '$1 == "engine" && $2 !~ ok { print $2 }' \
        "$tmp/undef" > "$tmp/engine"
    if [ ! -s "$tmp/engine" ]; then
        echo "ok 7 - $name"
    else
        echo "not ok 7 - $name"
        sed 's/^/# refers to: /' "$tmp/engine"
    fi
fi
name="the machine does no I/O of its own and never blocks (src/machine*.c)"
libc_ok='^(__.*|snprintf|vsnprintf|strcmp|strncmp|strlen|strnlen|strchr|strrchr|strstr|memcpy|memmove|memset|memcmp|memchr|bcmp|strtol|strtoll|strtoul|strtoull|pthread_mutex_lock|pthread_mutex_unlock|randombytes_uniform|redislockp?_[a-z_0-9]+)$'
blocking='^redislockp_(connect|socket_blocking|sleep_ms|may_block|thread_create|exec_one|drive_[a-z_]+|dial_[a-z_]+|tx_(send|recv|call|command|next_reply|ready|flush|fd|raise_timeout|restore_timeout)|sigpipe_[a-z]+)$'
if ! grep -q '^machine ' "$tmp/undef"; then
    echo "not ok 8 - $name"
    echo "# no object src/machine*.o among the library's"
else
    awk -v ok="$libc_ok" -v no="$blocking" \
        '$1 == "machine" && ($2 !~ ok || $2 ~ no) { print $2 }' \
        "$tmp/undef" | sort -u > "$tmp/machine"
    if [ ! -s "$tmp/machine" ]; then
        echo "ok 8 - $name"
    else
        echo "not ok 8 - $name"
        sed 's/^/# refers to: /' "$tmp/machine"
    fi
fi
echo "# edges: $(tr '\n' ';' < "$tmp/edges")"
