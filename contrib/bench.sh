#!/bin/sh
#
# bench.sh: the main job. Sets up and builds what is missing, boots the
# Soft-RoCE guest and measures, on its one rxe device, interleaved:
#  - ucx_perftest, UCT level: syncmem and UCX's own rc_verbs;
#  - ucx_perftest, UCP level: UCX_TLS=syncmem and UCX_TLS=rc_verbs,ud_verbs;
#  - rdma-core perftest (ib_write_bw, ib_read_bw, ib_write_lat,
#    ib_atomic_lat): the raw verbs ceiling of this device;
#  - user-space instructions per operation (callgrind.sh);
#  - the registration cache: one registration's cost, UCP put bandwidth
#    with the cache on and off;
#  - message-size sweeps of put bandwidth and latency;
#  - passive-target atomics: UCP, MPI and OpenSHMEM atomics on a target
#    that computes (passive.c, passive_mpi.c, passive_shmem.c), and random
#    updates (GUPS-shaped XOR, gups.h) to a target idle and busy, with
#    UCX_ATOMIC_MODE's default and cpu;
#  - UCP tag bandwidth with the endpoints' error handling mode none and
#    peer (ucp_tag_bw.c), UCX_TLS=syncmem and rc_verbs,ud_verbs;
#  - only with --only scale: what an endpoint costs at 1 to 1024 endpoints
#    per worker (scale.c), syncmem, reconnect on and off, and rc_verbs;
#  - only with --only mpi_scale, in the two-host guest: an Open MPI job of
#    4 to 24 ranks, oversubscribed, all-to-all and fetch-and-op between all
#    pairs, time and memory per rank (mpi_scale.c), rxe's error and retry
#    counters and syncmem's stalled QPs and reconnects per job
#    (mpi_scale.sh), UCX_TLS=syncmem and rc_verbs,ud_verbs.
# It writes bench-results/results.csv, callgrind.csv, regcost.txt,
# rcache.csv, sweep.csv, passive.csv (with the programs' output in
# passive.log), gups.csv (gups.log), ucp_tag_bw.csv (ucp_tag_bw.log), scale.csv (scale.log, scale.info), mpi_scale.csv
# (mpi_scale.log, mpi_scale.info), bench.meta (date, guest
# kernel, UCX, what ran) and the plots bandwidth.png, latency.png (the
# sweep's) and scale.png (medians of the reps with their spread, the run in
# the title); then contrib/bench/tables.py prints the tables (medians of
# --reps runs, ratios to rc_verbs and to raw verbs) of what this run
# measured. --only REGEX selects tests of the main table and the sections
# 'callgrind', 'rcache', 'passive', 'gups' (the random updates),
# 'ucp_tag_bw', 'scale' and 'mpi_scale' by name.
# A run that gave no number (a pair that failed, though it printed one; no
# number in its output; a failed regcost or passive pair; a ucp_tag_bw
# run that failed or found a wrong byte; an N scale.c could not measure;
# an MPI job that failed or found a wrong value) has none: 'nan' in
# results.csv, rcache.csv, sweep.csv, gups.csv, ucp_tag_bw.csv, scale.csv and
# mpi_scale.csv, no row in passive.csv, no regcost.txt; it is listed in
# failed.txt (with why; bench.meta's failed=N counts them), and bench.sh
# exits 1 after the tables.
#
#   contrib/bench.sh [--no-build] [--reps N] [--only REGEX] [--sweep|--no-sweep]
#                    [--min-size BYTES] [--max-size BYTES] [--markdown FILE]...
#   contrib/bench.sh --plot [DIR]     redraw the plots from DIR/sweep.csv
#   contrib/bench.sh --tables [DIR]   print the tables of DIR's last run again
#
# --markdown FILE (repeatable) also writes the tables into FILE, each block
# headed by the date, kernel and UCX of the run: only between FILE's
# '<!-- BEGIN generated: bench tables|bench callgrind|bench summary|bench
# ucp_tag_bw|bench scale|bench mpi_scale -->' and '<!-- END generated -->'
# lines if it has them (doc/benchmarks.md, README.md; a block of sections
# the run did not make stays as it was), else the whole file; and the plots, which those blocks show, into
# doc/plots/.
#
# The guest is emulated (TCG): absolute numbers are slow and noisy; compare
# ratios from one run only. SYNCMEM_PASSIVE_APIS (e.g. "ucp mpi"),
# SYNCMEM_GUPS_APIS (the random updates': "ucp shmem") and
# SYNCMEM_PASSIVE_MS (each phase's length, default 600) narrow 'passive';
# SYNCMEM_SCALE_N (default 1,16,64,256,1024) 'scale'; SYNCMEM_MPI_SCALE_NP
# (default "4 8 16 24") and SYNCMEM_MPI_SCALE_BUDGET (seconds a job, default
# 300) 'mpi_scale'.
#
set -e
cd "$(dirname "$0")/.."
top=$(pwd)
# the mpi_scale section: mpi_scale_main, mpi_scale_guest_args
# shellcheck source=contrib/bench/mpi_scale.sh
. "$top/contrib/bench/mpi_scale.sh"

