// SPDX-License-Identifier: BSD-3-Clause
// The handshake's decisions (uct_syncmem/syncmem_cm_msg.c): which messages
// are believed, and the cap on half-open connections. No device: an iface
// with only what the decisions read (test/fuzz/fuzz_cm.c drives the same
// code with arbitrary sequences).
#include <gtest/gtest.h>

extern "C" {
#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_cm.h>
}

#include <cstring>
#include <memory>
#include <vector>

namespace {

const int refused = -1;

class cm : public testing::Test {
protected:
    void SetUp() override {
        m_iface = (uct_syncmem_iface_t*)calloc(1, sizeof(*m_iface));
        m_iface->id                      = 0x1d;
        m_iface->config.cm_max_half_open = 4;
        m_iface->port.link_layer         = IBV_LINK_LAYER_ETHERNET;
        m_iface->port.mtu                = IBV_MTU_1024;
        m_iface->port.gid.raw[10]        = 0xff;
        m_iface->port.gid.raw[11]        = 0xff;
        m_iface->port.gid.raw[15]        = 1;
        ucs_list_head_init(&m_iface->eps);
        ucs_list_head_init(&m_iface->cm.passive);
    }

    void TearDown() override {
        uct_syncmem_cm_passive_t *p, *tmp;
        uct_syncmem_rx_link_t *link;

        ucs_list_for_each_safe(p, tmp, &m_iface->cm.passive, list) {
            uct_syncmem_cm_passive_remove(m_iface, p, 0);
            free(p);
        }
        uct_syncmem_cm_tombs_free(m_iface);
        ucs_free(m_iface->cm.deferred);
        while ((link = m_iface->rx.links) != NULL) {
            m_iface->rx.links = link->next;
            ucs_free(link);
        }
        free(m_iface);
    }

    // A well-formed message from the UD QP src_qp, as received.
    std::vector<uint8_t> msg(uint8_t type, uint32_t src_qp, uint64_t conn,
                             uint16_t gen = 0, uint8_t flags = 0,
                             uint32_t rc_qpn = 0, uint32_t old_qpn = 0,
                             uint32_t old_rq_psn = 0) {
        uct_syncmem_cm_msg_t m = {};
        uct_syncmem_port_t sender = m_iface->port;

        sender.gid.raw[15] = 2;
        m.type         = type;
        m.src_cm_qpn   = src_qp;
        m.rc_qpn       = rc_qpn ? rc_qpn : 0x500 + conn;
        m.flags        = flags;
        m.src_iface_id = 0xabc;
        m.dst_iface_id = m_iface->id;
        m.conn_id      = conn;
        m.gen          = gen;
        m.old_qpn      = old_qpn;
        m.old_rq_psn   = old_rq_psn;
        uct_syncmem_dev_addr_pack(&sender, &m.src_dev);
        std::vector<uint8_t> buf(sizeof(m));
        memcpy(buf.data(), &m, sizeof(m));
        return buf;
    }

    // What the iface decides for buf from src_qp (refused: the message did
    // not parse; an int, since no action has that value); an accepted
    // connection is put in the table, as syncmem_cm.c does once its QP exists.
    int receive(const std::vector<uint8_t> &buf,
                uint32_t src_qp) {
        uct_syncmem_cm_msg_t m;
        uct_syncmem_port_t peer;
        uct_syncmem_cm_passive_t *p;
        uct_syncmem_ep_t *ep;

        if (uct_syncmem_cm_msg_parse(m_iface, buf.data(),
                                     UCT_SYNCMEM_CM_GRH_LEN + buf.size(),
                                     src_qp, &m, &peer) != UCS_OK) {
            return refused;
        }
        uct_syncmem_cm_action_t action = uct_syncmem_cm_decide(m_iface, &m,
                                                               &p, &ep);
        if (action == UCT_SYNCMEM_CM_ACCEPT) {
            p      = (uct_syncmem_cm_passive_t*)calloc(1, sizeof(*p));
            p->qpn = m_next_qpn++;
            uct_syncmem_cm_passive_insert(m_iface, p, &m);
        } else if (action == UCT_SYNCMEM_CM_RELEASE) {
            uct_syncmem_cm_passive_remove(m_iface, p, 0);
            free(p);
        } else if (action == UCT_SYNCMEM_CM_REPLIED) {
            uct_syncmem_cm_replied(ep, &m);
        }
        return action;
    }

