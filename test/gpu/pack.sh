#!/bin/sh
#
# Packs test/gpu/cuda_reg (built here by 'make check' or
# 'make test/gpu/cuda_reg') to run on a GPU machine that has no UCX: the
# program and the shared libraries it loads that are not glibc's (libucs,
# libucm, libnuma, ...) go into DIR, and the command that runs it there is
# printed. The GPU machine's glibc must be as new as this one's or newer;
# it needs the CUDA driver, and neither UCX nor an RDMA device.
#
# usage: test/gpu/pack.sh DIR     (e.g. .gpu-carry, which git ignores)
#
# SPDX-License-Identifier: BSD-3-Clause
case "${1:-}" in
    -h|--help) sed -n '3,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    '') sed -n '10s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
dir=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$PWD
[ -f "$build/Makefile" ] || build=$top
exe=$build/test/gpu/cuda_reg
if [ ! -x "$exe" ]; then
    echo "pack.sh: no $exe: run 'make test/gpu/cuda_reg' first" >&2
    exit 1
fi
command -v ldd >/dev/null || { echo "pack.sh: no ldd" >&2; exit 1; }
mkdir -p "$dir" || exit 1

# "libx.so.N => /path/libx.so.N (0x...)": all but glibc's own, which the
# other machine has (and must match its dynamic loader)
glibc='libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux[-_a-z0-9]*'
libs=$(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
       grep -Ev "/($glibc)\.so[^/]*\$")
if ldd "$exe" | grep -q 'not found'; then
    echo "pack.sh: $exe needs libraries this machine lacks:" >&2
    ldd "$exe" | grep 'not found' >&2
    exit 1
fi
cp "$exe" "$dir/" || exit 1
for l in $libs; do
    cp -L "$l" "$dir/" || exit 1
done
names=$(for l in $libs; do printf ' %s' "${l##*/}"; done)
echo "packed into $dir: cuda_reg$names" >&2
case $dir in /*) ;; *) dir=./$dir ;; esac
echo "LD_LIBRARY_PATH=$dir $dir/cuda_reg"
