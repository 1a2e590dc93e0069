#!/bin/sh
#
# callgrind.sh: user-space instructions per operation, syncmem vs rc_verbs.
# Runs on a host with an RDMA device (inside the guest: SYNCMEM_DEV0 is
# set); contrib/bench.sh calls it.
#
#   contrib/callgrind.sh [OUTDIR]
#
# For each operation the ucx_perftest client runs under callgrind with
# collection switched on only inside the transport's entry point
# (uct_<tl>_ep_put_short, ...), so the count is what one call of that
# operation costs, everything it calls included (the verbs provider, libc),
# and nothing of the test loop or of polling, which depends on timing.
# Timing does not change it: it is stable where timings are not. Printed per
# call, split into the transport's own code and what it calls below (the
# rdma-core provider, e.g. librxe, and libc).
# Writes OUTDIR/callgrind.csv (default bench-results).
#
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/bench-results}
dev=${SYNCMEM_DEV0:?set SYNCMEM_DEV0 to an RDMA port, e.g. rxe0:1}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints "CALLS TOTAL OWN" for callgrind output FILE: the calls of FUNCTION,
# all instructions collected (only inside FUNCTION), and those in OBJECT
# (the transport's library). Names are compressed: "(12) name" defines id
# 12, a later "(12)" refers to it. A cost line right after "calls=" is the
# inclusive cost of that call, not counted again.
summarize() {
    awk -v fn="$2" -v own="$3" '
        # ob/cob share one id space, fn/cfn another
        function name(map, s,  i) {
            i = s; sub(/^\(/, "", i); sub(/\).*/, "", i)
            if (s ~ /\) /) { sub(/^\([0-9]+\) /, "", s); names[map, i] = s }
            return names[map, i]
        }
        /^summary:/ { total = $2 }
        /^ob=/      { ob = name("o", substr($0, 4)); next }
        /^cob=/     { name("o", substr($0, 5)); next }
        /^fn=/      { name("f", substr($0, 4)); next }
        /^cfn=/     { called = name("f", substr($0, 5)); next }
        /^calls=/   { if (called == fn) { split($0, a, /[= ]/); calls += a[2] }
                      skip = 1; next }
        /^[0-9+*-]/ { if (skip) { skip = 0; next }
                      if (index(ob, own)) mine += $2 }
        END { print calls + 0, total + 0, mine + 0 }' "$1"
}

# op:function suffix:ucx_perftest args (put_short_mr: back to back, where
# doorbell batching posts many requests per ibv_post_send)
ops="put_short:ep_put_short:-t put_lat -D short -s 8
put_short_mr:ep_put_short:-t put_bw -D short -s 8
am_short:ep_am_short:-t am_lat -D short -s 8
get_bcopy:ep_get_bcopy:-t get -D bcopy -s 8 -O 1"

echo "op,transport,calls,instructions,own_instructions" > "$out/callgrind.csv"
echo "$ops" | while IFS=: read -r op fn args; do
    # syncmem_db16: syncmem with doorbell batching (TX_DB_BATCH=16)
    for col in syncmem syncmem_db16 rc_verbs; do
        tl=${col%_db16} db=
        [ "$col" = syncmem_db16 ] && db="--env UCX_SYNCMEM_TX_DB_BATCH=16"
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
        if ! "$top/contrib/perftest-pair.sh" --env LD_BIND_NOW=1 $db \
                --wrap "valgrind -q --tool=callgrind --callgrind-out-file=$f
                        --toggle-collect=uct_${tl}_$fn $ring" \
                -- -x "$tl" -d "$dev" $args -n 1000 -w 10 >/dev/null 2>&1; then
            echo "$op,$col,nan,nan,nan" >> "$out/callgrind.csv"
            continue
        fi
        set -- $(summarize "$f" "uct_${tl}_$fn" "$lib")
        echo "$op,$col,$1,$2,$3" >> "$out/callgrind.csv"
    done
done

echo "== user-space instructions per call (callgrind; 'own' is the transport's"
echo "   code, the rest is the verbs provider and libc below it; db16: syncmem"
echo "   with doorbell batching, 16 a doorbell; ratios are syncmem / rc_verbs)"
printf '%-12s %8s %8s %8s %6s %6s %7s %7s %7s %6s\n' op syncmem db16 rc_verbs ratio \
    "db16/rc" "own sm" "own db16" "own rc" ratio
awk -F, 'NR > 1 && $3 > 0 { t[$1, $2] = $4 / $3; o[$1, $2] = $5 / $3 }
    NR > 1 && !($1 in seen) { seen[$1] = 1; order[++n] = $1 }
    function r(a, b) { return (b > 0) ? sprintf("%.2f", a / b) : "-" }
    END {
        for (i = 1; i <= n; ++i) {
            k = order[i]
            s = t[k, "syncmem"]; d = t[k, "syncmem_db16"]; c = t[k, "rc_verbs"]
            so = o[k, "syncmem"]; do1 = o[k, "syncmem_db16"]; co = o[k, "rc_verbs"]
            printf "%-12s %8.1f %8.1f %8.1f %6s %6s %7.1f %7.1f %7.1f %6s\n", k, s, d, c,
                   r(s, c), r(d, c), so, do1, co, r(so, co)
        }
    }' "$out/callgrind.csv"
