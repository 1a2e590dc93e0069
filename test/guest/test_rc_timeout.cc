// SPDX-License-Identifier: BSD-3-Clause
// UCX_SYNCMEM_RC_TIMEOUT: 'auto' measures the round trips and programs what
// it finds into the QPs (at connect; in RTS where the kernel takes it); a
// fixed value is programmed as it is and nothing is measured.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_rto.h"
#include "uct_syncmem/syncmem_qp.h"
}

#include <cstring>
#include <string>
#include <sys/utsname.h>

namespace {

// The RC timeout exponent the device holds for a QP.
int qp_timeout(struct ibv_qp *qp)
{
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;

    return ibv_query_qp(qp, &attr, IBV_QP_TIMEOUT, &init) ? -1 : attr.timeout;
}

std::string kernel_release()
{
    struct utsname u;

    return uname(&u) ? "" : u.release;
}

bool starts_with(const std::string &s, const char *prefix)
{
    return s.compare(0, strlen(prefix), prefix) == 0;
}

} // namespace

class syncmem_rc_timeout_test : public syncmem_rma_test {
protected:
    // n round trips: a put and a flush, each waited for
    void round_trips(unsigned n) {
        buffer *dst    = alloc(64, 0);
        uint64_t value = 0;

        for (unsigned i = 0; i < n; ++i) {
            ++value;
            ASSERT_EQ(UCS_OK, retry([&] {
                return uct_ep_put_short(m_ep, &value, sizeof(value),
                                        (uintptr_t)dst->data.data(),
                                        dst->rkey.rkey);
            }));
            ASSERT_NO_FATAL_FAILURE(flush(m_ep));
        }
    }

    uct_syncmem_iface_t *sender() const {
        return ucs_derived_of(m_sender, uct_syncmem_iface_t);
    }

    uct_syncmem_ep_t *ep() const {
        return ucs_derived_of(m_ep, uct_syncmem_ep_t);
    }
};

// The default: the first QP holds the initial (and least) 67 ms; round
// trips on a quiet guest (well under a millisecond) keep the estimate at
// that lower bound. Then a slow round trip (half a second: a busy host)
// raises it, and the QP follows at its next sample (within
// UCT_SYNCMEM_RTT_EVERY round trips) where the kernel changes a connected
// QP's timeout, and keeps what it had where it refuses; quiet round trips bring it back down. A new QP starts from the
// estimate.
TEST_F(syncmem_rc_timeout_test, auto_measures_and_programs_the_qp)
{
    uct_syncmem_iface_t *iface   = sender();
    const uct_syncmem_rto_t *est = &iface->rto.est;

    ASSERT_TRUE(iface->rto.adaptive);
    EXPECT_LE(est->samples, 1u); // the handshake, if it was quick
    EXPECT_GE(est->exp, UCT_SYNCMEM_RTO_EXP_MIN);
    EXPECT_LE(est->exp, UCT_SYNCMEM_RTO_EXP_INIT); // never longer
    EXPECT_EQ(est->exp, ep()->rtt.exp);
    EXPECT_EQ(est->exp, qp_timeout(ep()->qp));
    double handshake = est->last;
    int connected    = ep()->rtt.exp;

    // (one signalled request in UCT_SYNCMEM_RTT_EVERY is timed: 40; a
    // long one found with few progress calls between does not count, as
    // under ASan: 39 once)
    ASSERT_NO_FATAL_FAILURE(round_trips(40 * UCT_SYNCMEM_RTT_EVERY));
    EXPECT_GE(est->samples, 30u);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, est->exp);
    EXPECT_EQ(0, ep()->rtt.backoff);
    EXPECT_LT(est->srtt, 0.067);
    EXPECT_EQ(ep()->rtt.exp, qp_timeout(ep()->qp));
    printf("SYNCMEM-MEASURE rc_timeout auto: kernel %s: handshake %.3f ms,"
           " then %lu samples: SRTT %.3f ms, RTTVAR %.3f ms, exponent %u"
           " (%.1f ms)\n", kernel_release().c_str(), handshake * 1e3,
           (unsigned long)est->samples, est->srtt * 1e3, est->rttvar * 1e3,
           est->exp, uct_syncmem_rto_exp_sec(est->exp) * 1e3);

    // a busy moment
    uct_syncmem_rto_sample(&iface->rto.est, 0.5);
    uint8_t busy = est->exp;
    EXPECT_GT(busy, UCT_SYNCMEM_RTO_EXP_MIN + 2);
    ASSERT_NO_FATAL_FAILURE(round_trips(UCT_SYNCMEM_RTT_EVERY));
    int held = qp_timeout(ep()->qp);
    EXPECT_EQ(ep()->rtt.exp, held);
    if (iface->rto.rts_modify) {
        EXPECT_EQ(uct_syncmem_ep_rc_timeout(iface, ep()), held);
        EXPECT_GT(held, UCT_SYNCMEM_RTO_EXP_MIN);
    } else {
        EXPECT_EQ(connected, held); // what it was connected with
    }
    uct_ep_h second = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, second);
    uct_syncmem_ep_t *sep = ucs_derived_of(second, uct_syncmem_ep_t);
    EXPECT_EQ(sep->rtt.exp, qp_timeout(sep->qp));
    EXPECT_GE(sep->rtt.exp, UCT_SYNCMEM_RTO_EXP_MIN + 2);

    // quiet again: back to the lower bound, and so is the QP where the
    // kernel allows it
    ASSERT_NO_FATAL_FAILURE(round_trips(40 * UCT_SYNCMEM_RTT_EVERY));
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_MIN, est->exp);
    EXPECT_EQ(iface->rto.rts_modify ? UCT_SYNCMEM_RTO_EXP_MIN : connected,
              qp_timeout(ep()->qp));
    printf("SYNCMEM-MEASURE rc_timeout auto: after a 0.5 s sample 2^%u, the"
           " QP held 2^%d: a connected QP's timeout is %s\n", busy, held,
           iface->rto.rts_modify ? "changed in RTS" :
                                   "kept (the kernel refuses IB_QP_TIMEOUT"
                                   " in RTS)");
}

