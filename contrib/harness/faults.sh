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
# Prints a table and writes bench-results/faults.csv:
#   transport,scenario,ops_ok,ops_failed,lost,duplicated,corrupted,
#   reconnects,hang,recovery_ms,ep_recreated
# (doc/benchmarks.md says what each column means; '-': not measured),
# faults.notes (each row's verdict and note), faults.meta (date, guest
# kernel, UCX, kind of run), and every process's output under
# bench-results/faults/ (the flaps' times in TRANSPORT-SCENARIO.faults).
#
#   contrib/harness/faults.sh [--quick] [--tls syncmem|rc_verbs|both] [--only REGEX]
#                     [--soak N] [--markdown FILE]...
#
#   --quick        a subset with short durations (< 5 min, for make check);
#   --tls          which transports (default both; syncmem includes
#                  syncmem-noreconnect);
#   --only REGEX   rows whose "transport/scenario" matches (anchors work:
#                  '^syncmem/flap_0\.5s$'); none matching is an error;
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
# of syncmem or syncmem-noreconnect fails when
#  - lost, duplicated or corrupted is not 0, or an operation hung;
#  - it could not be measured: no result line (the client or the MPI job
#    died), the stream never started, a fault ended after the stream, a
#    flap or killed peer stopped no traffic (no stall around it), or the
#    stream ended before it recovered; its lost, duplicated and corrupted
#    columns are '-', never 0;
#  - reconnect on (syncmem), a fault the reconnect must hide (a flap shorter
#    than UCX_SYNCMEM_RECONNECT_TIMEOUT, flaps_N, qp_error, mpi_flap_0.5s):
#    a put, get or AM failed, or the endpoint failed (ep_recreated > 0). A
#    failed fetch-add is allowed only in a run with a reconnect onto a new
#    QP (an add of unknown outcome fails rather than runs twice;
#    doc/design.md, "Reconnect");
#  - reconnect off (syncmem-noreconnect), a flap row without the clean
#    failure: ops_failed > 0 and ep_recreated >= 1. Its MPI job aborting by
#    faults_mpi's MPI_Abort (mpirun exit 3 after two failed pairs in a row)
#    is that clean failure (columns '-'); any other abort fails.
# rc_verbs rows are reported for comparison, never judged ("not judged",
# and what would fail them). Exits 1 if a judged row fails, 2 on a bad
# option or when no row matches (before the guest boots), 0 otherwise.
# Needs 'make' first.
#
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
prog=faults.sh

say() { echo "$prog: $*" >&2; }

# The soak's flaps (flaps_N): lengths and the gaps after them, cycled
FLAP_LENS="0.05 0.2 0.5 1.0 0.1 0.3" FLAP_GAPS="0.1 0.5 2.0 0.3 1.0 3.0"

# run_kind QUICK SOAK: what the run is called: soak, quick or full
run_kind() {
    if [[ -n $2 ]]; then echo soak
    elif [[ $1 == yes ]]; then echo quick
    else echo full; fi
}

# rows_of QUICK TLS ONLY SOAK: a run's rows, "transport/scenario" one a
# line (so that --only's anchors work), nothing when none matches
rows_of() {
    local quick=$1 tls=$2 only=$3 soak=$4 rows tl sc
    if [[ -n $soak ]]; then
        rows=syncmem/flaps_$soak
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
flap() {
    local down up
    ip link set smv0 down
    down=${EPOCHREALTIME/,/.}
    sleep_until $((${down/./} + $3))
    ip link set smv0 up
    up=${EPOCHREALTIME/,/.}
    routes
    echo "fault $2 $down $up" >>"$1"
}

# flaps_plan N: the soak's flaps, "K LENGTH GAP" a line in microseconds
# (the gap after flap K; none after the last: the stream's post follows)
flaps_plan() {
    awk -v n="$1" -v l="$FLAP_LENS" -v g="$FLAP_GAPS" 'BEGIN {
        nl = split(l, L, " "); ng = split(g, G, " ")
        for (k = 1; k <= n; k++)
            printf "%d %d %d\n", k, int(L[(k - 1) % nl + 1] * 1e6 + 0.5),
                   (k < n) ? int(G[(k - 1) % ng + 1] * 1e6 + 0.5) : 0 }'
}

