#!/bin/sh
#
# perftest-pair.sh: run one measurement, server and client on this host,
# each pinned to its own CPU (two busy-polling peers on one CPU crawl).
#
#   contrib/bench/perftest-pair.sh [--env VAR=VALUE]... -- ucx_perftest-args...
#   contrib/bench/perftest-pair.sh --raw TOOL -- TOOL-args...  (ib_write_bw, ...)
#   --wrap "CMD ARGS": run the client ucx_perftest under CMD (valgrind ...)
#
# ucx_perftest runs with syncmem loaded (syncmem-run: the build tree's, or
# $SYNCMEM_RUN, e.g. an installed /usr/bin/syncmem-run); --raw runs an
# rdma-core perftest tool instead. Prints the client's output, then a line
# "cpu: <user+system seconds of the client>"; the server's output goes to
# stderr on failure. Exits non-zero if either side fails, if the server
# had to be stopped, or if ucx_perftest printed no 'Final:' line.
#
top=$(cd "$(dirname "$0")/../.." && pwd)
run=${SYNCMEM_RUN:-$top/contrib/tools/syncmem-run}
port=${SYNCMEM_PERFTEST_PORT:-13337}

case "$1" in -h|--help) sed -n '3,17s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
tool="$run ucx_perftest" raw='' wrap=''
while [ $# -gt 0 ]; do
    case "$1" in
        --env) export "${2:?--env needs VAR=VALUE}"; shift 2 ;;
        --wrap) wrap=$2; shift 2 ;;
        --raw) tool=$2 raw=1; port=${SYNCMEM_RAW_PORT:-18515}; shift 2 ;;
        --)    shift; break ;;
        *)     break ;;
    esac
done

# (a Debian root may lack them: contrib/guest/debian-root.sh installs them)
for t in /usr/bin/time taskset timeout; do
    command -v $t >/dev/null || {
        echo "perftest-pair: $t not found (Debian: apt-get install time util-linux coreutils)" >&2
        exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -n "$raw" ]; then
    # shellcheck disable=SC2086
    timeout 120 taskset -c 0 $tool -p "$port" "$@" > "$tmp/server" 2>&1 &
else
    # -P 0: a ucx_perftest built with MPI (Debian 13's) waits for mpirun
    # otherwise; one built without it (Debian 12's) has no -P
    mpi=
    $tool -h 2>&1 | grep -q -- '-P <0|1>' && mpi="-P 0"
    # shellcheck disable=SC2086
    timeout 120 $tool $mpi -p "$port" -c 0 "$@" > "$tmp/server" 2>&1 &
fi
server=$!

# wait until the server listens, rather than guessing how long that takes
i=0
# (a Debian root without iproute2 has no ss: read /proc/net/tcp, where a
# listening socket is state 0A on local port $port in hex)
listening() {
    if command -v ss >/dev/null; then
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q .
    else
        grep -qiE "^ *[0-9]+: [0-9A-F]+:$(printf %04X "$port") [0-9A-F:]+ 0A" \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null
    fi
}
until listening; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $server 2>/dev/null; then
        echo "perftest-pair: the server never listened on port $port" >&2
        cat "$tmp/server" >&2
        exit 1
    fi
    sleep 0.1
done

if [ -n "$raw" ]; then
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S' -o "$tmp/cpu" timeout 110 taskset -c 1 $tool \
        -p "$port" "$@" 127.0.0.1 > "$tmp/client" 2>&1
else
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S' -o "$tmp/cpu" timeout 110 $run $wrap ucx_perftest \
        $mpi 127.0.0.1 -p "$port" -c 1 "$@" > "$tmp/client" 2>&1
fi
crc=$?
# The server ends once its client is done; one still running 10 s later is
# stopped and counts as a failure. No ucx_perftest release 1.13-1.22 goes
# back to accept() after a complete run (upstream's perftest.c accepts
# once; Debian 13's 1.18.1 server exits): a server found waiting in accept
# is one whose client never connected.
i=0
while kill -0 $server 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
if kill -0 $server 2>/dev/null; then
    # the server is timeout's child: where it waits says what it does
    pid=$(awk '{print $1}' "/proc/$server/task/$server/children" 2>/dev/null)
    wchan=$(cat "/proc/${pid:-$server}/wchan" 2>/dev/null)
    case "$wchan" in
        *accept*) if [ $crc -ne 0 ]; then where="waiting in accept(): the client never connected"
                  else where="waiting in accept() again after its client's run"; fi ;;
        *) where="waiting in ${wchan:-?}" ;;
    esac
    kill $server 2>/dev/null; wait $server
    src=1
    echo "perftest-pair: the server was still running 10 s after the client finished (client exit $crc; server $where); stopped it" >&2
else
    wait $server
    src=$?
fi
cat "$tmp/client"
awk '{print "cpu: " $1 + $2}' "$tmp/cpu" 2>/dev/null
if [ $crc -ne 0 ] || [ $src -ne 0 ] ||
   { [ -z "$raw" ] && ! grep -q '^Final:' "$tmp/client"; }; then
    echo "perftest-pair: client exit $crc, server exit $src; server said:" >&2
    cat "$tmp/server" >&2
    exit 1
fi
# SPDX-License-Identifier: BSD-3-Clause