    // An endpoint of ours in state, generation gen, of connection 7 to
    // the iface 0xabc through its CM QP 0x40 (what msg() sends from); the
    // caller puts it in the iface's list.
    static uct_syncmem_ep_t our_ep(uint8_t state, uint16_t gen = 0) {
        uct_syncmem_ep_t ep = {};
        ep.state            = state;
        ep.cm.conn_id       = 7;
        ep.cm.gen           = gen;
        ep.cm.peer_iface_id = 0xabc;
        ep.cm.peer_cm_qpn   = 0x40;
        return ep;
    }

    uct_syncmem_iface_t *m_iface;
    uint32_t            m_next_qpn = 0x900;
};

} // namespace

TEST_F(cm, believed_only_from_the_qp_it_names)
{
    EXPECT_EQ(refused, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT,
              receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1), 0x40));
}

TEST_F(cm, truncated_foreign_and_impossible_messages_are_dropped)
{
    std::vector<uint8_t> m = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);

    m.resize(UCT_SYNCMEM_CM_MSG_V1_LEN - 1); // shorter than any version's
    EXPECT_EQ(refused, receive(m, 0x40));
    m = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    m[offsetof(uct_syncmem_cm_msg_t, dst_iface_id)] ^= 1;
    EXPECT_EQ(refused, receive(m, 0x40));
    m = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    m[0] = 9; // no such type
    EXPECT_EQ(refused, receive(m, 0x40));
    m = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    m[offsetof(uct_syncmem_cm_msg_t, src_dev) + 6] ^= 1; // its CRC fails
    EXPECT_EQ(refused, receive(m, 0x40));
    m = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    uint32_t qpn = 1; // a management QP, never an RC QP
    memcpy(&m[offsetof(uct_syncmem_cm_msg_t, rc_qpn)], &qpn, sizeof(qpn));
    EXPECT_EQ(refused, receive(m, 0x40));
    EXPECT_EQ(0u, m_iface->cm.half_open);
}

TEST_F(cm, half_open_capped_half_per_sender)
{
    // one sender gets half of the 4 slots
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 2), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REFUSE, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 3), 0x40));
    // a retransmission of an accepted one is answered, not refused
    EXPECT_EQ(UCT_SYNCMEM_CM_ANSWER, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 2), 0x40));
    // others still get in, up to the cap
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x41, 4), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x42, 5), 0x42));
    EXPECT_EQ(UCT_SYNCMEM_CM_REFUSE, receive(msg(UCT_SYNCMEM_CM_REQ, 0x43, 6), 0x43));
    EXPECT_EQ(4u, m_iface->cm.half_open);

    // a keepalive that reaches its peer makes a connection established
    uct_syncmem_cm_passive_t *first =
            ucs_list_head(&m_iface->cm.passive, uct_syncmem_cm_passive_t, list);
    first->probing = 1;
    ++m_iface->cm.probes_posted;
    EXPECT_EQ(nullptr, uct_syncmem_cm_probe_done(m_iface, first->qpn, 1));
    EXPECT_EQ(3u, m_iface->cm.half_open);
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x43, 6), 0x43));

    // one that fails is given back to be released
    uct_syncmem_cm_passive_t *last =
            ucs_list_tail(&m_iface->cm.passive, uct_syncmem_cm_passive_t, list);
    last->probing = 1;
    ++m_iface->cm.probes_posted;
    EXPECT_EQ(last, uct_syncmem_cm_probe_done(m_iface, last->qpn, 0));
}

