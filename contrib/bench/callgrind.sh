#!/bin/sh
#
# callgrind.sh: user-space instructions per operation, syncmem vs rc_verbs.
# Runs on a host with an RDMA device (inside the guest: SYNCMEM_DEV0 is
# set); contrib/bench.sh calls it.
#
#   contrib/bench/callgrind.sh [OUTDIR]
#
# For each operation the ucx_perftest client runs under callgrind with
# collection switched on only inside the transport's entry point
# (uct_<tl>_ep_put_short, ...), so the count is what one call of that
# operation costs, everything it calls included (the verbs provider, libc),
# and nothing of the test loop or of polling, which depends on timing.
# Timing does not change it: it is stable where timings are not. Printed per
# call, split into the transport's own code and what it calls below (the
# rdma-core provider, e.g. librxe, and libc). And ep_flush: a put and a
# flush to completion on one endpoint, scale.c's latency phase, counting
# the flush calls alone.
# Writes OUTDIR/callgrind.csv (default bench-results).
#
# SPDX-License-Identifier: BSD-3-Clause
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/bench-results}
dev=${SYNCMEM_DEV0:?set SYNCMEM_DEV0 to an RDMA port, e.g. rxe0:1}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# op:function suffix:ucx_perftest args (put_short_mr: back to back, where
# doorbell batching posts many requests per ibv_post_send). The count
# covers every function whose name starts with uct_<tl>_<suffix>: syncmem's
# put_short and am_short come in variants for the iface's settings.
ops="put_short:ep_put_short:-t put_lat -D short -s 8
put_short_mr:ep_put_short:-t put_bw -D short -s 8
put_bcopy:ep_put_bcopy:-t put_lat -D bcopy -s 8
put_zcopy:ep_put_zcopy:-t put_lat -D zcopy -s 8
get_bcopy:ep_get_bcopy:-t get -D bcopy -s 8 -O 1
am_short:ep_am_short:-t am_lat -D short -s 8
atomic_fadd64:ep_atomic64_fetch:-t fadd -s 8 -O 1"

echo "op,transport,calls,instructions,own_instructions" > "$out/callgrind.csv"
echo "$ops" | while IFS=: read -r op fn args; do
    # syncmem: its defaults (reconnect on); syncmem_norc: reconnect off (no
    # replay ring); syncmem_db16: doorbell batching, 16 requests a doorbell
    for col in syncmem syncmem_norc syncmem_db16 rc_verbs; do
        tl=${col%_*} env=
        case $col in
            syncmem_norc) env="--env UCX_SYNCMEM_RECONNECT=n" ;;
            syncmem_db16) env="--env UCX_SYNCMEM_TX_DB_BATCH=16" ;;
            rc_verbs)     tl=rc_verbs ;;
        esac
        # syncmem posts at its doorbell: inside the operation when a batch is
        # full, else from progress (uct_syncmem_iface_ring_all), counted too,
        # so that a batched post is shared by the requests in it. (Only
        # functions that never nest: callgrind flips collection at each.)
        case $tl in
            syncmem)  lib=libuct_syncmem ring=--toggle-collect=uct_syncmem_iface_ring_all ;;
            rc_verbs) lib=libuct_ib ring= ;;
        esac
        echo "   [callgrind] $op $col" >&2
        f=$tmp/$op.$col
        # LD_BIND_NOW: no lazy symbol binding inside the first call
        # shellcheck disable=SC2086
        if ! "$top/contrib/bench/perftest-pair.sh" --env LD_BIND_NOW=1 $env \
                --wrap "valgrind -q --tool=callgrind --callgrind-out-file=$f
                        --toggle-collect=uct_${tl}_$fn* $ring" \
                -- -x "$tl" -d "$dev" $args -n 1000 -w 10 >/dev/null 2>&1; then
            echo "$op,$col,nan,nan,nan" >> "$out/callgrind.csv"
            continue
        fi
        # CALLS TOTAL OWN: the calls of uct_<tl>_<fn>*, every instruction
        # collected, those in the transport's library
        if ! counts=$(python3 "$top/contrib/bench/tables.py" callgrind-count \
                      "$f" "uct_${tl}_$fn" "$lib"); then
            echo "$op,$col,nan,nan,nan" >> "$out/callgrind.csv"
            continue
        fi
        # shellcheck disable=SC2086 # (three numbers)
        set -- $counts
        echo "$op,$col,$1,$2,$3" >> "$out/callgrind.csv"
    done
done

# ep_flush: put_short of 8 bytes and a flush to completion, one endpoint
# (scale.c's latency phase): the flush call's own cost (its completion is
# progress's, as for rc_verbs), which ucx_perftest's UCT tests never call
# per operation. scale measures in a child process: its file is the one
# with calls (%p).
for col in syncmem syncmem_norc syncmem_db16 rc_verbs; do
    tl=${col%_*} env=
    case $col in
        syncmem_norc) env="UCX_SYNCMEM_RECONNECT=n" ;;
        syncmem_db16) env="UCX_SYNCMEM_TX_DB_BATCH=16" ;;
        rc_verbs)     tl=rc_verbs ;;
    esac
    case $tl in
        syncmem)  lib=libuct_syncmem ;;
        rc_verbs) lib=libuct_ib ;;
    esac
    echo "   [callgrind] ep_flush $col" >&2
    f=$tmp/ep_flush.$col
    # shellcheck disable=SC2086
    if ! env LD_BIND_NOW=1 $env "$top/contrib/tools/syncmem-run" \
            valgrind -q --tool=callgrind --callgrind-out-file="$f.%p" \
            --toggle-collect="uct_${tl}_ep_flush*" \
            "$top/contrib/bench/scale" -t "$tl" -d "$dev" -n 1 -l 1000 \
            -r 100 -s 0.1 -i 0 >/dev/null 2>&1; then
        echo "ep_flush,$col,nan,nan,nan" >> "$out/callgrind.csv"
        continue
    fi
    counts=
    for g in "$f".*; do
        c=$(python3 "$top/contrib/bench/tables.py" callgrind-count "$g" \
            "uct_${tl}_ep_flush" "$lib") || continue
        case $c in 0\ *) ;; *) counts=$c ;; esac
    done
    if [ -z "$counts" ]; then
        echo "ep_flush,$col,nan,nan,nan" >> "$out/callgrind.csv"
        continue
    fi
    # shellcheck disable=SC2086 # (three numbers)
    set -- $counts
    echo "ep_flush,$col,$1,$2,$3" >> "$out/callgrind.csv"
done

echo "== user-space instructions per call (callgrind; 'own' is the transport's"
echo "   code, the rest is the verbs provider and libc below it)"
python3 "$top/contrib/bench/tables.py" callgrind "$out"
