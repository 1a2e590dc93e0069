// SPDX-License-Identifier: BSD-3-Clause
// Error messages with advice (uct_syncmem/syncmem_qp.c): every work
// completion status has a line, and every setting it names exists.
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
}

#include <cstring>
#include <regex>
#include <set>
#include <string>

namespace {

std::set<std::string> config_names()
{
    std::set<std::string> names;
    for (ucs_config_field_t *table : {uct_syncmem_iface_config_table,
                                      uct_syncmem_rc_config_table}) {
        for (ucs_config_field_t *f = table; f->name; ++f) {
            if (f->name[0] != '\0') {
                names.insert(f->name);
            }
        }
    }
    return names;
}

} // namespace

TEST(wc_advice, every_status_has_advice_naming_real_settings)
{
    const std::set<std::string> names = config_names();
    const std::regex knob("UCX_SYNCMEM_([A-Z0-9_]+)");
    unsigned knobs = 0;

    for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
        const char *advice = uct_syncmem_wc_advice((enum ibv_wc_status)s);
        ASSERT_NE(nullptr, advice) << ibv_wc_status_str((enum ibv_wc_status)s);
        EXPECT_GT(strlen(advice), 20u) << ibv_wc_status_str((enum ibv_wc_status)s);
        EXPECT_EQ(nullptr, strstr(advice, "newer than this syncmem"))
                << "no entry for " << ibv_wc_status_str((enum ibv_wc_status)s);

        std::string text(advice);
        for (std::sregex_iterator m(text.begin(), text.end(), knob), end;
             m != end; ++m) {
            EXPECT_TRUE(names.count((*m)[1].str()))
                    << "UCX_SYNCMEM_" << (*m)[1].str() << " in the advice for "
                    << ibv_wc_status_str((enum ibv_wc_status)s)
                    << " is not in uct_syncmem_iface_config_table";
            ++knobs;
        }
    }
    EXPECT_GE(knobs, 5u); // the table does name settings

    // what the issue asks of the main ones
    EXPECT_NE(nullptr, strstr(uct_syncmem_wc_advice(IBV_WC_RETRY_EXC_ERR),
                              "UCX_SYNCMEM_RC_RETRY_COUNT"));
    EXPECT_NE(nullptr, strstr(uct_syncmem_wc_advice(IBV_WC_RETRY_EXC_ERR),
                              "UCX_SYNCMEM_RC_TIMEOUT"));
    EXPECT_NE(nullptr, strstr(uct_syncmem_wc_advice(IBV_WC_RNR_RETRY_EXC_ERR),
                              "UCX_SYNCMEM_RX_QUEUE_LEN"));
    EXPECT_NE(nullptr, strstr(uct_syncmem_wc_advice(IBV_WC_REM_ACCESS_ERR),
                              "rkey"));
    EXPECT_NE(nullptr, strstr(uct_syncmem_wc_advice(IBV_WC_WR_FLUSH_ERR),
                              "secondary"));
}

TEST(wc_advice, unknown_status_still_has_a_line)
{
    const char *advice = uct_syncmem_wc_advice((enum ibv_wc_status)1000);
    ASSERT_NE(nullptr, advice);
    EXPECT_GT(strlen(advice), 10u);
}
