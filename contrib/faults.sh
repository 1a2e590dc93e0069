#!/usr/bin/env bash
#
# faults.sh: the fault bench. Boots one two-host guest (rxe0 on smv0
# 10.77.1.1, rxe1 on smv1 10.77.1.2, a veth pair: a real wire for Soft-RoCE)
# and, in that one boot, breaks the wire under a stream of verified UCP
# puts, gets, fetch-adds and active messages (contrib/faults, client on
# rxe0 pinned to CPU 0, server on rxe1 pinned to CPU 1):
#   loss_1pct, loss_10pct  tc netem loss on smv0 and smv1
#   flap_0.5s/5s/30s       ip link set smv0 down; sleep; up (mid-stream)
#   peer_killed            kill -9 of the server mid-stream; a new server
#                          is started on the same state 1 s later
#   qp_error               UCX_SYNCMEM_FAULT_QP_ERROR=2s: the client's QPs
#                          forced to the error state every 2 s (syncmem
#                          only: rc_verbs has no such knob, its row is n/a)
# for syncmem with reconnect on (UCX_SYNCMEM_RECONNECT=y), with it off
# (syncmem-noreconnect), and UCX's rc_verbs (UCX_TLS=rc_verbs,ud_verbs),
# with the same short RC timeouts (10 ms, 3 retries) for both transports.
# Prints a table and writes bench-results/faults.csv:
#   transport,scenario,ops_ok,ops_failed,lost,duplicated,corrupted,
#   reconnects,hang,recovery_ms,ep_recreated
# (README, "Faults", says what each column means), and every process's
# output under bench-results/faults/.
#
#   contrib/faults.sh [--quick] [--tls syncmem|rc_verbs|both] [--only REGEX]
#
#   --quick        a subset with short durations (< 5 min, for make check);
#   --tls          which transports (default both; syncmem includes
#                  syncmem-noreconnect);
#   --only REGEX   rows whose "transport/scenario" matches.
# Exits 1 if any row has lost, duplicated, corrupted or hang != 0, or a
# row could not be measured; 0 otherwise. Needs 'make' first.
#
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
prog=faults.sh

say() { echo "$prog: $*" >&2; }

# --- inside the guest ---------------------------------------------------------

# The RC settings of both transports: fail a dead wire in ~70 ms rather
# than seconds, so that a flap is a failure and not only a delay.
RC_TIMEOUT=10ms RC_RETRY=3
QP_ERROR_INTERVAL=2s

# tl_env TRANSPORT: the environment of both processes, one VAR=VALUE a line
tl_env() {
    case $1 in
        syncmem|syncmem-noreconnect)
            echo UCX_TLS=syncmem
            echo "UCX_SYNCMEM_RC_TIMEOUT=$RC_TIMEOUT"
            echo "UCX_SYNCMEM_RC_RETRY_COUNT=$RC_RETRY"
            if [[ $1 == syncmem ]]; then echo UCX_SYNCMEM_RECONNECT=y
            else
                echo UCX_SYNCMEM_RECONNECT=n
                # 'auto' is off without reconnect; Soft-RoCE's wedge (a QP
                # that neither retransmits nor fails after a flap) would
                # hang the row: the stall check makes it a clean failure
                echo UCX_SYNCMEM_RC_STALL_TIMEOUT=2s
            fi
            # the reconnect lines are diag level
            echo UCX_LOG_LEVEL=diag
            "$top/contrib/syncmem-run" --print ;;
        rc_verbs)
            echo UCX_TLS=rc_verbs,ud_verbs
            # Debian 12's UCX 1.13 ud_verbs on rxe drops everything otherwise
            echo UCX_UD_VERBS_ETH_DGID_CHECK=n
            echo "UCX_RC_TIMEOUT=$RC_TIMEOUT"
            echo "UCX_RC_RETRY_COUNT=$RC_RETRY" ;;
    esac
}

# The veth's policy routes (guest-init.sh) are removed with the link: put
# them back. A blackhole behind them (metric 4096) keeps a downed link
# down: without it, the lookup falls through to the local table and rxe
# delivers the packets through lo, around the cut.
# The blackhole would also catch a device's packets to its own address
# (rxe looks its routes up with the netdev as the output device, which the
# peer's route does not match): the kernel then takes the address for one
# on the link, rxe0's packets to 10.77.1.1 leave through smv0 and rxe1
# drops them, and an endpoint to its own iface never connects (Open MPI
# makes one to itself in each rank: its one-sided window timed out). A
# local route for the device's own address, ahead of the blackhole, keeps
# those on the host, as without the blackhole.
routes() {
    ip route replace 10.77.1.2 dev smv0 src 10.77.1.1 table 100
    ip route replace 10.77.1.1 dev smv1 src 10.77.1.2 table 101
    ip route replace local 10.77.1.2 dev smv1 table 100 metric 1
    ip route replace local 10.77.1.1 dev smv0 table 101 metric 1
    ip route replace blackhole 10.77.1.2 table 100 metric 4096
    ip route replace blackhole 10.77.1.1 table 101 metric 4096
}

