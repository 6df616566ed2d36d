#!/bin/sh
# install-valkey.sh - install valkey-server, valkey-sentinel and valkey-cli
# (8.x) from Debian's backports suite, for `make check-valkey`.  Run as
# root on Debian 12 (bookworm); CI runs it (.ci/run).
#
# Debian 12 has no Valkey of its own; bookworm-backports has 8.0.  The
# backports suite is added to the machine's own apt sources, derived from
# them rather than named, by tools/add-backports.sh (nothing is added when
# a source of CODENAME-backports is there already).
#
# Only the three packages come from backports (pkg/suite); what they
# depend on comes from the release.  valkey-redis-compat (redis-* names
# for Valkey's binaries, in conflict with redis-server) is not installed:
# Debian's redis-server and redis-cli, which the rest of the suite uses,
# stay as they are, and this script checks it.  No service is started
# (a policy-rc.d that refuses, for the install only, if there is none).
#
# Idempotent: with Valkey 8 or later already installed it only says so.
# The last line printed is valkey-server --version.
set -eu

pkgs="valkey-server valkey-sentinel valkey-tools"
if [ -r /etc/os-release ]; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
else
    codename=
fi
[ -n "$codename" ] || { echo "install-valkey: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }
bp=$codename-backports

major() { "$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9]*\)\..*/\1/p'; }

v=$(major valkey-server)
if [ "${v:-0}" -ge 8 ] && command -v valkey-cli >/dev/null &&
   command -v valkey-sentinel >/dev/null; then
    echo "install-valkey: already installed"
    valkey-server --version
    exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "install-valkey: run as root (apt-get install)" >&2; exit 1; }

# bookworm-backports among the apt sources (derived from them).
sh "$(dirname "$0")/add-backports.sh"

apt-get update -q >/dev/null
# No service start during the install (the image may have no policy-rc.d).
ours=
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    ours=1
fi
sel=
for p in $pkgs; do sel="$sel $p/$bp"; done
rc=0
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    $sel >/dev/null || rc=$?
[ -z "$ours" ] || rm -f /usr/sbin/policy-rc.d
[ $rc -eq 0 ] || { echo "install-valkey: apt-get install failed" >&2; exit 1; }

# Debian's Redis untouched: redis-server still Redis (not a compat link to
# Valkey), if it is installed.
if command -v redis-server >/dev/null &&
   ! redis-server --version | grep -q '^Redis server'; then
    echo "install-valkey: redis-server is no longer Redis: $(redis-server --version)" >&2
    exit 1
fi
v=$(major valkey-server)
[ "${v:-0}" -ge 8 ] || { echo "install-valkey: valkey-server ${v:-missing}, not 8 or later" >&2; exit 1; }
if ! command -v valkey-cli >/dev/null || ! command -v valkey-sentinel >/dev/null; then
    echo "install-valkey: valkey-cli or valkey-sentinel missing" >&2
    exit 1
fi
valkey-server --version
