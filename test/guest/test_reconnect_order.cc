// SPDX-License-Identifier: BSD-3-Clause
// Order across a reconnect (syncmem_reconnect.c: "Completions still come in
// request order: ordering, fences and flush mean what they meant before"),
// on one host, with the QP failures forced: completions in posting order, a
// fenced put after replayed ones, a get after a fence, a flush that covers
// everything before it. Each runs with only puts and AMs in flight (every
// reconnect resumes the QP pair) and with gets and atomics in flight too (a
// new QP where one was in flight: a resume is not asked for with a get, or
// an atomic after a put or send, of unknown outcome; atomics may then fail
// with UCS_ERR_CONNECTION_RESET, never run twice, never complete with
// another's value).
#include "syncmem_reconnect_test.h"

#include <deque>

namespace {

size_t pack_word(void *dest, void *arg)
{
    memcpy(dest, arg, 8);
    return 8;
}

} // namespace

class syncmem_reconnect_order_test : public syncmem_reconnect_test {
protected:
    // Everything posted between two progress calls is in flight when the
    // QP fails: the ring holds the whole send queue from the start.
    config_mods_t sender_mods() const override {
        return {{"TX_RING_MIN", "256"}};
    }

    // The QP failed before the handshake ends cannot be connected (to RTR:
    // EINVAL) and the endpoint fails: these fail it once connected.
    void SetUp() override {
        syncmem_reconnect_test::SetUp();
        m_words = alloc(4096, 0);
        m_vals  = alloc(64 * 1024, 0);
        for (long i = 0; (i < 5000000) &&
                         (sep()->state == UCT_SYNCMEM_EP_CONNECTING); ++i) {
            progress();
        }
        ASSERT_EQ(UCT_SYNCMEM_EP_CONNECTED, sep()->state);
    }

    // (128 packets at the guest's 1024-byte MTU: a longer request of
    // unknown outcome is not resumed, uct_syncmem_replay_resume_risk)
    static const size_t BIG = 128 * 1024;

    // Posts count ops that each have a completion, in turn (of the kinds
    // wanted), after a BIG put.
    void post_completing(unsigned count) {
        static const kind kinds[] = { PUT_ZCOPY, GET_BCOPY, GET_ZCOPY,
                                      AM_ZCOPY, FADD64, CSWAP64 };
        post(PUT_ZCOPY, BIG);
        for (unsigned i = 0; i < count; ++i) {
            kind k = kinds[m_next_kind++ % 6];
            if (wanted(k)) {
                post(k);
            }
        }
    }

    // Fails the QP. What is posted next, until progress sees the failure,
    // goes onto the broken QP, is flushed, and the reconnect posts it again;
    // so does whatever posted before is still in flight (little on one
    // host: Soft-RoCE of 6.1 runs a request to its end, the peer's side and
    // the answer too, inside ibv_post_send; that of 6.12 in a work queue).
    void fail() {
        m_fail_qpn = sep()->qp->qp_num;
        m_fail_gen = uct_syncmem_ep_reconnects(m_ep);
        ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
    }

    // Waits (bounded) for the reconnect after fail() and counts it; true if
    // it resumed (kept the QP pair).
    bool reconnected() {
        EXPECT_TRUE(wait_reconnected(m_fail_gen)) << "no reconnect: " << ep_state();
        bool resumed   = (m_fail_qpn == sep()->qp->qp_num);
        m_resumed_only = m_resumed_only && resumed;
        ++(resumed ? m_resumes : m_new_qps);
        return resumed;
    }

    // Without gets every reconnect resumes. With them, one after a failure
    // with a get in flight takes a new QP; but a fence (every fifth op) with
    // reads or atomics before it holds what follows until they complete, a
    // progress that sees the failure first, so a round may have none in
    // flight and resume: some rounds, not all, take a new QP (TearDown).
    void check_resume(bool resumed) {
        if (!m_gets) {
            EXPECT_TRUE(resumed) << "a new QP with only puts and AMs";
        }
    }

    // Progresses (bounded) until the failure after fail() is seen (a post
    // that waited for room may have seen it, and the reconnect ended): what
    // is posted next waits for the reconnect and goes after the replay.
    void wait_reconnecting() {
        auto seen = [&] {
            return (sep()->state != UCT_SYNCMEM_EP_CONNECTED) ||
                   (uct_syncmem_ep_reconnects(m_ep) != m_fail_gen);
        };
        for (long i = 0; (i < 5000000) && !seen(); ++i) {
            progress();
        }
        EXPECT_TRUE(seen()) << "the failure was never seen";
    }

