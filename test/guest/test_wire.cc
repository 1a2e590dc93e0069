// SPDX-License-Identifier: BSD-3-Clause
// Across a (virtual) wire: rxe0 and rxe1 on the two ends of a veth pair
// (contrib/guest/guest.sh --two-hosts), where tc netem can lose packets.
#include "syncmem_test.h"

extern "C" {
#include "uct_syncmem/syncmem_ep.h"
#include "uct_syncmem/syncmem_qp.h"
#include "uct_syncmem/syncmem_hooks.h"
#include <ucs/time/time.h>
}

#include <algorithm>
#include <cstring>
#include <functional>
#include <unistd.h>

class syncmem_wire_test : public syncmem_test {
protected:
    void SetUp() override {
        syncmem_test::SetUp();
        const char *dev1 = getenv("SYNCMEM_DEV1");
        const char *net0 = getenv("SYNCMEM_NETDEV0");
        const char *net1 = getenv("SYNCMEM_NETDEV1");
        ASSERT_TRUE(dev1) << "needs a second port: the two-host guest"
                             " (contrib/guest/guest.sh --two-hosts), or"
                             " SYNCMEM_DEVICE2 with SYNCMEM_GUEST=none";
        if (!net0 || !net1) {
            GTEST_SKIP() << "these tests lose and cut packets on the ports'"
                            " network devices (tc netem, ip link), and "
                         << (net0 ? dev1 : m_dev) << " has none (an"
                            " InfiniBand port)";
        }
        m_dev1   = dev1;
        m_net[0] = net0;
        m_net[1] = net1;
        m_md1    = open_md(m_component, m_dev1.substr(0, m_dev1.rfind(':')));
        ASSERT_NE(nullptr, m_md1);
    }

    void TearDown() override {
        if (!m_net[0].empty()) {
            set_loss(0);
        }
        for (auto &r : m_regs) {
            uct_rkey_release(m_component, &r.second);
            uct_md_mem_dereg(m_md1, r.first);
        }
        // what a failed assertion left registered: a debug build of UCS
        // aborts closing an md with a region still in use
        for (uct_mem_h memh : m_local) {
            uct_md_mem_dereg(m_md, memh);
        }
        syncmem_test::TearDown();
    }

    // netem on both ends: requests and answers both get lost
    void set_loss(int percent) {
        for (const std::string &net : m_net) {
            std::string cmd = "tc qdisc del dev " + net + " root 2>/dev/null";
            EXPECT_EQ(0, system((cmd + "; true").c_str()));
            if (percent > 0) {
                cmd = "tc qdisc add dev " + net + " root netem loss " +
                      std::to_string(percent) + "%";
                ASSERT_EQ(0, system(cmd.c_str())) << cmd;
            }
        }
    }

    // Packets netem dropped so far on both ends.
    unsigned long dropped() {
        unsigned long total = 0;
        for (const std::string &net : m_net) {
            std::string cmd = "tc -s qdisc show dev " + net;
            FILE *p = popen(cmd.c_str(), "r");
            char line[256];
            unsigned long n;
            while (p && fgets(line, sizeof(line), p)) {
                const char *d = strstr(line, "dropped ");
                if (d && (sscanf(d, "dropped %lu", &n) == 1)) {
                    total += n;
                }
            }
            if (p) {
                pclose(p);
            }
        }
        return total;
    }

    // Registers mem on this side (md), until release() or the end of the
    // test, whichever comes first.
    uct_mem_h local(std::vector<uint64_t> &mem) {
        uct_mem_h memh = nullptr;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, mem.data(), mem.size() * 8,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        if (memh != nullptr) {
            m_local.push_back(memh);
        }
        return memh;
    }

    void release(uct_mem_h memh) {
        m_local.erase(std::find(m_local.begin(), m_local.end(), memh));
        uct_md_mem_dereg(m_md, memh);
    }

