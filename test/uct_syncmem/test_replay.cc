// SPDX-License-Identifier: BSD-3-Clause
// The replay ring's entries (syncmem_tx.inl, syncmem_replay.c): what the
// fast path keeps of each request is what a reconnect or the doorbell
// needs to post it again, and the PSNs a reconnect counts back match the
// ones the requests took. Pure: no device, the endpoint is only its ring.
#include <gtest/gtest.h>

#include "replay_save.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

ibv_send_wr rdma(ibv_wr_opcode opcode, ibv_sge *sge, int num_sge,
                 uint64_t remote_addr = 0x1000)
{
    ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode              = opcode;
    wr.sg_list             = sge;
    wr.num_sge             = num_sge;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = 0x77;
    return wr;
}

class replay_ring : public ::testing::Test {
protected:
    void SetUp() override {
        m_ep = static_cast<uct_syncmem_ep_t*>(calloc(1, sizeof(*m_ep)));
        ASSERT_NE(nullptr, m_ep);
        m_ep->replay.stride    = sizeof(uct_syncmem_replay_t) + 256;
        m_ep->replay.mask      = 7;
        m_ep->replay.mtu_shift = 10; // 1024-byte path MTU
        m_ep->replay.ring      = static_cast<uint8_t*>(
                calloc(m_ep->replay.mask + 1, m_ep->replay.stride));
        ASSERT_NE(nullptr, m_ep->replay.ring);
        m_ep->replay.next_psn  = 100;
    }

    void TearDown() override {
        free(m_ep->replay.ring);
        free(m_ep);
    }


    uct_syncmem_replay_t *entry(uint16_t sn) {
        return syncmem_test_replay_entry(m_ep, sn);
    }

    uct_syncmem_ep_t *m_ep = nullptr;
};

} // namespace

// Inline bytes are copied: the caller's buffer may be gone by the replay.
TEST_F(replay_ring, inline_put_keeps_its_bytes)
{
    uint8_t hdr[8], payload[3] = { 7, 8, 9 };
    memset(hdr, 0xab, sizeof(hdr));
    ibv_sge sge[3] = { { (uintptr_t)hdr, 8, 0 }, { 0, 0, 0 }, // empty, no address
                       { (uintptr_t)payload, 3, 0 } };
    ibv_send_wr wr = rdma(IBV_WR_RDMA_WRITE, sge, 3);
    wr.send_flags  = IBV_SEND_INLINE | IBV_SEND_SIGNALED;

    syncmem_test_replay_save(m_ep, &wr, 9); // wraps to slot 1
    memset(hdr, 0, sizeof(hdr));
    payload[0] = 0;

    uct_syncmem_replay_t *e = entry(9);
    EXPECT_EQ(entry(1), e);
    EXPECT_EQ(IBV_WR_RDMA_WRITE, e->opcode);
    EXPECT_EQ(IBV_SEND_INLINE | IBV_SEND_SIGNALED, e->send_flags);
    EXPECT_EQ(0x1000u, e->remote_addr);
    EXPECT_EQ(0x77u, e->rkey);
    EXPECT_EQ(11u, e->length);
    EXPECT_EQ(0, e->lost);
    const uint8_t *bytes = reinterpret_cast<const uint8_t*>(e->data);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(0xab, bytes[i]) << i;
    }
    EXPECT_EQ(7, bytes[8]);
    EXPECT_EQ(9, bytes[10]);
    EXPECT_EQ(101u, m_ep->replay.next_psn); // one packet
}