    // Words that tests put to and get from (one per round), and a buffer
    // for the puts' zcopy sources and the gets' results (a slot each).
    uint64_t *word(unsigned w) {
        return (uint64_t*)(m_words->data.data() + 64 * w);
    }

    // Puts value to word w: put_short, put_bcopy and put_zcopy in turn.
    void put_word(unsigned w, uint64_t value) {
        ASSERT_LT(m_nslots, m_vals->data.size() / 8);
        uint64_t *slot  = (uint64_t*)m_vals->data.data() + m_nslots;
        unsigned how    = m_nslots++ % 3;
        uintptr_t addr  = (uintptr_t)word(w);
        uct_rkey_t rkey = m_words->rkey.rkey;
        uct_iov_t iov   = { slot, 8, m_vals->memh, 0, 1 };
        *slot           = value;
        ucs_status_t status = bounded([&] {
            if (how == 0) {
                return uct_ep_put_short(m_ep, slot, 8, addr, rkey);
            } else if (how == 1) {
                ssize_t len = uct_ep_put_bcopy(m_ep, pack_word, slot, addr,
                                               rkey);
                return (len < 0) ? (ucs_status_t)len : UCS_OK;
            }
            return uct_ep_put_zcopy(m_ep, &iov, 1, addr, rkey, NULL);
        });
        ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
                << ucs_status_string(status);
    }

