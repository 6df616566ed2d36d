#!/bin/sh
# .ci/installed-tool.sh - beside a throwaway redis-server (run through
# tests/with-redis.sh): the installed redislock(1) takes a lock, runs a
# command that sees it, and releases it.
set -eu
REDISLOCK_URL=redis://127.0.0.1:$REDISLOCK_TEST_PORT
export REDISLOCK_URL
out=$(/usr/local/bin/redislock installed:k -- sh -c 'echo "$REDISLOCK_KEY"')
test "$out" = installed:k
/usr/local/bin/redislock --status installed:k && exit 1   # released: exit 1
echo "installed redislock ran a command holding $out"
