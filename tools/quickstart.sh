#!/bin/sh
# quickstart.sh - set everything up on Debian 12 (or Ubuntu) and run the
# demo or the test suite.  Run as root on a fresh machine, from anywhere:
#
#   sh tools/quickstart.sh demo    # build, then run examples/demo and
#                                  # examples/cli-demo.sh (the redislock
#                                  # command) against a throwaway redis-server
#   sh tools/quickstart.sh test    # build, then run `make check`
#
# It installs the Debian packages that are missing (apt-get), generates the
# build system if needed (autoreconf -fi), configures (extra flags from
# REDISLOCK_CONFIGURE_FLAGS), builds, and runs the demo or the tests.
set -eu
cd "$(dirname "$0")/.."

what=${1:-}
case $what in
    demo|test) ;;
    *) echo "usage: sh tools/quickstart.sh demo|test" >&2; exit 2 ;;
esac

# What make check uses (README.md's Install lists the same; check-snippets
# compares them): without libevent-dev and libuv1-dev the event-loop tests
# and examples/lock_server are not built, without strace, python3 and
# groff-base tests are skipped.
pkgs="gcc g++ make autoconf automake libtool pkg-config libhiredis-dev
      libsodium-dev libcmocka-dev redis-server redis-tools libevent-dev
      libuv1-dev strace python3 groff-base"
missing=
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "quickstart: these packages are missing; install them as root:" >&2
        echo "  apt-get install$missing" >&2
        exit 1
    fi
    echo "quickstart: installing$missing"
    apt-get update -q
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

[ -x configure ] || autoreconf -fi
# Configure when not yet configured, or again when flags are given.
if [ ! -f Makefile ] || [ -n "${REDISLOCK_CONFIGURE_FLAGS:-}" ]; then
    # shellcheck disable=SC2086
    ./configure ${REDISLOCK_CONFIGURE_FLAGS:-}
fi
make -j"$(nproc)"

case $what in
    demo) make demo ;;
    # -j4 on 2 cores: most tests wait on their servers and timers.
    test) make -j4 check ;;
esac
