#!/usr/bin/env bash
# ucx-matrix.sh - build syncmem against another UCX and run the suite on it.
#
# For checking a UCX release by hand (CI covers Debian 12's 1.13.1, in the
# system and in a prefix, and the version guard in Debian 13's 1.18.1). The
# UCX comes from outside this tree: a prefix you installed, or another
# Debian userland (contrib/debian-root.sh); its source tree, of exactly that
# version, gives the internal headers. Nothing here builds UCX. See --help.
set -euo pipefail

prog=ucx-matrix.sh
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<EOF
usage: contrib/ucx-matrix.sh --ucx-src DIR (--ucx-prefix PREFIX | --root ROOT)
                             [--no-guest]

Builds a checkout of HEAD in matrix-<name>/ against the given UCX, runs the
host unit tests, then in the Soft-RoCE guest the device gtests (one host,
then two hosts) and the ucx_perftest pairs (test/guest/perftest.sh), and
prints '<version>: N passed, N failed' (gtest cases and perftest pairs).
MPI is not run: Debian's Open MPI and MPICH are linked to the system UCX.

  --ucx-src DIR      UCX source tree of exactly that version
  --ucx-prefix DIR   a UCX installed in its own prefix (loaded through
                     UCX_PLUGIN_PATH on 1.22+, LD_PRELOAD before)
  --root ROOT        another Debian userland with libucx-dev, e.g.
                     ROOT=\$(contrib/debian-root.sh); built and run chrooted
  --no-guest         host unit tests only
EOF
}
say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 2; }

src= prefix= root= guest=yes
while (($#)); do
    case $1 in
        --ucx-src) src=$(cd "${2:?}" && pwd); shift ;;
        --ucx-prefix) prefix=$(cd "${2:?}" && pwd); shift ;;
        --root) root=$(cd "${2:?}" && pwd); shift ;;
        --no-guest) guest=no ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
[[ -n $src && -n $prefix$root && -z ${prefix:+$root} ]] ||
    { usage >&2; exit 2; }

name=$(basename "${prefix:-$root}")
dir=$top/matrix-$name
say "checkout of HEAD in $dir"
rm -rf "$dir"
git -C "$top" clone -q "$top" "$dir"
(cd "$dir" && ./autogen.sh >/dev/null 2>&1) || die "autogen.sh failed"

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

cfg=(--with-ucx-src="$src")
[[ -n $prefix ]] && cfg+=(--with-ucx="$prefix")
inroot sh -c 'cd "$1" && shift && ./configure "$@" >configure.out 2>&1 &&
              make -j2 >make.out 2>&1 && make -j2 test/unit_test test/guest_test \
              >>make.out 2>&1' build "$dir" "${cfg[@]}" ||
    { tail -20 "$dir/configure.out" "$dir/make.out" >&2; die "build failed"; }
version=$(sed -n 's/.*for UCX \([0-9.]*\)$/\1/p' "$dir/configure.out" | tail -1)
say "built for UCX $version"

log=$dir/matrix.log
inroot sh -c 'cd "$1" && test/unit_test' unit "$dir" >"$log" 2>&1 || true

if [[ $guest == yes ]]; then
    # The guest mounts its own /tmp: a prefix there is lent through the tree.
    if [[ -n $prefix && $prefix == /tmp/* ]]; then
        cp -a "$prefix" "$dir/.ucx-prefix"
        lend="mkdir -p '$prefix' && mount --bind '$dir/.ucx-prefix' '$prefix'"
    else
        lend=true
    fi
    for mode in one two; do
        if [[ $mode == one ]]; then
            tests="test/guest_test --gtest_filter=-syncmem_wire_test.*; test/guest/perftest.sh"
        else
            tests="test/guest_test --gtest_filter=syncmem_wire_test.*"
        fi
        if [[ -n $root ]]; then
            cmd="$lend; $top/test/guard/in-root.sh --bind '$dir' '$root' sh -c \"cd '$dir' && { $tests; }\""
        else
            cmd="$lend; cd '$dir' && { $tests; }"
        fi
        args=(); [[ $mode == two ]] && args=(--two-hosts)
        "$top/contrib/guest.sh" "${args[@]}" -- sh -c "$cmd" >>"$log" 2>&1 || true
    done
fi

# gtest: '[  PASSED  ] N tests.' and 'N FAILED TEST(S)' (a crash counts as
# one failure); perftest: PASS/FAIL lines
passed=$(( $(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | paste -sd+ | sed 's/^$/0/') +
           $(grep -cE '^PASS (perftest|lanes)' "$log" || true) ))
failed=$(( $(sed -n 's/^ *\([0-9]*\) FAILED TESTS\{0,1\}$/\1/p' "$log" | paste -sd+ | sed 's/^$/0/') +
           $(grep -cE '^FAIL (perftest|lanes)' "$log" || true) +
           $(grep -cE 'Segmentation fault|Aborted|core dumped' "$log" || true) ))
grep -E '^\[  FAILED  \] [a-z]|^FAIL (perftest|lanes)' "$log" | sort -u >&2 || true
say "log: $log"
echo "$version: $passed passed, $failed failed"
