// SPDX-License-Identifier: BSD-3-Clause
// The registration cache (uct_syncmem/syncmem_rcache.c) on a real device:
// hits, LRU limits, merging, alignment, and above all that memory unmapped
// and mapped again at the same address never gets the old registration.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <sys/mman.h>
#include <unistd.h>

class syncmem_rcache_test : public syncmem_rma_test {
protected:
    void TearDown() override {
        for (auto &m : m_maps) {
            munmap(m.first, m.second);
        }
        syncmem_rma_test::TearDown();
    }

    static uct_syncmem_rcache_counters_t counters(uct_md_h md) {
        uct_syncmem_rcache_counters_t c = {};
        EXPECT_EQ(UCS_OK, uct_syncmem_md_rcache_counters(md, &c));
        return c;
    }

    // Anonymous private memory, unmapped at teardown.
    uint8_t *map(size_t size, void *at = nullptr, int prot = PROT_READ |
                                                            PROT_WRITE) {
        void *p = mmap(at, size, prot, MAP_PRIVATE | MAP_ANONYMOUS |
                       (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
        EXPECT_NE(MAP_FAILED, p) << "mmap(" << at << ", " << size << "): "
                                 << strerror(errno);
        if (p == MAP_FAILED) {
            return nullptr;
        }
        m_maps.push_back({p, size});
        return (uint8_t*)p;
    }

    // Fresh anonymous pages in place of [p, p + size), mapped by the test:
    // one mmap with MAP_FIXED, so that no other thread's mmap can take the
    // range between an munmap and a new mmap, as one did once (EEXIST). UCX
    // still sees the old pages go: its hook reports the range of a fixed
    // mapping as unmapped first.
    uint8_t *remap(void *p, size_t size, int prot = PROT_READ | PROT_WRITE) {
        void *q = mmap(p, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                       -1, 0);
        EXPECT_EQ(p, q) << "mmap(" << p << ", " << size << ", MAP_FIXED): "
                        << strerror(errno);
        return (q == MAP_FAILED) ? nullptr : (uint8_t*)q;
    }

    uct_mem_h reg(uct_md_h md, void *p, size_t size) {
        uct_mem_h memh = nullptr;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(md, p, size, UCT_MD_MEM_ACCESS_ALL,
                                         &memh));
        return memh;
    }

    // Registers and deregisters at once: what a cache hit or miss leaves.
    void reg_dereg(uct_md_h md, void *p, size_t size) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, reg(md, p, size)));
    }

    uint32_t rkey_of(uct_md_h md, uct_mem_h memh) {
        std::vector<uint8_t> packed(64);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(md, memh, packed.data()));
        uct_rkey_bundle_t b;
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &b));
        uct_rkey_release(m_component, &b);
        return (uint32_t)b.rkey;
    }

    // Puts 8 bytes of value at addr through ep, flushes; the flush status.
    ucs_status_t put(uct_ep_h ep, uint64_t addr, uint32_t rkey,
                     uint64_t value) {
        ucs_status_t status = retry([&] {
            return uct_ep_put_short(ep, &value, sizeof(value), addr, rkey);
        });
        if (status != UCS_OK) {
            return status;
        }
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        status = uct_ep_flush(ep, 0, &comp);
        if (status == UCS_INPROGRESS) {
            wait_bound bound("the flush to complete");
            while ((comp.count > 0) && bound()) {
                progress();
            }
            status = comp.status;
        }
        return status;
    }

    std::vector<std::pair<void*, size_t>> m_maps;
    const size_t                          m_page = sysconf(_SC_PAGESIZE);
};