# routes_ok: each device's packets to its own address stay on the host
routes_ok() {
    local r
    r=$(ip route get 10.77.1.1 from 10.77.1.1 oif smv0
        ip route get 10.77.1.2 from 10.77.1.2 oif smv1)
    [[ $(grep -c '^local ' <<<"$r") == 2 ]] ||
        { echo "FAIL: a device's own address is routed off the host:"; echo "$r"; return 1; }
}

heal() {
    local d
    for d in smv0 smv1; do
        tc qdisc del dev "$d" root 2>/dev/null || true
        ip link set "$d" up
    done
    routes
}

loss() {
    local d
    for d in smv0 smv1; do tc qdisc replace dev "$d" root netem loss "$1%"; done
}

# (Every wait below has a deadline in seconds ($SECONDS), not a number of
# 'sleep 0.1' rounds: under TCG a round costs several times 0.1 s.)

# knob_known NAME: this build of syncmem has the setting UCX_SYNCMEM_NAME
knob_known() {
    # (not grep -q: ucx_info would die of SIGPIPE, and pipefail says no)
    "$top/contrib/syncmem-run" ucx_info -c -f 2>/dev/null |
        grep -c "^UCX_SYNCMEM_$1=" >/dev/null
}

# run_row TRANSPORT SCENARIO: one measurement; appends to $csv and $table
run_row() {
    local tl=$1 sc=$2
    # the target's memory: tmpfs (registered and mapped by two processes)
    local st=/dev/shm/faults-state-$tl-$sc log=$out/faults/$tl-$sc
    local pre=1.5 post=$POST len=0 fault_env=() env=() t_restore='' t_fault='' note=''
    local spid cpid crc=0 hang=0 i limit res
    case $sc in
        loss_1pct|loss_10pct) len=$LOSS_SECS ;;
        flap_*) len=${sc#flap_}; len=${len%s} ;;
        # (syncmem gives a dead peer RECONNECT_TIMEOUT, 5 s, before the
        # application sees it and can go to the new server)
        peer_killed) len=1 post=$((POST > 10 ? POST : 10)) ;;
        qp_error) len=$QP_SECS
            if [[ $tl == rc_verbs ]]; then
                row "$tl" "$sc" n/a "rc_verbs has no knob to force a QP to error"; return
            fi
            if ! knob_known FAULT_QP_ERROR; then
                row "$tl" "$sc" n/a "UCX_SYNCMEM_FAULT_QP_ERROR is not in this build"; return
            fi
            fault_env=("UCX_SYNCMEM_FAULT_QP_ERROR=$QP_ERROR_INTERVAL") ;;
    esac
    mapfile -t env <<<"$(tl_env "$tl")"
    rm -rf "$st"; mkdir -p "$st"
    heal
    say "$tl $sc"

    env "${env[@]}" UCX_NET_DEVICES=rxe1:1 taskset -c 1 \
        "$top/contrib/faults" server "$st" >"$log.server" 2>&1 &
    spid=$!
    env "${env[@]}" "${fault_env[@]}" UCX_NET_DEVICES=rxe0:1 taskset -c 0 \
        "$top/contrib/faults" client "$st" \
        "$(awk -v a="$pre" -v b="$len" -v c="$post" 'BEGIN {print a + b + c}')" \
        >"$log.client" 2>&1 &
    cpid=$!

    # the fault, timed from the client's first completed batch
    i=$((SECONDS + 120))
    while ((SECONDS < i)); do
        [[ -e $st/streaming ]] && break
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -e $st/streaming ]]; then
        sleep "$pre"
        case $sc in
            loss_1pct|loss_10pct)
                t_fault=$(date +%s.%N); loss "${sc//[^0-9]/}"; sleep "$len"
                heal; t_restore=$(date +%s.%N) ;;
            flap_*)
                t_fault=$(date +%s.%N)
                ip link set smv0 down; sleep "$len"; ip link set smv0 up
                t_restore=$(date +%s.%N); routes
                # every QP's state 3 s after the link came back: for the
                # post-mortem of a row that did not recover
                { sleep 3; rdma resource show qp; } >"$log.qps" 2>&1 & ;;
            peer_killed)
                t_fault=$(date +%s.%N); kill -9 "$spid"; wait "$spid" 2>/dev/null || true
                sleep "$len"
                env "${env[@]}" UCX_NET_DEVICES=rxe1:1 taskset -c 1 \
                    "$top/contrib/faults" server "$st" >"$log.server2" 2>&1 &
                spid=$!
                t_restore=$(date +%s.%N) ;;
        esac
    else
        note="never streamed"
    fi

    # the client's own watchdog says hang after 60 s without a completion;
    # this is the backstop
    limit=$(awk -v a="$post" 'BEGIN {print int(a + 200)}')
    i=$((SECONDS + limit))
    while ((SECONDS < i)); do
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$cpid" 2>/dev/null; then
        kill -9 "$cpid" 2>/dev/null || true
        hang=1 note="${note:+$note; }killed after ${limit}s past the fault"
    fi
    wait "$cpid" || crc=$?
    echo "faults.sh: $sc from ${t_fault:-?} to ${t_restore:-?}" >>"$log.client"
    kill -9 "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    heal

    res=$(grep '^result ' "$log.client" | tail -n 1 || true)
    [[ $res == *hang=1* ]] && hang=1
    if [[ -z $res && $hang == 1 ]]; then
        row "$tl" "$sc" hang "$note"
        return
    elif [[ -z $res ]]; then
        row "$tl" "$sc" error "${note:-no result line (client exit $crc)}; see $log.client"
        return
    fi
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
    local reconnects recovery gaveup
    # syncmem's own reconnects (diag level), on the client's endpoint
    reconnects=$(grep -c 'syncmem: ep .*reconnected to iface' "$log.client" || true)
    gaveup=$(grep -c 'syncmem: ep .*reconnect.*gave up' "$log.client" || true)
    # recovery: from the wire's return (or the new server) to the first
    # completed batch after it; for loss, the longest stall
    recovery=$(awk -v r="$t_restore" -v sc="$sc" -v max="$(get max_stall_ms)" '
        $1 == "stall" && r != "" && $2 <= r && $3 >= r && $4 == "open" { open = 1; next }
        $1 == "stall" && r != "" && $2 <= r && $3 >= r { v = ($3 - r) * 1000 }
        $1 == "stall" && r != "" && $2 <= r { cut = 1 }
        END {
            if (sc ~ /^(loss|qp_error)/ || r == "") { print max; exit }
            if (v != "") printf "%.0f\n", v; else if (open) print "none"
            else if (cut) print 0; else print "nostall"
        }' "$log.client")
    if [[ $recovery == none ]]; then
        note="${note:+$note; }not recovered when the stream ended"
    elif [[ $recovery == nostall && $hang == 0 ]]; then
        recovery=none
        note="${note:+$note; }no stall around the fault: did traffic get around it?"
    fi
    [[ $hang == 1 ]] || [[ -n $(get ops_ok) ]] || hang=1
    if [[ $hang == 1 ]]; then
        [[ -n $note ]] || note="the client's watchdog: $res"
        row "$tl" "$sc" hang "$note" "$(get ops_ok)" "$(get ops_failed)"
        return
    fi
    ((gaveup == 0)) || note="${note:+$note; }syncmem gave up reconnecting $gaveup times"
    ((reconnects == 0)) || note="${note:+$note; }syncmem's reconnects took up to $(
        sed -n 's/.*syncmem: ep .*reconnected to iface .* after \([0-9]*\) ms.*/\1/p' \
            "$log.client" | sort -n | tail -n 1) ms"
    note="${note:+$note; }$(get put) puts, $(get get) gets, $(get fadd) fetch-adds, $(get am) AMs ok/failed"
    (( $(get am_died_with_peer) == 0 )) ||
        note="$note; $(get am_died_with_peer) AMs died with the killed server"
    (( $(get connect_failed) == 0 )) ||
        note="$note; $(get connect_failed) new endpoints that failed to connect"
    row "$tl" "$sc" "$(get ops_ok),$(get ops_failed),$(get lost),$(get duplicated),$(get corrupted),$reconnects,0,$recovery,$(get ep_recreated)" "$note"
    rm -rf "$st"
}

