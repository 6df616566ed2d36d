#!/bin/sh
# hiredis1.sh DIR - unpack Debian trixie's hiredis 1.x (libhiredis-dev and
# its runtime library) into DIR, without installing it, and write
# DIR/pkgconfig/hiredis.pc and hiredis_ssl.pc (TLS) pointing there; print
# the library directory.
# CI builds and tests redislock against it, since Debian 12 itself ships
# hiredis 0.14.1.
#
# Everything is verified the way apt does it: InRelease's signature with
# the Debian archive keyring, Packages.xz against InRelease's SHA256, each
# .deb against Packages' SHA256.
set -eu
mkdir -p "$1"
dir=$(cd "$1" && pwd)
# The Debian archive this machine's apt already uses (its sources), not a
# host name written here; DEBIAN_MIRROR overrides it.
apt_mirror() {
    {
        [ -f /etc/apt/sources.list ] && awk '$1 == "deb" {
            for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; break } }' \
            /etc/apt/sources.list
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] && awk '$1 == "deb" {
                for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; break } }' "$f"
        done
    } | grep -v -e 'security' -e 'updates' | sed 's|/*$||' | head -1
}
mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
[ -n "$mirror" ] || { echo "hiredis1.sh: no Debian archive in the apt sources" >&2; exit 1; }
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mkdir -p "$dir/debs" "$dir/root" "$dir/pkgconfig"
cd "$dir"

curl -fsS -o InRelease "$mirror/dists/trixie/InRelease"
gpgv --keyring "$keyring" --output Release InRelease 2>/dev/null ||
    { echo "hiredis1.sh: bad signature on trixie InRelease" >&2; exit 1; }
want=$(awk '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 }
            s && $3 == "main/binary-amd64/Packages.xz" { print $1 }' Release)
curl -fsS -o Packages.xz "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
echo "$want  Packages.xz" | sha256sum -c --quiet - ||
    { echo "hiredis1.sh: Packages.xz does not match InRelease" >&2; exit 1; }

for pkg in libhiredis-dev libhiredis1.1.0; do
    set -- $(xz -dc Packages.xz | awk -v p="$pkg" '
        $0 == "Package: " p { hit = 1; next }
        /^Package: / { hit = 0 }
        hit && /^Filename: / { f = $2 }
        hit && /^SHA256: / { h = $2 }
        f && h { print f, h; exit }')
    [ $# -eq 2 ] || { echo "hiredis1.sh: $pkg not in trixie" >&2; exit 1; }
    deb=debs/$(basename "$1")
    curl -fsS -o "$deb" "$mirror/$1"
    echo "$2  $deb" | sha256sum -c --quiet - ||
        { echo "hiredis1.sh: $deb does not match Packages" >&2; exit 1; }
    dpkg-deb -x "$deb" root
done

lib=$(dirname "$(find "$dir/root" -name 'libhiredis.so.1*' | head -1)")
version=$(sed -n 's/^Version: *//p' "$lib/pkgconfig/hiredis.pc")
# pc NAME LIBS [REQUIRES [PRIVATE]]: a .pc file for a library unpacked here.
pc() {
    {
        printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\n' "$dir/root/usr" "$lib" \
            "$dir/root/usr/include"
        printf 'Name: %s\nDescription: %s %s unpacked for CI\nVersion: %s\n' \
            "$1" "$1" "$version" "$version"
        [ -z "${3:-}" ] || printf 'Requires: %s\n' "$3"
        printf 'Libs: -L${libdir} %s\n' "$2"
        [ -z "${4:-}" ] || printf 'Libs.private: %s\n' "$4"
        printf 'Cflags: -I${includedir}\n'
    } > "pkgconfig/$1.pc"
}
pc hiredis -lhiredis
pc hiredis_ssl -lhiredis_ssl hiredis '-lssl -lcrypto'
echo "$lib"
