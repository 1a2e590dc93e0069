#!/usr/bin/env bash
#
# faults.sh: the fault bench. Boots one two-host guest (rxe0 on smv0
# 10.77.1.1, rxe1 on smv1 10.77.1.2, a veth pair: a real wire for Soft-RoCE)
# and, in that one boot, breaks the wire under a stream of verified UCP
# puts, gets, fetch-adds and active messages (contrib/harness/faults, client on
# rxe0 pinned to CPU 0, server on rxe1 pinned to CPU 1):
#   loss_1pct, loss_10pct  tc netem loss on smv0 and smv1
#   flap_0.5s/5s/30s       ip link set smv0 down; sleep; up (mid-stream)
#   flaps_N                a soak: N flaps of smv0 in one stream, their
#                          lengths cycling over 0.05 0.2 0.5 1.0 0.1 0.3 s
#                          and the gaps after them over 0.1 0.5 2.0 0.3 1.0
#                          3.0 s (some shorter than a reconnect, ~1 s on
#                          Soft-RoCE: some flaps land inside one)
#   peer_killed            kill -9 of the server mid-stream; a new server
#                          is started on the same state 1 s later
#   qp_error               UCX_SYNCMEM_FAULT_QP_ERROR=2s: the client's QPs
#                          forced to the error state every 2 s (syncmem
#                          only: rc_verbs has no such knob, its row is n/a)
#   mpi_flap_0.5s          a 0.5 s flap under an Open MPI job
#                          (contrib/harness/faults_mpi, osc ucx)
# for syncmem with reconnect on (UCX_SYNCMEM_RECONNECT=y), with it off
# (syncmem-noreconnect), and UCX's rc_verbs (UCX_TLS=rc_verbs,ud_verbs),
# with the same short RC timeouts (10 ms, 3 retries) for both transports.
# This script runs the processes and breaks the wire; what they measured
# they print themselves (the client's "result", "stall", "streamed" and
# "event" lines), and contrib/harness/faults.py (python3) computes each
# row's columns and verdict from those lines and the faults' times, and
# prints the table. It writes bench-results/faults.csv:
#   transport,scenario,ops_ok,ops_failed,lost,duplicated,corrupted,
#   reconnects,hang,recovery_ms,ep_recreated
# (doc/benchmarks.md says what each column means; '-': not measured),
# faults.notes (each row's verdict and note), faults.meta (date, guest
# kernel, UCX, kind of run), and every process's output under
# bench-results/faults/ (the flaps' times in TRANSPORT-SCENARIO.faults).
#
#   contrib/harness/faults.sh [--quick] [--tls syncmem|rc_verbs|both]
#                     [--only REGEX] [--soak N | --many N[,N...]]
#                     [--markdown FILE]...
#
#   --quick        a subset with short durations (< 5 min, for make check);
#   --tls          which transports (default both; syncmem includes
#                  syncmem-noreconnect);
#   --only REGEX   rows whose "transport/scenario" matches (anchors work:
#                  '^syncmem/flap_0\.5s$'); none matching is an error;
#   --many N[,N..] only the rows flap_0.5s_nN of syncmem and rc_verbs: one
#                  0.5 s flap under N endpoints of one iface (on rxe0, to
#                  a peer iface on rxe1), all streaming verified rounds
#                  (contrib/bench/scale -F: a put, a fetch-add, a flush);
#                  its note has every endpoint's recovery (median, p99,
#                  max across them) and how many REQs were sent again;
#   --soak N       only syncmem/flaps_N (the full run has flaps_200): its
#                  note has the recovery per flap (median, p99, max; from
#                  the link's return to the end of the stall around it)
#                  and syncmem's reconnects, resumed vs onto a new QP;
#   --markdown FILE  also write the table, with verdicts, date, kernel and
#                  UCX, into FILE (contrib/bench/tables.py): between its
#                  '<!-- BEGIN generated: faults table -->' and
#                  '<!-- END generated -->' lines if it has them, else the
#                  whole file. It does not change the exit status.
#
# Verdicts: the note of each row starts with PASS or FAIL and why. A row
# of syncmem or syncmem-noreconnect fails when anything was lost,
# duplicated or corrupted, an operation hung, the row could not be measured
# (its columns are then '-', never 0), the fault cannot be shown to have
# happened (every flap's port seen DOWN and back ACTIVE, a stall around it;
# qp_error's reconnects), the stream did not recover, the client exited
# non-zero, or more operations failed than its fault allows. The full rule
# table, with the allowances: contrib/harness/faults.py --help.
# rc_verbs rows are reported for comparison, never judged ("not judged",
# and what would fail them). Exits 1 if a judged row fails or a row asked
# for has no verdict, 2 on a bad option or when no row matches (before the
# guest boots), 0 otherwise. Needs 'make' first, and python3.
#
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
prog=faults.sh