# --- inside the guest -------------------------------------------------------

# field:value of the client's result line, per tool
result() {
    case "$1" in
        ib_*_bw)  awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $4} END {print v}' ;;
        ib_*_lat) awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $5} END {print v}' ;;
        *)        awk -v c="$2" '/^Final:/ {print $c}' ;;
    esac
}

# failed_run WHAT WHY: a run that gave no number (its value is nan, or it
# has no row): shown, and recorded in $out/failed.txt, which fails the
# bench (--in-guest exits 1)
failed_run() {
    echo "   FAILED: $1: $2" >&2
    echo "$1: $2" >> "$out/failed.txt"
}

# measure TRANSPORT KIND FIELD ARGS... : prints the value; nan where the
# pair failed (perftest-pair.sh exited non-zero: what it printed is no
# measurement) or printed no number, recorded (failed_run) as $what's.
# $dbenv (a row name ending in _db16): syncmem with doorbell batching, 16 a
# doorbell.
measure() {
    tl=$1 kind=$2 col=$3; shift 3
    # shellcheck disable=SC2086 # ($dbenv: no word, or two)
    case "$kind:$tl" in
        uct:syncmem)      set -- $dbenv -- -x "$tl" -d "$dev" "$@" ;;
        uct:*)            set -- -- -x "$tl" -d "$dev" "$@" ;;
        ucp:syncmem)      set -- $dbenv --env UCX_TLS=syncmem --env UCX_NET_DEVICES="$dev" -- "$@" ;;
        ucp:rc_verbs)     set -- --env UCX_TLS=rc_verbs,ud_verbs --env UCX_NET_DEVICES="$dev" \
                                 --env UCX_UD_VERBS_ETH_DGID_CHECK=n -- "$@" ;;
        raw:*)            set -- --raw "$tl" -- -d "$ibdev" -x "$gid" -F "$@" ;;
    esac
    pt=$(mktemp -d)
    prc=0
    contrib/bench/perftest-pair.sh "$@" > "$pt/out" 2> "$pt/err" || prc=$?
    v=$(result "$tl" "$col" < "$pt/out")
    if [ "$prc" -ne 0 ] || [ -z "$v" ]; then
        if [ "$prc" -ne 0 ]; then why="perftest-pair.sh exited $prc"
        else why="no number in its output"; fi
        failed_run "${what:-$tl}" "$why (perftest-pair.sh $*)"
        tail -n 5 "$pt/err" | sed 's/^/   | /' >&2
        v=nan
    fi
    rm -rf "$pt"
    echo "$v"
}

