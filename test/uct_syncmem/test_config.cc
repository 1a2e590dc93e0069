// SPDX-License-Identifier: BSD-3-Clause
// The UCX_SYNCMEM_* configuration table (uct_syncmem/syncmem_iface.c).
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>
}

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace {

struct scoped_env {
    scoped_env(const char *name, const char *value) : m_name(name) {
        setenv(name, value, 1);
    }
    ~scoped_env() { unsetenv(m_name.c_str()); }
    std::string m_name;
};

ucs_status_t read_config(uct_syncmem_iface_config_t *config)
{
    return uct_syncmem_config_fill(config, &uct_syncmem_tl.config);
}

// The RC settings the environment gives now: timeout (s; a negative one:
// 'auto') and retry count.
void expect_rc(double timeout, unsigned retries)
{
    uct_syncmem_iface_config_t config;

    ASSERT_EQ(UCS_OK, read_config(&config));
    if (timeout < 0) {
        EXPECT_EQ(UCS_TIME_AUTO, config.rc.timeout);
    } else {
        EXPECT_NEAR(timeout, ucs_time_to_sec(config.rc.timeout), 1e-6);
    }
    EXPECT_EQ(retries, config.rc.retry_count);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);
}

} // namespace

TEST(config, defaults_are_auto)
{
    uct_syncmem_iface_config_t config;

    ASSERT_EQ(UCS_OK, read_config(&config));
    EXPECT_EQ(UCS_ULUNITS_AUTO, config.gid_index);
    EXPECT_EQ(UCS_ULUNITS_AUTO, config.mtu);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);
}

TEST(config, values_from_environment)
{
    scoped_env mtu("UCX_SYNCMEM_MTU", "1024");
    scoped_env gid("UCX_SYNCMEM_GID_INDEX", "3");
    uct_syncmem_iface_config_t config;

    ASSERT_EQ(UCS_OK, read_config(&config));
    EXPECT_EQ(1024ul, config.mtu);
    EXPECT_EQ(3ul, config.gid_index);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);
}

TEST(config, bad_value_is_an_error)
{
    scoped_env mtu("UCX_SYNCMEM_MTU", "lots");
    uct_syncmem_iface_config_t config;

    EXPECT_NE(UCS_OK, read_config(&config));
}

TEST(config, every_entry_is_documented)
{
    for (ucs_config_field_t *table : {uct_syncmem_iface_config_table,
                                      uct_syncmem_rc_config_table}) {
        for (ucs_config_field_t *f = table; f->name; ++f) {
            if (f->name[0] == '\0') {
                continue; // an embedded table
            }
            ASSERT_NE(nullptr, f->doc) << f->name;
            EXPECT_GT(strlen(f->doc), 20u) << f->name;
        }
    }
}

TEST(config, verify_is_none_or_crc)
{
    uct_syncmem_iface_config_t config;

    ASSERT_EQ(UCS_OK, read_config(&config));
    EXPECT_EQ(UCT_SYNCMEM_VERIFY_NONE, config.verify);
    EXPECT_EQ(0u, config.verify_inject);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);

    {
        scoped_env verify("UCX_SYNCMEM_VERIFY", "crc");
        ASSERT_EQ(UCS_OK, read_config(&config));
        EXPECT_EQ(UCT_SYNCMEM_VERIFY_CRC, config.verify);
        ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);
    }

    scoped_env verify("UCX_SYNCMEM_VERIFY", "md5");
    EXPECT_NE(UCS_OK, read_config(&config));
}

