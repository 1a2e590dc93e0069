// SPDX-License-Identifier: BSD-3-Clause
// Put, get, flush and pending on real RC QPs between two ifaces.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_hooks.h"
}

#include <cstring>

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    }
}

static uct_iov_t iov_of(void *buffer, size_t length, uct_mem_h memh)
{
    uct_iov_t iov;
    iov.buffer = buffer;
    iov.length = length;
    iov.memh   = memh;
    iov.stride = 0;
    iov.count  = 1;
    return iov;
}

struct pack_arg {
    const uint8_t *src;
    size_t        length;
};

static size_t pack_cb(void *dest, void *arg)
{
    pack_arg *a = static_cast<pack_arg*>(arg);
    memcpy(dest, a->src, a->length);
    return a->length;
}

static void unpack_cb(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

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

// Every size 0..max_short, at an unaligned source and destination.
TEST_F(syncmem_rma_test, put_short_every_size)
{
    size_t max = m_attr.cap.put.max_short;
    ASSERT_GT(max, 0u);
    buffer *src = alloc(max + 8, 0), *dst = alloc((max + 8) * 2, 0xee);
    uint8_t *s = src->data.data() + 3;
    fill_pattern(s, max, 1);

    size_t offset = 1;
    for (size_t len = 0; len <= max; ++len) {
        memset(dst->data.data(), 0xee, dst->data.size());
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(m_ep, s, len,
                                    (uintptr_t)dst->data.data() + offset,
                                    dst->rkey.rkey);
        })) << len;
        flush(m_ep);
        ASSERT_EQ(0, memcmp(dst->data.data() + offset, s, len)) << len;
        ASSERT_EQ(0xee, dst->data[offset + len]) << "wrote past " << len;
        offset = (offset + 1) % 8;
    }
}

TEST_F(syncmem_rma_test, put_bcopy_sizes)
{
    size_t max = m_attr.cap.put.max_bcopy;
    buffer *dst = alloc(max + 16, 0xee);
    std::vector<uint8_t> src(max + 16);

    for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(63), size_t(1000),
                       max - 1, max}) {
        fill_pattern(src.data() + 5, len, len);
        pack_arg arg = { src.data() + 5, len };
        ssize_t packed;
        wait_bound bound("resources for a put_bcopy");
        do {
            packed = uct_ep_put_bcopy(m_ep, pack_cb, &arg,
                                      (uintptr_t)dst->data.data() + 3,
                                      dst->rkey.rkey);
            if (packed == UCS_ERR_NO_RESOURCE) {
                progress();
            }
        } while ((packed == UCS_ERR_NO_RESOURCE) && bound());
        ASSERT_EQ((ssize_t)len, packed);
        flush(m_ep);
        ASSERT_EQ(0, memcmp(dst->data.data() + 3, src.data() + 5, len)) << len;
        ASSERT_EQ(0xee, dst->data[3 + len]) << "wrote past " << len;
    }
}

// Zero-copy put from several registered pieces, each an odd size.
TEST_F(syncmem_rma_test, put_zcopy_multi_sge)
{
    const size_t sizes[] = { 1, 4093, 17, 65536 + 3, 0, 250 };
    size_t niov = std::min<size_t>(m_attr.cap.put.max_iov, 6), total = 0;
    std::vector<uct_iov_t> iov;
    std::vector<uint8_t> expect;

    for (size_t i = 0; i < niov; ++i) {
        buffer *b = alloc(sizes[i] + 8, 0);
        fill_pattern(b->data.data() + 1, sizes[i], i + 10);
        iov.push_back(iov_of(b->data.data() + 1, sizes[i], b->memh));
        expect.insert(expect.end(), b->data.data() + 1,
                      b->data.data() + 1 + sizes[i]);
        total += sizes[i];
    }
    buffer *dst = alloc(total + 8, 0xee);

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = retry([&] {
        return uct_ep_put_zcopy(m_ep, iov.data(), iov.size(),
                                (uintptr_t)dst->data.data() + 5,
                                dst->rkey.rkey, &comp);
    });
    ASSERT_EQ(UCS_INPROGRESS, status);
    wait_bound bound("the put_zcopy's completion");
    while ((comp.count > 0) && bound()) {
        progress();
    }
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(0, memcmp(dst->data.data() + 5, expect.data(), total));
    EXPECT_EQ(0xee, dst->data[5 + total]);
}

