#!/bin/sh
#
# bench.sh: the main job. Sets up and builds what is missing, boots the
# Soft-RoCE guest and measures, on its one rxe device, interleaved:
#  - ucx_perftest, UCT level: syncmem and UCX's own rc_verbs;
#  - ucx_perftest, UCP level: UCX_TLS=syncmem and UCX_TLS=rc_verbs,ud_verbs;
#  - rdma-core perftest (ib_write_bw, ib_read_bw, ib_write_lat,
#    ib_atomic_lat): the raw verbs ceiling of this device;
#  - message-size sweeps of put bandwidth and latency.
# It prints one table (medians of --reps runs, syncmem / rc_verbs and
# syncmem / raw verbs ratios, client CPU time per operation) and writes
# bench-results/results.csv, sweep.csv and bandwidth.png, latency.png.
#
#   contrib/bench.sh [--no-build] [--reps N] [--only REGEX] [--sweep|--no-sweep]
#                    [--min-size BYTES] [--max-size BYTES]
#
# The guest is emulated (TCG): absolute numbers are slow and noisy; compare
# ratios from one run only.
#
set -e
cd "$(dirname "$0")/.."
top=$(pwd)

# --- inside the guest -------------------------------------------------------

# field:value of the client's result line, per tool
result() {
    case "$1" in
        ib_*_bw)  awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $4} END {print v}' ;;
        ib_*_lat) awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $5} END {print v}' ;;
        *)        awk -v c="$2" '/^Final:/ {print $c}' ;;
    esac
}

# measure TRANSPORT KIND FIELD ITERS ARGS... : prints "value cpu_us_per_op"
measure() {
    tl=$1 kind=$2 col=$3 iters=$4; shift 4
    case "$kind:$tl" in
        uct:*)            set -- -- -x "$tl" -d "$dev" "$@" ;;
        ucp:syncmem)      set -- --env UCX_TLS=syncmem --env UCX_NET_DEVICES="$dev" -- "$@" ;;
        ucp:rc_verbs)     set -- --env UCX_TLS=rc_verbs,ud_verbs --env UCX_NET_DEVICES="$dev" \
                                 --env UCX_UD_VERBS_ETH_DGID_CHECK=n -- "$@" ;;
        raw:*)            set -- --raw "$tl" -- -d "$ibdev" -x "$gid" -F "$@" ;;
    esac
    out=$(contrib/perftest-pair.sh "$@" 2>/dev/null) || true
    v=$(echo "$out" | result "$tl" "$col")
    cpu=$(echo "$out" | awk -v n="$iters" '/^cpu:/ {printf "%.2f", $2 * 1e6 / n}')
    echo "${v:-nan} ${cpu:-nan}"
}

median() {
    sort -g | awk '$1 != "nan" {v[++n] = $1}
                   END {if (!n) print "nan"; else print (n % 2) ? v[(n+1)/2] : (v[n/2]+v[n/2+1])/2}'
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "nan" || b == "nan" || b == 0) print "-"; else printf "%.2f", a / b }'
}

