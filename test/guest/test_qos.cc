// SPDX-License-Identifier: BSD-3-Clause
// Partition and quality of service: UCX_SYNCMEM_PKEY, _SL, _TRAFFIC_CLASS.
// The traffic class is checked on the wire: RoCE v2 packets captured with
// tcpdump on the netdev of the two-host guest must carry it as their IP
// DSCP/ECN byte, for the handshake (UD) and the connection (RC) alike.
#include "syncmem_test.h"

extern "C" {
#include <ucs/debug/log_def.h>
}

#include <fstream>
#include <iterator>
#include <signal.h>
#include <unistd.h>

namespace {

// Error messages UCX logged while a scope lived (and nothing printed).
class scoped_log_capture {
public:
    scoped_log_capture() {
        s_messages.clear();
        ucs_log_push_handler(handler);
    }
    ~scoped_log_capture() {
        ucs_log_pop_handler();
    }
    std::string text() const {
        std::string all;
        for (auto &m : s_messages) {
            all += m + "\n";
        }
        return all;
    }

private:
    static ucs_log_func_rc_t handler(const char *file, unsigned line,
                                     const char *function,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp,
                                     const char *message, va_list ap) {
        if (level <= UCS_LOG_LEVEL_WARN) {
            char buf[1024];
            vsnprintf(buf, sizeof(buf), message, ap);
            s_messages.push_back(buf);
            return UCS_LOG_FUNC_RC_STOP;
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }

    static std::vector<std::string> s_messages;
};

std::vector<std::string> scoped_log_capture::s_messages;

// Puts one word through ep into a buffer registered on md (the far side) and
// flushes; the word must arrive.
void put_and_check(uct_worker_h worker, uct_component_h component,
                   uct_md_h md, uct_ep_h ep)
{
    uint64_t target = 0, value = 0x5eedf00d;
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(md, &target, sizeof(target),
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    std::vector<uint8_t> packed(64);
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(md, memh, packed.data()));
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(component, packed.data(), &rkey));

    ucs_status_t status;
    wait_bound bound("resources for a put_short");
    while (((status = uct_ep_put_short(ep, &value, sizeof(value),
                                      (uintptr_t)&target, rkey.rkey)) ==
           UCS_ERR_NO_RESOURCE) && bound()) {
        uct_worker_progress(worker);
    }
    EXPECT_EQ(UCS_OK, status);
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    wait_bound bound2("resources to flush the endpoint");
    while (((status = uct_ep_flush(ep, 0, &comp)) == UCS_ERR_NO_RESOURCE) && bound2()) {
        uct_worker_progress(worker);
    }
    if (status == UCS_INPROGRESS) {
        wait_bound bound("the flush to complete");
        while ((comp.count > 0) && bound()) {
            uct_worker_progress(worker);
        }
        status = comp.status;
    }
    EXPECT_EQ(UCS_OK, status);
    EXPECT_EQ(value, target);
    uct_rkey_release(component, &rkey);
    uct_md_mem_dereg(md, memh);
}

} // namespace

TEST_F(syncmem_test, pkey_not_in_the_table_fails_naming_the_table)
{
    uct_iface_h iface;
    scoped_log_capture log;

    // Soft-RoCE's table holds the default partition alone (0xffff)
    EXPECT_EQ(UCS_ERR_NO_ELEM, open_iface(m_md, "syncmem", m_dev, &iface,
                                          {{"PKEY", "0x1234"}}));
    EXPECT_NE(std::string::npos,
              log.text().find("UCX_SYNCMEM_PKEY=0x1234 is not in the P_Key"
                              " table of " + m_dev + " ([0] 0xffff)"))
            << log.text();
}

TEST_F(syncmem_test, out_of_range_pkey_sl_and_traffic_class_are_refused)
{
    uct_iface_h iface;
    scoped_log_capture log;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open_iface(m_md, "syncmem", m_dev, &iface,
                                                {{"PKEY", "0x8000"}}));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open_iface(m_md, "syncmem", m_dev, &iface,
                                                {{"SL", "16"}}));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open_iface(m_md, "syncmem", m_dev, &iface,
                                                {{"TRAFFIC_CLASS", "256"}}));
    EXPECT_NE(std::string::npos, log.text().find("UCX_SYNCMEM_PKEY=0x8000"))
            << log.text();
    EXPECT_NE(std::string::npos, log.text().find("UCX_SYNCMEM_SL=16"))
            << log.text();
}

TEST_F(syncmem_test, default_partition_sl_and_traffic_class_connect)
{
    config_mods_t qos = {{"PKEY", "0x7fff"}, {"SL", "5"},
                         {"TRAFFIC_CLASS", "104"}};
    uct_iface_h a, b;
    uct_ep_h ep;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a, qos));
    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &b, qos));
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    put_and_check(m_worker, m_component, m_md, ep);
}

// Two hosts (rxe0 and rxe1 across a veth): only there do packets cross a
// netdev that tcpdump can watch (one rxe loops its own traffic inside).
class syncmem_wire_qos_test : public syncmem_test {
protected:
    void SetUp() override {
        syncmem_test::SetUp();
        const char *dev1 = getenv("SYNCMEM_DEV1");
        const char *net0 = getenv("SYNCMEM_NETDEV0");
        ASSERT_TRUE(dev1 && net0)
                << "needs the two-host guest"
                   " (contrib/guest/guest.sh --two-hosts)";
        ASSERT_EQ(0, system("command -v tcpdump >/dev/null"))
                << "tcpdump is not installed (apt-get install tcpdump)";
        m_dev1 = dev1;
        m_net0 = net0;
        m_md1  = open_md(m_component, m_dev1.substr(0, m_dev1.rfind(':')));
        ASSERT_NE(nullptr, m_md1);
        char dir[] = "/tmp/syncmem-qos.XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        m_dir = dir;
    }