TEST_F(syncmem_rma_test, put_zcopy_large)
{
    const size_t size = 4 * 1024 * 1024 + 1;
    buffer *src = alloc(size, 0), *dst = alloc(size, 0);
    fill_pattern(src->data.data(), size, 3);
    uct_iov_t iov = iov_of(src->data.data(), size, src->memh);

    ASSERT_EQ(UCS_INPROGRESS, retry([&] {
        return uct_ep_put_zcopy(m_ep, &iov, 1, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey, NULL);
    }));
    flush(m_ep);
    EXPECT_EQ(0, memcmp(dst->data.data(), src->data.data(), size));
}

TEST_F(syncmem_rma_test, get_bcopy_sizes)
{
    size_t max = m_attr.cap.get.max_bcopy;
    buffer *src = alloc(max + 16, 0);
    fill_pattern(src->data.data(), max + 16, 9);

    for (size_t len : {size_t(1), size_t(8), size_t(1023), max}) {
        std::vector<uint8_t> out(len + 1, 0xee);
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_get_bcopy(m_ep, unpack_cb, out.data(), len,
                                    (uintptr_t)src->data.data() + 7,
                                    src->rkey.rkey, &comp);
        })) << len;
        wait_bound bound("the get_zcopy's completion");
        while ((comp.count > 0) && bound()) {
            progress();
        }
        EXPECT_EQ(UCS_OK, comp.status);
        EXPECT_EQ(0, memcmp(out.data(), src->data.data() + 7, len)) << len;
        EXPECT_EQ(0xee, out[len]);
    }
}

TEST_F(syncmem_rma_test, get_zcopy_multi_sge)
{
    const size_t sizes[] = { 3, 8191, 1, 100000 };
    size_t niov = std::min<size_t>(m_attr.cap.get.max_iov, 4), total = 0;
    std::vector<uct_iov_t> iov;
    std::vector<buffer*> parts;

    for (size_t i = 0; i < niov; ++i) {
        buffer *b = alloc(sizes[i] + 2, 0xee);
        iov.push_back(iov_of(b->data.data() + 1, sizes[i], b->memh));
        parts.push_back(b);
        total += sizes[i];
    }
    buffer *src = alloc(total, 0);
    fill_pattern(src->data.data(), total, 4);

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ASSERT_EQ(UCS_INPROGRESS, retry([&] {
        return uct_ep_get_zcopy(m_ep, iov.data(), iov.size(),
                                (uintptr_t)src->data.data(), src->rkey.rkey,
                                &comp);
    }));
    wait_bound bound("the get's completion");
    while ((comp.count > 0) && bound()) {
        progress();
    }
    ASSERT_EQ(UCS_OK, comp.status);

    size_t offset = 0;
    for (size_t i = 0; i < niov; ++i) {
        EXPECT_EQ(0, memcmp(parts[i]->data.data() + 1,
                            src->data.data() + offset, sizes[i])) << i;
        EXPECT_EQ(0xee, parts[i]->data[0]);
        EXPECT_EQ(0xee, parts[i]->data[1 + sizes[i]]);
        offset += sizes[i];
    }
}

// Posting until the queue is full, then the pending queue: everything
// lands, in posting order.
TEST_F(syncmem_rma_test, pending_keeps_order)
{
    const unsigned count = 2000;
    buffer *dst = alloc(count * sizeof(uint32_t) + 8, 0);
    uint32_t *slots = reinterpret_cast<uint32_t*>(dst->data.data());

    struct req : uct_pending_req_t {
        uct_ep_h         ep;
        uint32_t         value;
        uint64_t         addr;
        uct_rkey_t       rkey;
    };
    std::vector<req> reqs(count);
    unsigned posted = 0, queued = 0;

    for (unsigned i = 0; i < count; ++i) {
        req &r = reqs[i];
        r.ep    = m_ep;
        r.value = i + 1;
        r.addr  = (uintptr_t)(slots + i);
        r.rkey  = dst->rkey.rkey;
        r.func  = [](uct_pending_req_t *self) -> ucs_status_t {
            req *q = static_cast<req*>(self);
            return uct_ep_put_short(q->ep, &q->value, sizeof(q->value),
                                    q->addr, q->rkey);
        };

        // UCS_ERR_BUSY from pending_add: room came back (a full ring may
        // grow), so the operation goes again, as UCP does
        ucs_status_t s;
        bool added = false;
        for (;;) {
            s = r.func(&r);
            if (s != UCS_ERR_NO_RESOURCE) {
                break;
            }
            s = uct_ep_pending_add(m_ep, &r, 0);
            if (s != UCS_ERR_BUSY) {
                added = true;
                break;
            }
        }
        ASSERT_EQ(UCS_OK, s);
        ++(added ? queued : posted);
    }
    EXPECT_GT(queued, 0u) << "the queue never filled; raise count";

    flush(m_ep);
    for (unsigned i = 0; i < count; ++i) {
        ASSERT_EQ(i + 1, slots[i]) << "slot " << i;
    }
}