say() { echo "$prog: $*" >&2; }

# run_kind QUICK SOAK MANY: what the run is called: soak, many, quick or full
run_kind() {
    if [[ -n $2 ]]; then echo soak
    elif [[ -n ${3:-} ]]; then echo many
    elif [[ $1 == yes ]]; then echo quick
    else echo full; fi
}

# rows_of QUICK TLS ONLY SOAK MANY: a run's rows, "transport/scenario" one
# a line (so that --only's anchors work), nothing when none matches
rows_of() {
    local quick=$1 tls=$2 only=$3 soak=$4 many=${5:-} rows tl sc n
    if [[ -n $soak ]]; then
        rows=syncmem/flaps_$soak
    elif [[ -n $many ]]; then
        rows=
        for tl in syncmem rc_verbs; do
            for n in ${many//,/ }; do rows+="$tl/flap_0.5s_n$n"$'\n'; done
        done
    elif [[ $quick == yes ]]; then
        rows="syncmem/loss_1pct
syncmem/flap_0.5s
syncmem/flaps_10
syncmem/peer_killed
syncmem/qp_error
syncmem-noreconnect/flap_0.5s
rc_verbs/loss_1pct
rc_verbs/flap_0.5s"
    else
        rows=
        for tl in syncmem syncmem-noreconnect rc_verbs; do
            for sc in loss_1pct loss_10pct flap_0.5s flap_5s flap_30s flaps_N \
                      peer_killed qp_error mpi_flap_0.5s; do
                # (200 flaps take 5 min: one soak, on the transport it is for)
                if [[ $sc == flaps_N && $tl == syncmem ]]; then sc=flaps_200
                elif [[ $sc == flaps_N ]]; then sc=flaps_10; fi
                rows+="$tl/$sc"$'\n'
            done
        done
    fi
    case $tls in
        syncmem)  rows=$(grep '^syncmem' <<<"$rows" || true) ;;
        rc_verbs) rows=$(grep '^rc_verbs/' <<<"$rows" || true) ;;
    esac
    rows=${rows%$'\n'}
    [[ -z $only ]] || rows=$(grep -E -- "$only" <<<"$rows" || true)
    [[ -z $rows ]] || echo "$rows"
}

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
            "$top/contrib/tools/syncmem-run" --print ;;
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
# (One ip process: the soak's flaps wait for it.)
routes() {
    ip -batch - <<'EOF'
route replace 10.77.1.2 dev smv0 src 10.77.1.1 table 100
route replace 10.77.1.1 dev smv1 src 10.77.1.2 table 101
route replace local 10.77.1.2 dev smv1 table 100 metric 1
route replace local 10.77.1.1 dev smv0 table 101 metric 1
route replace blackhole 10.77.1.2 table 100 metric 4096
route replace blackhole 10.77.1.1 table 101 metric 4096
EOF
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

# retrans: the retransmission events both devices have counted (rxe's
# hw_counters, summed), '-' if one is unreadable; faults.py requires the
# loss to have raised them (the loss hit the traffic)
retrans() {
    local d c v sum=0
    for d in rxe0 rxe1; do
        for c in completer_retry_err rcvd_seq_err out_of_seq_request \
                 duplicate_request; do
            { read -r v <"/sys/class/infiniband/$d/ports/1/hw_counters/$c"; } \
                2>/dev/null || { echo -; return; }
            sum=$((sum + v))
        done
    done
    echo "$sum"
}

# (Every wait below has a deadline in seconds ($SECONDS), not a number of
# 'sleep 0.1' rounds: under TCG a round costs several times 0.1 s. The
# times in the logs are realtime seconds, the clients' clock: bash's
# $EPOCHREALTIME, which costs no process.)

# sleep_until USEC: sleep until the realtime clock reads USEC microseconds
sleep_until() {
    local d=$(($1 - ${EPOCHREALTIME/[.,]/})) s
    ((d > 0)) || return 0
    printf -v s '%d.%06d' $((d / 1000000)) $((d % 1000000))
    sleep "$s"
}

# flap FILE K USEC: smv0 down for USEC microseconds; appends "fault K DOWN
# UP" to FILE, each time once ip has returned (under TCG it takes ~0.1 s).
# (UP is before the routes are back: traffic was seen to flow again while
# they were being put back, which takes as long again.)
# port_state WANT VAR: VAR := rxe0's port 1 state (sysfs "1: DOWN" ->
# DOWN), read until it is WANT or 1 s has passed; "none" if unreadable.
# faults.py requires each flap's port to have gone DOWN and come back
# ACTIVE: a flap that did not happen must not pass as one survived.
port_state() {
    local _n _i=0
    while :; do
        { read -r _n "$2" </sys/class/infiniband/rxe0/ports/1/state; } 2>/dev/null ||
            printf -v "$2" none
        [[ ${!2} != "$1" && $((_i++)) -lt 20 ]] || return 0
        sleep 0.05
    done
}

flap() {
    local down up s_down s_up
    ip link set smv0 down
    down=${EPOCHREALTIME/,/.}
    port_state DOWN s_down
    sleep_until $((${down/./} + $3))
    ip link set smv0 up
    up=${EPOCHREALTIME/,/.}
    port_state ACTIVE s_up
    routes
    echo "fault $2 $down $up" >>"$1"
    echo "port $2 $s_down $s_up" >>"$1"
}

# knob_known NAME: this build of syncmem has the setting UCX_SYNCMEM_NAME
knob_known() {
    # (not grep -q: ucx_info would die of SIGPIPE, and pipefail says no)
    "$top/contrib/tools/syncmem-run" ucx_info -c -f 2>/dev/null |
        grep -c "^UCX_SYNCMEM_$1=" >/dev/null
}

# judge LOG KEY=VALUE...: writes LOG.run (what faults.py reads besides
# the processes' output: transport, scenario, kind, exit, killed, note,
# na), then has faults.py judge the row into bench-results/faults.csv and
# faults.notes. (A row it could not judge has no verdict there: the
# summary fails it.)
judge() {
    local log=$1 kv
    shift
    { for kv; do echo "$kv"; done
      echo "reconnect_timeout=$RECONNECT_TIMEOUT"; } >"$log.run"
    python3 "$faults_py" row "$log" || say "faults.py could not judge $log (exit $?)"
}

# stream_secs PRE_MS LEN_US POST_S: the stream's length in seconds (a
# fraction), what the clients take
stream_secs() {
    local t=$(($1 * 1000 + $2 + $3 * 1000000))
    printf '%d.%06d' $((t / 1000000)) $((t % 1000000))
}

# wait_for FILE PID SECS: until FILE exists, PID exits or SECS pass
wait_for() {
    local i=$((SECONDS + $3))
    while ((SECONDS < i)); do
        [[ -e $1 ]] && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    [[ -e $1 ]]
}

# run_row TRANSPORT SCENARIO: one measurement, judged by faults.py
run_row() {
    local tl=$1 sc=$2
    # the target's memory: tmpfs (registered and mapped by two processes)
    local st=/dev/shm/faults-state-$tl-$sc log=$out/faults/$tl-$sc
    local pre_ms=1500 post=$POST len_us=0 plan='' fault_env=() env=() note=''
    local spid cpid crc=0 killed=0 i limit t0 t_fault k fl gap
    rm -f "$log".*
    plan=$(python3 "$faults_py" plan "$sc")
    while read -r k fl gap; do
        [[ -z $k ]] || len_us=$((len_us + fl + gap))
    done <<<"$plan"
    case $sc in
        loss_1pct|loss_10pct) len_us=$((LOSS_SECS * 1000000)) ;;
        # (syncmem gives a dead peer RECONNECT_TIMEOUT, 5 s, before the
        # application sees it and can go to the new server)
        peer_killed) len_us=1000000 post=$((POST > 10 ? POST : 10)) ;;
        qp_error) len_us=$((QP_SECS * 1000000))
            if [[ $tl == rc_verbs ]]; then
                judge "$log" transport="$tl" scenario="$sc" kind=uct \
                    na="rc_verbs has no knob to force a QP to error"
                return
            fi
            if ! knob_known FAULT_QP_ERROR; then
                judge "$log" transport="$tl" scenario="$sc" kind=uct \
                    na="UCX_SYNCMEM_FAULT_QP_ERROR is not in this build"
                return
            fi
            fault_env=("UCX_SYNCMEM_FAULT_QP_ERROR=$QP_ERROR_INTERVAL") ;;
    esac
    mapfile -t env <<<"$(tl_env "$tl")"
    rm -rf "$st"; mkdir -p "$st"
    heal
    say "$tl $sc"

    if [[ $sc == *_n* ]]; then
        # N endpoints of one process's iface on rxe0 to a peer iface on
        # rxe1, all streaming (contrib/bench/scale_flap.c); 5 s for all of
        # them to stream before the flap, and their reconnects take longer
        # than one's
        post=$((POST > 20 ? POST : 20)) pre_ms=5000 spid=
        env "${env[@]}" "$top/contrib/bench/scale" -t "${tl%%-*}" \
            -d rxe0:1 -D rxe1:1 -n "${sc##*_n}" -w 60 -f "$st/streaming" \
            -F "$(stream_secs $pre_ms $len_us "$post")" >"$log.client" 2>&1 &
        cpid=$!
    else
        env "${env[@]}" UCX_NET_DEVICES=rxe1:1 taskset -c 1 \
            "$top/contrib/harness/faults" server "$st" >"$log.server" 2>&1 &
        spid=$!
        env "${env[@]}" "${fault_env[@]}" UCX_NET_DEVICES=rxe0:1 taskset -c 0 \
            "$top/contrib/harness/faults" client "$st" \
            "$(stream_secs $pre_ms $len_us "$post")" >"$log.client" 2>&1 &
        cpid=$!
    fi

    # the fault, timed from the client's first completed batch
    if wait_for "$st/streaming" "$cpid" 120; then
        sleep_until $((${EPOCHREALTIME/[.,]/} + pre_ms * 1000))
        t_fault=${EPOCHREALTIME/,/.}
        case $sc in
            loss_1pct|loss_10pct)
                r0=$(retrans)
                loss "${sc//[^0-9]/}"; sleep "$LOSS_SECS"; heal
                echo "fault 1 $t_fault ${EPOCHREALTIME/,/.}" >>"$log.faults"
                r1=$(retrans)
                if [[ $r0 == - || $r1 == - ]]; then
                    echo "retrans 1 -" >>"$log.faults"
                else
                    echo "retrans 1 $((r1 - r0))" >>"$log.faults"
                fi ;;
            flap_*|flaps_*)
                # on a fixed schedule: the time ip and routes take comes
                # out of the gaps, not on top of them
                t0=${t_fault/./}
                while read -r k fl gap; do
                    sleep_until "$t0"
                    flap "$log.faults" "$k" "$fl"
                    t0=$((t0 + fl + gap))
                done <<<"$plan"
                # every QP's state 3 s after the link came back: for the
                # post-mortem of a row that did not recover
                { sleep 3; rdma resource show qp; } >"$log.qps" 2>&1 & ;;
            peer_killed)
                kill -9 "$spid"; wait "$spid" 2>/dev/null || true
                sleep 1
                env "${env[@]}" UCX_NET_DEVICES=rxe1:1 taskset -c 1 \
                    "$top/contrib/harness/faults" server "$st" >"$log.server2" 2>&1 &
                spid=$!
                echo "fault 1 $t_fault ${EPOCHREALTIME/,/.}" >>"$log.faults" ;;
        esac
    else
        note="never streamed"
    fi

    # the client's own watchdog says hang after 60 s without a completion;
    # this is the backstop
    limit=$((post + 200))
    i=$((SECONDS + limit))
    while ((SECONDS < i)); do
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$cpid" 2>/dev/null; then
        kill -9 "$cpid" 2>/dev/null || true
        killed=1 note="${note:+$note; }killed after ${limit}s past the fault"
    fi
    wait "$cpid" || crc=$?
    kill -9 "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    heal
    judge "$log" transport="$tl" scenario="$sc" kind=uct exit="$crc" \
        killed="$killed" note="$note"
    rm -rf "$st"
}