    // Registers size bytes on the far side (md1) for remote access.
    uct_rkey_t remote(std::vector<uint64_t> &mem) {
        uct_mem_h memh;
        EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md1, mem.data(), mem.size() * 8,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        std::vector<uint8_t> packed(64);
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md1, memh, packed.data()));
        uct_rkey_bundle_t rkey;
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &rkey));
        m_regs.push_back({memh, rkey});
        return rkey.rkey;
    }

    // Puts 1..count into consecutive words, then flushes; returns the
    // first error, if any.
    ucs_status_t put_sequence(uct_ep_h ep, std::vector<uint64_t> &mem,
                              uct_rkey_t rkey) {
        ucs_status_t status;
        for (uint64_t i = 0; i < mem.size(); ++i) {
            uint64_t v = i + 1;
            wait_bound bound("resources for a put_short");
            while (((status = uct_ep_put_short(ep, &v, 8,
                                              (uintptr_t)&mem[i], rkey)) ==
                   UCS_ERR_NO_RESOURCE) && bound()) {
                uct_worker_progress(m_worker);
            }
            if (status != UCS_OK) {
                return status;
            }
        }
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        wait_bound bound("resources to flush the endpoint");
        while (((status = uct_ep_flush(ep, 0, &comp)) == UCS_ERR_NO_RESOURCE) && bound()) {
            uct_worker_progress(m_worker);
        }
        if (status == UCS_INPROGRESS) {
            wait_bound bound("the flush to complete");
            while ((comp.count > 0) && bound()) {
                uct_worker_progress(m_worker);
            }
            status = comp.status;
        }
        return status;
    }

    std::string                                        m_dev1, m_net[2];
    uct_md_h                                           m_md1 = nullptr;
    std::vector<std::pair<uct_mem_h, uct_rkey_bundle_t>> m_regs;
    std::vector<uct_mem_h> m_local;

    // The ifaces of a test that breaks the wire: ours, whose RC gives up
    // in about 30 ms and whose handshake retries every cm_timeout, and the
    // peer's on the other end.
    void open_pair(const char *deadline, uct_iface_h *a, uct_iface_h *b,
                   const char *cm_timeout = "50ms") {
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, a,
                                     {{"RC_TIMEOUT", "10ms"},
                                      {"RC_RETRY_COUNT", "2"},
                                      {"CM_TIMEOUT", cm_timeout},
                                      {"RECONNECT_TIMEOUT", deadline}}));
        ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, b));
    }

    // An endpoint (deadline: RECONNECT_TIMEOUT) whose link broke under a put
    // of v to mem[0] and its flush (comp), now reconnecting; NULL on error.
    uct_ep_h break_link(const char *deadline, std::vector<uint64_t> &mem,
                        uct_rkey_t *rkey_p, uint64_t *v,
                        uct_completion_t *comp,
                        const char *cm_timeout = "50ms") {
        uct_iface_h a, b;
        uct_ep_h ep;
        open_pair(deadline, &a, &b, cm_timeout);
        if (HasFatalFailure()) {
            return NULL;
        }
        if (connect(a, b, &ep) != UCS_OK) {
            return NULL;
        }
        *rkey_p = remote(mem);
        EXPECT_EQ(UCS_OK, put_sequence(ep, mem, *rkey_p)); // working

        set_loss(100);
        EXPECT_EQ(UCS_OK, uct_ep_put_short(ep, v, 8, (uintptr_t)&mem[0],
                                           *rkey_p));
        EXPECT_EQ(UCS_INPROGRESS, uct_ep_flush(ep, 0, comp));
        // the QP fails after the RC retries, and the endpoint reconnects
        for (int i = 0; (i < 1000000) && (uct_syncmem_ep_reconnects(ep) == 0);
             ++i) {
            uct_worker_progress(m_worker);
        }
        EXPECT_EQ(1u, uct_syncmem_ep_reconnects(ep));
        return ep;
    }
};

TEST_F(syncmem_wire_test, put_crosses_the_wire)
{
    uct_iface_h a, b;
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a));
    ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b));
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));

    std::vector<uint64_t> mem(1000, 0);
    ASSERT_EQ(UCS_OK, put_sequence(ep, mem, remote(mem)));
    for (uint64_t i = 0; i < mem.size(); ++i) {
        ASSERT_EQ(i + 1, mem[i]);
    }
}

