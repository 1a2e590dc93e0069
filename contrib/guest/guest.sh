#!/usr/bin/env bash
# guest.sh - run a command inside a throwaway VM that has Soft-RoCE (rdma_rxe).
#
# The host kernel has no RDMA, so we boot a stock Debian kernel under qemu
# (bookworm's 6.1 or bookworm-security's 6.12, see --kernel),
# share the HOST root filesystem read-only over 9p (with a tmpfs overlay so the
# guest can write), share the build tree read-write at the same absolute path,
# load rdma_rxe and run COMMAND there.  The guest-side setup lives in
# contrib/guest/guest-init.sh.  See --help.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail

prog=guest
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
    cat <<EOF
usage: contrib/guest/guest.sh [options] -- COMMAND [ARGS...]

Boot a qemu guest with Soft-RoCE devices and run COMMAND in it (in the current
directory, which should be inside the shared directory).  Exits with COMMAND's
status; 124 on timeout; 125 if the guest itself failed; 77 (skipped) for
--two-hosts under SYNCMEM_GUEST=none on a machine with one active port.

options:
  --kernel 6.1|6.12 the guest kernel (default \$SYNCMEM_GUEST_KERNEL or 6.1):
                    6.1 is Debian 12's own (what linux-image-amd64 depends
                    on), 6.12 the newest linux-image-6.12.*+deb12-amd64 that
                    apt knows of (bookworm-security); each is fetched with
                    apt-get download once and cached per package and version
  --two-hosts       two rxe devices (rxe0 on smv0 10.77.1.1, rxe1 on smv1
                    10.77.1.2) joined by a veth pair, so traffic between them
                    really crosses a netdev (tc netem on smv0 works)
                    default: one rxe0 on dummy netdev syncmem0 (10.77.0.1)
  --timeout SECS    kill the guest after SECS seconds (default 1800)
  --cpus N          guest vCPUs (default 2)
  --mem MB          guest memory (default 4096)
  --cache DIR       kernel/initramfs cache (default \$SYNCMEM_GUEST_CACHE or
                    <repo>/.guest-cache): DIR/<package>_<version>/
  --share DIR       directory shared read-write at the same path
                    (default: the repo root, $repo_root)
  -h, --help        this text

environment:
  SYNCMEM_GUEST=none       run COMMAND directly on this machine, on its
                           real device (an HCA), with the variables below
                           for its ports; --kernel is ignored
  SYNCMEM_DEVICE=DEV:PORT  with none: the port that plays rxe0 (default: the
                           first active port ibv_devinfo shows)
  SYNCMEM_DEVICE2=DEV:PORT with none: the port that plays rxe1 for
                           --two-hosts (default: the next active port); it
                           must reach SYNCMEM_DEVICE, and the wire tests put
                           netem loss on both ports' netdevs for seconds
  SYNCMEM_GUEST_KERNEL=6.1|6.12   the default for --kernel
  SYNCMEM_GUEST_ACCEL=kvm|tcg   force the qemu accelerator (default: tcg
                           unless a real kvm_intel/kvm_amd is loaded)
  SYNCMEM_GUEST_APPEND     extra kernel command line (e.g. loglevel=7;
                           the console is shown only if the guest dies)
  PATH, UCX_*, SYNCMEM_*, GTEST_* are passed into the guest.
In the guest COMMAND sees SYNCMEM_GUEST=1, SYNCMEM_GUEST_MODE=one|two,
SYNCMEM_GUEST_KERNEL=6.1|6.12,
SYNCMEM_DEV0=rxe0:1, SYNCMEM_IP0, and in two-host mode SYNCMEM_DEV1=rxe1:1,
SYNCMEM_IP1, SYNCMEM_NETDEV0/1. With SYNCMEM_GUEST=none: SYNCMEM_GUEST_MODE=host,
SYNCMEM_DEV0 (and SYNCMEM_DEV1 with --two-hosts), SYNCMEM_NETDEV0/1 for
RoCE ports.
EOF
}

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 125; }

