#!/bin/sh
#
# package.sh: build the Debian package from a clean clone of HEAD.
#
#   contrib/pkg/package.sh [--out DIR] [--ucx-src DIR]
#
# Clones HEAD (committed files only) into DIR/syncmem (default DIR:
# build-deb/, removed first), runs 'dpkg-buildpackage -b -us -uc' there
# and lintian on the result (failing on errors and warnings not overridden
# in debian/*.lintian-overrides), and prints the path of the .deb. The
# build fetches UCX's source package as configure does (network and
# deb-src); --ucx-src DIR passes an unpacked tree of the installed UCX
# version instead (SYNCMEM_UCX_SRC, see debian/rules). Installs the build
# dependencies that are missing (debian/control), as root.
#
set -e
cd "$(dirname "$0")/../.."
out=build-deb ucx_src=
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n '3,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --out) out=${2:?}; shift ;;
        --ucx-src) ucx_src=$(cd "${2:?}" && pwd); shift ;;
        *) echo "package.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# Build-Depends, and the tools to build and check a package
deps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' debian/control |
       sed '1s/^Build-Depends://; /^[A-Z]/d; s/([^)]*)//g; s/,/ /g' |
       tr ' ' '\n' | grep -v '^debhelper-compat$' | tr '\n' ' ')  # (debhelper's)
config/apt-install.sh $deps dpkg-dev debhelper fakeroot lintian >&2

rm -rf "$out"
mkdir -p "$out"
git clone -q . "$out/syncmem"
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
    echo "package.sh: note: packaging HEAD ($(git rev-parse --short HEAD)); uncommitted changes are not in it" >&2
(cd "$out/syncmem" &&
    SYNCMEM_UCX_SRC=$ucx_src dpkg-buildpackage -b -us -uc >&2)
changes=$(ls "$out"/*.changes)
lintian --fail-on error,warning "$changes" >&2
ls "$out"/uct-syncmem_*.deb
# SPDX-License-Identifier: BSD-3-Clause
