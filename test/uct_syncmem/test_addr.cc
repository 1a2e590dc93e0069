// SPDX-License-Identifier: BSD-3-Clause
// Address packing and reachability rules (uct_syncmem/syncmem_addr.c).
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_addr.h>
#include <ucs/algorithm/crc.h>
}

#include <cstring>

namespace {

uct_syncmem_port_t roce_port(uint32_t ipv4)
{
    uct_syncmem_port_t port;

    memset(&port, 0, sizeof(port));
    port.num        = 1;
    port.link_layer = IBV_LINK_LAYER_ETHERNET;
    port.mtu        = IBV_MTU_1024;
    port.gid.raw[10] = 0xff;
    port.gid.raw[11] = 0xff;
    memcpy(&port.gid.raw[12], &ipv4, sizeof(ipv4));
    return port;
}

uct_syncmem_port_t ib_port(uint16_t lid, uint64_t subnet)
{
    uct_syncmem_port_t port;

    memset(&port, 0, sizeof(port));
    port.num        = 1;
    port.link_layer = IBV_LINK_LAYER_INFINIBAND;
    port.mtu        = IBV_MTU_4096;
    port.lid        = lid;
    port.gid.global.subnet_prefix = subnet;
    port.gid.global.interface_id  = 0x1234;
    return port;
}

void reseal(uct_syncmem_dev_addr_t *addr)
{
    addr->crc = ucs_crc16(addr, offsetof(uct_syncmem_dev_addr_t, crc));
}

} // namespace

TEST(addr, format_size_is_stable)
{
    // Peers of different builds exchange this; its size is part of the format.
    EXPECT_EQ(23u, sizeof(uct_syncmem_dev_addr_t));
    EXPECT_EQ(12u, sizeof(uct_syncmem_iface_addr_t));
}

TEST(addr, roce_roundtrip)
{
    uct_syncmem_port_t port = roce_port(0x01004d0a), out;
    uct_syncmem_dev_addr_t addr;

    uct_syncmem_dev_addr_pack(&port, &addr);
    EXPECT_EQ(UCT_SYNCMEM_DEV_ADDR_FLAG_ETH | UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4,
              addr.flags);
    ASSERT_EQ(UCS_OK, uct_syncmem_dev_addr_unpack(&addr, &out));
    EXPECT_EQ(IBV_LINK_LAYER_ETHERNET, out.link_layer);
    EXPECT_EQ(IBV_MTU_1024, out.mtu);
    EXPECT_EQ(0, memcmp(port.gid.raw, out.gid.raw, sizeof(out.gid.raw)));
}

TEST(addr, ib_roundtrip)
{
    uct_syncmem_port_t port = ib_port(17, 0xfe80000000000000ull), out;
    uct_syncmem_dev_addr_t addr;

    uct_syncmem_dev_addr_pack(&port, &addr);
    EXPECT_EQ(0, addr.flags);
    ASSERT_EQ(UCS_OK, uct_syncmem_dev_addr_unpack(&addr, &out));
    EXPECT_EQ(IBV_LINK_LAYER_INFINIBAND, out.link_layer);
    EXPECT_EQ(17, out.lid);
    EXPECT_EQ(IBV_MTU_4096, out.mtu);
}

TEST(addr, every_corrupted_byte_is_refused)
{
    uct_syncmem_port_t port = roce_port(0x02004d0a), out;
    uct_syncmem_dev_addr_t addr, bad;

    uct_syncmem_dev_addr_pack(&port, &addr);
    for (size_t i = 0; i < sizeof(addr); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            bad = addr;
            reinterpret_cast<uint8_t*>(&bad)[i] ^= (1 << bit);
            EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                      uct_syncmem_dev_addr_unpack(&bad, &out))
                    << "byte " << i << " bit " << bit;
            EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&port, &bad));
        }
    }
}

TEST(addr, well_sealed_but_malformed_is_refused)
{
    uct_syncmem_port_t roce = roce_port(0x03004d0a), ib = ib_port(5, 1), out;
    uct_syncmem_dev_addr_t addr;

    uct_syncmem_dev_addr_pack(&roce, &addr);
    addr.flags |= 0x80;                 // unknown flag
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));

    uct_syncmem_dev_addr_pack(&roce, &addr);
    addr.mtu = 6;                       // no such MTU
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));

    uct_syncmem_dev_addr_pack(&roce, &addr);
    memset(addr.gid, 0, sizeof(addr.gid)); // RoCE without a GID
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));

    uct_syncmem_dev_addr_pack(&ib, &addr);
    addr.lid = 0;                       // InfiniBand without a LID
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));

    uct_syncmem_dev_addr_pack(&roce, &addr);
    addr.magic = 0;                     // another format
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));
}

