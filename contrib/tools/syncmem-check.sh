#!/bin/sh
#
# syncmem-check.sh: what 'syncmem-run --check [DEVICE[:PORT]]' runs.
#
# For each verbs port (all, those of DEVICE, or DEVICE:PORT): its state and
# physical state, link layer and netdev, GID table (RoCE: a RoCE v2 GID
# with an IP address), MTU of the port and of its netdev, P_Key table
# (and UCX_SYNCMEM_PKEY in it); then whether the module loads into the
# installed UCX, lists the port, registers memory, and whether a loopback
# connection carries a put, a get and an atomic (syncmem-loopback); and
# the memory lock limit. One line per check, "ok" or "FAIL", and under each
# failure one line of advice. Exits 0 only when every check passes.
#
# With no module where syncmem-run looks for it, it says where it looked,
# what it found elsewhere (UCX's module directories, UCX_PLUGIN_PATH, the
# usual prefixes: each with the UCX release it was built for, asked of the
# module itself) and what to do; a module the running UCX refuses is a
# failure with the module's own reason.
#
# Called by syncmem-run, which sets SYNCMEM_RUN (itself), SYNCMEM_LOOPBACK
# (the loopback program), SYNCMEM_UCX_VERSION (the UCX the module was
# built for), SYNCMEM_MODULE (the module it loads, there or not),
# SYNCMEM_MODULE_LOOKED (where it looked, one line each) and
# SYNCMEM_MODULE_DIR (UCX's module directory), and puts the UCX it runs
# first in PATH.
#
case "$1" in -h|--help) sed -n '3,27s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
run=${SYNCMEM_RUN:?run this through syncmem-run --check}
loopback=${SYNCMEM_LOOPBACK:?run this through syncmem-run --check}
built_for=${SYNCMEM_UCX_VERSION:?run this through syncmem-run --check}
module=${SYNCMEM_MODULE:?run this through syncmem-run --check}
sys=${SYNCMEM_SYSFS:-/sys}
# where else to look for a module (a test sets it: the host's own would do):
# the module directory of the UCX that ucx_info runs, the usual places
libucs=$(ldd "$(command -v ucx_info 2>/dev/null || echo /nonexistent)" 2>/dev/null |
         sed -n 's/.*libucs\.so[^ ]* => \([^ ]*\).*/\1/p' | head -1)
search=${SYNCMEM_CHECK_DIRS-"${libucs:+$(dirname "$libucs")/ucx} /usr/lib/*/ucx /usr/lib/ucx /usr/lib64/ucx /usr/local/lib/ucx /usr/local/lib64/ucx /opt/*/lib/ucx /opt/*/lib64/ucx"}
failures=0 checks=0

ok()   { checks=$((checks + 1)); printf '  ok    %s\n' "$1"; }
fail() {
    checks=$((checks + 1)) failures=$((failures + 1))
    printf '  FAIL  %s\n        -> %s\n' "$1" "$2"
}
skip() { printf '  --    %s\n' "$1"; }

# The netdev of a RoCE port: from its GID table, else (GIDs go with the
# address) the parent of a Soft-RoCE device or the PCI function's net/.
port_netdev() { # DEV PORT
    for f in "$sys/class/infiniband/$1/ports/$2/gid_attrs/ndevs/"*; do
        nd=$(cat "$f" 2>/dev/null) && [ -n "$nd" ] && { echo "$nd"; return; }
    done
    if [ -f "$sys/class/infiniband/$1/parent" ]; then
        cat "$sys/class/infiniband/$1/parent"; return
    fi
    ls "$sys/class/infiniband/$1/device/net" 2>/dev/null | head -1
}