// A scatter list is kept (its memory is held until completion), and a
// request takes one PSN per MTU of payload, at least one.
TEST_F(replay_ring, scatter_list_and_packets)
{
    ibv_sge sge[2] = { { 0x5000, 3000, 11 }, { 0x9000, 1097, 12 } };
    ibv_send_wr wr = rdma(IBV_WR_RDMA_WRITE, sge, 2);

    syncmem_test_replay_save(m_ep, &wr, 1);
    uct_syncmem_replay_t *e = entry(1);
    EXPECT_EQ(4097u, e->length);
    EXPECT_EQ(2, e->num_sge);
    const ibv_sge *kept = reinterpret_cast<const ibv_sge*>(e->data);
    EXPECT_EQ(0x9000u, kept[1].addr);
    EXPECT_EQ(1097u, kept[1].length);
    EXPECT_EQ(12u, kept[1].lkey);
    EXPECT_EQ(105u, m_ep->replay.next_psn); // 4097 bytes: 5 packets of 1024

    ibv_send_wr empty = rdma(IBV_WR_RDMA_READ, nullptr, 0);
    syncmem_test_replay_save(m_ep, &empty, 2);
    EXPECT_EQ(0u, entry(2)->length);
    EXPECT_EQ(106u, m_ep->replay.next_psn); // an empty request: one

    ibv_sge one = { 0x5000, 1024, 11 };
    ibv_send_wr read = rdma(IBV_WR_RDMA_READ, &one, 1);
    syncmem_test_replay_save(m_ep, &read, 3);
    EXPECT_EQ(107u, m_ep->replay.next_psn); // exactly one MTU: one

    // a reconnect counts back from next_psn over the same requests
    EXPECT_EQ(7u, uct_syncmem_replay_npkts(m_ep, 1, 3));
    EXPECT_EQ(2u, uct_syncmem_replay_npkts(m_ep, 2, 2));
}

// What a resume must not take on (uct_syncmem_replay_resume_risk): a get
// anywhere; an atomic after a put or send, which Soft-RoCE may complete on
// the plain ACK of an earlier duplicate, without its data. An atomic first,
// or after atomics only, is answered at its own PSN.
TEST_F(replay_ring, what_a_resume_must_not_take_on)
{
    ibv_sge sge = { 0x5000, 8, 11 };
    ibv_send_wr put = rdma(IBV_WR_RDMA_WRITE, &sge, 1);
    ibv_send_wr get = rdma(IBV_WR_RDMA_READ, &sge, 1);
    ibv_send_wr am  = rdma(IBV_WR_SEND_WITH_IMM, &sge, 1);
    ibv_send_wr fadd, cswap;
    memset(&fadd, 0, sizeof(fadd));
    fadd.opcode  = IBV_WR_ATOMIC_FETCH_AND_ADD;
    fadd.sg_list = &sge;
    fadd.num_sge = 1;
    cswap        = fadd;
    cswap.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;

    const struct {
        std::vector<const ibv_send_wr*> wrs;
        const char                      *why; // nullptr: may resume
    } cases[] = {
        { { &put, &put, &am }, nullptr },
        { { &fadd }, nullptr },
        { { &fadd, &cswap, &fadd }, nullptr },
        { { &fadd, &put, &am }, nullptr },
        { { &get }, "a get of unknown outcome" },
        { { &fadd, &put, &get }, "a get of unknown outcome" },
        { { &put, &fadd }, "an atomic of unknown outcome after a put or send" },
        { { &am, &cswap }, "an atomic of unknown outcome after a put or send" },
        { { &fadd, &put, &fadd },
          "an atomic of unknown outcome after a put or send" },
    };
    for (const auto &c : cases) {
        uint16_t sn = 6; // across the ring's wrap: 6, 7, 0
        for (const ibv_send_wr *wr : c.wrs) {
            syncmem_test_replay_save(m_ep, wr, sn++);
        }
        const char *why = uct_syncmem_replay_resume_risk(m_ep, 6, sn - 1);
        SCOPED_TRACE(c.wrs.size());
        if (c.why == nullptr) {
            EXPECT_EQ(nullptr, why) << why;
        } else {
            ASSERT_NE(nullptr, why);
            EXPECT_STREQ(c.why, why);
        }
    }
    // a request of more than 128 packets (Soft-RoCE stalls on it); 128
    // is fine. (mtu_shift 10: 1024-byte packets)
    ibv_sge big = { 0x5000, 128 * 1024, 11 };
    ibv_send_wr put128 = rdma(IBV_WR_RDMA_WRITE, &big, 1);
    syncmem_test_replay_save(m_ep, &put128, 3);
    EXPECT_EQ(nullptr, uct_syncmem_replay_resume_risk(m_ep, 3, 3));
    big.length = 128 * 1024 + 1;
    syncmem_test_replay_save(m_ep, &put128, 3);
    EXPECT_STREQ("a request of more than 128 packets",
                 uct_syncmem_replay_resume_risk(m_ep, 3, 3));

    // only the requests asked about count
    syncmem_test_replay_save(m_ep, &put, 1);
    syncmem_test_replay_save(m_ep, &fadd, 2);
    EXPECT_EQ(nullptr, uct_syncmem_replay_resume_risk(m_ep, 2, 2));
}

