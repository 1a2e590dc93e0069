// SPDX-License-Identifier: BSD-3-Clause
// Devices, memory domain and interface on a real verbs device.
#include "syncmem_test.h"

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

TEST_F(syncmem_test, md_lists_the_port_as_a_network_device)
{
    uct_tl_resource_desc_t *resources;
    unsigned count;
    bool found = false;

    ASSERT_EQ(UCS_OK, uct_md_query_tl_resources(m_md, &resources, &count));
    for (unsigned i = 0; i < count; ++i) {
        if ((m_dev == resources[i].dev_name) &&
            !strcmp(resources[i].tl_name, "syncmem")) {
            EXPECT_EQ(UCT_DEVICE_TYPE_NET, resources[i].dev_type);
            found = true;
        }
    }
    uct_release_tl_resource_list(resources);
    EXPECT_TRUE(found) << "syncmem/" << m_dev << " not listed";
}

TEST_F(syncmem_test, iface_addresses_are_reachable_from_self)
{
    uct_iface_h iface;
    uct_iface_attr_t attr;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
    ASSERT_EQ(UCS_OK, uct_iface_query(iface, &attr));
    ASSERT_GT(attr.device_addr_len, 0u);
    ASSERT_GT(attr.iface_addr_len, 0u);
    EXPECT_GT(attr.bandwidth.shared + attr.bandwidth.dedicated, 0);

    std::vector<uint8_t> dev(attr.device_addr_len), ifa(attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                              iface, (uct_device_addr_t*)dev.data()));
    ASSERT_EQ(UCS_OK, uct_iface_get_address(iface,
                                            (uct_iface_addr_t*)ifa.data()));
    EXPECT_TRUE(uct_iface_is_reachable(iface, (uct_device_addr_t*)dev.data(),
                                       (uct_iface_addr_t*)ifa.data()));

    // A second iface on the same port has a distinct interface address.
    uct_iface_h iface2;
    std::vector<uint8_t> ifa2(attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface2));
    ASSERT_EQ(UCS_OK, uct_iface_get_address(iface2,
                                            (uct_iface_addr_t*)ifa2.data()));
    EXPECT_NE(ifa, ifa2);
}

TEST_F(syncmem_test, garbled_address_is_not_reachable)
{
    uct_iface_h iface;
    uct_iface_attr_t attr;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
    ASSERT_EQ(UCS_OK, uct_iface_query(iface, &attr));
    std::vector<uint8_t> dev(attr.device_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                              iface, (uct_device_addr_t*)dev.data()));

    for (size_t i = 0; i < dev.size(); ++i) {
        std::vector<uint8_t> bad = dev;
        bad[i] ^= 0x40;
        EXPECT_FALSE(uct_iface_is_reachable(iface,
                                            (uct_device_addr_t*)bad.data(),
                                            NULL)) << "byte " << i;
    }
    EXPECT_FALSE(uct_iface_is_reachable(iface, NULL, NULL));
}

// rc_verbs on the same port: its device address is foreign to syncmem.
TEST_F(syncmem_test, foreign_address_is_not_reachable)
{
    uct_component_h ib = find_component("ib");
    ASSERT_NE(nullptr, ib) << "UCX's ib component is missing";
    uct_md_h ib_md = open_md(ib, m_md_name);
    ASSERT_NE(nullptr, ib_md);

    uct_iface_h rc, iface;
    uct_iface_attr_t rc_attr, attr;
    ASSERT_EQ(UCS_OK, open_iface(ib_md, "rc_verbs", m_dev, &rc));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
    ASSERT_EQ(UCS_OK, uct_iface_query(rc, &rc_attr));
    ASSERT_EQ(UCS_OK, uct_iface_query(iface, &attr));

    // Large enough for our reader whatever rc_verbs' address length is.
    std::vector<uint8_t> dev(std::max(rc_attr.device_addr_len,
                                      attr.device_addr_len));
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                              rc, (uct_device_addr_t*)dev.data()));
    EXPECT_FALSE(uct_iface_is_reachable(iface, (uct_device_addr_t*)dev.data(),
                                        NULL));
}

TEST_F(syncmem_test, bad_device_names_fail_clearly)
{
    uct_iface_h iface;

    EXPECT_EQ(UCS_ERR_NO_DEVICE,
              open_iface(m_md, "syncmem", m_md_name + ":9", &iface));
    EXPECT_EQ(UCS_ERR_NO_DEVICE,
              open_iface(m_md, "syncmem", m_md_name + ":x", &iface));
    EXPECT_EQ(UCS_ERR_NO_DEVICE,
              open_iface(m_md, "syncmem", "nosuchdev:1", &iface));
}

TEST_F(syncmem_test, md_open_of_missing_device_fails)
{
    uct_md_config_t *config;
    uct_md_h md;

    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
    EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_md_open(m_component, "nosuchdev", config,
                                             &md));
    uct_config_release(config);
}

TEST_F(syncmem_test, mtu_config_caps_the_address_mtu)
{
    uct_iface_h full, small;
    uct_iface_attr_t attr;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &full));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &small,
                                 {{"MTU", "256"}}));
    ASSERT_EQ(UCS_OK, uct_iface_query(full, &attr));

    std::vector<uint8_t> a(attr.device_addr_len), b(attr.device_addr_len);
    uct_iface_get_device_address(full, (uct_device_addr_t*)a.data());
    uct_iface_get_device_address(small, (uct_device_addr_t*)b.data());
    EXPECT_NE(a, b);
    EXPECT_EQ(IBV_MTU_256, b[2]); // mtu byte of uct_syncmem_dev_addr_t

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              open_iface(m_md, "syncmem", m_dev, &small, {{"MTU", "1000"}}));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              open_iface(m_md, "syncmem", m_dev, &small,
                         {{"GID_INDEX", "100000"}}));
}

TEST_F(syncmem_test, mem_reg_bad_input_fails_clearly)
{
    uct_mem_h memh;
    size_t page = sysconf(_SC_PAGESIZE);

    // nothing to register
    char byte;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_md_mem_reg(m_md, &byte, 0, UCT_MD_MEM_ACCESS_ALL, &memh));

    // not mapped
    void *gone = mmap(NULL, page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, gone);
    munmap(gone, page);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_reg(m_md, gone, page,
                             UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS,
                             &memh));

    // read-only: remote read is fine, remote write is refused
    void *ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, ro);
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, ro, page,
                                     UCT_MD_MEM_ACCESS_REMOTE_GET |
                                     UCT_MD_MEM_ACCESS_LOCAL_READ, &memh));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_reg(m_md, ro, page,
                             UCT_MD_MEM_ACCESS_REMOTE_PUT |
                             UCT_MD_MEM_FLAG_HIDE_ERRORS, &memh));
    munmap(ro, page);
}
