/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device addresses from peers (syncmem_addr.c): unpack, reachability and
 * "is this my port". Whatever the bytes, the answer is an error or a port
 * whose address packs back to exactly the same bytes (one port, one
 * address); and a packed port always unpacks.
 */
#include "fuzz.h"

#include <ucs/algorithm/crc.h>
#include <stddef.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uct_syncmem_port_t local, peer, again;
    uct_syncmem_dev_addr_t *addr, packed;
    int reachable;
    uint8_t how;

    /* exactly the address's size: a read past it is a finding */
    addr = malloc(sizeof(*addr));
    fuzz_bytes(&in, addr, sizeof(*addr));
    how = fuzz_u8(&in);
    fuzz_local_port(&local, how & 1);
    if (how & 2) {
        /* a CRC that matches, so that the checks behind it are reached */
        addr->crc = ucs_crc16(addr, offsetof(uct_syncmem_dev_addr_t, crc));
    }

    if (uct_syncmem_dev_addr_unpack(addr, &peer) == UCS_OK) {
        uct_syncmem_dev_addr_pack(&peer, &packed);
        FUZZ_CHECK(!memcmp(&packed, addr, sizeof(packed)));
    }
    reachable = uct_syncmem_dev_addr_is_reachable(&local, addr);
    FUZZ_CHECK(reachable ==
               (uct_syncmem_dev_addr_unreachable(&local, addr) == NULL));
    if (uct_syncmem_dev_addr_is_port(&local, addr)) {
        FUZZ_CHECK(reachable);
    }
    FUZZ_CHECK(uct_syncmem_dev_addr_unreachable(&local, NULL) != NULL);
    free(addr);

    /* the other way: any port of a valid MTU packs into an address that
     * unpacks to it */
    fuzz_bytes(&in, &peer, sizeof(peer));
    peer.link_layer = (peer.link_layer & 1) ? IBV_LINK_LAYER_ETHERNET :
                                              IBV_LINK_LAYER_INFINIBAND;
    peer.mtu        = IBV_MTU_256 + (peer.mtu % 5);
    if (peer.link_layer == IBV_LINK_LAYER_ETHERNET) {
        peer.gid.raw[15] |= 1;  /* RoCE: a GID is never zero */
    } else {
        peer.lid |= 1;          /* InfiniBand: neither is a LID */
    }
    uct_syncmem_dev_addr_pack(&peer, &packed);
    FUZZ_CHECK(uct_syncmem_dev_addr_unpack(&packed, &again) == UCS_OK);
    FUZZ_CHECK((again.link_layer == peer.link_layer) &&
               (again.mtu == peer.mtu) &&
               !memcmp(&again.gid, &peer.gid, sizeof(again.gid)));
    FUZZ_CHECK(uct_syncmem_dev_addr_is_port(&peer, &packed));
    return 0;
}