check_port() { # DEV PORT
    dev=$1 port=$2 p="$sys/class/infiniband/$1/ports/$2"
    echo "$dev:$port"
    state=$(sed 's/^[0-9]*: *//' "$p/state" 2>/dev/null)
    phys=$(sed 's/^[0-9]*: *//' "$p/phys_state" 2>/dev/null)
    ll=$(cat "$p/link_layer" 2>/dev/null)
    nd=
    [ "$ll" = Ethernet ] && nd=$(port_netdev "$dev" "$port")

    if [ "$ll" = Ethernet ]; then
        if [ -z "$nd" ]; then
            fail "link layer: Ethernet (RoCE), no netdev found" \
                 "Soft-RoCE: rdma link add $dev type rxe netdev <interface>; a NIC: check its driver (dmesg)"
        elif [ $(( $(cat "$sys/class/net/$nd/flags" 2>/dev/null || echo 0) & 1 )) -eq 0 ]; then
            fail "link layer: Ethernet (RoCE), netdev $nd is down" \
                 "bring it up: ip link set $nd up"
        elif [ "$(cat "$sys/class/net/$nd/carrier" 2>/dev/null)" != 1 ]; then
            fail "link layer: Ethernet (RoCE), netdev $nd has no carrier" \
                 "check the cable and the switch port of $nd (ethtool $nd)"
        else
            ok "link layer: Ethernet (RoCE), netdev $nd is up"
        fi
    elif [ "$ll" = InfiniBand ]; then
        ok "link layer: InfiniBand"
    else
        fail "link layer: '${ll:-unknown}'" "not a verbs port syncmem can use"
    fi

    case "$state" in
        ACTIVE) ok "state: ACTIVE" ;;
        INIT)   fail "state: INIT" \
                     "no subnet manager has configured the port: start opensm on one node of the fabric (or check the switch's SM)" ;;
        *)      fail "state: ${state:-unknown}" \
                     "$( [ -n "$nd" ] && echo "bring up its netdev (ip link set $nd up), then check" || echo "check") the cable and the switch port (ibv_devinfo -d $dev)" ;;
    esac
    case "$phys" in
        LinkUp) ok "physical state: LinkUp" ;;
        *)      fail "physical state: ${phys:-unknown}" \
                     "Disabled: the port or its netdev is administratively down; Polling: no link partner, check the cable" ;;
    esac

    # GIDs: index, address, type
    gids= v2=
    for g in "$p"/gids/*; do
        i=${g##*/}
        gid=$(cat "$g" 2>/dev/null) || continue
        case "$gid" in 0000:0000:0000:0000:0000:0000:0000:0000|"") continue ;; esac
        type=$(cat "$p/gid_attrs/types/$i" 2>/dev/null)
        gids="$gids [$i] $gid${type:+ $type}"
        case "$type:$gid" in
            # RoCE v2 with an IP address: IPv4-mapped, or IPv6 not link-local
            "RoCE v2:0000:0000:0000:0000:0000:ffff:"*) v2=${v2:-"[$i] $gid (IPv4)"} ;;
            "RoCE v2:fe80:"*) ;;
            "RoCE v2:"*) v2=${v2:-"[$i] $gid (IPv6)"} ;;
        esac
    done
    if [ "$ll" = Ethernet ]; then
        if [ -n "$v2" ]; then
            ok "GID: RoCE v2 $v2"
        else
            fail "GID: no RoCE v2 GID with an IP address (table:${gids:- empty})" \
                 "give ${nd:-its netdev} an IP address (ip addr add <address>/<prefix> dev ${nd:-<netdev>}): RoCE v2 routes by IP, and link-local GIDs reach no further than the link"
        fi
    elif [ -n "$gids" ]; then
        lid=$(cat "$p/lid" 2>/dev/null)
        if [ "$((lid))" -eq 0 ]; then
            fail "LID: none" "no subnet manager has assigned one: start opensm"
        else
            ok "GID:${gids%% \[1\]*}, LID $lid"
        fi
    else
        fail "GID: the table is empty" "the port is not configured: check the subnet manager"
    fi

    # MTU: the port's active MTU (ibv_devinfo), and the netdev's
    mtu=$(ibv_devinfo -d "$dev" -i "$port" 2>/dev/null |
          sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
    ndmtu=
    [ -n "$nd" ] && ndmtu=$(cat "$sys/class/net/$nd/mtu" 2>/dev/null)
    if [ -z "$mtu" ]; then
        fail "MTU: ibv_devinfo -d $dev -i $port does not say" \
             "install ibverbs-utils, and check that the device opens (ibv_devinfo -d $dev)"
    elif [ "$mtu" -lt 1024 ]; then
        fail "MTU: port $mtu${ndmtu:+, netdev $nd $ndmtu}" \
             "$( [ -n "$nd" ] && echo "raise the MTU of $nd to at least 1500 (ip link set $nd mtu 1500; 9000 with jumbo frames, on the switch too)" || echo "check the port's MTU with the subnet manager")"
    else
        ok "MTU: port $mtu${ndmtu:+, netdev $nd $ndmtu}"
    fi

    # P_Key table, and the configured partition in it
    pkeys= want=${UCX_SYNCMEM_PKEY:-auto} found=
    for k in "$p"/pkeys/*; do
        v=$(cat "$k" 2>/dev/null) || continue
        [ $((v & 0x7fff)) -eq 0 ] && continue
        pkeys="$pkeys [${k##*/}] $v"
        [ "$want" != auto ] && [ $((v & 0x7fff)) -eq $((want & 0x7fff)) ] && found=1
    done
    if [ -z "$pkeys" ]; then
        fail "P_Key table: empty" "no partition is configured: check the subnet manager's partitions"
    elif [ "$want" != auto ] && [ -z "$found" ]; then
        fail "P_Key table:$pkeys; UCX_SYNCMEM_PKEY=$want is not in it" \
             "set UCX_SYNCMEM_PKEY to one of these partitions, or have the subnet manager add it to this port"
    else
        ok "P_Key table:$pkeys${found:+ (UCX_SYNCMEM_PKEY=$want)}"
    fi

    # The module on this port: listed, registration, loopback put/get/atomic
    if [ "$state" != ACTIVE ]; then
        skip "module, registration, loopback: not tried (the port is not active)"
        return
    fi
    if [ -n "$no_module" ]; then
        skip "module, registration, loopback: not tried (no module, above)"
        return
    fi
    out=$("$run" "$loopback" "$dev:$port" 2>&1)
    # (a here-document, not a pipe: the counts must stay in this shell)
    while IFS= read -r line; do
        case "$line" in
            "ok "*) ok "${line#ok }" ;;
            "FAIL "*)
                c=${line#FAIL }; c=${c%%:*}
                case $c in
                    module)       a="install the syncmem built for UCX $ucx_version (a line above says which UCX this one was built for)" ;;
                    device)       a="the transport does not list the port: see the port checks above, and any UCX_NET_DEVICES or UCX_SYNCMEM_* setting" ;;
                    registration) a="registering memory failed: raise 'ulimit -l' (memlock), and check dmesg" ;;
                    connection)   a="see UCX's message above, the GID and MTU lines, and that no firewall drops UDP port 4791 (RoCE v2)" ;;
                    *)  case "$line" in
                            *[Tt]imeout*) a="no acknowledgement came back: check the GID and MTU lines above, and that no firewall drops UDP port 4791" ;;
                            *)            a="the HCA failed a loopback $c: check dmesg and the firmware; compare with UCX_TLS=rc_verbs" ;;
                        esac ;;
                esac
                fail "${line#FAIL }" "$a" ;;
            "") ;;
            *) echo "        | $line" ;;
        esac
    done <<EOF