// Lost handshake messages are sent again; lost data is retransmitted by RC.
TEST_F(syncmem_wire_test, connect_and_put_with_packet_loss)
{
    uct_iface_h a, b;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a,
                                 {{"CM_TIMEOUT", "50ms"}, {"CM_RETRIES", "100"},
                                  {"RC_TIMEOUT", "10ms"}}));
    ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b));
    set_loss(10);

    for (int round = 0; round < 5; ++round) {
        uct_ep_h ep;
        ASSERT_EQ(UCS_OK, connect(a, b, &ep));
        std::vector<uint64_t> mem(300, 0);
        ASSERT_EQ(UCS_OK, put_sequence(ep, mem, remote(mem))) << round;
        for (uint64_t i = 0; i < mem.size(); ++i) {
            ASSERT_EQ(i + 1, mem[i]) << "round " << round;
        }
    }
    EXPECT_TRUE(m_errors.empty());
    EXPECT_GT(dropped(), 10u) << "netem dropped nothing: the test proves nothing";
}

TEST_F(syncmem_wire_test, connect_over_a_dead_wire_times_out)
{
    uct_iface_h a, b;
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a,
                                 {{"CM_TIMEOUT", "20ms"}, {"CM_RETRIES", "5"}}));
    ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b));
    set_loss(100);
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));

    std::vector<uint64_t> mem(1, 0);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, put_sequence(ep, mem, remote(mem)));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
}

// A link outage shorter than UCX_SYNCMEM_RECONNECT_TIMEOUT: the endpoint
// reconnects once the link is back; every put lands, every AM arrives once,
// and the user hears of nothing.
TEST_F(syncmem_wire_test, link_outage_shorter_than_the_deadline_loses_nothing)
{
    uct_iface_h a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair("20s", &a, &b));
    std::vector<uint64_t> seen;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(b, 5,
            [](void *arg, void *data, size_t, unsigned) {
                uint64_t seq;
                memcpy(&seq, data, 8);
                static_cast<std::vector<uint64_t>*>(arg)->push_back(seq);
                return UCS_OK;
            }, &seen, 0));
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    std::vector<uint64_t> mem(400, 0);
    uct_rkey_t rkey = remote(mem);

    ucs_time_t down = 0;
    auto progress = [&] {
        uct_worker_progress(m_worker);
        if (down && (ucs_time_to_sec(ucs_get_time() - down) > 0.7)) {
            set_loss(0); // the link is back
            down = 0;
        }
    };
    auto retry = [&](std::function<ucs_status_t()> op) {
        ucs_status_t status;
        wait_bound bound("resources to post an operation");
        while (((status = op()) == UCS_ERR_NO_RESOURCE) && bound()) {
            progress();
        }
        return status;
    };
    for (uint64_t i = 0; i < mem.size(); ++i) {
        uint64_t v = i + 1;
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_put_short(ep, &v, 8, (uintptr_t)&mem[i], rkey);
        }));
        ASSERT_EQ(UCS_OK, retry([&] {
            return uct_ep_am_short(ep, 5, i, NULL, 0);
        }));
        if (i == 100) {
            set_loss(100); // the link goes down mid-stream
            down = ucs_get_time();
        }
    }
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status = retry([&] { return uct_ep_flush(ep, 0, &comp); });
    wait_bound bound("the flush to complete");
    while (((status == UCS_INPROGRESS) && (comp.count > 0)) && bound()) {
        progress();
    }
    EXPECT_EQ(UCS_OK, (status == UCS_INPROGRESS) ? comp.status : status);
    EXPECT_TRUE(m_errors.empty());
    EXPECT_GE(uct_syncmem_ep_reconnects(ep), 1u) << "the outage went unnoticed";
    for (uint64_t i = 0; i < mem.size(); ++i) {
        ASSERT_EQ(i + 1, mem[i]) << i;
    }
    for (int i = 0; (i < 1000000) && (seen.size() < mem.size()); ++i) {
        uct_worker_progress(m_worker);
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(mem.size(), seen.size()) << "lost or duplicated messages";
    for (uint64_t i = 0; i < seen.size(); ++i) {
        ASSERT_EQ(i, seen[i]);
    }
}