// A REQ refused for room is kept (once per connection, the latest
// generation) to be accepted once there is room; as many as one sender may
// hold half-open (2 of 4), no more.
TEST_F(cm, refused_reqs_kept_for_room_up_to_a_senders_share)
{
    uct_syncmem_cm_msg_t m;
    uct_syncmem_port_t peer;
    auto defer = [&](uint64_t conn, uint16_t gen) {
        std::vector<uint8_t> buf = msg(UCT_SYNCMEM_CM_REQ, 0x40, conn, gen);
        EXPECT_EQ(UCS_OK, uct_syncmem_cm_msg_parse(m_iface, buf.data(),
                                                   UCT_SYNCMEM_CM_GRH_LEN +
                                                   buf.size(), 0x40, &m,
                                                   &peer));
        return uct_syncmem_cm_defer(m_iface, &m, &peer);
    };

    // CM_MAX_HALF_OPEN 4: 32 kept, 16 of one sender
    const unsigned share = UCT_SYNCMEM_CM_DEFER_FACTOR * 4 / 2;
    EXPECT_EQ(1, defer(7, 0));
    EXPECT_EQ(1, defer(7, 0)); // a retransmission: the same entry
    EXPECT_EQ(1u, m_iface->cm.num_deferred);
    for (unsigned conn = 8; conn < 7 + share; ++conn) {
        EXPECT_EQ(1, defer(conn, 0)) << conn;
    }
    EXPECT_EQ(share, m_iface->cm.num_deferred);
    EXPECT_EQ(0, defer(100, 0)); // the sender's share is full: refused
    EXPECT_EQ(1, defer(7, 1));   // a later generation replaces its entry
    ASSERT_EQ(share, m_iface->cm.num_deferred);
    EXPECT_EQ(7u, m_iface->cm.deferred[0].msg.conn_id);
    EXPECT_EQ(1u, m_iface->cm.deferred[0].msg.gen);
    EXPECT_EQ(8u, m_iface->cm.deferred[1].msg.conn_id);
    EXPECT_EQ(0, memcmp(&peer.gid, &m_iface->cm.deferred[1].peer.gid,
                        sizeof(peer.gid)));

    // another sender has its own share, up to the whole
    for (unsigned conn = 0; conn < share; ++conn) {
        std::vector<uint8_t> buf = msg(UCT_SYNCMEM_CM_REQ, 0x41, conn, 0);
        ASSERT_EQ(UCS_OK, uct_syncmem_cm_msg_parse(m_iface, buf.data(),
                                                   UCT_SYNCMEM_CM_GRH_LEN +
                                                   buf.size(), 0x41, &m,
                                                   &peer));
        m.src_iface_id = 0xdef;
        EXPECT_EQ(1, uct_syncmem_cm_defer(m_iface, &m, &peer)) << conn;
    }
    EXPECT_EQ(2 * share, m_iface->cm.num_deferred);
    EXPECT_EQ(0, defer(101, 0)); // all full
}

// An RTU asks the target to probe a half-open connection now: believed
// only from the QP that opened it, for its generation, while unconfirmed.
// A REQ that promises one is noted (its REP asks for it).
TEST_F(cm, rtu_probes_only_its_own_half_open_connection)
{
    std::vector<uint8_t> req = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1, 0,
                                   UCT_SYNCMEM_CM_F_RTU);
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(req, 0x40));
    uct_syncmem_cm_passive_t *p =
            ucs_list_head(&m_iface->cm.passive, uct_syncmem_cm_passive_t, list);
    EXPECT_EQ(1, p->rtu);
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT,
              receive(msg(UCT_SYNCMEM_CM_REQ, 0x41, 2), 0x41));
    EXPECT_EQ(0, ucs_list_tail(&m_iface->cm.passive, uct_syncmem_cm_passive_t,
                               list)->rtu);

    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_RTU, 0x41, 1), 0x41)); // not its own
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_RTU, 0x40, 1, 1), 0x40)); // later gen
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_RTU, 0x40, 9), 0x40)); // no such
    EXPECT_EQ(UCT_SYNCMEM_CM_PROBE,
              receive(msg(UCT_SYNCMEM_CM_RTU, 0x40, 1), 0x40));
    p->confirmed = 1;
    --m_iface->cm.half_open;
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_RTU, 0x40, 1), 0x40)); // confirmed
}

