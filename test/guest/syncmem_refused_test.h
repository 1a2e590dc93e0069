/* SPDX-License-Identifier: BSD-3-Clause */
// Fixture for remote accesses that must be refused: a target region in the
// middle of three pages, and checks that an access fails on its own
// endpoint (error handler called for it alone, UCS_ERR_INVALID_ADDR), the
// target's memory unchanged byte for byte, and the iface going on serving
// its other endpoints (through m_rkey).
#ifndef SYNCMEM_TEST_REFUSED_H_
#define SYNCMEM_TEST_REFUSED_H_

#include "syncmem_rma_test.h"

#include <functional>
#include <unistd.h>

class syncmem_refused_test : public syncmem_rma_test {
protected:
    void SetUp() override {
        syncmem_rma_test::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        m_page = sysconf(_SC_PAGESIZE);
        // three pages of target memory; the middle one's first m_len bytes
        // are registered, the rest is the fence that must not change
        m_mem.assign(3 * m_page, 0x5a);
        m_region = m_mem.data() + m_page;
        if (m_register) {
            register_region(UCT_MD_MEM_ACCESS_ALL);
        }
    }

    void TearDown() override {
        if (m_memh != nullptr) {
            uct_rkey_release(m_component, &m_rkey);
            uct_md_mem_dereg(m_md, m_memh);
        }
        syncmem_rma_test::TearDown();
    }

    void register_region(unsigned access) {
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, m_region, m_len, access,
                                         &m_memh));
        std::vector<uint8_t> packed(64);
        ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, m_memh, packed.data()));
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &m_rkey));
    }

    uint64_t at(ptrdiff_t offset) const {
        return (uintptr_t)m_region + offset;
    }

    // Waits for an operation that may complete later.
    ucs_status_t wait(ucs_status_t status, uct_completion_t *comp) {
        if (status == UCS_INPROGRESS) {
            wait_bound bound("an operation on the bounds test's target to complete");
            while ((comp->count > 0) && bound()) {
                progress();
            }
            status = comp->status;
        }
        return status;
    }

    typedef std::function<ucs_status_t(uct_ep_h, uint64_t, uct_rkey_t,
                                       uct_completion_t*)> op_t;

    // op on a new endpoint at (addr, rkey) must fail that endpoint alone and
    // leave every byte of the target as it was.
    void expect_refused(const char *what, op_t op, uint64_t addr,
                        uct_rkey_t rkey) {
        SCOPED_TRACE(what);
        std::vector<uint8_t> before = m_mem;
        size_t errors               = m_errors.size();
        uct_ep_h ep                 = connect(m_sender, m_receiver);
        ASSERT_NE(nullptr, ep);

        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status   = retry([&] { return op(ep, addr, rkey, &comp); });
        status                = wait(status, &comp);
        uct_completion_t fcomp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t fstatus  = wait(uct_ep_flush(ep, 0, &fcomp), &fcomp);

        EXPECT_TRUE((status == UCS_ERR_INVALID_ADDR) ||
                    (fstatus == UCS_ERR_INVALID_ADDR))
                << "operation: " << ucs_status_string(status)
                << ", flush: " << ucs_status_string(fstatus);
        ASSERT_EQ(errors + 1, m_errors.size());
        EXPECT_EQ(ep, m_errors.back().first);
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, m_errors.back().second);
        EXPECT_TRUE(before == m_mem) << "the target's memory changed";

        // and the iface still serves a new endpoint, inside the region
        uct_ep_h good = connect(m_sender, m_receiver);
        ASSERT_NE(nullptr, good);
        uint64_t v = 0x600d600d600d600dul;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(good, &v, 8, at(0), m_rkey.rkey);
        }));
        flush(good);
        EXPECT_EQ(0, memcmp(m_region, &v, 8));
        EXPECT_EQ(errors + 1, m_errors.size());
        memset(m_region, 0x5a, 8);  // as it was, for the next attempt
    }

    // Every kind of remote access, 8 bytes at addr (atomics only where
    // they are aligned: elsewhere the call itself refuses them).
    void expect_all_refused(uint64_t addr, uct_rkey_t rkey,
                            bool atomics = true) {
        expect_refused("put_short", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                       uct_completion_t*) {
            uint64_t v = 0xdeadbeefdeadbeeful;
            return uct_ep_put_short(ep, &v, 8, a, k);
        }, addr, rkey);
        expect_refused("put_bcopy", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                       uct_completion_t*) {
            ssize_t len = uct_ep_put_bcopy(ep, [](void *dst, void*) -> size_t {
                memset(dst, 0xee, 8);
                return 8;
            }, nullptr, a, k);
            return (len < 0) ? (ucs_status_t)len : UCS_OK;
        }, addr, rkey);
        expect_refused("get_bcopy", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                       uct_completion_t *c) {
            return uct_ep_get_bcopy(ep, [](void*, const void*, size_t) {},
                                    nullptr, 8, a, k, c);
        }, addr, rkey);
        if (!atomics) {
            return;
        }
        expect_refused("atomic add", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                        uct_completion_t*) {
            return uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 1, a, k);
        }, addr, rkey);
        expect_refused("atomic fetch-add", [](uct_ep_h ep, uint64_t a,
                                              uct_rkey_t k,
                                              uct_completion_t *c) {
            static uint64_t result;
            return uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &result, a,
                                         k, c);
        }, addr, rkey);
        expect_refused("atomic cswap", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                          uct_completion_t *c) {
            static uint64_t result;
            return uct_ep_atomic_cswap64(ep, 0x5a5a5a5a5a5a5a5aul, 1, a, k,
                                         &result, c);
        }, addr, rkey);
    }

    bool              m_register = true;  // SetUp registers the region
    size_t            m_page;
    size_t            m_len  = 256;
    std::vector<uint8_t> m_mem;
    uint8_t           *m_region;
    uct_mem_h         m_memh = nullptr;
    uct_rkey_bundle_t m_rkey = {};
};

#endif