// An atomic keeps its operands, then its sge; it is one packet whatever
// the length.
TEST_F(replay_ring, atomic_keeps_operands)
{
    ibv_sge sge = { 0x7000, 8, 5 };
    ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode                = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.sg_list               = &sge;
    wr.num_sge               = 1;
    wr.wr.atomic.remote_addr = 0x2008;
    wr.wr.atomic.rkey        = 0x99;
    wr.wr.atomic.compare_add = 41;
    wr.wr.atomic.swap        = 42;

    syncmem_test_replay_save(m_ep, &wr, 4);
    uct_syncmem_replay_t *e = entry(4);
    EXPECT_EQ(IBV_WR_ATOMIC_CMP_AND_SWP, e->opcode);
    EXPECT_EQ(0x2008u, e->remote_addr);
    EXPECT_EQ(0x99u, e->rkey);
    EXPECT_EQ(41u, e->data[0]);
    EXPECT_EQ(42u, e->data[1]);
    EXPECT_EQ(0x7000u, reinterpret_cast<const ibv_sge*>(&e->data[2])->addr);
    EXPECT_EQ(1, e->num_sge);
    EXPECT_EQ(101u, m_ep->replay.next_psn);
    EXPECT_EQ(1u, uct_syncmem_replay_npkts(m_ep, 4, 1));
}

// An active message keeps its immediate data (its id and number).
TEST_F(replay_ring, send_keeps_immediate_data)
{
    ibv_sge sge[2] = { { 0x5000, 16, 1 }, { 0x6000, 2000, 2 } };
    ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = 0x12345678;
    wr.sg_list  = sge;
    wr.num_sge  = 2;

    syncmem_test_replay_save(m_ep, &wr, 5);
    EXPECT_EQ(0x12345678u, entry(5)->imm_data);
    EXPECT_EQ(2016u, entry(5)->length);
    EXPECT_EQ(2, entry(5)->num_sge);
    EXPECT_EQ(102u, m_ep->replay.next_psn);
}

// The fast path's writer (from the request's values) and the generic one
// (from the work request) keep the same entry.
TEST_F(replay_ring, fast_and_generic_writers_agree)
{
    ibv_sge sge[2] = { { 0x5000, 1500, 11 }, { 0x9000, 100, 12 } };
    std::vector<ibv_send_wr> wrs = { rdma(IBV_WR_RDMA_WRITE, sge, 2),
                                     rdma(IBV_WR_RDMA_READ, sge, 1) };
    ibv_send_wr amo;
    memset(&amo, 0, sizeof(amo));
    amo.opcode                = IBV_WR_ATOMIC_FETCH_AND_ADD;
    amo.send_flags            = IBV_SEND_FENCE;
    amo.sg_list               = sge;
    amo.num_sge               = 1;
    amo.wr.atomic.remote_addr = 0x3000;
    amo.wr.atomic.rkey        = 3;
    amo.wr.atomic.compare_add = 5;
    wrs.push_back(amo);

    for (const ibv_send_wr &wr : wrs) {
        uint32_t length = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            length += wr.sg_list[i].length;
        }
        memset(m_ep->replay.ring, 0xee,
               (m_ep->replay.mask + 1) * m_ep->replay.stride);
        m_ep->replay.next_psn = 0;
        syncmem_test_replay_save(m_ep, &wr, 1);
        syncmem_test_replay_sge(m_ep, 2, &wr, length);
        EXPECT_EQ(0, memcmp(entry(1), entry(2), sizeof(uct_syncmem_replay_t) +
                            (2 + wr.num_sge) * sizeof(ibv_sge)))
                << "opcode " << wr.opcode;
        EXPECT_EQ(0u, m_ep->replay.next_psn % 2) << "opcode " << wr.opcode;
        EXPECT_EQ(m_ep->replay.next_psn / 2,
                  uct_syncmem_replay_npkts(m_ep, 1, 1)) << "opcode " << wr.opcode;
    }
}

