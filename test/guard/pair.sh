#!/bin/sh
#
# pair.sh - one ucx_perftest server and client on this machine, for
# test/guard.test (it runs inside the Debian 13 root, which has no ss,
# time or taskset: only sh, coreutils and UCX's own tools are assumed).
#
#   test/guard/pair.sh [--preload LIB] [--port N] -- PERFTEST-ARGS...
#
# Both sides run with LD_PRELOAD=LIB when given. Prints each side's output
# (stdout and stderr together), prefixed "server: " and "client: ".
# Exits 0 when both sides exit 0 and the client printed a 'Final:' line.
#
set -e
case "$1" in -h|--help) sed -n '3,12s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
preload='' port=$((20000 + $$ % 20000))
while [ $# -gt 0 ]; do
    case "$1" in
        --preload) preload=${2:?--preload needs a library}; shift 2 ;;
        --port) port=${2:?--port needs a number}; shift 2 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
command -v ucx_perftest >/dev/null ||
    { echo "pair.sh: ucx_perftest not found (install ucx-utils)" >&2; exit 1; }

tmp=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

run() { # run COMMAND...: with the module preloaded, if any
    if [ -n "$preload" ]; then LD_PRELOAD=$preload "$@"; else "$@"; fi
}

run ucx_perftest -p "$port" -c 0 "$@" >"$tmp/server" 2>&1 &
server=$!

# Wait for the server's listening socket (state 0A in /proc/net/tcp*),
# or for the server to die.
hexport=$(printf ':%04X ' "$port")
until grep -q "${hexport}[0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
    if ! kill -0 "$server" 2>/dev/null; then
        echo "pair.sh: the server exited before listening on port $port" >&2
        sed 's/^/server: /' "$tmp/server"
        server=; exit 1
    fi
    sleep 0.1
done

set +e
run ucx_perftest 127.0.0.1 -p "$port" -c 1 "$@" >"$tmp/client" 2>&1
crc=$?
# A client that failed leaves the server waiting for it forever; and
# UCX 1.18's server of a UCT test (-x) stays in accept() after a test that
# completed (seen in Debian 13). So once the client is done, a server that
# has not exited within a second is stopped, and only its output counts.
[ $crc -eq 0 ] || kill "$server" 2>/dev/null
sleep 1
if kill -0 "$server" 2>/dev/null; then
    echo "pair.sh: the server was still running after the client finished; stopped it" >&2
    kill "$server" 2>/dev/null
    wait "$server"
    src=0
else
    wait "$server"
    src=$?
fi
server=
set -e
sed 's/^/server: /' "$tmp/server"
sed 's/^/client: /' "$tmp/client"
if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -q '^Final:' "$tmp/client"; then
    echo "pair.sh: client exit $crc, server exit $src" >&2
    exit 1
fi
# SPDX-License-Identifier: BSD-3-Clause
