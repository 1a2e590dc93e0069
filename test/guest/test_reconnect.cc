// SPDX-License-Identifier: BSD-3-Clause
// Reconnect and resume (syncmem_reconnect.c) on one host, with the QP
// failures forced at chosen moments: a second failure right after a resume,
// with every kind and size class of operation in flight, then every byte
// and every completion status checked. Order across a reconnect:
// test_reconnect_order.cc. Across a wire see test_wire.cc.
#include "syncmem_reconnect_test.h"

#include <unistd.h>

// The QP fails, is resumed, and fails again right after the resume (after
// `delay` progress calls: some replayed requests done, others in flight),
// in every round with a different delay, with puts and active messages of
// every size class in flight, fenced; then with atomics only (answered from
// the peer's responder resources). Both reconnects resume (no get, nor an
// atomic after a put or send, is in flight) unless the second failure comes
// at the request the resume started from (then a new QP, by design), or,
// with atomics only, an empty write is in flight before an atomic (a
// fence's after an unsignalled atomic, or the watchdog's: a write all the
// same, whose duplicate's plain ACK Soft-RoCE may take for the atomic's
// reply, uct_syncmem_replay_resume_risk); every operation succeeds exactly
// once, or, an atomic of unknown outcome on a new QP, fails.
class syncmem_reconnect_resume_test
    : public syncmem_reconnect_test,
      public ::testing::WithParamInterface<bool> {
protected:
    // No watchdog check: at one, an endpoint whose last request is
    // unsignalled gets an empty write (syncmem_watchdog.c), and that write
    // among the atomics is a write before an atomic of unknown outcome,
    // which is never resumed (uct_syncmem_replay_resume_risk). A check
    // comes from the timer (RC_STALL_TIMEOUT, OP_TIMEOUT) or from a ring
    // that must grow (TX_RING_MIN): on a slow guest, 1 run in 10 had one.
    config_mods_t sender_mods() const override {
        return {{"RC_STALL_TIMEOUT", "inf"}, {"TX_RING_MIN", "256"}};
    }
};

TEST_P(syncmem_reconnect_resume_test, second_failure_right_after_a_resume)
{
    const unsigned delays[] = { 0, 1, 2, 3, 5, 8, 13, 21, 34, 0, 1, 2 };
    const std::string empty_write = "an atomic of unknown outcome after a"
                                    " put or send";
    unsigned both_resumed         = 0;

    m_gets    = false;
    m_atomics = GetParam();
    m_others  = !GetParam();
    post_some(24);
    ASSERT_EQ(UCS_OK, flush_wait());
    for (unsigned delay : delays) {
        SCOPED_TRACE("delay " + std::to_string(delay));
        bool resumed, again;
        m_no_resume.clear();
        fail_twice(delay, &resumed, &again);
        both_resumed += resumed;
        for (const std::string &why : m_no_resume) {
            EXPECT_TRUE(again || (GetParam() && (why == empty_write)))
                    << "a new QP, with no get in flight: " << why;
        }
    }
    // (an empty write in flight is the exception: 1 round in 30 on 6.12)
    EXPECT_GE(both_resumed, 6u) << "of " << ucs_static_array_size(delays);
    check_all();
    printf("%zu operations, %u reconnects\n", m_ops.size(),
           uct_syncmem_ep_reconnects(m_ep));
}

INSTANTIATE_TEST_SUITE_P(puts_and_ams_or_atomics, syncmem_reconnect_resume_test,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "atomics" :
                                                             "puts_and_ams");
                         });

// The same with gets in flight too: a reconnect then never resumes the QP
// pair (syncmem_reconnect.c says why); no operation completes with wrong
// data, none runs twice, and only atomics of unknown outcome may fail.
TEST_F(syncmem_reconnect_test, failures_with_gets_in_flight_lose_no_data)
{
    const unsigned delays[] = { 0, 1, 3, 8, 21, 0 };

    post_some(24);
    ASSERT_EQ(UCS_OK, flush_wait());
    for (unsigned delay : delays) {
        SCOPED_TRACE("delay " + std::to_string(delay));
        bool resumed;
        fail_twice(delay, &resumed);
    }
    check_all();
    printf("%zu operations, %u reconnects\n", m_ops.size(),
           uct_syncmem_ep_reconnects(m_ep));
}

