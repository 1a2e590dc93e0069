// SPDX-License-Identifier: BSD-3-Clause
// Active messages over RC send/receive and the shared receive queue.
#include "syncmem_test.h"

#include <cstring>
#include <deque>

namespace {

struct received {
    uint64_t             header;
    std::vector<uint8_t> data;
};

struct am_sink {
    std::vector<received> msgs;
    bool                  keep = false;      // keep descriptors
    std::deque<void*>     kept;
    size_t                headroom = 0;
    uintptr_t             align = 0;
    bool                  misaligned = false;

    static ucs_status_t cb(void *arg, void *data, size_t length,
                           unsigned flags) {
        am_sink *sink = static_cast<am_sink*>(arg);
        received r;
        memcpy(&r.header, data, std::min(length, sizeof(uint64_t)));
        r.data.assign((uint8_t*)data, (uint8_t*)data + length);
        sink->msgs.push_back(r);
        if (sink->align && ((uintptr_t)data % sink->align)) {
            sink->misaligned = true;
        }
        if (sink->keep && (flags & UCT_CB_PARAM_FLAG_DESC)) {
            // the headroom in front of the data is ours to write
            memset((uint8_t*)data - sink->headroom, 0x5a, sink->headroom);
            sink->kept.push_back((uint8_t*)data - sink->headroom);
            return UCS_INPROGRESS;
        }
        return UCS_OK;
    }
};

} // namespace

class syncmem_am_test : public syncmem_test {
protected:
    static const uint8_t AM_ID = 7;

    void SetUp() override {
        syncmem_test::SetUp();
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender));
        uct_iface_params_t params = {};
        params.field_mask  = UCT_IFACE_PARAM_FIELD_RX_HEADROOM;
        params.rx_headroom = m_sink.headroom = 48;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_receiver, {},
                                     params));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_receiver, AM_ID,
                                                   am_sink::cb, &m_sink, 0));
        ASSERT_EQ(UCS_OK, uct_iface_query(m_sender, &m_attr));
        ASSERT_EQ(UCS_OK, connect(m_sender, m_receiver, &m_ep));
    }

    void TearDown() override {
        for (void *desc : m_sink.kept) {
            uct_iface_release_desc(desc);
        }
        syncmem_test::TearDown();
    }

    void wait_for(size_t count) {
        wait_bound bound("active messages to arrive (" + std::to_string(count) + ")");
        while ((m_sink.msgs.size() < count) && bound()) {
            uct_worker_progress(m_worker);
        }
    }

    template <typename F> ucs_status_t retry(F op) {
        ucs_status_t status;
        wait_bound bound("resources to post an active message");
        while (((status = op()) == UCS_ERR_NO_RESOURCE) && bound()) {
            uct_worker_progress(m_worker);
        }
        return status;
    }

    am_sink          m_sink;
    uct_iface_h      m_sender, m_receiver;
    uct_iface_attr_t m_attr;
    uct_ep_h         m_ep;
};

static void pattern(std::vector<uint8_t> &v, unsigned seed)
{
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = (uint8_t)(seed + i * 13);
    }
}

TEST_F(syncmem_am_test, short_every_size_in_order)
{
    size_t max = m_attr.cap.am.max_short - sizeof(uint64_t);
    for (size_t len = 0; len <= max; ++len) {
        std::vector<uint8_t> payload(len);
        pattern(payload, len);
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(m_ep, AM_ID, len, payload.data(), len);
        }));
    }
    wait_for(max + 1);
    for (size_t len = 0; len <= max; ++len) {
        received &r = m_sink.msgs[len];
        ASSERT_EQ(len, r.header) << "out of order";
        ASSERT_EQ(len + 8, r.data.size());
        std::vector<uint8_t> payload(len);
        pattern(payload, len);
        ASSERT_TRUE(std::equal(payload.begin(), payload.end(),
                               r.data.begin() + 8)) << len;
    }
}

