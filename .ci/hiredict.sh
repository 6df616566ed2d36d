#!/bin/sh
# .ci/hiredict.sh [DIR] - issue 34: TLS on Debian 12 through hiredict.
#
# Debian 12's hiredis (0.14.1) has no TLS.  bookworm-backports has
# hiredict 1.3.1, an LGPL-3.0-or-later fork of hiredis 1.x with SSL, and
# libhiredict-shims-dev, whose hiredis.pc, hiredis_ssl.pc and hiredis-named
# headers let the tree build against it unchanged.  This step builds a
# copy of the tree against those shims (gcc, -Werror, --with-tls), checks
# that configure found TLS and hiredict, that the library and the tool
# load libhiredict (and no libhiredis), and runs the TLS tests and a few
# cheap ones beside them.
#
# Nothing of hiredict is installed: libhiredict-shims-dev conflicts with
# libhiredis-dev, which every other step (and anyone else on the machine)
# builds against, so the three packages are fetched with apt-get download
# (apt checks them against the signed archive) and unpacked with dpkg-deb
# -x into DIR/root; DIR/pkgconfig holds their own .pc files, pointed at
# that directory.  The step may run anywhere in .ci/run.  What it does
# change on the machine, as root: bookworm-backports is added to the apt
# sources by tools/add-backports.sh if it is not there (with apt-get
# update then), and packages of the release the build needs that are
# missing are installed (none after .ci/run's first step).
#
# DIR (default: a temporary directory, removed at the end) keeps the
# packages, the unpacked tree and the build (DIR/tree, its test logs in
# DIR/tree/test-suite.log and DIR/tree/tests/).  The last line printed is
# "hiredict: ok" or "hiredict: FAILED (why)"; the exit status is 0 or 1.
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
export CI=true

fail() { echo "hiredict: FAILED ($*)"; exit 1; }

