#!/bin/sh
#
# check-example.sh: the README's 'syncmem-run --check' example, from a real
# run. Boots the one-host guest, takes rxe0's netdev down, runs the check
# (which must fail: exit 1), and writes its output, the lines that passed
# on the port left out, into FILE's 'check example' block
# (contrib/bench/tables.py check): bench-results/check.out, check.meta.
#
#   contrib/bench/check-example.sh [--markdown FILE]...   (default README.md)
#
# SPDX-License-Identifier: BSD-3-Clause
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/bench-results

if [ "${1:-}" = --in-guest ]; then
    dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run in the guest}
    nd=${SYNCMEM_NETDEV0:?SYNCMEM_NETDEV0 is not set: run in the guest}
    ip link set "$nd" down; sleep 1
    rc=0
    "$top/contrib/tools/syncmem-run" --check "$dev" >"$out/check.out" 2>&1 || rc=$?
    ip link set "$nd" up
    if [ $rc -ne 1 ]; then
        cat "$out/check.out"
        echo "check-example.sh: --check exited $rc with $nd down, not 1" >&2
        exit 1
    fi
    { echo "date=$(date -u '+%F %H:%M UTC')"
      echo "kernel=$(uname -r)"
      echo "ucx=$(ucx_info -v | "$top/contrib/pkg/ucx-version.sh")"
      echo "commit=$("$top/contrib/tools/commit-stamp.sh")"
    } >"$out/check.meta"
    exit 0
fi

case "${1:-}" in -h|--help) sed -n '3,9s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
files=
while [ $# -gt 0 ]; do
    case $1 in
        --markdown) files="$files --markdown ${2:?--markdown FILE}"; shift 2 ;;
        *) echo "check-example.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$files" ] || files="--markdown $top/README.md"
mkdir -p "$out"
rm -f "$out/check.out" "$out/check.meta"
cd "$top"
contrib/guest/guest.sh -- "$top/contrib/bench/check-example.sh" --in-guest
# shellcheck disable=SC2086 # (files: words)
python3 "$top/contrib/bench/tables.py" check "$out" $files
