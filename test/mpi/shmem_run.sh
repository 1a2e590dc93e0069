#!/bin/sh
#
# OpenSHMEM over UCX with syncmem alone: Open MPI's OSHMEM (oshrun, spml
# ucx), UCX_TLS=syncmem, the module preloaded (syncmem-run --print); PEs on
# one device (SYNCMEM_DEV0): 2, then 4 (SYNCMEM_SHMEM_PES changes that).
# (4 PEs hang in shmem_finalize with doorbell batching: TX_DB_BATCH's
# documentation says why.)
# --mca osc ^rdma: Debian 12's OSHMEM crashes at finalize with the rdma
# one-sided component.
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
preload=$("$top/contrib/tools/syncmem-run" --print)
prog=$top/test/mpi/shmem_syncmem
status=0

if ! command -v oshrun >/dev/null 2>&1 || [ ! -x "$prog" ]; then
    echo "FAIL shmem: oshrun or $prog is missing: install openmpi-bin and"
    echo "     libopenmpi-dev (contrib/bootstrap.sh does), then re-run configure"
    exit 1
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in ${SYNCMEM_SHMEM_PES:-2 4}; do
    # more PEs than vCPUs: oversubscribed, each yields when idle
    if timeout 600 oshrun -np $np --oversubscribe \
            --mca spml ucx --mca pml ucx --mca osc ^rdma --mca btl self \
            --mca pml_ucx_devices any --mca pml_ucx_tls any \
            --mca mpi_yield_when_idle 1 \
            -x UCX_TLS=syncmem -x UCX_NET_DEVICES="$dev" -x "$preload" \
            "$prog"; then
        echo "PASS shmem: $np PEs on $dev"
    else
        echo "FAIL shmem: $np PEs on $dev"
        status=1
    fi
done
exit $status