guest_main() {
    reps=$1 only=$2 sweep=$3 min_size=$4 max_size=$5
    dev=$SYNCMEM_DEV0 ibdev=${SYNCMEM_DEV0%:*}
    # the RoCE v2 IPv4 GID, as syncmem and UCX pick it
    gid=$(ibv_devinfo -v -d "$ibdev" |
          sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:.*/\1/p' | head -n 1)
    out=$top/bench-results
    mkdir -p "$out"
    : > "$out/failed.txt"
    echo "== UCX $(ucx_info -v | "$top/contrib/pkg/ucx-version.sh"), device $dev (GID index ${gid:-?})"

    # name:kind:field:args:raw-tool:raw-args  (field 3 of
    # ucx_perftest's Final: line is the median latency, 7 the overall bandwidth)
    tests="put_lat:uct:3:-t put_lat -D short -s 8 -n 3000 -w 100:ib_write_lat:-s 8 -n 3000
put_bw_64k_zcopy:uct:7:-t put_bw -D zcopy -s 65536 -n 600 -w 100:ib_write_bw:-s 65536 -n 600
get_64k_zcopy:uct:7:-t get -D zcopy -s 65536 -n 600 -w 100:ib_read_bw:-s 65536 -n 600
put_mr_8b:uct:9:-t put_bw -D short -s 8 -n 20000 -w 100::
put_mr_8b_db16:uct:9:-t put_bw -D short -s 8 -n 20000 -w 100::
am_mr_8b:uct:9:-t am_bw -D short -s 8 -n 20000 -w 100::
am_mr_8b_db16:uct:9:-t am_bw -D short -s 8 -n 20000 -w 100::
add_mr:uct:9:-t add_mr -n 20000 -w 100::
add_mr_db16:uct:9:-t add_mr -n 20000 -w 100::
put_bw_4k_bcopy:uct:7:-t put_bw -D bcopy -s 4096 -n 2000 -w 100:ib_write_bw:-s 4096 -n 2000
get_4k_bcopy:uct:7:-t get -D bcopy -s 4096 -n 2000 -w 100:ib_read_bw:-s 4096 -n 2000
am_lat:uct:3:-t am_lat -D short -s 8 -n 3000 -w 100::
am_bw_4k_bcopy:uct:7:-t am_bw -D bcopy -s 4096 -n 2000 -w 100::
am_bw_8k_zcopy:uct:7:-t am_bw -D zcopy -s 8192 -n 1000 -w 100::
add_lat:uct:3:-t add_lat -n 2000 -w 100::
fadd:uct:3:-t fadd -n 2000 -w 100:ib_atomic_lat:-n 2000
cswap:uct:3:-t cswap -n 2000 -w 100::
ucp_put_lat:ucp:3:-t ucp_put_lat -s 8 -n 2000 -w 100::
ucp_put_bw_64k:ucp:7:-t ucp_put_bw -s 65536 -n 600 -w 100::
ucp_get_64k:ucp:7:-t ucp_get -s 65536 -n 600 -w 100::
ucp_fadd:ucp:3:-t ucp_fadd -n 2000 -w 100::
ucp_cswap:ucp:3:-t ucp_cswap -n 2000 -w 100::
tag_lat:ucp:3:-t tag_lat -s 8 -n 2000 -w 100::
tag_bw_1m:ucp:7:-t tag_bw -s 1048576 -n 40 -w 100::"
    tests=$(echo "$tests" | grep -E "^(${only:-.*})" || true)
    # what this run measured, for tables.py (older CSVs in $out are not
    # this run's)
    sections=
    [ -z "$tests" ] || { main_table; sections="$sections main"; }
    if [ -z "$only" ] || echo callgrind | grep -qE "^($only)"; then
        "$top/contrib/bench/callgrind.sh" "$out" ||
            failed_run callgrind "callgrind.sh exited $? (nan or 0 calls in callgrind.csv)"
        sections="$sections callgrind"
    fi
    if [ -z "$only" ] || echo rcache | grep -qE "^($only)"; then
        rcache_main "$reps" "$out"
        sections="$sections rcache"
    fi
    if [ -z "$only" ] || echo passive | grep -qE "^($only)"; then
        passive_main "$reps" "$out"
        sections="$sections passive"
    fi
    if [ -z "$only" ] || echo ucp_tag_bw | grep -qE "^($only)"; then
        ucp_tag_bw_main "$reps" "$out"
        sections="$sections ucp_tag_bw"
    fi
    # (the random updates: in a whole run, or by name)
    if [ -z "$only" ] || echo gups | grep -qE "^($only)"; then
        gups_main "$reps" "$out"
        sections="$sections gups"
    fi
    # (only when asked for by name: it takes minutes and thousands of QPs;
    # see scale_main)
    if [ -n "$only" ] && echo scale | grep -qE "^($only)"; then
        scale_main "$reps" "$out"
        sections="$sections scale"
    fi
    # (the same: minutes, and the host side boots the two-host guest for
    # it; see mpi_scale_main)
    if [ -n "$only" ] && echo mpi_scale | grep -qE "^($only)"; then
        mpi_scale_main "$reps" "$out"
        sections="$sections mpi_scale"
    fi
    if [ "$sweep" = yes ]; then sweep_main; sections="$sections sweep"; fi
    { echo "date=$(date -u '+%F %H:%M UTC')"
      echo "kernel=$(uname -r)"
      echo "ucx=$(ucx_info -v | "$top/contrib/pkg/ucx-version.sh")"
      echo "device=$dev"
      echo "commit=$("$top/contrib/tools/commit-stamp.sh")"
      echo "reps=$reps"
      echo "sections=${sections# }"
      echo "failed=$(wc -l < "$out/failed.txt")"; } > "$out/bench.meta"
    if [ "$sweep" = yes ]; then
        plot "$out" || failed_run plots "no plots drawn from sweep.csv"
    fi
    case " $sections " in
        *" scale "*) plot_scale "$out" || failed_run plots "no plot drawn from scale.csv" ;;
    esac
    if [ -s "$out/failed.txt" ]; then
        echo "== FAILED: $(wc -l < "$out/failed.txt") runs gave no number (nan in the CSVs; $out/failed.txt):"
        sed 's/^/   /' "$out/failed.txt"
    fi
}

# The main table: $tests, $reps times, interleaved.
main_table() {
    echo "test,transport,rep,value" > "$out/results.csv"
    total=$(( $(echo "$tests" | wc -l) * 2 + $(echo "$tests" | grep -c ':ib_' || true) ))
    step=0
    rep=1
    while [ "$rep" -le "$reps" ]; do
        echo "$tests" | while IFS=: read -r name kind col args raw rawargs; do
            case $name in
                *_db16) dbenv="--env UCX_SYNCMEM_TX_DB_BATCH=16" ;;
                *)     dbenv= ;;
            esac
            for tl in syncmem rc_verbs ${raw:+$raw}; do
                step=$((step + 1))
                echo "   [rep $rep/$reps, $step/$total] $name $tl" >&2
                what="main $name $tl rep $rep"
                if [ "$tl" = "$raw" ]; then
                    # shellcheck disable=SC2086
                    v=$(measure "$tl" raw 0 $rawargs)
                else
                    # shellcheck disable=SC2086
                    v=$(measure "$tl" "$kind" "$col" $args)
                fi
                echo "$name,$tl,$rep,$v" >> "$out/results.csv"
            done
        done
        rep=$((rep + 1))
    done
}

