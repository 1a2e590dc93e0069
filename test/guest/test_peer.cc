// SPDX-License-Identifier: BSD-3-Clause
// Peer failure: the process at the other end dies mid-transfer.
#include "syncmem_rma_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
#include <ucs/debug/log.h>
}

#include <cstdarg>
#include <csignal>
#include <poll.h>
#include <cstring>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

class syncmem_peer_test : public syncmem_test {
protected:
    struct peer_proc {
        pid_t                pid = -1;
        std::vector<uint8_t> dev, iface, rkey;
        uint64_t             addr = 0;
    };

    void TearDown() override {
        for (peer_proc &p : m_peers) {
            if (p.pid > 0) {
                kill(p.pid, SIGKILL);
                waitpid(p.pid, NULL, 0);
            }
        }
        syncmem_test::TearDown();
    }

    static std::vector<uint8_t> unhex(const std::string &s) {
        std::vector<uint8_t> v;
        for (size_t i = 0; i + 1 < s.size(); i += 2) {
            v.push_back((uint8_t)std::stoul(s.substr(i, 2), nullptr, 16));
        }
        return v;
    }

    static std::string hex(const std::vector<uint8_t> &v) {
        std::string s;
        char b[3];
        for (uint8_t c : v) {
            snprintf(b, sizeof(b), "%02x", c);
            s += b;
        }
        return s;
    }

    // Starts this program as a peer (main.cc) and reads its addresses;
    // with connect_to, the peer first connects an endpoint to that iface.
    peer_proc *start_peer(uct_iface_h connect_to = nullptr) {
        std::string dev, ifa;
        if (connect_to != nullptr) {
            std::vector<uint8_t> d, i;
            get_addresses(connect_to, &d, &i);
            dev = hex(d);
            ifa = hex(i);
        }

        int fds[2];
        EXPECT_EQ(0, pipe(fds));
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            if (connect_to != nullptr) {
                execl("/proc/self/exe", "guest_test", "--syncmem-peer",
                      dev.c_str(), ifa.c_str(), (char*)NULL);
            } else {
                execl("/proc/self/exe", "guest_test", "--syncmem-peer",
                      (char*)NULL);
            }
            _exit(127);
        }
        close(fds[1]);
        m_peers.emplace_back();
        peer_proc *p = &m_peers.back();
        p->pid = pid;

        std::string line;
        char c;
        struct pollfd pfd = { fds[0], POLLIN, 0 };
        wait_bound bound("the peer process to print its address");
        while (bound()) {
            if (poll(&pfd, 1, 100) == 0) {
                continue;
            }
            if ((read(fds[0], &c, 1) != 1) || (c == '\n')) {
                break;
            }
            line += c;
        }
        close(fds[0]);
        std::istringstream in(line);
        std::string rkey, addr;
        in >> dev >> ifa >> rkey >> addr;
        EXPECT_FALSE(addr.empty()) << "the peer printed no address: " << line;
        p->dev   = unhex(dev);
        p->iface = unhex(ifa);
        p->rkey  = unhex(rkey);
        std::vector<uint8_t> a = unhex(addr);
        if (a.size() == sizeof(p->addr)) {
            memcpy(&p->addr, a.data(), sizeof(p->addr));
        }
        return p;
    }

    // put_zcopy to the peer, waiting (bounded) for room
    ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov, uint64_t addr,
                           uct_rkey_t rkey, uct_completion_t *comp) {
        ucs_status_t status;
        wait_bound room("resources to put to the peer");

        while (((status = uct_ep_put_zcopy(ep, iov, 1, addr, rkey, comp)) ==
                UCS_ERR_NO_RESOURCE) && room()) {
            uct_worker_progress(m_worker);
        }
        return status;
    }

    void kill_peer(peer_proc *p) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = -1;
    }

    uct_ep_h connect_to(uct_iface_h iface, peer_proc *p) {
        uct_ep_h ep = nullptr;
        EXPECT_EQ(UCS_OK, connect_to_addr(iface, p->dev, p->iface, &ep));
        return ep;
    }

    std::deque<peer_proc> m_peers;
};

