#!/bin/sh
#
# bootstrap.sh: set up a fresh Debian machine and build syncmem.
#
#   contrib/bootstrap.sh [--no-install] [CONFIGURE-ARGS...]
#
# Installs the build and test dependencies that are missing (Debian
# packages: UCX development files and tools, rdma-core, googletest,
# autotools, qemu for the test guest) and apt's deb-src entries (configure
# fetches UCX's source package), generates configure, runs it, then builds.
# Configure runs when there is no Makefile yet, and again whenever
# CONFIGURE-ARGS are given; without them a configured tree keeps its
# configuration (it says which). Safe to run again. For a UCX
# installed in its own prefix: --with-ucx=PREFIX --with-ucx-src=DIR
# (contrib/pkg/ucx-prefix.sh builds one).
#
set -e
cd "$(dirname "$0")/.."

install=yes
case "$1" in
    -h|--help) sed -n '3,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --no-install) install=no; shift ;;
esac

# Build: UCX dev files + tools, verbs, googletest, autotools.
# Tests and benchmarks: qemu and busybox for the guest, verbs utilities,
# perftest, iproute2 for the guest's network, Open MPI and MPICH for the MPI
# tests,
# libdrm headers for the dma-buf test (vgem), tcpdump for the traffic class
# test (test/guest/test_qos.cc); clang and its libFuzzer for contrib/harness/fuzz.sh,
# valgrind for test/valgrind.sh, python3 for the tables (contrib/bench/tables.py,
# test/tables.test, which would otherwise skip).
pkgs="libucx-dev ucx-utils libibverbs-dev rdma-core ibverbs-utils
      ibverbs-providers perftest googletest autoconf automake libtool
      pkg-config make g++ dpkg-dev qemu-system-x86 busybox-static kmod cpio
      iproute2 openmpi-bin libopenmpi-dev mpich libmpich-dev time gnuplot-nox
      bsdextrautils libdrm-dev tcpdump clang-14 libclang-rt-14-dev valgrind
      python3"

# configure fetches the installed UCX's Debian source package (its internal
# headers) with 'apt-get source', which needs deb-src entries; configure
# changes nothing outside the tree, so they are added here.
if [ "$install" = yes ]; then
    config/apt-install.sh $pkgs
    config/apt-deb-src.sh ||
        echo "bootstrap.sh: no deb-src entries (see above): configure can fetch UCX's source only with them, or takes --with-ucx-src=DIR" >&2
fi

[ -x configure ] || ./autogen.sh
if [ ! -f Makefile ] || [ $# -gt 0 ]; then
    ./configure "$@"
else
    # (config.status --config: the arguments configure last ran with)
    args=$(./config.status --config 2>/dev/null) || args="(see config.log)"
    echo "bootstrap.sh: keeping this tree's configuration (configure ran with: ${args:-no arguments});" \
         "arguments given to bootstrap.sh run configure again with them" >&2
fi
make -j"$(nproc)"
# SPDX-License-Identifier: BSD-3-Clause