# Message-size sweeps of put bandwidth and latency, $reps times,
# interleaved (a size's transports side by side in each rep).
sweep_main() {
    echo "size,transport,rep,put_bw_MBps,put_lat_us" > "$out/sweep.csv"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for size in 8 64 512 4096 32768 262144 1048576 4194304; do
            if [ "$size" -lt "$min_size" ] || [ "$size" -gt "$max_size" ]; then continue; fi
            n=$((16777216 / size)); [ $n -gt 2000 ] && n=2000; [ $n -lt 20 ] && n=20
            for tl in syncmem rc_verbs ib_verbs; do
                echo "   [sweep, rep $rep/$reps] $size bytes $tl" >&2
                # (latency above 4 KiB is not measured: nan by design)
                what="sweep $size $tl bw rep $rep"
                if [ $tl = ib_verbs ]; then
                    bw=$(measure ib_write_bw raw 0 -s $size -n $n)
                    lat=nan what="sweep $size $tl lat rep $rep"
                    [ $size -le 4096 ] && lat=$(measure ib_write_lat raw 0 -s $size -n 1000)
                else
                    bw=$(measure $tl uct 7 -t put_bw -D zcopy -s $size -n $n -w 20)
                    lat=nan what="sweep $size $tl lat rep $rep"
                    [ $size -le 4096 ] && lat=$(measure $tl uct 3 -t put_lat -D bcopy -s $size -n 1000 -w 100)
                fi
                echo "$size,$tl,$rep,$bw,$lat" >> "$out/sweep.csv"
            done
        done
        rep=$((rep + 1))
    done
}

# The registration cache: what one registration costs, and UCP put
# bandwidth (UCP 1.13 registers the send buffer of every zcopy put) with
# the cache on and off.
rcache_main() {
    reps=$1 out=$2
    echo "== one registration (usec): cache off registers, cache on hits"
    # (a regcost that failed leaves no regcost.txt: its numbers are none)
    prc=0
    "$top/contrib/tools/syncmem-run" "$top/contrib/bench/regcost" "$ibdev" \
        > "$out/regcost.out" 2>&1 || prc=$?
    cat "$out/regcost.out"
    if [ $prc -eq 0 ]; then
        mv "$out/regcost.out" "$out/regcost.txt"
    else
        rm -f "$out/regcost.txt"
        failed_run "rcache regcost" "regcost exited $prc (its output: $out/regcost.out)"
    fi
    echo "size,rcache,rep,MBps" > "$out/rcache.csv"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for size in 65536 262144 1048576 4194304; do
            n=$((67108864 / size)); [ $n -gt 600 ] && n=600
            for rc in y n; do
                echo "   [rep $rep/$reps] rcache=$rc ucp_put_bw $size" >&2
                what="rcache $size rcache=$rc rep $rep"
                v=$(export UCX_SYNCMEM_RCACHE=$rc
                    measure syncmem ucp 7 -t ucp_put_bw -s $size -n $n -w 10)
                echo "$size,$rc,$rep,$v" >> "$out/rcache.csv"
            done
        done
        rep=$((rep + 1))
    done
}

# UCP's environment for TL (syncmem or rc_verbs): one VAR=VALUE a word.
ucp_env() {
    case $1 in
        syncmem) echo "UCX_TLS=syncmem UCX_NET_DEVICES=$dev" ;;
        *)       echo "UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=$dev UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
    esac
}

# Passive target (contrib/bench/passive.c, passive_mpi.c, passive_shmem.c): the
# origin's atomics while the target computes. passive_pair API TL [gups
# [SETTING]] prints the origin's output; with gups, the random-update
# bench's (contrib/bench/gups.h) instead, SETTING cpu adding
# UCX_ATOMIC_MODE=cpu, noguess UCX_SYNCMEM_AMO_GUESS_WORDS=0. UCP:
# target on CPU 0 and origin on CPU 1 (two busy-polling processes on one
# vCPU crawl); MPI and OpenSHMEM: one rank per core (--bind-to core).
passive_pair() {
    api=$1 tl=$2 gups=${3:-} setting=${4:-default}
    # shellcheck disable=SC2046
    set -- $(ucp_env "$tl")
    case $setting in
        cpu)     set -- "$@" UCX_ATOMIC_MODE=cpu ;;
        noguess) set -- "$@" UCX_SYNCMEM_AMO_GUESS_WORDS=0 ;;
    esac
    case $api in
    ucp)
        d=$(mktemp -d /dev/shm/passive.XXXXXX)
        env "$@" timeout 180 taskset -c 0 "$top/contrib/tools/syncmem-run" \
            "$top/contrib/bench/passive" target "$d" > "$d.target" 2>&1 &
        tpid=$!
        env "$@" timeout 180 taskset -c 1 "$top/contrib/tools/syncmem-run" \
            "$top/contrib/bench/passive" "${gups:-origin}" "$d" "$pms" 2>&1 ||
            echo "origin failed: exit $?"
        wait $tpid || { echo "target failed: exit $?"; cat "$d.target"; }
        rm -rf "$d" "$d.target" ;;
    mpi|shmem)
        xs="-x $(echo "$@" | sed 's/ / -x /g') -x $("$top/contrib/tools/syncmem-run" --print)"
        if [ "$api" = mpi ]; then
            prog=$top/contrib/bench/passive_mpi
            set -- mpirun --mca osc ucx "$prog" "$pms"
        else
            # (Debian 12's OSHMEM crashes at finalize with osc rdma)
            prog=$top/contrib/bench/passive_shmem
            # shellcheck disable=SC2086 # ($gups: no word, or one)
            set -- oshrun --mca spml ucx --mca osc ^rdma "$prog" $gups "$pms"
        fi
        cmd=$1; shift
        # shellcheck disable=SC2086
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 180 \
            $cmd -np 2 --bind-to core --mca pml ucx --mca btl self \
            --mca pml_ucx_devices any --mca pml_ucx_tls any $xs "$@" 2>&1 ||
            echo "$cmd $prog failed: exit $?" ;;
    esac
}

