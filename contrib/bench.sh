#!/bin/sh
#
# bench.sh: the main job. Sets up and builds what is missing, boots the
# Soft-RoCE guest and shows the syncmem transport as the installed UCX sees
# it on the guest's RDMA device.
#
#   contrib/bench.sh [--no-build]
#
# (The transport comparison against rc_verbs and raw verbs arrives with the
# data path.)
#
set -e
cd "$(dirname "$0")/.."

case "$1" in
    -h|--help) sed -n '3,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --no-build) ;;
    *) contrib/bootstrap.sh ;;
esac

contrib/guest.sh -- sh -c '
    echo "== verbs devices"; ibv_devices
    echo "== UCX $(ucx_info -v | sed -n "s/^# Version //p") with syncmem loaded (contrib/syncmem-run)"
    contrib/syncmem-run ucx_info -d -t syncmem
    echo "== UCX_SYNCMEM_* settings"
    contrib/syncmem-run ucx_info -c | grep "^UCX_SYNCMEM_"'
