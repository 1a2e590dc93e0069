#!/bin/sh
#
# bench.sh: the main job. Sets up and builds what is missing, boots the
# Soft-RoCE guest, shows syncmem as the installed UCX sees it, then runs
# ucx_perftest for syncmem and UCX's own rc_verbs on the same device,
# interleaved, and prints medians and the ratio syncmem / rc_verbs.
#
#   contrib/bench.sh [--no-build] [--reps N]
#
# Results: bench-results/results.csv. The guest is emulated (TCG): absolute
# numbers are slow and noisy; compare ratios from one run only.
#
set -e
cd "$(dirname "$0")/.."
top=$(pwd)

if [ "$1" = --in-guest ]; then
    reps=$2
    dev=$SYNCMEM_DEV0
    out=$top/bench-results
    mkdir -p "$out"
    echo "== verbs devices"; ibv_devices
    echo "== UCX $(ucx_info -v | sed -n 's/^# Version //p') with syncmem loaded (contrib/syncmem-run)"
    contrib/syncmem-run ucx_info -d -t syncmem | grep -E 'Transport|Device|put_|get_|connection'

    # name:level:field:args. Field 3 of the 'Final:' line is the median
    # latency (usec), 6 the average bandwidth (MB/s). UCT tests run on
    # -x syncmem and -x rc_verbs; UCP tests with UCX_TLS=syncmem and with
    # UCX_TLS=rc_verbs,ud_verbs (rc_verbs needs ud_verbs to connect).
    tests="put_lat:uct:3:-t put_lat -D short -s 8 -n 3000
put_bw_64k_zcopy:uct:6:-t put_bw -D zcopy -s 65536 -n 600
get_64k_zcopy:uct:6:-t get -D zcopy -s 65536 -n 600
put_bw_4k_bcopy:uct:6:-t put_bw -D bcopy -s 4096 -n 2000
get_4k_bcopy:uct:6:-t get -D bcopy -s 4096 -n 2000
am_lat:uct:3:-t am_lat -D short -s 8 -n 3000
am_bw_4k_bcopy:uct:6:-t am_bw -D bcopy -s 4096 -n 2000
add_lat:uct:3:-t add_lat -n 2000
fadd:uct:3:-t fadd -n 2000
cswap:uct:3:-t cswap -n 2000
ucp_put_lat:ucp:3:-t ucp_put_lat -s 8 -n 2000
ucp_fadd:ucp:3:-t ucp_fadd -n 2000
ucp_cswap:ucp:3:-t ucp_cswap -n 2000
tag_lat:ucp:3:-t tag_lat -s 8 -n 2000
tag_bw_1m:ucp:6:-t tag_bw -s 1048576 -n 40"

    echo "test,transport,rep,value" > "$out/results.csv"
    rep=1
    while [ $rep -le "$reps" ]; do
        echo "$tests" | while IFS=: read -r name level col args; do
            for tl in syncmem rc_verbs; do
                printf '\r   rep %s/%s %-18s %-9s' "$rep" "$reps" "$name" "$tl" >&2
                if [ "$level" = uct ]; then
                    set -- -- -x "$tl" -d "$dev"
                elif [ "$tl" = syncmem ]; then
                    set -- --env UCX_TLS=syncmem --env UCX_NET_DEVICES="$dev" --
                else
                    set -- --env UCX_TLS=rc_verbs,ud_verbs --env UCX_NET_DEVICES="$dev" \
                           --env UCX_UD_VERBS_ETH_DGID_CHECK=n --
                fi
                # shellcheck disable=SC2086
                v=$(contrib/perftest-pair.sh "$@" $args 2>/dev/null |
                        awk -v c="$col" '/^Final:/{print $c}')
                echo "$name,$tl,$rep,${v:-nan}" >> "$out/results.csv"
            done
        done
        rep=$((rep + 1))
    done
    echo >&2

    echo "== ucx_perftest, medians of $reps runs (latency: usec, lower is better; bandwidth: MB/s, higher is better)"
    echo "   UCP rows compare UCX_TLS=syncmem with UCX_TLS=rc_verbs,ud_verbs"
    printf '%-18s %12s %12s %18s\n' test syncmem rc_verbs "syncmem/rc_verbs"
    echo "$tests" | while IFS=: read -r name level col args; do
        med() {
            grep "^$name,$1," "$out/results.csv" | cut -d, -f4 | sort -g |
                awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
        }
        s=$(med syncmem); r=$(med rc_verbs)
        printf '%-18s %12s %12s %18s\n' "$name" "$s" "$r" \
            "$(awk -v s="$s" -v r="$r" 'BEGIN{ if (r > 0) printf "%.2f", s / r; else print "n/a" }')"
    done
    exit 0
fi

reps=3
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n '3,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --no-build) nobuild=1 ;;
        --reps) reps=$2; shift ;;
        *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

[ -n "$nobuild" ] || contrib/bootstrap.sh
exec contrib/guest.sh -- "$top/contrib/bench.sh" --in-guest "$reps"