$out
EOF
}

# release_of MODULE: the UCX release MODULE was built for, as its guard
# says when loaded into this UCX ("built for UCX X but is loaded into Y"; no
# such line: it loaded, so this one); empty if ucx_info does not run with it
release_of() {
    out=$(LD_PRELOAD="$1${LD_PRELOAD:+:$LD_PRELOAD}" ucx_info -v 2>&1) || return 0
    r=$(echo "$out" | sed -n 's/^syncmem: .* was built for UCX \([0-9.]*\) but .*/\1/p' | head -1)
    echo "${r:-$ucx_version}"
}

echo "syncmem check: module built for UCX $built_for"
ucx_version=$(ucx_info -v 2>/dev/null |
              sed -n 's/^# \(Library version:\|Version\) *\([0-9.]*\).*/\2/p')
echo "installed UCX"
if [ -z "$ucx_version" ]; then
    fail "ucx_info -v does not run" "install UCX's tools (ucx-utils on Debian)"
elif [ "$ucx_version" != "$built_for" ]; then
    fail "UCX $ucx_version, but the module was built for $built_for" \
         "install the syncmem package built for UCX $ucx_version, or rebuild syncmem against it"
else
    ok "UCX $ucx_version, as the module was built for"
fi

echo "module"
no_module=
if [ -f "$module" ]; then
    # its guard's line, if this UCX is not its release
    guard=$("$run" ucx_info -v 2>&1 >/dev/null | grep '^syncmem: ' | head -1)
    if [ -n "$guard" ]; then
        fail "$module: UCX ${ucx_version:-(unknown)} refuses it: ${guard#syncmem: }" \
             "install the syncmem built for UCX ${ucx_version:-of this machine} (the package made for its libucx0), or rebuild syncmem against it and 'make install'"
    else
        ok "$module loads into UCX ${ucx_version:-(unknown)}"
    fi