// Which kernels change a connected QP's RC timeout (ibv_modify_qp with
// IBV_QP_TIMEOUT alone, in RTS): Soft-RoCE on Linux 6.1 refuses
// (ib_modify_qp_is_ok has no IB_QP_TIMEOUT for RTS to RTS, and rxe checks
// every modify against it), 6.12 takes it (rxe checks the table only when
// the state is in the mask). syncmem_ep_tx.c relies on the refusal being
// an error, not a silent no-op.
TEST_F(syncmem_rc_timeout_test, which_kernels_change_a_connected_qps_timeout)
{
    std::string release = kernel_release();
    int before          = qp_timeout(ep()->qp);
    int ret             = uct_syncmem_qp_set_timeout(ep()->qp, 16);
    int after           = qp_timeout(ep()->qp);

    printf("SYNCMEM-MEASURE rc_timeout rts_modify: kernel %s: %s (the QP"
           " holds 2^%d, was 2^%d)\n", release.c_str(),
           ret ? strerror(ret) : "taken", after, before);
    EXPECT_EQ(ret ? before : 16, after);
    if (starts_with(release, "6.1.")) {
        EXPECT_EQ(EINVAL, ret) << release;
    } else if (starts_with(release, "6.12.")) {
        EXPECT_EQ(0, ret) << release;
    }
    // the QP still works at its new timeout (or its old one)
    ASSERT_NO_FATAL_FAILURE(round_trips(10));
}

class syncmem_rc_timeout_fixed_test : public syncmem_rc_timeout_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"RC_TIMEOUT", "10ms"}};
    }
};

// A fixed value is what the QP holds, before and after traffic, and
// nothing is measured.
TEST_F(syncmem_rc_timeout_fixed_test, fixed_value_is_programmed_as_is)
{
    uct_syncmem_iface_t *iface = sender();

    EXPECT_FALSE(iface->rto.adaptive);
    EXPECT_EQ(12, qp_timeout(ep()->qp)); // 10 ms: 4.096us * 2^12 rounded up
    ASSERT_NO_FATAL_FAILURE(round_trips(50));
    EXPECT_EQ(0u, iface->rto.est.samples);
    EXPECT_EQ(UCT_SYNCMEM_RTT_OFF, ep()->rtt.state);
    EXPECT_EQ(12, qp_timeout(ep()->qp));
    EXPECT_EQ(12, iface->rto.est.exp);
}
