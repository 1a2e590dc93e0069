#!/bin/bash
# guest-init.sh - PID 1 of the guest booted by contrib/guest/guest.sh.
#
# Runs on the host's own root filesystem (9p, read-only, tmpfs overlay);
# the initramfs already mounted /tmp, /run, the share and the modules.
# /.guest is the host's control directory: mode, env, cmd; we write
# "started" and "status" there.  Sets up Soft-RoCE, runs the command, powers
# off.  PID 1 must never exit (kernel panic), hence the trap.
# SPDX-License-Identifier: BSD-3-Clause
ctl=/.guest bb=busybox
status=125
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
finish() {
    # stty sets the mode with TCSADRAIN: waits until the UARTs sent it all,
    # otherwise the tail of the output can be lost at power-off.
    $bb stty -F /dev/ttyS1 -echo 2>/dev/null
    $bb stty -F /dev/ttyS2 -echo 2>/dev/null
    echo "$status" >"$ctl/status"
    sync
    busybox poweroff -f 2>/dev/null || echo o >/proc/sysrq-trigger
    sleep 10
}
trap finish EXIT
fail() { echo "guest-init: $*" >&2; exit 1; }

# Every exec of a dynamic binary costs ~60 ms under TCG; the static busybox
# is much cheaper, so use it for the plumbing.
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
# what udev would add: bash's <(...) needs /dev/fd
$bb ln -s /proc/self/fd /dev/fd
$bb mount -t tmpfs -o mode=1777 tmp /dev/shm
# ttyS0 is the console (kernel messages, a log on the host); COMMAND's
# stdout is ttyS1, its stderr ttyS2.  No \n -> \r\n translation, so what the
# host gets is byte-exact, and no echo unless a person is typing (host stdin
# is a terminal; then COMMAND gets ttyS1 as stdin, else /dev/null).
$bb stty -F /dev/ttyS2 raw -echo && exec 2>/dev/ttyS2
if [[ -e $ctl/tty ]]; then
    $bb stty -F /dev/ttyS1 sane
    exec </dev/ttyS1 >/dev/ttyS1
else
    $bb stty -F /dev/ttyS1 raw -echo
    exec </dev/null >/dev/ttyS1
fi
$bb hostname syncmem-guest
ulimit -l unlimited     # verbs memory registration pins pages

modprobe -a rdma_rxe ib_uverbs dummy veth || fail "modprobe failed"
# vgem: a dma-buf exporter for the dma-buf test (6.1 has no udmabuf; 6.12
# has it built in, but the test uses vgem on both); the test says so if it
# is missing
modprobe vgem 2>/dev/null
mode=$(<"$ctl/mode")
# (ip/rdma -batch: one exec instead of one per command)
if [[ $mode == one ]]; then
    # One host: rxe on a dummy netdev.  rxe loops packets for its own
    # addresses back internally, so the dummy never has to deliver anything.
    ip -batch - <<-EOF || fail "network setup failed"
	link set lo up
	link add syncmem0 type dummy
	addr add 10.77.0.1/24 dev syncmem0
	link set syncmem0 up
	EOF
    rdma link add rxe0 type rxe netdev syncmem0 || fail "rdma link add rxe0"
    vars=(SYNCMEM_DEV0=rxe0:1 SYNCMEM_IP0=10.77.0.1 SYNCMEM_NETDEV0=syncmem0)
else
    # Two "hosts": rxe0 on smv0, rxe1 on smv1, a veth pair.  Both ends stay
    # in the root netns (6.1's rxe only sends from there), so both addresses
    # are local and the kernel would short-cut them through lo.  Policy
    # routing makes locally generated traffic to the peer address leave
    # through the veth instead: rules "iif lo to PEER -> table with PEER dev
    # VETH" sit in front of the local table, which moves down to pref 1000
    # (packets arriving on the veth have iif != lo, still hit the local
    # table and are delivered).  accept_local lets in a packet whose source
    # is one of our own addresses; rp_filter would drop it for that reason.
    for i in all default; do
        echo 1 >/proc/sys/net/ipv4/conf/$i/accept_local
        echo 0 >/proc/sys/net/ipv4/conf/$i/rp_filter
    done
    ip -batch - <<-EOF || fail "network setup failed"
	link set lo up
	link add smv0 type veth peer name smv1
	addr add 10.77.1.1/24 dev smv0
	addr add 10.77.1.2/24 dev smv1
	link set smv0 up
	link set smv1 up
	rule add pref 1000 lookup local
	rule del pref 0 lookup local
	rule add pref 100 iif lo to 10.77.1.2 lookup 100
	route add 10.77.1.2 dev smv0 src 10.77.1.1 table 100
	rule add pref 101 iif lo to 10.77.1.1 lookup 101
	route add 10.77.1.1 dev smv1 src 10.77.1.2 table 101
	EOF
    rdma -b - <<-EOF || fail "rdma link add failed"
	link add rxe0 type rxe netdev smv0
	link add rxe1 type rxe netdev smv1
	EOF
    vars=(SYNCMEM_DEV0=rxe0:1 SYNCMEM_IP0=10.77.1.1 SYNCMEM_NETDEV0=smv0
          SYNCMEM_DEV1=rxe1:1 SYNCMEM_IP1=10.77.1.2 SYNCMEM_NETDEV1=smv1)
fi

# shellcheck source=/dev/null
. "$ctl/env"     # the host's PATH, UCX_*, SYNCMEM_*, GTEST_*; ours win:
export "${vars[@]}" SYNCMEM_GUEST=1 SYNCMEM_GUEST_MODE="$mode"
: >"$ctl/started"
# (explicit <&0: bash would give a background job /dev/null as stdin)
bash "$ctl/cmd" <&0 &
wait $!
status=$?
