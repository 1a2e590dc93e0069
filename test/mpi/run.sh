#!/bin/sh
#
# Open MPI over UCX with syncmem alone: pml ucx and osc ucx, UCX_TLS=syncmem,
# the module preloaded the documented way (syncmem-run --print). In the
# two-host guest each rank takes its own device (rxe0, rxe1), so traffic
# crosses the veth.
#
top=$(cd "$(dirname "$0")/../.." && pwd)
prog=$top/test/mpi/mpi_syncmem
dev0=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
dev1=${SYNCMEM_DEV1:-$dev0}

if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$prog" ]; then
    echo "FAIL mpi: Open MPI or $prog is missing: install openmpi-bin and"
    echo "     libopenmpi-dev (contrib/bootstrap.sh does), then re-run configure"
    exit 1
fi

# the guest runs as root; two ranks, one per vCPU (busy-polling peers on
# one CPU crawl)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SYNCMEM_DEV0="$dev0" SYNCMEM_DEV1="$dev1"
if timeout 600 mpirun -np 2 --bind-to core \
        --mca pml ucx --mca osc ucx --mca btl self \
        --mca pml_ucx_devices any --mca pml_ucx_tls any \
        -x UCX_TLS=syncmem -x SYNCMEM_DEV0 -x SYNCMEM_DEV1 \
        -x "$("$top/contrib/syncmem-run" --print)" \
        sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then d=$SYNCMEM_DEV0;
               else d=$SYNCMEM_DEV1; fi
               UCX_NET_DEVICES=$d exec "$0"' "$prog"; then
    echo "PASS mpi: $dev0 <-> $dev1"
else
    echo "FAIL mpi: $dev0 <-> $dev1"
    exit 1
fi