passive_main() {
    reps=$1 out=$2
    # (SYNCMEM_PASSIVE_MS: each phase's length, default 600 ms)
    pms=${SYNCMEM_PASSIVE_MS:-600}
    # (SYNCMEM_PASSIVE_APIS: a subset, e.g. "ucp mpi")
    apis=$(passive_apis "${SYNCMEM_PASSIVE_APIS:-ucp mpi shmem}")
    echo "api,op,slice_ms,transport,rep,median_us,p99_us,slowdown,compute" > "$out/passive.csv"
    : > "$out/passive.log"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for api in $apis; do
            for tl in syncmem rc_verbs; do
                echo "   [rep $rep/$reps] passive $api $tl" >&2
                echo "== rep $rep $api $tl" >> "$out/passive.log"
                passive_pair "$api" "$tl" > "$out/passive.one"
                cat "$out/passive.one" >> "$out/passive.log"
                # a pair that failed, or gave a wrong result or no phase,
                # has no rows
                rows=$(sed -n 's/^phase op=\([a-z]*\) slice_ms=\([0-9]*\) ops=[0-9]* median_us=\([0-9.]*\) p99_us=\([0-9.]*\)\( slowdown=\([0-9.]*\) compute=\([0-9.]*\)\)*$/'"$api"',\1,\2,'"$tl,$rep"',\3,\4,\6,\7/p' \
                       "$out/passive.one")
                bad=$(grep -E "failed: exit|wrong=[1-9]" "$out/passive.one" | head -n 1)
                if [ -n "$bad" ]; then
                    failed_run "passive $api $tl rep $rep" "$bad (passive.log)"
                elif [ -z "$rows" ]; then
                    failed_run "passive $api $tl rep $rep" "no phase line in its output (passive.log)"
                else
                    echo "$rows" >> "$out/passive.csv"
                fi
                rm -f "$out/passive.one"
            done
        done
        rep=$((rep + 1))
    done
    echo "== passive target: what the transports offer (the table: contrib/bench/tables.py)"
    # what the transports have on the device (ucx_info -d), and (passive.c
    # prints them) the transports UCP chose for its atomics
    "$top/contrib/tools/syncmem-run" ucx_info -d 2>/dev/null | awk '
        /# *Transport:/ {t = $3}
        /# *atomic_/ && / 64 bit/ && (t == "rc_verbs" || t == "syncmem") &&
            !seen[t, $2]++ {sub(/^atomic_/, "", $2); sub(/:$/, "", $2); a[t] = a[t] " " $2}
        END {for (t in a) print "   " t ": 64-bit atomics on the device (ucx_info -d):" a[t]}'
    awk '/^== rep/ {t = $5} /^atomics:/ && !seen[t]++ {print "   " t ": UCP " $0}' \
        "$out/passive.log"
    grep -E "failed|wrong=[1-9]" "$out/passive.log" | sort | uniq -c | sed 's/^/   FAILED: /'
}

# UCP tag bandwidth with the endpoints' error handling mode chosen
# (contrib/bench/ucp_tag_bw.c: a sender and a receiver process, every byte
# checked; ucx_perftest 1.13 cannot set the mode): UCX_TLS=syncmem and
# rc_verbs,ud_verbs, each with mode none and peer, at 1 MiB (100 messages)
# and 16 MiB (12), $reps times, interleaved. With peer error handling UCP
# takes a zero-copy rendezvous lane only from a transport whose md can
# revoke a key (UCT_MD_FLAG_INVALIDATE). A run that failed, or printed no
# number, is nan and why in ucp_tag_bw.csv (its output in ucp_tag_bw.log).
ucp_tag_bw_main() {
    reps=$1 out=$2
    echo "transport,size,mode,rep,MBps,note" > "$out/ucp_tag_bw.csv"
    : > "$out/ucp_tag_bw.log"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for run in 1048576:100 16777216:12; do
            size=${run%:*} iters=${run#*:}
            for mode in none peer; do
                for tl in syncmem rc_verbs; do
                    echo "   [rep $rep/$reps] ucp_tag_bw $size bytes, $mode, $tl" >&2
                    echo "== rep $rep $size $mode $tl" >> "$out/ucp_tag_bw.log"
                    prc=0
                    # shellcheck disable=SC2046 # (ucp_env: words)
                    env $(ucp_env "$tl") timeout -k 10 120 \
                        "$top/contrib/tools/syncmem-run" "$top/contrib/bench/ucp_tag_bw" \
                        "$size" "$iters" "$mode" > "$out/ucp_tag_bw.one" 2>&1 || prc=$?
                    cat "$out/ucp_tag_bw.one" >> "$out/ucp_tag_bw.log"
                    v=$(sed -n "s/^ucp_tag_bw size=$size mode=$mode iters=$iters MBps=\([0-9.]*\)$/\1/p" \
                        "$out/ucp_tag_bw.one" | tail -n 1)
                    # (a run that failed printed no measurement, whatever it printed)
                    case $prc in
                        0)   why= ;;
                        124) why="timed out after 120 s" ;;
                        *)   why="ucp_tag_bw exited $prc" ;;
                    esac
                    [ -n "$why" ] || [ -n "$v" ] || why="no number in its output"
                    if [ -n "$why" ]; then
                        last=$(grep -v '^ucp_tag_bw size=' "$out/ucp_tag_bw.one" | tail -n 1)
                        why=$(echo "$why${last:+: $last}" | tr ',"' '; ')
                        failed_run "ucp_tag_bw $tl $size $mode rep $rep" "$why (ucp_tag_bw.log)"
                        v=nan
                    fi
                    echo "$tl,$size,$mode,$rep,$v,$why" >> "$out/ucp_tag_bw.csv"
                done
            done
        done
        rep=$((rep + 1))
    done
    rm -f "$out/ucp_tag_bw.one"
}

