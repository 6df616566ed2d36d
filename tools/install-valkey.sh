#!/bin/sh
# install-valkey.sh - install valkey-server, valkey-sentinel and valkey-cli
# (8.x) from Debian's backports suite, for `make check-valkey`.  Run as
# root on Debian 12 (bookworm); CI runs it (.ci/run).
#
# Debian 12 has no Valkey of its own; bookworm-backports has 8.0.  The
# backports suite is added to the machine's own apt sources, derived from
# them rather than named: every source of the release's main suite
# (VERSION_CODENAME in /etc/os-release) - a stanza of a deb822 file
# (/etc/apt/sources.list.d/*.sources, as Debian 12 images have) or a "deb"
# line of the one-line format (/etc/apt/sources.list, sources.list.d/
# *.list) - is copied with CODENAME-backports as its suite into
# /etc/apt/sources.list.d/redislock-backports.{sources,list}.  Nothing is
# added when a source of CODENAME-backports is there already.
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

etc=/etc/apt
out=$etc/sources.list.d/redislock-backports
# The sources apt reads: the one-line files and the deb822 ones.
list_files=
for f in "$etc/sources.list" "$etc"/sources.list.d/*.list; do
    [ -f "$f" ] && list_files="$list_files $f"
done
deb822_files=
for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] && deb822_files="$deb822_files $f"
done

# Is the backports suite a source already (ours from an earlier run, or
# the machine's)?  A "Suites:" field or an uncommented "deb" line naming it.
# shellcheck disable=SC2086
if { [ -n "$list_files" ] && grep -Eq "^[[:space:]]*deb[[:space:]].*[[:space:]]$bp([[:space:]]|\$)" $list_files; } ||
   { [ -n "$deb822_files" ] && grep -Eiq "^Suites:.*[[:space:]]$bp([[:space:]]|\$)" $deb822_files; }; then
    echo "install-valkey: $bp is among the apt sources already"
else
    # deb822: each stanza (paragraphs apart, '#' comments, continuation
    # lines beginning with a blank) of Types deb, not disabled, whose Suites
    # has the codename itself, is copied with Types deb and Suites $bp;
    # every other field (URIs, Components, Signed-By, options) as it is.
    if [ -n "$deb822_files" ]; then
        # shellcheck disable=SC2086
        awk -v rel="$codename" -v bp="$bp" '
            function has(list, word,   n, a, i) {
                n = split(list, a, /[[:space:]]+/)
                for (i = 1; i <= n; i++) if (a[i] == word) return 1
                return 0
            }
            function flush(   i, key) {
                if (nf > 0 && has(types, "deb") && has(suites, rel) &&
                    tolower(enabled) != "no" && !(uris in done)) {
                    done[uris] = 1
                    print "Types: deb"
                    print "Suites: " bp
                    for (i = 1; i <= nf; i++) {
                        key = tolower(name[i])
                        if (key != "types" && key != "suites" && key != "enabled")
                            printf "%s", text[i]
                    }
                    print ""
                }
                nf = 0; types = ""; suites = ""; enabled = ""; uris = ""
            }
            FNR == 1 { flush() }
            /^#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            /^[[:space:]]/ { if (nf > 0) text[nf] = text[nf] $0 "\n"; next }
            {
                nf++
                name[nf] = $0; sub(/:.*/, "", name[nf])
                text[nf] = $0 "\n"
                value = $0; sub(/^[^:]*:[[:space:]]*/, "", value)
                key = tolower(name[nf])
                if (key == "types") types = value
                else if (key == "suites") suites = value
                else if (key == "enabled") enabled = value
                else if (key == "uris") uris = value
            }
            END { flush() }
        ' $deb822_files > "$out.sources.new"
    else
        : > "$out.sources.new"
    fi
    # One-line format: "deb [options] URI SUITE COMPONENT..." with SUITE
    # the codename, once per URI.
    if [ -n "$list_files" ]; then
        # shellcheck disable=SC2086
        awk -v rel="$codename" -v bp="$bp" '
            /^[[:space:]]*deb[[:space:]]/ {
                i = 2; opts = ""
                if ($2 ~ /^\[/) {
                    while (i <= NF) { opts = opts " " $i; if ($i ~ /\]$/) { i++; break } i++ }
                }
                uri = $i; suite = $(i + 1)
                if (suite != rel || (uri in done)) next
                done[uri] = 1
                line = "deb" opts " " uri " " bp
                for (j = i + 2; j <= NF && $j !~ /^#/; j++) line = line " " $j
                print line
            }
        ' $list_files > "$out.list.new"
    else
        : > "$out.list.new"
    fi
    if [ ! -s "$out.sources.new" ] && [ ! -s "$out.list.new" ]; then
        rm -f "$out.sources.new" "$out.list.new"
        echo "install-valkey: no apt source of '$codename' to derive $bp from" >&2
        exit 1
    fi
    for ext in sources list; do
        if [ -s "$out.$ext.new" ]; then
            mv "$out.$ext.new" "$out.$ext"
            echo "install-valkey: added $out.$ext"
        else
            rm -f "$out.$ext.new"
        fi
    done
fi

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
