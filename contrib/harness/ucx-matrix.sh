#!/usr/bin/env bash
# ucx-matrix.sh - build syncmem against another UCX and run the suite on it.
#
# For checking a UCX release by hand (CI covers Debian 12's 1.13.1, in the
# system and in a prefix, and the version guard in Debian 13's 1.18.1). The
# UCX comes from outside this tree: a prefix you installed, or another
# Debian userland (contrib/guest/debian-root.sh); its source tree, of exactly that
# version, gives the internal headers. Nothing here builds UCX. See --help.
#
# The verdict can fail: each step that should run is framed by markers, and
# one that did not finish (a guest that did not boot or timed out, a crash,
# a missing gtest summary) or that ran no test (a gtest filter that selected
# none: '0 tests ran') counts as a failure; test/verdicts.test shows it.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail

prog=ucx-matrix.sh
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
    cat <<EOF
usage: contrib/harness/ucx-matrix.sh --ucx-src DIR (--ucx-prefix PREFIX | --root ROOT)
                             [--no-guest] [--readme FILE]
       contrib/harness/ucx-matrix.sh --count LOG STEP...

Builds a checkout of HEAD in matrix-<name>/ against the given UCX, every
test program included ('make check TESTS='), runs the host unit tests,
then in the Soft-RoCE guest, split as test/guest.test splits them: one host
(the device gtests but syncmem_wire_*, the ucx_perftest pairs of
test/guest/perftest.sh) and two hosts (the syncmem_wire_* gtests). With
--root, also the MPI tests in the root, whose Open MPI and MPICH are linked
to its UCX: test/mpi/run.sh in both boots, test/mpi/shmem_run.sh in the
one-host boot.

Prints '<version>: N passed, N failed' last (gtest cases, perftest pairs,
lanes, MPI runs; a step that did not finish, or ran no test, counts as a
failure) and exits 1 if anything failed or did not run (or the row could
not be written: --readme), 2 if the build failed.

  --ucx-src DIR      UCX source tree of exactly that version
  --ucx-prefix DIR   a UCX installed in its own prefix (loaded through
                     UCX_PLUGIN_PATH on 1.22+, LD_PRELOAD before)
  --root ROOT        another Debian userland with libucx-dev and its MPIs,
                     e.g. ROOT=\$(contrib/guest/debian-root.sh); built and run
                     chrooted
  --no-guest         host unit tests only
  --readme FILE      then write this run's row, passed or failed, into
                     FILE's block '<!-- BEGIN generated: releases -->'
                     (README.md's), replacing the row of the same UCX
                     version and source (contrib/harness/releases.py); not
                     when the build failed
  --count LOG STEP...  only the counting, of a saved matrix.log and the
                     steps it must hold (unit-gtest one-gtest perftest
                     two-gtest ...; each step's part into LOG.steps/): the
                     last line and exit status as above

SYNCMEM_CI_LOCK=FILE runs each guest boot under 'flock FILE' (as .ci/run
does), for machines where several runs share the one guest slot.
EOF
}
say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 2; }