TEST(addr, reachability)
{
    uct_syncmem_port_t v4a = roce_port(0x01004d0a), v4b = roce_port(0x02014d0a);
    uct_syncmem_port_t v6  = roce_port(0);
    uct_syncmem_port_t iba = ib_port(1, 0xfe80000000000000ull);
    uct_syncmem_port_t ibb = ib_port(2, 0xfe80000000000000ull);
    uct_syncmem_port_t ibc = ib_port(3, 0xfec0000000000001ull);
    uct_syncmem_dev_addr_t addr;

    // a native IPv6 GID: fe80::1
    memset(v6.gid.raw, 0, sizeof(v6.gid.raw));
    v6.gid.raw[0]  = 0xfe;
    v6.gid.raw[1]  = 0x80;
    v6.gid.raw[15] = 1;

    uct_syncmem_dev_addr_pack(&v4b, &addr);
    EXPECT_TRUE(uct_syncmem_dev_addr_is_reachable(&v4a, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&v6, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&iba, &addr));

    uct_syncmem_dev_addr_pack(&ibb, &addr);
    EXPECT_TRUE(uct_syncmem_dev_addr_is_reachable(&iba, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&ibc, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&v4a, &addr));
}

TEST(addr, garbage_is_not_reachable)
{
    uct_syncmem_port_t port = roce_port(0x01004d0a);
    uct_syncmem_dev_addr_t addr;

    memset(&addr, 0, sizeof(addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&port, &addr));
    memset(&addr, 0xff, sizeof(addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_reachable(&port, &addr));
}

// UCP (1.15+) prints why no transport reaches a peer: each mismatch has its
// own reason; the same port is told from another port of the same fabric.
TEST(addr, unreachable_reasons_and_same_port)
{
    uct_syncmem_port_t v4a = roce_port(0x01004d0a), v4b = roce_port(0x02014d0a);
    uct_syncmem_port_t iba = ib_port(1, 0xfe80000000000000ull);
    uct_syncmem_port_t ibc = ib_port(3, 0xfec0000000000001ull);
    uct_syncmem_dev_addr_t addr;

    uct_syncmem_dev_addr_pack(&v4b, &addr);
    EXPECT_EQ(nullptr, uct_syncmem_dev_addr_unreachable(&v4a, &addr));
    EXPECT_STREQ("the peer's link layer differs (InfiniBand vs Ethernet)",
                 uct_syncmem_dev_addr_unreachable(&iba, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_port(&v4a, &addr));
    EXPECT_TRUE(uct_syncmem_dev_addr_is_port(&v4b, &addr));

    uct_syncmem_dev_addr_pack(&iba, &addr);
    EXPECT_STREQ("the peer is on another InfiniBand subnet",
                 uct_syncmem_dev_addr_unreachable(&ibc, &addr));

    EXPECT_STREQ("not a syncmem device address",
                 uct_syncmem_dev_addr_unreachable(&v4a, nullptr));
    memset(&addr, 0, sizeof(addr));
    EXPECT_STREQ("not a syncmem device address",
                 uct_syncmem_dev_addr_unreachable(&v4a, &addr));
    EXPECT_FALSE(uct_syncmem_dev_addr_is_port(&v4a, &addr));
}

// Only the form pack makes: the IPv4 flag says what the GID is (found by
// the dev_addr fuzz target's round trip).
TEST(addr, ipv4_flag_must_match_the_gid)
{
    uct_syncmem_port_t roce = roce_port(0x01004d0a), ib = ib_port(7, 0xfe80),
                       out;
    uct_syncmem_dev_addr_t addr;

    uct_syncmem_dev_addr_pack(&roce, &addr);
    addr.flags &= ~UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4;
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));

    uct_syncmem_dev_addr_pack(&ib, &addr);
    addr.flags |= UCT_SYNCMEM_DEV_ADDR_FLAG_IPV4;
    reseal(&addr);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_syncmem_dev_addr_unpack(&addr, &out));
}

// An interface address names a QP that can exist: 24 bits, not 0 or 1.
TEST(addr, iface_addr_qp_number)
{
    uct_syncmem_iface_addr_t addr = {0x1234, 0x11};
    uint64_t id;
    uint32_t qpn;

    ASSERT_EQ(UCS_OK, uct_syncmem_iface_addr_unpack(&addr, &id, &qpn));
    EXPECT_EQ(0x1234u, id);
    EXPECT_EQ(0x11u, qpn);
    for (uint32_t bad : {0u, 1u, 0x1000000u, 0xffffffffu}) {
        addr.cm_qpn = bad;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_syncmem_iface_addr_unpack(&addr, &id, &qpn)) << bad;
    }
}
