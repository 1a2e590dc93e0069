// SPDX-License-Identifier: BSD-3-Clause
// Remote access bounds: a peer cannot read, write or atomically modify
// memory outside a registered region, or with a forged or revoked rkey.
// Each attempt fails on its own endpoint (error handler called for it
// alone, UCS_ERR_INVALID_ADDR), the target's memory is unchanged byte for
// byte, and the iface goes on serving its other endpoints.
//
// The cache is off (RCACHE=n): cached registrations are widened to pages,
// so "one byte past the end" is only outside the region without it.
#include "syncmem_refused_test.h"

namespace {

class syncmem_bounds_test : public syncmem_refused_test {
protected:
    config_mods_t md_config() const override {
        return {{"RCACHE", "n"}};
    }
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
