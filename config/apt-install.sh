#!/bin/sh
#
# Install those of the given Debian packages that are missing (apt-get, as
# root or through passwordless sudo). Used by contrib/bootstrap.sh and
# contrib/pkg/ucx-prefix.sh.
#
# usage: apt-install.sh PACKAGE...
#
# SPDX-License-Identifier: BSD-3-Clause
case "$1" in
    -h|--help|"") sed -n '3,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
missing=
for p in "$@"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
[ -n "$missing" ] || exit 0
echo "apt-install.sh: installing$missing" >&2
sudo=; [ "$(id -u)" = 0 ] || sudo="sudo -n"
{ $sudo apt-get update -qq &&
  $sudo env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends $missing >/dev/null; } || {
    echo "apt-install.sh: could not install$missing; install them and run again" >&2
    exit 1; }
