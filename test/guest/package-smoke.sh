#!/bin/sh
#
# The installed package, in the guest: dpkg -i the .deb (the guest's root
# is the host's, read-only, under a tmpfs overlay, so this installs into
# the overlay and vanishes with the guest), then use only installed files:
# where they went, the man page and pkg-config file, 'syncmem-run --check'
# on a healthy and three broken guests (test/guest/check.sh), and
# ucx_perftest pairs (UCT put, UCP put) through the installed syncmem-run.
#
#   contrib/guest/guest.sh -- test/guest/package-smoke.sh \
#       build-deb/uct-syncmem_*.deb
#
# SPDX-License-Identifier: BSD-3-Clause
top=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:?usage: package-smoke.sh PACKAGE.deb}
dev=${SYNCMEM_DEV0:?SYNCMEM_DEV0 is not set: run in the guest}
failed=0

step() { # step NAME CMD...: run CMD, report
    name=$1; shift
    if out=$("$@" 2>&1); then
        echo "PASS package $name"
    else
        echo "FAIL package $name: $*"; echo "$out"; failed=1
    fi
}

# man-db's trigger rebuilds the whole manual index, minutes under TCG; the
# overlay vanishes with the guest, so switch it off there
rm -f /var/lib/man-db/auto-update
if ! dpkg -i "$deb"; then
    echo "FAIL package install: dpkg -i $deb"
    exit 1
fi
echo "PASS package install: $(dpkg-query -W -f '${Package} ${Version}, depends ${Depends}' uct-syncmem)"

moddir=$(pkg-config --variable=moduledir uct-syncmem)
step "pkg-config module is the installed module" \
    test -f "$(pkg-config --variable=module uct-syncmem)"
step "module files in UCX's module directory ($moddir)" sh -c "
    test -f '$moddir/libuct_syncmem.so' && test -f '$moddir/libuct_syncmem_tl.so' &&
    dpkg -S '$moddir/libuct_syncmem_tl.so' | grep -q '^uct-syncmem:'"
step "syncmem-run preloads the installed module" sh -c \
    "syncmem-run --print | grep -qx 'LD_PRELOAD=$moddir/libuct_syncmem.so'"
step "man page uct_syncmem(7) lists UCX_SYNCMEM_PKEY" sh -c \
    "man -w uct_syncmem && zcat \$(man -w uct_syncmem) | grep -q 'UCX_SYNCMEM_PKEY='"
step "ucx_info lists syncmem on $dev" sh -c \
    "syncmem-run ucx_info -d | grep -A2 'Transport: syncmem' | grep -q 'Device: $dev'"

# --check, healthy and broken, with the installed syncmem-run
if "$top/test/guest/check.sh" /usr/bin/syncmem-run; then
    echo "PASS package syncmem-run --check"
else
    echo "FAIL package syncmem-run --check"; failed=1
fi

# ucx_perftest through the installed syncmem-run (perftest-pair.sh is the
# pair driver; SYNCMEM_RUN makes it use /usr/bin/syncmem-run)
export SYNCMEM_RUN=/usr/bin/syncmem-run
step "ucx_perftest put_bw zcopy (UCT)" "$top/contrib/bench/perftest-pair.sh" -- \
    -x syncmem -d "$dev" -t put_bw -D zcopy -s 65536 -n 200
step "ucx_perftest ucp_put_bw (UCX_TLS=syncmem)" "$top/contrib/bench/perftest-pair.sh" \
    --env UCX_TLS=syncmem --env UCX_NET_DEVICES="$dev" -- -t ucp_put_bw -s 65536 -n 100

exit $failed
