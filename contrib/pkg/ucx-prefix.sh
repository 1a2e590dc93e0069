#!/bin/sh
#
# ucx-prefix.sh: build Debian's UCX into a prefix of its own (cached).
#
#   contrib/pkg/ucx-prefix.sh [--cache DIR] [--rebuild]
#
# Builds the Debian source package of exactly the installed libucx-dev
# version (fetched with config/fetch-ucx-src.sh, Debian's patches applied)
# into DIR/ucx-VERSION-HASH/prefix, with the source tree kept beside it in
# DIR/ucx-VERSION-HASH/src. HASH is a short hash of the Debian version and
# the configure arguments. DIR is $SYNCMEM_CACHE, or /var/cache/syncmem:
# outside the clone, so that CI's fresh clones reuse it. A cached prefix is
# used only if its stamp (written last) matches and its bin/ucx_info reports
# the version; otherwise it is built again. Prints the prefix on stdout:
#
#   prefix=$(contrib/pkg/ucx-prefix.sh)
#   contrib/bootstrap.sh --with-ucx="$prefix" --with-ucx-src="$prefix/../src"
#
# The build follows debian/rules' configure flags, limited to what syncmem's
# tests need: verbs and CMA, shared libraries only; no mlx5 DV, rdmacm,
# CUDA, ROCm, Java, Go, docs.
#
#   --cache DIR   cache directory (default: $SYNCMEM_CACHE or /var/cache/syncmem)
#   --rebuild     build again even if the cached prefix is good
#   -h, --help    this text
#
# SPDX-License-Identifier: BSD-3-Clause
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SYNCMEM_CACHE:-/var/cache/syncmem}
rebuild=no

say() { echo "ucx-prefix: $*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n '3,25s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --cache) cache=${2:?--cache needs a directory}; shift ;;
        --rebuild) rebuild=yes ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

# Build dependencies (Debian's Build-Depends, limited as above).
pkgs="libucx-dev dpkg-dev autoconf automake libtool pkg-config make gcc g++
      libibverbs-dev libnuma-dev"
"$top/config/apt-install.sh" $pkgs || die "missing build dependencies"
"$top/config/apt-deb-src.sh" || die "apt-get source needs deb-src entries (see above)"

debver=$(dpkg-query -W -f '${Version}' libucx-dev) ||
    die "cannot read the installed libucx-dev version"
version=$("$top/contrib/pkg/ucx-version.sh" --deb "$debver") ||
    die "cannot read a UCX release from libucx-dev's version '$debver'"

# Debian's flags (debian/rules), minus what the tests do not use.
args="--enable-mt --with-verbs --disable-backtrace-detail --disable-logging
 --enable-devel-headers --enable-cma --enable-numa --without-mlx5-dv
 --without-rdmacm --without-fuse3 --without-java --without-go --without-cuda
 --without-rocm --without-gdrcopy --without-knem --without-xpmem --without-ugni
 --without-valgrind --without-bfd --disable-doxygen-doc
 --disable-static --disable-dependency-tracking CFLAGS=-g\ -O2 CXXFLAGS=-g\ -O2"
args=$(printf '%s' "$args" | tr '\n' ' ')
hash=$(printf '%s\n%s\n' "$debver" "$args" | sha256sum | cut -c1-8)

mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] ||
    die "cannot write to the cache directory $cache; set SYNCMEM_CACHE or pass --cache DIR"
cache=$(cd "$cache" && pwd)
dir=$cache/ucx-$version-$hash
prefix=$dir/prefix
src=$dir/src
stamp=$dir/stamp
want=$(printf 'ucx %s\n%s\n' "$debver" "$args")

# One build at a time per cache entry; the others wait and reuse it.
exec 9>"$dir.lock"
flock 9

good() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
        [ -x "$prefix/bin/ucx_info" ] && [ -f "$src/src/uct/base/uct_iface.h" ] &&
        [ "$("$prefix/bin/ucx_info" -v 2>/dev/null | "$top/contrib/pkg/ucx-version.sh")" = "$version" ]
}

if [ "$rebuild" = no ] && good; then
    say "using cached UCX $debver in $prefix"
    echo "$prefix"
    exit 0
fi
[ -e "$dir" ] && say "cached $dir is missing, incomplete or broken: building again"
rm -rf "$dir"
mkdir -p "$dir"
start=$(date +%s)

say "fetching the Debian source package of UCX $debver into $src"
"$top/config/fetch-ucx-src.sh" "$version" "$src" >&2 ||
    die "could not fetch UCX $debver's source (see above)"

# Generated files go into the tree (Debian's build does the same, with
# dh_autoreconf); objects go into a separate build directory.
say "autogen"
(cd "$src" && ./autogen.sh >"$dir/autogen.log" 2>&1) ||
    { tail -30 "$dir/autogen.log" >&2; die "UCX autogen.sh failed (log: $dir/autogen.log)"; }
mkdir -p "$dir/build"
say "configure --prefix=$prefix $args"
(cd "$dir/build" && eval "\"$src/configure\" --prefix=\"$prefix\" $args" \
    >"$dir/configure.log" 2>&1) ||
    { tail -30 "$dir/configure.log" >&2; die "UCX configure failed (log: $dir/configure.log, $dir/build/config.log)"; }
jobs=$(nproc); [ "$jobs" -gt 2 ] && jobs=2
say "make -j$jobs (log: $dir/make.log)"
(cd "$dir/build" && nice make -j"$jobs" >"$dir/make.log" 2>&1 &&
    make install >>"$dir/make.log" 2>&1) ||
    { tail -40 "$dir/make.log" >&2; die "UCX build failed (log: $dir/make.log)"; }
rm -rf "$dir/build"

got=$("$prefix/bin/ucx_info" -v 2>/dev/null | "$top/contrib/pkg/ucx-version.sh")
[ "$got" = "$version" ] ||
    die "$prefix/bin/ucx_info -v reports '$got', expected $version"
for f in libucs.so libuct.so pkgconfig/ucx-uct.pc pkgconfig/ucx-ucs.pc ucx/libuct_ib.so; do
    [ -e "$prefix/lib/$f" ] || die "the build installed no $prefix/lib/$f"
done
echo "$want" >"$stamp"
say "built UCX $debver in $prefix in $(( $(date +%s) - start )) s"
echo "$prefix"