// Longer than the deadline: everything outstanding fails with
// UCS_ERR_ENDPOINT_TIMEOUT, and the error handler hears of it once.
TEST_F(syncmem_wire_test, link_outage_longer_than_the_deadline_fails_once)
{
    uct_iface_h a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair("300ms", &a, &b));
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    std::vector<uint64_t> mem(100, 0);
    uct_rkey_t rkey = remote(mem);
    ASSERT_EQ(UCS_OK, put_sequence(ep, mem, rkey)); // connected, working

    set_loss(100);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, put_sequence(ep, mem, rkey));
    ASSERT_EQ(1u, m_errors.size());
    EXPECT_EQ(ep, m_errors[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_errors[0].second);
}

// The link comes back within the deadline, but the user stops progressing
// until after it (Open MPI's pml worker while its osc worker streams): the
// tries before the pause were all lost, and the endpoint must ask once more
// rather than give up at its first progress after the pause.
TEST_F(syncmem_wire_test, reconnect_survives_a_progress_pause_past_the_deadline)
{
    std::vector<uint64_t> mem(100, 0);
    uct_rkey_t rkey;
    uint64_t v = 7;
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    // (the last try waits CM_TIMEOUT for its answer: 50 ms was too short
    // for the guest on kernel 6.12 in a busy make check)
    uct_ep_h ep = break_link("600ms", mem, &rkey, &v, &comp, "200ms");
    ASSERT_NE(nullptr, ep);
    set_loss(0);    // the link is back, and nobody progresses...
    usleep(1200000); // ...until well past the deadline (600 ms)
    for (int i = 0; (i < 10000000) && (comp.count > 0) && m_errors.empty(); ++i) {
        uct_worker_progress(m_worker);
    }
    EXPECT_TRUE(m_errors.empty()) << "gave up at the first progress";
    EXPECT_EQ(0, comp.count);
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(7u, mem[0]);
}

// Cancel while reconnecting: nothing is in flight on the new QP, so what is
// outstanding ends at once, canceled; the user's error handler is not called.
TEST_F(syncmem_wire_test, flush_cancel_while_reconnecting)
{
    std::vector<uint64_t> mem(100, 0);
    uct_rkey_t rkey;
    uint64_t v = 1;
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    uct_ep_h ep = break_link("20s", mem, &rkey, &v, &comp);
    ASSERT_NE(nullptr, ep);
    ASSERT_EQ(1u, uct_syncmem_ep_reconnects(ep));
    EXPECT_EQ(1, comp.count) << "completed while the link is down";

    EXPECT_EQ(UCS_OK, uct_ep_flush(ep, UCT_FLUSH_FLAG_CANCEL, NULL));
    EXPECT_EQ(0, comp.count);
    EXPECT_EQ(UCS_ERR_CANCELED, comp.status);
    EXPECT_TRUE(m_errors.empty());
    EXPECT_EQ(UCS_ERR_CANCELED,
              uct_ep_put_short(ep, &v, 8, (uintptr_t)&mem[0], rkey));
}

