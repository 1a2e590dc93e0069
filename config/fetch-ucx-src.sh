#!/bin/sh
#
# Fetch the Debian source package of the installed UCX into DESTDIR.
#
# The plugin needs UCX's internal headers (uct/base/*.h, ucs/...), which the
# binary packages do not ship. Debian's source package of exactly the
# installed version, with Debian's patches applied, is the tree those
# binaries were built from.
#
# usage: fetch-ucx-src.sh VERSION DESTDIR
#   VERSION  upstream version of the installed UCX, e.g. 1.13.1
#   DESTDIR  where the unpacked tree goes (must not exist yet)
#
set -e
case "$1" in
    -h|--help) sed -n '3,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
version=${1:?usage: fetch-ucx-src.sh VERSION DESTDIR}
dest=${2:?usage: fetch-ucx-src.sh VERSION DESTDIR}

die() {
    echo "fetch-ucx-src.sh: $*" >&2
    echo "fetch-ucx-src.sh: either unpack UCX $version's source yourself and pass --with-ucx-src=DIR to configure, or build against a UCX installed in its own prefix with --with-ucx=PREFIX --with-ucx-src=DIR (its source tree)" >&2
    exit 1
}

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: not a Debian-like system"
debver=$(dpkg-query -W -f '${Version}' libucx-dev 2>/dev/null) ||
    die "libucx-dev is not installed (apt-get install libucx-dev)"
case "$debver" in
    "$version"-*|"$version"+*|"$version") ;;
    *) die "installed libucx-dev is $debver, expected UCX $version" ;;
esac

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@" ||
        die "need root to run '$*'"; fi
}

# 'apt-get source' needs deb-src entries; derive them from the deb entries.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
            as_root tee /etc/apt/sources.list.d/syncmem-deb-src.sources >/dev/null
    elif [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
            as_root tee /etc/apt/sources.list.d/syncmem-deb-src.list >/dev/null
    else
        die "no apt sources found to derive deb-src entries from"
    fi
    as_root apt-get update -qq || die "apt-get update failed"
fi
command -v dpkg-source >/dev/null 2>&1 ||
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >/dev/null ||
    die "cannot install dpkg-dev (needed to unpack the source package)"

tmp=$(mktemp -d "${dest%/*}/.ucx-src.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The source package's version: a binary rebuild (1.18.1+ds-2+b1) has none.
srcver=$(dpkg-query -W -f '${source:Version}' libucx-dev 2>/dev/null) ||
    srcver=$debver
(cd "$tmp" && apt-get source -qq "ucx=$srcver" >/dev/null 2>"$tmp/log") || {
    cat "$tmp/log" >&2
    if grep -q '404' "$tmp/log"; then
        die "Debian's source package ucx $srcver is not served by this mirror ('apt-get source' failed: 404 Not Found)"
    fi
    die "'apt-get source ucx=$srcver' failed"; }
# (a repacked upstream tarball unpacks to ucx-1.18.1+ds)
srcdir=$(cd "$tmp" && ls -d "ucx-$version" "ucx-$version"+* 2>/dev/null | head -1)
[ -n "$srcdir" ] || die "source package did not unpack to ucx-$version"
mv "$tmp/$srcdir" "$dest"
echo "fetch-ucx-src.sh: UCX $debver source in $dest"