mode=one timeout=1800 cpus=2 mem=4096 kernel=${SYNCMEM_GUEST_KERNEL:-6.1}
cache=${SYNCMEM_GUEST_CACHE:-$repo_root/.guest-cache}
share=$repo_root
while (($#)); do
    case $1 in
        --two-hosts) mode=two ;;
        --kernel) kernel=${2:?}; shift ;;
        --timeout) timeout=${2:?}; shift ;;
        --cpus) cpus=${2:?}; shift ;;
        --mem) mem=${2:?}; shift ;;
        --cache) cache=${2:?}; shift ;;
        --share) share=${2:?}; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) say "unknown option '$1'"; usage >&2; exit 125 ;;
    esac
    shift
done
(($#)) || { usage >&2; exit 125; }
# --- machine with a real HCA: no VM, the same variables for its ports ----
# SYNCMEM_DEVICE (default: the first active port ibv_devinfo shows) plays
# rxe0, SYNCMEM_DEVICE2 (default: the next active one) rxe1; --two-hosts
# without a second port exits 77 (skipped). A RoCE port's netdev comes from
# its GID table, else the Soft-RoCE parent or the PCI function's net/.
port_netdev() { # DEV:PORT
    local d=${1%%:*} p=${1##*:} f nd
    for f in /sys/class/infiniband/"$d"/ports/"$p"/gid_attrs/ndevs/*; do
        nd=$(cat "$f" 2>/dev/null) && [[ -n $nd ]] && { echo "$nd"; return; }
    done
    if [[ -f /sys/class/infiniband/$d/parent ]]; then
        cat "/sys/class/infiniband/$d/parent"; return
    fi
    ls "/sys/class/infiniband/$d/device/net" 2>/dev/null | head -1
}
if [[ ${SYNCMEM_GUEST:-} == none ]]; then
    # shellcheck disable=SC2207 # (no spaces in device names)
    devs=($(ibv_devinfo 2>/dev/null | awk '/hca_id:/ {d=$2}
        /port:/ {p=$2} /state:.*PORT_ACTIVE/ {print d ":" p}'))
    dev0=${SYNCMEM_DEVICE:-${devs[0]:-}}
    [[ -n $dev0 ]] ||
        die "SYNCMEM_GUEST=none but ibv_devinfo shows no active port (set SYNCMEM_DEVICE=<device>:<port>)"
    [[ $dev0 == *:* ]] || dev0=$dev0:1
    dev1=${SYNCMEM_DEVICE2:-}
    if [[ -z $dev1 ]]; then
        for d in "${devs[@]}"; do
            [[ $d != "$dev0" ]] && { dev1=$d; break; }
        done
    fi
    [[ -z $dev1 || $dev1 == *:* ]] || dev1=$dev1:1
    unset SYNCMEM_DEV1 SYNCMEM_NETDEV0 SYNCMEM_NETDEV1 SYNCMEM_IP0 SYNCMEM_IP1
    export SYNCMEM_GUEST_MODE=host SYNCMEM_DEV0=$dev0
    nd=$(port_netdev "$dev0"); [[ -z $nd ]] || export SYNCMEM_NETDEV0=$nd
    if [[ $mode == two ]]; then
        [[ -n $dev1 ]] || {
            say "skipped: the two-host tests need a second active port (set SYNCMEM_DEVICE2); only $dev0 is (${devs[*]:-none active})"
            exit 77; }
        export SYNCMEM_DEV1=$dev1
        nd=$(port_netdev "$dev1"); [[ -z $nd ]] || export SYNCMEM_NETDEV1=$nd
    fi
    say "no guest (SYNCMEM_GUEST=none): SYNCMEM_DEV0=$SYNCMEM_DEV0${SYNCMEM_DEV1:+ SYNCMEM_DEV1=$SYNCMEM_DEV1}"
    exec "$@"
fi
[[ $kernel == 6.1 || $kernel == 6.12 ]] ||
    { say "--kernel (or SYNCMEM_GUEST_KERNEL) must be 6.1 or 6.12, not '$kernel'"; exit 125; }

# --- host packages ------------------------------------------------------------
need=()
# busybox-static: it runs inside the initramfs with no libc around.
# ibverbs-providers holds librxe (only a Recommends of libibverbs1).
# zstd: 6.12's vmlinuz is zstd-compressed (6.1's xz).
for p in qemu-system-x86 busybox-static kmod cpio xz-utils zstd rdma-core \
         ibverbs-utils ibverbs-providers iproute2; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
    say "installing missing packages: ${need[*]}"
    { [[ $EUID == 0 ]] && apt-get update -q >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
          --no-install-recommends "${need[@]}" >&2; } ||
        die "could not install packages; please install: ${need[*]}"
fi

# --- kernel (cached, one directory per package and version) ----------------
# 6.1: what the linux-image-amd64 metapackage depends on (bookworm's kernel);
# 6.12: the newest linux-image-6.12.<n>+deb12-amd64 apt knows of
# (bookworm-security).  Each is unpacked under $cache/<package>_<version>/root;
# its modules directory is shared into the guest as /lib/modules/<kver> (the
# host has none for it).  "ok" is written last, once the tree is complete.
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
exec 9>"$cache/.lock"   # concurrent runs: one prepares, the others wait
flock 9
resolve_kernel() { # prints "<package> <version>", nothing if apt does not know
    local pkg='' p
    case $kernel in
        6.1)  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
                    awk '/Depends: linux-image-[0-9]/ {print $2; exit}') ;;
        6.12) for p in $(apt-cache pkgnames linux-image-6.12. 2>/dev/null |
                         grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' |
                         sort -rV); do
                  pkg=$p; break
              done ;;
    esac
    [[ -n $pkg ]] || return 0
    apt-cache policy "$pkg" 2>/dev/null |
        awk -v p="$pkg" '$1 == "Candidate:" && $2 != "(none)" {print p, $2}'
}
kernel_ok() { # kernel_ok DIR: an unpacked, complete kernel tree
    local k
    k=$(compgen -G "$1/root/boot/vmlinuz-*" | head -1) || return 1
    [[ -e $1/ok && -e $1/root/lib/modules/${k##*/vmlinuz-}/modules.dep ]]
}
read -r pkg pkgver < <(resolve_kernel) || true
if [[ -z $pkg && $EUID == 0 ]]; then
    apt-get update -q >&2 || true
    read -r pkg pkgver < <(resolve_kernel) || true
