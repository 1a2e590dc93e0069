#!/bin/sh
#
# ucx_perftest over syncmem, UCT level: every RMA test runs to completion
# with a server and a client process, pinned to different CPUs (two
# busy-polling peers on one vCPU crawl). Exits non-zero on the first
# failure, printing both sides' output.
#
top=$(cd "$(dirname "$0")/../.." && pwd)
run="$top/contrib/syncmem-run"
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

pair() {
    name=$1; shift
    timeout 120 "$run" ucx_perftest -x syncmem -d "$dev" -c 0 "$@" \
        > "$tmp/server" 2>&1 &
    server=$!
    sleep 1
    timeout 110 "$run" ucx_perftest 127.0.0.1 -x syncmem -d "$dev" -c 1 "$@" \
        > "$tmp/client" 2>&1
    crc=$?
    wait $server
    src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q '^Final:' "$tmp/client"; then
        echo "PASS perftest $name: $(grep '^Final:' "$tmp/client")"
    else
        echo "FAIL perftest $name (client $crc, server $src)"
        echo "--- client"; cat "$tmp/client"; echo "--- server"; cat "$tmp/server"
        failed=1
    fi
}

pair put_lat_short   -t put_lat -D short -s 8     -n 2000 -w 100
pair put_bw_short    -t put_bw  -D short -s 64    -n 5000
pair put_bw_bcopy    -t put_bw  -D bcopy -s 4096  -n 2000
pair put_bw_zcopy    -t put_bw  -D zcopy -s 65536 -n 500
pair get_bcopy       -t get     -D bcopy -s 4096  -n 2000
pair get_zcopy       -t get     -D zcopy -s 65536 -n 500
exit $failed
