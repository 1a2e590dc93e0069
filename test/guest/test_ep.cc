// SPDX-License-Identifier: BSD-3-Clause
// The endpoint takes operations from the moment it exists (uct_ep_create
// returns before the handshake, which completes only at a progress): they
// are kept in its ring, up to TX_QUEUE_LEN, and posted in order at CONNECT;
// a handshake that fails completes them with its error.
#include "syncmem_rma_test.h"

#include <cstring>

namespace {

struct am_log {
    std::vector<uint64_t> seqs;

    static ucs_status_t cb(void *arg, void *data, size_t length,
                           unsigned flags) {
        uint64_t seq;
        memcpy(&seq, data, sizeof(seq));
        static_cast<am_log*>(arg)->seqs.push_back(seq);
        return UCS_OK;
    }
};

size_t pack_u64(void *dest, void *arg)
{
    memcpy(dest, arg, sizeof(uint64_t));
    return sizeof(uint64_t);
}

void unpack_u64(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

void no_op(uct_completion_t*)
{
}

} // namespace

class syncmem_ep_test : public syncmem_rma_test {
protected:
    static const uint8_t AM_ID = 9;

    void SetUp() override {
        syncmem_rma_test::SetUp();
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_receiver, AM_ID,
                                                   am_log::cb, &m_am, 0));
    }

    // A new endpoint, not connected yet: nothing has progressed since.
    uct_ep_h fresh_ep(uct_iface_h from) {
        uct_ep_h ep = connect(from, m_receiver, false);
        EXPECT_NE(nullptr, ep);
        EXPECT_TRUE(uct_syncmem_ep_connecting(ep));
        return ep;
    }

    am_log m_am;
};

// Each kind of operation, on an endpoint whose handshake has not completed:
// accepted at once, run in order after CONNECT, every result right.
TEST_F(syncmem_ep_test, every_operation_is_taken_while_connecting)
{
    buffer *dst = alloc(4096, 0);
    buffer *src = alloc(4096, 0);
    uint8_t *d  = dst->data.data();
    uct_rkey_t rkey = dst->rkey.rkey;
    uct_completion_t comp = { no_op, 1, UCS_OK };
    uint64_t v[4] = { 0x1111, 0x2222, 0x3333, 0 }, got_b = 0;
    uint64_t fetched_xor = 0, fetched_cas = 0, seq;
    uint32_t fetched32 = 0;

    memcpy(d + 1024, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    memcpy(d + 1032, "\x11\x12\x13\x14\x15\x16\x17\x18", 8);
    uint64_t w[4] = { 0xf0, 100, 7, 0x500000000ull };
    memcpy(d + 2048, w, sizeof(w));
    memcpy(src->data.data(), &v[2], 8);

    uct_ep_h ep = fresh_ep(m_sender);
    ASSERT_NE(nullptr, ep);

    EXPECT_EQ(UCS_OK, uct_ep_put_short(ep, &v[0], 8, (uintptr_t)d, rkey));
    EXPECT_EQ(8, uct_ep_put_bcopy(ep, pack_u64, &v[1], (uintptr_t)d + 64,
                                  rkey));
    uct_iov_t iov = { src->data.data(), 8, src->memh, 0, 1 };
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(ep, &iov, 1,
                                               (uintptr_t)d + 128, rkey,
                                               &comp));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_get_bcopy(ep, unpack_u64, &got_b, 8,
                                               (uintptr_t)d + 1024, rkey,
                                               &comp));
    uct_iov_t giov = { src->data.data() + 512, 8, src->memh, 0, 1 };
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(ep, &giov, 1,
                                               (uintptr_t)d + 1032, rkey,
                                               &comp));
    seq = 1;
    EXPECT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, seq, nullptr, 0));
    seq = 2;
    EXPECT_EQ(8, uct_ep_am_bcopy(ep, AM_ID, pack_u64, &seq, 0));
    uint64_t seq3 = 3;
    memcpy(src->data.data() + 1024, &seq3, 8);
    uct_iov_t aiov = { src->data.data() + 1024, 8, src->memh, 0, 1 };
    ++comp.count;
    ucs_status_t status = uct_ep_am_zcopy(ep, AM_ID, nullptr, 0, &aiov, 1,
                                          0, &comp);
    EXPECT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
            << ucs_status_string(status);
    if (status == UCS_OK) {
        --comp.count;
    }
    EXPECT_EQ(UCS_OK, uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_XOR, 0x0f,
                                           (uintptr_t)d + 2048, rkey));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 5, &fetched_xor,
                                    (uintptr_t)d + 2056, rkey, &comp));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_atomic_cswap64(ep, 7, 8, (uintptr_t)d + 2064, rkey,
                                    &fetched_cas, &comp));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_OR, 0x3,
                                    &fetched32, (uintptr_t)d + 2076, rkey,
                                    &comp));

    --comp.count;
    ASSERT_TRUE(wait_for("the operations posted while connecting",
                         [&] { return comp.count == 0; }));
    EXPECT_EQ(UCS_OK, comp.status);
    flush(ep);
    ASSERT_TRUE(wait_for("3 active messages",
                         [&] { return m_am.seqs.size() >= 3; }));

    uint64_t now;
    memcpy(&now, d, 8);
    EXPECT_EQ(v[0], now);
    memcpy(&now, d + 64, 8);
    EXPECT_EQ(v[1], now);
    memcpy(&now, d + 128, 8);
    EXPECT_EQ(v[2], now);
    EXPECT_EQ(0, memcmp(&got_b, d + 1024, 8));
    EXPECT_EQ(0, memcmp(src->data.data() + 512, d + 1032, 8));
    EXPECT_EQ((std::vector<uint64_t>{1, 2, 3}), m_am.seqs);
    uint64_t after[4];
    memcpy(after, d + 2048, sizeof(after));
    EXPECT_EQ(0xffu, after[0]);
    EXPECT_EQ(100u, fetched_xor);
    EXPECT_EQ(105u, after[1]);
    EXPECT_EQ(7u, fetched_cas);
    EXPECT_EQ(8u, after[2]);
    EXPECT_EQ(5u, fetched32);
    EXPECT_EQ(0x700000000ull, after[3]);
    EXPECT_TRUE(m_errors.empty());
}

