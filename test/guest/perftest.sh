#!/bin/sh
#
# ucx_perftest over syncmem, UCT level: every RMA and AM test runs to
# completion with a server and a client process. Exits non-zero if any
# fails, printing both sides' output.
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
failed=0

# pair NAME [--env VAR=VALUE]... -- PERFTEST-ARGS
pair() {
    name=$1; shift
    if out=$("$top/contrib/bench/perftest-pair.sh" "$@" 2>&1); then
        echo "PASS perftest $name: $(echo "$out" | grep '^Final:')"
    else
        echo "FAIL perftest $name"; echo "$out"
        failed=1
    fi
}

pair put_lat_short   -- -x syncmem -d "$dev" -t put_lat -D short -s 8     -n 2000 -w 100
pair put_bw_short    -- -x syncmem -d "$dev" -t put_bw  -D short -s 64    -n 5000
pair put_bw_bcopy    -- -x syncmem -d "$dev" -t put_bw  -D bcopy -s 4096  -n 2000
pair put_bw_zcopy    -- -x syncmem -d "$dev" -t put_bw  -D zcopy -s 65536 -n 500
pair get_bcopy       -- -x syncmem -d "$dev" -t get     -D bcopy -s 4096  -n 2000
pair get_zcopy       -- -x syncmem -d "$dev" -t get     -D zcopy -s 65536 -n 500
pair am_lat_short    -- -x syncmem -d "$dev" -t am_lat  -D short -s 8     -n 2000 -w 100
pair am_bw_bcopy     -- -x syncmem -d "$dev" -t am_bw   -D bcopy -s 4096  -n 2000
pair am_bw_zcopy     -- -x syncmem -d "$dev" -t am_bw   -D zcopy -s 8192  -n 1000

pair add_lat         -- -x syncmem -d "$dev" -t add_lat -n 1000
pair add_mr          -- -x syncmem -d "$dev" -t add_mr  -n 1000
pair fadd            -- -x syncmem -d "$dev" -t fadd    -n 1000
pair swap            -- -x syncmem -d "$dev" -t swap    -n 1000
pair cswap           -- -x syncmem -d "$dev" -t cswap   -n 1000

# UCP with syncmem alone: no ud_verbs, no tcp.
ucp() {
    name=$1; shift
    pair "$name" --env UCX_TLS=syncmem --env UCX_NET_DEVICES="$dev" -- "$@"
}

ucp ucp_put_lat -t ucp_put_lat -s 8       -n 1000
ucp ucp_put_bw  -t ucp_put_bw  -s 65536   -n 300
ucp ucp_get     -t ucp_get     -s 65536   -n 300
ucp tag_lat     -t tag_lat     -s 8       -n 1000
ucp tag_bw_1m   -t tag_bw      -s 1048576 -n 30
ucp stream_bw   -t stream_bw   -s 65536   -n 200
ucp ucp_am_bw   -t ucp_am_bw   -s 65536   -n 200
ucp ucp_add     -t ucp_add                -n 1000
ucp ucp_fadd    -t ucp_fadd               -n 1000
ucp ucp_swap    -t ucp_swap               -n 1000
ucp ucp_cswap   -t ucp_cswap              -n 1000
# wakeup: the waiting side sleeps on the event fd (UCP_FEATURE_WAKEUP)
ucp tag_lat_sleep  -t tag_lat   -s 8       -n 500 -E sleep
ucp tag_bw_sleep   -t tag_bw    -s 1048576 -n 20  -E sleep
ucp am_bw_sleep    -t ucp_am_bw -s 65536   -n 100 -E sleep
# UCP_ERR_HANDLING_MODE_PEER: keepalive and peer-failure support in use
ucp tag_lat_errh   -t tag_lat   -s 8       -n 500 -e
ucp tag_bw_errh    -t tag_bw    -s 1048576 -n 20  -e
ucp stream_bw_errh -t stream_bw -s 65536   -n 100 -e

# What UCP chooses with UCX_TLS=syncmem, per feature set: its lanes
# ("lane[0]: 0:syncmem/rxe0:1.0 ... amo#0") and, where it prints one, its
# summary ("ep_cfg[0]: tag(syncmem/rxe0:1)"; from UCX 1.18 "ucx_info
# inter-node cfg#0 tag(syncmem/rxe0:1)"). Everything must be on
# syncmem, and atomics on an 'amo' lane (device atomics), not emulated
# with active messages.
lanes() {
    features=$1 want=$2
    out=$(UCX_TLS=syncmem UCX_NET_DEVICES="$dev" UCX_LOG_LEVEL=info \
          "$top/contrib/tools/syncmem-run" ucx_info -e -u "$features" -n 1 -P inter \
          2>&1 | grep -oE '(ep_cfg|lane)\[.*|cfg#[0-9]+ .*' | tr -s ' ')
    if [ -z "$out" ] || ! echo "$out" | grep -q -- "$want" ||
       echo "$out" | grep -oE '([0-9]:|\()[a-z0-9_]+/' | grep -qv 'syncmem/'; then
        echo "FAIL lanes -u $features: want '$want', all on syncmem: ${out:-nothing reported}"
        failed=1
    else
        echo "PASS lanes -u $features: $(echo "$out" | paste -sd';')"
    fi
}

lanes t 'tag(syncmem/'
lanes r 'rma(syncmem/'
lanes a 'amo#'
lanes m 'am(syncmem/'
exit $failed