# passive_apis LIST: the APIs of LIST this guest can run
passive_apis() {
    for api in $1; do
        case $api in
            mpi)   [ -x "$top/contrib/bench/passive_mpi" ] && command -v mpirun >/dev/null ;;
            shmem) [ -x "$top/contrib/bench/passive_shmem" ] && command -v oshrun >/dev/null ;;
        esac && printf ' %s' "$api"
    done
    # (the last one missing is no error: set -e)
    return 0
}

# The random-update bench (contrib/bench/gups.h, in UCP and OpenSHMEM:
# passive.c, passive_shmem.c), in a whole run or by name ('gups'
# in bench.meta's sections, --only gups): 64-bit XOR to random
# words of the target's table, posted and fetched, the target idle and
# busy; syncmem and rc_verbs,ud_verbs, each with UCP's atomics as it picks
# them (UCX_ATOMIC_MODE's default) and with UCX_ATOMIC_MODE=cpu, and
# syncmem with UCX_SYNCMEM_AMO_GUESS_WORDS=0 (its emulation when its
# guesses miss: every update two round trips). Rows in
# gups.csv (the output in gups.log); a phase a pair did not measure (it
# failed, found a wrong value, printed no line or a rate of 0) is nan.
# SYNCMEM_GUPS_APIS (default "ucp shmem") narrows it.
gups_main() {
    reps=$1 out=$2
    pms=${SYNCMEM_PASSIVE_MS:-600}
    apis=$(passive_apis "${SYNCMEM_GUPS_APIS:-ucp shmem}")
    echo "api,op,target,transport,setting,rep,window,rate,slowdown" > "$out/gups.csv"
    : > "$out/gups.log"
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for api in $apis; do
            for tl in syncmem rc_verbs; do
                settings="default cpu"
                [ "$tl" != syncmem ] || settings="$settings noguess"
                for setting in $settings; do
                    echo "   [rep $rep/$reps] gups $api $tl $setting" >&2
                    echo "== rep $rep $api $tl $setting" >> "$out/gups.log"
                    passive_pair "$api" "$tl" gups "$setting" > "$out/gups.one"
                    cat "$out/gups.one" >> "$out/gups.log"
                    bad=$(grep -E "failed: exit|wrong=[1-9]" "$out/gups.one" | head -n 1)
                    for op in xor_post xor_fetch; do
                        for target in idle busy; do
                            # window,rate,slowdown (busy only)
                            row=$(sed -n "s/^gups op=$op target=$target window=\([0-9]*\) updates=[0-9]* sec=[0-9.]* rate=\([0-9.]*\)\( slowdown=\([0-9.]*\)\)*\$/\1,\2,\4/p" \
                                  "$out/gups.one" | head -n 1)
                            rate=${row#*,}; rate=${rate%,*}
                            why=
                            if [ -n "$bad" ]; then why="$bad (gups.log)"
                            elif [ -z "$row" ]; then why="no line for it in the output (gups.log)"
                            elif [ "$rate" = 0 ]; then why="no update completed (gups.log)"
                            elif [ "$target" = busy ] && [ -z "${row##*,}" ]; then why="no slowdown in its line (gups.log)"
                            fi
                            if [ -n "$why" ]; then
                                failed_run "gups $api $op $target $tl $setting rep $rep" "$why"
                                row="${row%%,*},nan,"
                                [ "$target" != busy ] || row=${row}nan
                            fi
                            echo "$api,$op,$target,$tl,$setting,$rep,$row" >> "$out/gups.csv"
                        done
                    done
                    rm -f "$out/gups.one"
                done
            done
        done
        rep=$((rep + 1))
    done
}

# What an endpoint costs as a worker connects to many (contrib/bench/scale.c,
# each N in a process of its own): syncmem, syncmem_norc
# (UCX_SYNCMEM_RECONNECT=n) and rc_verbs, $reps times. The three
# transports' runs of one N follow each other, which first rotating rep by
# rep, so that each rep compares runs seconds apart (tables_scale.py takes
# each rep's ratio), not minutes: one transport's whole list of N takes
# minutes. Each process is pinned to the last CPU (taskset): unpinned, a
# process's put latency at N = 1 was about 19 or about 30 us by where the
# scheduler put it, for every transport, while pinned all six of
# syncmem's came out at 18.8-19.6 us. The client on $SYNCMEM_DEV0, its
# peer on SYNCMEM_DEV1 in a two-host guest, else on the same port. Not in a run without --only: at
# N = 1024 it makes 2048 QPs a transport, and the run takes minutes; the
# guest's rxe may refuse some (an N it could not measure is nan, and says
# why).
scale_main() {
    reps=$1 out=$2
    ns=${SYNCMEM_SCALE_N:-1,16,64,256,1024}
    "$top/contrib/bench/scale" -H > "$out/scale.csv"
    : > "$out/scale.log"
    : > "$out/scale.info"
    pin=
    if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
        pin="taskset -c $(($(nproc) - 1))"
    fi
    rep=1
    while [ "$rep" -le "$reps" ]; do
        case $((rep % 3)) in
            1) tls="syncmem syncmem_norc rc_verbs" ;;
            2) tls="syncmem_norc rc_verbs syncmem" ;;
            0) tls="rc_verbs syncmem syncmem_norc" ;;
        esac
        for n in $(echo "$ns" | tr , ' '); do
            for tl in $tls; do
                echo "   [rep $rep/$reps] scale $tl, N = $n" >&2
                echo "== rep $rep $tl N=$n" >> "$out/scale.log"
                case $tl in
                    syncmem_norc) set -- env UCX_SYNCMEM_RECONNECT=n ;;
                    *)            set -- env ;;
                esac
                prc=0
                # shellcheck disable=SC2086 # ($pin: words)
                "$@" $pin "$top/contrib/tools/syncmem-run" "$top/contrib/bench/scale" \
                    -t "${tl%_norc}" -T "$tl" -R "$rep" -d "$dev" \
                    -D "${SYNCMEM_DEV1:-$dev}" -n "$n" \
                    > "$out/scale.one" 2>> "$out/scale.log" || prc=$?
                cat "$out/scale.one" >> "$out/scale.log"
                grep '^# .*: max_qp' "$out/scale.one" >> "$out/scale.info" || true
                grep -v '^#' "$out/scale.one" >> "$out/scale.csv" || true
                # (an N it could not measure is a row of nan and why)
                grep -v '^#' "$out/scale.one" | awk -F, '
                    {for (i = 4; i < NF; i++) if ($i == "nan") {print $2 " " $NF; next}}' |
                    while read -r n1 why; do
                        failed_run "scale $tl N=$n1 rep $rep" "$why"
                    done
                if [ "$prc" -ne 0 ] && ! grep -q '^[a-z]' "$out/scale.one"; then
                    failed_run "scale $tl N=$n rep $rep" "scale exited $prc with no row (scale.log)"
                fi
            done
        done
        rep=$((rep + 1))
    done
    sort -u "$out/scale.info" -o "$out/scale.info"
    rm -f "$out/scale.one"
}

