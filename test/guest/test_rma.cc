// Put, get, flush and pending on real RC QPs between two ifaces.
#include "syncmem_test.h"

#include <cstring>

class syncmem_rma_test : public syncmem_test {
protected:
    struct buffer {
        std::vector<uint8_t> data;
        uct_mem_h            memh = nullptr;
        uct_rkey_bundle_t    rkey = {};
    };

    void SetUp() override {
        syncmem_test::SetUp();
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender));
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
        for (uct_ep_h ep : m_eps) {
            uct_ep_destroy(ep);
        }
        syncmem_test::TearDown();
    }

    uct_ep_h connect(uct_iface_h from, uct_iface_h to) {
        uct_iface_attr_t attr;
        uct_iface_query(to, &attr);
        std::vector<uint8_t> dev(attr.device_addr_len), ifa(attr.iface_addr_len);
        uct_iface_get_device_address(to, (uct_device_addr_t*)dev.data());
        uct_iface_get_address(to, (uct_iface_addr_t*)ifa.data());

        uct_ep_params_t params = {};
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = from;
        params.dev_addr   = (uct_device_addr_t*)dev.data();
        params.iface_addr = (uct_iface_addr_t*)ifa.data();
        uct_ep_h ep;
        if (uct_ep_create(&params, &ep) != UCS_OK) {
            return nullptr;
        }
        m_eps.push_back(ep);
        return ep;
    }

    buffer *alloc(size_t size, uint8_t fill) {
        m_buffers.emplace_back(new buffer);
        buffer *b = m_buffers.back().get();
        b->data.assign(size + 64, fill);
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, b->data.data(), b->data.size(),
                                         UCT_MD_MEM_ACCESS_ALL, &b->memh));
        std::vector<uint8_t> packed(64);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, b->memh, packed.data()));
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &b->rkey));
        return b;
    }

    void progress() {
        uct_worker_progress(m_worker);
    }

    // Retries op while it answers NO_RESOURCE, progressing in between.
    template <typename F> ucs_status_t retry(F op) {
        ucs_status_t status;
        while ((status = op()) == UCS_ERR_NO_RESOURCE) {
            progress();
        }
        return status;
    }

    void flush(uct_ep_h ep) {
        uct_completion_t comp = { nullptr, 1, UCS_OK };
        comp.func = [](uct_completion_t *c) {};
        ucs_status_t status = retry([&] { return uct_ep_flush(ep, 0, &comp); });
        if (status == UCS_INPROGRESS) {
            while (comp.count > 0) {
                progress();
            }
            status = comp.status;
        }
        ASSERT_EQ(UCS_OK, status);
    }

    uct_iface_h                          m_sender, m_receiver;
    uct_iface_attr_t                     m_attr;
    uct_ep_h                             m_ep;
    std::vector<uct_ep_h>                m_eps;
    std::vector<std::unique_ptr<buffer>> m_buffers;
};

TEST_F(syncmem_rma_test, put_short_lands)
{
    buffer *dst = alloc(64, 0);
    uint64_t value = 0x1122334455667788ull;

    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &value, sizeof(value),
                                (uintptr_t)dst->data.data(), dst->rkey.rkey);
    }));
    flush(m_ep);
    EXPECT_EQ(0, memcmp(dst->data.data(), &value, sizeof(value)));
}
