#!/bin/sh
#
# GPU check of syncmem's CUDA memory path, for a machine with an NVIDIA GPU
# (CUDA driver; toolkit headers in $CUDA_HOME, default /usr/local/cuda).
# Runs in seconds. See cuda_dmabuf.c for what it checks.
#
#   test/gpu/run.sh              driver level: detection, dma-buf export,
#                                buffer ids
#   test/gpu/run.sh mlx5_0:1     and, with the module built here and UCX
#                                installed, put/get zcopy between CUDA
#                                buffers over that RDMA port
#
# Exit status 0 only if every check that could run passed; what could not
# run is printed as SKIPPED.
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
exe=${TMPDIR:-/tmp}/syncmem-cuda-dmabuf.$$
trap 'rm -f "$exe"' EXIT

command -v nvidia-smi >/dev/null && nvidia-smi -L
stubs=$cuda/lib64/stubs   # link against the stub; the driver is loaded at run time
if pkg-config --exists ucx && [ -e "$top/.libs/libuct_syncmem.so" ]; then
    cc -O2 -Wall -I"$cuda/include" $(pkg-config --cflags ucx) \
        -o "$exe" "$top/test/gpu/cuda_dmabuf.c" -L"$stubs" -lcuda \
        $(pkg-config --libs ucx) -luct -lucs
    SYNCMEM_DEV=${1:-$SYNCMEM_DEV} "$top/contrib/tools/syncmem-run" "$exe"
else
    echo "no UCX or no built module here: driver checks only"
    cc -O2 -Wall -DSYNCMEM_DRIVER_ONLY -I"$cuda/include" \
        -o "$exe" "$top/test/gpu/cuda_dmabuf.c" -L"$stubs" -lcuda
    "$exe"
fi