guest_main() {
    reps=$1 only=$2 sweep=$3 min_size=$4 max_size=$5
    dev=$SYNCMEM_DEV0 ibdev=${SYNCMEM_DEV0%:*}
    # the RoCE v2 IPv4 GID, as syncmem and UCX pick it
    gid=$(ibv_devinfo -v -d "$ibdev" | awk '/GID\[/ && /::ffff:/ {gsub(/[^0-9]/, "", $1); print $1; exit}')
    out=$top/bench-results
    mkdir -p "$out"
    echo "== UCX $(ucx_info -v | sed -n 's/^# Version //p'), device $dev (GID index ${gid:-?})"

    # name:kind:field:iterations:args:raw-tool:raw-args  (field 3 of
    # ucx_perftest's Final: line is the median latency, 6 the bandwidth)
    tests="put_lat:uct:3:3000:-t put_lat -D short -s 8 -n 3000:ib_write_lat:-s 8 -n 3000
put_bw_64k_zcopy:uct:6:600:-t put_bw -D zcopy -s 65536 -n 600:ib_write_bw:-s 65536 -n 600
get_64k_zcopy:uct:6:600:-t get -D zcopy -s 65536 -n 600:ib_read_bw:-s 65536 -n 600
put_bw_4k_bcopy:uct:6:2000:-t put_bw -D bcopy -s 4096 -n 2000:ib_write_bw:-s 4096 -n 2000
get_4k_bcopy:uct:6:2000:-t get -D bcopy -s 4096 -n 2000:ib_read_bw:-s 4096 -n 2000
am_lat:uct:3:3000:-t am_lat -D short -s 8 -n 3000::
am_bw_4k_bcopy:uct:6:2000:-t am_bw -D bcopy -s 4096 -n 2000::
am_bw_8k_zcopy:uct:6:1000:-t am_bw -D zcopy -s 8192 -n 1000::
add_lat:uct:3:2000:-t add_lat -n 2000::
fadd:uct:3:2000:-t fadd -n 2000:ib_atomic_lat:-n 2000
cswap:uct:3:2000:-t cswap -n 2000::
ucp_put_lat:ucp:3:2000:-t ucp_put_lat -s 8 -n 2000::
ucp_put_bw_64k:ucp:6:600:-t ucp_put_bw -s 65536 -n 600::
ucp_get_64k:ucp:6:600:-t ucp_get -s 65536 -n 600::
ucp_fadd:ucp:3:2000:-t ucp_fadd -n 2000::
ucp_cswap:ucp:3:2000:-t ucp_cswap -n 2000::
tag_lat:ucp:3:2000:-t tag_lat -s 8 -n 2000::
tag_bw_1m:ucp:6:40:-t tag_bw -s 1048576 -n 40::"
    tests=$(echo "$tests" | grep -E "^(${only:-.*})")

    echo "test,transport,rep,value,cpu_us_per_op" > "$out/results.csv"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        echo "$tests" | while IFS=: read -r name kind col iters args raw rawargs; do
            for tl in syncmem rc_verbs ${raw:+$raw}; do
                printf '\r   rep %s/%s %-18s %-14s' "$rep" "$reps" "$name" "$tl" >&2
                if [ "$tl" = "$raw" ]; then
                    # shellcheck disable=SC2086
                    r=$(measure "$tl" raw 0 "$iters" $rawargs)
                else
                    # shellcheck disable=SC2086
                    r=$(measure "$tl" "$kind" "$col" "$iters" $args)
                fi
                echo "$name,$tl,$rep,$(echo "$r" | tr ' ' ',')" >> "$out/results.csv"
            done
        done
        rep=$((rep + 1))
    done
    printf '\r%60s\r' '' >&2

    echo "== medians of $reps runs. Latency: usec (lower is better); bandwidth: MB/s"
    echo "   (higher is better); cpu: client CPU usec per operation. UCP rows compare"
    echo "   UCX_TLS=syncmem with UCX_TLS=rc_verbs,ud_verbs; 'verbs' is rdma-core perftest."
    printf '%-17s %9s %9s %9s %8s %8s %8s %8s\n' test syncmem rc_verbs verbs \
        "/rc_verbs" "/verbs" "cpu:sm" "cpu:rc"
    echo "$tests" | while IFS=: read -r name kind col iters args raw rawargs; do
        m() { grep "^$name,$1," "$out/results.csv" | cut -d, -f"$2" | median; }
        s=$(m syncmem 4) r=$(m rc_verbs 4) v=nan
        [ -n "$raw" ] && v=$(m "$raw" 4)
        rs=$(ratio "$s" "$r") vs=$(ratio "$s" "$v")
        printf '%-17s %9s %9s %9s %8s %8s %8s %8s\n' "$name" "$s" "$r" "$v" \
            "$rs" "$vs" "$(m syncmem 5)" "$(m rc_verbs 5)"
    done
    echo "   Ratios are syncmem / other: below 1.00 is better for latency, above 1.00"
    echo "   for bandwidth."

    [ "$sweep" = yes ] || return 0
    echo "size,transport,put_bw_MBps,put_lat_us" > "$out/sweep.csv"
    for size in 8 64 512 4096 32768 262144 1048576 4194304; do
        [ "$size" -ge "$min_size" ] && [ "$size" -le "$max_size" ] || continue
        n=$((16777216 / size)); [ $n -gt 2000 ] && n=2000; [ $n -lt 20 ] && n=20
        for tl in syncmem rc_verbs ib_verbs; do
            printf '\r   sweep %-8s %-9s' "$size" "$tl" >&2
            if [ $tl = ib_verbs ]; then
                bw=$(measure ib_write_bw raw 0 $n -s $size -n $n | cut -d' ' -f1)
                lat=nan
                [ $size -le 4096 ] && lat=$(measure ib_write_lat raw 0 1000 -s $size -n 1000 | cut -d' ' -f1)
            else
                bw=$(measure $tl uct 6 $n -t put_bw -D zcopy -s $size -n $n | cut -d' ' -f1)
                lat=nan
                [ $size -le 4096 ] && lat=$(measure $tl uct 3 1000 -t put_lat -D bcopy -s $size -n 1000 | cut -d' ' -f1)
            fi
            echo "$size,$tl,$bw,$lat" >> "$out/sweep.csv"
        done
    done
    printf '\r%60s\r' '' >&2
    echo "== sweep (put zcopy bandwidth MB/s; put bcopy latency usec; ib_verbs = ib_write_bw/ib_write_lat)"
    column -t -s, "$out/sweep.csv"
    plot "$out"
}