TEST(config, pkey_sl_and_traffic_class)
{
    uct_syncmem_iface_config_t config;

    ASSERT_EQ(UCS_OK, read_config(&config));
    EXPECT_EQ((size_t)UCS_HEXUNITS_AUTO, config.pkey);
    EXPECT_EQ(0ul, config.sl);
    EXPECT_EQ(0ul, config.traffic_class);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);

    scoped_env pkey("UCX_SYNCMEM_PKEY", "0x8001");
    scoped_env sl("UCX_SYNCMEM_SL", "3");
    scoped_env tc("UCX_SYNCMEM_TRAFFIC_CLASS", "184");
    ASSERT_EQ(UCS_OK, read_config(&config));
    EXPECT_EQ(0x8001ul, config.pkey);
    EXPECT_EQ(3ul, config.sl);
    EXPECT_EQ(184ul, config.traffic_class);
    ucs_config_parser_release_opts(&config, uct_syncmem_iface_config_table);
}

// RC_TIMEOUT and RC_RETRY_COUNT: UCX's own UCX_RC_* apply where
// UCX_SYNCMEM_RC_* are not set, and syncmem's win where both are
// (syncmem_config.c, uct_syncmem_rc_config_table).
TEST(config, rc_settings_inherit_ucx_rc_and_syncmem_wins)
{
    const double automatic = -1;

    expect_rc(automatic, 7);
    {
        scoped_env timeout("UCX_RC_TIMEOUT", "10ms");
        scoped_env retries("UCX_RC_RETRY_COUNT", "2");
        expect_rc(0.010, 2);

        // both set: syncmem's own win, each on its own
        scoped_env own("UCX_SYNCMEM_RC_TIMEOUT", "1s");
        expect_rc(1.0, 2);
        scoped_env own_retries("UCX_SYNCMEM_RC_RETRY_COUNT", "5");
        expect_rc(1.0, 5);
    }

    // syncmem's alone
    scoped_env own("UCX_SYNCMEM_RC_RETRY_COUNT", "3");
    expect_rc(automatic, 3);

    // the rc transports' own prefix is theirs alone
    scoped_env verbs("UCX_RC_VERBS_TIMEOUT", "2s");
    expect_rc(automatic, 3);

    // a fixed value, and 'auto' over UCX's fixed one
    {
        scoped_env fixed("UCX_SYNCMEM_RC_TIMEOUT", "67ms");
        expect_rc(0.067, 3);
    }
    {
        scoped_env timeout("UCX_RC_TIMEOUT", "1s");
        scoped_env own_auto("UCX_SYNCMEM_RC_TIMEOUT", "auto");
        expect_rc(automatic, 3);
    }
}

// A retry count of 7 is never programmed where the device retries forever
// at 7 (Soft-RoCE); elsewhere every count is programmed as asked.
TEST(config, rc_retry_count_never_infinite)
{
    for (unsigned n = 0; n <= 7; ++n) {
        EXPECT_EQ(n, uct_syncmem_config_rc_retry_count(n, 0)) << n;
        EXPECT_EQ(std::min(n, 6u), uct_syncmem_config_rc_retry_count(n, 1))
                << n;
    }
}

// The man page's settings are generated from these tables at build time
// (contrib/tools/gen-manpage.sh); a setting missing there means the
// generator lost it.
TEST(config, man_page_lists_every_setting)
{
    std::ifstream f(SYNCMEM_BUILDDIR "/doc/uct_syncmem.7");
    ASSERT_TRUE(f.good()) << "doc/uct_syncmem.7 not built (make)";
    std::string page((std::istreambuf_iterator<char>(f)),
                     std::istreambuf_iterator<char>());
    unsigned count = 0;

    for (ucs_config_field_t *table : {uct_syncmem_iface_config_table,
                                      uct_syncmem_rc_config_table,
                                      uct_syncmem_component.md_config.table}) {
        for (ucs_config_field_t *f = table; f->name; ++f) {
            if (f->name[0] == '\0') {
                continue; // an embedded table: UCX's, listed as common
            }
            std::string entry = std::string(".B UCX_SYNCMEM_") + f->name + "=";
            EXPECT_NE(std::string::npos, page.find(entry)) << entry;
            ++count;
        }
    }
    EXPECT_GE(count, 20u);
}
