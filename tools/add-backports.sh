#!/bin/sh
# add-backports.sh - add this Debian release's backports suite to the
# machine's apt sources, derived from them rather than named: every
# source of the release's main suite (VERSION_CODENAME in
# /etc/os-release) - a stanza of a deb822 file
# (/etc/apt/sources.list.d/*.sources, as Debian 12 images have) or a "deb"
# line of the one-line format (/etc/apt/sources.list, sources.list.d/
# *.list) - is copied with CODENAME-backports as its suite into
# /etc/apt/sources.list.d/redislock-backports.{sources,list}.  Nothing is
# added when a source of CODENAME-backports is there already.  Run as
# root; it runs no apt-get update (the caller does, when it needs the
# suite's lists).  It prints the file it added, or that the suite is
# among the apt sources already.
#
# Used by tools/install-valkey.sh (Valkey 8.0) and .ci/hiredict.sh
# (hiredict 1.3.1); backports packages have a lower priority than the
# release's, so adding the suite changes no other package's candidate.
set -eu

if [ -r /etc/os-release ]; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
else
    codename=
fi
[ -n "$codename" ] || { echo "add-backports: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }
bp=$codename-backports

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
    echo "add-backports: $bp is among the apt sources already"
else
    [ "$(id -u)" -eq 0 ] || { echo "add-backports: run as root (it writes to $etc)" >&2; exit 1; }
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
        echo "add-backports: no apt source of '$codename' to derive $bp from" >&2
        exit 1
    fi
    for ext in sources list; do
        if [ -s "$out.$ext.new" ]; then
            mv "$out.$ext.new" "$out.$ext"
            echo "add-backports: added $out.$ext"
        else
            rm -f "$out.$ext.new"
        fi
    done
fi