TEST_F(syncmem_rcache_test, hit_on_reregistration)
{
    uint8_t *p = map(64 * 1024);
    auto before = counters(m_md);

    uct_mem_h m1 = reg(m_md, p, 64 * 1024);
    uint32_t rkey1 = rkey_of(m_md, m1);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, m1));
    uct_mem_h m2 = reg(m_md, p + 100, 1000);    // inside: the same region
    EXPECT_EQ(rkey1, rkey_of(m_md, m2));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, m2));

    auto after = counters(m_md);
    EXPECT_EQ(before.misses + 1, after.misses);
    EXPECT_EQ(before.hits + 1, after.hits);
    EXPECT_EQ(before.evictions, after.evictions);
    EXPECT_EQ(before.invalidations, after.invalidations);
}

// The classic registration cache bug: free, a new mapping at the same
// address, and the old registration served again (or the peer's rkey still
// writing into whatever now lives there).
TEST_F(syncmem_rcache_test, munmap_then_mmap_gives_new_registration)
{
    const size_t size = 64 * 1024;
    uint8_t *p = map(size);
    memset(p, 'a', size);
    uct_mem_h old_memh = reg(m_md, p, size);
    uint32_t old_rkey  = rkey_of(m_md, old_memh);
    ASSERT_EQ(UCS_OK, put(m_ep, (uintptr_t)p, old_rkey, 0x1111111111111111ul));
    EXPECT_EQ(0x1111111111111111ul, *(uint64_t*)p);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, old_memh));  // stays cached
    auto before = counters(m_md);

    uint8_t *q = remap(p, size);
    ASSERT_EQ(p, q) << "could not map the same address again";
    memset(q, 'b', size);

    uct_mem_h new_memh = reg(m_md, q, size);
    uint32_t new_rkey  = rkey_of(m_md, new_memh);
    auto after = counters(m_md);
    EXPECT_EQ(before.misses + 1, after.misses) << "served from the cache";
    EXPECT_EQ(before.hits, after.hits);
    EXPECT_EQ(before.invalidations + 1, after.invalidations);
    EXPECT_NE(old_rkey, new_rkey);

    // the peer's old key is dead: a remote access error, not a write into
    // the new memory
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              put(m_ep, (uintptr_t)q, old_rkey, 0x2222222222222222ul));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, m_errors[0].second);
    for (size_t i = 0; i < size; ++i) {
        ASSERT_EQ('b', q[i]) << "byte " << i << " written through a dead key";
    }

    // the new key works (a new endpoint: the first one failed)
    uct_ep_h ep = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(UCS_OK, put(ep, (uintptr_t)q, new_rkey, 0x3333333333333333ul));
    EXPECT_EQ(0x3333333333333333ul, *(uint64_t*)q);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, new_memh));
}

// Unmapped while still registered by the user: the handle stays valid until
// deregistered, keeps its old pages, and never reaches the new mapping.
TEST_F(syncmem_rcache_test, munmap_while_registered_never_reaches_new_memory)
{
    const size_t size = 16 * 1024;
    uint8_t *p = map(size);
    uct_mem_h old_memh = reg(m_md, p, size);
    uint32_t old_rkey  = rkey_of(m_md, old_memh);
    auto before = counters(m_md);

    uint8_t *q = remap(p, size);
    ASSERT_EQ(p, q);
    memset(q, 'c', size);

    // the old registration pins the old pages: this lands there, not in q
    EXPECT_EQ(UCS_OK, put(m_ep, (uintptr_t)q, old_rkey, 0x4444444444444444ul));
    for (size_t i = 0; i < size; ++i) {
        ASSERT_EQ('c', q[i]) << "byte " << i;
    }

    uct_mem_h new_memh = reg(m_md, q, size);
    EXPECT_NE(old_rkey, rkey_of(m_md, new_memh));
    EXPECT_EQ(before.misses + 1, counters(m_md).misses);

    // the invalidated region goes when its user lets go of it
    EXPECT_EQ(before.invalidations, counters(m_md).invalidations);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, old_memh));
    EXPECT_EQ(before.invalidations + 1, counters(m_md).invalidations);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, new_memh));
}