# plot DIR: bandwidth.png and latency.png from DIR/sweep.csv: each point the
# median of the reps, its bar from the lowest to the highest; the title
# names the run (bench.meta's date, commit, kernel and UCX)
plot() {
    command -v gnuplot >/dev/null || { echo "(gnuplot missing: no plots)"; return 0; }
    python3 "$top/contrib/bench/tables.py" plot-data "$1" "$1" || return 1
    run=$(python3 "$top/contrib/bench/tables.py" plot-title "$1")
    rc=0
    gnuplot <<GP || rc=$?
set terminal pngcairo size 960,640 font ",11"
set termoption noenhanced
set logscale x 2
set format x "%.0b %BB"
set grid
set key top left
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
set xlabel "message size (bytes)"
set output "$1/bandwidth.png"
set title "put bandwidth on Soft-RoCE (rxe, emulated guest): higher is better\n$run"
set ylabel "MB/s"
set yrange [0:*]
# (the transports' points a little apart, so that their bars show)
plot "$1/bw.ib_verbs" u (\$1*0.94):2:3:4 w yerrorlines lw 2 dt 2 t "raw verbs (ib_write_bw): ceiling", \
     "$1/bw.syncmem"  u 1:2:3:4 w yerrorlines lw 2 t "syncmem put_zcopy", \
     "$1/bw.rc_verbs" u (\$1*1.06):2:3:4 w yerrorlines lw 2 t "UCX rc_verbs put_zcopy"
set output "$1/latency.png"
set title "put latency on Soft-RoCE (rxe, emulated guest): lower is better\n$run"
set ylabel "usec"
set yrange [0:*]
plot "$1/lat.ib_verbs" u (\$1*0.94):2:3:4 w yerrorlines lw 2 dt 2 t "raw verbs (ib_write_lat)", \
     "$1/lat.syncmem"  u 1:2:3:4 w yerrorlines lw 2 t "syncmem put_bcopy", \
     "$1/lat.rc_verbs" u (\$1*1.06):2:3:4 w yerrorlines lw 2 t "UCX rc_verbs put_bcopy"
GP
    rm -f "$1"/bw.* "$1"/lat.*
    [ $rc -eq 0 ] || { echo "bench.sh: gnuplot failed ($rc)" >&2; return 1; }
    echo "== plots: $1/bandwidth.png $1/latency.png"
}