plot() {
    command -v gnuplot >/dev/null || { echo "(gnuplot missing: no plots)"; return 0; }
    for tl in syncmem rc_verbs ib_verbs; do
        awk -F, -v t=$tl '$2 == t && $3 != "nan" {print $1, $3}' "$1/sweep.csv" > "$1/bw.$tl"
        awk -F, -v t=$tl '$2 == t && $4 != "nan" {print $1, $4}' "$1/sweep.csv" > "$1/lat.$tl"
    done
    gnuplot <<GP
set terminal pngcairo size 900,560 font ",11"
set logscale x 2
set grid
set key top left
set xlabel "message size (bytes)"
set output "$1/bandwidth.png"
set title "put bandwidth on Soft-RoCE (rxe, emulated guest): higher is better"
set ylabel "MB/s"
plot "$1/bw.ib_verbs" w lp lw 2 dt 2 t "raw verbs (ib_write_bw): ceiling", \
     "$1/bw.syncmem"  w lp lw 2 t "syncmem put_zcopy", \
     "$1/bw.rc_verbs" w lp lw 2 t "UCX rc_verbs put_zcopy"
set output "$1/latency.png"
set key top left
set title "put latency on Soft-RoCE (rxe, emulated guest): lower is better"
set ylabel "usec"
plot "$1/lat.ib_verbs" w lp lw 2 dt 2 t "raw verbs (ib_write_lat)", \
     "$1/lat.syncmem"  w lp lw 2 t "syncmem put_bcopy", \
     "$1/lat.rc_verbs" w lp lw 2 t "UCX rc_verbs put_bcopy"
GP
    rm -f "$1"/bw.* "$1"/lat.*
    echo "== plots: $1/bandwidth.png $1/latency.png"
}

if [ "$1" = --in-guest ]; then
    shift
    guest_main "$@"
    exit 0
fi

# --- on the host -----------------------------------------------------------

reps=3 only= sweep=yes min_size=0 max_size=4194304
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help)  sed -n '3,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --no-build) nobuild=1 ;;
        --reps)     reps=$2; shift ;;
        --only)     only=$2; shift ;;
        --sweep)    sweep=yes ;;
        --no-sweep) sweep=no ;;
        --min-size) min_size=$2; shift ;;
        --max-size) max_size=$2; shift ;;
        *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

[ -n "$nobuild" ] || contrib/bootstrap.sh
exec contrib/guest.sh -- "$top/contrib/bench.sh" --in-guest "$reps" "$only" \
    "$sweep" "$min_size" "$max_size"
