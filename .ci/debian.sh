#!/bin/sh
# .ci/debian.sh - the Debian packages (debian/), as CI checks them, on a
# Debian 12 machine as root (apt-get update already done):
#
# 1. installs what it needs: the Build-Depends (apt-get build-dep on the
#    tree), lintian and autopkgtest
# 2. dpkg-buildpackage -us -uc: the source package and the binaries, in
#    a copy of the tree under a temporary directory (the tree itself is
#    left as it was); the build runs the short test selection of
#    debian/rules, and fails if the exports differ from
#    debian/libredislock0.symbols
# 3. lintian on the .changes (source and binaries): any E: or W: fails
# 4. installs the three .debs as the README says (apt-get install ./...)
#    and checks what they hold
# 5. autopkgtest (debian/tests) on this machine (the null runner)
#
# Then it removes the packages again.  Exit status 0 if every stage
# passed; otherwise each failed stage is named, with the end of its log.
# With KEEP=1 the build directory (packages and logs) is kept and named.
#
# Time, 2 cores: 110 s on a fresh Debian 12 that has .ci/run's packages
# (16 s of it installing what this needs; the build 56 s with its tests,
# lintian 15 s, the autopkgtest 18 s), measured in a debootstrap chroot on
# 2026-11-29; up to 155 s here while other builds share the machine.
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
export DEBIAN_FRONTEND=noninteractive

failed=
start_all=$(date +%s)
say() { printf '\n==== debian: %s ====\n' "$*"; }
# stage NAME LOG LINES COMMAND...: run COMMAND with its output in LOG; on
# failure print the last LINES lines of LOG and remember NAME.
stage() {
    name=$1; slog=$2; lines=$3; shift 3
    say "$name"
    t0=$(date +%s)
    "$@" > "$slog" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        [ "$lines" -eq 0 ] || tail -n "$lines" "$slog"
        failed="$failed${failed:+, }$name"
    fi
    echo "-- $name: exit $rc in $(( $(date +%s) - t0 )) s"
    return $rc
}

command -v git >/dev/null && git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || {
    echo "debian.sh: $top is not a git checkout (the tree is copied from git ls-files)" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/redislock-deb.XXXXXX") || exit 1
src=$work/redislock
packages="libredislock0 libredislock-dev redislock"
cleanup() {
    # Leave the machine as it was: the packages go (the autopkgtest's
    # test dependencies, ordinary Debian packages, stay).
    if dpkg-query -W -f '${Status}\n' $packages 2>/dev/null | grep -q installed; then
        apt-get purge -y -q $packages > "$work/purge.log" 2>&1 ||
            { echo "debian.sh: removing the packages failed:"; tail -20 "$work/purge.log"; }
    fi
    if [ -n "$failed" ] || [ "${KEEP:-}" = 1 ]; then
        echo "debian.sh: packages and logs kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# A copy of the files git knows (and new ones not ignored, for a run by
# hand before a commit): nothing of a build in the tree comes along, and
# nothing is written into the tree.
mkdir "$src" || exit 1
git -C "$top" ls-files -z --cached --others --exclude-standard |
    (cd "$top" && tar --null -T - --ignore-failed-read -c 2>/dev/null) |
    tar -x -C "$src" || { echo "debian.sh: copying the tree failed" >&2; exit 1; }

if stage "packages (build-dep, lintian, autopkgtest)" "$work/apt.log" 40 sh -c "
    apt-get build-dep -y -q --no-install-recommends '$src' &&
    apt-get install -y -q --no-install-recommends lintian autopkgtest"
then
    version=$(cd "$src" && dpkg-parsechangelog -S Version)
    arch=$(dpkg --print-architecture)
    changes=$work/redislock_${version}_$arch.changes

    # -Jauto: as many make jobs as cores.
    stage "dpkg-buildpackage -us -uc" "$work/build.log" 80 sh -c \
        "cd '$src' && dpkg-buildpackage -us -uc -Jauto" &&
    grep -E '^(PASS|FAIL|ERROR|SKIP|XPASS|# [A-Z]+:)' "$work/build.log" | grep -v '^PASS' | sed 's/^/   build-time tests: /'

    if [ -f "$changes" ]; then
        # Tags at every level are shown; an error or a warning fails.
        stage "lintian" "$work/lintian.log" 0 \
            lintian -I --fail-on error,warning "$changes"
        tags=$(grep -v 'running with root privileges' "$work/lintian.log")
        printf '%s\n' "${tags:-(no tags at levels E, W, I)}" | sed 's/^/   /'

        debs=
        for p in $packages; do debs="$debs $work/${p}_${version}_$arch.deb"; done
        stage "install the .debs (apt-get install ./...)" "$work/install.log" 40 sh -c "
            set -e
            apt-get install -y -q --no-install-recommends $debs
            # libredislock0: the shared library alone (and its docs).
            others=\$(dpkg -L libredislock0 | grep -v -E '^/usr/share/doc(/|\$)|/libredislock\.so\.0[.0-9]*\$' |
                      grep -v -E '^/(\\.|usr|usr/lib|usr/lib/[^/]*|usr/share)\$' || true)
            if [ -n \"\$others\" ]; then echo \"libredislock0 ships more than libredislock.so.0*: \$others\"; exit 1; fi
            test \"\$(pkg-config --modversion redislock)\" = '$version'
            redislock --version | grep -F '$version'
            test -f /usr/share/man/man1/redislock.1.gz
            test -f /usr/share/man/man3/redislock_acquire.3.gz
            test -f /usr/share/man/man7/redislock-acl.7.gz
            ls /usr/share/doc/libredislock-dev/doc/acl.md* /usr/share/doc/redislock/doc/acl.md* >/dev/null
            test -f /usr/lib/\$(dpkg-architecture -qDEB_HOST_MULTIARCH)/cmake/redislock/redislockConfig.cmake
            echo installed: $packages"

        # The summary, then the output of each test that did not pass.
        out=$work/autopkgtest
        stage "autopkgtest (null runner)" "$work/autopkgtest.log" 0 \
            autopkgtest --output-dir "$out" "$changes" -- null
        if [ -f "$out/summary" ]; then
            sed 's/^/   /' "$out/summary"
            awk '$2 != "PASS" { print $1 }' "$out/summary" | while read -r t; do
                for f in "$out/$t-stdout" "$out/$t-stderr"; do
                    [ -s "$f" ] || continue
                    echo "--- ${f##*/} (end):"
                    tail -40 "$f"
                done
            done
        else
            tail -60 "$work/autopkgtest.log"
        fi
    else
        failed="$failed${failed:+, }no $changes to check"
    fi
fi

say "done in $(( $(date +%s) - start_all )) s"
if [ -n "$failed" ]; then
    echo "debian.sh: FAILED: $failed"
    exit 1
fi
echo "debian.sh: packages built, lintian clean, installed, autopkgtest passed"