if [ $# -ge 1 ]; then
    mkdir -p "$1" || fail "cannot make $1"
    dir=$(cd "$1" && pwd)
    rm -rf "$dir/debs" "$dir/root" "$dir/pkgconfig" "$dir/tree"
else
    dir=$(mktemp -d /tmp/redislock-hiredict.XXXXXX) || fail "mktemp"
    trap 'rm -rf "$dir"' EXIT
fi
[ "$(id -u)" -eq 0 ] || fail "run as root (apt sources, apt-get download)"
start=$(date +%s)

# The release's packages the build and the tests need (not libhiredis-dev).
need="gcc g++ make autoconf automake libtool pkg-config libsodium-dev
      libcmocka-dev libssl-dev openssl redis-server redis-tools
      libevent-dev libuv1-dev"
missing=
for p in $need; do
    dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "hiredict: installing$missing"
    ours=
    if [ ! -e /usr/sbin/policy-rc.d ]; then   # no redis-server service start
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        ours=1
    fi
    rc=0
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends $missing > /dev/null || rc=$?
    [ -z "$ours" ] || rm -f /usr/sbin/policy-rc.d
    [ $rc -eq 0 ] || fail "apt-get install$missing"
fi

# hiredict from backports: the -dev package names the runtime one
# (libhiredict<version>) in its Depends.
sh tools/add-backports.sh || fail "tools/add-backports.sh"
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
bp=$codename-backports
runtime() {
    apt-cache show "libhiredict-dev/$bp" 2>/dev/null |
        sed -n 's/^Depends:.*\(libhiredict[0-9][0-9.]*\).*/\1/p' | head -1
}
rt=$(runtime)
if [ -z "$rt" ]; then
    apt-get update -q > /dev/null || fail "apt-get update"
    rt=$(runtime)
fi
[ -n "$rt" ] || fail "no libhiredict-dev in $bp"
mkdir -p "$dir/debs" "$dir/root" "$dir/pkgconfig"
# apt's download user writes the files: the directory is its.
chown _apt "$dir/debs" 2> /dev/null || true
(cd "$dir/debs" && apt-get download -q "$rt/$bp" "libhiredict-dev/$bp" \
    "libhiredict-shims-dev/$bp" > /dev/null) || fail "apt-get download"
for deb in "$dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir/root" || fail "dpkg-deb -x $deb"
done
ls "$dir"/debs

# Their .pc files (hiredis.pc and hiredis_ssl.pc are the shims'), with
# prefix and libdir pointing into DIR/root.
so=$(find "$dir/root" -name 'libhiredict.so.*' | head -1)
[ -n "$so" ] || fail "no libhiredict.so in the packages"
lib=$(dirname "$so")
for pc in hiredis hiredis_ssl hiredict hiredict_ssl; do
    [ -f "$lib/pkgconfig/$pc.pc" ] || fail "no $pc.pc in the packages"
    sed -e "s|^prefix=.*|prefix=$dir/root/usr|" -e "s|^libdir=.*|libdir=$lib|" \
        "$lib/pkgconfig/$pc.pc" > "$dir/pkgconfig/$pc.pc"
done
PKG_CONFIG_PATH=$dir/pkgconfig
export PKG_CONFIG_PATH
echo "hiredict: hiredis.pc $(pkg-config --modversion hiredis):" \
    "$(pkg-config --cflags --libs hiredis_ssl)"

# A pristine copy of the tree, built against them.
mkdir "$dir/tree"
git ls-files -z | xargs -0 tar -c | tar -x -C "$dir/tree" || fail "copy of the tree"
cd "$dir/tree" || fail "cd $dir/tree"
autoreconf -fi > autoreconf.log 2>&1 || { tail autoreconf.log; fail "autoreconf"; }
./configure --enable-werror --with-tls > configure.out 2>&1 ||
    { tail -20 configure.out; fail "configure"; }
grep -E '^ *(TLS|hiredis):' configure.out
grep -Eq '^ *TLS: +yes$' configure.out || fail "configure did not enable TLS"
grep -Eq "^ *hiredis: +.*hiredict" configure.out ||
    fail "configure did not find hiredict's shims"
grep -q '^#define REDISLOCK_HAVE_TLS 1' config.h || fail "no REDISLOCK_HAVE_TLS"
make -j2 > make.log 2>&1 || { grep -E 'error|warning' make.log | head -20; fail "make"; }
echo "hiredict: built in $(( $(date +%s) - start )) s"

# The library and the tool (the binary under libtool's wrapper, with the
# library beside it) load hiredict, from DIR, and no hiredis.
# The command links the library's objects itself (no libtool wrapper,
# no libredislock.so at run time): cli/redislock is the program.
tool=cli/redislock
[ -f cli/.libs/redislock ] && tool=cli/.libs/redislock
for obj in src/.libs/libredislock.so $tool; do
    LD_LIBRARY_PATH=$lib:$(pwd)/src/.libs ldd "$obj" > ldd.out 2>&1 || fail "ldd $obj"
    echo "hiredict: ldd $obj:"
    grep -E 'redislock|hiredi|ssl|crypto' ldd.out | sed 's/ (0x[0-9a-f]*)$//'
    if grep -q 'not found' ldd.out; then fail "$obj: a library not found"; fi
    grep -q "libhiredict\.so.* => $lib/" ldd.out || fail "$obj does not load $lib's libhiredict"
    grep -q "libhiredict_ssl\.so.* => $lib/" ldd.out || fail "$obj does not load libhiredict_ssl"
    if grep -q 'libhiredis' ldd.out; then fail "$obj loads libhiredis too"; fi
done

LD_LIBRARY_PATH=$lib
export LD_LIBRARY_PATH

# The TLS tests: t_tls (rediss:// to servers, a Cluster, a Sentinel, the
# non-blocking API and the loop adapters), t_check.sh (the tool's --check
# over TLS) and t_client (URL options of TLS); t_basic, the exports and
# the layers (hiredict's function names) beside them.  Every test program
# is compiled (make check), so the suite's own use of hiredis's API and of
# redislock.h before or after hiredis.h is checked with -Werror too.
tests="tests/t_tls tests/t_check.sh tests/t_client tests/t_basic
       tests/check-exports.sh tests/check-layers.sh tests/header_c"
rc=0
make -j3 check TESTS="$(echo $tests)" > check.log 2>&1 || rc=$?
sed -n 's/^# \(TOTAL\|PASS\|SKIP\|FAIL\|ERROR\):/hiredict: \1:/p' test-suite.log 2>/dev/null
[ $rc -eq 0 ] || { grep -E '^(FAIL|ERROR)|error:' check.log | head -30; fail "make check"; }
grep -q '^# SKIP: *0$' test-suite.log || fail "tests skipped"
# t_check.sh skips its rediss:// case in a build or with a server without TLS.
if grep -q 'TLS: skipped' tests/t_check.log; then fail "t_check.sh skipped its TLS case"; fi
grep -q '^ok .* test_right_ca_and_name' tests/t_tls.log || fail "t_tls did not run"
echo "hiredict: $(( $(date +%s) - start )) s in all"
echo "hiredict: ok"
