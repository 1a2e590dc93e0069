#!/usr/bin/env bash
# debian-root.sh - a Debian 13 (trixie) root with its own UCX, for tests that
# load a module built here (against Debian 12's UCX 1.13) into another UCX
# release (test/guard.test: the module's version guard), and for building
# and running the whole suite, MPI included, on its UCX (ucx-matrix.sh).
#
# The root is made with mmdebstrap from the Debian mirror this host's apt
# uses, and cached under $SYNCMEM_GUEST_CACHE (default <repo>/.guest-cache)
# as debian13-<key>, where <key> covers the suite and the package list.  A
# cached root is used only if its stamp (written last) matches and
# 'chroot ROOT ucx_info -v' works; otherwise it is built again.  Prints the
# root's path on stdout.  See --help.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail

prog=debian-root.sh
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

suite=trixie
# UCX and its verbs transports, what our configure needs to run there, and
# the MPIs linked to that UCX (Open MPI: pml/osc ucx and OSHMEM; MPICH),
# /usr/bin/time (contrib/bench/perftest-pair.sh), ip, tc and tcpdump (the wire
# tests) for ucx-matrix.sh --root.
packages=(libucx0 ucx-utils libucx-dev rdma-core ibverbs-providers
          ibverbs-utils libibverbs-dev gcc g++ make pkg-config dpkg-dev
          openmpi-bin libopenmpi-dev mpich libmpich-dev time iproute2 tcpdump)
# Bump when the way the root is made changes (part of the key).
format=1

usage() {
    cat <<EOF
usage: contrib/guest/debian-root.sh [options]

Make (or check) a Debian 13 ($suite) root containing:
  ${packages[*]}
and print its path.  Needs root (mmdebstrap, chroot); installs mmdebstrap
with apt-get if it is missing.

options:
  --cache DIR   cache directory (default \$SYNCMEM_GUEST_CACHE or
                <repo>/.guest-cache); the root is DIR/debian13-<key>
  --rebuild     build the root again even if the cached one is good
  --check       only check the cached root: exit 0 and print its path if it
                is good, 1 if it is missing or broken (builds nothing)
  -h, --help    this text

environment:
  SYNCMEM_DEBIAN_MIRROR   the mirror (default: the first non-security URI
                          of /etc/apt/sources.list.d/debian.sources, or the
                          first 'deb' line of /etc/apt/sources.list)
EOF
}

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 1; }

cache=${SYNCMEM_GUEST_CACHE:-$repo_root/.guest-cache}
rebuild=0 check=0
while (($#)); do
    case $1 in
        --cache) cache=${2:?--cache needs a directory}; shift ;;
        --rebuild) rebuild=1 ;;
        --check) check=1 ;;
        -h|--help) usage; exit 0 ;;
        *) say "unknown option '$1'"; usage >&2; exit 2 ;;
    esac
    shift
done

[[ $EUID == 0 ]] || die "must run as root (mmdebstrap and chroot need it); try: sudo $0"

key=$(printf '%s\n' "$format" "$suite" "${packages[@]}" | md5sum | cut -c1-10)
mkdir -p "$cache" || die "cannot create the cache directory $cache"
cache=$(cd "$cache" && pwd)
root=$cache/debian13-$key
stamp=$root/.syncmem-root-stamp

# good ROOT: the stamp says this key, and UCX runs in it.
good() {
    [[ -f $stamp ]] && grep -qx "key=$key" "$stamp" &&
        chroot "$1" ucx_info -v >/dev/null 2>&1
}

# Is anything mounted at or below DIR?  (Never delete a root with the build
# tree or /dev bind-mounted into it.)
mounted_below() {
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 {found=1} END {exit !found}' \
        /proc/self/mounts
}

remove_root() {
    local d=$1
    [[ -e $d ]] || return 0
    mounted_below "$d" &&
        die "something is still mounted below $d (see /proc/mounts); unmount it, then run again"
    rm -rf --one-file-system "$d" || die "cannot remove $d"
}

if ((check)); then
    good "$root" || { say "no good root at $root"; exit 1; }
    echo "$root"; exit 0
fi

# One builder at a time; the others wait, then find the root built.
exec 8>"$cache/.debian13.lock"
flock 8

if ((!rebuild)) && good "$root"; then
    echo "$root"; exit 0
fi

# --- the mirror ---------------------------------------------------------------
mirror=${SYNCMEM_DEBIAN_MIRROR:-}
if [[ -z $mirror && -f /etc/apt/sources.list.d/debian.sources ]]; then
    mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' \
        /etc/apt/sources.list.d/debian.sources)
fi
if [[ -z $mirror && -f /etc/apt/sources.list ]]; then
    mirror=$(awk '$1 == "deb" && $0 !~ /security/ {
        for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
        /etc/apt/sources.list)
fi
[[ -n $mirror ]] ||
    die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list; set SYNCMEM_DEBIAN_MIRROR=URL"

# --- mmdebstrap ---------------------------------------------------------------
if ! command -v mmdebstrap >/dev/null; then
    say "installing mmdebstrap"
    { apt-get update -q >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
          --no-install-recommends mmdebstrap >&2; } ||
        die "could not install mmdebstrap (apt-get install mmdebstrap failed); install it, then run again"
fi

# --- build --------------------------------------------------------------------
remove_root "$root"
tmp=$cache/.debian13-$key.tmp
remove_root "$tmp"
trap 'mounted_below "$tmp" || rm -rf --one-file-system "$tmp"' EXIT
say "building a Debian 13 ($suite) root from $mirror into $root (a few minutes)"
t0=$(date +%s)
# --variant=apt: Essential packages and apt, then ours with their
# dependencies.  Documentation and locales are left out (about a third of
# the size); copyright files stay.
if ! mmdebstrap --variant=apt --mode=root --format=directory \
        --include="$(IFS=,; echo "${packages[*]}")" \
        --aptopt='Acquire::Check-Valid-Until "false"' \
        --aptopt='Acquire::Check-Date "false"' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        "$suite" "$tmp" "$mirror" >&2; then
    die "mmdebstrap failed to build the $suite root from $mirror (is the mirror reachable, and does it carry $suite?); see its messages above"
fi
ucxver=$(chroot "$tmp" ucx_info -v 2>&1) ||
    die "ucx_info does not run in the new root: $ucxver"
ucxver=$(printf '%s\n' "$ucxver" | sed -n 's/.*Library version: *//p')
debver=$(chroot "$tmp" dpkg-query -W -f '${Version}' libucx0)
mv "$tmp" "$root"
trap - EXIT
# The stamp is written last: a root without it is half made.
printf '%s\n' "key=$key" "suite=$suite" "mirror=$mirror" \
    "packages=${packages[*]}" "ucx=$ucxver" "libucx0=$debver" \
    "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$stamp.tmp"
mv "$stamp.tmp" "$stamp"
say "built in $(($(date +%s) - t0)) s: UCX $ucxver (libucx0 $debver), $(du -sh --one-file-system "$root" | cut -f1)"
good "$root" || die "the new root at $root fails its own check (chroot $root ucx_info -v)"
echo "$root"
