#!/bin/sh
#
# asan.sh: the host unit tests, then the device gtests in one guest boot,
# all built with ASan and UBSan (configure --enable-asan; 'make check-asan'
# runs this). Leak checking is on, with test/lsan.supp for what UCX itself
# allocates once and keeps until exit.
#
# Left out: the tests that run a program with the module preloaded
# (UCX's own tools, ucx_info and ucx_perftest, and the CUDA tests that run
# the test program again with the stand-in driver: a preloaded ASan module
# must come before the ASan runtime), and the two-host wire tests (another
# boot; they cover the same code under packet loss).
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
status=0

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$top/test/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export UCX_HANDLE_ERRORS=none   # ASan reports; UCX's handler would hide it

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# ran WHAT CMD...: run CMD, its output shown; a failure, or a gtest run
# that selected nothing or was cut short (test/gtest-ran.sh), fails WHAT
ran() {
    what=$1; shift
    rc=0
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    if [ $rc -ne 0 ]; then
        echo "asan: FAIL: $what (exit $rc)"; status=1
    elif ! n=$(test/gtest-ran.sh "$out"); then
        echo "asan: FAIL: $what: no gtest ran (see above)"; status=1
    else
        echo "asan: $what: $n gtests ran"
    fi
}

t0=$(date +%s)
echo "asan: host unit tests"
ran "host unit tests" test/unit_test \
    --gtest_filter='-loader.*:version.registered_in_matching_ucx:md.no_rdma_device_message'

echo "asan: device gtests in the guest (kernel ${SYNCMEM_GUEST_KERNEL:-6.1})"
ran "device gtests" contrib/guest/guest.sh -- env ASAN_OPTIONS="$ASAN_OPTIONS" \
    LSAN_OPTIONS="$LSAN_OPTIONS" UBSAN_OPTIONS="$UBSAN_OPTIONS" UCX_HANDLE_ERRORS=none \
    test/guest_test --gtest_filter="${SYNCMEM_ASAN_FILTER:--syncmem_wire_*:syncmem_test.ucx_info_*:syncmem_test.ucp_honours_net_devices:syncmem_test.ucp_peer_error_handling_keeps_the_rma_bw_lane:syncmem_test.host_memory_only_without_cuda:syncmem_cuda_cache_test.*}"

echo "asan: done in $(( $(date +%s) - t0 )) s, status $status"
exit $status
