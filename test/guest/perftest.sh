#!/bin/sh
#
# ucx_perftest over syncmem, UCT level: every RMA and AM test runs to
# completion with a server and a client process. Exits non-zero if any
# fails, printing both sides' output.
#
top=$(cd "$(dirname "$0")/../.." && pwd)
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
failed=0

pair() {
    name=$1; shift
    if out=$("$top/contrib/perftest-pair.sh" -- -x syncmem -d "$dev" "$@" 2>&1); then
        echo "PASS perftest $name: $(echo "$out" | grep '^Final:')"
    else
        echo "FAIL perftest $name"; echo "$out"
        failed=1
    fi
}

pair put_lat_short   -t put_lat -D short -s 8     -n 2000 -w 100
pair put_bw_short    -t put_bw  -D short -s 64    -n 5000
pair put_bw_bcopy    -t put_bw  -D bcopy -s 4096  -n 2000
pair put_bw_zcopy    -t put_bw  -D zcopy -s 65536 -n 500
pair get_bcopy       -t get     -D bcopy -s 4096  -n 2000
pair get_zcopy       -t get     -D zcopy -s 65536 -n 500
pair am_lat_short    -t am_lat  -D short -s 8     -n 2000 -w 100
pair am_bw_bcopy     -t am_bw   -D bcopy -s 4096  -n 2000
pair am_bw_zcopy     -t am_bw   -D zcopy -s 8192  -n 1000
exit $failed