// As many are kept as a connected endpoint may have outstanding
// (TX_QUEUE_LEN less the drain's slot); the next one is UCS_ERR_NO_RESOURCE
// (the pending queue runs it once connected), and all land, in order.
TEST_F(syncmem_ep_test, kept_up_to_the_send_queue_then_pending)
{
    const unsigned queue_len = 64;
    uct_iface_h from;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &from,
                                 {{"TX_QUEUE_LEN", std::to_string(queue_len)}}));
    const unsigned kept = queue_len - 1;
    buffer *dst = alloc(8 * (kept + 1), 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    uct_ep_h ep = fresh_ep(from);
    ASSERT_NE(nullptr, ep);

    uint64_t i;
    ucs_status_t status = UCS_OK;
    for (i = 0; i <= kept; ++i) {
        uint64_t value = i + 1;
        status = uct_ep_put_short(ep, &value, 8, (uintptr_t)&words[i],
                                  dst->rkey.rkey);
        if (status != UCS_OK) {
            break;
        }
    }
    EXPECT_EQ(kept, i);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, status);

    struct req_t {
        uct_pending_req_t super;
        uct_ep_h          ep;
        uint64_t          *word;
        uct_rkey_t        rkey;
        uint64_t          value;
        bool              done;
    } req = {};
    req.super.func = [](uct_pending_req_t *self) -> ucs_status_t {
        req_t *r = ucs_container_of(self, req_t, super);
        ucs_status_t s = uct_ep_put_short(r->ep, &r->value, 8,
                                          (uintptr_t)r->word, r->rkey);
        r->done = (s == UCS_OK);
        return s;
    };
    req.ep    = ep;
    req.word  = &words[kept];
    req.rkey  = dst->rkey.rkey;
    req.value = kept + 1;
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(ep, &req.super, 0));
    ASSERT_TRUE(wait_for("the pending put after the kept ones",
                         [&] { return req.done; }));
    flush(ep);
    for (i = 0; i <= kept; ++i) {
        EXPECT_EQ(i + 1, words[i]) << "word " << i;
    }
}

