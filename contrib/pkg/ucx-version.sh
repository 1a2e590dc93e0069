#!/bin/sh
#
# ucx-version.sh: the UCX release (X.Y.Z) in what UCX or Debian reports.
#
#   ucx_info -v | contrib/pkg/ucx-version.sh
#       UCX 1.13 prints '# Version 1.13.1', 1.14 and later
#       '# Library version: 1.14.1'; both are read.
#   contrib/pkg/ucx-version.sh --deb 1:1.18.1+ds-2+b1
#       a Debian package version: epoch, revision and '+ds'/'~rc'
#       suffixes of the upstream part are dropped.
#
# Prints X.Y.Z; exits 1, saying what it was given, if there is none.
#
case "$1" in
    -h|--help) sed -n '3,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
if [ "$1" = --deb ]; then
    v=${2#*:}
    case "$v" in *-*) v=${v%-*} ;; esac
    v=$(printf '%s\n' "$v" | sed -n 's/^\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\([+~].*\)\{0,1\}$/\1/p')
    what="Debian version '$2'"
else
    in=$(cat)
    v=$(printf '%s\n' "$in" |
        sed -n 's/^# \(Library version:\|Version\) *\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\).*/\2/p' |
        head -1)
    what="ucx_info -v output starting '$(printf '%s\n' "$in" | head -1)'"
fi
if [ -z "$v" ]; then
    echo "ucx-version.sh: no UCX version X.Y.Z in the $what" >&2
    exit 1
fi
echo "$v"
# SPDX-License-Identifier: BSD-3-Clause
