#!/bin/sh
# build-valkey-ifeq.sh - build a Valkey (or Redis) server that supports the
# one-command compare-and-set forms (SET ... IFEQ, DELIFEQ / DELEX ... IFEQ)
# from the *source* packages of a newer Debian suite, on Debian 12 (bookworm).
#
# Usage:  sh build-valkey-ifeq.sh [PREFIX]          (PREFIX default /opt/valkey-ifeq)
#
# Environment knobs (all optional):
#   SUITE=trixie     Debian suite whose Sources to use. trixie -> valkey 8.1.x
#                    (SET IFEQ only); forky/sid -> valkey 9.x (SET IFEQ + DELIFEQ).
#   PKG=valkey       source package: valkey, or redis (use SUITE=experimental for
#                    redis >= 8.4, which has SET IFEQ and DELEX).
#   VERSION=         exact Debian version to use (default: newest in SUITE).
#   JOBS=2           make -j value (the build always runs under nice -n 19).
#   MALLOC=libc      libc or jemalloc (bundled deps/jemalloc).
#   WORKDIR=/tmp/ifeq-build-$PKG-$SUITE   download/build directory (kept for reuse).
#   FORCE=1          rebuild/reinstall even if PREFIX already has this version.
#
# What it does (idempotent):
#   1. install build deps (build-essential pkg-config patch xz-utils), with
#      apt-get update first, only if some are missing.
#   2. Derive the Debian archive URI from this machine's apt sources
#      (/etc/apt/sources.list.d/*.sources deb822, fallback /etc/apt/sources.list).
#   3. Fetch the Sources index of SUITE with a *private* apt state
#      (under $WORKDIR/apt: nothing is written to /etc/apt or /var/lib/apt/lists),
#      which is verified against the archive keyring.
#   4. Download orig tarball (+ Debian tarball if available) with apt-helper,
#      checking the SHA256 from the signed index.
#   5. Unpack, apply Debian's upstream-code patches (CVE fixes etc.; the
#      debian-packaging/ patches are skipped), build only <pkg>-server and
#      <pkg>-cli with plain upstream make (BUILD_TLS=no USE_SYSTEMD=no), and
#      install both to PREFIX/bin.
set -eu

PREFIX=${1:-/opt/valkey-ifeq}
SUITE=${SUITE:-trixie}
PKG=${PKG:-valkey}
VERSION=${VERSION:-}
JOBS=${JOBS:-2}
MALLOC=${MALLOC:-libc}
WORKDIR=${WORKDIR:-/tmp/ifeq-build-$PKG-$SUITE}
FORCE=${FORCE:-0}
KEYRING=${KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

T0=$(date +%s)
log() { printf '[build-ifeq] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (needs apt-get)"
case $PKG in valkey|redis) ;; *) die "PKG must be valkey or redis" ;; esac

# ---------------------------------------------------------------- 1. build deps
# The machine's apt (update, install) only when something is missing, so
# that with the deps installed the script may run beside other apt users
# (CI runs it in the background; its own index below is private).
export DEBIAN_FRONTEND=noninteractive
missing=
for p in build-essential pkg-config patch xz-utils tar gzip ca-certificates debian-archive-keyring; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    log "apt-get update; installing:$missing"
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
fi

# ---------------------------------------------------- 2. archive URI from sources
# First URI of an enabled deb/deb-src entry that is not a security archive.
archive_uri() {
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk 'BEGIN { RS = ""; FS = "\n" }
        {
            types = ""; uris = ""; enabled = "yes"
            for (i = 1; i <= NF; i++) {
                l = $i
                if (l ~ /^#/) continue
                k = tolower(l); sub(/:.*/, "", k)
                v = l; sub(/^[^:]*:[ \t]*/, "", v)
                if (k == "types") types = v
                else if (k == "uris") uris = v
                else if (k == "enabled") enabled = tolower(v)
            }
            if (enabled == "no" || types !~ /deb/) next
            n = split(uris, u, /[ \t]+/)
            for (j = 1; j <= n; j++)
                if (u[j] ~ /^(https?|ftp):\/\// && u[j] !~ /security/) { print u[j]; exit }
        }' "$f"
    done
    if [ -r /etc/apt/sources.list ]; then
        awk '$1 == "deb" || $1 == "deb-src" {
                for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /=/ && $i !~ /\]$/) break
                if ($i ~ /^(https?|ftp):\/\// && $i !~ /security/) print $i
             }' /etc/apt/sources.list
    fi
}
URI=$(archive_uri | head -n 1)
[ -n "$URI" ] || die "no Debian archive URI found in apt sources"
URI=${URI%/}