TEST_F(syncmem_peer_test, killed_peer_fails_outstanding_ops_and_ep)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"RC_TIMEOUT", "20ms"},
                                  {"RC_RETRY_COUNT", "3"},
                                  {"RECONNECT_TIMEOUT", "1s"}}));
    peer_proc *peer = start_peer();
    ASSERT_NE(0u, peer->addr);
    uct_ep_h ep = connect_to(iface, peer);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, peer->rkey.data(), &rkey));

    std::vector<uint8_t> src(1 << 20, 1);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, src.data(), src.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    uct_iov_t iov = { src.data(), src.size(), memh, 0, 1 };
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

    // keep transfers in flight, kill the peer in the middle of them
    int posted = 0;
    for (; posted < 40; ++posted) {
        ucs_status_t status = put_zcopy(ep, &iov, peer->addr, rkey.rkey,
                                        &comp);
        if (status != UCS_INPROGRESS) {
            break;
        }
        ++comp.count;
        if (posted == 8) {
            kill_peer(peer);
        }
    }
    --comp.count;

    wait_bound bound("the puts to the killed peer to complete");
    while ((comp.count > 0) && bound()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_NE(UCS_OK, comp.status) << "every transfer succeeded after the kill";
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
    EXPECT_EQ(UCS_OK, uct_ep_check(ep, 0, NULL)); // failed: nothing to check
    uct_rkey_release(m_component, &rkey);

    // a restarted peer is reachable from the same iface
    peer_proc *again = start_peer();
    uct_ep_h ep2 = connect_to(iface, again);
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, again->rkey.data(), &rkey));
    uct_completion_t comp2 = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status;
    wait_bound bound2("resources to put to the new peer");
    while (((status = uct_ep_put_zcopy(ep2, &iov, 1, again->addr, rkey.rkey,
                                      &comp2)) == UCS_ERR_NO_RESOURCE) && bound2()) {
        uct_worker_progress(m_worker);
    }
    ASSERT_EQ(UCS_INPROGRESS, status);
    wait_bound bound3("the put to the new peer to complete");
    while ((comp2.count > 0) && bound3()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_EQ(UCS_OK, comp2.status);
    EXPECT_EQ(1u, m_errors.size());
    uct_rkey_release(m_component, &rkey);
    uct_md_mem_dereg(m_md, memh);
}

// An idle endpoint learns of the death through ep_check (keepalive).
TEST_F(syncmem_peer_test, ep_check_detects_a_dead_idle_peer)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"RC_TIMEOUT", "20ms"},
                                  {"RC_RETRY_COUNT", "3"},
                                  {"RECONNECT_TIMEOUT", "1s"}}));
    peer_proc *peer = start_peer();
    uct_ep_h ep = connect_to(iface, peer);
    // connected and alive
    wait_bound bound("the connection to the peer (iface flush)");
    while ((uct_iface_flush(iface, 0, NULL) == UCS_INPROGRESS) && bound()) {
        uct_worker_progress(m_worker);
    }
    ASSERT_EQ(UCS_OK, uct_ep_check(ep, 0, NULL));
    wait_bound bound4("the iface flush after uct_ep_check");
    while ((uct_iface_flush(iface, 0, NULL) == UCS_INPROGRESS) && bound4()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_TRUE(m_errors.empty());

    kill_peer(peer);

    ASSERT_EQ(UCS_OK, uct_ep_check(ep, 0, NULL));
    wait_bound bound5("the error for the killed peer (uct_ep_check)");
    while ((m_errors.empty()) && bound5()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
}

// The target side of a connection releases it once the peer is gone (its
// DREQ never comes), and keeps it while the peer lives.
TEST_F(syncmem_peer_test, keepalive_releases_connection_of_killed_peer)
{
    uct_iface_h iface;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface,
                                 {{"KEEPALIVE_INTERVAL", "100ms"},
                                  {"RC_TIMEOUT", "20ms"},
                                  {"RC_RETRY_COUNT", "3"},
                                  {"RECONNECT_TIMEOUT", "1s"}}));
    peer_proc *peer = start_peer(iface);
    ASSERT_NE(0u, peer->addr) << "the peer did not connect";
    EXPECT_EQ(1u, uct_syncmem_iface_num_passive(iface));

    // alive: many keepalives later, still connected
    usleep(1500 * 1000);
    EXPECT_EQ(1u, uct_syncmem_iface_num_passive(iface));

    kill_peer(peer);

    // released by the async timer, no progress needed; the bound only keeps
    // a broken build from hanging
    for (int i = 0; (i < 600) && (uct_syncmem_iface_num_passive(iface) > 0);
         ++i) {
        usleep(50 * 1000);
    }
    EXPECT_EQ(0u, uct_syncmem_iface_num_passive(iface));
}