// After a fence, a put cannot overtake an earlier get of the same word.
TEST_F(syncmem_rma_test, fence_orders_get_before_put)
{
    buffer *word = alloc(8, 0), *out = alloc(8, 0);
    uint64_t one = 1, two = 2;
    memcpy(word->data.data(), &one, 8);

    for (int i = 0; i < 50; ++i) {
        memcpy(word->data.data(), &one, 8);
        memset(out->data.data(), 0, 8);
        uct_iov_t iov = iov_of(out->data.data(), 8, out->memh);
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_get_zcopy(m_ep, &iov, 1, (uintptr_t)word->data.data(),
                                    word->rkey.rkey, NULL);
        }));
        ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(m_ep, &two, 8, (uintptr_t)word->data.data(),
                                    word->rkey.rkey);
        }));
        flush(m_ep);
        uint64_t got;
        memcpy(&got, out->data.data(), 8);
        ASSERT_EQ(1u, got) << "iteration " << i;
        memcpy(&got, word->data.data(), 8);
        ASSERT_EQ(2u, got);
    }
}

TEST_F(syncmem_rma_test, iface_flush_covers_every_endpoint)
{
    uct_iface_h third;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &third));
    uct_ep_h ep2 = connect(m_sender, third);
    ASSERT_NE(nullptr, ep2);

    const size_t size = 256 * 1024;
    buffer *src = alloc(size, 0), *d1 = alloc(size, 0), *d2 = alloc(size, 0);
    fill_pattern(src->data.data(), size, 5);
    uct_iov_t iov = iov_of(src->data.data(), size, src->memh);

    for (auto target : { std::make_pair(m_ep, d1), std::make_pair(ep2, d2) }) {
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_put_zcopy(target.first, &iov, 1,
                                    (uintptr_t)target.second->data.data(),
                                    target.second->rkey.rkey, NULL);
        }));
    }

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = retry([&] {
        return uct_iface_flush(m_sender, 0, &comp);
    });
    if (status == UCS_INPROGRESS) {
        wait_bound bound("the iface flush to complete");
        while ((comp.count > 0) && bound()) {
            progress();
        }
        status = comp.status;
    }
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(0, memcmp(d1->data.data(), src->data.data(), size));
    EXPECT_EQ(0, memcmp(d2->data.data(), src->data.data(), size));

    // and without a completion: poll until it says done
    wait_bound bound("the iface flush (no completion) to say done");
    while ((uct_iface_flush(m_sender, 0, NULL) == UCS_INPROGRESS) && bound()) {
        progress();
    }
}

TEST_F(syncmem_rma_test, flush_cancel_completes_everything)
{
    const size_t size = 512 * 1024;
    const int count = 16;
    buffer *src = alloc(size, 0), *dst = alloc(size, 0);
    uct_iov_t iov = iov_of(src->data.data(), size, src->memh);
    uct_completion_t comp = { [](uct_completion_t*) {}, count, UCS_OK };

    for (int i = 0; i < count; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, (uintptr_t)dst->data.data(),
                                    dst->rkey.rkey, &comp);
        }));
    }

    uct_completion_t fcomp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = uct_ep_flush(m_ep, UCT_FLUSH_FLAG_CANCEL, &fcomp);
    ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
            << ucs_status_string(status);
    wait_bound bound("the canceled puts and the canceling flush to complete");
    while (((comp.count > 0) || ((status == UCS_INPROGRESS) && (fcomp.count > 0))) && bound()) {
        progress();
    }
    // each op either finished before the cancel or was canceled
    EXPECT_TRUE((comp.status == UCS_OK) || (comp.status == UCS_ERR_CANCELED))
            << ucs_status_string(comp.status);
    EXPECT_TRUE(m_errors.empty()) << "cancel is not a peer failure";

    // the endpoint refuses new work, and can be destroyed
    uint64_t v = 1;
    EXPECT_EQ(UCS_ERR_CANCELED,
              uct_ep_put_short(m_ep, &v, 8, (uintptr_t)dst->data.data(),
                               dst->rkey.rkey));
}