// The netdev itself goes down (ip link): Soft-RoCE then fails requests at
// once, locally, and its handshake QP too. Both come back when the link
// does: nothing lost, no error for the user.
TEST_F(syncmem_wire_test, netdev_down_and_up_loses_nothing)
{
    uct_iface_h a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair("30s", &a, &b));
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    std::vector<uint64_t> mem(300, 0);
    uct_rkey_t rkey = remote(mem);
    ASSERT_EQ(UCS_OK, put_sequence(ep, mem, rkey)); // connected, working
    std::fill(mem.begin(), mem.end(), 0);

    // down: the route to the peer would fall back to the local table (its
    // address is on this host) and go around the cut through lo; a
    // blackhole keeps it cut, as on two real hosts
    const std::string route = " 10.77.1.2 dev " + m_net[0] +
                              " src 10.77.1.1 table 100";
    ASSERT_EQ(0, system(("ip link set " + m_net[0] + " down && ip route"
                         " replace blackhole 10.77.1.2 table 100").c_str()));
    ucs_time_t down = ucs_get_time();
    bool up = false;
    ucs_status_t status;
    for (uint64_t i = 0; i < mem.size(); ++i) {
        uint64_t v = i + 1;
        wait_bound bound("resources for a put_short while the link is down");
        while (((status = uct_ep_put_short(ep, &v, 8, (uintptr_t)&mem[i],
                                          rkey)) == UCS_ERR_NO_RESOURCE) && bound()) {
            uct_worker_progress(m_worker);
            if (!up && (ucs_time_to_sec(ucs_get_time() - down) > 1.0)) {
                ASSERT_EQ(0, system(("ip link set " + m_net[0] + " up && ip"
                                     " route replace" + route).c_str()));
                up = true;
            }
        }
        ASSERT_EQ(UCS_OK, status) << i;
    }
    if (!up) {
        ASSERT_EQ(0, system(("ip link set " + m_net[0] + " up && ip route"
                             " replace" + route).c_str()));
    }
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    status = uct_ep_flush(ep, 0, &comp);
    wait_bound bound("the flush to complete");
    while (((status == UCS_INPROGRESS) && (comp.count > 0)) && bound()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_EQ(UCS_OK, (status == UCS_INPROGRESS) ? comp.status : status);
    EXPECT_TRUE(m_errors.empty());
    for (uint64_t i = 0; i < mem.size(); ++i) {
        ASSERT_EQ(i + 1, mem[i]) << i;
    }

    // and a new endpoint still connects (the handshake QP came back)
    uct_ep_h ep2;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep2));
    std::fill(mem.begin(), mem.end(), 0);
    EXPECT_EQ(UCS_OK, put_sequence(ep2, mem, rkey));
    EXPECT_EQ(mem.size(), mem.back());
}

