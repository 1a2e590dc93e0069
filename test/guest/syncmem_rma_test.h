/* SPDX-License-Identifier: BSD-3-Clause */
// Fixture for one-sided tests: a sender iface, a receiver iface, an
// endpoint between them, and registered buffers with unpacked rkeys.
#ifndef SYNCMEM_TEST_RMA_H_
#define SYNCMEM_TEST_RMA_H_

#include "syncmem_test.h"
#include "uct_syncmem/compat.h"

#include <uct/api/v2/uct_v2.h>

#include <cstring>

// What a word holds after atomic op (uct_atomic_op_t, or CSWAP) with value
// (and compare, for CSWAP) on old.
template <typename T> T amo_reference(int op, T old, T value, T compare)
{
    switch (op) {
    case UCT_ATOMIC_OP_ADD:  return old + value;
    case UCT_ATOMIC_OP_AND:  return old & value;
    case UCT_ATOMIC_OP_OR:   return old | value;
    case UCT_ATOMIC_OP_XOR:  return old ^ value;
    case UCT_ATOMIC_OP_SWAP: return value;
    default:                 return (old == compare) ? value : old;
    }
}

class syncmem_rma_test : public syncmem_test {
protected:
    struct buffer {
        std::vector<uint8_t> data;
        uct_mem_h            memh = nullptr;
        uct_rkey_bundle_t    rkey = {};
    };

    // The sender iface's settings: a suite may change them.
    virtual config_mods_t sender_mods() const {
        return {};
    }

    void SetUp() override {
        syncmem_test::SetUp();
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender,
                                     sender_mods()));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_receiver));
        ASSERT_EQ(UCS_OK, uct_iface_query(m_sender, &m_attr));
        m_ep = connect(m_sender, m_receiver);
        ASSERT_NE(nullptr, m_ep);
    }

    void TearDown() override {
        for (auto &b : m_buffers) {
            if (b->rkey.rkey != 0) {
                uct_rkey_release(m_component, &b->rkey);
            }
            if (b->memh != nullptr) {
                uct_md_mem_dereg(m_md, b->memh);
            }
        }
        syncmem_test::TearDown();
    }

    // An endpoint, connected unless !wait (syncmem_test::connect).
    uct_ep_h connect(uct_iface_h from, uct_iface_h to, bool wait = true) {
        uct_ep_h ep;
        return (syncmem_test::connect(from, to, &ep, wait) == UCS_OK) ? ep :
                                                                        nullptr;
    }

    buffer *alloc(size_t size, uint8_t fill,
                  unsigned access = UCT_MD_MEM_ACCESS_ALL) {
        m_buffers.emplace_back(new buffer);
        buffer *b = m_buffers.back().get();
        b->data.assign(size + 64, fill);
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, b->data.data(), b->data.size(),
                                         access, &b->memh));
        std::vector<uint8_t> packed(64);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, b->memh, packed.data()));
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &b->rkey));
        return b;
    }

    void progress() {
        uct_worker_progress(m_worker);
    }

    // mkey_pack with flags (UCT_MD_MKEY_PACK_FLAG_INVALIDATE: a key of the
    // handle's own), unpacked; the caller releases it.
    uct_rkey_bundle_t pack_rkey(uct_mem_h memh, unsigned flags) {
        uct_md_mkey_pack_params_t params = {};
        params.field_mask = UCT_MD_MKEY_PACK_FIELD_FLAGS;
        params.flags      = flags;
        std::vector<uint8_t> packed(64);
        uct_rkey_bundle_t rkey = {};
        EXPECT_EQ(UCS_OK, uct_syncmem_mkey_pack_v2(m_md, memh, &params,
                                              packed.data()));
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &rkey));
        return rkey;
    }

    // mem_dereg with FLAG_INVALIDATE: how often its completion was called,
    // once it was (bounded) and after rounds of progress more; 0 on failure.
    int dereg_invalidate(uct_mem_h memh, unsigned rounds = 0) {
        struct counted {
            uct_completion_t comp;
            int              calls;
        } c = {{[](uct_completion_t *comp) {
                   ucs_container_of(comp, counted, comp)->calls++;
               }, 1, UCS_OK}, 0};
        uct_md_mem_dereg_params_t params = {};
        params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH |
                            UCT_MD_MEM_DEREG_FIELD_FLAGS |
                            UCT_MD_MEM_DEREG_FIELD_COMPLETION;
        params.memh       = memh;
        params.flags      = UCT_MD_MEM_DEREG_FLAG_INVALIDATE;
        params.comp       = &c.comp;
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg_v2(m_md, &params));
        EXPECT_TRUE(wait_for("the invalidation's completion", [&] {
            progress();
            return c.calls > 0;
        }));
        for (unsigned i = 0; i < rounds; ++i) {
            progress();
        }
        EXPECT_EQ(UCS_OK, c.comp.status);
        return c.calls;
    }

    // Retries op while it answers NO_RESOURCE, progressing in between;
    // TIMED_OUT (and a failure naming what) after the hang guard's bound.
    template <typename F>
    ucs_status_t retry(F op, const char *what = "resources to post on") {
        wait_bound bound(what);
        ucs_status_t status;
        while ((status = op()) == UCS_ERR_NO_RESOURCE) {
            if (!bound()) {
                return UCS_ERR_TIMED_OUT;
            }
            progress();
        }
        return status;
    }

    void flush(uct_ep_h ep) {
        uct_completion_t comp = { nullptr, 1, UCS_OK };
        comp.func = [](uct_completion_t *c) {};
        ucs_status_t status = retry([&] { return uct_ep_flush(ep, 0, &comp); },
                                    "resources to flush an endpoint");
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait_for("an endpoint flush to complete",
                                 [&] { return comp.count == 0; }));
            status = comp.status;
        }
        ASSERT_EQ(UCS_OK, status);
    }

    uct_iface_h                          m_sender, m_receiver;
    uct_iface_attr_t                     m_attr;
    uct_ep_h                             m_ep;
    std::vector<std::unique_ptr<buffer>> m_buffers;
};

#endif