// A put outside any registration fails that endpoint only.
TEST_F(syncmem_rma_test, remote_access_error_fails_one_endpoint)
{
    uct_iface_h third;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &third));
    uct_ep_h good = connect(m_sender, third);
    buffer *dst = alloc(64, 0);
    uint64_t v = 7;

    // far past the end of the registered range (cached registrations are
    // page aligned)
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &v, 8,
                                (uintptr_t)dst->data.data() + (1 << 20),
                                dst->rkey.rkey);
    }));
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = uct_ep_flush(m_ep, 0, &comp);
    if (status == UCS_INPROGRESS) {
        wait_bound bound("the flush to complete");
        while ((comp.count > 0) && bound()) {
            progress();
        }
        status = comp.status;
    }
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, status);
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(m_ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, m_errors[0].second);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_ep_put_short(m_ep, &v, 8, (uintptr_t)dst->data.data(),
                               dst->rkey.rkey));

    // the other endpoint of the same iface still works
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(good, &v, 8, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey);
    }));
    flush(good);
    EXPECT_EQ(0, memcmp(dst->data.data(), &v, 8));
    EXPECT_EQ(1u, m_errors.size());
}

TEST_F(syncmem_rma_test, connect_to_missing_iface_times_out)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"CM_TIMEOUT", "20ms"}, {"CM_RETRIES", "3"}}));
    uct_iface_attr_t attr;
    uct_iface_query(m_receiver, &attr);
    std::vector<uint8_t> dev(attr.device_addr_len), ifa(attr.iface_addr_len);
    uct_iface_get_device_address(m_receiver, (uct_device_addr_t*)dev.data());
    uct_iface_get_address(m_receiver, (uct_iface_addr_t*)ifa.data());
    ifa[0] ^= 0xff; // an iface id nobody has

    uct_ep_params_t params = {};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = iface;
    params.dev_addr   = (uct_device_addr_t*)dev.data();
    params.iface_addr = (uct_iface_addr_t*)ifa.data();
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, uct_ep_create(&params, &ep));
    m_eps.push_back(ep);

    // taken while it connects (kept), then the handshake times out: the
    // endpoint fails, and says so to the next operation
    uint64_t v = 1;
    EXPECT_EQ(UCS_OK, uct_ep_put_short(ep, &v, 8, 0, 0));
    ASSERT_TRUE(wait_for("the handshake to time out",
                         [&] { return !m_errors.empty(); }));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_put_short(ep, &v, 8, 0, 0));
}

TEST_F(syncmem_rma_test, garbled_rkey_is_refused)
{
    buffer *b = alloc(64, 0);
    std::vector<uint8_t> packed(64);
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, b->memh, packed.data()));

    uct_md_attr_t md_attr;
    uct_md_query(m_md, &md_attr);
    for (size_t i = 0; i < md_attr.rkey_packed_size; ++i) {
        std::vector<uint8_t> bad = packed;
        bad[i] ^= 0x10;
        uct_rkey_bundle_t rkey;
        EXPECT_NE(UCS_OK, uct_rkey_unpack(m_component, bad.data(), &rkey))
                << "byte " << i;
    }
    std::vector<uint8_t> zero(64, 0);
    uct_rkey_bundle_t rkey;
    EXPECT_NE(UCS_OK, uct_rkey_unpack(m_component, zero.data(), &rkey));
}

