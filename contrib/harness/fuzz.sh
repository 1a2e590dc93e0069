#!/bin/sh
#
# fuzz.sh: build the fuzz targets (test/fuzz/) with clang, libFuzzer, ASan
# and UBSan against the transport's real sources, then run each.
#
#   contrib/harness/fuzz.sh [--seconds N] [--regress] [--merge] [TARGET...]
#
#   --seconds N  fuzz each target N seconds (default 30), starting from its
#                seed corpus test/fuzz/corpus/TARGET; what it finds goes to
#                fuzz-build/corpus/TARGET, outside the tree
#   --regress    only run every input of the seed corpus once (no fuzzing)
#   --merge      afterwards, add the inputs that reach new code to the seed
#                corpus (libFuzzer's -merge keeps it small)
#   TARGET       dev_addr iface_addr rkey cm am config (default: all)
#
# Prints, per target: executions, coverage (edges, features), corpus size
# and crashes; a crash's input is kept in fuzz-build/crashes/. Exits
# non-zero if any target crashed or failed to build. Needs a configured
# tree (contrib/bootstrap.sh) and clang-14 (Debian: clang-14, libclang-rt-14-dev
# or llvm-14's libFuzzer). A long run: contrib/harness/fuzz.sh --seconds 1800 cm.
#
set -e
cd "$(dirname "$0")/../.."
top=$(pwd)

seconds=30
mode=fuzz
merge=no
targets=
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) sed -n '3,22s/^# \{0,1\}//p' "$0"; exit 0 ;;
        --seconds) seconds=$2; shift ;;
        --seconds=*) seconds=${1#*=} ;;
        --regress) mode=regress ;;
        --merge) merge=yes ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets="$targets $1" ;;
    esac
    shift
done
[ -n "$targets" ] || targets="dev_addr iface_addr rkey cm am config"

CC=${FUZZ_CC:-clang-14}
command -v "$CC" >/dev/null ||
    { echo "fuzz.sh: $CC not found: apt-get install clang-14" >&2; exit 2; }
[ -f Makefile ] ||
    { echo "fuzz.sh: no Makefile: run contrib/bootstrap.sh first" >&2; exit 2; }

# The flags the module itself is built with (UCX's internal headers, the
# UCX build's config.h), from the configured Makefile.
flags=$(make -s print-fuzz-flags)
cppflags=$(echo "$flags" | sed -n 's/^CPPFLAGS=//p')
libs=$(echo "$flags" | sed -n 's/^LIBS=//p')
sources=$(echo "$flags" | sed -n "s/^SOURCES=//p" | tr " " "\n" | grep "\.c$")

out=$top/fuzz-build
mkdir -p "$out/obj" "$out/crashes"
# UBSan without its null, alignment and object-size checks: UCS's offsetof (a member of
# a null pointer) and its memory pool's element headers trip them in every
# list walk and pool get, in UCX's own inline code. ASan still catches a
# real null or wild access.
san="-fsanitize=address,undefined -fno-sanitize=null,alignment,object-size -fno-sanitize-recover=undefined"
cflags="-g -O1 -fno-omit-frame-pointer $san -Wno-unused-command-line-argument -Wno-unknown-attributes"

# The transport, instrumented for coverage: rebuilt when a source changed.
objs=
for src in $sources; do
    obj=$out/obj/$(basename "$src" .c).o
    if [ ! -f "$obj" ] || [ -n "$(find "$src" uct_syncmem/*.h uct_syncmem/*.inl \
            -newer "$obj" 2>/dev/null | head -1)" ]; then
        $CC $cflags -fsanitize=fuzzer-no-link $cppflags -c "$src" -o "$obj"
    fi
    objs="$objs $obj"
done

status=0
for t in $targets; do
    src=test/fuzz/fuzz_$t.c
    [ -f "$src" ] || { echo "fuzz.sh: no target $t ($src)" >&2; status=1; continue; }
    bin=$out/fuzz_$t
    $CC $cflags -fsanitize=fuzzer $cppflags -I"$top" "$src" $objs $libs -o "$bin" ||
        { echo "fuzz: $t: BUILD FAILED"; status=1; continue; }

    seeds=test/fuzz/corpus/$t
    work=$out/corpus/$t
    mkdir -p "$seeds" "$work"
    log=$out/$t.log
    # UCX: no backtrace handler of its own (ASan reports), quiet logs.
    export UCX_HANDLE_ERRORS=none UCX_LOG_LEVEL=fatal
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    rc=0
    if [ $mode = regress ]; then
        n=$(find "$seeds" -type f | wc -l)
        if [ "$n" -gt 0 ]; then
            find "$seeds" -type f -print0 | xargs -0 "$bin" -runs=1 >"$log" 2>&1 || rc=$?
        fi
        if [ $rc -eq 0 ]; then
            echo "fuzz: $t: $n corpus inputs, 0 crashes"
        else
            echo "fuzz: $t: $n corpus inputs, CRASH (see $log)"; tail -30 "$log"
            status=1
        fi
        continue
    fi

    "$bin" -max_total_time="$seconds" -print_final_stats=1 -max_len=4096 \
        -artifact_prefix="$out/crashes/${t}-" -timeout=10 -rss_limit_mb=2048 \
        "$work" "$seeds" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1)
    crashes=$(grep -c '^==[0-9]*==ERROR\|deadly signal\|invariant broken\|runtime error' "$log" || true)
    echo "fuzz: $t: ${execs:-0} executions in ${seconds} s, ${cov:-cov: ?}, ${corp:-corp: ?}, crashes: $crashes (exit $rc)"
    if [ $rc -ne 0 ]; then
        grep -m5 'ERROR\|invariant broken\|runtime error\|deadly' "$log" || true
        ls "$out/crashes/${t}-"* 2>/dev/null | sed 's/^/  input: /'
        status=1
    fi
    if [ $merge = yes ] && [ $rc -eq 0 ]; then
        "$bin" -merge=1 -max_len=4096 "$seeds" "$work" >>"$log" 2>&1
        echo "fuzz: $t: seed corpus now $(find "$seeds" -type f | wc -l) inputs"
    fi
done
exit $status
# SPDX-License-Identifier: BSD-3-Clause