# run_mpi_row TRANSPORT: Open MPI's one-sided (osc ucx) under a 0.5 s flap
run_mpi_row() {
    local tl=$1 sc=mpi_flap_0.5s log=$out/faults/$1-mpi_flap_0.5s
    local flag=/tmp/faults-mpi-streaming pre_ms=1500 post=$POST plan len_us
    local env=() xs=() e pid rc=0 killed=0 i note='' k gap
    rm -f "$flag" "$log" "$log".*
    if ! command -v mpirun >/dev/null || [[ ! -x $top/contrib/harness/faults_mpi ]]; then
        judge "$log" transport="$tl" scenario="$sc" kind=mpi exit=- \
            note="no mpirun or contrib/harness/faults_mpi (Open MPI, then configure and make)"
        return
    fi
    read -r k len_us gap <<<"$(python3 "$faults_py" plan "$sc")"
    mapfile -t env <<<"$(tl_env "$tl")"
    for e in "${env[@]}"; do xs+=(-x "$e"); done
    heal
    say "$tl $sc"
    # shellcheck disable=SC2016
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 --bind-to core --mca pml ucx --mca osc ucx --mca btl self \
        --mca pml_ucx_devices any --mca pml_ucx_tls any "${xs[@]}" \
        sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then d=rxe0:1; else d=rxe1:1; fi
               UCX_NET_DEVICES=$d exec "$@"' pick \
        "$top/contrib/harness/faults_mpi" "$(stream_secs $pre_ms "$len_us" "$post")" \
        "$flag" >"$log" 2>&1 &
    pid=$!
    if wait_for "$flag" "$pid" 120; then
        sleep_until $((${EPOCHREALTIME/[.,]/} + pre_ms * 1000))
        flap "$log.faults" 1 "$len_us"
    else
        note="never streamed"
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
        kill -9 "$pid" 2>/dev/null || true; killed=1
    fi
    wait "$pid" || rc=$?
    heal
    judge "$log" transport="$tl" scenario="$sc" kind=mpi exit="$rc" \
        killed="$killed" note="$note"
}