else
    no_module=1
    echo "$SYNCMEM_MODULE_LOOKED" | sed 's/^/        | looked for /'
    # anywhere else: UCX's own directories, the plugin path, the prefixes
    dirs="${UCX_MODULE_DIR:-} $(echo "${UCX_PLUGIN_PATH:-}" | tr : ' ') ${SYNCMEM_MODULE_DIR:-} $search"
    # (the patterns expanded; each directory once, as readlink -f names it)
    dirs=$(for d in $dirs; do [ -d "$d" ] && readlink -f "$d"; done | awk '!seen[$0]++')
    echo "        | looked further in: $(echo ${dirs:-nothing: none of those directories exists})"
    found= same= other=
    for d in $dirs; do
        for f in "$d"/libuct_syncmem.so "$d"/libuct_syncmem.so.0; do
            [ -f "$f" ] || continue
            real=$(readlink -f "$f")
            case " $found " in *" $real "*) continue ;; esac
            found="$found $real"
            rel=$(release_of "$f")
            if [ -z "$rel" ]; then
                echo "        | found $f: ucx_info does not run with it preloaded"
            elif [ "$rel" = "$ucx_version" ]; then
                echo "        | found $f: built for UCX $rel, this one"
                same=${same:-$f}
            else
                echo "        | found $f: built for UCX $rel, another release"
                other=${other:-"$f (UCX $rel)"}
            fi
        done
    done
    [ -n "$found" ] || echo "        | found no libuct_syncmem.so"
    if [ -n "$same" ]; then
        fail "no module at $module, but $same is one for this UCX" \
             "use it: SYNCMEM_LIB=$same syncmem-run ...; or install syncmem where this syncmem-run looks ('make install', or the package)"
    elif [ -n "$other" ]; then
        fail "no module for UCX ${ucx_version:-(unknown)}; only another release's: $other" \
             "install the syncmem built for UCX ${ucx_version:-of this machine} (the package made for its libucx0), or build it: ./configure (--with-ucx=PREFIX for a UCX in its own prefix) && make && make install"
    else
        fail "no module: libuct_syncmem.so is nowhere" \
             "install the syncmem package built for UCX ${ucx_version:-of this machine}, or build and install it: contrib/bootstrap.sh && make install (in the build tree: 'make' builds it)"
    fi
fi

ports=
if [ -n "$1" ]; then
    dev=${1%%:*} port=
    case "$1" in *:*) port=${1#*:} ;; esac
    if [ ! -d "$sys/class/infiniband/$dev" ]; then
        echo "$1"
        fail "no verbs device $dev" \
             "devices here: $(ls "$sys/class/infiniband" 2>/dev/null | tr '\n' ' ')(ibv_devices)"
    elif [ -n "$port" ] && [ ! -d "$sys/class/infiniband/$dev/ports/$port" ]; then
        echo "$1"
        fail "$dev has no port $port" "ports: $(ls "$sys/class/infiniband/$dev/ports" | tr '\n' ' ')"
    else
        for p in "$sys/class/infiniband/$dev/ports/"${port:-*}; do
            ports="$ports $dev:${p##*/}"
        done
    fi
else
    for p in "$sys"/class/infiniband/*/ports/*; do
        [ -d "$p" ] || continue
        d=${p%/ports/*}
        ports="$ports ${d##*/}:${p##*/}"
    done
    if [ -z "$ports" ]; then
        echo "verbs devices"
        fail "none" "load the HCA's driver (mlx5_ib, ...), or for Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev <interface>"
    fi
fi
for dp in $ports; do
    check_port "${dp%:*}" "${dp##*:}"
done

# Memory lock limit: registration pins memory. Root (CAP_IPC_LOCK) is not
# held to it, but jobs of other users are, so a low limit fails for root too.
echo "memlock"
limit=$(ulimit -l)
if [ "$limit" = unlimited ]; then
    ok "ulimit -l: unlimited"
elif [ "$limit" -ge 1048576 ] 2>/dev/null; then
    ok "ulimit -l: $limit KiB"
else
    fail "ulimit -l: $limit KiB$( [ "$(id -u)" = 0 ] && echo " (root is exempt; other users are not)")" \
         "registered memory is pinned, and each interface alone pins about 10 MiB of buffers: set 'memlock unlimited' (/etc/security/limits.conf: '* - memlock unlimited'; systemd: LimitMEMLOCK=infinity)"
fi

if [ "$failures" -eq 0 ]; then
    echo "syncmem check: all $checks checks passed"
    exit 0
fi
echo "syncmem check: $failures of $checks checks failed"
exit 1
# SPDX-License-Identifier: BSD-3-Clause