// A connection the keepalive released is remembered (a tomb) for as long
// as its initiator may still reconnect, however many were released at once
// (a link flap under a thousand endpoints): the reconnect then tells the
// receive path which QP the new one replaces, so that active messages sent
// again are not delivered twice. Older ones, and those beyond the bound,
// are forgotten.
TEST_F(cm, released_connections_remembered_while_a_reconnect_may_come)
{
    const unsigned n = UCT_SYNCMEM_CM_TOMBS + 10;
    uct_syncmem_cm_msg_t m;
    uct_syncmem_port_t peer;

    m_iface->config.reconnect_timeout = ucs_time_from_sec(5.0);
    for (unsigned conn = 1; conn <= n; ++conn) {
        std::vector<uint8_t> buf = msg(UCT_SYNCMEM_CM_REQ, 0x40, conn);
        ASSERT_EQ(UCS_OK, uct_syncmem_cm_msg_parse(m_iface, buf.data(),
                                                   UCT_SYNCMEM_CM_GRH_LEN +
                                                   buf.size(), 0x40, &m,
                                                   &peer));
        uct_syncmem_cm_passive_t *gone =
                (uct_syncmem_cm_passive_t*)calloc(1, sizeof(*gone));
        gone->qpn = 0x1000 + conn;
        uct_syncmem_cm_passive_insert(m_iface, gone, &m);
        uct_syncmem_cm_passive_remove(m_iface, gone, 1);
        free(gone);
    }
    EXPECT_EQ((unsigned)UCT_SYNCMEM_CM_TOMBS, m_iface->cm.num_tombs);

    // the last of them reconnects: its new QP replaces the released one
    EXPECT_EQ(UCT_SYNCMEM_CM_ACCEPT,
              receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, n, 1), 0x40));
    ASSERT_NE(nullptr, m_iface->rx.links);
    EXPECT_EQ(0x1000u + n, m_iface->rx.links->old_qpn);
    EXPECT_NE(0u, m_iface->rx.links->new_qpn);
    EXPECT_EQ(UCT_SYNCMEM_CM_TOMBS - 1u, m_iface->cm.num_tombs);

    // past twice RECONNECT_TIMEOUT (10 s at least) they are forgotten
    for (uct_syncmem_cm_tomb_t *t = m_iface->cm.tombs; t != NULL; t = t->next) {
        t->released -= ucs_time_from_sec(11.0);
    }
    uct_syncmem_cm_passive_t *p =
            ucs_list_head(&m_iface->cm.passive, uct_syncmem_cm_passive_t, list);
    uct_syncmem_cm_passive_remove(m_iface, p, 1);
    free(p);
    EXPECT_EQ(1u, m_iface->cm.num_tombs);
}

TEST_F(cm, release_and_reconnect_only_from_the_opener)
{
    ASSERT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_DREQ, 0x41, 1), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_REQ, 0x41, 1, 1), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_REPLACE, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_RELEASE, receive(msg(UCT_SYNCMEM_CM_DREQ, 0x40, 1), 0x40));
    EXPECT_TRUE(ucs_list_is_empty(&m_iface->cm.passive));
}

TEST_F(cm, reply_believed_once_from_the_iface_asked)
{
    uct_syncmem_ep_t ep = our_ep(UCT_SYNCMEM_EP_CONNECTING);
    ucs_list_add_tail(&m_iface->eps, &ep.list);

    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_REP, 0x41, 7), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED, receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7), 0x40));
    EXPECT_EQ(0x507u, ep.cm.peer_rc_qpn);
    EXPECT_EQ(UCT_SYNCMEM_CM_REP_NEW_QP, ep.cm.rep);
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7), 0x40));
    // taken by progress (raised as the REP event): still the one believed
    ep.cm.rep = UCT_SYNCMEM_CM_REP_TAKEN;
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP, receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7), 0x40));
    ucs_list_del(&ep.list);
}

// GONE (the target's iface closes) is believed for an endpoint of ours,
// from the CM QP it asked, of any generation, with no RC QP named; the
// target sends it only to initiators whose REQ said they know it.
TEST_F(cm, gone_believed_only_from_the_iface_asked)
{
    uct_syncmem_ep_t ep = our_ep(UCT_SYNCMEM_EP_RECONN_WAIT_REP, 3);
    ucs_list_add_tail(&m_iface->eps, &ep.list);

    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_GONE, 0x41, 7, 0, 0, 1), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_GONE, 0x40, 8, 0, 0, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_PEER_GONE,
              receive(msg(UCT_SYNCMEM_CM_GONE, 0x40, 7, 1, 0, 1), 0x40));
    ucs_list_del(&ep.list);
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_GONE, 0x40, 7, 3, 0, 1), 0x40));

    ASSERT_EQ(UCT_SYNCMEM_CM_ACCEPT, receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 1,
                                                 0, UCT_SYNCMEM_CM_F_V3),
                                             0x40));
    ASSERT_EQ(UCT_SYNCMEM_CM_ACCEPT,
              receive(msg(UCT_SYNCMEM_CM_REQ, 0x40, 2), 0x40));
    uct_syncmem_cm_passive_t *p;
    std::vector<int> gone;
    ucs_list_for_each(p, &m_iface->cm.passive, list) {
        gone.push_back(p->gone);
    }
    EXPECT_EQ(std::vector<int>({ 1, 0 }), gone);
}