guest_main() {
    local quick=$1 tls=$2 only=${3:-} soak=${4:-} many=${5:-} rows r t0
    out=$top/bench-results
    faults_py=$top/contrib/harness/faults.py
    mkdir -p "$out/faults"
    rm -f "$out"/faults/* "$out/faults.csv" "$out/faults.notes"
    t0=$(date +%s)
    if [[ $quick == yes ]]; then
        LOSS_SECS=4 QP_SECS=5 POST=4
    else
        LOSS_SECS=15 QP_SECS=10 POST=8
    fi
    rows=$(rows_of "$quick" "$tls" "$only" "$soak" "$many")
    [[ -n $rows ]] || { echo "FAIL: no row matches"; return 2; }

    # (the guest has no /dev/fd: no process substitution in this script)
    if ! "$top/contrib/tools/syncmem-run" --print >/dev/null; then
        ls -la "$top/.libs" "$top/contrib/tools/syncmem-run" >&2 || true
        echo "FAIL: syncmem-run cannot find the module"; return 1
    fi
    command -v python3 >/dev/null ||
        { echo "FAIL: no python3 in the guest (contrib/harness/faults.py judges the rows)"; return 1; }
    local rec=absent
    # (its value as ucx_info prints it; faults.py reads it, 5 s if none)
    RECONNECT_TIMEOUT=
    if knob_known RECONNECT; then
        RECONNECT_TIMEOUT=$("$top/contrib/tools/syncmem-run" ucx_info -c -f 2>/dev/null |
            sed -n 's/^UCX_SYNCMEM_RECONNECT_TIMEOUT=//p' | head -n 1)
        rec="present (RECONNECT_TIMEOUT ${RECONNECT_TIMEOUT:-unknown})"
    fi
    routes; routes_ok || return 1
    for r in $rows; do
        if [[ ${r#*/} == mpi_* ]]; then run_mpi_row "${r%%/*}"
        else run_row "${r%%/*}" "${r#*/}"; fi
    done

    echo "== fault bench, $(date -u +%F), UCX $(ucx_info -v | "$top/contrib/pkg/ucx-version.sh"), kernel $(uname -r), $(run_kind "$quick" "$soak" "$many") run, $(( $(date +%s) - t0 )) s"
    echo "   RC timeout $RC_TIMEOUT, $RC_RETRY retries on both transports (UCX_SYNCMEM_RC_*, UCX_RC_*);"
    echo "   syncmem's reconnect (UCX_SYNCMEM_RECONNECT) in this build: $rec."
    echo "   loss for ${LOSS_SECS}s, qp_error for ${QP_SECS}s every $QP_ERROR_INTERVAL; ${POST}s of stream after each fault."
    # for contrib/bench/tables.py (faults.sh --markdown)
    { echo "date=$(date -u '+%F %H:%M UTC')"
      echo "kernel=$(uname -r)"
      echo "ucx=$(ucx_info -v | "$top/contrib/pkg/ucx-version.sh")"
      echo "kind=$(run_kind "$quick" "$soak" "$many")"
      echo "commit=$("$top/contrib/tools/commit-stamp.sh")"
      echo "seconds=$(( $(date +%s) - t0 ))"; } >"$out/faults.meta"
    # the table and the verdict: every row asked for, judged, none failed
    # shellcheck disable=SC2086 # (rows: words)
    python3 "$faults_py" summary "$out" $rows
}

