#!/bin/sh
# hiredis1.sh DIR - unpack Debian trixie's hiredis 1.x (libhiredis-dev and
# its runtime library) into DIR, without installing it, and write
# DIR/pkgconfig/hiredis.pc pointing there.  CI builds and tests redislock
# against it, since Debian 12 itself ships hiredis 0.14.1.
set -eu
dir=$1
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$dir/debs" "$dir/root" "$dir/pkgconfig"
curl -fsS -o "$dir/Packages.xz" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
for pkg in libhiredis-dev libhiredis1.1.0; do
    file=$(xz -dc "$dir/Packages.xz" | awk -v p="$pkg" '
        $0 == "Package: " p { hit = 1; next }
        /^Package: / { hit = 0 }
        hit && /^Filename: / { print $2; exit }')
    [ -n "$file" ] || { echo "hiredis1.sh: $pkg not in trixie" >&2; exit 1; }
    curl -fsS -o "$dir/debs/$(basename "$file")" "$mirror/$file"
    dpkg-deb -x "$dir/debs/$(basename "$file")" "$dir/root"
done
lib=$(dirname "$(find "$dir/root" -name 'libhiredis.so.1*' | head -1)")
version=$(sed -n 's/^Version: *//p' "$lib/pkgconfig/hiredis.pc")
cat > "$dir/pkgconfig/hiredis.pc" <<PC
prefix=$dir/root/usr
libdir=$lib
includedir=$dir/root/usr/include

Name: hiredis
Description: hiredis $version unpacked for CI
Version: $version
Libs: -L\${libdir} -lhiredis
Cflags: -I\${includedir}
PC
echo "$lib"
