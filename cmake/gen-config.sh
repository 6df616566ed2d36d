#!/bin/sh
# gen-config.sh - fill in cmake/redislockConfig.cmake.in at make time.
#
# Usage: gen-config.sh TEMPLATE LIBTOOL-LIBRARY NAME=VALUE... > OUTPUT
#
# Replaces each @NAME@ of TEMPLATE with VALUE (the Makefile passes the
# installation directories here, not through configure, so that they are
# fully expanded: ${exec_prefix} and the like mean nothing to CMake), and
# three names with what libtool built, read from LIBTOOL-LIBRARY (the .la):
#     @shared_library@  the real file, e.g. libredislock.so.0.0.0 ("" if none)
#     @soname@          e.g. libredislock.so.0 ("" if no shared library)
#     @static_library@  libredislock.a ("" with --disable-static)
# Values are escaped for a quoted CMake argument.  A placeholder left over
# is an error, so the template and the Makefile rule cannot drift apart.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 TEMPLATE LIBTOOL-LIBRARY NAME=VALUE..." >&2
    exit 2
fi
template=$1
la=$2
shift 2

# A variable of the .la file (shell syntax: name='value').
la_var() {
    sed -n "s/^$1='\(.*\)'\$/\1/p" "$la"
}
[ -f "$la" ] || { echo "$0: $la: no such file" >&2; exit 1; }
dlname=$(la_var dlname)
library_names=$(la_var library_names)
old_library=$(la_var old_library)
case $dlname in
    */*) echo "$0: $la: dlname '$dlname' is not in libdir (a DLL?): not supported" >&2
         exit 1 ;;
esac
if [ -n "$dlname" ]; then
    # library_names lists the real file first, then its links.
    set -- "shared_library=${library_names%% *}" "soname=$dlname" "$@"
else
    set -- "shared_library=" "soname=" "$@"
fi
set -- "static_library=$old_library" "$@"
if [ -z "$dlname" ] && [ -z "$old_library" ]; then
    echo "$0: $la: neither a shared nor a static library" >&2
    exit 1
fi

# One sed expression per NAME=VALUE: VALUE escaped for a quoted CMake
# argument (\ " $), then for a sed replacement (\ & and the delimiter |).
script=
for arg in "$@"; do
    name=${arg%%=*}
    value=${arg#*=}
    case $name in
        ''|*[!A-Za-z0-9_]*) echo "$0: bad NAME=VALUE: $arg" >&2; exit 2 ;;
    esac
    value=$(printf '%s\n' "$value" |
            sed -e 's/[\\"$]/\\&/g' -e 's/[\\&|]/\\&/g')
    script="$script
s|@$name@|$value|g"
done

out=$(sed -e "$script" "$template")
left=$(printf '%s\n' "$out" | grep -n '@[A-Za-z_][A-Za-z0-9_]*@' || true)
if [ -n "$left" ]; then
    echo "$0: placeholders left in the output of $template:" >&2
    printf '%s\n' "$left" >&2
    exit 1
fi
printf '%s\n' "$out"
