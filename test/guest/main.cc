// SPDX-License-Identifier: BSD-3-Clause
// The device test program. With --syncmem-peer it is instead a peer
// process for tests that need one they can kill (test_peer.cc).
#include "syncmem_test.h"

#include <cstdio>
#include <cstring>
#include <string>

static std::string hex(const void *p, size_t n)
{
    std::string s;
    char b[3];
    for (size_t i = 0; i < n; ++i) {
        snprintf(b, sizeof(b), "%02x", ((const uint8_t*)p)[i]);
        s += b;
    }
    return s;
}

// Opens an iface on SYNCMEM_DEV0, exposes 4 MiB of memory, connects an
// endpoint to the iface at "DEV IFACE" (hex) if given, prints
// "<dev addr> <iface addr> <packed rkey> <buffer address>" in hex and
// progresses until it is killed.
namespace {
std::vector<uint8_t> unhex(const std::string &s)
{
    std::vector<uint8_t> v;
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
        v.push_back((uint8_t)std::stoul(s.substr(i, 2), nullptr, 16));
    }
    return v;
}

struct syncmem_peer : syncmem_test {
    void TestBody() override {}

    // Connects to the iface at dev/ifa (hex) and waits until it is.
    bool connect_to(uct_iface_h iface, const std::string &dev,
                    const std::string &ifa) {
        uct_ep_h ep;
        if (connect_to_addr(iface, unhex(dev), unhex(ifa), &ep) != UCS_OK) {
            return false;
        }
        wait_bound bound("the peer's connection (iface flush)");
        while ((uct_iface_flush(iface, 0, NULL) != UCS_OK) && bound()) {
            uct_worker_progress(m_worker);
        }
        return true;
    }

    int run(int argc, char **argv) {
        SetUp();
        if (testing::Test::HasFatalFailure() || (m_md == nullptr)) {
            return 1;
        }

        uct_iface_h iface;
        if (open_iface(m_md, "syncmem", m_dev, &iface) != UCS_OK) {
            return 1;
        }
        uct_md_attr_t md_attr;
        uct_md_query(m_md, &md_attr);

        std::vector<uint8_t> dev, ifa;
        std::vector<uint8_t> buf(4 << 20), rkey(md_attr.rkey_packed_size);
        uct_mem_h memh;
        get_addresses(iface, &dev, &ifa);
        if ((uct_md_mem_reg(m_md, buf.data(), buf.size(),
                            UCT_MD_MEM_ACCESS_ALL, &memh) != UCS_OK) ||
            (uct_md_mkey_pack(m_md, memh, rkey.data()) != UCS_OK)) {
            return 1;
        }

        if ((argc == 2) && !connect_to(iface, argv[0], argv[1])) {
            return 1;
        }

        uintptr_t addr = (uintptr_t)buf.data();
        printf("%s %s %s %s\n", hex(dev.data(), dev.size()).c_str(),
               hex(ifa.data(), ifa.size()).c_str(),
               hex(rkey.data(), rkey.size()).c_str(),
               hex(&addr, sizeof(addr)).c_str());
        fflush(stdout);
        for (;;) {
            uct_worker_progress(m_worker);
        }
    }
};
} // namespace

int main(int argc, char **argv)
{
    if ((argc > 1) && !strcmp(argv[1], "--syncmem-peer")) {
        return syncmem_peer().run(argc - 2, argv + 2);
    }
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