# plot_scale DIR: scale.png from DIR/scale.csv: the resident memory per
# endpoint against N of each transport (the median of the reps, its bar
# from the lowest to the highest), and its malloc'd part (dashed)
plot_scale() {
    command -v gnuplot >/dev/null || { echo "(gnuplot missing: no plots)"; return 0; }
    tls=$(python3 "$top/contrib/bench/tables.py" scale-plot-data "$1" "$1") || return 1
    run=$(python3 "$top/contrib/bench/tables.py" plot-title "$1")
    lines='' i=0
    for t in $tls; do
        i=$((i + 1))
        lines="$lines${lines:+, }\"$1/scale-data.$t\" u 1:2:3:4 w yerrorlines lw 2 lc $i t \"$t: resident\""
        lines="$lines, \"$1/scale-data.$t\" u 1:5 w linespoints lw 1 dt 2 lc $i t \"$t: malloc'd\""
    done
    rc=0
    gnuplot <<GP || rc=$?
set terminal pngcairo size 960,640 font ",11"
set termoption noenhanced
set logscale x 2
set logscale y 10
set grid
set key top right
set offsets graph 0.03, graph 0.03, 0, 0
set xlabel "endpoints per worker (N)"
set ylabel "kB per endpoint, both ends (log scale)"
set output "$1/scale.png"
set title "memory per endpoint on Soft-RoCE (rxe, emulated guest): lower is better\n$run"
plot $lines
GP
    rm -f "$1"/scale-data.*
    [ $rc -eq 0 ] || { echo "bench.sh: gnuplot failed ($rc)" >&2; return 1; }
    echo "== plot: $1/scale.png"
}

if [ "$1" = --in-guest ]; then
    shift
    guest_main "$@"
    # a run that gave no number fails the bench (guest_main listed them)
    [ ! -s "$top/bench-results/failed.txt" ] || exit 1
    exit 0
fi

if [ "$1" = --plot ]; then
    d=${2:-$top/bench-results}
    # (the sweep's plots; the scale section's where there is a scale.csv)
    if [ -f "$d/sweep.csv" ] || [ ! -f "$d/scale.csv" ]; then plot "$d"; fi
    [ ! -f "$d/scale.csv" ] || plot_scale "$d"
    exit 0
fi

if [ "$1" = --tables ]; then
    exec python3 "$top/contrib/bench/tables.py" bench "${2:-$top/bench-results}"
fi

# --- on the host -----------------------------------------------------------

reps=3 only='' sweep=yes min_size=0 max_size=4194304 markdown=''
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help)  sed -n '3,65s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --no-build) nobuild=1 ;;
        --reps)     reps=$2; shift ;;
        --only)     only=$2; shift ;;
        --sweep)    sweep=yes ;;
        --no-sweep) sweep=no ;;
        --min-size) min_size=$2; shift ;;
        --max-size) max_size=$2; shift ;;
        --markdown) [ -n "$2" ] || { echo "bench.sh: --markdown needs a FILE" >&2; exit 2; }
                    markdown="$markdown
$2"; shift ;;
        *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# (the tables: contrib/bench/tables.py)
if ! command -v python3 >/dev/null; then
    if [ -n "$nobuild" ] || ! config/apt-install.sh python3; then
        echo "bench.sh: python3 is needed for the tables (contrib/bench/tables.py)" >&2; exit 2
    fi
fi
[ -n "$nobuild" ] || contrib/bootstrap.sh
# The mpi_scale section wants the two-host guest and time (mpi_scale.sh)
guest=
if [ -n "$only" ] && echo mpi_scale | grep -qE "^($only)"; then
    guest=$(mpi_scale_guest_args "$reps")
fi
rc=0
# shellcheck disable=SC2086 # ($guest: words)
contrib/guest/guest.sh $guest -- "$top/contrib/bench.sh" --in-guest "$reps" "$only" \
    "$sweep" "$min_size" "$max_size" || rc=$?
# The numbers: medians, ratios and tables, from the CSVs just written
python3 contrib/bench/tables.py bench "$top/bench-results" || { [ $rc -ne 0 ] || rc=1; }
set -f; ifs=$IFS; IFS='
'
for f in $markdown; do
    IFS=$ifs
    # (with the tables, the plots they show go into doc/plots/: the
    # sweep's, the scale section's, as far as the run made them)
    python3 contrib/bench/tables.py bench "$top/bench-results" --markdown "$f" \
        --plots "$top/doc/plots" ||
        { [ $rc -ne 0 ] || rc=1; }
done
IFS=$ifs
exit $rc
# SPDX-License-Identifier: BSD-3-Clause