# ------------------------------------------------- 3. private Sources index
APTD=$WORKDIR/apt
mkdir -p "$APTD/lists/partial" "$APTD/cache/archives/partial" "$WORKDIR/dl"
cat > "$APTD/src.sources" <<EOF
Types: deb-src
URIs: $URI
Suites: $SUITE
Components: main
Signed-By: $KEYRING
EOF
APTOPT="-o Dir::Etc::sourcelist=$APTD/src.sources -o Dir::Etc::sourceparts=$APTD/none.d \
 -o Dir::State::Lists=$APTD/lists -o Dir::Cache=$APTD/cache -o Dir::State::status=/dev/null \
 -o APT::Sandbox::User=root"
mkdir -p "$APTD/none.d"
log "fetching $SUITE Sources index (private apt state in $APTD)"
# shellcheck disable=SC2086
apt-get $APTOPT update > "$WORKDIR/apt-update.log" 2>&1 ||
    { cat "$WORKDIR/apt-update.log" >&2; die "apt-get update for suite $SUITE failed"; }
IDX_FETCHED=$(sed -n 's/^Fetched \([^ ]* [^ ]*\) .*/\1/p' "$WORKDIR/apt-update.log" | tail -n 1)

# shellcheck disable=SC2086
apt-cache $APTOPT showsrc --only-source "$PKG" > "$WORKDIR/showsrc.txt" 2>/dev/null || true
[ -s "$WORKDIR/showsrc.txt" ] || die "source package $PKG not found in $SUITE"

if [ -z "$VERSION" ]; then
    for v in $(awk '/^Version:/ { print $2 }' "$WORKDIR/showsrc.txt"); do
        if [ -z "$VERSION" ] || dpkg --compare-versions "$v" gt "$VERSION"; then VERSION=$v; fi
    done
fi
# record of the chosen version: "Directory" and "sha256 size name" lines
awk -v want="$VERSION" 'BEGIN { RS = ""; FS = "\n" }
    { ver = ""; dir = ""
      for (i = 1; i <= NF; i++) {
          if ($i ~ /^Version: /) ver = substr($i, 10)
          if ($i ~ /^Directory: /) dir = substr($i, 12)
      }
      if (ver != want) next
      print "DIR " dir
      ins = 0
      for (i = 1; i <= NF; i++) {
          if ($i ~ /^Checksums-Sha256:/) { ins = 1; continue }
          if (ins && $i ~ /^ /) { split($i, a, " "); print "FILE " a[1] " " a[2] " " a[3]; continue }
          ins = 0
      }
      exit }' "$WORKDIR/showsrc.txt" > "$WORKDIR/files.txt"
DIR=$(awk '$1 == "DIR" { print $2 }' "$WORKDIR/files.txt")
[ -n "$DIR" ] || die "version $VERSION of $PKG not in $SUITE"
UPVER=${VERSION#*:}; UPVER=${UPVER%-*}; UPVER=${UPVER%+dfsg*}
log "$PKG $VERSION from $SUITE (upstream $UPVER)"

# -------------------------------------------------- idempotency short-cut
if [ "$FORCE" != 1 ] && [ -x "$PREFIX/bin/$PKG-server" ] && [ -x "$PREFIX/bin/$PKG-cli" ] &&
   "$PREFIX/bin/$PKG-server" --version 2>/dev/null | grep -q "v=$UPVER " &&
   [ -f "$PREFIX/BUILD-INFO" ] && grep -qx "debian_version=$VERSION" "$PREFIX/BUILD-INFO"; then
    log "$PREFIX already has $PKG $VERSION; nothing to do (FORCE=1 to rebuild)"
    log "elapsed: $(( $(date +%s) - T0 )) s"
    exit 0
fi

# ---------------------------------------------------- 4. download (sha256-checked)
dl_bytes=0
ORIG=''; DEBTAR=''
while read -r tag sha size name; do
    [ "$tag" = FILE ] || continue
    case $name in
        *.dsc) continue ;;
        *.orig.tar.*) ORIG=$name ;;
        *.debian.tar.*) DEBTAR=$name ;;
        *) continue ;;
    esac
    out=$WORKDIR/dl/$name
    if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
        log "have $name"
    else
        rm -f "$out"
        qname=$(printf '%s' "$name" | sed 's/+/%2b/g')
        log "downloading $name ($size bytes)"
        if ! /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file \
                "$URI/$DIR/$qname" "$out" "SHA256:$sha" >/dev/null 2>"$WORKDIR/dl/$name.err"; then
            rm -f "$out"
            case $name in
                *.orig.tar.*) die "cannot download $name: $(tail -n 1 "$WORKDIR/dl/$name.err")" ;;
                *) log "WARNING: cannot download $name ($(tail -n 1 "$WORKDIR/dl/$name.err"));" \
                       "building the pristine upstream tarball WITHOUT Debian's patches"
                   DEBTAR=; continue ;;
            esac
        fi
        dl_bytes=$((dl_bytes + size))
    fi