fi
if [[ -n $pkg ]]; then
    kdir=$cache/${pkg}_$pkgver
else
    # apt cannot say (no lists, no root): the newest cached one, if any
    kdir=$(compgen -G "$cache/linux-image-$kernel.*_*" | sort -V | tail -1 || true)
    { [[ -n $kdir ]] && kernel_ok "$kdir"; } ||
        die "cannot resolve the $kernel kernel package with apt-cache: run apt-get update (as root)"
    say "apt cannot resolve the $kernel kernel; using the cached ${kdir##*/}"
fi
if ! kernel_ok "$kdir"; then
    say "downloading $pkg $pkgver"
    # (the layout before per-kernel directories, and older versions of this
    # series: nothing uses them any more)
    rm -rf "$cache/root" "$cache"/initramfs-*.cpio.gz
    rm -rf "$cache/linux-image-$kernel".*_* "$cache/dl"
    mkdir -p "$cache/dl" "$kdir"
    # (Sandbox::User=root: else apt, as root, warns that its _apt user
    # cannot write to the directory; harmless but noisy)
    (cd "$cache/dl" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$pkgver" >&2) ||
        die "kernel download failed: apt-get download $pkg=$pkgver (apt-get update?)"
    dpkg-deb -x "$cache"/dl/"$pkg"_*.deb "$kdir/root" ||
        die "cannot unpack $cache/dl/$pkg (disk full?); remove $kdir and retry"
    rm -rf "$cache/dl"
fi
kimg=$(compgen -G "$kdir/root/boot/vmlinuz-*" | head -1) ||
    die "no vmlinuz in $kdir: remove it and retry"
kver=${kimg##*/vmlinuz-}
# Under TCG the decompressor in vmlinuz costs ~4.5 s per boot.  The kernel
# has a PVH entry note, so qemu can start the uncompressed ELF directly.
vmlinux=$kdir/root/boot/vmlinux-$kver
if [[ ! -e $vmlinux ]]; then
    # 6.1's payload is xz, 6.12's zstd; the first stream that decompresses
    # to an ELF wins.  (Both tools complain about the data after the stream:
    # ignore that, check the ELF.)
    for magic in $'\xfd7zXZ' $'\x28\xb5\x2f\xfd'; do
        case $magic in $'\xfd'*) unz=(xz -dc) ;; *) unz=(zstd -dcq) ;; esac
        off=$(LC_ALL=C grep -abo "$magic" "$kimg" | head -1 | cut -d: -f1 || true)
        [[ -n $off ]] || continue
        tail -c +$((off + 1)) "$kimg" | "${unz[@]}" >"$vmlinux.tmp" 2>/dev/null || true
        [[ $(head -c 4 "$vmlinux.tmp") == $'\x7fELF' ]] && break
    done
    if [[ $(head -c 4 "$vmlinux.tmp" 2>/dev/null) == $'\x7fELF' ]]; then
        mv "$vmlinux.tmp" "$vmlinux"
    else
        rm -f "$vmlinux.tmp"; ln -s "${kimg##*/}" "$vmlinux"
    fi
