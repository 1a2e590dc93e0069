// SPDX-License-Identifier: BSD-3-Clause
// Remote access bounds: a peer cannot read, write or atomically modify
// memory outside a registered region, or with a forged or revoked rkey.
// Each attempt fails on its own endpoint (error handler called for it
// alone, UCS_ERR_INVALID_ADDR), the target's memory is unchanged byte for
// byte, and the iface goes on serving its other endpoints.
//
// The cache is off (RCACHE=n): cached registrations are widened to pages,
// so "one byte past the end" is only outside the region without it.
#include "syncmem_rma_test.h"

#include <functional>
#include <unistd.h>

namespace {

class syncmem_bounds_test : public syncmem_rma_test {
protected:
    config_mods_t md_config() const override {
        return {{"RCACHE", "n"}};
    }

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
        register_region(UCT_MD_MEM_ACCESS_ALL);
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

    size_t            m_page;
    size_t            m_len  = 256;
    std::vector<uint8_t> m_mem;
    uint8_t           *m_region;
    uct_mem_h         m_memh = nullptr;
    uct_rkey_bundle_t m_rkey = {};
};

} // namespace

// Puts and gets straddling the end by one byte (a misaligned atomic is
// refused by the call itself, with UCX's parameter checks).
TEST_F(syncmem_bounds_test, one_byte_past_the_end)
{
    expect_all_refused(at(m_len - 7), m_rkey.rkey, false);
}

// aligned, so that atomics are refused for the bounds, not the alignment
TEST_F(syncmem_bounds_test, first_word_past_the_end)
{
    expect_all_refused(at(m_len), m_rkey.rkey);
}

TEST_F(syncmem_bounds_test, before_the_start)
{
    expect_all_refused(at(-8), m_rkey.rkey);
}

TEST_F(syncmem_bounds_test, far_outside)
{
    expect_all_refused(at(m_page), m_rkey.rkey);
}

// An rkey with its key byte or its index changed: the HCA checks both.
TEST_F(syncmem_bounds_test, forged_rkey)
{
    expect_all_refused(at(0), m_rkey.rkey ^ 0x01);
    expect_all_refused(at(0), m_rkey.rkey ^ 0x00ffff00);
}

// A region the target deregistered: its rkey is dead, even though the
// memory is still there (and registered again, under a new key).
TEST_F(syncmem_bounds_test, revoked_rkey)
{
    uct_rkey_t old = m_rkey.rkey;

    uct_rkey_release(m_component, &m_rkey);
    ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, m_memh));
    m_memh = nullptr;
    // the same memory registered again gets another key; the old one
    // stays dead (and the good endpoints' puts use the new one)
    ASSERT_NO_FATAL_FAILURE(register_region(UCT_MD_MEM_ACCESS_ALL));
    ASSERT_NE(old, m_rkey.rkey);
    expect_all_refused(at(0), old);
}

// Registered for remote reads only: writes and atomics are refused, reads
// are served.
TEST_F(syncmem_bounds_test, read_only_region_refuses_writes)
{
    uct_rkey_release(m_component, &m_rkey);
    ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, m_memh));
    ASSERT_NO_FATAL_FAILURE(register_region(UCT_MD_MEM_ACCESS_REMOTE_GET));
    uct_rkey_t ro = m_rkey.rkey;
    std::vector<uint8_t> before = m_mem;

    uct_ep_h ep = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, ep);
    uint64_t v = 0x1234;
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(ep, &v, 8, at(0), ro);
    }));
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, wait(uct_ep_flush(ep, 0, &comp), &comp));
    EXPECT_TRUE(before == m_mem);
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);

    // a read of the same region is served
    uct_ep_h reader = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, reader);
    uint64_t got = 0;
    uct_completion_t gcomp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = retry([&] {
        return uct_ep_get_bcopy(reader, [](void *arg, const void *data,
                                           size_t len) {
            memcpy(arg, data, len);
        }, &got, 8, at(0), ro, &gcomp);
    });
    EXPECT_EQ(UCS_OK, wait(status, &gcomp));
    EXPECT_EQ(0x5a5a5a5a5a5a5a5aul, got);
    EXPECT_EQ(1u, m_errors.size());
}
