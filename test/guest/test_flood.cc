// SPDX-License-Identifier: BSD-3-Clause
// A flood of handshake messages from another process (test/guest/cm_flood:
// garbage, messages for another iface, damaged addresses and well-formed
// requests for connections nobody holds) while the iface serves real peers:
// the connection it had keeps working, a peer that connects during the
// flood gets in, the passive connections the flood makes stay within
// UCX_SYNCMEM_CM_MAX_HALF_OPEN (half of it per sender) and are released
// when their keepalive fails, and what was refused is said in a warning at
// most once a second.
#include "syncmem_rma_test.h"

extern "C" {
#include <ucs/debug/log_def.h>
}

#include <atomic>
#include <cstdio>
#include <mutex>
#include <spawn.h>
#include <sys/wait.h>

extern "C" {
#include "uct_syncmem/syncmem_hooks.h"
}
extern char **environ;

namespace {

std::mutex               g_log_lock;
std::vector<std::string> g_refusals;

ucs_log_func_rc_t log_handler(const char *file, unsigned line,
                              const char *function, ucs_log_level_t level,
                              const ucs_log_component_config_t *comp,
                              const char *message, va_list ap)
{
    char buf[512];
    va_list copy;

    va_copy(copy, ap);
    vsnprintf(buf, sizeof(buf), message, copy);
    va_end(copy);
    if (strstr(buf, "refused") && strstr(buf, "CM_MAX_HALF_OPEN")) {
        std::lock_guard<std::mutex> guard(g_log_lock);
        g_refusals.push_back(buf);
        return UCS_LOG_FUNC_RC_STOP;
    }
    return UCS_LOG_FUNC_RC_CONTINUE;
}

std::string hex(const std::vector<uint8_t> &v)
{
    std::string s;
    char b[3];
    for (uint8_t c : v) {
        snprintf(b, sizeof(b), "%02x", c);
        s += b;
    }
    return s;
}

class syncmem_flood_test : public syncmem_rma_test {
protected:
    static constexpr unsigned max_half_open = 16;

    void SetUp() override {
        syncmem_test::SetUp();
        // the target: a small cap, keepalives often (flood QPs go soon)
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_receiver,
                                     {{"CM_MAX_HALF_OPEN",
                                       std::to_string(max_half_open)},
                                      {"KEEPALIVE_INTERVAL", "200ms"},
                                      {"RC_TIMEOUT", "10ms"},
                                      {"RC_RETRY_COUNT", "2"}}));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender));
        ASSERT_EQ(UCS_OK, uct_iface_query(m_sender, &m_attr));
        m_ep = connect(m_sender, m_receiver);
        ASSERT_NE(nullptr, m_ep);
        ucs_log_push_handler(log_handler);
    }

    void TearDown() override {
        ucs_log_pop_handler();
        syncmem_rma_test::TearDown();
    }

    void put_and_check(uct_ep_h ep, buffer *dst, uint64_t v) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(ep, &v, 8, (uintptr_t)dst->data.data(),
                                    dst->rkey.rkey);
        }));
        flush(ep);
        uint64_t got;
        memcpy(&got, dst->data.data(), 8);
        EXPECT_EQ(v, got);
    }
};

} // namespace