// BUSY (a REQ refused for room) is believed only about this generation's
// REQ, not answered yet, from the iface asked.
TEST_F(cm, busy_believed_only_for_the_req_waiting)
{
    uct_syncmem_ep_t ep = our_ep(UCT_SYNCMEM_EP_CONNECTING, 2);
    ucs_list_add_tail(&m_iface->eps, &ep.list);

    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_BUSY, 0x41, 7, 2, 0, 1), 0x41));
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_BUSY, 0x40, 7, 1, 0, 1), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_PEER_BUSY,
              receive(msg(UCT_SYNCMEM_CM_BUSY, 0x40, 7, 2, 0, 1), 0x40));
    ep.cm.rep = UCT_SYNCMEM_CM_REP_NEW_QP; // answered since
    EXPECT_EQ(UCT_SYNCMEM_CM_DROP,
              receive(msg(UCT_SYNCMEM_CM_BUSY, 0x40, 7, 2, 0, 1), 0x40));
    ucs_list_del(&ep.list);
}

// A REP is noted "resumed" (the same passive QP kept) only naming the QP
// the endpoint already had: otherwise the endpoint connects its new QP, as
// to any REP. Whether it asked to resume is the state machine's to check
// (test_ep_fsm.cc), so a REP saying so is noted as it is.
TEST_F(cm, resume_noted_only_for_the_same_qp)
{
    const uint8_t resume = UCT_SYNCMEM_CM_F_RESUME;
    uct_syncmem_ep_t ep  = our_ep(UCT_SYNCMEM_EP_RECONN_WAIT_BOTH, 1);
    ep.cm.peer_rc_qpn    = 0x507;
    ucs_list_add_tail(&m_iface->eps, &ep.list);

    ep.reconnect.resume = 1;
    EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED,
              receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 1, resume), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REP_RESUMED, ep.cm.rep);

    ep.cm.rep = UCT_SYNCMEM_CM_REP_NONE; // the next generation's REQ
    ep.cm.gen = 2;
    EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED,
              receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 2, resume, 0x601), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REP_NEW_QP, ep.cm.rep)
            << "resumed, but another passive QP";
    EXPECT_EQ(0x601u, ep.cm.peer_rc_qpn);

    ep.cm.rep = UCT_SYNCMEM_CM_REP_NONE;
    ep.cm.gen = 3;
    EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED,
              receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 3, 0, 0x601), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REP_NEW_QP, ep.cm.rep)
            << "a new QP, but taken for resumed";
    ucs_list_del(&ep.list);
}

// A REP of a reconnect onto a new passive QP says where the QP it replaced
// stopped; believed only of the QP the endpoint's old QP talked to, and
// not from a version 1 peer (whose message ends before it).
TEST_F(cm, where_the_replaced_qp_stopped)
{
    const uint8_t stopped = UCT_SYNCMEM_CM_F_RQ_PSN;
    uct_syncmem_ep_t ep   = our_ep(UCT_SYNCMEM_EP_RECONN_WAIT_BOTH, 1);
    ep.cm.peer_rc_qpn     = 0x507;
    ep.reconnect.old_peer_qpn = 0x507;
    ucs_list_add_tail(&m_iface->eps, &ep.list);

    EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED,
              receive(msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 1, stopped, 0x601,
                          0x507, 0x123456), 0x40));
    EXPECT_EQ(UCT_SYNCMEM_CM_REP_NEW_QP, ep.cm.rep);
    EXPECT_EQ(1, ep.cm.rep_stopped);
    EXPECT_EQ(0x123456u, ep.cm.rep_rq_psn);
    EXPECT_EQ(0x601u, ep.cm.peer_rc_qpn);

    // the next generation's: about a QP our old QP never talked to (a try
    // that failed), or from a version 1 peer, or without the flag
    const struct {
        std::vector<uint8_t> rep;
        const char           *what;
    } cases[] = {
        { msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 2, stopped, 0x602, 0x601, 5),
          "about another QP" },
        { msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 2, stopped, 0x602, 0x507, 5),
          "version 1" },
        { msg(UCT_SYNCMEM_CM_REP, 0x40, 7, 2, 0, 0x602, 0x507, 5),
          "no flag" },
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.what);
        std::vector<uint8_t> rep = c.rep;
        if (strcmp(c.what, "version 1") == 0) {
            rep.resize(UCT_SYNCMEM_CM_MSG_V1_LEN);
        }
        ep.cm.rep         = UCT_SYNCMEM_CM_REP_NONE;
        ep.cm.gen         = 2;
        ep.cm.rep_stopped = 1;
        EXPECT_EQ(UCT_SYNCMEM_CM_REPLIED, receive(rep, 0x40));
        EXPECT_EQ(UCT_SYNCMEM_CM_REP_NEW_QP, ep.cm.rep);
        EXPECT_EQ(0, ep.cm.rep_stopped);
        EXPECT_EQ(0x602u, ep.cm.peer_rc_qpn);
        ep.cm.peer_rc_qpn = 0x601;
        ep.cm.gen         = 1;
    }
    ucs_list_del(&ep.list);
}