    // Gets word w into a slot (get_zcopy and get_bcopy in turn); the slot
    // and the get's completion.
    std::pair<uint64_t*, op_comp*> get_word(unsigned w) {
        EXPECT_LT(m_nslots, m_vals->data.size() / 8);
        uint64_t *slot = (uint64_t*)m_vals->data.data() + m_nslots;
        bool zcopy     = (m_nslots++ % 2) == 0;
        uct_iov_t iov  = { slot, 8, m_vals->memh, 0, 1 };
        m_comps.push_back(op_comp{{op_done, 1, UCS_OK}, UCS_OK, false, 0,
                                  nullptr});
        op_comp *c = &m_comps.back();
        ucs_status_t status = bounded([&] {
            return zcopy ? uct_ep_get_zcopy(m_ep, &iov, 1, (uintptr_t)word(w),
                                            m_words->rkey.rkey, &c->comp) :
                           uct_ep_get_bcopy(m_ep, unpack_get, slot, 8,
                                            (uintptr_t)word(w),
                                            m_words->rkey.rkey, &c->comp);
        });
        EXPECT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS));
        c->done = (status != UCS_INPROGRESS);
        return { slot, c };
    }

    // A flush and what its callback found (flush_seen): what of ops
    // first..last-1 was not done yet ("" if nothing).
    struct flush_check {
        uct_completion_t             comp;
        syncmem_reconnect_order_test *self;
        size_t                       first, last;
        bool                         called;
        std::string                  missing;
    };

    static void flush_seen(uct_completion_t *c) {
        flush_check *f = ucs_container_of(c, flush_check, comp);
        f->called      = true;
        f->missing     = f->self->not_done(f->first, f->last);
    }

    // The first of ops first..last-1 whose completion was not called, or
    // whose put is not (all) in the target memory, or whose get is not
    // (all) in its buffer; "" if none.
    std::string not_done(size_t first, size_t last) {
        for (size_t j = first; j < last; ++j) {
            const op &o       = *m_ops[j];
            const uint8_t *d  = m_dst->data.data() + o.offset;
            const uint8_t *b  = m_back->data.data() + o.offset;
            const uint8_t *s  = m_src->data.data() + o.region * REGION +
                                (o.n % 7) * 8;
            std::string which = "op " + std::to_string(o.n) + " (kind " +
                                std::to_string(o.k) + ")";
            if (!o.comp->done) {
                return which + ": no completion yet";
            }
            for (size_t i = 0; i < o.length; ++i) {
                if ((o.k <= PUT_ZCOPY) && (d[i] != put_byte(o, i))) {
                    return which + ": put byte " + std::to_string(i) +
                           " not in the target";
                }
                if (((o.k == GET_BCOPY) || (o.k == GET_ZCOPY)) &&
                    (b[i] != s[i])) {
                    return which + ": get byte " + std::to_string(i) +
                           " not in the buffer";
                }
            }
        }
        return "";
    }

    // 1. Completions in posting order: runs of ops that each have a
    // completion, the QP failed in the middle of each run and, every other
    // round, again right after the reconnect (on Soft-RoCE of 6.12, which
    // runs requests in a work queue, the replayed ones still in flight: the
    // same request fails again, and by design gets a new QP). check_all:
    // every completion came, in posting order (check_order), with the
    // right data, and no atomic ran twice.
    void completions_in_order() {
        post_completing(12);
        ASSERT_EQ(UCS_OK, flush_wait());
        for (unsigned round = 0; round < 6; ++round) {
            SCOPED_TRACE("round " + std::to_string(round));
            post_completing(4 * round);
            fail();
            post_completing(20);
            check_resume(reconnected());
            if (round % 2) {
                fail();
                post_completing(10);
                reconnected();
            }
            post_completing(10);
            // UCS_OK: a lost atomic had its own completion to say so
            ASSERT_EQ(UCS_OK, flush_wait());
        }
        check_all();
    }

    // 2. A fenced put after replayed ones: puts of A_i to a word (after a
    // BIG put; with a get among them if m_gets), a fence, a put of B, all
    // posted again by the reconnect, or (odd rounds) the fence and B after
    // the replay. After the flush the word holds B: no replayed earlier
    // put overtook it.
    void fenced_put_after_replayed_ones() {
        for (unsigned r = 0; r < 8; ++r) {
            SCOPED_TRACE("round " + std::to_string(r));
            uint64_t b = 0xb0b0000000000000ull | r;
            for (unsigned i = 0; i < r % 3; ++i) {
                put_word(r, 0xa0a0000000000000ull | r); // done before
            }
            fail();
            post(PUT_ZCOPY, BIG);
            for (unsigned i = 0; i < 2 + r % 4; ++i) {
                if (m_gets && (i == 1)) {
                    post(GET_ZCOPY);
                }
                put_word(r, 0xa0a0000000000000ull | (i << 8) | r);
            }
            if (r % 2) {
                wait_reconnecting();
            }
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
            put_word(r, b);
            check_resume(reconnected());
            ASSERT_EQ(UCS_OK, flush_wait());
            EXPECT_EQ(b, *word(r)) << std::hex << "holds " << *word(r);
        }
        check_all();
    }

    // 2'. A get after a fence sees the put before it: puts of Y_i then X
    // to a word, fence, get it, fence, put Z, fence, get it again, all
    // posted again by the reconnect; with m_gets a get among the Y_i, and
    // in odd rounds the fences and what follows after the replay (always
    // without m_gets: a get posted again never resumes). The gets return X
    // and Z, and the word holds Z.
    void get_after_fence_sees_the_put() {
        for (unsigned r = 0; r < 8; ++r) {
            SCOPED_TRACE("round " + std::to_string(r));
            uint64_t x = 0x0d0d000000000000ull | r;
            uint64_t z = 0x0f0f000000000000ull | r;
            fail();
            post(PUT_ZCOPY, BIG);
            for (unsigned i = 0; i < 1 + r % 4; ++i) {
                if (m_gets && (i == 0)) {
                    post(GET_BCOPY);
                }
                put_word(r, 0x0c0c000000000000ull | (i << 8) | r);
            }
            put_word(r, x);
            if (!m_gets || (r % 2)) {
                wait_reconnecting();
            }
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
            auto g1 = get_word(r);
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
            put_word(r, z);
            ASSERT_EQ(UCS_OK, uct_ep_fence(m_ep, 0));
            auto g2 = get_word(r);
            check_resume(reconnected());
            ASSERT_EQ(UCS_OK, flush_wait());
            ASSERT_TRUE(g1.second->done && g2.second->done);
            EXPECT_EQ(UCS_OK, g1.second->status);
            EXPECT_EQ(UCS_OK, g2.second->status);
            EXPECT_EQ(x, *g1.first) << std::hex << "got " << *g1.first;
            EXPECT_EQ(z, *g2.first) << std::hex << "got " << *g2.first;
            EXPECT_EQ(z, *word(r)) << std::hex << "holds " << *word(r);
        }
        check_all();
    }

    // 3. A flush covers everything before it: puts and AMs of every size
    // (and gets), the QP failed among them, then a flush (and, odd rounds,
    // more ops after it), all posted again by the reconnect. When the
    // flush calls back with UCS_OK, every op before it has completed and
    // every put's bytes are in the target memory (checked in the callback:
    // flush_seen), and every AM is in the receiver's completion queue
    // (draining it without progress of the sender delivers each, once).
    void flush_covers_everything_before_it() {
        static const kind kinds[] = { PUT_SHORT, AM_SHORT, GET_BCOPY,
                                      PUT_BCOPY, AM_BCOPY, PUT_ZCOPY,
                                      GET_ZCOPY, AM_ZCOPY };
        auto post_n = [&](unsigned n, unsigned r) {
            for (unsigned i = 0; i < n; ++i) {
                kind k = kinds[(i + r) % 8];
                if (wanted(k)) {
                    post(k);
                }
            }
        };
        for (unsigned r = 0; r < 8; ++r) {
            SCOPED_TRACE("round " + std::to_string(r));
            size_t first = m_ops.size();
            post_n(3 * r, r);
            fail();
            post(PUT_ZCOPY, BIG);
            post_n(24, r);
            m_flushes.push_back({{flush_seen, 1, UCS_OK}, this, first,
                                 m_ops.size(), false, ""});
            flush_check *f = &m_flushes.back();
            ASSERT_EQ(UCS_INPROGRESS,
                      bounded([&] { return uct_ep_flush(m_ep, 0, &f->comp); }));
            if (r % 2) {
                post_n(8, r); // after the flush: not its to wait for
            }
            for (long i = 0; (i < 5000000) && !f->called; ++i) {
                progress();
            }
            ASSERT_TRUE(f->called) << "the flush never completed";
            EXPECT_EQ(UCS_OK, f->comp.status);
            EXPECT_EQ("", f->missing) << "when the flush completed";
            for (unsigned idle = 0, i = 0; (idle < 10) && (i < 100000); ++i) {
                idle = uct_iface_progress(m_receiver) ? 0 : idle + 1;
            }
            for (size_t j = first; j < f->last; ++j) {
                auto it = m_am_seen.find(j);
                EXPECT_TRUE(!m_am_sent.count(j) || ((it != m_am_seen.end()) &&
                                                    (it->second.size() == 1)))
                        << "AM " << j << " not delivered once";
            }
            check_resume(reconnected());
            ASSERT_EQ(UCS_OK, flush_wait());
        }
        check_all();
    }

    void TearDown() override {
        printf("%zu operations, %zu completions, %u resumes, %u new QPs\n",
               m_ops.size(), m_order.size(), m_resumes, m_new_qps);
        if (m_gets && !HasFatalFailure()) {
            EXPECT_GT(m_new_qps, 0u) << "no get was ever in flight at a"
                                        " failure: the new-QP path untested";
        }
        syncmem_reconnect_test::TearDown();
    }

    unsigned m_resumes   = 0, m_new_qps = 0; // counted by reconnected()
    uint32_t m_fail_qpn  = 0;
    unsigned m_fail_gen  = 0;
    buffer *m_words      = nullptr, *m_vals = nullptr;
    size_t m_nslots      = 0;
    std::deque<op_comp> m_comps;        // of get_word
    std::deque<flush_check> m_flushes;
};