// The reply to a get is cut at the peer (its netdev's MTU lowered below the
// reply's packets: its sends fail locally, as when the link goes down under
// it, while our small requests still get through; what it does send is
// lost) until the endpoint's QP fails; then the link comes back and the
// endpoint reconnects. Soft-RoCE's responder keeps that interrupted reply pending on
// its QP and, at the next packet the QP receives, sends the rest of it
// without a first packet, which the requester's completer takes for the
// read's success with no data (rxe_comp.c: COMPST_ERROR, the status left
// at IBV_WC_SUCCESS). Resuming that QP pair would complete the get with
// UCS_OK and its buffer untouched; it must come back with its data.
TEST_F(syncmem_wire_test, reconnect_after_a_cut_read_reply_returns_the_data)
{
    uct_iface_h a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair("20s", &a, &b));
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    std::vector<uint64_t> far(1024);  // 8 KiB: replies of several packets
    for (size_t i = 0; i < far.size(); ++i) {
        far[i] = 0x5eed000000000000ull + i;
    }
    uct_rkey_t rkey = remote(far);
    std::vector<uint64_t> scratch(1, 0);
    ASSERT_EQ(UCS_OK, put_sequence(ep, scratch, remote(scratch))); // working

    for (size_t size : { (size_t)2048, (size_t)512, far.size() * 8 }) {
        SCOPED_TRACE("get of " + std::to_string(size) + " bytes");
        std::vector<uint64_t> got(far.size(), 0xa5a5a5a5a5a5a5a5ull);
        uct_mem_h memh = local(got);
        ASSERT_NE(nullptr, memh);
        unsigned gen = uct_syncmem_ep_reconnects(ep);

        // the peer's replies to us fail to leave it, from now on; its
        // small packets (an RNR NAK for the reply it could not send, which
        // kernel 6.12 sends and our QP would wait on forever) are lost
        ASSERT_EQ(0, system(("ip link set " + m_net[1] + " mtu 300 && tc"
                             " qdisc replace dev " + m_net[1] + " root netem"
                             " loss 100%").c_str()));
        uct_iov_t iov = { got.data(), size, memh, 0, 1 };
        uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
        ucs_status_t status = uct_ep_get_zcopy(ep, &iov, 1,
                                               (uintptr_t)far.data(), rkey,
                                               &comp);
        EXPECT_EQ(UCS_INPROGRESS, status);
        // the QP fails after the RC retries; the cut ends before the
        // endpoint sees it (no progress), so that the get's next try, on
        // whatever QP, is answered (Soft-RoCE's RC retries of a read whose
        // reply could not leave the peer meet the same pending reply)
        struct ibv_qp *qp = ucs_derived_of(ep, uct_syncmem_ep_t)->qp;
        uint32_t psn;
        for (int i = 0; (i < 5000) &&
                        (uct_syncmem_qp_query(qp, &psn) != IBV_QPS_ERR); ++i) {
            usleep(1000);
        }
        EXPECT_EQ(IBV_QPS_ERR, uct_syncmem_qp_query(qp, &psn))
                << "the QP never failed";
        ASSERT_EQ(0, system(("tc qdisc del dev " + m_net[1] + " root && ip"
                             " link set " + m_net[1] + " mtu 1500").c_str()));
        for (int i = 0; (i < 2000000) &&
                        (uct_syncmem_ep_reconnects(ep) == gen); ++i) {
            uct_worker_progress(m_worker);
        }
        EXPECT_GT(uct_syncmem_ep_reconnects(ep), gen) << "no reconnect";
        for (int i = 0; (i < 10000000) && (status == UCS_INPROGRESS) &&
                        (comp.count > 0); ++i) {
            uct_worker_progress(m_worker);
        }
        EXPECT_EQ(0, comp.count) << "the get never completed";
        EXPECT_EQ(UCS_OK, comp.status) << ucs_status_string(comp.status);
        size_t wrong = 0, first = 0;
        for (size_t i = size / 8; i-- > 0;) {
            if (far[i] != got[i]) {
                ++wrong;
                first = i;
            }
        }
        EXPECT_EQ(0u, wrong) << "words wrong, the first " << first << ": "
                             << std::hex << got[first] << " (a5a5..: the get"
                             << " completed without its data)";
        EXPECT_TRUE(m_errors.empty());
        release(memh);
    }
}

// A link that breaks with atomics in flight: the first ones ran at the peer
// (their replies were lost on its way out), the later ones never reached
// it. Its REP says where its old QP stopped: what ran does not run again (a
// fetch among it fails, its value gone; an add nobody fetches succeeds),
// and what never ran fails too, never posted again (so posted, fetch-adds
// ran twice on Soft-RoCE 6.1: doc/design.md). Each add is a distinct bit,
// so the word says what ran how often. With keepalive (the peer's
// keepalive released its old QP before the REQ came: no answer about it),
// every atomic of unknown outcome fails, the adds nobody fetched too.
class syncmem_wire_atomics_test : public syncmem_wire_test,
                                  public ::testing::WithParamInterface<bool> {
};

