// SPDX-License-Identifier: BSD-3-Clause
// Reconnect and resume (syncmem_reconnect.c) on one host, with the QP
// failures forced at chosen moments: a second failure right after a resume,
// with every kind and size class of operation in flight, then every byte
// and every completion status checked. Order across a reconnect:
// test_reconnect_order.cc. Across a wire see test_wire.cc.
#include "syncmem_reconnect_test.h"

// The QP fails, is resumed, and fails again right after the resume (after
// `delay` progress calls: some replayed requests done, others in flight),
// in every round with a different delay, with puts and active messages of
// every size class in flight, fenced; then with atomics only (answered from
// the peer's responder resources). Both reconnects resume (no get, nor an
// atomic after a put or send, is in flight) unless the second failure comes
// at the request the resume started from (then a new QP, by design); every
// operation succeeds exactly once, or, an atomic of unknown outcome on a new
// QP, fails.
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

    m_gets    = false;
    m_atomics = GetParam();
    m_others  = !GetParam();
    post_some(24);
    ASSERT_EQ(UCS_OK, flush_wait());
    for (unsigned delay : delays) {
        SCOPED_TRACE("delay " + std::to_string(delay));
        bool resumed, again;
        fail_twice(delay, &resumed, &again);
        EXPECT_TRUE(resumed || again) << "a new QP, with no get in flight";
    }
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
