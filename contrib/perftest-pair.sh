#!/bin/sh
#
# perftest-pair.sh: run one ucx_perftest measurement, server and client on
# this host, with syncmem loaded, each pinned to its own CPU (two
# busy-polling peers on one CPU crawl).
#
#   contrib/perftest-pair.sh [--env VAR=VALUE]... -- ucx_perftest-args...
#
# Prints the client's output; the server's goes to stderr on failure.
# Exits non-zero if either side fails or no 'Final:' line was printed.
#
top=$(cd "$(dirname "$0")/.." && pwd)
run="$top/contrib/syncmem-run"
port=${SYNCMEM_PERFTEST_PORT:-13337}

case "$1" in -h|--help) sed -n '3,11s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
while [ "$1" = --env ]; do export "$2"; shift 2; done
[ "$1" = -- ] && shift

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

timeout 120 "$run" ucx_perftest -p "$port" -c 0 "$@" > "$tmp/server" 2>&1 &
server=$!

# wait until the server listens, rather than guessing how long that takes
i=0
until ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $server 2>/dev/null; then
        echo "perftest-pair: the server never listened on port $port" >&2
        cat "$tmp/server" >&2
        exit 1
    fi
    sleep 0.1
done

timeout 110 "$run" ucx_perftest 127.0.0.1 -p "$port" -c 1 "$@" > "$tmp/client" 2>&1
crc=$?
wait $server
src=$?
cat "$tmp/client"
if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -q '^Final:' "$tmp/client"; then
    echo "perftest-pair: client exit $crc, server exit $src; server said:" >&2
    cat "$tmp/server" >&2
    exit 1
fi