TEST_P(syncmem_wire_atomics_test, atomics_of_a_replaced_qp_never_run_twice)
{
    const bool released = GetParam();
    uct_iface_h a, b;
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a,
                                 {{"RC_TIMEOUT", "10ms"},
                                  {"RC_RETRY_COUNT", "2"},
                                  {"CM_TIMEOUT", "50ms"},
                                  {"RECONNECT_RESUME", "n"},
                                  {"RECONNECT_TIMEOUT", "20s"},
                                  // nine posted with no progress between
                                  {"TX_RING_MIN", "16"}}));
    if (released) {
        ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b,
                                     {{"KEEPALIVE_INTERVAL", "100ms"},
                                      {"RC_TIMEOUT", "20ms"},
                                      {"RC_RETRY_COUNT", "3"}}));
    } else {
        ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b));
    }
    uct_ep_h ep;
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    std::vector<uint64_t> far(1, 0), scratch(1, 0);
    uct_rkey_t rkey = remote(far);
    ASSERT_EQ(UCS_OK, put_sequence(ep, scratch, remote(scratch))); // working

    struct fetch {
        uint64_t         add, result;
        uct_completion_t comp;
    };
    fetch ran[4], unrun[3];
    auto post_fetch = [&](fetch &f, uint64_t add) {
        f.add    = add;
        f.result = ~0ull;
        f.comp   = { [](uct_completion_t*) {}, 1, UCS_OK };
        EXPECT_EQ(UCS_INPROGRESS,
                  uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, add, &f.result,
                                        (uintptr_t)&far[0], rkey, &f.comp));
    };

    // the peer's answers are lost from now on: what we send runs there
    ASSERT_EQ(0, system(("tc qdisc replace dev " + m_net[1] +
                         " root netem loss 100%").c_str()));
    for (int i = 0; i < 4; ++i) {
        post_fetch(ran[i], 1ull << i);                         // 1..8
    }
    for (uint64_t add : { 16ull, 32ull }) {                    // nobody fetches
        EXPECT_EQ(UCS_OK, uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, add,
                                               (uintptr_t)&far[0], rkey));
    }
    for (int i = 0; (i < 5000) && (*(volatile uint64_t*)&far[0] != 63); ++i) {
        usleep(1000);
    }
    ASSERT_EQ(63u, far[0]) << "the peer did not run the first six";

    // and now ours too: these never reach the peer
    ASSERT_EQ(0, system(("tc qdisc replace dev " + m_net[0] +
                         " root netem loss 100%").c_str()));
    for (int i = 0; i < 3; ++i) {
        post_fetch(unrun[i], 64ull << i);                      // 64..256
    }
    struct ibv_qp *qp = ucs_derived_of(ep, uct_syncmem_ep_t)->qp;
    uint32_t psn;
    for (int i = 0; (i < 5000) &&
                    (uct_syncmem_qp_query(qp, &psn) != IBV_QPS_ERR); ++i) {
        usleep(1000);
    }
    ASSERT_EQ(IBV_QPS_ERR, uct_syncmem_qp_query(qp, &psn))
            << "the QP never failed";
    if (released) {
        // the peer's keepalive finds us gone and releases its QP
        for (int i = 0; (i < 600) && (uct_syncmem_iface_num_passive(b) > 0);
             ++i) {
            usleep(50 * 1000);
        }
        ASSERT_EQ(0u, uct_syncmem_iface_num_passive(b))
                << "the keepalive did not release the connection";
    }
    set_loss(0);

    wait_bound bound("the reconnect and every atomic's completion");
    auto done = [&]() {
        for (const fetch &f : ran) {
            if (f.comp.count > 0) {
                return false;
            }
        }
        for (const fetch &f : unrun) {
            if (f.comp.count > 0) {
                return false;
            }
        }
        return true;
    };
    while (!done() && bound()) {
        uct_worker_progress(m_worker);
    }
    ASSERT_TRUE(done());
    EXPECT_EQ(1u, uct_syncmem_ep_reconnects(ep));
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status   = uct_ep_flush(ep, 0, &comp);
    wait_bound bound2("the flush");
    while ((status == UCS_INPROGRESS) && (comp.count > 0) && bound2()) {
        uct_worker_progress(m_worker);
    }
    ucs_status_t flushed = (status == UCS_INPROGRESS) ? comp.status : status;

    for (const fetch &f : ran) {
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET, f.comp.status)
                << "fetch-add " << f.add << " ran, its value is gone";
    }
    EXPECT_EQ(63u, far[0]) << "none twice, none of the old QP's again";
    for (const fetch &f : unrun) {
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET, f.comp.status)
                << "fetch-add " << f.add << ": of the old QP";
    }
    if (!released) {
        EXPECT_EQ(UCS_OK, flushed) << "the adds nobody fetched ran once";
    } else {
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET, flushed)
                << "the adds nobody fetched may or may not have run";
    }
    EXPECT_TRUE(m_errors.empty());
}

INSTANTIATE_TEST_SUITE_P(, syncmem_wire_atomics_test, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ?
                                                "old_qp_released" :
                                                "peer_says_where");
                         });