TEST_F(syncmem_rcache_test, lru_eviction_at_max_regions)
{
    uct_md_h md = open_md(m_component, m_md_name,
                          {{"RCACHE_MAX_REGIONS", "2"}});
    ASSERT_NE(nullptr, md);
    uint8_t *p = map(8 * m_page);
    uint8_t *b[3] = { p, p + 3 * m_page, p + 6 * m_page }; // not adjacent

    for (uint8_t *x : b) {
        reg_dereg(md, x, m_page);
    }
    auto c = counters(md);
    EXPECT_EQ(3u, c.misses);
    EXPECT_EQ(1u, c.evictions) << "the least recently used one goes";

    reg_dereg(md, b[2], m_page);
    EXPECT_EQ(c.hits + 1, counters(md).hits) << "b[2] stayed";
    reg_dereg(md, b[0], m_page);
    EXPECT_EQ(c.misses + 1, counters(md).misses) << "b[0] was evicted";
    EXPECT_EQ(2u, counters(md).evictions);     // b[1] made room for it
    EXPECT_EQ(0u, counters(md).invalidations);

    // in use: never evicted, whatever the limit. b[0] hits, b[1] misses and
    // evicts b[2], which is not in use yet; b[2] then misses, and all three
    // stay while held, one over the limit.
    uct_mem_h held[3];
    for (int i = 0; i < 3; ++i) {
        held[i] = reg(md, b[i], m_page);
    }
    EXPECT_EQ(3u, counters(md).evictions);
    auto c2 = counters(md);
    for (int i = 0; i < 3; ++i) {
        reg_dereg(md, b[i], m_page);
    }
    EXPECT_EQ(c2.hits + 3, counters(md).hits);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, held[i]));
    }
}

TEST_F(syncmem_rcache_test, lru_eviction_at_max_size)
{
    uct_md_h md = open_md(m_component, m_md_name,
                          {{"RCACHE_MAX_SIZE", std::to_string(5 * m_page)}});
    ASSERT_NE(nullptr, md);
    uint8_t *p = map(16 * m_page);

    reg_dereg(md, p, 2 * m_page);
    reg_dereg(md, p + 4 * m_page, 2 * m_page);
    EXPECT_EQ(0u, counters(md).evictions);
    reg_dereg(md, p + 8 * m_page, 2 * m_page);
    EXPECT_EQ(1u, counters(md).evictions) << "6 pages > 5";
}

TEST_F(syncmem_rcache_test, overlapping_and_adjacent_regions)
{
    uint8_t *p = map(8 * m_page);
    auto c0 = counters(m_md);

    // [0,2) then [1,3): one registration over [0,3) replaces the first
    uct_mem_h a = reg(m_md, p, 2 * m_page);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, a));
    uct_mem_h b = reg(m_md, p + m_page, 2 * m_page);
    auto c1 = counters(m_md);
    EXPECT_EQ(c0.misses + 2, c1.misses);
    EXPECT_EQ(c0.invalidations + 1, c1.invalidations) << "merged away";

    uct_mem_h all = reg(m_md, p, 3 * m_page);
    EXPECT_EQ(c1.hits + 1, counters(m_md).hits) << "the merged region";
    EXPECT_EQ(rkey_of(m_md, b), rkey_of(m_md, all));

    // [3,4) touches [0,3) but does not overlap it: a region of its own
    uct_mem_h next = reg(m_md, p + 3 * m_page, m_page);
    EXPECT_EQ(c1.misses + 1, counters(m_md).misses);
    EXPECT_NE(rkey_of(m_md, all), rkey_of(m_md, next));

    // both keys reach their memory
    EXPECT_EQ(UCS_OK, put(m_ep, (uintptr_t)p, rkey_of(m_md, all), 5));
    EXPECT_EQ(UCS_OK, put(m_ep, (uintptr_t)(p + 3 * m_page),
                          rkey_of(m_md, next), 6));
    EXPECT_EQ(5u, *(uint64_t*)p);
    EXPECT_EQ(6u, *(uint64_t*)(p + 3 * m_page));

    // one that spans both while they are in use: a third, larger region
    uct_mem_h span = reg(m_md, p + 2 * m_page, 2 * m_page);
    EXPECT_EQ(UCS_OK, put(m_ep, (uintptr_t)(p + 2 * m_page),
                          rkey_of(m_md, span), 7));
    EXPECT_EQ(7u, *(uint64_t*)(p + 2 * m_page));
    for (uct_mem_h m : {b, all, next, span}) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, m));
    }
}

