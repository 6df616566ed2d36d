#!/bin/sh
# check-probes.sh - the USDT probes (issue 34): in a build that found
# sys/sdt.h (config.h's HAVE_SYS_SDT_H), libredislock.so carries the
# probes redislock:acquired, released, lost, renew_failed and waited,
# each an ELF note (readelf -n); in a build without, none, and the test
# says it skipped - which CI, whose machine has systemtap-sdt-dev,
# counts as a failure.
set -u
lib=src/.libs/libredislock.so
probes="acquired released lost renew_failed waited"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
echo "1..1"
if ! grep -q '^#define HAVE_SYS_SDT_H 1' config.h 2>/dev/null; then
    if [ "${CI:-}" = true ]; then
        echo "not ok 1 - USDT probes: configure found no sys/sdt.h (CI installs systemtap-sdt-dev)"
    else
        echo "ok 1 # SKIP configure found no sys/sdt.h: no USDT probes built"
    fi
    exit 0
fi
if [ ! -f "$lib" ] || ! command -v readelf >/dev/null; then
    echo "ok 1 # SKIP no $lib or no readelf"
    exit 0
fi
notes=$(readelf -n "$lib" | sed -n 's/^ *Name: *//p' | sort -u | tr '\n' ' ')
missing=
for p in $probes; do
    case " $notes " in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ]
ok $? "libredislock.so has the USDT probes redislock:{$(echo $probes | tr ' ' ',')}"
[ -z "$missing" ] || echo "# missing:$missing (notes: $notes)"