# fault_stats FAULTS LOG: how the stream in LOG ("stall START END [open]"
# and "streamed START END" lines) got through the faults in FAULTS ("fault
# K START END"); one line of key=value:
#   faults   in FAULTS
#   done     those that ended inside the stream (the others: not measured)
#   cut      done ones with a stall over them (the fault stopped traffic)
#   open     done ones the stream ended stalled after (not recovered)
#   median, p99, max: the others' recovery in ms (nearest rank), from the
#            fault's end to the end of the stall that holds it; 0 if none
#            does (the stream never stopped, or it was going again by then)
fault_stats() {
    awk '
        FILENAME == ARGV[1] { if ($1 == "fault") { n++; f0[n] = $3; f1[n] = $4 } next }
        $1 == "stall" { ns++; s0[ns] = $2; s1[ns] = $3; so[ns] = ($4 == "open") }
        $1 == "streamed" { se = $3 }
        function rank(p,  i) { i = int(p * m); return v[(i < p * m) ? i + 1 : i] }
        END {
            for (k = 1; k <= n; k++) {
                if (se != "" && f1[k] > se) continue
                done++; r = 0; c = 0; o = 0
                for (i = 1; i <= ns; i++) {
                    if (s0[i] <= f1[k] && s1[i] >= f0[k]) c = 1
                    if (s0[i] <= f1[k] && s1[i] >= f1[k]) {
                        if (so[i]) o = 1; else r = (s1[i] - f1[k]) * 1000
                    }
                }
                cut += c
                if (o) { open++; continue }
                v[++m] = r
                for (j = m; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
            }
            printf "faults=%d done=%d cut=%d open=%d", n, done, cut, open
            if (m) printf " median=%.0f p99=%.0f max=%.0f", rank(0.5), rank(0.99), v[m]
            else printf " median=- p99=- max=-"
            printf "\n"
        }' "$1" "$2"
}

# secs VALUE: a UCX time setting (ucx_info prints e.g. 5000000.00us) in s
secs() {
    awk -v v="$1" 'BEGIN {
        u = v; sub(/^[0-9.]+/, "", u); n = substr(v, 1, length(v) - length(u)) + 0
        if (u ~ /^inf/) { print "inf"; exit }
        m = (u == "ns") ? 1e-9 : (u == "us") ? 1e-6 : (u == "ms") ? 1e-3 : 1
        if (u == "m") m = 60; else if (u == "h") m = 3600
        print n * m }'
}

# short_fault SCENARIO: syncmem's reconnect must hide it: a flap shorter
# than the reconnect deadline ($DEADLINE s), the soak (every flap is), the
# forced QP errors
short_fault() {
    local l
    case $1 in
        qp_error) return 0 ;;
        flaps_*) l=$(tr ' ' '\n' <<<"$FLAP_LENS" | sort -g | tail -n 1) ;;
        flap_*|mpi_flap_*) l=${1##*_}; l=${l%s} ;;
        *) return 1 ;;
    esac
    [[ $DEADLINE == inf ]] || awk -v l="$l" -v d="$DEADLINE" 'BEGIN { exit !(l < d) }'
}