fi
moddir=$kdir/root/lib/modules/$kver
[[ -e $moddir/modules.dep ]] || depmod -b "$kdir/root" "$kver" ||
    die "depmod failed for $kver in $kdir: remove it and retry"
: >"$kdir/ok"

# --- initramfs (cached, keyed by kernel and the /init text) ---------------------
# Only what is needed to reach the host root: virtio-pci, 9p, overlay.  The
# dependency closure comes from modprobe --show-depends, in load order.
read -r -d '' initscript <<'EOF' || true
#!/bin/busybox sh
export PATH=/bin
fail() { echo "guest initramfs: $*"; poweroff -f; }
mount -t proc proc /proc
for ko in $(cat /modules.list); do insmod "$ko" || fail "insmod $ko"; done
o=trans=virtio,version=9p2000.L,msize=512000
# Host root read-only ("loose" cache is fine: nobody changes it under us)...
mkdir -p /ro /rw /newroot
mount -t 9p -o $o,ro,cache=loose hostroot /ro || fail "mount hostroot"
# ...with a tmpfs upper layer so the guest can write /etc, /var, ... privately.
mount -t tmpfs -o mode=0755 rw /rw && mkdir /rw/up /rw/work
mount -t overlay -o lowerdir=/ro,upperdir=/rw/up,workdir=/rw/work overlay \
    /newroot || fail "mount overlay"
mkdir -p /newroot/.guest
mount -t 9p -o $o,cache=none ctl /newroot/.guest || fail "mount ctl"
# /tmp and /run are tmpfs here, before the share: it may live below them.
mount -t tmpfs -o mode=1777 tmp /newroot/tmp
mount -t tmpfs -o mode=0755 run /newroot/run
share=$(cat /newroot/.guest/share) kver=$(uname -r)
mkdir -p "/newroot$share" "/newroot/lib/modules/$kver"
# cache=mmap: the build tree is rw and must see host changes; mmap for the linker.
mount -t 9p -o $o,cache=mmap share "/newroot$share" || fail "mount share"
mount -t 9p -o $o,ro,cache=loose modules "/newroot/lib/modules/$kver" ||
    fail "mount modules"