done < "$WORKDIR/files.txt"
[ -n "$ORIG" ] || die "no orig tarball listed for $PKG $VERSION"

# ---------------------------------------------------------- 5. unpack + patch
SRC=$WORKDIR/src-$VERSION
STAMP=$SRC/.ifeq-built-$MALLOC
if [ ! -f "$SRC/.ifeq-unpacked" ]; then
    rm -rf "$SRC"; mkdir -p "$SRC"
    tar -xf "$WORKDIR/dl/$ORIG" -C "$SRC" --strip-components=1
    applied=0
    if [ -n "$DEBTAR" ]; then
        mkdir -p "$SRC/.debian"
        tar -xf "$WORKDIR/dl/$DEBTAR" -C "$SRC/.debian"
        series=$SRC/.debian/debian/patches/series
        if [ -f "$series" ]; then
            # upstream-code patches only: skip Debian packaging defaults
            for p in $(sed -e 's/#.*//' "$series"); do
                case $p in debian-packaging/*) continue ;; esac
                log "patch $p"
                (cd "$SRC" && patch -p1 -s -N < ".debian/debian/patches/$p") || die "patch $p failed"
                applied=$((applied + 1))
            done
        fi
    fi
    echo "$applied" > "$SRC/.ifeq-unpacked"
fi
PATCHES=$(cat "$SRC/.ifeq-unpacked")

# ---------------------------------------------------------------- 6. build
if [ ! -f "$STAMP" ]; then
    log "building $PKG-server $PKG-cli (nice -n 19 make -j$JOBS MALLOC=$MALLOC BUILD_TLS=no)"
    B0=$(date +%s)
    (cd "$SRC/src" && nice -n 19 make -j"$JOBS" BUILD_TLS=no USE_SYSTEMD=no MALLOC="$MALLOC" \
        "$PKG-server" "$PKG-cli" > "$WORKDIR/build.log" 2>&1) ||
        { tail -n 30 "$WORKDIR/build.log" >&2; die "build failed (log: $WORKDIR/build.log)"; }
    echo "build_seconds=$(( $(date +%s) - B0 ))" > "$STAMP"
fi
BUILD_S=$(sed -n 's/^build_seconds=//p' "$STAMP")

# -------------------------------------------------------------- 7. install
mkdir -p "$PREFIX/bin"
for b in "$PKG-server" "$PKG-cli"; do
    install -m 0755 "$SRC/src/$b" "$PREFIX/bin/$b.new"
    mv -f "$PREFIX/bin/$b.new" "$PREFIX/bin/$b"
done
cat > "$PREFIX/BUILD-INFO" <<EOF
package=$PKG
debian_version=$VERSION
suite=$SUITE
debian_patches_applied=$PATCHES
malloc=$MALLOC
build_tls=no
build_seconds=$BUILD_S
EOF

"$PREFIX/bin/$PKG-server" --version
log "installed $PREFIX/bin/$PKG-server $PREFIX/bin/$PKG-cli ($PATCHES Debian patches applied)"
log "downloaded this run: $dl_bytes bytes of source files + ${IDX_FETCHED:-0 B} of $SUITE index (InRelease + Sources)"
log "build: ${BUILD_S}s wall (nice 19, -j$JOBS); total elapsed: $(( $(date +%s) - T0 )) s"