// Doorbell batching (TX_DB_BATCH): the first request after a progress is
// posted at once (a lone request waits for nothing); those after it wait in
// the endpoint until the batch is full or the next progress.
TEST_F(syncmem_rma_test, doorbell_batch_waits_for_progress_or_a_full_batch)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"TX_DB_BATCH", "8"}}));
    uct_ep_h ep = connect(iface, m_receiver);
    wait_bound bound("the connection (iface flush)");
    while ((uct_iface_flush(iface, 0, NULL) == UCS_INPROGRESS) && bound()) {
        progress(); // connected
    }
    buffer *dst = alloc(64 * 8, 0);
    volatile uint64_t *words = (volatile uint64_t*)dst->data.data();
    auto put = [&](uint64_t i) {
        uint64_t v = i + 1;
        ASSERT_EQ(UCS_OK, uct_ep_put_short(ep, &v, 8, (uintptr_t)&words[i],
                                           dst->rkey.rkey));
    };
    auto arrives = [&](uint64_t i) {
        wait_bound bound("word " + std::to_string(i) + " to be written");
        while ((words[i] != i + 1) && bound()) {
            usleep(100); // no progress: the device does it alone
        }
        EXPECT_EQ(i + 1, words[i]);
    };

    // the first goes at once, the 7 after it (of a batch of 8) wait
    for (uint64_t i = 0; i < 8; ++i) {
        put(i);
    }
    arrives(0);
    usleep(200 * 1000);
    for (int i = 1; i < 8; ++i) {
        EXPECT_EQ(0u, words[i]) << "posted before its doorbell";
    }
    progress(); // one call rings it; the device does the rest
    arrives(7);

    // the first at once, and a full batch after it with no progress at all
    for (uint64_t i = 8; i < 17; ++i) {
        put(i);
    }
    arrives(16);
    flush(ep);
    for (uint64_t i = 0; i < 17; ++i) {
        EXPECT_EQ(i + 1, words[i]) << i;
    }
}

// Many endpoints, each holding unsignalled requests (fewer than
// TX_MODERATION), can take every entry of the shared send CQ between them:
// then nothing would complete and no operation could post. Round-robin
// puts over more endpoints than TX_CQ_LEN / (TX_MODERATION - 1) must keep
// going (uct_syncmem_iface_cq_rescue), and every word holds its last value.
TEST_F(syncmem_rma_test, many_endpoints_never_starve_the_send_cq)
{
    const unsigned num_eps = 8, rounds = 200; // 8 x 63 > 128 entries
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"TX_CQ_LEN", "128"},
                                  {"TX_MODERATION", "64"}}));
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < num_eps; ++i) {
        eps.push_back(connect(iface, m_receiver));
        ASSERT_NE(nullptr, eps.back());
    }
    buffer *dst = alloc(num_eps * 8, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    for (uint64_t r = 1; r <= rounds; ++r) {
        for (unsigned i = 0; i < num_eps; ++i) {
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_put_short(eps[i], &r, sizeof(r),
                                        (uintptr_t)&words[i], dst->rkey.rkey);
            }, "send CQ entries (starved?)")) << "round " << r << " ep " << i;
        }
    }
    for (uct_ep_h ep : eps) {
        flush(ep);
    }
    for (unsigned i = 0; i < num_eps; ++i) {
        EXPECT_EQ(rounds, words[i]) << "ep " << i;
    } // the fixture destroys the endpoints and the iface
}