# verdict TRANSPORT SCENARIO KEY=VALUE...: why the row fails, '; ' between
# the reasons; nothing when it passes (the rules: the header). Keys: lost
# duplicated corrupted ops_failed ep_recreated ('-': not counted); put get
# fadd am (how many of each failed); newqp (reconnects onto a new QP); for
# a row with its faults timed, fault_stats's faults done cut open.
verdict() {
    local tl=$1 sc=$2 kv c reasons=() out=''
    local -A v=()
    shift 2
    for kv; do v[${kv%%=*}]=${kv#*=}; done
    for c in lost duplicated corrupted; do
        [[ ${v[$c]} == 0 ]] || reasons+=("$c ${v[$c]}")
    done
    if [[ -n ${v[faults]:-} ]]; then
        ((v[done] == v[faults])) ||
            reasons+=("not measured: $((v[faults] - v[done])) of ${v[faults]} faults ended after the stream")
        ((v[done] == 0 || v[cut] > 0)) ||
            reasons+=("not measured: no stall around the fault (did traffic get around it?)")
        ((v[open] == 0)) || reasons+=("the stream ended before it recovered")
    fi
    if [[ $tl == syncmem ]] && short_fault "$sc"; then
        for c in put get am; do
            ((v[$c] == 0)) || reasons+=("${v[$c]} ${c}s failed")
        done
        ((v[fadd] == 0 || v[newqp] > 0)) ||
            reasons+=("${v[fadd]} fetch-adds failed with no reconnect onto a new QP")
        [[ ${v[ep_recreated]} == [-0] ]] ||
            reasons+=("the endpoint failed ${v[ep_recreated]} times")
    elif [[ $tl == syncmem-noreconnect && $sc == *flap* ]]; then
        ((v[ops_failed] > 0)) && [[ ${v[ep_recreated]} == - || ${v[ep_recreated]} -ge 1 ]] ||
            reasons+=("no clean failure: ops_failed ${v[ops_failed]}, ep_recreated ${v[ep_recreated]} (want > 0, >= 1)")
    fi
    for c in "${reasons[@]}"; do out+="${out:+; }$c"; done
    echo "$out"
}

# knob_known NAME: this build of syncmem has the setting UCX_SYNCMEM_NAME
knob_known() {
    # (not grep -q: ucx_info would die of SIGPIPE, and pipefail says no)
    "$top/contrib/tools/syncmem-run" ucx_info -c -f 2>/dev/null |
        grep -c "^UCX_SYNCMEM_$1=" >/dev/null
}

# reconnect_lines LOG: syncmem's reconnects in LOG (diag level): "ALL
# RESUMED NEWQP GAVEUP"
reconnect_lines() {
    local n
    for n in 'reconnected to iface' 'reconnected to iface .*(the same QPs, resumed)' \
             'reconnected to iface .*(a new QP)' 'reconnect.* gave up'; do
        echo -n "$(grep -c "syncmem: ep .*$n" "$1" || true) "
    done
    echo
}

# run_row TRANSPORT SCENARIO: one measurement; appends to $csv and $table
run_row() {
    local tl=$1 sc=$2
    # the target's memory: tmpfs (registered and mapped by two processes)
    local st=/dev/shm/faults-state-$tl-$sc log=$out/faults/$tl-$sc
    local pre=1.5 post=$POST len=0 plan='' fault_env=() env=() note=''
    local spid cpid crc=0 hang=0 i limit res t0 t_fault k fl gap
    case $sc in
        loss_1pct|loss_10pct) len=$LOSS_SECS ;;
        flap_*) len=${sc#flap_}; len=${len%s} ;;
        flaps_*) plan=$(flaps_plan "${sc#flaps_}")
            len=$(awk '{ s += $2 + $3 } END { print s / 1e6 }' <<<"$plan") ;;
        # (syncmem gives a dead peer RECONNECT_TIMEOUT, 5 s, before the
        # application sees it and can go to the new server)
        peer_killed) len=1 post=$((POST > 10 ? POST : 10)) ;;
        qp_error) len=$QP_SECS
            if [[ $tl == rc_verbs ]]; then
                row "$tl" "$sc" n/a "" "rc_verbs has no knob to force a QP to error"; return
            fi
            if ! knob_known FAULT_QP_ERROR; then
                row "$tl" "$sc" n/a "" "UCX_SYNCMEM_FAULT_QP_ERROR is not in this build"; return
            fi
            fault_env=("UCX_SYNCMEM_FAULT_QP_ERROR=$QP_ERROR_INTERVAL") ;;
    esac
    mapfile -t env <<<"$(tl_env "$tl")"
    rm -rf "$st"; mkdir -p "$st"
    rm -f "$log".*
    heal
    say "$tl $sc"

    env "${env[@]}" UCX_NET_DEVICES=rxe1:1 taskset -c 1 \
        "$top/contrib/harness/faults" server "$st" >"$log.server" 2>&1 &
    spid=$!
    env "${env[@]}" "${fault_env[@]}" UCX_NET_DEVICES=rxe0:1 taskset -c 0 \
        "$top/contrib/harness/faults" client "$st" \
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
        t_fault=${EPOCHREALTIME/,/.}
        case $sc in
            loss_1pct|loss_10pct)
                loss "${sc//[^0-9]/}"; sleep "$len"; heal
                echo "fault 1 $t_fault ${EPOCHREALTIME/,/.}" >>"$log.faults" ;;
            flap_*|flaps_*)
                [[ -n $plan ]] || plan="1 $(awk -v l="$len" 'BEGIN { print int(l * 1e6 + 0.5) }') 0"
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
                sleep "$len"
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
    [[ ! -e $log.faults ]] || sed "s/^/faults.sh: $sc /" "$log.faults" >>"$log.client"
    kill -9 "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    heal

    local reconnects resumed newqp gaveup stats='' recovery
    read -r reconnects resumed newqp gaveup <<<"$(reconnect_lines "$log.client")"
    res=$(grep '^result ' "$log.client" | tail -n 1 || true)
    [[ $res == *hang=1* ]] && hang=1
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
    if [[ $hang == 1 ]]; then
        [[ -n $note ]] || note="the client's watchdog: $res"
        row "$tl" "$sc" "$(val ops_ok),$(val ops_failed),-,-,-,$reconnects,1,-,-" \
            "hang" "$note; see $log.client"
        return
    elif [[ -z $res || -n $note ]]; then
        row "$tl" "$sc" "-,-,-,-,-,$reconnects,0,-,-" \
            "not measured: ${note:-no result line (client exit $crc)}" "see $log.client"
        return
    fi

    # recovery: from the wire's return (or the new server) to the end of
    # the stall around it; the soak's worst; for loss and qp_error, the
    # longest stall
    if [[ $sc == loss_* || $sc == qp_error ]]; then
        recovery=$(val max_stall_ms)
    else
        stats=$(fault_stats "$log.faults" "$log.client")
        sv() { sed -n "s/.*\<$1=\([^ ]*\).*/\1/p" <<<"$stats"; }
        recovery=$(sv max)
        [[ $(sv open) == 0 && $(sv cut) != 0 ]] || recovery=none
        [[ $sc != flaps_* ]] ||
            note="$(sv 'done') of $(sv faults) flaps, recovery median $(sv median) / p99 $(sv p99) / max $(sv max) ms"
    fi
    if ((reconnects > 0)); then
        note="${note:+$note; }syncmem reconnected $reconnects times ($resumed resumed, $newqp onto a new QP), up to $(
            sed -n 's/.*syncmem: ep .*reconnected to iface .* after \([0-9]*\) ms.*/\1/p' \
                "$log.client" | sort -n | tail -n 1) ms"
    fi
    ((gaveup == 0)) || note="${note:+$note; }syncmem gave up reconnecting $gaveup times"
    note="${note:+$note; }$(val put) puts, $(val get) gets, $(val fadd) fetch-adds, $(val am) AMs ok/failed"
    [[ $(val am_died_with_peer) == 0 ]] ||
        note="$note; $(val am_died_with_peer) AMs died with the killed server"
    [[ $(val connect_failed) == 0 ]] ||
        note="$note; $(val connect_failed) new endpoints that failed to connect"

    local p g f a
    p=$(val put) g=$(val get) f=$(val fadd) a=$(val am)
    # shellcheck disable=SC2086 # (stats: key=value words)
    row "$tl" "$sc" "$(val ops_ok),$(val ops_failed),$(val lost),$(val duplicated),$(val corrupted),$reconnects,0,$recovery,$(val ep_recreated)" \
        "$(verdict "$tl" "$sc" lost="$(val lost)" duplicated="$(val duplicated)" \
               corrupted="$(val corrupted)" ops_failed="$(val ops_failed)" \
               ep_recreated="$(val ep_recreated)" put="${p#*/}" get="${g#*/}" \
               fadd="${f#*/}" am="${a#*/}" newqp="$newqp" ${stats%% median=*})" \
        "$note"
    rm -rf "$st"
}