TEST_F(syncmem_rcache_test, reg_align_2m)
{
    const size_t mb2 = 2 * 1024 * 1024;
    uint8_t *p = map(3 * mb2);
    uint8_t *win = (uint8_t*)(((uintptr_t)p + mb2 - 1) & ~(mb2 - 1));

    // on: a neighbour in the same 2 MiB window hits
    uct_md_h md2m = open_md(m_component, m_md_name, {{"REG_ALIGN", "2M"}});
    ASSERT_NE(nullptr, md2m);
    auto two_neighbours = [&](uct_md_h md) {
        reg_dereg(md, win + 4096, 4096);
        reg_dereg(md, win + mb2 - 8192, 100);
        return counters(md);
    };
    EXPECT_EQ(1u, two_neighbours(md2m).misses);
    EXPECT_EQ(1u, counters(md2m).hits);

    // off: each buffer its own registration
    uct_md_h md4k = open_md(m_component, m_md_name);
    ASSERT_NE(nullptr, md4k);
    EXPECT_EQ(2u, two_neighbours(md4k).misses);
    EXPECT_EQ(0u, counters(md4k).hits);

    // a buffer between unmapped and PROT_NONE pages: widened only over
    // memory that can be registered, so it still registers
    uint8_t *hole = map(3 * m_page);
    ASSERT_EQ(0, munmap(hole + 2 * m_page, m_page));
    uint8_t *guard = remap(hole, m_page, PROT_NONE);
    uint8_t *buf   = remap(hole + m_page, m_page);
    ASSERT_TRUE((guard != nullptr) && (buf != nullptr));
    uct_mem_h memh = reg(md2m, buf, m_page);
    ASSERT_NE(nullptr, memh);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md2m, memh));

    // and bad values are refused with a message
    uct_md_config_t *config;
    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, config_modify(config, "REG_ALIGN", "3000"));
    uct_md_h bad;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_md_open(m_component, m_md_name.c_str(), config, &bad));
    uct_config_release(config);
}

TEST_F(syncmem_rcache_test, register_1g)
{
    const size_t size = 1ul << 30;
    uint8_t *p = map(size);
    ASSERT_NE(nullptr, p);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, p, size, UCT_MD_MEM_ACCESS_ALL,
                                     &memh));
    uint32_t rkey = rkey_of(m_md, memh);
    EXPECT_EQ(UCS_OK, put(m_ep, (uintptr_t)(p + size - 8), rkey, 9));
    EXPECT_EQ(9u, *(uint64_t*)(p + size - 8));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    // a smaller buffer inside it hits
    auto c = counters(m_md);
    reg_dereg(m_md, p + size / 2, 4096);
    EXPECT_EQ(c.hits + 1, counters(m_md).hits);
}

TEST_F(syncmem_rcache_test, disabled)
{
    uct_md_h md = open_md(m_component, m_md_name, {{"RCACHE", "n"}});
    ASSERT_NE(nullptr, md);
    uct_syncmem_rcache_counters_t c;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uct_syncmem_md_rcache_counters(md, &c));

    uint8_t *p = map(m_page);
    uct_mem_h m1 = reg(md, p, m_page), m2 = reg(md, p, m_page);
    EXPECT_NE(rkey_of(md, m1), rkey_of(md, m2)) << "two registrations";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, m1));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, m2));
}