# run_mpi_row TRANSPORT: Open MPI's one-sided (osc ucx) under a 0.5 s flap
run_mpi_row() {
    local tl=$1 sc=mpi_flap_0.5s log=$out/faults/$1-mpi_flap_0.5s
    local flag=/tmp/faults-mpi-streaming pre=1.5 len=0.5 post=$POST
    local env=() xs=() e pid rc=0 hang=0 i t_restore='' res recovery reconnects note=''
    if ! command -v mpirun >/dev/null || [[ ! -x $top/contrib/faults_mpi ]]; then
        row "$tl" "$sc" error "no mpirun or contrib/faults_mpi (Open MPI, then configure and make)"
        return
    fi
    mapfile -t env <<<"$(tl_env "$tl")"
    for e in "${env[@]}"; do xs+=(-x "$e"); done
    rm -f "$flag"; heal
    say "$tl $sc"
    # shellcheck disable=SC2016
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 --bind-to core --mca pml ucx --mca osc ucx --mca btl self \
        --mca pml_ucx_devices any --mca pml_ucx_tls any "${xs[@]}" \
        sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then d=rxe0:1; else d=rxe1:1; fi
               UCX_NET_DEVICES=$d exec "$@"' pick \
        "$top/contrib/faults_mpi" "$(awk -v a=$pre -v b=$len -v c="$post" 'BEGIN {print a + b + c}')" \
        "$flag" >"$log" 2>&1 &
    pid=$!
    i=$((SECONDS + 120))
    while ((SECONDS < i)); do
        [[ -e $flag ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -e $flag ]]; then
        sleep "$pre"
        ip link set smv0 down; sleep "$len"; ip link set smv0 up
        t_restore=$(date +%s.%N); routes
    fi
    # (faults_mpi has no watchdog of its own: 90 s past its end is a hang)
    i=$((SECONDS + post + 90))
    while ((SECONDS < i)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        # the ranks first (mpirun's children), or they poll on, orphaned
        pkill -9 -P "$pid" 2>/dev/null || true
        kill -9 "$pid" 2>/dev/null || true; hang=1
    fi
    wait "$pid" || rc=$?
    heal
    if ((hang)); then
        row "$tl" "$sc" hang "mpirun did not finish 90 s after its stream should have ended"; return
    fi
    reconnects=$(grep -c 'syncmem: ep .*reconnected to iface' "$log" || true)
    recovery=$(awk -v r="$t_restore" '$1 == "stall" && r != "" && $2 <= r && $3 >= r {
        printf "%.0f\n", ($3 - r) * 1000 }' "$log" | tail -n 1)
    res=$(grep '^result ' "$log" | tail -n 1 || true)
    if [[ -z $res ]]; then
        # the job aborted (faults_mpi's MPI_Abort, or a rank died): a clean failure
        # as long as it did not hang; what was lost cannot be counted.
        row "$tl" "$sc" "0,1,0,0,0,$reconnects,0,,0" "the job aborted (mpirun exit $rc: 3 is faults_mpi's MPI_Abort after two failed pairs in a row); see $log"
        return
    fi
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
    row "$tl" "$sc" "$(get ops_ok),$(get ops_failed),$(get lost),$(get duplicated),$(get corrupted),$reconnects,0,${recovery:-none},0" \
        "MPI_Put + MPI_Fetch_and_op, a flush after each pair (osc ucx)"
}

# row TRANSPORT SCENARIO VALUES|n/a|error|hang NOTE [OPS_OK OPS_FAILED]
row() {
    local v=$3
    case $v in
        n/a)   v=n/a,n/a,n/a,n/a,n/a,n/a,n/a,n/a,n/a ;;
        # (a row that could not be measured fails the run, except rc_verbs's:
        # UCX's own transport dying, e.g. ud_verbs's Fatal after a flap, is
        # a result to show, not ours to gate on)
        error) v=,,,,,,,,; [[ $1 == rc_verbs ]] || bad=1 ;;
        # (ops_ok and ops_failed so far, the pending ones failed; the
        # target was not checked: '-')
        hang)  v=${5:-},${6:-},-,-,-,,1,,; bad=1 ;;
    esac
    IFS=, read -r ok failed lost dup corr rec hang recov recr <<<"$v"
    # (an unmeasured row was judged above: its empty columns are no verdict)
    [[ $3 == error ]] ||
        { [[ $lost == 0 || $lost == n/a ]] && [[ $dup == 0 || $dup == n/a ]] &&
          [[ $corr == 0 || $corr == n/a ]] && [[ $hang == 0 || $hang == n/a ]]; } ||
        bad=1
    echo "$1,$2,$v" >>"$csv"
    printf '%-20s %-12s %8s %7s %5s %5s %6s %6s %5s %9s %6s  %s\n' "$1" "$2" \
        "$ok" "$failed" "$lost" "$dup" "$corr" "$rec" "$hang" "$recov" "$recr" \
        "$4" >>"$table"
    say "  -> $v${4:+ ($4)}"
}