# run_mpi_row TRANSPORT: Open MPI's one-sided (osc ucx) under a 0.5 s flap
run_mpi_row() {
    local tl=$1 sc=mpi_flap_0.5s log=$out/faults/$1-mpi_flap_0.5s
    local flag=/tmp/faults-mpi-streaming pre=1.5 len=0.5 post=$POST
    local env=() xs=() e pid rc=0 hang=0 i res stats recovery note='' pairs failed_pairs
    if ! command -v mpirun >/dev/null || [[ ! -x $top/contrib/harness/faults_mpi ]]; then
        row "$tl" "$sc" "-,-,-,-,-,-,0,-,-" "not measured: no mpirun or contrib/harness/faults_mpi" \
            "Open MPI, then configure and make"
        return
    fi
    mapfile -t env <<<"$(tl_env "$tl")"
    for e in "${env[@]}"; do xs+=(-x "$e"); done
    rm -f "$flag" "$log" "$log".*; heal
    say "$tl $sc"
    # shellcheck disable=SC2016
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 --bind-to core --mca pml ucx --mca osc ucx --mca btl self \
        --mca pml_ucx_devices any --mca pml_ucx_tls any "${xs[@]}" \
        sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then d=rxe0:1; else d=rxe1:1; fi
               UCX_NET_DEVICES=$d exec "$@"' pick \
        "$top/contrib/harness/faults_mpi" "$(awk -v a=$pre -v b=$len -v c="$post" 'BEGIN {print a + b + c}')" \
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
        flap "$log.faults" 1 "$(awk -v l="$len" 'BEGIN { print int(l * 1e6 + 0.5) }')"
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
        kill -9 "$pid" 2>/dev/null || true; hang=1
    fi
    wait "$pid" || rc=$?
    heal
    local reconnects resumed newqp gaveup
    read -r reconnects resumed newqp gaveup <<<"$(reconnect_lines "$log")"
    if ((hang)); then
        row "$tl" "$sc" "-,-,-,-,-,$reconnects,1,-,-" "hang" \
            "mpirun did not finish 90 s after its stream should have ended; see $log"
        return
    fi
    res=$(grep '^result ' "$log" | tail -n 1 || true)
    pairs=$(grep -c '^pair .* failed' "$log" || true) failed_pairs=''
    ((pairs == 0)) || failed_pairs=", $pairs failed pairs"
    if [[ -z $res && -z $note && $tl == syncmem-noreconnect && $rc == 3 ]] && ((pairs >= 2)); then
        # what the flap cost cannot be counted: the columns say '-'
        row "$tl" "$sc" "-,-,-,-,-,$reconnects,0,-,-" "" \
            "the expected clean failure: faults_mpi's MPI_Abort after $pairs failed pairs (mpirun exit 3); see $log"
        return
    elif [[ -z $res || -n $note ]]; then
        row "$tl" "$sc" "-,-,-,-,-,$reconnects,0,-,-" \
            "not measured: ${note:-the job aborted (mpirun exit $rc$failed_pairs)}" \
            "see $log"
        return
    fi
    val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
    stats=$(fault_stats "$log.faults" "$log")
    recovery=$(sed -n 's/.* max=\([^ ]*\).*/\1/p' <<<"$stats")
    [[ $stats == *" open=0 "* && $stats != *" cut=0 "* ]] || recovery=none
    local at p f l
    # failed pairs by the call that returned the error: put, fetch-add, flush
    at=$(val pairs_failed_at)
    IFS=/ read -r p f l <<<"${at:-0/0/0}"
    note="MPI_Put + MPI_Fetch_and_op, a flush after each pair (osc ucx)"
    ((reconnects == 0)) ||
        note="$note; syncmem reconnected $reconnects times ($resumed resumed, $newqp onto a new QP)"
    [[ $at == 0/0/0 || -z $at ]] || note="$note; failed pairs at put/fetch-add/flush: $at"
    ((rc == 0)) || note="$note; mpirun exit $rc"
    # shellcheck disable=SC2086 # (stats: key=value words)
    row "$tl" "$sc" "$(val ops_ok),$(val ops_failed),$(val lost),$(val duplicated),$(val corrupted),$reconnects,0,$recovery,-" \
        "$(verdict "$tl" "$sc" lost="$(val lost)" duplicated="$(val duplicated)" \
               corrupted="$(val corrupted)" ops_failed="$(val ops_failed)" ep_recreated=- \
               put=$((p + l)) get=0 fadd="$f" am=0 newqp="$newqp" \
               ${stats%% median=*})" \
        "$note"
}