// A reconnect onto a new QP whose REP says where the peer's old QP stopped
// (uct_syncmem_replay_peer_ran): the requests whose packets all lie below
// it ran; a fetching atomic among them fails, a non-fetching one does not;
// every atomic from the first request that did not run entirely fails too
// (never posted again: one posted so ran twice on Soft-RoCE); a PSN
// outside the requests changes nothing.
TEST_F(replay_ring, what_the_peer_ran)
{
    ibv_sge put2k = { 0x5000, 2048, 11 }, put3k = { 0x6000, 3000, 11 };
    ibv_sge word  = { 0x7000, 8, 11 }, get1k = { 0x8000, 1024, 11 };
    ibv_send_wr fadd;
    memset(&fadd, 0, sizeof(fadd));
    fadd.opcode  = IBV_WR_ATOMIC_FETCH_AND_ADD;
    fadd.sg_list = &word;
    fadd.num_sge = 1;
    const ibv_send_wr wrs[] = {
        rdma(IBV_WR_RDMA_WRITE, &put2k, 1), // 1: PSNs 100, 101
        fadd,                               // 2: 102, its value wanted
        fadd,                               // 3: 103, its value not wanted
        rdma(IBV_WR_RDMA_READ, &get1k, 1),  // 4: 104
        rdma(IBV_WR_RDMA_WRITE, &put3k, 1), // 5: 105..107
        fadd                                // 6: 108, its value wanted
    };
    uint64_t result;
    uct_syncmem_op_t ops[3] = {};
    const uint16_t op_sn[3] = { 2, 3, 6 };

    for (uint32_t base : { 100u, 0xfffffcu }) { // and across the PSN wrap
        SCOPED_TRACE("first PSN " + std::to_string(base));
        for (uint32_t rq_psn : { 0u, 1u, 2u, 3u, 4u, 5u, 6u, 8u, 9u, 10u,
                                 0xffffffu }) {
            SCOPED_TRACE("peer at first PSN + " + std::to_string(rq_psn));
            memset(m_ep->replay.ring, 0,
                   (m_ep->replay.mask + 1) * m_ep->replay.stride);
            memset(&m_ep->reconnect, 0, sizeof(m_ep->reconnect));
            memset(&m_ep->lost, 0, sizeof(m_ep->lost));
            ucs_queue_head_init(&m_ep->tx.outstanding);
            m_ep->replay.next_psn = base;
            for (uint16_t sn = 1; sn <= 6; ++sn) {
                syncmem_test_replay_save(m_ep, &wrs[sn - 1], sn);
            }
            for (int i = 0; i < 3; ++i) {
                ops[i].sn  = op_sn[i];
                ops[i].arg = (op_sn[i] == 3) ? nullptr : &result;
                ucs_queue_push(&m_ep->tx.outstanding, &ops[i].queue);
            }
            m_ep->tx.sn                  = 6;
            m_ep->reconnect.fail_sn      = 1;
            m_ep->reconnect.old_last_sn  = 6;
            m_ep->reconnect.unrun_sn     = 7;

            unsigned ran = 99;
            ucs_status_t status = uct_syncmem_replay_peer_ran(
                    m_ep, (base + rq_psn) & 0xffffff, &ran);
            if (rq_psn > 9) { // past PSN 108, the last the requests took
                EXPECT_EQ(UCS_ERR_INVALID_PARAM, status);
                EXPECT_EQ(7, m_ep->reconnect.unrun_sn);
                EXPECT_EQ(0, m_ep->reconnect.ran_valid);
                EXPECT_EQ(0u, m_ep->lost.count);
                EXPECT_EQ(9u, uct_syncmem_replay_npkts(m_ep, 1, 6));
                continue;
            }
            ASSERT_EQ(UCS_OK, status);
            // requests wholly below the peer's PSN: 2 PSNs, then 1, 1, 1, 3, 1
            const unsigned ends[] = { 2, 3, 4, 5, 8, 9 };
            unsigned expect_ran = 0;
            while ((expect_ran < 6) && (ends[expect_ran] <= rq_psn)) {
                ++expect_ran;
            }
            EXPECT_EQ(expect_ran, ran);
            EXPECT_EQ(1 + expect_ran, (unsigned)m_ep->reconnect.unrun_sn);
            EXPECT_EQ((int)(expect_ran > 0), m_ep->reconnect.ran_valid);
            EXPECT_EQ(1, entry(2)->lost) << "a fetch that ran, or not";
            EXPECT_EQ(expect_ran < 3, entry(3)->lost)
                    << "ran: nobody wants its value; did not: never again";
            EXPECT_EQ(1, entry(6)->lost);
            EXPECT_EQ((unsigned)(2 + (expect_ran < 3)), m_ep->lost.count);
            // what ran posts again as an empty write (one PSN), a get as
            // itself
            unsigned npkts = 0;
            const unsigned real[] = { 2, 1, 1, 1, 3, 1 };
            for (unsigned i = 0; i < 6; ++i) {
                npkts += ((i < expect_ran) && (i != 3)) ? 1 : real[i];
            }
            EXPECT_EQ(npkts, uct_syncmem_replay_npkts(m_ep, 1, 6));
        }
    }
}