umount /proc
exec switch_root /newroot /bin/bash /.guest/guest-init.sh
EOF
sum=$(printf '%s' "$initscript" | md5sum | cut -c1-8)
initrd=$kdir/initramfs-$sum.cpio.gz
if [[ ! -e $initrd ]]; then
    say "building $initrd"
    rm -f "$kdir"/initramfs-*.cpio.gz
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp"/{bin,proc,dev}
    cp /bin/busybox "$tmp/bin/"
    for a in sh mount umount mkdir cat insmod switch_root poweroff; do
        ln -s busybox "$tmp/bin/$a"
    done
    printf '%s\n' "$initscript" >"$tmp/init"; chmod +x "$tmp/init"
    modprobe -d "$kdir/root" -S "$kver" --show-depends -a \
        virtio_pci 9pnet_virtio 9p overlay | awk '$1 == "insmod" {print $2}' |
        while read -r ko; do
            # 6.12's modules are .ko.xz: busybox's insmod wants them plain
            b=${ko##*/}; b=${b%.xz}
            xz -dcf "$ko" >"$tmp/bin/$b" && echo "/bin/$b"
        done | awk '!seen[$0]++' >"$tmp/modules.list"
    [[ -s $tmp/modules.list ]] || die "no modules found in $moddir"
    (cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tmp"; trap - EXIT
fi
exec 9>&-

# --- control directory: command, environment, status ---------------------
ctl=$(mktemp -d "${TMPDIR:-/tmp}/syncmem-guest.XXXXXX")
trap 'rm -rf "$ctl"' EXIT
share=$(cd "$share" && pwd)
printf '%s\n' "$share" >"$ctl/share"
printf '%s\n' "$mode" >"$ctl/mode"
export SYNCMEM_GUEST_KERNEL=$kernel   # (passed on below, as SYNCMEM_*)
cp "$repo_root/contrib/guest/guest-init.sh" "$ctl/" || die "guest-init.sh missing"
{
    # COMMAND's stdout is a serial tty in the guest even when ours is a file
    # or pipe: TERM=dumb then, or gtest & co. colour the logs.
    term=dumb; [[ -t 1 ]] && term=${TERM:-dumb}
    printf 'export PATH=%q HOME=/root TERM=%q\n' "$PATH" "$term"
    for v in $(compgen -e); do
        [[ $v == UCX_* || $v == SYNCMEM_* || $v == GTEST_* ]] &&
            printf 'export %s=%q\n' "$v" "${!v}"
    done
    true
} >"$ctl/env"
printf 'cd %q || cd /\nexec ' "$PWD" >"$ctl/cmd"
printf '%q ' "$@" >>"$ctl/cmd"; echo >>"$ctl/cmd"

# --- accelerator ----------------------------------------------------------
# /dev/kvm here can be kvm_pvm (a paravirtual KVM that cannot boot a stock
# kernel), so only use KVM when it is the real thing (kvm_intel/kvm_amd
# loaded, no kvm_pvm) or when SYNCMEM_GUEST_ACCEL=kvm asks for it.
accel=${SYNCMEM_GUEST_ACCEL:-} cmdline=
if [[ -z $accel ]]; then
    accel=tcg
    if [[ -w /dev/kvm && ! -e /sys/module/kvm_pvm ]] &&
       [[ -e /sys/module/kvm_intel || -e /sys/module/kvm_amd ]]; then
        accel=kvm
    fi
fi
case $accel in
    kvm) accelopt=(-accel kvm -cpu host) ;;
    # -cpu max under TCG tops out at AVX2: fine, we never build -march=native.
    # norandmaps: TCG caches translated code by virtual address, so without
    # ASLR every exec reuses it (a dynamic /bin/true: 120 -> 60 ms).
    # mitigations=off: no point in an emulated throwaway VM, and faster.
    # tsc=reliable: under load the clocksource watchdog can take TCG's TSC
    # for unstable, and the kernel then rewrites sched_clock_cpu's static
    # branch while both vCPUs run it; 6.12 under multi-threaded TCG has
    # died of that (an int3 oops in sched_clock_cpu, doc/testing.md).
    tcg) accelopt=(-accel "tcg,thread=multi" -cpu max)
         cmdline="mitigations=off norandmaps tsc=reliable" ;;
    *) die "SYNCMEM_GUEST_ACCEL must be kvm or tcg" ;;
