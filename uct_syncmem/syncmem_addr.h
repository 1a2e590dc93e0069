/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - wire formats of the device and interface addresses.
 */
#ifndef UCT_SYNCMEM_ADDR_H_
#define UCT_SYNCMEM_ADDR_H_

#include "syncmem.h"

#define UCT_SYNCMEM_DEV_ADDR_MAGIC      0x5c  /* changes with the format */

enum {
    UCT_SYNCMEM_DEV_ADDR_FLAG_ETH  = UCS_BIT(0), /* RoCE: route by GID */
    UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4 = UCS_BIT(1), /* GID is IPv4-mapped */
    UCT_SYNCMEM_DEV_ADDR_FLAGS_ALL = UCS_BIT(2) - 1
};

/*
 * What a peer needs to reach one of our ports. It travels through UCP's
 * wireup and out-of-band channels that we do not control, so it carries a
 * magic byte and a CRC: a garbled or foreign address is refused rather than
 * used to build an address handle to nowhere.
 */
typedef struct UCS_S_PACKED uct_syncmem_dev_addr {
    uint8_t  magic;
    uint8_t  flags;
    uint8_t  mtu;         /* enum ibv_mtu */
    uint16_t lid;         /* InfiniBand only */
    uint8_t  gid[16];
    uint16_t crc;         /* ucs_crc16 of everything above */
} uct_syncmem_dev_addr_t;

/* One interface behind a device address: where its handshake QP listens,
 * and an id that tells this iface from an earlier one with the same QPN. */
typedef struct UCS_S_PACKED uct_syncmem_iface_addr {
    uint64_t id;
    uint32_t cm_qpn;
} uct_syncmem_iface_addr_t;


void uct_syncmem_dev_addr_pack(const uct_syncmem_port_t *port,
                               uct_syncmem_dev_addr_t *addr);

ucs_status_t uct_syncmem_dev_addr_unpack(const uct_syncmem_dev_addr_t *addr,
                                         uct_syncmem_port_t *port);

/* Why remote cannot be reached from local (for UCP's reachability report);
 * NULL if it can. */
const char *uct_syncmem_dev_addr_unreachable(const uct_syncmem_port_t *local,
                                             const uct_syncmem_dev_addr_t *remote);

int uct_syncmem_dev_addr_is_reachable(const uct_syncmem_port_t *local,
                                      const uct_syncmem_dev_addr_t *remote);

/* remote is the address of port local itself */
int uct_syncmem_dev_addr_is_port(const uct_syncmem_port_t *local,
                                 const uct_syncmem_dev_addr_t *remote);

int uct_syncmem_gid_is_ipv4(const union ibv_gid *gid);

/* Checks an interface address from a peer (a QP number must fit 24 bits
 * and not be a management QP's). */
ucs_status_t uct_syncmem_iface_addr_unpack(const uct_syncmem_iface_addr_t *addr,
                                           uint64_t *id_p, uint32_t *cm_qpn_p);

#endif