// Once no more send CQ entries are left than TX_MODERATION, every request
// asks for a completion (as rc_verbs does), so the entries that endpoints'
// unsignalled requests hold come back without the rescue's empty writes:
// round-robin puts over 4 endpoints until the CQ is full, no progress in
// between; then progress alone gives every entry back, and no endpoint
// posted anything more (the watchdog, which also posts empty writes, is
// kept away by a long RC_STALL_TIMEOUT).
TEST_F(syncmem_rma_test, a_nearly_full_send_cq_signals_every_request)
{
    const unsigned num_eps = 4;
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"TX_CQ_LEN", "128"},
                                  {"TX_MODERATION", "64"},
                                  {"RC_STALL_TIMEOUT", "600s"}}));
    const uct_syncmem_iface_t *siface = ucs_derived_of(iface,
                                                       uct_syncmem_iface_t);
    std::vector<uct_ep_h> eps;
    std::vector<uint16_t> sn;
    for (unsigned i = 0; i < num_eps; ++i) {
        eps.push_back(connect(iface, m_receiver));
        ASSERT_NE(nullptr, eps.back());
    }
    buffer *dst = alloc(num_eps * 8, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    for (uct_ep_h ep : eps) {
        flush(ep);
    }
    const int full = siface->cq_available;
    for (uct_ep_h ep : eps) {
        sn.push_back(ucs_derived_of(ep, uct_syncmem_ep_t)->tx.sn);
    }

    unsigned posted = 0, signalled_late = 0;
    for (uint64_t v = 1;; ++v) {
        unsigned i = posted % num_eps;
        const uct_syncmem_ep_t *sep = ucs_derived_of(eps[i], uct_syncmem_ep_t);
        int before = siface->cq_available;
        ucs_status_t status = uct_ep_put_short(eps[i], &v, sizeof(v),
                                               (uintptr_t)&words[i],
                                               dst->rkey.rkey);
        if (status == UCS_ERR_NO_RESOURCE) {
            break;
        }
        ASSERT_EQ(UCS_OK, status) << "put " << posted;
        ++posted;
        if (before <= (int)siface->config.tx_signal_every) {
            EXPECT_FALSE(uct_syncmem_ep_last_unsignaled(siface, sep))
                    << "put " << posted << " with " << before
                    << " CQ entries left was not signalled";
            ++signalled_late;
        }
        ASSERT_LT(posted, 4u * (unsigned)full) << "the CQ never filled";
    }
    EXPECT_EQ(0, siface->cq_available) << "refused with CQ entries left";
    EXPECT_GE(signalled_late, siface->config.tx_signal_every);

    EXPECT_TRUE(wait_for("every send CQ entry to come back", [&] {
        return siface->cq_available == full;
    })) << siface->cq_available << " of " << full;
    for (unsigned i = 0; i < num_eps; ++i) {
        EXPECT_EQ((uint16_t)(sn[i] + (posted + num_eps - 1 - i) / num_eps),
                  ucs_derived_of(eps[i], uct_syncmem_ep_t)->tx.sn)
                << "ep " << i << " posted more than its puts";
    }
    for (uct_ep_h ep : eps) {
        flush(ep);
    }
    for (unsigned i = 0; i < num_eps; ++i) {
        EXPECT_NE(0u, words[i]) << "ep " << i;
    }
}

// A flush after an operation that took its ring's last room, unsignalled,
// grows the ring for its empty write: it answers UCS_INPROGRESS, not
// UCS_ERR_NO_RESOURCE (a ring of 4 entries holds 2 requests; no progress
// in between, so neither has completed). Without the doorbell, which grows
// a full ring as it keeps a request. An operation that finds the ring full
// grows it too, and is taken: never refused while the send queue has room.
TEST_F(syncmem_rma_test, flush_grows_a_full_ring_for_its_empty_write)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"TX_RING_MIN", "2"},
                                  {"TX_MODERATION", "64"},
                                  {"TX_DB_BATCH", "1"}}));
    uct_ep_h ep = connect(iface, m_receiver);
    ASSERT_NE(nullptr, ep);
    buffer *dst = alloc(16, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    uint64_t values[2] = { 0x1111, 0x2222 };

    // the first is signalled (the first after idle), the second not
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(ep, &values[0], 8, (uintptr_t)&words[0],
                                dst->rkey.rkey);
    }));
    ASSERT_EQ(UCS_OK, uct_ep_put_short(ep, &values[1], 8,
                                       (uintptr_t)&words[1], dst->rkey.rkey));
    const uct_syncmem_ep_t *sep = ucs_derived_of(ep, uct_syncmem_ep_t);
    ASSERT_EQ(0, sep->tx.available) << "the ring is not full";
    unsigned entries = sep->replay.mask + 1u;

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(ep, 0, &comp));
    EXPECT_EQ(2 * entries, sep->replay.mask + 1u) << "the flush grew no ring";
    ASSERT_TRUE(wait_for("the flush to complete",
                         [&] { return comp.count == 0; }));
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(values[0], words[0]);
    EXPECT_EQ(values[1], words[1]);

    // full again: the next operation grows the ring and is taken
    uint64_t more[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    for (unsigned i = 0; i < 8; ++i) {
        EXPECT_EQ(UCS_OK, uct_ep_put_short(ep, &more[i], 8,
                                           (uintptr_t)&words[i % 2],
                                           dst->rkey.rkey)) << "put " << i;
    }
    EXPECT_LT(2 * entries, sep->replay.mask + 1u);
    flush(ep);
    EXPECT_EQ(more[6], words[0]);
    EXPECT_EQ(more[7], words[1]);
}

