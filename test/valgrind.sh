#!/bin/sh
#
# valgrind.sh: the device gtests under valgrind memcheck, in the guest
# (by hand, not in CI: memcheck on top of the emulated guest is slow).
#
#   test/valgrind.sh [GTEST_FILTER]
#
# Uses the normal build (not --enable-asan). The default filter is the
# tests that exercise the handshake, the data path and the receive path
# once each; pass '*' for all (hours). Exits non-zero on any memcheck
# error (invalid access, use of uninitialised memory); leaks are listed
# (definite ones only) but do not fail the run, since UCX keeps some of its
# own allocations until exit.
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
filter=${1:-'syncmem_rma_test.put_short_lands:syncmem_rma_test.get_bcopy_sizes:syncmem_am_test.short_every_size_in_order:syncmem_am_test.handler_keeps_descriptors:syncmem_bounds_test.forged_rkey:syncmem_fault_test.reconnect_after_qp_error_loses_nothing'}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
contrib/guest/guest.sh --timeout 3600 -- env UCX_HANDLE_ERRORS=none \
    ./libtool --mode=execute valgrind --tool=memcheck --error-exitcode=1 \
        --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=none \
        --track-origins=yes --num-callers=30 \
        test/guest_test --gtest_filter="$filter" >"$out" 2>&1 || rc=$?
cat "$out"
[ $rc -eq 0 ] || exit $rc
# a filter that selected nothing, or a run cut short, is no pass
n=$(test/gtest-ran.sh "$out") || exit 1
echo "valgrind.sh: $n gtests ran under memcheck, no error"
