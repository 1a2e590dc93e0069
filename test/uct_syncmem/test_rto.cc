// SPDX-License-Identifier: BSD-3-Clause
// The RC timeout estimate of UCX_SYNCMEM_RC_TIMEOUT=auto
// (uct_syncmem/syncmem_rto.c): RFC 6298's shape on the round trips an iface
// measures, in the IB timeout's 4.096 us * 2^N steps, within its bounds.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_rto.h>
}

#include <cmath>

namespace {

uct_syncmem_rto_t fresh()
{
    uct_syncmem_rto_t rto;

    uct_syncmem_rto_init(&rto, UCT_SYNCMEM_RTO_EXP_MIN,
                         UCT_SYNCMEM_RTO_EXP_MAX, UCT_SYNCMEM_RTO_EXP_INIT);
    return rto;
}

// A round trip of rtt seconds, jitter up to +-jitter, n times; the number
// of times the exponent changed.
unsigned feed(uct_syncmem_rto_t *rto, double rtt, double jitter, unsigned n)
{
    unsigned changes = 0;

    for (unsigned i = 0; i < n; ++i) {
        double j = jitter * (((i * 7919u) % 200u) / 100.0 - 1.0);
        changes += uct_syncmem_rto_sample(rto, rtt + j);
    }
    return changes;
}

} // namespace

// 4.096 us * 2^N: a time on a step is that step, a hair above is the next;
// what IB cannot encode (0 is infinite, above 31) is clamped.
TEST(rto, quantised_to_ib_steps)
{
    for (unsigned n = 1; n <= 31; ++n) {
        double t = UCT_SYNCMEM_RTO_TICK * std::ldexp(1.0, n);
        EXPECT_EQ(n, uct_syncmem_rto_exp_of(t)) << t;
        EXPECT_DOUBLE_EQ(t, uct_syncmem_rto_exp_sec(n));
        if (n < 31) {
            EXPECT_EQ(n + 1, uct_syncmem_rto_exp_of(t * 1.001)) << t;
        }
    }
    EXPECT_EQ(1, uct_syncmem_rto_exp_of(0));
    EXPECT_EQ(1, uct_syncmem_rto_exp_of(-1));
    EXPECT_EQ(1, uct_syncmem_rto_exp_of(NAN));
    EXPECT_EQ(31, uct_syncmem_rto_exp_of(1e9));
    EXPECT_EQ(31, uct_syncmem_rto_exp_of(INFINITY));
    // the fixed values users set: the old default, UCX's tests, rc_verbs'
    EXPECT_EQ(14, uct_syncmem_rto_exp_of(0.067));
    EXPECT_EQ(12, uct_syncmem_rto_exp_of(0.010));
    EXPECT_EQ(18, uct_syncmem_rto_exp_of(1.0));
}

// Before any sample: the old fixed default; the bounds hold whatever the
// samples say, and a sample that is no time (a clock gone back, NaN) is
// not one.
TEST(rto, bounds)
{
    uct_syncmem_rto_t rto = fresh();

    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_INIT, rto.exp);
    EXPECT_DOUBLE_EQ(uct_syncmem_rto_exp_sec(UCT_SYNCMEM_RTO_EXP_INIT),
                     uct_syncmem_rto_value(&rto));
    EXPECT_EQ(0, uct_syncmem_rto_sample(&rto, -1.0));
    EXPECT_EQ(0, uct_syncmem_rto_sample(&rto, NAN));
    EXPECT_EQ(0u, rto.samples);

    feed(&rto, 0, 0, 100);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    feed(&rto, 1000.0, 0, 100);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MAX, rto.exp);

    // the bounds: 67 ms (the old fixed default) and 2.1 s
    EXPECT_NEAR(0.0671, uct_syncmem_rto_exp_sec(UCT_SYNCMEM_RTO_EXP_MIN),
                0.0001);
    EXPECT_NEAR(2.147, uct_syncmem_rto_exp_sec(UCT_SYNCMEM_RTO_EXP_MAX),
                0.001);

    // an initial value outside the bounds is brought inside them
    uct_syncmem_rto_init(&rto, 12, 19, 25);
    EXPECT_EQ(19, rto.exp);
    uct_syncmem_rto_init(&rto, 12, 19, 3);
    EXPECT_EQ(12, rto.exp);
    // a fixed value: nothing moves it
    uct_syncmem_rto_init(&rto, 12, 12, 12);
    feed(&rto, 1.0, 0, 10);
    EXPECT_EQ(12, rto.exp);
    EXPECT_EQ(12, uct_syncmem_rto_backoff_exp(&rto, 5));
}

// The first sample sets the exponent from the timeout it gives (SRTT + 4 *
// RTTVAR = 3 times it), one step below the initial one too: the initial
// one was not measured, and the step-edge rule is for measured ones.
TEST(rto, first_sample_sets_the_exponent)
{
    uct_syncmem_rto_t rto;

    uct_syncmem_rto_init(&rto, 10, 19, 14);
    // 8.4 ms (a handshake on 6.1): 25 ms, 2^13
    EXPECT_EQ(1, uct_syncmem_rto_sample(&rto, 0.0084));
    EXPECT_EQ(13, rto.exp);

    rto = fresh();
    EXPECT_EQ(1, uct_syncmem_rto_sample(&rto, 0.2)); // 0.6 s: 2^18
    EXPECT_EQ(18, rto.exp);
}

// A quiet link (Soft-RoCE on an idle host: ~100 us, a little jitter): the
// exponent stays at the lower bound, without a change.
TEST(rto, quiet_link)
{
    uct_syncmem_rto_t rto = fresh();

    uct_syncmem_rto_sample(&rto, 100e-6);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_EQ(0u, feed(&rto, 100e-6, 50e-6, 10000));
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_NEAR(100e-6, rto.srtt, 30e-6);
    EXPECT_LT(uct_syncmem_rto_value(&rto),
              uct_syncmem_rto_exp_sec(UCT_SYNCMEM_RTO_EXP_MIN));
}

