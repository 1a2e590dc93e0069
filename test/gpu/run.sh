#!/bin/sh
#
# GPU check of syncmem's CUDA memory path, for a machine with an NVIDIA GPU
# (and, to move data, an RDMA device). Runs in seconds; what it checks is at
# the top of cuda_dmabuf.c.
#
#   test/gpu/run.sh              driver checks only: dma-buf export, buffer
#                                ids (no data moves: exit status 77)
#   test/gpu/run.sh mlx5_0:1     and data between CUDA buffers over that
#                                RDMA port (or SYNCMEM_DEV): UCT put/get
#                                zcopy, registrations, stale rkeys; UCP tag,
#                                put and get
#
# The second builds against the UCX this tree was configured with (make
# test/gpu/cuda_dmabuf; else pkg-config's UCX) and runs under
# contrib/tools/syncmem-run, which loads the module built here (or
# SYNCMEM_LIB, or the installed one).
#
# Exit status: 0 when data moved and every check passed, 1 on a failure, 77
# when no data could move (a SKIP line says why). CUDA_HOME: the toolkit's
# headers and stub libcuda (default /usr/local/cuda). SYNCMEM_TEST_WAIT_S:
# the bound of each wait, in seconds (default 60).
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
dev=${1:-$SYNCMEM_DEV}
run=$top/contrib/tools/syncmem-run
src=$top/test/gpu/cuda_dmabuf.c    # and, for data movement, cuda_ucp.c
tmp=${TMPDIR:-/tmp}/syncmem-cuda-dmabuf.$$
trap 'rm -f "$tmp"' EXIT

skip() {
    echo "SKIP GPU checks: $*"
    exit 77
}

# The driver itself, which the program loads at run time (it links
# against the toolkit's stub).
have_driver() {
    for dir in $(echo "${LD_LIBRARY_PATH:-}" | tr : ' '); do
        [ -e "$dir/libcuda.so.1" ] && return 0
    done
    { /sbin/ldconfig -p || ldconfig -p; } 2>/dev/null |
        grep -q 'libcuda\.so\.1 '
}

[ -e "$cuda/include/cuda.h" ] ||
    skip "no CUDA headers in $cuda (set CUDA_HOME)"
have_driver || skip "no CUDA driver (libcuda.so.1): no GPU here"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L
fi

if [ -z "$dev" ]; then
    cc -O2 -Wall -I"$cuda/include" -DSYNCMEM_DRIVER_ONLY -o "$tmp" "$src" \
        -L"$cuda/lib64/stubs" -lcuda || exit 1
    "$tmp"
    exit $?
fi

[ -x "$run" ] ||
    skip "no $run: configure this tree first (contrib/bootstrap.sh)"
if ! "$run" --print >/dev/null 2>&1; then
    "$run" --print 2>&1 | sed 's/^/  /'
    skip "no syncmem module to load ('make' builds it)"
fi
if grep -q '^test/gpu/cuda_dmabuf:' "$top/Makefile" 2>/dev/null; then
    make -s -C "$top" test/gpu/cuda_dmabuf || exit 1
    prog=$top/test/gpu/cuda_dmabuf
elif pkg-config --exists ucx; then
    # configured without CUDA headers: build against pkg-config's UCX
    # shellcheck disable=SC2046 # (flags: words)
    cc -O2 -Wall -I"$cuda/include" $(pkg-config --cflags ucx) -o "$tmp" \
        "$src" "$top/test/gpu/cuda_ucp.c" -L"$cuda/lib64/stubs" -lcuda \
        $(pkg-config --libs ucx) || exit 1
    prog=$tmp
else
    skip "no UCX to build against (not configured with the CUDA headers,"\
         "and pkg-config knows no ucx)"
fi
SYNCMEM_DEV=$dev "$run" "$prog"