esac

# qboot is a minimal firmware that boots ~0.5 s faster than SeaBIOS.
bios=()
[[ -e /usr/share/qemu/qboot.rom ]] && bios=(-bios /usr/share/qemu/qboot.rom)

# --- boot ------------------------------------------------------------------
fsargs=()
fs() { # fs TAG PATH [ro]: export PATH to the guest as 9p mount tag TAG
    local ro=; [[ ${3:-} == ro ]] && ro=,readonly=on
    # multidevs=remap: the host root spans several filesystems (inode clashes)
    # (a comma inside a qemu option value is written as two)
    fsargs+=(-fsdev "local,id=$1,path=${2//,/,,},security_model=none,multidevs=remap$ro"
             -device "virtio-9p-pci,fsdev=$1,mount_tag=$1")
}
fs hostroot / ro
fs ctl "$ctl"
fs share "$share"
fs modules "$moddir" ro
# Three serial ports keep the streams apart: ttyS0 is the kernel console
# (to a log, shown only if the guest dies), ttyS1 is COMMAND's stdin/stdout
# (qemu's stdio), ttyS2 its stderr (a fifo copied to our stderr).  A pipe
# chardev reads from PATH.in and writes to PATH.out; nothing writes err.in.
mkfifo "$ctl/err.in" "$ctl/err.out"
[[ -t 0 ]] && touch "$ctl/tty"
# boot: one run of the guest; its qemu exit status in rc
boot() {
cat <"$ctl/err.out" >&2 &
# Boot-time report: guest-init creates $ctl/started right before COMMAND.
t0=$(date +%s.%N)
( while [[ ! -e $ctl/started && -e $ctl/mode ]]; do sleep 0.1; done
  [[ -e $ctl/started ]] &&
      say "booted in $(echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1-$2}') s ($accel)"
) &
watchpid=$!
set +e
timeout --foreground -k 10 "$timeout" \
    qemu-system-x86_64 -machine q35 "${accelopt[@]}" -smp "$cpus" -m "$mem" \
    -nodefaults -no-user-config -display none -no-reboot \
    -chardev file,id=con,path="${ctl//,/,,}/console" -serial chardev:con \
    -chardev stdio,id=out,signal=on -serial chardev:out \
    -chardev pipe,id=err,path="${ctl//,/,,}/err" -serial chardev:err \
    "${bios[@]}" -kernel "$vmlinux" -initrd "$initrd" \
    -append "console=ttyS0 loglevel=3 quiet panic=-1 $cmdline ${SYNCMEM_GUEST_APPEND:-}" \
    "${fsargs[@]}"
rc=$?
set -e
kill "$watchpid" 2>/dev/null || true
# Let cat drain the fifo to EOF (opening it here also unblocks a cat still
# waiting in open() because qemu never started).
exec 3<>"$ctl/err.out"; exec 3>&-
wait 2>/dev/null || true
}
boot
# A kernel that dies while booting (seen once: an int3 oops in the 6.12
# kernel's idle loop under TCG, a second into boot) ran no part of COMMAND
# (guest-init had not marked it started): nothing was judged, so the guest
# boots once more. A death after COMMAND started is reported below.
if ((rc == 0)) && [[ ! -s $ctl/status && ! -e $ctl/started ]]; then
    tail -n 30 "$ctl/console" >&2
    say "the guest kernel died while booting, before COMMAND started; booting again"
    : >"$ctl/console"
    boot
fi
if ((rc == 124 || rc == 137)); then
    say "timed out after $timeout s"; exit 124
elif ((rc != 0)); then
    die "qemu failed (exit $rc)"
elif [[ ! -s $ctl/status ]]; then
    tail -n 30 "$ctl/console" >&2
    die "the guest died before reporting COMMAND's exit status"
fi
exit "$(cat "$ctl/status")"