// A peer process killed with requests in flight, the iface's RC settings
// as a user has them (none: the defaults; or UCX's own UCX_RC_TIMEOUT and
// UCX_RC_RETRY_COUNT, which UCX's UCP tests set): the endpoint fails with
// UCS_ERR_ENDPOINT_TIMEOUT once the RC retries run out and the reconnect
// that follows finds no one (RECONNECT_TIMEOUT), with no warning. The bound
// is computed from what the iface programmed; the time taken is printed
// ("SYNCMEM-MEASURE peer_killed"). Soft-RoCE retries forever with a retry
// count of 7 (rxe_comp.c): before syncmem kept it from that, this took the
// stall check's 17 s and a reconnect as long again.
class syncmem_peer_detect_test : public syncmem_peer_test {
protected:
    // expect_exp, expect_retries: what the iface must have programmed
    // (the IB timeout exponent, the retry count), or -1 for any
    void kill_with_requests_in_flight(const char *what, int expect_exp = -1,
                                      int expect_retries = -1) {
        uct_iface_h iface;
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &iface));
        const uct_syncmem_iface_t *si =
                ucs_derived_of(iface, uct_syncmem_iface_t);
        if (expect_exp >= 0) {
            EXPECT_EQ(expect_exp, si->config.rc_timeout);
        }
        if (expect_retries >= 0) {
            EXPECT_EQ(expect_retries, si->config.rc_retry_count);
        }
        ASSERT_LT(si->config.rc_retry_count, 8u);

        peer_proc *peer = start_peer();
        ASSERT_NE(0u, peer->addr);
        uct_ep_h ep = connect_to(iface, peer);
        // connected: the kill finds requests on the QP, not a handshake
        // (that fails after CM_TIMEOUT * (CM_RETRIES + 1), another path)
        ASSERT_TRUE(wait_for("the handshake with the peer", [&] {
            return !uct_syncmem_ep_connecting(ep);
        }));
        // the QP's own timeout: with RC_TIMEOUT=auto 67 ms on a quiet host
        // (where the kernel changes a connected QP's, the puts' round
        // trips may raise it later)
        unsigned exp  = ucs_derived_of(ep, uct_syncmem_ep_t)->rtt.exp;
        double window = 4.096e-6 * (1ull << exp) *
                        (si->config.rc_retry_count + 1);
        // rxe's retransmit timer may fire a timeout late (it is pushed back,
        // not reset), the handshake's last REQ waits CM_TIMEOUT, and the
        // watchdog looks every quarter of its time: twice the window, one
        // CM_TIMEOUT, and 2 s for an emulated guest
        double bound = 2 * window +
                       ucs_time_to_sec(si->config.reconnect_timeout) +
                       ucs_time_to_sec(si->config.cm_timeout) + 2.0;
        uct_rkey_bundle_t rkey;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, peer->rkey.data(),
                                          &rkey));
        std::vector<uint8_t> src(1 << 20, 1);
        uct_mem_h memh;
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, src.data(), src.size(),
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        uct_iov_t iov = { src.data(), src.size(), memh, 0, 1 };
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };

        std::unique_ptr<warning_log> warnings(new warning_log);
        ucs_time_t killed = 0;
        for (int posted = 0; posted < 16; ++posted) {
            ucs_status_t status = put_zcopy(ep, &iov, peer->addr, rkey.rkey,
                                            &comp);
            if (status != UCS_INPROGRESS) {
                break;
            }
            ++comp.count;
            if (posted == 4) {
                kill_peer(peer);
                killed = ucs_get_time();
            }
        }
        --comp.count;
        ASSERT_NE(0u, killed) << "the puts failed before the kill";

        // the bound is the assertion; wait_bound only guards a hang
        ucs_time_t deadline = killed + ucs_time_from_sec(bound);
        wait_bound guard("the error for the killed peer");
        while (m_errors.empty() && (ucs_get_time() < deadline) && guard()) {
            uct_worker_progress(m_worker);
        }
        double took = ucs_time_to_sec(ucs_get_time() - killed);
        printf("SYNCMEM-MEASURE peer_killed %s: endpoint error after %.2f s"
               " (RC window %.3f s: timeout 4.096us*2^%u, %u retries;"
               " RECONNECT_TIMEOUT %.1f s; bound %.2f s)\n", what, took,
               window, exp, si->config.rc_retry_count,
               ucs_time_to_sec(si->config.reconnect_timeout), bound);
        if (m_errors.empty()) {
            // past the bound: a failure; when it comes at all says why
            ADD_FAILURE() << "no endpoint error " << took << " s after the"
                          << " kill (bound " << bound << " s)";
            while (m_errors.empty() && guard()) {
                uct_worker_progress(m_worker);
            }
            printf("SYNCMEM-MEASURE peer_killed %s: the error came after"
                   " %.2f s\n", what,
                   ucs_time_to_sec(ucs_get_time() - killed));
            ASSERT_FALSE(m_errors.empty());
        }
        EXPECT_EQ(ep, m_errors[0].first);
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);

        wait_bound drained("the puts to the killed peer to complete");
        while ((comp.count > 0) && drained()) {
            uct_worker_progress(m_worker);
        }
        std::string warned = warnings->summary();
        warnings.reset();
        EXPECT_NE(UCS_OK, comp.status);
        EXPECT_EQ("", warned);
        uct_rkey_release(m_component, &rkey);
        uct_md_mem_dereg(m_md, memh);
    }
};