guest_main() {
    local quick=$1 tls=$2 only=$3 rows tl sc t0
    out=$top/bench-results
    csv=$out/faults.csv table=$out/faults.table bad=0
    mkdir -p "$out/faults"
    rm -f "$out"/faults/*.client "$out"/faults/*.server*
    t0=$(date +%s)
    if [[ $quick == yes ]]; then
        LOSS_SECS=4 QP_SECS=5 POST=4
        rows="syncmem/loss_1pct syncmem/flap_0.5s syncmem/peer_killed syncmem/qp_error
syncmem-noreconnect/flap_0.5s rc_verbs/loss_1pct rc_verbs/flap_0.5s"
    else
        LOSS_SECS=15 QP_SECS=10 POST=8
        rows=
        for tl in syncmem syncmem-noreconnect rc_verbs; do
            for sc in loss_1pct loss_10pct flap_0.5s flap_5s flap_30s peer_killed qp_error \
                      mpi_flap_0.5s; do
                rows+="$tl/$sc"$'\n'
            done
        done
    fi
    case $tls in
        syncmem)  rows=$(grep '^syncmem' <<<"$rows" || true) ;;
        rc_verbs) rows=$(grep '^rc_verbs/' <<<"$rows" || true) ;;
    esac
    [[ -z $only ]] || rows=$(grep -E -- "$only" <<<"$rows" || true)

    # (the guest has no /dev/fd: no process substitution in this script)
    if ! "$top/contrib/syncmem-run" --print >/dev/null; then
        ls -la "$top/.libs" "$top/contrib/syncmem-run" >&2 || true
        echo "FAIL: syncmem-run cannot find the module"; return 1
    fi
    echo "transport,scenario,ops_ok,ops_failed,lost,duplicated,corrupted,reconnects,hang,recovery_ms,ep_recreated" >"$csv"
    : >"$table"
    routes; routes_ok || return 1
    for r in $rows; do
        if [[ ${r#*/} == mpi_* ]]; then run_mpi_row "${r%%/*}"
        else run_row "${r%%/*}" "${r#*/}"; fi
    done

    local rec=absent
    knob_known RECONNECT && rec="present (default $("$top/contrib/syncmem-run" ucx_info -c -f 2>/dev/null | sed -n 's/^UCX_SYNCMEM_RECONNECT_TIMEOUT=//p' | head -n 1) deadline)"
    echo "== fault bench, $(date -u +%F), UCX $(ucx_info -v | sed -n 's/^# Version //p'), kernel $(uname -r), $( [[ $quick == yes ]] && echo quick || echo full) run, $(( $(date +%s) - t0 )) s"
    echo "   RC timeout $RC_TIMEOUT, $RC_RETRY retries on both transports (UCX_SYNCMEM_RC_*, UCX_RC_*);"
    echo "   syncmem's reconnect (UCX_SYNCMEM_RECONNECT) in this build: $rec."
    echo "   loss for ${LOSS_SECS}s, qp_error for ${QP_SECS}s every $QP_ERROR_INTERVAL; ${POST}s of stream after each fault."
    printf '%-20s %-12s %8s %7s %5s %5s %6s %6s %5s %9s %6s  %s\n' transport scenario \
        ops_ok failed lost dup corrupt reconn hang recov_ms ep_new note
    cat "$table"
    # the same as a markdown table, for the README
    awk -F, 'NR == 1 { gsub(/,/, " | "); print "| " $0 " |"; gsub(/[^|]+/, " --- ");
                       print "|" $0 "|"; next }
             { gsub(/,/, " | "); print "| " $0 " |" }' "$csv" >"$out/faults.md"
    echo "   csv: $csv (markdown: $out/faults.md); each process's output: $out/faults/"
    rm -f "$table"
    if ((bad)); then
        echo "FAIL: a row has lost, duplicated, corrupted or hang != 0, or was not measured"
        return 1
    fi
    echo "PASS: lost, duplicated, corrupted and hang are 0 in every row"
}

if [[ ${1:-} == --in-guest ]]; then
    shift
    guest_main "$@"
    exit
fi

quick=no tls=both only=
while (($#)); do
    case $1 in
        -h|--help) sed -n '3,31s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --quick) quick=yes ;;
        --tls) tls=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
    shift
done
[[ $tls == syncmem || $tls == rc_verbs || $tls == both ]] ||
    { say "--tls must be syncmem, rc_verbs or both"; exit 2; }
[[ -x $top/contrib/faults && -x $top/contrib/syncmem-run ]] ||
    { say "contrib/faults is not built: run make first"; exit 2; }
exec contrib/guest.sh --two-hosts --timeout 3600 -- \
    "$top/contrib/faults.sh" --in-guest "$quick" "$tls" "$only"
