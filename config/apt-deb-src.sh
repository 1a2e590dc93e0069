#!/bin/sh
#
# Let 'apt-get source' work: if apt has no deb-src entries, add them,
# derived from the deb entries (same mirrors and suites), and run
# apt-get update. Changes the system (/etc/apt/sources.list.d/syncmem-deb-src.*):
# run by contrib/bootstrap.sh and contrib/pkg/ucx-prefix.sh, which install
# packages anyway; never by configure (config/fetch-ucx-src.sh only says to).
# As root or through passwordless sudo. With --check, changes nothing: exits
# 0 if deb-src entries exist, 1 if not.
#
# usage: apt-deb-src.sh [--check]
#
case "$1" in
    -h|--help) sed -n '3,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
die() { echo "apt-deb-src.sh: $*" >&2; exit 1; }

have_deb_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if [ "$1" = --check ]; then have_deb_src; exit; fi
have_deb_src && exit 0

sudo=; [ "$(id -u)" = 0 ] || sudo="sudo -n"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
        $sudo tee /etc/apt/sources.list.d/syncmem-deb-src.sources >/dev/null ||
        die "cannot write /etc/apt/sources.list.d/syncmem-deb-src.sources (need root)"
elif [ -f /etc/apt/sources.list ]; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
        $sudo tee /etc/apt/sources.list.d/syncmem-deb-src.list >/dev/null ||
        die "cannot write /etc/apt/sources.list.d/syncmem-deb-src.list (need root)"
else
    die "no apt sources (/etc/apt/sources.list.d/debian.sources, /etc/apt/sources.list) to derive deb-src entries from"
fi
echo "apt-deb-src.sh: added deb-src entries; apt-get update" >&2
$sudo apt-get update -qq || die "apt-get update failed"
# SPDX-License-Identifier: BSD-3-Clause
