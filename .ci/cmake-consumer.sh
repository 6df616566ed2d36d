#!/bin/sh
# .ci/cmake-consumer.sh - build .ci/cmake-consumer with CMake against an
# installed redislock (find_package(redislock CONFIG), redislock::redislock)
# and run its programs beside a throwaway redis-server (tests/with-redis.sh).
#
# Usage: .ci/cmake-consumer.sh [PREFIX [VARIANT...]]
#   PREFIX   where redislock is installed: CMAKE_PREFIX_PATH (/usr/local);
#            a DESTDIR staging tree works too (e.g. /tmp/stage/usr/local)
#   VARIANT  shared (the default target), static (redislock_USE_STATIC_LIBS),
#            or static-only (a --disable-shared installation); by default
#            "shared static"
# The shared programs must load libredislock.so.N from PREFIX (CMake's
# build RPATH, or ldconfig); the static ones must not need it at all.
# Needs cmake, a C and a C++ compiler, pkg-config, hiredis and libsodium
# (-dev), redis-server.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
prefix=${1:-/usr/local}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- shared static

command -v cmake >/dev/null || { echo "cmake-consumer.sh: cmake not found (apt-get install cmake)" >&2; exit 1; }
cmake --version | head -1

build=$(mktemp -d "${TMPDIR:-/tmp}/redislock-cmake.XXXXXX")
trap 'rm -rf "$build"' EXIT

for variant in "$@"; do
    echo "== CMake consumer, $variant, against $prefix"
    case $variant in
        shared)      flags="-DEXPECT_LIBRARY_TYPE=SHARED -DCHECK_VERSION_RULE=ON" ;;
        static)      flags="-Dredislock_USE_STATIC_LIBS=ON -DEXPECT_LIBRARY_TYPE=STATIC" ;;
        static-only) flags="-DEXPECT_LIBRARY_TYPE=STATIC" ;;
        *) echo "cmake-consumer.sh: unknown variant $variant" >&2; exit 2 ;;
    esac
    b=$build/$variant
    # shellcheck disable=SC2086
    cmake -S "$here/cmake-consumer" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
        -DCMAKE_CXX_FLAGS="-Wall -Wextra -pedantic -Werror" $flags
    cmake --build "$b" -- -j2

    for p in consumer_c consumer_cxx consumer_borrowed; do
        needed=$(readelf -d "$b/$p" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
        case $variant:$needed in
            shared:*libredislock.so.*) ;;
            shared:*) echo "$p: no libredislock.so in NEEDED: $needed" >&2; exit 1 ;;
            static*:*libredislock*) echo "$p: static, yet NEEDED has $needed" >&2; exit 1 ;;
        esac
        echo "$p: NEEDED $needed"
    done
    (cd "$b" && sh "$top/tests/with-redis.sh" ctest --output-on-failure)
done
echo "CMake consumer: $* passed against $prefix"
