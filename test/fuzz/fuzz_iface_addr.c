/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What an endpoint connects to: syncmem endpoints connect to an iface
 * (UCT_IFACE_FLAG_CONNECT_TO_IFACE; there is no endpoint address,
 * ep_addr_len is 0), so a peer's address is a device address and an
 * interface address. Checked as iface_is_reachable and the endpoint do
 * before anything is created: an error, or a peer and a QP number that fit.
 */
#include "fuzz.h"

#include <ucs/algorithm/crc.h>
#include <stddef.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uct_syncmem_iface_addr_t *iface_addr;
    uct_syncmem_dev_addr_t *dev_addr;
    uct_syncmem_port_t local, peer;
    uint32_t qpn;
    uint64_t id;
    uint8_t how;

    dev_addr   = malloc(sizeof(*dev_addr));
    iface_addr = malloc(sizeof(*iface_addr));
    fuzz_bytes(&in, dev_addr, sizeof(*dev_addr));
    fuzz_bytes(&in, iface_addr, sizeof(*iface_addr));
    how = fuzz_u8(&in);
    fuzz_local_port(&local, how & 1);
    if (how & 2) {
        /* a CRC that matches, so that the checks behind it are reached */
        dev_addr->crc = ucs_crc16(dev_addr, offsetof(uct_syncmem_dev_addr_t, crc));
    }

    if (uct_syncmem_iface_addr_unpack(iface_addr, &id, &qpn) == UCS_OK) {
        FUZZ_CHECK((qpn >= 2) && (qpn <= 0xffffff));
        FUZZ_CHECK(id == iface_addr->id);
    }
    if (uct_syncmem_dev_addr_is_reachable(&local, dev_addr)) {
        FUZZ_CHECK(uct_syncmem_dev_addr_unpack(dev_addr, &peer) == UCS_OK);
        FUZZ_CHECK(peer.link_layer == local.link_layer);
        FUZZ_CHECK((peer.mtu >= IBV_MTU_256) && (peer.mtu <= IBV_MTU_4096));
    }
    free(iface_addr);
    free(dev_addr);
    return 0;
}