# row TRANSPORT SCENARIO COLUMNS WHY NOTE: a line of the table and the csv.
# COLUMNS: ops_ok..ep_recreated ('-': not measured), or n/a (the scenario
# does not apply); WHY: why the row fails, empty if it passes
row() {
    local v=$3 why=$4 note=$5 ok failed lost dup corr rec hang recov recr
    if [[ $v == n/a ]]; then
        v=n/a,n/a,n/a,n/a,n/a,n/a,n/a,n/a,n/a note="n/a: $note"
    elif [[ $1 == rc_verbs ]]; then
        # (UCX's own transport dying, e.g. ud_verbs's Fatal after a flap,
        # is a result to show, not ours to gate on)
        note="not judged${why:+ (would fail: $why)}${note:+; $note}"
    elif [[ -z $why ]]; then
        note="PASS${note:+; $note}"
    else
        note="FAIL: $why${note:+; $note}" bad=$((bad + 1))
    fi
    IFS=, read -r ok failed lost dup corr rec hang recov recr <<<"$v"
    echo "$1,$2,$v" >>"$csv"
    printf '%s\t%s\t%s\n' "$1" "$2" "$note" >>"$notes"
    printf '%-20s %-13s %8s %7s %5s %5s %6s %6s %5s %9s %6s  %s\n' "$1" "$2" \
        "$ok" "$failed" "$lost" "$dup" "$corr" "$rec" "$hang" "$recov" "$recr" \
        "$note" >>"$table"
    say "  -> $v ($note)"
}

