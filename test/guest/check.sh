#!/bin/sh
#
# syncmem-run --check on a healthy guest and on three broken ones: the
# netdev down, no IP address (no RoCE v2 GID but link-local), and a low
# memory lock limit. Each broken one must fail (exit 1) with the failing
# check named and one line of advice under every FAIL; the healthy one
# must pass (exit 0).
#
#   test/guest/check.sh [SYNCMEM-RUN]   (default: the build tree's)
#
# Needs the one-host guest (rxe0 on the dummy netdev syncmem0).
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
run=${1:-$top/contrib/tools/syncmem-run}
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run in the guest}
nd=${SYNCMEM_NETDEV0:?SYNCMEM_NETDEV0 is not set: run in the guest}
ip=${SYNCMEM_IP0:?}
failed=0

# expect NAME RC PATTERN...: run --check, want exit RC and each PATTERN
# (grep -E) in its output, and advice ("->") under every FAIL line
expect() {
    name=$1 want=$2; shift 2
    out=$("$run" --check "$dev" 2>&1); rc=$?
    echo "==== syncmem-run --check $dev: $name (exit $rc)"
    echo "$out"
    bad=
    [ "$rc" -eq "$want" ] || bad="exit $rc, not $want"
    for pat in "$@"; do
        echo "$out" | grep -Eq -- "$pat" || bad="$bad; no line matches '$pat'"
    done
    nfail=$(echo "$out" | grep -c '^  FAIL ')
    nadv=$(echo "$out" | grep -A1 '^  FAIL ' | grep -c '^        -> ')
    [ "$nfail" -eq "$nadv" ] || bad="$bad; $nfail FAIL lines but $nadv with advice"
    if [ -n "$bad" ]; then
        echo "FAIL check $name: ${bad#; }"; failed=1
    else
        echo "PASS check $name"
    fi
}

expect healthy 0 '^syncmem check: all [0-9]+ checks passed' \
    '^  ok    put: ' '^  ok    get: ' '^  ok    atomic: ' \
    '^  ok    registration: ' '^  ok    GID: RoCE v2 ' '^  ok    ulimit -l: unlimited'

ip link set "$nd" down; sleep 1
expect netdev-down 1 "^  FAIL  state: DOWN" "netdev $nd is down" \
    "-> bring it up: ip link set $nd up" '^  --    module, registration, loopback: not tried'
ip link set "$nd" up; sleep 1

ip addr flush dev "$nd"; sleep 1
expect no-gid 1 '^  FAIL  GID: no RoCE v2 GID with an IP address' \
    "-> give $nd an IP address"
ip addr add "$ip/24" dev "$nd"; sleep 1

# (a subshell: the limit stays there)
(ulimit -l 64 || exit 1
 expect low-memlock 1 '^  FAIL  ulimit -l: 64 KiB' \
     '^syncmem check: 1 of [0-9]+ checks failed'
 exit $failed) || failed=1

exit $failed
