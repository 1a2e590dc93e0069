/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - packing and checking of addresses.
 *
 * Pure logic, no verbs calls: unit-tested on any machine.
 */
#include "syncmem_addr.h"

#include <ucs/algorithm/crc.h>
#include <string.h>


int uct_syncmem_gid_is_ipv4(const union ibv_gid *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                       0xff, 0xff};

    return !memcmp(gid->raw, prefix, sizeof(prefix));
}

static uint16_t uct_syncmem_dev_addr_crc(const uct_syncmem_dev_addr_t *addr)
{
    return ucs_crc16(addr, offsetof(uct_syncmem_dev_addr_t, crc));
}

void uct_syncmem_dev_addr_pack(const uct_syncmem_port_t *port,
                               uct_syncmem_dev_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->magic = UCT_SYNCMEM_DEV_ADDR_MAGIC;
    addr->mtu   = port->mtu;
    addr->lid   = port->lid;
    memcpy(addr->gid, port->gid.raw, sizeof(addr->gid));
    if (port->link_layer == IBV_LINK_LAYER_ETHERNET) {
        addr->flags |= UCT_SYNCMEM_DEV_ADDR_FLAG_ETH;
        if (uct_syncmem_gid_is_ipv4(&port->gid)) {
            addr->flags |= UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4;
        }
    }
    addr->crc = uct_syncmem_dev_addr_crc(addr);
}

/* Only what pack makes is accepted, so that one port has one address. */
ucs_status_t uct_syncmem_dev_addr_unpack(const uct_syncmem_dev_addr_t *addr,
                                         uct_syncmem_port_t *port)
{
    static const uint8_t zero_gid[16];
    union ibv_gid gid;
    int eth;

    if ((addr->magic != UCT_SYNCMEM_DEV_ADDR_MAGIC) ||
        (addr->crc != uct_syncmem_dev_addr_crc(addr))) {
        ucs_debug("syncmem: not a syncmem device address (magic 0x%x crc 0x%x)",
                  addr->magic, addr->crc);
        return UCS_ERR_INVALID_ADDR;
    }

    memcpy(gid.raw, addr->gid, sizeof(gid.raw)); /* aligned, for the test */
    eth = !!(addr->flags & UCT_SYNCMEM_DEV_ADDR_FLAG_ETH);
    if ((addr->flags & ~UCT_SYNCMEM_DEV_ADDR_FLAGS_ALL) ||
        (addr->mtu < IBV_MTU_256) || (addr->mtu > IBV_MTU_4096) ||
        (eth && !memcmp(addr->gid, zero_gid, sizeof(zero_gid))) ||
        (eth && (!!(addr->flags & UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4) !=
                 uct_syncmem_gid_is_ipv4(&gid))) ||
        (!eth && (addr->flags & UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4)) ||
        (!eth && (addr->lid == 0))) {
        ucs_debug("syncmem: malformed device address (flags 0x%x mtu %u lid %u)",
                  addr->flags, addr->mtu, addr->lid);
        return UCS_ERR_INVALID_ADDR;
    }

    memset(port, 0, sizeof(*port));
    port->link_layer = eth ? IBV_LINK_LAYER_ETHERNET :
                             IBV_LINK_LAYER_INFINIBAND;
    port->mtu        = addr->mtu;
    port->lid        = addr->lid;
    memcpy(port->gid.raw, addr->gid, sizeof(port->gid.raw));
    return UCS_OK;
}

/*
 * RoCE routes by GID through the IP stack, so an IPv4-mapped GID can reach
 * another IPv4-mapped one but not a native IPv6 one. InfiniBand routes by
 * LID within one subnet: different subnet prefixes need a router we do not
 * support.
 */
const char *uct_syncmem_dev_addr_unreachable(const uct_syncmem_port_t *local,
                                             const uct_syncmem_dev_addr_t *remote)
{
    uct_syncmem_port_t peer;

    if ((remote == NULL) ||
        (uct_syncmem_dev_addr_unpack(remote, &peer) != UCS_OK)) {
        return "not a syncmem device address";
    }

    if (peer.link_layer != local->link_layer) {
        return "the peer's link layer differs (InfiniBand vs Ethernet)";
    }

    if (local->link_layer == IBV_LINK_LAYER_ETHERNET) {
        return (uct_syncmem_gid_is_ipv4(&peer.gid) ==
                uct_syncmem_gid_is_ipv4(&local->gid)) ? NULL :
               "the peer's RoCE GID is of the other IP version"
               " (see UCX_SYNCMEM_GID_INDEX)";
    }

    return (peer.gid.global.subnet_prefix == local->gid.global.subnet_prefix) ?
           NULL : "the peer is on another InfiniBand subnet";
}

int uct_syncmem_dev_addr_is_reachable(const uct_syncmem_port_t *local,
                                      const uct_syncmem_dev_addr_t *remote)
{
    return uct_syncmem_dev_addr_unreachable(local, remote) == NULL;
}

int uct_syncmem_dev_addr_is_port(const uct_syncmem_port_t *local,
                                 const uct_syncmem_dev_addr_t *remote)
{
    uct_syncmem_port_t peer;

    return (remote != NULL) &&
           (uct_syncmem_dev_addr_unpack(remote, &peer) == UCS_OK) &&
           (peer.link_layer == local->link_layer) && (peer.lid == local->lid) &&
           !memcmp(&peer.gid, &local->gid, sizeof(peer.gid));
}

ucs_status_t uct_syncmem_iface_addr_unpack(const uct_syncmem_iface_addr_t *addr,
                                           uint64_t *id_p, uint32_t *cm_qpn_p)
{
    uct_syncmem_iface_addr_t copy;

    memcpy(&copy, addr, sizeof(copy)); /* from the network: unaligned */
    if ((copy.cm_qpn < 2) || (copy.cm_qpn > 0xffffffu)) {
        ucs_debug("syncmem: malformed interface address (QP 0x%x)",
                  copy.cm_qpn);
        return UCS_ERR_INVALID_ADDR;
    }
    *id_p     = copy.id;
    *cm_qpn_p = copy.cm_qpn;
    return UCS_OK;
}