    void TearDown() override {
        stop_capture();
        syncmem_test::TearDown();
        if (!m_dir.empty()) {
            EXPECT_EQ(0, system(("rm -rf " + m_dir).c_str()));
        }
    }

    // tcpdump of RoCE v2 (UDP 4791) on netdev 0, written unbuffered to a
    // pcap file; returns once tcpdump says it is listening. -Z root: as
    // root, Debian's tcpdump opens the file as user tcpdump otherwise, who
    // cannot write into our private directory.
    void start_capture() {
        std::string cmd = "tcpdump -Z root --immediate-mode -i " + m_net0 +
                          " -nn -U -w " + m_dir +
                          "/cap.pcap udp port 4791 2>" + m_dir +
                          "/tcpdump.err & echo $! >" + m_dir + "/pid";
        ASSERT_EQ(0, system(cmd.c_str()));
        std::ifstream pidf(m_dir + "/pid");
        ASSERT_TRUE(pidf >> m_pid);
        for (int i = 0; i < 300; ++i) {
            std::ifstream err(m_dir + "/tcpdump.err");
            std::string text((std::istreambuf_iterator<char>(err)),
                             std::istreambuf_iterator<char>());
            if (text.find("listening on") != std::string::npos) {
                return;
            }
            usleep(100000);
        }
        FAIL() << "tcpdump did not start on " << m_net0;
    }

    // What tcpdump said, for failure messages.
    std::string tcpdump_output() const {
        std::ifstream err(m_dir + "/tcpdump.err");
        return std::string((std::istreambuf_iterator<char>(err)),
                           std::istreambuf_iterator<char>());
    }

    // Stops tcpdump once the file has stopped growing for half a second:
    // packets it received but had not written when stopped are lost.
    void stop_capture() {
        if (m_pid <= 0) {
            return;
        }
        for (long last = -1, size, i = 0; i < 50; ++i) {
            std::ifstream f(m_dir + "/cap.pcap", std::ios::ate);
            size = f ? (long)f.tellg() : 0;
            if (size == last) {
                break;
            }
            last = size;
            usleep(500000);
        }
        kill(m_pid, SIGINT);
        for (int i = 0; (i < 100) && (kill(m_pid, 0) == 0); ++i) {
            usleep(100000);
        }
        m_pid = -1;
    }

    struct packet {
        uint8_t tos;      // IPv4 DSCP/ECN byte
        uint8_t opcode;   // BTH opcode: 0x64 UD send, 0x00-0x1f RC
    };

    // RoCE v2 over IPv4 packets in the capture (Ethernet framing).
    std::vector<packet> captured() {
        std::ifstream f(m_dir + "/cap.pcap", std::ios::binary);
        std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
        std::vector<packet> packets;
        size_t off = 24; // pcap file header
        while (off + 16 <= d.size()) {
            uint32_t caplen;
            memcpy(&caplen, &d[off + 8], 4);
            const uint8_t *p = &d[off + 16];
            off += 16 + caplen;
            if ((off > d.size()) || (caplen < 14 + 20 + 8 + 12) ||
                (p[12] != 0x08) || (p[13] != 0x00)) {
                continue; // not IPv4
            }
            const uint8_t *ip  = p + 14;
            const uint8_t *bth = ip + (ip[0] & 0xf) * 4 + 8;
            if (bth + 12 > p + caplen) {
                continue;
            }
            packets.push_back({ip[1], bth[0]});
        }
        return packets;
    }

    std::string m_dev1, m_net0, m_dir;
    uct_md_h    m_md1 = nullptr;
    pid_t       m_pid = -1;
};

TEST_F(syncmem_wire_qos_test, traffic_class_is_the_ip_dscp_ecn_byte)
{
    const uint8_t tclass = 184; // DSCP 46 (expedited forwarding), ECN 0
    config_mods_t qos    = {{"TRAFFIC_CLASS", std::to_string(tclass)},
                            {"SL", "3"}};
    uct_iface_h a, b;
    uct_ep_h ep;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a, qos));
    ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b, qos));
    start_capture();
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    put_and_check(m_worker, m_component, m_md1, ep);
    stop_capture();

    unsigned ud = 0, rc = 0;
    for (const packet &pkt : captured()) {
        EXPECT_EQ(tclass, pkt.tos) << "BTH opcode 0x" << std::hex
                                   << (int)pkt.opcode;
        ud += (pkt.opcode == 0x64);
        rc += (pkt.opcode < 0x20);
    }
    // the handshake (REQ, REP) and the put with its acknowledgement
    EXPECT_GE(ud, 2u) << "no UD handshake packets captured on " << m_net0
                      << "; tcpdump: " << tcpdump_output();
    EXPECT_GE(rc, 2u) << "no RC packets captured on " << m_net0;
}

TEST_F(syncmem_wire_qos_test, default_traffic_class_is_zero)
{
    uct_iface_h a, b;
    uct_ep_h ep;

    ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &a));
    ASSERT_EQ(UCS_OK, open_iface(m_md1, "syncmem", m_dev1, &b));
    start_capture();
    ASSERT_EQ(UCS_OK, connect(a, b, &ep));
    put_and_check(m_worker, m_component, m_md1, ep);
    stop_capture();

    std::vector<packet> packets = captured();
    EXPECT_FALSE(packets.empty()) << "tcpdump: " << tcpdump_output();
    for (const packet &pkt : packets) {
        EXPECT_EQ(0, pkt.tos);
    }
}