guest_main() {
    local quick=$1 tls=$2 only=${3:-} soak=${4:-} rows r t0 v
    out=$top/bench-results
    csv=$out/faults.csv table=$out/faults.table notes=$out/faults.notes bad=0
    mkdir -p "$out/faults"
    rm -f "$out"/faults/*.client "$out"/faults/*.server*
    t0=$(date +%s)
    if [[ $quick == yes ]]; then
        LOSS_SECS=4 QP_SECS=5 POST=4
    else
        LOSS_SECS=15 QP_SECS=10 POST=8
    fi
    rows=$(rows_of "$quick" "$tls" "$only" "$soak")
    [[ -n $rows ]] || { echo "FAIL: no row matches"; return 2; }

    # (the guest has no /dev/fd: no process substitution in this script)
    if ! "$top/contrib/tools/syncmem-run" --print >/dev/null; then
        ls -la "$top/.libs" "$top/contrib/tools/syncmem-run" >&2 || true
        echo "FAIL: syncmem-run cannot find the module"; return 1
    fi
    local rec=absent
    DEADLINE=5
    if knob_known RECONNECT; then
        v=$("$top/contrib/tools/syncmem-run" ucx_info -c -f 2>/dev/null |
            sed -n 's/^UCX_SYNCMEM_RECONNECT_TIMEOUT=//p' | head -n 1)
        [[ -z $v ]] || DEADLINE=$(secs "$v")
        rec="present (a ${DEADLINE} s deadline)"
    fi
    echo "transport,scenario,ops_ok,ops_failed,lost,duplicated,corrupted,reconnects,hang,recovery_ms,ep_recreated" >"$csv"
    : >"$table"; : >"$notes"
    routes; routes_ok || return 1
    for r in $rows; do
        if [[ ${r#*/} == mpi_* ]]; then run_mpi_row "${r%%/*}"
        else run_row "${r%%/*}" "${r#*/}"; fi
    done

    echo "== fault bench, $(date -u +%F), UCX $(ucx_info -v | "$top/contrib/pkg/ucx-version.sh"), kernel $(uname -r), $(run_kind "$quick" "$soak") run, $(( $(date +%s) - t0 )) s"
    echo "   RC timeout $RC_TIMEOUT, $RC_RETRY retries on both transports (UCX_SYNCMEM_RC_*, UCX_RC_*);"
    echo "   syncmem's reconnect (UCX_SYNCMEM_RECONNECT) in this build: $rec."
    echo "   loss for ${LOSS_SECS}s, qp_error for ${QP_SECS}s every $QP_ERROR_INTERVAL; ${POST}s of stream after each fault."
    printf '%-20s %-13s %8s %7s %5s %5s %6s %6s %5s %9s %6s  %s\n' transport scenario \
        ops_ok failed lost dup corrupt reconn hang recov_ms ep_new note
    cat "$table"
    # for contrib/bench/tables.py (faults.sh --markdown)
    { echo "date=$(date -u '+%F %H:%M UTC')"
      echo "kernel=$(uname -r)"
      echo "ucx=$(ucx_info -v | "$top/contrib/pkg/ucx-version.sh")"
      echo "kind=$(run_kind "$quick" "$soak")"
      echo "commit=$(git -C "$top" --no-optional-locks describe --always --dirty 2>/dev/null || echo unknown)"
      echo "seconds=$(( $(date +%s) - t0 ))"; } >"$out/faults.meta"
    echo "   csv: $csv (verdicts: $notes); each process's output: $out/faults/"
    rm -f "$table"
    if ((bad)); then
        echo "FAIL: $bad judged rows failed (their notes say why)"
        return 1
    fi
    echo "PASS: every judged row passed (lost, duplicated, corrupted, hang 0; the failures each fault allows)"
}

