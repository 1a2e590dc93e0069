#!/bin/sh
#
# verify-cost.sh: what UCX_SYNCMEM_VERIFY=crc costs. ucx_perftest pairs
# (contrib/bench/perftest-pair.sh, pinned to CPUs 0 and 1) with VERIFY=none and
# crc, interleaved in one boot so that drift hits both alike. Run it where
# the device is, e.g. in the guest:
#
#   contrib/guest/guest.sh -- contrib/bench/verify-cost.sh [REPS]
#
# Prints one line per run: test, VERIFY value, ucx_perftest's Final: line.
#
top=$(cd "$(dirname "$0")/../.." && pwd)
case "$1" in -h|--help) sed -n '3,11s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run it through contrib/guest/guest.sh}
reps=${1:-3}

run() { # NAME VERIFY PERFTEST-ARGS...
    name=$1 verify=$2; shift 2
    out=$("$top/contrib/bench/perftest-pair.sh" --env UCX_SYNCMEM_VERIFY="$verify" \
          -- -x syncmem -d "$dev" "$@" 2>&1)
    echo "$name $verify $(echo "$out" | grep '^Final:')"
}

i=0
while [ $i -lt "$reps" ]; do
    for verify in none crc; do
        run am_lat_short  $verify -t am_lat  -D short -s 8     -n 2000 -w 100
        run am_bw_bcopy   $verify -t am_bw   -D bcopy -s 4096  -n 2000
        run am_bw_zcopy   $verify -t am_bw   -D zcopy -s 8188  -n 1000
        run put_lat_short $verify -t put_lat -D short -s 8     -n 2000 -w 100
        run put_bw_bcopy  $verify -t put_bw  -D bcopy -s 4096  -n 2000
        run put_bw_zcopy  $verify -t put_bw  -D zcopy -s 65536 -n 500
    done
    i=$((i + 1))
done
# SPDX-License-Identifier: BSD-3-Clause
