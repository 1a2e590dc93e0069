# shellcheck shell=sh disable=SC2154 # ($top, $dev, $out: bench.sh's)
#
# mpi_scale.sh: bench.sh's mpi_scale section (contrib/bench/mpi_scale.c's
# Open MPI jobs), sourced by contrib/bench.sh ('.'), whose failed_run,
# ucp_env, $top and $dev it uses: mpi_scale_main and mpi_scale_rows in the
# guest, mpi_scale_guest_args on the host.
#
# SPDX-License-Identifier: BSD-3-Clause

# MPI over many endpoints (contrib/bench/mpi_scale.c): Open MPI jobs of P
# ranks (P in SYNCMEM_MPI_SCALE_NP, default "4 8 16 24"), each rank talking to
# every other: MPI_Alltoall at 8 B, 1 KiB and 16 KiB a pair, MPI_Fetch_and_op
# between all pairs (pml ucx, osc ucx), and each rank's resident memory;
# UCX_TLS=syncmem and UCX_TLS=rc_verbs,ud_verbs, $reps times, interleaved.
# The host side boots the two-host guest for it: even ranks on
# $SYNCMEM_DEV0 (rxe0), odd ones on SYNCMEM_DEV1 (rxe1), so that half of
# the pairs cross the veth (in a one-host guest all are on $dev).
# What the guest carries (2 vCPUs, 4 GiB, TCG), from UCX 1.13's and
# syncmem's defaults: a rank has two UCP workers (pml ucx's, and osc ucx's
# from the first window on), and each pre-posts its receive buffers.
# rc_verbs: 4095 x 8 KiB (RC_VERBS_RX_QUEUE_LEN, SEG_SIZE) = 33 MiB, and
# ud_verbs 4096 MTU-sized ones (rxe's 1 KiB on a 1500-byte netdev) = 5 MiB,
# about 40 MiB a worker, 80 a rank; syncmem: 1024 x 8 KiB of receive and
# 256 of send buffers = 10 MiB a worker, 20 a rank; Open MPI and UCX
# themselves some 20-30 MiB. So about 110 MiB a rank over rc_verbs, 50 over
# syncmem: 16 ranks take some 1.8 GiB, 24 about 2.6, 32 about 3.5 of the
# 4 GiB, which the guest's kernel, rxe's queues and the tmpfs overlay
# share. Measured: 24 run over both (rc_verbs' ranks about 150 MiB each
# after the tests, syncmem's 60); at 32 the kernel kills rc_verbs' ranks,
# syncmem's run (65 MiB each). A rank the kernel kills is a failed job,
# its rows nan. Per job also what went wrong on the wire and what syncmem
# did about it (mpi_scale_counter_rows, mpi_scale_log_rows): rxe's
# counters over the job, both devices summed, and syncmem's QPs taken for
# stalled and its reconnects, counted in the job's output; for that the
# jobs of both transports run at UCX_LOG_LEVEL=diag (a 4-rank job that
# went well: 15 lines over syncmem, its handshake's REQs sent again and the
# RC timeout's estimate, none over rc_verbs). The CPUs allow that many: with
# mpi_yield_when_idle a rank waiting in MPI gives its vCPU away, so 8 ranks
# a vCPU are slow, not stuck. Every job runs under 'timeout', and
# mpi_scale gives up itself after SYNCMEM_MPI_SCALE_BUDGET seconds (300).
mpi_scale_main() {
    reps=$1 out=$2
    nps=${SYNCMEM_MPI_SCALE_NP:-4 8 16 24}
    budget=${SYNCMEM_MPI_SCALE_BUDGET:-300}
    prog=$top/contrib/bench/mpi_scale
    dev1=${SYNCMEM_DEV1:-$dev}
    echo "transport,np,rep,op,unit,median,max,note" > "$out/mpi_scale.csv"
    : > "$out/mpi_scale.log"
    # the ops a job reports ('op unit' lines); without the program, those
    # of its defaults, each nan and why
    missing=
    if ! command -v mpirun >/dev/null; then
        missing="no mpirun (Open MPI: openmpi-bin, libopenmpi-dev)"
    elif [ ! -x "$prog" ]; then
        missing="no contrib/bench/mpi_scale (Open MPI's libopenmpi-dev, then configure and make)"
    fi
    ops=$("$prog" -L 2>/dev/null) || ops="alltoall_8 us
alltoall_1024 us
alltoall_16384 us
fetch_and_op us
rss_init kB
rss_end kB
hwm_end kB"
    # (the devices as rdma names them: DEV/PORT)
    if [ "$dev1" = "$dev" ]; then
        echo "every rank on $dev" > "$out/mpi_scale.info"
        devs=$(echo "$dev" | tr : /)
    else
        echo "even ranks on $dev, odd ones on $dev1" > "$out/mpi_scale.info"
        devs=$(echo "$dev $dev1" | tr : /)
    fi
    preload=$("$top/contrib/tools/syncmem-run" --print)
    # each rank takes its device by its parity ($1 even, $2 odd)
    # shellcheck disable=SC2016 # (expanded by the rank's shell)
    pick='if [ $((OMPI_COMM_WORLD_RANK % 2)) = 0 ]; then d=$1; else d=$2; fi
          shift 2; UCX_NET_DEVICES=$d exec "$@"'
    tmo=$((budget + 60))
    rep=1
    while [ "$rep" -le "$reps" ]; do
        # the two transports' jobs back to back, which first alternating
        # rep by rep (tables_mpi.py takes each rep's ratio)
        tls="syncmem rc_verbs"
        [ $((rep % 2)) = 1 ] || tls="rc_verbs syncmem"
        for np in $nps; do
            for tl in $tls; do
                echo "   [rep $rep/$reps] mpi_scale np=$np $tl" >&2
                echo "== rep $rep np=$np $tl" >> "$out/mpi_scale.log"
                # UCP's environment for TL but the device, which the rank picks
                xs=$(ucp_env "$tl" | tr ' ' '\n' | sed -n 's/^UCX_NET_DEVICES=.*//; /./s/^/-x /p')
                mpi_scale_snap "$out/mpi_scale.before"
                t0=$(date +%s) prc=0
                if [ -n "$missing" ]; then
                    echo "$missing" > "$out/mpi_scale.one"; prc=127
                else
                    # shellcheck disable=SC2086 # ($xs: words)
                    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
                        timeout -k 15 "$tmo" mpirun -np "$np" --oversubscribe \
                        --bind-to none --mca mpi_yield_when_idle 1 \
                        --mca pml ucx --mca osc ucx --mca btl self \
                        --mca pml_ucx_devices any --mca pml_ucx_tls any \
                        $xs -x UCX_LOG_LEVEL=diag -x "$preload" sh -c "$pick" pick "$dev" "$dev1" \
                        "$prog" -b "$budget" > "$out/mpi_scale.one" 2>&1 || prc=$?
                fi
                secs=$(($(date +%s) - t0))
                mpi_scale_snap "$out/mpi_scale.after"
                cat "$out/mpi_scale.one" >> "$out/mpi_scale.log"
                echo "== exit $prc after $secs s" >> "$out/mpi_scale.log"
                echo "      exit $prc after $secs s" >&2
                # why the job failed: its exit, mpi_scale's own time
                # budget, its verdict
                case $prc in
                    0)       why= ;;
                    124) why="mpirun timed out after $tmo s" ;;
                    137) if [ "$secs" -ge "$tmo" ]; then
                             why="mpirun timed out after $tmo s"
                         else
                             # (the guest's OOM killer: 32 ranks of rc_verbs)
                             why="mpirun killed after $secs s: out of memory? (dmesg)"
                         fi ;;
                    127)     why=${missing:-"mpirun exited 127"} ;;
                    *)       why="mpirun exited $prc" ;;
                esac
                over=$(sed -En 's/^mpi_scale: (rank [0-9]+ of [0-9]+|pid [0-9]+): still running after (the time budget of [0-9]+ s), in (.*); (MPI_Abort|exit)$/over \2, in \3/p' \
                       "$out/mpi_scale.one" | head -n 1)
                [ -z "$over" ] || why="$why ($over)"
                res=$(grep '^result ' "$out/mpi_scale.one" | tail -n 1)
                [ "$res" = "result ok" ] || why="${why:+$why: }${res:-no result line}"
                mpi_scale_rows "$tl" "$np" "$rep" "$why" "$ops" \
                    < "$out/mpi_scale.one" > "$out/mpi_scale.rows"
                { mpi_scale_counter_rows "$tl" "$np" "$rep" "$missing" "$devs" \
                      "$out/mpi_scale.before" "$out/mpi_scale.after"
                  mpi_scale_log_rows "$tl" "$np" "$rep" "$missing" < "$out/mpi_scale.one"
                } > "$out/mpi_scale.counts"
                cat "$out/mpi_scale.rows" "$out/mpi_scale.counts" >> "$out/mpi_scale.csv"
                # (a job that failed, left an op unmeasured, or whose
                # counts could not be read, fails)
                nan=$(grep -c ',nan,nan,' "$out/mpi_scale.rows" || true)
                cnan=$(grep -c ',nan,nan,' "$out/mpi_scale.counts" || true)
                if [ -n "$why" ] || [ "$nan" -ne 0 ]; then
                    why="${why:-result ok, but not every op measured}; $nan of $(echo "$ops" | grep -c .) ops nan"
                elif [ "$cnan" -ne 0 ]; then
                    why="result ok"
                fi
                if [ "$cnan" -ne 0 ]; then
                    why="$why; $cnan of $(grep -c '' "$out/mpi_scale.counts") counts nan: $(grep ',nan,nan,' "$out/mpi_scale.counts" | head -n 1 | cut -d, -f8-)"
                fi
                [ -z "$why" ] || failed_run "mpi_scale $tl np=$np rep $rep" "$why (mpi_scale.log)"
            done
        done
        rep=$((rep + 1))
    done
    rm -f "$out/mpi_scale.one" "$out/mpi_scale.rows" "$out/mpi_scale.counts" \
          "$out/mpi_scale.before" "$out/mpi_scale.after"
}