// Only a message for another iface (a stale peer's, on a QP number reused)
// counts as foreign; the rest is malformed, which no peer sends.
TEST_F(cm, foreign_and_malformed_told_apart)
{
    uct_syncmem_cm_msg_t m;
    uct_syncmem_port_t peer;
    std::vector<uint8_t> buf = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    auto parse = [&](uint32_t src_qp) {
        return uct_syncmem_cm_msg_parse(m_iface, buf.data(),
                                        UCT_SYNCMEM_CM_GRH_LEN + buf.size(),
                                        src_qp, &m, &peer);
    };

    EXPECT_EQ(UCS_OK, parse(0x40));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse(0x41)); // not from the QP it names
    buf[offsetof(uct_syncmem_cm_msg_t, dst_iface_id)] ^= 1;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, parse(0x40));  // for another iface
    buf    = msg(UCT_SYNCMEM_CM_REQ, 0x40, 1);
    buf[0] = 9;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, parse(0x40)); // no such type
}

// When the handshake's drop report warns (1), says it as a diagnostic (0)
// or says nothing yet (-1).
class cm_flood : public testing::Test {
protected:
    int report(double t, unsigned malformed, unsigned refused,
               unsigned confirmed) {
        return uct_syncmem_cm_flood_report(&m_flood, malformed, refused,
                                           confirmed, at(t), m_span);
    }

    // a report each 1.01 s (of 'seconds' t): one a second at most, and
    // not one lost to rounding
    static ucs_time_t at(double t) {
        return ucs_time_from_sec(100.0 + 1.01 * t);
    }

    uct_syncmem_cm_flood_t m_flood = {};
    ucs_time_t             m_span  = ucs_time_from_sec(6.3); // 300ms x 21
};

TEST_F(cm_flood, a_burst_that_gets_in_is_a_diagnostic)
{
    // refused every second for 20 s, while connections are confirmed
    for (int t = 0; t < 20; ++t) {
        EXPECT_EQ(0, report(t, 0, 800, 10 * t)) << "at " << t << " s";
    }
}

TEST_F(cm_flood, at_most_one_report_a_second)
{
    EXPECT_EQ(0, report(0, 0, 1, 0));
    EXPECT_EQ(-1, report(0.5, 0, 1, 0));
    EXPECT_EQ(0, report(1, 0, 1, 0));
}

TEST_F(cm_flood, refusals_past_the_retries_with_none_confirmed_warn_once)
{
    int warned_at = -1;
    for (int t = 0; t < 20; ++t) {
        int r = report(t, 0, 50, 3);
        EXPECT_NE(-1, r);
        if (r == 1) {
            EXPECT_EQ(-1, warned_at) << "warned twice in one episode";
            warned_at = t;
        }
    }
    EXPECT_EQ(7, warned_at); // the first report past 6.3 s of refusals
}

TEST_F(cm_flood, a_confirmation_or_a_pause_restarts_the_count)
{
    for (int t = 0; t < 6; ++t) {
        EXPECT_EQ(0, report(t, 0, 50, 0));
    }
    for (int t = 6; t < 12; ++t) {
        EXPECT_EQ(0, report(t, 0, 50, 1)); // one got in at 6 s
    }
    // a report with no refusal: the next ones start again
    EXPECT_EQ(0, report(12, 0, 0, 1));
    for (int t = 13; t < 19; ++t) {
        EXPECT_EQ(0, report(t, 0, 50, 1));
    }
    EXPECT_EQ(1, report(20, 0, 50, 1)); // 7 s from 13 s
}

TEST_F(cm_flood, malformed_messages_warn_once_an_episode)
{
    EXPECT_EQ(1, report(0, 5, 0, 0));
    EXPECT_EQ(0, report(1, 5, 0, 0));
    EXPECT_EQ(0, report(5, 5, 0, 0));
    // quiet for longer than a requester retries: a new episode
    EXPECT_EQ(1, report(12, 1, 0, 0));
}
