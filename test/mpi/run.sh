#!/bin/sh
#
# MPI over UCX with syncmem alone (UCX_TLS=syncmem), the module preloaded
# the documented way (syncmem-run --print):
#  - Open MPI: pml ucx and osc ucx;
#  - MPICH (ch4:ucx), if installed.
# In the two-host guest each rank takes its own device (rxe0, rxe1), so
# traffic crosses the veth.
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
dev0=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run through test/guest.test}
dev1=${SYNCMEM_DEV1:-$dev0}
preload=$("$top/contrib/tools/syncmem-run" --print)
status=0

# Each rank picks its device by rank number ($1: the variable holding it).
pick_dev='eval r=\$$1; shift
          if [ "$r" = 0 ]; then d=$SYNCMEM_DEV0; else d=$SYNCMEM_DEV1; fi
          UCX_NET_DEVICES=$d exec "$@"'
export SYNCMEM_DEV0="$dev0" SYNCMEM_DEV1="$dev1"

# Two ranks, one per vCPU (busy-polling peers on one CPU crawl).
prog=$top/test/mpi/mpi_syncmem
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$prog" ]; then
    echo "FAIL mpi: Open MPI or $prog is missing: install openmpi-bin and"
    echo "     libopenmpi-dev (contrib/bootstrap.sh does), then re-run configure"
    status=1
else
    # the guest runs as root
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if timeout 600 mpirun -np 2 --bind-to core \
            --mca pml ucx --mca osc ucx --mca btl self \
            --mca pml_ucx_devices any --mca pml_ucx_tls any \
            -x UCX_TLS=syncmem -x SYNCMEM_DEV0 -x SYNCMEM_DEV1 -x "$preload" \
            sh -c "$pick_dev" pick OMPI_COMM_WORLD_RANK "$prog"; then
        echo "PASS mpi (Open MPI): $dev0 <-> $dev1"
    else
        echo "FAIL mpi (Open MPI): $dev0 <-> $dev1"
        status=1
    fi
fi

prog=$top/test/mpi/mpi_syncmem_mpich
if ! command -v mpiexec.mpich >/dev/null 2>&1 || [ ! -x "$prog" ]; then
    echo "FAIL mpi: MPICH or $prog is missing: install mpich and"
    echo "     libmpich-dev (contrib/bootstrap.sh does), then re-run configure"
    status=1
elif timeout 600 mpiexec.mpich -n 2 -bind-to core -launcher fork \
        -genv UCX_TLS syncmem -genv "${preload%%=*}" "${preload#*=}" \
        sh -c "$pick_dev" pick PMI_RANK "$prog"; then
    echo "PASS mpi (MPICH): $dev0 <-> $dev1"
else
    echo "FAIL mpi (MPICH): $dev0 <-> $dev1"
    status=1
fi

exit $status