if [[ ${1:-} == --in-guest ]]; then
    shift
    guest_main "$@"
    exit
fi

quick=no tls=both only='' soak='' many='' markdown=()
while (($#)); do
    case $1 in
        -h|--help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        --quick) quick=yes ;;
        --tls) tls=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        --soak) soak=${2:?}; shift ;;
        --many) many=${2:?}; shift ;;
        --markdown) markdown+=("${2:?}"); shift ;;
        *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
    shift
done
[[ $tls == syncmem || $tls == rc_verbs || $tls == both ]] ||
    { say "--tls must be syncmem, rc_verbs or both"; exit 2; }
[[ -z $soak || $soak =~ ^[1-9][0-9]*$ ]] ||
    { say "--soak takes a number of flaps, not '$soak'"; exit 2; }
[[ -z $many || $many =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    { say "--many takes numbers of endpoints (256,1024), not '$many'"; exit 2; }
[[ -z $many || -z $soak ]] || { say "--many and --soak are two runs"; exit 2; }
if [[ -n $only ]]; then
    rc=0; grep -E -- "$only" </dev/null >/dev/null || rc=$?
    ((rc < 2)) || { say "--only: not an extended regular expression: $only"; exit 2; }
fi
if [[ -z $(rows_of "$quick" "$tls" "$only" "$soak" "$many") ]]; then
    say "no row matches --tls $tls${only:+ --only $(printf %q "$only")}${soak:+ --soak $soak} in a $(
        run_kind "$quick" "$soak" "$many") run; its rows:"
    rows_of "$quick" both '' "$soak" "$many" | sed 's/^/    /' >&2
    exit 2
fi
[[ -x $top/contrib/harness/faults && -x $top/contrib/bench/scale &&
   -x $top/contrib/tools/syncmem-run ]] ||
    { say "contrib/harness/faults is not built: run make first"; exit 2; }
command -v python3 >/dev/null ||
    { say "python3 is needed (contrib/harness/faults.py judges the rows)"; exit 2; }
if ((${#markdown[@]} == 0)); then
    exec contrib/guest/guest.sh --two-hosts --timeout 3600 -- \
        "$top/contrib/harness/faults.sh" --in-guest "$quick" "$tls" "$only" "$soak" "$many"
fi
rc=0
contrib/guest/guest.sh --two-hosts --timeout 3600 -- \
    "$top/contrib/harness/faults.sh" --in-guest "$quick" "$tls" "$only" "$soak" "$many" || rc=$?
# the table, from what the run wrote (the verdicts and exit status are the
# guest's: a table that cannot be written is only said)
for f in "${markdown[@]}"; do
    python3 contrib/bench/tables.py faults "$top/bench-results" --markdown "$f" ||
        say "could not write the table into $f"
done
exit $rc