// TX_QUEUE_LEN is the length of the QP's send queue as created, the drain
// included: an endpoint has all but one of it outstanding, and the device
// does not round it up to twice its length (Soft-RoCE made 511 of 256 plus
// the drain; the default 255 is 255 there, as 63 is 63).
TEST_F(syncmem_rma_test, send_queue_is_tx_queue_len_with_the_drain)
{
    for (unsigned len : {255u, 63u}) {
        uct_iface_h iface;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                     {{"TX_QUEUE_LEN", std::to_string(len)},
                                      {"RECONNECT", "n"}}));
        uct_ep_h ep = connect(iface, m_receiver);
        ASSERT_NE(nullptr, ep);
        buffer *dst = alloc(len * 8, 0);
        uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());

        // no progress after the first: nothing comes back
        uint64_t n = 0;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(ep, &n, 8, (uintptr_t)&words[0],
                                    dst->rkey.rkey);
        }));
        ucs_status_t status;
        for (n = 1; n <= len; ++n) {
            status = uct_ep_put_short(ep, &n, 8, (uintptr_t)&words[n],
                                      dst->rkey.rkey);
            if (status != UCS_OK) {
                break;
            }
        }
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, status) << "TX_QUEUE_LEN " << len;
        EXPECT_EQ(len - 1, n) << "requests outstanding, TX_QUEUE_LEN " << len;

        struct ibv_qp_attr attr;
        struct ibv_qp_init_attr init;
        ASSERT_EQ(0, ibv_query_qp(ucs_derived_of(ep, uct_syncmem_ep_t)->qp,
                                  &attr, IBV_QP_CAP, &init));
        EXPECT_GE(attr.cap.max_send_wr, len);
        EXPECT_LT(attr.cap.max_send_wr, 2 * len - 1)
                << "the device doubled the send queue";

        flush(ep);
        for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(i, words[i]) << "put " << i << ", TX_QUEUE_LEN " << len;
        }
    }
}

// The handshake messages of every connection between two hosts go through
// one address handle on each side, however many connect: none made or held
// per connection.
TEST_F(syncmem_rma_test, connections_to_one_host_share_an_address_handle)
{
    const unsigned num_eps = 8;
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
    EXPECT_EQ(0u, uct_syncmem_iface_num_ahs(iface));
    buffer *dst = alloc(num_eps * 8, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    for (uint64_t i = 0; i < num_eps; ++i) {
        uct_ep_h ep = connect(iface, m_receiver);
        ASSERT_NE(nullptr, ep);
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(ep, &i, sizeof(i), (uintptr_t)&words[i],
                                    dst->rkey.rkey);
        }));
        flush(ep);
        EXPECT_EQ(i, words[i]) << "ep " << i;
    }
    EXPECT_EQ(1u, uct_syncmem_iface_num_ahs(iface));
    EXPECT_EQ(1u, uct_syncmem_iface_num_ahs(m_receiver));
}

// More endpoints from one sender at once than it may hold half-open at the
// target (CM_MAX_HALF_OPEN / 2): the REQs beyond wait there for room, made
// as the initiator's RTUs get the half-open ones probed, and are answered
// without being sent again. (CM_TIMEOUT is past the test's bound, and the
// target has no keepalive timer: a REQ dropped instead, or an RTU not
// acted on, would leave an endpoint unconnected.)
TEST_F(syncmem_rma_test, connect_storm_waits_at_the_target_for_room)
{
    const unsigned num_eps = 12; // 2 half-open at once, 10 kept for room
    uct_iface_h from, to;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &from,
                                 {{"CM_TIMEOUT", "1000s"}}));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &to,
                                 {{"CM_MAX_HALF_OPEN", "4"},
                                  {"KEEPALIVE_INTERVAL", "inf"}}));
    buffer *dst = alloc(num_eps * 8, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    std::vector<uct_ep_h> eps;
    for (unsigned i = 0; i < num_eps; ++i) {
        eps.push_back(connect(from, to, false)); // all at once
        ASSERT_NE(nullptr, eps.back());
    }
    for (uint64_t i = 0; i < num_eps; ++i) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(eps[i], &i, sizeof(i),
                                    (uintptr_t)&words[i], dst->rkey.rkey);
        }, "the connection (its REQ dropped?)")) << "ep " << i;
    }
    for (unsigned i = 0; i < num_eps; ++i) {
        flush(eps[i]);
        EXPECT_EQ(i, words[i]) << "ep " << i;
    }
    EXPECT_EQ(num_eps, uct_syncmem_iface_num_passive(to));
}
