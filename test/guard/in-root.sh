#!/usr/bin/env bash
# in-root.sh - run a command chrooted into another Debian userland (the
# Debian 13 root of contrib/guest/debian-root.sh), for test/guard.test.
#
# In a private mount namespace: the root read-only below a tmpfs overlay (so
# the command may write anywhere and the cached root never changes), /proc,
# /sys and /dev from this system, the given directories bind-mounted at
# their own paths, and this system's resolv.conf.  The mounts are undone on
# exit (and vanish with the namespace anyway).  See --help.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail

prog=in-root.sh
usage() {
    cat <<EOF
usage: test/guard/in-root.sh [--bind DIR]... ROOT COMMAND [ARGS...]

Run COMMAND (in the current directory) chrooted into ROOT, with each DIR
bind-mounted read-write at its own path.  Exits with COMMAND's status, or
125 if the chroot could not be set up.  Needs root.
EOF
}
say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 125; }

binds=()
while (($#)); do
    case $1 in
        --bind) binds+=("$(cd "${2:?--bind needs a directory}" && pwd)") ||
                    die "no directory $2"; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) say "unknown option '$1'"; usage >&2; exit 125 ;;
        *) break ;;
    esac
    shift
done
(($# >= 2)) || { usage >&2; exit 125; }
root=$(cd "$1" && pwd) || die "no root directory $1"
shift
[[ $EUID == 0 ]] || die "must run as root (mount, chroot)"
[[ -x $root/bin/sh ]] || die "$root is not a root filesystem (no /bin/sh)"

# Into a private mount namespace first: nothing mounted here is seen
# outside, and all of it goes when the last process in it exits.
if [[ ${SYNCMEM_IN_ROOT_NS:-} != "$$" ]]; then
    command -v unshare >/dev/null || die "unshare not found (util-linux)"
    args=()
    for b in "${binds[@]}"; do args+=(--bind "$b"); done
    exec unshare --mount --propagation private \
        bash -c 'SYNCMEM_IN_ROOT_NS=$$ exec "$0" "$@"' "$0" "${args[@]}" \
        -- "$root" "$@"
fi
unset SYNCMEM_IN_ROOT_NS

work=$(mktemp -d "${TMPDIR:-/tmp}/syncmem-root.XXXXXX") || die "mktemp failed"
new=$work/root
cleanup() {
    # Deepest first; lazily if something still holds a mount.
    if [[ -d $new ]]; then
        awk -v d="$new" '$2 == d || index($2, d "/") == 1 {print $2}' \
            /proc/self/mounts | sort -r | while read -r m; do
                umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
            done
    fi
    umount "$work" 2>/dev/null || umount -l "$work" 2>/dev/null || true
    rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mount -t tmpfs -o mode=0700 syncmem-root "$work" || die "cannot mount a tmpfs on $work"
mkdir -p "$work/upper" "$work/wk" "$new"
mount -t overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/wk" \
    syncmem-root "$new" || die "cannot mount an overlay of $root"
mount -t proc proc "$new/proc" || die "cannot mount /proc in the root"
mount --rbind /sys "$new/sys" || die "cannot bind /sys into the root"
mount --rbind /dev "$new/dev" || die "cannot bind /dev into the root"
mount -t tmpfs -o mode=1777 tmp "$new/tmp" || die "cannot mount /tmp in the root"
# (/etc/resolv.conf may be a symlink on the host: copy what it says)
rm -f "$new/etc/resolv.conf"
cat /etc/resolv.conf >"$new/etc/resolv.conf" 2>/dev/null || true
for b in "${binds[@]}"; do
    mkdir -p "$new$b" && mount --bind "$b" "$new$b" ||
        die "cannot bind $b into the root"
done

cwd=$PWD
set +e
chroot "$new" /bin/sh -c 'cd "$1" || exit 125; shift; exec "$@"' \
    in-root "$cwd" "$@"
rc=$?
set -e
exit $rc