TEST_F(syncmem_reconnect_order_test, completions_in_posting_order_resumed)
{
    m_gets    = false;
    m_atomics = false;
    completions_in_order();
}

TEST_F(syncmem_reconnect_order_test, completions_in_posting_order_gets)
{
    completions_in_order();
}

TEST_F(syncmem_reconnect_order_test, fenced_put_after_replayed_ones_resumed)
{
    m_gets    = false;
    m_atomics = false;
    fenced_put_after_replayed_ones();
}

TEST_F(syncmem_reconnect_order_test, fenced_put_after_replayed_ones_gets)
{
    fenced_put_after_replayed_ones();
}

TEST_F(syncmem_reconnect_order_test, get_after_fence_sees_the_put_resumed)
{
    m_gets    = false;
    m_atomics = false;
    get_after_fence_sees_the_put();
}

TEST_F(syncmem_reconnect_order_test, get_after_fence_sees_the_put_gets)
{
    get_after_fence_sees_the_put();
}

TEST_F(syncmem_reconnect_order_test, flush_covers_everything_before_resumed)
{
    m_gets    = false;
    m_atomics = false;
    flush_covers_everything_before_it();
}

TEST_F(syncmem_reconnect_order_test, flush_covers_everything_before_gets)
{
    flush_covers_everything_before_it();
}