TEST_F(syncmem_flood_test, iface_serves_real_peers_under_a_flood)
{
    buffer *dst = alloc(64, 0);
    put_and_check(m_ep, dst, 1);

    std::vector<uint8_t> dev, ifa;
    get_addresses(m_receiver, &dev, &ifa);
    std::string prog  = std::string(SYNCMEM_BUILDDIR) + "/test/guest/cm_flood";
    std::string dname = m_md_name, daddr = hex(dev), iaddr = hex(ifa);
    std::string count = "20000";
    char *argv[] = {(char*)prog.c_str(), (char*)dname.c_str(),
                    (char*)daddr.c_str(), (char*)iaddr.c_str(),
                    (char*)count.c_str(), nullptr};
    pid_t pid;
    ASSERT_EQ(0, posix_spawn(&pid, prog.c_str(), nullptr, nullptr, argv,
                             environ));

    // while it floods: the old connection works, a new one gets in
    unsigned max_passive = 0, i = 0;
    uct_ep_h late        = nullptr;
    int status, done     = 0;
    wait_bound bound("cm_flood to exit (the flood to end)");
    while ((!done) && bound()) {
        put_and_check(m_ep, dst, 100 + i);
        if ((++i == 20) && (late == nullptr)) {
            late = connect(m_sender, m_receiver);
            ASSERT_NE(nullptr, late);
            put_and_check(late, dst, 7);
        }
        max_passive = std::max(max_passive,
                               uct_syncmem_iface_num_passive(m_receiver));
        done = (waitpid(pid, &status, WNOHANG) == pid);
    }
    ASSERT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
            << "cm_flood failed";
    if (late == nullptr) {
        late = connect(m_sender, m_receiver);
        ASSERT_NE(nullptr, late);
    }
    put_and_check(late, dst, 8);
    put_and_check(m_ep, dst, 9);
    EXPECT_TRUE(m_errors.empty());

    // bounded: the flood's half-open connections, and the two real ones
    EXPECT_LE(max_passive, max_half_open / 2 + 2);
    EXPECT_GT(max_passive, 2u) << "the flood made no connection at all";

    // the keepalive releases what the flood left; the real ones stay
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(10.0);
    while ((uct_syncmem_iface_num_passive(m_receiver) > 2) &&
           (ucs_get_time() < deadline)) {
        progress();
    }
    EXPECT_EQ(2u, uct_syncmem_iface_num_passive(m_receiver));
    put_and_check(m_ep, dst, 10);
    put_and_check(late, dst, 11);

    // said, at most once a second: by the async thread, which may say it
    // a second after the flood
    wait_for("the warning about refused requests", [] {
        std::lock_guard<std::mutex> guard(g_log_lock);
        return !g_refusals.empty();
    });
    std::lock_guard<std::mutex> guard(g_log_lock);
    EXPECT_FALSE(g_refusals.empty()) << "no warning about refused requests";
    EXPECT_LE(g_refusals.size(), 60u);
    if (!g_refusals.empty()) {
        std::cout << "  first warning: " << g_refusals[0] << std::endl;
        std::cout << "  warnings: " << g_refusals.size() << std::endl;
    }
}


// A live process opening more endpoints to one iface at once than it may
// hold half-open there, and more than the target keeps for room: the
// requests beyond are refused (answered BUSY, a try not counted) and sent
// again, every endpoint connects, and nothing is said above diag (UCX's own tests count warnings as failures,
// and one of them connects until resources run out).
TEST_F(syncmem_rma_test, connect_burst_is_not_warned_about)
{
    const unsigned num_eps = 120; // 2 half-open, 16 kept, the rest refused
    uct_iface_h from, to;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &from,
                                 {{"CM_TIMEOUT", "50ms"}}));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &to,
                                 {{"CM_MAX_HALF_OPEN", "4"}}));
    buffer *dst     = alloc(num_eps * 8, 0);
    uint64_t *words = reinterpret_cast<uint64_t*>(dst->data.data());
    std::vector<uct_ep_h> eps;

    std::unique_ptr<warning_log> warnings(new warning_log);
    for (unsigned i = 0; i < num_eps; ++i) {
        eps.push_back(connect(from, to, false)); // all at once
        ASSERT_NE(nullptr, eps.back());
    }
    for (uint64_t i = 0; i < num_eps; ++i) {
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(eps[i], &i, sizeof(i),
                                    (uintptr_t)&words[i], dst->rkey.rkey);
        }, "the connection")) << "ep " << i;
    }
    for (unsigned i = 0; i < num_eps; ++i) {
        flush(eps[i]);
        EXPECT_EQ(i, words[i]) << "ep " << i;
    }
    // the async thread reports at most once a second: give it one more
    ucs_time_t until = ucs_get_time() + ucs_time_from_sec(1.5);
    while (ucs_get_time() < until) {
        progress();
    }
    std::string warned = warnings->summary();
    warnings.reset();
    EXPECT_TRUE(m_errors.empty());
    EXPECT_EQ("", warned);
    EXPECT_GT(uct_syncmem_iface_refused(to), 0u)
            << "nothing was refused: the burst tested nothing";
    // refused for room, answered BUSY: those tries did not count (without
    // that, a slow host ran out of CM_RETRIES)
    EXPECT_GT(uct_syncmem_iface_busy_answers(from), 0u)
            << "no refused request was answered BUSY";
}