# mpi_scale_rows TL NP REP WHY OPS < OUTPUT: a CSV row for each op of OPS
# ('op unit' lines) from mpi_scale's output: the numbers of the op's line,
# where the ranks found nothing wrong in it (errors=0); else nan, and why
# (the op's own fault, or WHY: what happened to the job)
mpi_scale_rows() {
    awk -v tl="$1" -v np="$2" -v rep="$3" -v why="$4" -v ops="$5" '
        $1 == "mpi_scale" && $3 ~ /^op=/ {
            split("", kv)
            for (i = 2; i <= NF; i++) {
                j = index($i, "=")
                kv[substr($i, 1, j - 1)] = substr($i, j + 1)
            }
            op = kv["op"]
            if (kv["np"] != np)
                note[op] = "its line says np=" kv["np"]
            else if (("errors" in kv) && kv["errors"] != "0")
                note[op] = kv["errors"] " wrong values or blocks across the ranks"
            else if (kv["median"] !~ /^[0-9.]+$/ || kv["max"] !~ /^[0-9.]+$/)
                note[op] = "no number in its line"
            else {
                med[op] = kv["median"]; mx[op] = kv["max"]
            }
        }
        END {
            n = split(ops, line, "\n")
            for (i = 1; i <= n; i++) {
                if (split(line[i], w, " ") < 2) continue
                if (w[1] in med) {
                    print tl "," np "," rep "," w[1] "," w[2] "," med[w[1]] "," mx[w[1]] ","
                    continue
                }
                if (w[1] in note) r = note[w[1]]
                else r = (why != "") ? why : "no line for it in the output"
                gsub(/,/, ";", r)
                print tl "," np "," rep "," w[1] "," w[2] ",nan,nan," r
            }
        }'
}

