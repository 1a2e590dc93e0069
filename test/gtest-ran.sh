#!/bin/sh
#
# gtest-ran.sh [FILE]: how many tests the googletest runs in FILE (default:
# standard input) ran, read from their own lines:
#   [==========] Running N tests from M test suites.    (a run starts)
#   [==========] N tests from M test suites ran. (...)  (it ended)
# Prints that total, and exits 0 only if at least one run started, every
# run that started ended, and none ran 0 tests. Otherwise exits 1, saying
# why on standard error: no gtest run at all, a run cut short (crashed or
# killed before its summary), or a --gtest_filter that selected nothing
# ('0 tests from 0 test suites ran', which gtest itself calls PASSED).
# A run whose tests were all skipped ran them: its skips are reported where
# they are counted (test/guest.test), not here.
#
# Used by test/guest.test and contrib/harness/ucx-matrix.sh; tested by
# test/verdicts.test.
#
case "${1:-}" in -h|--help) sed -n '3,17s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -le 1 ] || { echo "usage: test/gtest-ran.sh [FILE]" >&2; exit 2; }
[ -z "${1:-}" ] || [ -r "$1" ] || { echo "gtest-ran.sh: cannot read $1" >&2; exit 1; }
# (a guest's console may end its lines with CR)
tr -d '\r' <"${1:-/dev/stdin}" | awk '
    /^\[==========\] Running [0-9]+ tests? from / { started++ }
    /^\[==========\] [0-9]+ tests? from [0-9]+ test (suites?|cases?) ran\./ {
        ended++; total += $2
        if ($2 == 0) zero++
    }
    END {
        print total + 0
        if (started + ended == 0) {
            print "gtest-ran.sh: no gtest run in the output" > "/dev/stderr"; exit 1
        }
        if (ended < started) {
            printf "gtest-ran.sh: %d of %d gtest runs cut short (no summary: crashed or killed)\n", \
                started - ended, started > "/dev/stderr"; exit 1
        }
        if (zero) {
            printf "gtest-ran.sh: %d gtest run(s) selected no test (0 tests ran: a filter that matches nothing)\n", \
                zero > "/dev/stderr"; exit 1
        }
    }'
# SPDX-License-Identifier: BSD-3-Clause