TEST_F(syncmem_am_test, short_iov)
{
    uint64_t hdr = 42;
    std::vector<uint8_t> a(5), b(11);
    pattern(a, 1);
    pattern(b, 2);
    uct_iov_t iov[3] = {{&hdr, 8, NULL, 0, 1}, {a.data(), a.size(), NULL, 0, 1},
                        {b.data(), b.size(), NULL, 0, 1}};
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_am_short_iov(m_ep, AM_ID, iov, 3);
    }));
    wait_for(1);
    ASSERT_EQ(24u, m_sink.msgs[0].data.size());
    EXPECT_EQ(42u, m_sink.msgs[0].header);
    EXPECT_EQ(0, memcmp(m_sink.msgs[0].data.data() + 8, a.data(), 5));
    EXPECT_EQ(0, memcmp(m_sink.msgs[0].data.data() + 13, b.data(), 11));
}

static size_t pack_vec(void *dest, void *arg)
{
    auto *v = static_cast<std::vector<uint8_t>*>(arg);
    if (!v->empty()) { /* an empty vector may have no data */
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

TEST_F(syncmem_am_test, bcopy_sizes)
{
    const size_t sizes[] = { 0, 1, 8, 1000, 4095, m_attr.cap.am.max_bcopy };
    for (size_t len : sizes) {
        std::vector<uint8_t> v(len);
        pattern(v, len);
        ssize_t packed;
        wait_bound bound("resources for an am_bcopy");
        while (((packed = uct_ep_am_bcopy(m_ep, AM_ID, pack_vec, &v, 0)) ==
               UCS_ERR_NO_RESOURCE) && bound()) {
            uct_worker_progress(m_worker);
        }
        ASSERT_EQ((ssize_t)len, packed);
    }
    wait_for(6);
    for (size_t i = 0; i < 6; ++i) {
        std::vector<uint8_t> v(sizes[i]);
        pattern(v, sizes[i]);
        EXPECT_EQ(v, m_sink.msgs[i].data) << sizes[i];
    }
}

TEST_F(syncmem_am_test, zcopy_header_and_iov)
{
    std::vector<uint8_t> header(16), p1(3000), p2(999);
    pattern(header, 3);
    pattern(p1, 4);
    pattern(p2, 5);
    uct_mem_h m1, m2;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, p1.data(), p1.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &m1));
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, p2.data(), p2.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &m2));
    uct_iov_t iov[2] = {{p1.data(), p1.size(), m1, 0, 1},
                        {p2.data(), p2.size(), m2, 0, 1}};
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

    ASSERT_EQ(UCS_INPROGRESS, retry([&] {
        return uct_ep_am_zcopy(m_ep, AM_ID, header.data(), header.size(), iov,
                               2, 0, &comp);
    }));
    wait_for(1);
    wait_bound bound("the am_zcopy's completion");
    while ((comp.count > 0) && bound()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_EQ(UCS_OK, comp.status);

    std::vector<uint8_t> expect(header);
    expect.insert(expect.end(), p1.begin(), p1.end());
    expect.insert(expect.end(), p2.begin(), p2.end());
    EXPECT_EQ(expect, m_sink.msgs[0].data);
    uct_md_mem_dereg(m_md, m1);
    uct_md_mem_dereg(m_md, m2);
}

// The handler keeps descriptors (and writes into the headroom it asked
// for); they come back with uct_iface_release_desc, buffers are reused.
TEST_F(syncmem_am_test, handler_keeps_descriptors)
{
    m_sink.keep = true;
    for (uint64_t i = 0; i < 300; ++i) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(m_ep, AM_ID, i, NULL, 0);
        }));
        if (m_sink.kept.size() > 50) {
            uct_iface_release_desc(m_sink.kept.front());
            m_sink.kept.pop_front();
        }
    }
    wait_for(300);
    for (uint64_t i = 0; i < 300; ++i) {
        ASSERT_EQ(i, m_sink.msgs[i].header);
    }
}