# rxe's counters that a job's rows give (as 'rdma statistic show' names
# them, and their unit): packets it could not hand to the netdev, the
# requester's retransmissions (a go-back-N after a timeout or a sequence
# NAK), and QPs whose retries, or RNR retries, ran out (to error)
mpi_scale_counters="send_err packets
completer_retry_err count
retry_exceeded_err count
retry_rnr_exceeded_err count"

# mpi_scale_snap FILE: 'rdma statistic show' (every port's counters) into
# FILE; where it cannot run, or fails, a line '! why' there too
mpi_scale_snap() {
    if ! command -v rdma >/dev/null; then
        echo "! no rdma command (iproute2)" > "$1"
        return 0
    fi
    rdma statistic show > "$1" 2> "$1.err" ||
        echo "! 'rdma statistic show' exited $?: $(head -n 1 "$1.err")" >> "$1"
    rm -f "$1.err"
}

# mpi_scale_counter_rows TL NP REP MISSING DEVS BEFORE AFTER: a CSV row for
# each of $mpi_scale_counters: how much it grew from snapshot BEFORE to
# AFTER (mpi_scale_snap), summed over DEVS ('rxe0/1 rxe1/1'); nan and why
# where a snapshot failed, lacks it for a device or went back, never 0;
# with MISSING (no job ran) nan and MISSING
mpi_scale_counter_rows() {
    awk -v tl="$1" -v np="$2" -v rep="$3" -v missing="$4" -v devs="$5" \
        -v before="$6" -v counters="$mpi_scale_counters" '
        { f = (FILENAME == before) ? "before" : "after" }
        /^!/ { bad[f] = substr($0, 3); next }
        $1 == "link" { for (i = 3; i < NF; i += 2) v[f, $2, $i] = $(i + 1) }
        END {
            nd = split(devs, dev, " ")
            n = split(counters, line, "\n")
            for (i = 1; i <= n; i++) {
                if (split(line[i], w, " ") < 2) continue
                c = w[1]; sum = 0; why = missing
                for (j = 1; j <= nd && why == ""; j++) {
                    for (k = 1; k <= 2 && why == ""; k++) {
                        f = (k == 1) ? "before" : "after"
                        if (f in bad)
                            why = bad[f] " (" f " the job)"
                        else if (!((f, dev[j], c) in v))
                            why = "no " c " of " dev[j] " in rdma statistic show (" f " the job)"
                        else if (v[f, dev[j], c] !~ /^[0-9]+$/)
                            why = c " of " dev[j] " is " v[f, dev[j], c] " (" f " the job)"
                    }
                    if (why == "" && v["after", dev[j], c] < v["before", dev[j], c])
                        why = c " of " dev[j] " went back from " v["before", dev[j], c] \
                              " to " v["after", dev[j], c]
                    sum += v["after", dev[j], c] - v["before", dev[j], c]
                }
                if (why == "") {
                    print tl "," np "," rep "," c "," w[2] "," sum "," sum ","
                    continue
                }
                gsub(/,/, ";", why)
                print tl "," np "," rep "," c "," w[2] ",nan,nan," why
            }
        }' "$6" "$7"
}