// A handshake that fails (the iface address names no iface the peer has):
// what was kept completes with the endpoint's error, the error handler is
// called once, and nothing lands.
TEST_F(syncmem_ep_test, a_failed_handshake_fails_what_was_kept)
{
    uct_iface_h from;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &from,
                                 {{"CM_TIMEOUT", "50ms"},
                                  {"CM_RETRIES", "2"}}));
    std::vector<uint8_t> dev, ifa;
    get_addresses(m_receiver, &dev, &ifa);
    ifa[0] ^= 0xff; // another iface id: the peer drops the REQs
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect_to_addr(from, dev, ifa, &ep));

    buffer *dst = alloc(64, 0);
    buffer *src = alloc(64, 0);
    uct_completion_t comp = { no_op, 1, UCS_OK };
    uint64_t value = 42, fetched = 0;
    uct_iov_t iov = { src->data.data(), 8, src->memh, 0, 1 };
    EXPECT_EQ(UCS_OK, uct_ep_put_short(ep, &value, 8,
                                       (uintptr_t)dst->data.data(),
                                       dst->rkey.rkey));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)dst->data.data() + 8,
                               dst->rkey.rkey, &comp));
    ++comp.count;
    EXPECT_EQ(UCS_INPROGRESS,
              uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_XOR, 1, &fetched,
                                    (uintptr_t)dst->data.data() + 16,
                                    dst->rkey.rkey, &comp));
    --comp.count;
    ASSERT_TRUE(wait_for("the kept operations to fail",
                         [&] { return comp.count == 0; }));
    EXPECT_NE(UCS_OK, comp.status);
    ASSERT_TRUE(wait_for("the error handler",
                         [&] { return !m_errors.empty(); }));
    EXPECT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    std::vector<uint8_t> zeros(24, 0);
    EXPECT_EQ(0, memcmp(zeros.data(), dst->data.data(), 24));
}

// A fence on an endpoint still connecting holds what follows it until what
// came before it has run (the fetch after it sees the xor before it).
TEST_F(syncmem_ep_test, a_fence_while_connecting_holds)
{
    buffer *dst = alloc(8, 0);
    uct_rkey_t rkey = dst->rkey.rkey;
    uint64_t addr = (uintptr_t)dst->data.data(), fetched = 0, word = 0x10;
    memcpy(dst->data.data(), &word, 8);
    uct_completion_t comp = { no_op, 1, UCS_OK };

    uct_ep_h ep = fresh_ep(m_sender);
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(UCS_OK, uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_XOR, 0x3, addr,
                                           rkey));
    EXPECT_EQ(UCS_OK, uct_ep_fence(ep, 0));
    ucs_status_t status = retry([&] {
        return uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_XOR, 0, &fetched,
                                     addr, rkey, &comp);
    });
    ASSERT_EQ(UCS_INPROGRESS, status);
    ASSERT_TRUE(wait_for("the fetch after the fence",
                         [&] { return comp.count == 0; }));
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(0x13u, fetched);
}

// Without a ring (neither RECONNECT nor TX_DB_BATCH) nothing can be kept:
// operations answer UCS_ERR_NO_RESOURCE until connected, as documented.
TEST_F(syncmem_ep_test, without_a_ring_operations_wait_for_connect)
{
    uct_iface_h from;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &from,
                                 {{"RECONNECT", "n"}}));
    buffer *dst = alloc(8, 0);
    uint64_t value = 5;
    uct_ep_h ep = fresh_ep(from);
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              uct_ep_put_short(ep, &value, 8, (uintptr_t)dst->data.data(),
                               dst->rkey.rkey));
    EXPECT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(ep, &value, 8, (uintptr_t)dst->data.data(),
                                dst->rkey.rkey);
    }));
    flush(ep);
    EXPECT_EQ(5u, *reinterpret_cast<uint64_t*>(dst->data.data()));
}
