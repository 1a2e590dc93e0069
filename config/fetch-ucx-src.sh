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

# Run by configure, this changes nothing outside the tree: the deb-src
# entries and dpkg-dev are set up by contrib/bootstrap.sh.
here=$(cd "$(dirname "$0")" && pwd)
grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/ ||
    die "apt has no deb-src entries, which 'apt-get source' needs. Run '$here/../contrib/bootstrap.sh' (installs the build dependencies and adds them), or only '$here/apt-deb-src.sh' (as root: adds deb-src entries for the mirrors of the deb ones and runs apt-get update); then run configure again"
command -v dpkg-source >/dev/null 2>&1 ||
    die "dpkg-source not found (unpacks the source package): apt-get install dpkg-dev, or run contrib/bootstrap.sh"

tmp=$(mktemp -d "${dest%/*}/.ucx-src.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The source package's version: a binary rebuild (1.18.1+ds-2+b1) has none.
srcver=$(dpkg-query -W -f '${source:Version}' libucx-dev 2>/dev/null) ||
    srcver=$debver
(cd "$tmp" && apt-get source -qq "ucx=$srcver" >/dev/null 2>"$tmp/log") || {
    cat "$tmp/log" >&2
    if grep -qiE "deb-src|Unable to find a source package" "$tmp/log"; then
        die "apt does not know the source package ucx $srcver: the deb-src entries were added but apt's lists are older (as root: apt-get update)"
    fi
    if grep -q '404' "$tmp/log"; then
        die "Debian's source package ucx $srcver is not served by this mirror ('apt-get source' failed: 404 Not Found)"
    fi
    die "'apt-get source ucx=$srcver' failed"; }
# (a repacked upstream tarball unpacks to ucx-1.18.1+ds)
srcdir=$(cd "$tmp" && ls -d "ucx-$version" "ucx-$version"+* 2>/dev/null | head -1)
[ -n "$srcdir" ] || die "source package did not unpack to ucx-$version"
mv "$tmp/$srcdir" "$dest"
echo "fetch-ucx-src.sh: UCX $debver source in $dest"
# SPDX-License-Identifier: BSD-3-Clause
