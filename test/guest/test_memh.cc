// SPDX-License-Identifier: BSD-3-Clause
// Remote keys packed for invalidation (syncmem_memh.c), as UCP packs them
// for a rendezvous on an endpoint with peer error handling: such a key is
// its memory handle's alone, and mem_dereg with FLAG_INVALIDATE kills it
// at once, calling the completion once, while every other handle on the
// same (cached) registration keeps working. Run for each kind of key: a
// memory window over the cached MR, a registration of its own (MW=n), and
// an uncached registration's own key (RCACHE=n).
#include "syncmem_refused_test.h"

extern "C" {
#include <uct_syncmem/syncmem_md.h>
}

#include <set>

namespace {

class syncmem_memh_test : public syncmem_refused_test,
                          public ::testing::WithParamInterface<std::string> {
protected:
    config_mods_t md_config() const override {
        if (GetParam() == "window") {
            return {{"MW", "y"}};   // fails to open without windows
        } else if (GetParam() == "own_mr") {
            return {{"MW", "n"}};
        }
        return {{"RCACHE", "n"}};
    }

    void SetUp() override {
        m_register = false;
        syncmem_refused_test::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        uct_syncmem_md_t *md = ucs_derived_of(m_md, uct_syncmem_md_t);
        EXPECT_EQ(GetParam() == "window", md->mw != nullptr);
        EXPECT_EQ(GetParam() == "uncached", md->rcache == nullptr);

        uct_md_attr_t attr;
        ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
        EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_INVALIDATE);

        // the sibling: the same memory, its key packed for invalidation too;
        // the refused-access checks write through it to see the iface serve
        m_sibling = reg();
        ASSERT_NE(nullptr, m_sibling);
        m_memh = m_sibling;
        m_rkey = pack(m_sibling, UCT_SYNCMEM_PACK_INVALIDATE);
    }

    uct_mem_h reg() {
        uct_mem_h memh = nullptr;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, m_region, m_len,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        return memh;
    }

    uct_rkey_bundle_t pack(uct_mem_h memh, unsigned flags) {
        m_rkeys.push_back(pack_rkey(memh, flags));
        return m_rkeys.back();
    }

    // The completion is called once, by the time the call returns or at the
    // latest after progress.
    void dereg_invalidate(uct_mem_h memh) {
        EXPECT_EQ(1, syncmem_refused_test::dereg_invalidate(memh, 100));
    }

    // A put and a get of 8 bytes at offset through rkey, on m_ep.
    void expect_served(uct_rkey_t rkey, size_t offset, uint64_t value) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(m_ep, &value, 8, at(offset), rkey);
        }));
        flush(m_ep);
        EXPECT_EQ(0, memcmp(m_region + offset, &value, 8));

        uint64_t got = 0;
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        EXPECT_EQ(UCS_OK, wait(retry([&] {
            return uct_ep_get_bcopy(m_ep, [](void *arg, const void *data,
                                             size_t len) {
                memcpy(arg, data, len);
            }, &got, 8, at(offset), rkey, &comp);
        }), &comp));
        EXPECT_EQ(value, got);
        memset(m_region + offset, 0x5a, 8);
    }

    void TearDown() override {
        for (auto &rkey : m_rkeys) {
            uct_rkey_release(m_component, &rkey);
        }
        m_rkey.rkey = 0;  // one of m_rkeys
        syncmem_refused_test::TearDown();
    }

    uct_mem_h                      m_sibling = nullptr;
    std::vector<uct_rkey_bundle_t> m_rkeys;
};

} // namespace

