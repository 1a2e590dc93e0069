// SPDX-License-Identifier: BSD-3-Clause
// UCX_SYNCMEM_RC_TIMEOUT: 'auto' measures the round trips and programs what
// it finds into the QPs (at connect; in RTS where the kernel takes it); a
// fixed value is programmed as it is and nothing is measured.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_rto.h"
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

// The default: the first QP gets the old fixed 67 ms (no sample yet); the
// round trips a quiet guest measures (well under a millisecond) take the
// estimate to its lower bound; the QP then holds that where the kernel
// changes a connected QP's timeout, and keeps what it had where it
// refuses. Which kernel does which (syncmem_watchdog.c): Soft-RoCE refuses
// on Linux 6.1 (ib_modify_qp_is_ok has no IB_QP_TIMEOUT for RTS to RTS)
// and takes it on 6.12.
TEST_F(syncmem_rc_timeout_test, auto_measures_and_programs_the_qp)
{
    uct_syncmem_iface_t *iface = sender();

    ASSERT_TRUE(iface->rto.adaptive);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_INIT, ep()->rtt.exp);
    EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_INIT, qp_timeout(ep()->qp));

    ASSERT_NO_FATAL_FAILURE(round_trips(200));

    const uct_syncmem_rto_t *est = &iface->rto.est;
    EXPECT_GT(est->samples, 100u);
    EXPECT_GE(est->exp, UCT_SYNCMEM_RTO_EXP_MIN);
    EXPECT_LE(est->exp, UCT_SYNCMEM_RTO_EXP_MAX);
    EXPECT_EQ(0, ep()->rtt.backoff);
    // a quiet guest: the smoothed round trip is far below the 67 ms it
    // started with
    EXPECT_LT(est->srtt, 0.067);

    std::string release = kernel_release();
    int held            = qp_timeout(ep()->qp);
    printf("SYNCMEM-MEASURE rc_timeout auto: kernel %s: %lu samples, SRTT"
           " %.3f ms, RTTVAR %.3f ms, exponent %u (%.1f ms); the QP holds"
           " 2^%d: a connected QP's timeout is %s\n", release.c_str(),
           (unsigned long)est->samples, est->srtt * 1e3, est->rttvar * 1e3,
           est->exp, uct_syncmem_rto_exp_sec(est->exp) * 1e3, held,
           iface->rto.rts_modify ? "changed in RTS" :
                                   "kept (the kernel refuses IB_QP_TIMEOUT"
                                   " in RTS)");
    EXPECT_EQ(ep()->rtt.exp, held);
    if (iface->rto.rts_modify) {
        EXPECT_EQ(uct_syncmem_ep_rc_timeout(iface, ep()), held);
    } else {
        EXPECT_EQ(UCT_SYNCMEM_RTO_EXP_INIT, held);
    }
    if (starts_with(release, "6.1.")) {
        EXPECT_FALSE(iface->rto.rts_modify) << release;
    } else if (starts_with(release, "6.12.")) {
        EXPECT_TRUE(iface->rto.rts_modify) << release;
    }

    // a new endpoint's QP starts from the estimate
    uct_ep_h second = connect(m_sender, m_receiver);
    ASSERT_NE(nullptr, second);
    uct_syncmem_ep_t *sep = ucs_derived_of(second, uct_syncmem_ep_t);
    EXPECT_EQ(est->exp, sep->rtt.exp);
    EXPECT_EQ(est->exp, qp_timeout(sep->qp));
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