TEST_F(syncmem_peer_detect_test, killed_peer_with_defaults)
{
    kill_with_requests_in_flight("defaults");
}

struct scoped_setenv {
    scoped_setenv(const char *name, const char *value) : m_name(name) {
        setenv(name, value, 1);
    }
    ~scoped_setenv() { unsetenv(m_name.c_str()); }
    std::string m_name;
};

// What UCX's UCP peer-failure tests set for rc transports (ucp_test.cc).
TEST_F(syncmem_peer_detect_test, killed_peer_with_ucx_rc_settings)
{
    scoped_setenv timeout("UCX_RC_TIMEOUT", "10ms");
    scoped_setenv retries("UCX_RC_RETRY_COUNT", "2");
    // 10 ms is 4.096us * 2^12 rounded up
    kill_with_requests_in_flight("UCX_RC_TIMEOUT=10ms UCX_RC_RETRY_COUNT=2",
                                 12, 2);
}


// A peer whose iface closes (UCP's peer-failure tests close the failing
// worker) says so (CM GONE): the endpoint fails at its first failed request,
// after the RC retries, and does not try to reconnect. RECONNECT_TIMEOUT is
// 'inf' here, so without the GONE it would never fail.
class syncmem_peer_gone_test : public syncmem_rma_test {
protected:
    config_mods_t sender_mods() const override {
        return {{"RECONNECT_TIMEOUT", "inf"},
                {"RC_TIMEOUT", "20ms"},
                {"RC_RETRY_COUNT", "3"}};
    }

    void close_receiver() {
        uct_iface_close(m_receiver);
        m_ifaces.erase(std::find(m_ifaces.begin(), m_ifaces.end(),
                                 m_receiver));
    }
};

TEST_F(syncmem_peer_gone_test, closed_iface_fails_the_ep_without_reconnecting)
{
    buffer *dst = alloc(64, 0);
    uint64_t value = 0x1234;
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &value, sizeof(value),
                                (uintptr_t)dst->data.data(), dst->rkey.rkey);
    }));
    flush(m_ep);
    ASSERT_EQ(0, memcmp(&value, dst->data.data(), sizeof(value)));

    std::unique_ptr<warning_log> warnings(new warning_log);
    uct_syncmem_ep_t *ep = ucs_derived_of(m_ep, uct_syncmem_ep_t);
    close_receiver();
    ucs_time_t closed = ucs_get_time();
    ASSERT_TRUE(wait_for("the GONE of the closed iface",
                         [&] { return ep->cm.peer_gone != 0; }));
    EXPECT_TRUE(m_errors.empty()) << "an idle endpoint failed at the GONE";

    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ASSERT_EQ(UCS_OK, retry([&] {
        return uct_ep_put_short(m_ep, &value, sizeof(value),
                                (uintptr_t)dst->data.data(), dst->rkey.rkey);
    }));
    ucs_status_t status = uct_ep_flush(m_ep, 0, &comp);
    ASSERT_EQ(UCS_INPROGRESS, status);
    ASSERT_TRUE(wait_for("the endpoint's error", [&] {
        return !m_errors.empty() && (comp.count == 0);
    }));
    printf("SYNCMEM-MEASURE peer_closed: endpoint error %.3f s after the"
           " close\n", ucs_time_to_sec(ucs_get_time() - closed));
    EXPECT_EQ(m_ep, m_errors[0].first);
    EXPECT_TRUE((m_errors[0].second == UCS_ERR_ENDPOINT_TIMEOUT) ||
                (m_errors[0].second == UCS_ERR_CONNECTION_RESET))
            << ucs_status_string(m_errors[0].second);
    EXPECT_NE(UCS_OK, comp.status);
    EXPECT_EQ(0u, uct_syncmem_ep_reconnects(m_ep)) << "it tried to reconnect";
    std::string warned = warnings->summary();
    warnings.reset();
    EXPECT_EQ("", warned);
}