# mpi_scale_log_rows TL NP REP MISSING < OUTPUT: syncmem's rows
# stalled_qps (its watchdog took a QP for wedged: 'taking the QP for
# wedged', syncmem_watchdog.c) and reconnects ('failed at request ...;
# reconnecting', syncmem_reconnect.c), counted in the job's output
# (UCX_LOG_LEVEL=diag); with MISSING (no job ran) nan and MISSING. None
# for rc_verbs, which neither takes QPs for stalled nor reconnects (an
# error there fails the job: its result line says so)
mpi_scale_log_rows() {
    [ "$1" = syncmem ] || return 0
    awk -v tl="$1" -v np="$2" -v rep="$3" -v missing="$4" '
        /syncmem: .*taking the QP for wedged/ { stalled++ }
        /syncmem: .* failed at request [0-9]+ \(.*\); reconnecting/ { reconnects++ }
        END {
            gsub(/,/, ";", missing)
            if (missing != "") {
                print tl "," np "," rep ",stalled_qps,count,nan,nan," missing
                print tl "," np "," rep ",reconnects,count,nan,nan," missing
                exit
            }
            print tl "," np "," rep ",stalled_qps,count," stalled + 0 "," stalled + 0 ","
            print tl "," np "," rep ",reconnects,count," reconnects + 0 "," reconnects + 0 ","
        }'
}

# mpi_scale_guest_args REPS: guest.sh's arguments for the section. It wants
# the two-host guest (its ranks on rxe0 and rxe1), and time for its jobs:
# each under 'timeout' (its budget and 60 s); the guest's own limit
# (1800 s) grows by the worst case of them all
mpi_scale_guest_args() {
    set -f
    # shellcheck disable=SC2086 # (the list: words)
    set -- "$1" ${SYNCMEM_MPI_SCALE_NP:-4 8 16 24}
    set +f
    echo "--two-hosts --timeout $((1800 + $1 * ($# - 1) * 2 * (${SYNCMEM_MPI_SCALE_BUDGET:-300} + 75)))"
}