// An endpoint idle at two watchdog checks gives its whole replay ring back
// (uct_syncmem_replay_park): an idle endpoint keeps no request, so it costs
// no ring. Its next operation takes a ring on its way and goes out at once
// (no UCS_ERR_NO_RESOURCE, no progress); a keepalive check (uct_ep_check)
// of a parked endpoint still sends its empty write; and a QP that broke
// while its endpoint was parked reconnects with the operations that find
// it so. Every operation, of every kind, lands once with its data.
class syncmem_replay_park_test : public syncmem_reconnect_test {
protected:
    // (a check every 50 ms: RC_STALL_TIMEOUT / 4)
    config_mods_t sender_mods() const override {
        return {{"RC_STALL_TIMEOUT", "200ms"}};
    }

    // Progresses (bounded) until the endpoint's ring is parked.
    bool wait_parked() {
        for (long i = 0; i < 100000; ++i) {
            if (sep()->replay.ring == nullptr) {
                return true;
            }
            progress();
            usleep(100);
        }
        return false;
    }
};

TEST_F(syncmem_replay_park_test, idle_endpoint_parks_its_ring_and_sends_again)
{
    post_some(24);
    ASSERT_EQ(UCS_OK, flush_wait());
    ASSERT_TRUE(wait_parked()) << "never parked: " << ep_state();
    EXPECT_EQ(0, sep()->tx.available) << "a parked endpoint has no room";

    // (to the last 64 bytes, which no operation of the workload takes)
    uintptr_t spare = (uintptr_t)m_dst->data.data() + m_dst->data.size() - 64;
    uint64_t word   = 0x5eed;
    EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, &word, sizeof(word), spare,
                                       m_dst->rkey.rkey))
            << "waited for a ring";
    EXPECT_NE(nullptr, sep()->replay.ring) << "took no ring on its way";

    post_some(24);
    EXPECT_NE(nullptr, sep()->replay.ring);
    ASSERT_EQ(UCS_OK, flush_wait());
    ASSERT_TRUE(wait_parked()) << "never parked again: " << ep_state();

    ASSERT_EQ(UCS_OK, uct_ep_check(m_ep, 0, NULL));
    EXPECT_NE(nullptr, sep()->replay.ring) << "the keepalive sent nothing";
    ASSERT_EQ(UCS_OK, flush_wait());
    ASSERT_TRUE(wait_parked()) << "never parked after the check: "
                               << ep_state();

    unsigned gen = uct_syncmem_ep_reconnects(m_ep);
    ASSERT_EQ(UCS_OK, uct_syncmem_ep_inject_qp_error(m_ep));
    post_some(24);
    ASSERT_TRUE(wait_reconnected(gen)) << "no reconnect: " << ep_state();
    ucs_status_t status = flush_wait();
    // (an atomic of unknown outcome on a new QP is the flush's to report)
    ASSERT_TRUE((status == UCS_OK) || (status == UCS_ERR_CONNECTION_RESET))
            << ucs_status_string(status);
    check_all();
    uint64_t landed = 0;
    memcpy(&landed, (void*)spare, sizeof(landed));
    EXPECT_EQ(word, landed);
}

// While more endpoints than TX_IDLE_RINGS hold a ring (here: more than
// none), one whose last request completes gives its ring back at once, not
// at the watchdog's second idle check (seconds away at the defaults), and
// takes one again with its next operation, of any kind, which goes out at
// once (uct_syncmem_ep_unpark). Every operation lands once with its data.
class syncmem_idle_rings_test : public syncmem_reconnect_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"TX_IDLE_RINGS", "0"}};
    }
};

TEST_F(syncmem_idle_rings_test, idle_endpoint_parks_when_its_last_completes)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(m_ep->iface,
                                                uct_syncmem_iface_t);

    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        post_some(24);
        ASSERT_EQ(UCS_OK, flush_wait());
        EXPECT_EQ(nullptr, sep()->replay.ring) << ep_state();
        EXPECT_EQ(0, sep()->tx.available);
        EXPECT_EQ(0u, iface->rings);
    }
    for (int k = 0; k < NUM_KINDS; ++k) {
        SCOPED_TRACE("kind " + std::to_string(k));
        unsigned no_resource = m_no_resource;
        post((kind)k);
        EXPECT_EQ(no_resource, m_no_resource) << "waited for a ring";
        ASSERT_EQ(UCS_OK, flush_wait());
        EXPECT_EQ(nullptr, sep()->replay.ring) << ep_state();
    }
    check_all();
}