// A receiver that does not progress: its buffers run out, senders wait in
// hardware (RNR), and once it progresses every message arrives, in order.
TEST_F(syncmem_am_test, slow_receiver_loses_nothing)
{
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_iface_h slow, sender;
    uct_ep_h ep;
    am_sink sink;
    ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                               &async));
    ASSERT_EQ(UCS_OK, uct_worker_create(async, UCS_THREAD_MODE_SINGLE,
                                        &worker));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &slow,
                                 {{"RX_QUEUE_LEN", "16"}}, {}, worker));
    uct_iface_set_am_handler(slow, AM_ID, am_sink::cb, &sink, 0);
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &sender,
                                 {{"TX_QUEUE_LEN", "64"}}));
    ASSERT_EQ(UCS_OK, connect(sender, slow, &ep));

    const uint64_t count = 500;
    uint64_t sent = 0;
    int stalled = 0;
    wait_bound bound("resources to send 500 active messages to the slow receiver");
    while ((sent < count) && bound()) {
        ucs_status_t s = uct_ep_am_short(ep, AM_ID, sent, NULL, 0);
        if (s == UCS_OK) {
            ++sent;
            continue;
        }
        ASSERT_EQ(UCS_ERR_NO_RESOURCE, s);
        uct_worker_progress(m_worker);        // the sender only
        if (++stalled % 200 == 0) {
            uct_worker_progress(worker);      // now and then, the receiver
        }
    }
    wait_bound bound2("the 500 active messages at the slow receiver");
    while ((sink.msgs.size() < count) && bound2()) {
        uct_worker_progress(worker);
        uct_worker_progress(m_worker);
    }
    for (uint64_t i = 0; i < count; ++i) {
        ASSERT_EQ(i, sink.msgs[i].header);
    }
    EXPECT_GT(stalled, 0) << "the receiver never ran out of buffers";

    // close in order: endpoints, then ifaces, then the extra worker
    for (auto it = m_eps.begin(); it != m_eps.end(); ++it) {
        if (*it == ep) { uct_ep_destroy(ep); m_eps.erase(it); break; }
    }
    for (auto it = m_ifaces.begin(); it != m_ifaces.end(); ++it) {
        if (*it == slow) { uct_iface_close(slow); m_ifaces.erase(it); break; }
    }
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
}

TEST_F(syncmem_am_test, am_alignment_is_respected)
{
    uct_iface_params_t params = {};
    params.field_mask      = UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT |
                             UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    params.am_alignment    = 256;
    params.am_align_offset = 0;
    uct_iface_h aligned;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &aligned, {}, params));
    am_sink sink;
    sink.align = 256;
    uct_iface_set_am_handler(aligned, AM_ID, am_sink::cb, &sink, 0);
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(m_sender, aligned, &ep));
    for (uint64_t i = 0; i < 40; ++i) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(ep, AM_ID, i, NULL, 0);
        }));
    }
    wait_bound bound("40 active messages to arrive");
    while ((sink.msgs.size() < 40) && bound()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_FALSE(sink.misaligned);

    // an offset without an alignment means nothing: refused
    uct_iface_params_t bad = {};
    bad.field_mask      = UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    bad.am_align_offset = 8;
    uct_iface_h iface;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              open_iface(m_md, "syncmem", m_dev, &iface, {}, bad));
}

// Many endpoints (from several ifaces) to one receiver: everything arrives,
// and in order per sender.
TEST_F(syncmem_am_test, many_to_one_keeps_per_sender_order)
{
    const int senders = 6, count = 200;
    std::vector<uct_ep_h> eps;
    for (int i = 0; i < senders; ++i) {
        uct_iface_h iface;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
        uct_ep_h ep;
        ASSERT_EQ(UCS_OK, connect(iface, m_receiver, &ep));
        eps.push_back(ep);
    }

    for (uint64_t seq = 0; seq < count; ++seq) {
        for (int i = 0; i < senders; ++i) {
            uint64_t hdr = ((uint64_t)i << 32) | seq;
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_am_short(eps[i], AM_ID, hdr, NULL, 0);
            }));
        }
    }
    wait_for((size_t)senders * count);

    std::vector<uint64_t> next(senders, 0);
    for (const received &r : m_sink.msgs) {
        int from = (int)(r.header >> 32);
        ASSERT_LT(from, senders);
        ASSERT_EQ(next[from], r.header & 0xffffffffu) << "sender " << from;
        ++next[from];
    }
    for (int i = 0; i < senders; ++i) {
        EXPECT_EQ((uint64_t)count, next[i]);
    }
}