namespace {

// A ring that starts small and grows with what is in flight
// (uct_syncmem_replay_grow, _park): the room to send follows it, and the
// entries of the last requests survive every move.
class replay_grow : public ::testing::Test {
protected:
    void SetUp() override {
        m_iface = static_cast<uct_syncmem_iface_t*>(
                calloc(1, sizeof(*m_iface)));
        m_ep    = static_cast<uct_syncmem_ep_t*>(calloc(1, sizeof(*m_ep)));
        ASSERT_NE(nullptr, m_iface);
        ASSERT_NE(nullptr, m_ep);
        m_iface->config.tx_queue_len = 256;
        m_iface->config.reconnect    = 1;
        m_iface->config.db_batch     = 1;
        m_iface->config.replay_data  = 128;
        m_iface->config.ring_min     = 4;  // TX_RING_MIN 2
        m_ep->super.super.iface      = &m_iface->super.super;
        m_ep->state                  = UCT_SYNCMEM_EP_CONNECTED;
        ucs_list_head_init(&m_ep->db_list);
    }

    void TearDown() override {
        uct_syncmem_replay_ep_cleanup(m_ep);
        free(m_ep);
        free(m_iface);
    }

    void init(uint16_t sn) {
        uct_syncmem_replay_ep_init(m_ep);
        ASSERT_EQ(nullptr, m_ep->replay.ring); // parked until it sends
        if ((m_ep->replay.stride != 0) &&
            (m_ep->state == UCT_SYNCMEM_EP_CONNECTED)) {
            ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
        }
        m_ep->replay.mtu_shift = 10;
        m_ep->tx.sn            = sn;
        m_ep->tx.acked_sn      = sn;
        m_ep->tx.available     = uct_syncmem_ep_tx_limit(m_iface, m_ep);
    }

    // Takes the room there is, as the fast path does: one put each, its
    // remote address the request's number.
    void fill() {
        while (m_ep->tx.available > 0) {
            uint16_t sn    = m_ep->tx.sn + 1;
            ibv_sge sge    = { 0x5000, 64, 1 };
            ibv_send_wr wr = rdma(IBV_WR_RDMA_WRITE, &sge, 1, sn);
            syncmem_test_replay_save(m_ep, &wr, sn);
            m_ep->tx.sn = sn;
            --m_ep->tx.available;
        }
    }