# count LOG STEPDIR LABEL STEP...: the verdict on a matrix.log: prints
# 'LABEL: N passed, N failed' last; returns 1 if anything failed or did not
# run. Per step (its part of LOG goes to STEPDIR/STEP): gtest
# '[  PASSED  ] N tests.' and 'N FAILED TEST(S)'; a gtest run cut short (no
# summary) counts its ended cases and one failure more; a gtest run that
# selected no test ('0 tests ... ran', test/gtest-ran.sh) one failure; the
# PASS/FAIL lines of perftest, lanes, mpi and shmem. A crash or an assertion
# where no test failed, a step that did not end or ended non-zero with no
# failure counted, a step that counted nothing (0 passed, 0 failed: its
# tests all skipped, or none ran): one failure more each. Leaves each
# step's 'passed failed' in steps_counted[STEP] and the total in counted.
declare -A steps_counted=()
counted=''
count() {
    local log=$1 stepdir=$2 label=$3 s f p n end why skipped
    shift 3
    rm -rf "$stepdir"; mkdir -p "$stepdir"
    awk -v d="$stepdir" '/^matrix-step [a-z0-9-]+$/ {f = d "/" $2; printf "" > f}
                         f != "" {print >> f}
                         /^matrix-step-end / {f = ""}' "$log"
    sum() { awk '{s += $1} END {print s + 0}'; }
    local passed=0 failed=0 problems=()
    for s; do
        f=$stepdir/$s
        if [[ ! -f $f ]]; then
            failed=$((failed + 1)); problems+=("$s: did not run")
            steps_counted[$s]='0 1'; continue
        fi
        # (grep -c prints 0, and exits 1, where no line matches)
        p=$(grep -cE '^PASS (perftest|lanes|mpi|shmem)' "$f" || true)
        n=$(grep -cE '^FAIL (perftest|lanes|mpi|shmem)' "$f" || true)
        if [[ $s == *-gtest ]]; then
            if grep -qE '^\[==========\] [0-9]+ tests? from .* ran\.' "$f"; then
                p=$((p + $(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$f" | sum)))
                n=$((n + $(sed -n 's/^ *\([0-9]*\) FAILED TESTS\{0,1\}$/\1/p' "$f" | sum)))
                if ! why=$("$top/test/gtest-ran.sh" "$f" 2>&1 >/dev/null); then
                    n=$((n + 1)); problems+=("$s: ${why#gtest-ran.sh: }")
                fi
            else
                # cut short: the cases that ended, and one failure for the cut
                p=$((p + $(grep -c '^\[       OK \]' "$f" || true)))
                n=$((n + $(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$f" || true) + 1))
                problems+=("$s: no gtest summary (cut short: crashed or killed)")
            fi
        fi
        if ((n == 0)) && grep -qE 'Segmentation fault|Aborted|core dumped|Assertion .* failed' "$f"; then
            n=1; problems+=("$s: a crash or an assertion, with no failed test counted")
        fi
        end=$(sed -n "s/^matrix-step-end $s rc=\([0-9]*\)$/\1/p" "$f")
        if [[ -z $end ]]; then
            n=$((n + 1)); problems+=("$s: did not finish (the guest timed out or died: see the log)")
        elif ((end != 0 && n == 0)); then
            n=1; problems+=("$s: exit $end with no failure counted")
        fi
        if ((p + n == 0)); then
            skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:$/\1/p' "$f" | sum)
            n=1; problems+=("$s: counted nothing (0 passed, 0 failed, $skipped skipped): nothing was checked")
        fi
        passed=$((passed + p)) failed=$((failed + n)) steps_counted[$s]="$p $n"
    done
    if (($# == 0)); then
        failed=1; problems+=("no step to count")
    fi
    while read -r _ b r; do
        say "boot $b: $r (contrib/guest/guest.sh: 124 timed out, 125 the guest failed)"
    done < <(grep -h '^matrix-boot ' "$log" || true)
    # (what failed, shown again; the count above is the verdict)
    grep -hE '^\[  FAILED  \] [a-z]|^FAIL (perftest|lanes|mpi|shmem)|Assertion .* failed' \
        "$stepdir"/* 2>/dev/null | sort -u >&2 || true
    for pr in "${problems[@]}"; do say "$pr"; done
    say "log: $log (each step's part in $stepdir/)"
    counted="$passed passed, $failed failed"
    echo "$label: $counted"
    ((failed == 0))
}

src='' prefix='' root='' guest=yes readme=''
if [[ ${1:-} == --count ]]; then
    (($# >= 3)) || { usage >&2; exit 2; }
    log=$2; shift 2
    [[ -r $log ]] || die "cannot read $log"
    count "$log" "$log.steps" "$(basename "$log")" "$@" && exit 0
    exit 1
fi
while (($#)); do
    case $1 in
        --ucx-src) src=$(cd "${2:?}" && pwd); shift ;;
        --ucx-prefix) prefix=$(cd "${2:?}" && pwd); shift ;;
        --root) root=$(cd "${2:?}" && pwd); shift ;;
        --no-guest) guest=no ;;
        --readme) readme=$(realpath "${2:?}"); shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
[[ -n $src && -n $prefix$root && -z ${prefix:+$root} ]] ||
    { usage >&2; exit 2; }
if [[ -n $readme ]]; then
    { [[ -w $readme ]] && grep -qxF '<!-- BEGIN generated: releases -->' "$readme"; } ||
        die "--readme $readme: no writable file with a '<!-- BEGIN generated: releases -->' block"
    command -v python3 >/dev/null || die "--readme needs python3 (contrib/harness/releases.py)"
fi
started=$(date -u '+%F %H:%M UTC')

name=$(basename "${prefix:-$root}")
dir=$top/matrix-$name
say "checkout of HEAD in $dir"
rm -rf "$dir"
git -C "$top" clone -q "$top" "$dir"
(cd "$dir" && ./autogen.sh >/dev/null 2>&1) || die "autogen.sh failed in $dir"

# inroot CMD: CMD in the build's userland (the root, or this system)
inroot() {
    if [[ -n $root ]]; then
        # the root has no googletest sources nor libdrm headers: lend ours
        "$top/test/guard/in-root.sh" --bind "$dir" --bind "$src" \
            --bind /usr/src/googletest --bind /usr/include/libdrm \
            "$root" "$@"
    else
        "$@"
    fi
}

# 'make check TESTS=' builds every check program and script (cm_flood; the
# MPI programs where configure found the MPIs) and runs none.
cfg=(--with-ucx-src="$src")
[[ -n $prefix ]] && cfg+=(--with-ucx="$prefix")
# shellcheck disable=SC2016 # (sh -c's own arguments)
inroot sh -c 'cd "$1" && shift && ./configure "$@" >configure.out 2>&1 &&
              make -j2 >make.out 2>&1 && make -j2 check TESTS= >>make.out 2>&1' \
    build "$dir" "${cfg[@]}" ||
    { tail -n 20 "$dir/configure.out" "$dir/make.out" >&2
      die "build failed (logs: $dir/configure.out, $dir/make.out)"; }
version=$(sed -n 's/.*for UCX \([0-9.]*\)$/\1/p' "$dir/configure.out" | tail -1)
[[ -n $version ]] ||
    die "configure did not say which UCX it built for (no 'for UCX X.Y.Z' in $dir/configure.out)"
for p in test/unit_test test/guest_test test/guest/cm_flood; do
    [[ -x $dir/$p ]] || die "the build made no $p (see $dir/make.out)"
done
mpi=no
if [[ -n $root ]]; then
    [[ -x $dir/test/mpi/mpi_syncmem ]] ||
        die "no test/mpi/mpi_syncmem: configure found no Open MPI in $root (contrib/guest/debian-root.sh installs it; see $dir/configure.out)"
    mpi=yes
fi
say "built for UCX $version"

# readme_row: this run's row into $readme (contrib/harness/releases.py
# says what each column holds): how the build loads the module (its
# syncmem-run --print), what ucx_info -b says of that UCX, the root's
# codename and libucx0, the kernels the guest booted, the tree's commit.
readme_row() {
    local s missing=() run kernels commit libucx0 p n mp=0 mf=0 args=() row
    for s in "${expect[@]}"; do
        grep -qs "^matrix-step-end $s " "$dir/steps/$s" || missing+=("$s")
    done
    if [[ $guest == no ]]; then run='partial run (--no-guest)'
    elif ((${#missing[@]})); then run="partial run (did not finish: ${missing[*]})"
    else run='whole run'; fi
    kernels=$(sed -n 's/^matrix-kernel //p' "$log" | sort -u | paste -sd, -)
    [[ $guest == yes ]] || kernels='none (--no-guest)'
    commit=$(git -C "$dir" rev-parse --short HEAD)
    [[ -z $(git -C "$dir" status --porcelain --untracked-files=no) ]] || commit+=-dirty
    (cd "$dir" && inroot "$dir/contrib/tools/syncmem-run" ucx_info -b) >"$dir/ucx_info-b.out" 2>&1 || true
    kernels=${kernels//,/, }
    args=(--ucx "$version" --date "$started" --kernel "${kernels:-none (the guest did not boot)}"
          --commit "$commit" --run "$run" --result "$counted"
          --loaded "$("$dir/contrib/tools/syncmem-run" --print | sed 's/=.*//')"
          --build-info "$dir/ucx_info-b.out")
    if [[ -n $root ]]; then
        for s in mpi-one shmem mpi-two; do
            read -r p n <<<"${steps_counted[$s]:-0 0}"; mp=$((mp + p)) mf=$((mf + n))
        done
        [[ $guest == no ]] || args+=(--mpi "$mp passed, $mf failed")
        # shellcheck disable=SC2016 # (dpkg-query's format)
        libucx0=$(cd "$dir" && inroot dpkg-query -W -f '${Version}' libucx0) || libucx0=''
        args+=(--source root --root "$root" --libucx0 "$libucx0")
    else
        args+=(--source prefix)
    fi
    row=$(python3 "$top/contrib/harness/releases.py" row "${args[@]}") &&
        python3 "$top/contrib/harness/releases.py" splice "$readme" --row "$row"
}

# The steps of each boot, framed by 'matrix-step NAME' and
# 'matrix-step-end NAME rc=N'; the same script runs on the host, in the
# guest and in the root.
cat >"$dir/matrix-steps.sh" <<'STEPS'
#!/bin/sh
# matrix-steps.sh BOOT MPI: the steps of one boot (unit, one, two)
cd "$(dirname "$0")" || exit 1
step() {
    name=$1; shift
    echo "matrix-step $name"
    "$@"
    echo "matrix-step-end $name rc=$?"
}
case $1 in
    unit) step unit-gtest test/unit_test ;;
    one)  echo "matrix-kernel $(uname -r)"
          step one-gtest test/guest_test --gtest_filter='-syncmem_wire_*'
          step perftest test/guest/perftest.sh
          if [ "$2" = yes ]; then
              step mpi-one test/mpi/run.sh
              step shmem test/mpi/shmem_run.sh
          fi ;;
    two)  echo "matrix-kernel $(uname -r)"
          step two-gtest test/guest_test --gtest_filter='syncmem_wire_*'
          if [ "$2" = yes ]; then step mpi-two test/mpi/run.sh; fi ;;
esac
exit 0
STEPS
chmod +x "$dir/matrix-steps.sh"
expect=(unit-gtest)

log=$dir/matrix.log
: >"$log"
rc=0
inroot "$dir/matrix-steps.sh" unit >>"$log" 2>&1 || rc=$?
((rc == 0)) || echo "matrix-boot unit rc=$rc" >>"$log"

if [[ $guest == yes ]]; then
    expect+=(one-gtest perftest two-gtest)
    [[ $mpi == yes ]] && expect+=(mpi-one shmem mpi-two)
    # The guest mounts its own /tmp: a prefix there is lent through the tree.
    if [[ -n $prefix && $prefix == /tmp/* ]]; then
        cp -a "$prefix" "$dir/.ucx-prefix"
        lend="mkdir -p '$prefix' && mount --bind '$dir/.ucx-prefix' '$prefix'"
    else
        lend=true
    fi
    for mode in one two; do
        steps="'$dir/matrix-steps.sh' $mode $mpi"
        if [[ -n $root ]]; then
            cmd="$lend && '$top/test/guard/in-root.sh' --bind '$dir' '$root' $steps"
        else
            cmd="$lend && $steps"
        fi
        args=(--timeout 2400); [[ $mode == two ]] && args+=(--two-hosts)
        say "guest, $mode host(s)"
        rc=0
        lock=(); [[ -n ${SYNCMEM_CI_LOCK:-} ]] && lock=(flock "$SYNCMEM_CI_LOCK")
        "${lock[@]}" "$top/contrib/guest/guest.sh" "${args[@]}" -- sh -c "$cmd" >>"$log" 2>&1 || rc=$?
        ((rc == 0)) || echo "matrix-boot $mode rc=$rc" >>"$log"
    done
fi

status=0
count "$log" "$dir/steps" "$version" "${expect[@]}" || status=1
[[ -z $readme ]] || readme_row || { say "no row written into $readme"; status=1; }
exit $status