// A busy host (oversubscribed ranks: the peer's softirq starved, round
// trips growing from 100 us to 300 ms): the timeout follows from above,
// never shorter than the round trips it just saw, so that nothing is sent
// again for being late; it never passes the upper bound; and it goes up
// step by step, never down, while they grow.
TEST(rto, busy_link_samples_growing)
{
    uct_syncmem_rto_t rto = fresh();
    uint8_t prev          = 0;
    unsigned changes      = 0;

    feed(&rto, 100e-6, 0, 10);
    prev = rto.exp;
    for (double rtt = 100e-6; rtt < 0.3; rtt *= 1.05) {
        changes += uct_syncmem_rto_sample(&rto, rtt);
        EXPECT_GE(rto.exp, prev) << rtt;
        EXPECT_LE(rto.exp, UCT_SYNCMEM_RTO_EXP_MAX);
        if (rto.exp < UCT_SYNCMEM_RTO_EXP_MAX) {
            EXPECT_GE(uct_syncmem_rto_exp_sec(rto.exp), rtt) << rtt;
        }
        prev = rto.exp;
    }
    EXPECT_GE(uct_syncmem_rto_exp_sec(rto.exp), 0.3);
    EXPECT_GE(changes, 3u);
    EXPECT_LE(changes, (unsigned)(UCT_SYNCMEM_RTO_EXP_MAX -
                                  UCT_SYNCMEM_RTO_EXP_MIN));

    // the load goes away: back to the lower bound, in a bounded number of
    // samples (RTTVAR loses a quarter a sample)
    unsigned n = 0;
    while ((rto.exp > UCT_SYNCMEM_RTO_EXP_MIN) && (n < 1000)) {
        uct_syncmem_rto_sample(&rto, 100e-6);
        ++n;
    }
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_LT(n, 60u);
}

// A dead link or peer: no sample comes, each failure (retries exceeded,
// stall) doubles the timeout of the endpoint's next QP, up to the upper
// bound and never past it, however many come.
TEST(rto, dead_link_backs_off_to_the_bound)
{
    uct_syncmem_rto_t rto = fresh();

    feed(&rto, 100e-6, 0, 10);
    ASSERT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, uct_syncmem_rto_backoff_exp(&rto, 0));
    for (unsigned b = 1; b < 40; ++b) {
        unsigned expect = ((UCT_SYNCMEM_RTO_EXP_MIN + b) <
                           UCT_SYNCMEM_RTO_EXP_MAX) ?
                          (UCT_SYNCMEM_RTO_EXP_MIN + b) :
                          UCT_SYNCMEM_RTO_EXP_MAX;
        EXPECT_EQ(expect, uct_syncmem_rto_backoff_exp(&rto, b)) << b;
    }
    EXPECT_EQ((unsigned)(UCT_SYNCMEM_RTO_EXP_MAX - UCT_SYNCMEM_RTO_EXP_MIN),
              uct_syncmem_rto_backoff_max(&rto));
    // backoff does not touch the estimate: other endpoints keep theirs
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);

    // where the estimate is high already, backoff still stops at the bound
    feed(&rto, 0.5, 0, 20);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MAX, uct_syncmem_rto_backoff_exp(&rto, 3));
}

// A link flap: a request that was in flight across it measures the outage
// (0.5 s; the device retransmitted it, and we cannot tell), the endpoint
// backs off twice meanwhile; once the link is back its samples are quiet
// again (the endpoint's backoff is cleared by its first sample) and the
// timeout comes back to the lower bound within a bounded number of them.
TEST(rto, flap_recovers_after_backoff)
{
    uct_syncmem_rto_t rto = fresh();

    feed(&rto, 100e-6, 20e-6, 100);
    ASSERT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN + 2,
              uct_syncmem_rto_backoff_exp(&rto, 2));

    EXPECT_EQ(1, uct_syncmem_rto_sample(&rto, 0.5));
    EXPECT_GT(rto.exp, UCT_SYNCMEM_RTO_EXP_MIN);
    EXPECT_LE(rto.exp, UCT_SYNCMEM_RTO_EXP_MAX);

    unsigned n = 0;
    while ((rto.exp > UCT_SYNCMEM_RTO_EXP_MIN) && (n < 1000)) {
        uct_syncmem_rto_sample(&rto, 100e-6);
        ++n;
    }
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, rto.exp);
    EXPECT_LT(n, 40u);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, uct_syncmem_rto_backoff_exp(&rto, 0));
}

// At a step's edge the exponent does not go back and forth with the load:
// round trips that take the timeout just under and just over the 2^15
// step's time, in turns, leave it at the longer's step; it comes
// down only once the timeout fits twice in the step below, then to the step
// it needs.
TEST(rto, no_flutter_at_a_step_edge)
{
    uct_syncmem_rto_t rto = fresh();
    double edge           = uct_syncmem_rto_exp_sec(15);
    unsigned changes      = 0;

    feed(&rto, edge * 1.1, 0, 100);
    ASSERT_GE(rto.exp, 16); /* the first sample's variance is half of it */
    for (unsigned turn = 0; turn < 10; ++turn) {
        changes += feed(&rto, edge * 0.9, 0, 40);
        changes += feed(&rto, edge * 1.1, 0, 40);
    }
    EXPECT_LE(changes, 2u); /* the first sample's steps given back */
    EXPECT_EQ(16, rto.exp);
    // less than half: down (the drop's variance first takes it up one)
    feed(&rto, edge * 0.45, 0, 100);
    EXPECT_LT(rto.exp, 16);
}