    // The last n requests' entries are theirs.
    void expect_entries(unsigned n) {
        for (unsigned i = 0; i < n; ++i) {
            uint16_t sn = m_ep->tx.sn - i;
            EXPECT_EQ(sn, syncmem_test_replay_entry(m_ep, sn)->remote_addr)
                    << "request " << sn;
        }
    }

    unsigned entries() const { return m_ep->replay.mask + 1u; }

    uct_syncmem_iface_t *m_iface = nullptr;
    uct_syncmem_ep_t    *m_ep    = nullptr;
};

} // namespace

// 4 entries hold a request and a flush; each full ring doubles, the
// requests in it keep their entries across the wrap of 16-bit numbers,
// until the ring holds the whole send queue.
TEST_F(replay_grow, doubles_with_what_is_in_flight)
{
    init(0xfff0);
    EXPECT_EQ(4u, entries());
    EXPECT_EQ(2, m_ep->tx.available);

    unsigned expected = 4;
    while (expected < 512) {
        fill();
        unsigned outstanding = uct_syncmem_ep_tx_outstanding(m_ep);
        ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
        expected *= 2;
        ASSERT_EQ(expected, entries());
        EXPECT_EQ(uct_syncmem_ep_tx_limit(m_iface, m_ep) - (int)outstanding,
                  m_ep->tx.available);
        expect_entries(outstanding);
    }
    EXPECT_EQ(256, uct_syncmem_ep_tx_limit(m_iface, m_ep));
    fill();
    EXPECT_EQ(256u, uct_syncmem_ep_tx_outstanding(m_ep));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_syncmem_replay_grow(m_ep));
    expect_entries(256);
}

// A drain beyond the limit (available below 0) stays counted.
TEST_F(replay_grow, grows_past_a_drain)
{
    init(7);
    fill();
    ++m_ep->tx.sn;
    --m_ep->tx.available;       // the drain: -1
    ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
    EXPECT_EQ(8u, entries());
    EXPECT_EQ(3, m_ep->tx.available);
}

// Idle, it gives its whole ring back (parked: no room to send), and the
// next grow gives it the smallest ring again; busy or with requests kept
// for the doorbell, it keeps all.
TEST_F(replay_grow, parks_when_idle)
{
    init(100);
    for (int i = 0; i < 4; ++i) {
        fill();
        ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
    }
    fill();
    ASSERT_EQ(64u, entries());
    EXPECT_EQ(1u, m_iface->rings);

    uct_syncmem_replay_park(m_ep);
    EXPECT_EQ(64u, entries()); // requests outstanding

    m_ep->tx.available += uct_syncmem_ep_tx_outstanding(m_ep);
    m_ep->tx.acked_sn   = m_ep->tx.sn;
    ucs_list_link_t db_eps;
    ucs_list_head_init(&db_eps);
    ucs_list_add_tail(&db_eps, &m_ep->db_list);
    uct_syncmem_replay_park(m_ep);
    EXPECT_EQ(64u, entries()); // kept for the doorbell

    ucs_list_del(&m_ep->db_list);
    ucs_list_head_init(&m_ep->db_list);
    uct_syncmem_replay_park(m_ep);
    EXPECT_EQ(nullptr, m_ep->replay.ring);
    EXPECT_EQ(0, m_ep->tx.available);
    EXPECT_EQ(0, uct_syncmem_ep_tx_limit(m_iface, m_ep));
    EXPECT_EQ(0u, m_iface->rings);
    uct_syncmem_replay_park(m_ep); // parked already: nothing changes
    EXPECT_EQ(0, m_ep->tx.available);
    EXPECT_EQ(0u, m_iface->rings);

    ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
    ASSERT_NE(nullptr, m_ep->replay.ring);
    EXPECT_EQ(4u, entries());
    EXPECT_EQ(2, m_ep->tx.available);
    EXPECT_EQ(1u, m_iface->rings);
    fill();
    expect_entries(2);
}