// Each handle on the same memory packs a key of its own for invalidation;
// without the flag, the registration's. Revoking one kills that key for
// every kind of access, and no other.
TEST_P(syncmem_memh_test, revoked_key_refuses_every_access_and_others_work)
{
    uct_mem_h victim         = reg();
    ASSERT_NE(nullptr, victim);
    uct_rkey_t revocable     = pack(victim, UCT_SYNCMEM_PACK_INVALIDATE)
                                       .rkey;
    uct_rkey_t again         = pack(victim, UCT_SYNCMEM_PACK_INVALIDATE)
                                       .rkey;
    uct_rkey_t plain         = pack(m_sibling, 0).rkey;

    EXPECT_EQ(revocable, again) << "packed twice: the same key";
    EXPECT_NE(revocable, m_rkey.rkey) << "the sibling's key is its own";
    if (GetParam() != "uncached") {
        EXPECT_NE(revocable, plain) << "not the cached registration's key";
    }
    expect_served(revocable, 0, 0x1111111111111111ul);
    expect_served(plain, 8, 0x2222222222222222ul);

    ASSERT_NO_FATAL_FAILURE(dereg_invalidate(victim));
    expect_all_refused(at(0), revocable);
    expect_all_refused(at(m_len - 8), revocable);

    // the sibling's keys, with and without the flag, still work
    expect_served(m_rkey.rkey, 16, 0x3333333333333333ul);
    expect_served(plain, 24, 0x4444444444444444ul);
}

// Operations in flight through a key while it is revoked: each completes or
// fails, and nothing lands after the invalidation's completion was called.
TEST_P(syncmem_memh_test, operations_in_flight_while_revoked)
{
    uct_mem_h victim = reg();
    ASSERT_NE(nullptr, victim);
    uct_rkey_t rkey  = pack(victim, UCT_SYNCMEM_PACK_INVALIDATE).rkey;
    uct_ep_h ep      = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, ep);
    size_t errors    = m_errors.size();

    uint64_t v = 0xabababababababab;
    int posted = 0;
    for (size_t off = 0; off + 8 <= m_len; off += 8) {
        ucs_status_t status = uct_ep_put_short(ep, &v, 8, at(off), rkey);
        if (status != UCS_OK) {
            break;
        }
        ++posted;
    }
    ASSERT_GT(posted, 0);
    ASSERT_NO_FATAL_FAILURE(dereg_invalidate(victim));
    std::vector<uint8_t> after = m_mem;

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status   = wait(retry([&] {
        return uct_ep_flush(ep, 0, &comp);
    }), &comp);
    EXPECT_TRUE(after == m_mem) << "a put landed after the invalidation";
    if (status != UCS_OK) {
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, status);
        EXPECT_EQ(errors + 1, m_errors.size());
    }
    std::cout << "[          ] " << posted << " puts in flight: flush "
              << ucs_status_string(status) << std::endl;
    expect_served(m_rkey.rkey, 0, 0x5555555555555555ul);
}

// Many handles packed and revoked one after another (UCP does it for each
// rendezvous): each key works while its handle lives and no revoked key
// comes back to life while windows are reused, past the 256 binds after
// which a window's key byte would wrap.
TEST_P(syncmem_memh_test, many_keys_revoked_in_turn)
{
    const int rounds = 140;
    std::vector<uct_rkey_t> revoked;

    for (int i = 0; i < rounds; ++i) {
        uct_mem_h memh = reg();
        ASSERT_NE(nullptr, memh);
        uct_rkey_t rkey = pack(memh, UCT_SYNCMEM_PACK_INVALIDATE).rkey;
        uint64_t v      = 0x100000000ul + i;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(m_ep, &v, 8, at(0), rkey);
        }));
        flush(m_ep);
        ASSERT_EQ(0, memcmp(m_region, &v, 8)) << "round " << i;
        ASSERT_NO_FATAL_FAILURE(dereg_invalidate(memh));
        revoked.push_back(rkey);
    }
    memset(m_region, 0x5a, 8);

    std::set<uct_rkey_t> distinct(revoked.begin(), revoked.end());
    EXPECT_EQ(revoked.size(), distinct.size()) << "a key was given twice";
    // the first, those around the 127th round (a window's 254th bind), the
    // last
    for (int i : {0, 126, 127, 128, rounds - 1}) {
        SCOPED_TRACE("round " + std::to_string(i));
        expect_refused("put_short", [](uct_ep_h ep, uint64_t a, uct_rkey_t k,
                                       uct_completion_t*) {
            uint64_t v = 0xdeadbeefdeadbeeful;
            return uct_ep_put_short(ep, &v, 8, a, k);
        }, at(0), revoked[i]);
    }
}

INSTANTIATE_TEST_SUITE_P(keys, syncmem_memh_test,
                         ::testing::Values("window", "own_mr", "uncached"));
