#!/bin/sh
#
# The test driver of the .test scripts: automake's own (config/aux/
# test-driver), and then one more result, SKIP, for each line of the test's
# output that starts with "SKIP " (the script's "SKIP what: why" lines:
# what it could not run, with its reason; test/guest.test turns gtest's
# skips into such lines). So 'make check' counts them under SKIP in its
# summary, and names each on a "SKIP: test: what: why" line, while the
# script's own result (PASS, FAIL, or SKIP for exit 77) stays as it is.
#
# (Makefile.am: TEST_LOG_DRIVER; the arguments are test-driver's.)
#
# SPDX-License-Identifier: BSD-3-Clause
log= trs= name=
for a; do
    case $prev in
        --log-file) log=$a ;;
        --trs-file) trs=$a ;;
        --test-name) name=$a ;;
    esac
    prev=$a
done
"$(dirname "$0")/../config/aux/test-driver" "$@"
rc=$?
if [ -n "$log" ] && [ -n "$trs" ] && [ -f "$log" ]; then
    # (test-driver's own last line, "SKIP NAME (exit status: 77)", is not one)
    grep '^SKIP ' "$log" | grep -vF "SKIP $name (exit status: " |
    while IFS= read -r line; do
        echo ":test-result: SKIP" >>"$trs"
        echo "SKIP: $name: ${line#SKIP }"
    done
fi
exit $rc