// The last request of an endpoint completes: it parks at once while more
// endpoints than TX_IDLE_RINGS hold a ring, and not before its last one
// completes, nor while no more than that do (the watchdog's then).
TEST_F(replay_grow, parks_at_its_last_completion_beyond_idle_rings)
{
    init(0xfffe);
    ucs_queue_head_init(&m_ep->tx.outstanding);
    m_iface->config.idle_rings = 1;
    fill();
    ASSERT_EQ(2, uct_syncmem_ep_tx_outstanding(m_ep));
    uct_syncmem_ep_tx_completed(m_ep, m_ep->tx.sn, UCS_OK);
    EXPECT_NE(nullptr, m_ep->replay.ring) << "no more rings than kept";
    EXPECT_EQ(2, m_ep->tx.available);

    m_iface->config.idle_rings = 0;
    fill();
    uct_syncmem_ep_tx_completed(m_ep, m_ep->tx.sn - 1, UCS_OK);
    EXPECT_NE(nullptr, m_ep->replay.ring) << "one still outstanding";
    uct_syncmem_ep_tx_completed(m_ep, m_ep->tx.sn, UCS_OK);
    EXPECT_EQ(nullptr, m_ep->replay.ring);
    EXPECT_EQ(0, m_ep->tx.available);
    EXPECT_EQ(0u, m_iface->rings);

    ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep));
    m_ep->state = UCT_SYNCMEM_EP_CONNECTING; // a reconnect's completions
    fill();
    uct_syncmem_ep_tx_completed(m_ep, m_ep->tx.sn, UCS_OK);
    EXPECT_NE(nullptr, m_ep->replay.ring) << "parked while not connected";
    m_ep->state = UCT_SYNCMEM_EP_CONNECTED;
}

// The room to send is there only while connected (the fast path reads no
// state): leaving CONNECTED takes the limit away, with the requests still
// outstanding counted, and coming back gives it back; no ring grows in
// between.
TEST_F(replay_grow, room_only_while_connected)
{
    m_ep->state            = UCT_SYNCMEM_EP_CONNECTING;
    m_iface->cm.connecting = 1; // as uct_syncmem_ep_t_init counts it
    init(40);
    EXPECT_EQ(0, m_ep->tx.available);
    uct_syncmem_ep_set_state(m_ep, UCT_SYNCMEM_EP_CONNECTED);
    EXPECT_EQ(0, m_ep->tx.available); // parked: its first operation...
    ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep)); // ...takes a ring
    EXPECT_EQ(2, m_ep->tx.available);

    fill();
    EXPECT_EQ(0, m_ep->tx.available);
    uct_syncmem_ep_set_state(m_ep, UCT_SYNCMEM_EP_RECONN_WAIT_BOTH);
    EXPECT_EQ(-2, m_ep->tx.available);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_syncmem_replay_grow(m_ep));
    EXPECT_EQ(4u, entries());

    ++m_ep->tx.acked_sn; // one completes while reconnecting
    ++m_ep->tx.available;
    uct_syncmem_ep_set_state(m_ep, UCT_SYNCMEM_EP_CONNECTED);
    EXPECT_EQ(1, m_ep->tx.available);
    ASSERT_EQ(UCS_OK, uct_syncmem_replay_grow(m_ep)); // full again: grows
    EXPECT_EQ(8u, entries());
    EXPECT_EQ(5, m_ep->tx.available);

    uct_syncmem_ep_set_state(m_ep, UCT_SYNCMEM_EP_FAILED);
    EXPECT_EQ(-1, m_ep->tx.available);
    EXPECT_EQ(0u, m_iface->cm.connecting);
}

// Without reconnect and doorbell there is no ring: the send queue is the
// limit, and nothing grows.
TEST_F(replay_grow, none_without_reconnect)
{
    m_iface->config.reconnect = 0;
    init(0);
    EXPECT_EQ(nullptr, m_ep->replay.ring);
    EXPECT_EQ(256, m_ep->tx.available);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, uct_syncmem_replay_grow(m_ep));
}