if [[ ${1:-} == --in-guest ]]; then
    shift
    guest_main "$@"
    exit
fi

quick=no tls=both only='' soak='' markdown=()
while (($#)); do
    case $1 in
        -h|--help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        --quick) quick=yes ;;
        --tls) tls=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        --soak) soak=${2:?}; shift ;;
        --markdown) markdown+=("${2:?}"); shift ;;
        *) say "unknown option $1 (see --help)"; exit 2 ;;
    esac
    shift
done
[[ $tls == syncmem || $tls == rc_verbs || $tls == both ]] ||
    { say "--tls must be syncmem, rc_verbs or both"; exit 2; }
[[ -z $soak || $soak =~ ^[1-9][0-9]*$ ]] ||
    { say "--soak takes a number of flaps, not '$soak'"; exit 2; }
if [[ -n $only ]]; then
    rc=0; grep -E -- "$only" </dev/null >/dev/null || rc=$?
    ((rc < 2)) || { say "--only: not an extended regular expression: $only"; exit 2; }
fi
if [[ -z $(rows_of "$quick" "$tls" "$only" "$soak") ]]; then
    say "no row matches --tls $tls${only:+ --only $(printf %q "$only")}${soak:+ --soak $soak} in a $(
        run_kind "$quick" "$soak") run; its rows:"
    rows_of "$quick" both '' "$soak" | sed 's/^/    /' >&2
    exit 2
fi
[[ -x $top/contrib/harness/faults && -x $top/contrib/tools/syncmem-run ]] ||
    { say "contrib/harness/faults is not built: run make first"; exit 2; }
if ((${#markdown[@]} == 0)); then
    exec contrib/guest/guest.sh --two-hosts --timeout 3600 -- \
        "$top/contrib/harness/faults.sh" --in-guest "$quick" "$tls" "$only" "$soak"
fi
command -v python3 >/dev/null ||
    { say "--markdown needs python3 (contrib/bench/tables.py)"; exit 2; }
rc=0
contrib/guest/guest.sh --two-hosts --timeout 3600 -- \
    "$top/contrib/harness/faults.sh" --in-guest "$quick" "$tls" "$only" "$soak" || rc=$?
# the table, from what the run wrote (the verdicts and exit status are the
# guest's: a table that cannot be written is only said)
for f in "${markdown[@]}"; do
    python3 contrib/bench/tables.py faults "$top/bench-results" --markdown "$f" ||
        say "could not write the table into $f"
done
exit $rc
