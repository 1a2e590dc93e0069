/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection handshake (syncmem_cm_msg.c): what an iface does with any
 * sequence of UD messages from anyone, interleaved with what its own
 * endpoints and keepalive do. The messages are raw bytes, or made from a
 * few bytes into well-formed ones (valid addresses and CRCs, a handful of
 * senders, connection ids and generations) so that the fuzzer reaches
 * requests, replies, retransmissions, duplicates, reconnects and releases
 * in any order.
 *
 * Where syncmem_cm.c would make a QP or send, this applies the same table
 * updates with made-up QP numbers (and sometimes a failure, as when the
 * device refuses a QP); the decisions and the tables are the real code.
 * After each step the tables must hold their invariants: no connection
 * twice, half-open ones counted and within the cap (and half of it per
 * sender), tombs bounded, probes counted, a REP believed once per
 * generation, and only from the iface the endpoint asked.
 */
#include "fuzz_iface.h"

#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_cm.h>

#define FUZZ_SENDERS   4
#define FUZZ_EPS       4
#define FUZZ_MAX_HALF  6

static uint32_t fuzz_sender_qpn(unsigned i)
{
    return 0x100 + (i % FUZZ_SENDERS);
}

static void fuzz_check_tables(uct_syncmem_iface_t *iface)
{
    uct_syncmem_cm_passive_t *p, *q;
    uct_syncmem_cm_tomb_t *tomb;
    unsigned half_open = 0, probing = 0, tombs = 0, from[FUZZ_SENDERS] = {};

    ucs_list_for_each(p, &iface->cm.passive, list) {
        half_open += !p->confirmed;
        probing   += p->probing;
        if (!p->confirmed && (p->peer_cm_qpn >= 0x100) &&
            (p->peer_cm_qpn < 0x100 + FUZZ_SENDERS)) {
            ++from[p->peer_cm_qpn - 0x100];
        }
        ucs_list_for_each(q, &iface->cm.passive, list) {
            FUZZ_CHECK((q == p) || (q->peer_iface_id != p->peer_iface_id) ||
                       (q->conn_id != p->conn_id));
        }
    }
    for (tomb = iface->cm.tombs; tomb != NULL; tomb = tomb->next) {
        ++tombs;
    }
    FUZZ_CHECK(half_open == iface->cm.half_open);
    FUZZ_CHECK(half_open <= FUZZ_MAX_HALF);
    for (unsigned i = 0; i < FUZZ_SENDERS; ++i) {
        FUZZ_CHECK(from[i] <= FUZZ_MAX_HALF / 2);
    }
    FUZZ_CHECK(probing == iface->cm.probes_posted);
    FUZZ_CHECK(tombs == iface->cm.num_tombs);
    FUZZ_CHECK(tombs <= UCT_SYNCMEM_CM_TOMBS);
}

/* A well-formed message from a few bytes. */
static void fuzz_make_msg(fuzz_in_t *in, uct_syncmem_iface_t *iface,
                          uint8_t *buf, uint32_t *src_qp_p)
{
    uint8_t what = fuzz_u8(in);
    uct_syncmem_cm_msg_t msg = {};
    uct_syncmem_port_t sender;

    msg.type         = 1 + (what & 3); /* REQ, REP, DREQ, RTU */
    msg.src_cm_qpn   = fuzz_sender_qpn(what >> 2);
    msg.rc_qpn       = 0x200 + fuzz_u8(in);
    msg.src_iface_id = 0xabc0 + (fuzz_u8(in) % FUZZ_SENDERS);
    msg.dst_iface_id = (what & 0x80) ? fuzz_u32(in) : iface->id;
    msg.conn_id      = fuzz_u8(in) % 8;
    msg.gen          = fuzz_u8(in) % 4;
    msg.flags        = fuzz_u8(in);
    if (msg.flags & UCT_SYNCMEM_CM_F_RQ_PSN) {
        msg.old_qpn    = 0x200 + fuzz_u8(in);
        msg.old_rq_psn = fuzz_u32(in);
    }
    fuzz_local_port(&sender, 1);
    sender.gid.raw[15] = 2 + (what >> 4) % 3;
    uct_syncmem_dev_addr_pack(&sender, &msg.src_dev);
    memcpy(buf, &msg, sizeof(msg));
    *src_qp_p = (what & 0x40) ? fuzz_sender_qpn(fuzz_u8(in)) : msg.src_cm_qpn;
}

static void fuzz_message(fuzz_in_t *in, uct_syncmem_iface_t *iface,
                         uint32_t *next_qpn)
{
    uint8_t slot[UCT_SYNCMEM_CM_SLOT - UCT_SYNCMEM_CM_GRH_LEN] = {};
    uct_syncmem_cm_passive_t *p;
    uct_syncmem_cm_msg_t msg;
    uct_syncmem_port_t peer;
    uct_syncmem_ep_t *ep;
    uint32_t byte_len, src_qp, old_qpn;
    uint8_t how = fuzz_u8(in);
    void *buf;

    if (how & 1) {
        fuzz_make_msg(in, iface, slot, &src_qp);
        /* a version 1 peer's is shorter */
        byte_len = UCT_SYNCMEM_CM_GRH_LEN +
                   ((how & 4) ? UCT_SYNCMEM_CM_MSG_V1_LEN : sizeof(msg));
        if (how & 2) {  /* and garble one byte of it */
            slot[fuzz_u8(in) % sizeof(msg)] ^= fuzz_u8(in) | 1;
        }
    } else {
        byte_len = fuzz_u8(in) % (UCT_SYNCMEM_CM_SLOT + 1);
        src_qp   = fuzz_u32(in);
        fuzz_bytes(in, slot, sizeof(slot));
    }

    /* the HCA wrote byte_len bytes, GRH first: a read past is a finding */
    byte_len = ucs_max(byte_len, UCT_SYNCMEM_CM_GRH_LEN);
    buf      = malloc(byte_len - UCT_SYNCMEM_CM_GRH_LEN + 1);
    memcpy(buf, slot, byte_len - UCT_SYNCMEM_CM_GRH_LEN);
    if (uct_syncmem_cm_msg_parse(iface, buf, byte_len, src_qp, &msg,
                                 &peer) != UCS_OK) {
        free(buf);
        return;
    }
    free(buf);
    FUZZ_CHECK(msg.dst_iface_id == iface->id);
    FUZZ_CHECK(msg.src_cm_qpn == src_qp);

    switch (uct_syncmem_cm_decide(iface, &msg, &p, &ep)) {
    case UCT_SYNCMEM_CM_ACCEPT:
        FUZZ_CHECK(msg.type == UCT_SYNCMEM_CM_REQ);
        if (how & 0x80) {
            break; /* the device refused the QP */
        }
        p      = calloc(1, sizeof(*p));
        p->qpn = (*next_qpn)++;
        uct_syncmem_cm_passive_insert(iface, p, &msg);
        break;
    case UCT_SYNCMEM_CM_REFUSE:
        FUZZ_CHECK(msg.type == UCT_SYNCMEM_CM_REQ);
        break;
    case UCT_SYNCMEM_CM_ANSWER:
        FUZZ_CHECK((p != NULL) && (p->gen == msg.gen) &&
                   (p->peer_cm_qpn == src_qp));
        break;
    case UCT_SYNCMEM_CM_REPLACE:
        FUZZ_CHECK((p != NULL) && (p->gen != msg.gen) &&
                   (p->peer_cm_qpn == src_qp));
        if (how & 0x80) {
            break;
        }
        old_qpn = p->qpn;
        uct_syncmem_cm_passive_replaced(iface, p, &msg, (*next_qpn)++);
        FUZZ_CHECK((p->qpn != old_qpn) && (p->gen == msg.gen));
        break;
    case UCT_SYNCMEM_CM_REPLIED:
        FUZZ_CHECK((ep != NULL) && (ep->cm.rep == UCT_SYNCMEM_CM_REP_NONE) &&
                   (ep->cm.gen == msg.gen) &&
                   (ep->cm.peer_cm_qpn == src_qp));
        uct_syncmem_cm_replied(ep, &msg);
        /* where the old QP stopped: only from a version 2 REP saying so,
         * about the QP the endpoint's old QP talked to, never resumed */
        FUZZ_CHECK(!ep->cm.rep_stopped ||
                   ((msg.flags & UCT_SYNCMEM_CM_F_RQ_PSN) &&
                    (byte_len >= UCT_SYNCMEM_CM_GRH_LEN + sizeof(msg)) &&
                    (msg.old_qpn == ep->reconnect.old_peer_qpn) &&
                    (ep->cm.rep == UCT_SYNCMEM_CM_REP_NEW_QP)));
        break;
    case UCT_SYNCMEM_CM_RELEASE:
        FUZZ_CHECK((p != NULL) && (p->peer_cm_qpn == src_qp));
        uct_syncmem_cm_passive_remove(iface, p, 0);
        free(p);
        break;
    case UCT_SYNCMEM_CM_PROBE:
        FUZZ_CHECK((msg.type == UCT_SYNCMEM_CM_RTU) && (p != NULL) &&
                   (p->peer_cm_qpn == src_qp) && (p->gen == msg.gen) &&
                   !p->confirmed);
        break;
    case UCT_SYNCMEM_CM_PEER_GONE:
        FUZZ_CHECK((msg.type == UCT_SYNCMEM_CM_GONE) && (ep != NULL) &&
                   (ep->cm.conn_id == msg.conn_id) &&
                   (ep->cm.peer_iface_id == msg.src_iface_id) &&
                   (ep->cm.peer_cm_qpn == src_qp));
        ep->cm.peer_gone = 1;
        break;
    case UCT_SYNCMEM_CM_PEER_BUSY:
        FUZZ_CHECK((msg.type == UCT_SYNCMEM_CM_BUSY) && (ep != NULL) &&
                   (ep->cm.gen == msg.gen) &&
                   (ep->cm.rep == UCT_SYNCMEM_CM_REP_NONE) &&
                   (ep->cm.peer_cm_qpn == src_qp));
        ep->cm.busy = 1;
        break;
    case UCT_SYNCMEM_CM_DROP:
        break;
    }

}

/* What the iface's own endpoints do: connect, get connected, reconnect. */
static void fuzz_endpoint(fuzz_in_t *in, uct_syncmem_iface_t *iface,
                          uct_syncmem_ep_t *eps)
{
    uint8_t what         = fuzz_u8(in);
    uct_syncmem_ep_t *ep = &eps[(what >> 2) % FUZZ_EPS];

    switch (what & 3) {
    case 0: /* connect (again: a new endpoint in the same place) */
        ep->state            = UCT_SYNCMEM_EP_CONNECTING;
        ep->cm.conn_id       = fuzz_u8(in) % 8;
        ep->cm.peer_iface_id = 0xabc0 + (fuzz_u8(in) % FUZZ_SENDERS);
        ep->cm.peer_cm_qpn   = fuzz_sender_qpn(fuzz_u8(in));
        ep->cm.gen           = 0;
        ep->cm.rep           = UCT_SYNCMEM_CM_REP_NONE;
        break;
    case 1: /* progress takes a reply */
        if ((ep->state == UCT_SYNCMEM_EP_CONNECTING) &&
            ((ep->cm.rep == UCT_SYNCMEM_CM_REP_NEW_QP) ||
             (ep->cm.rep == UCT_SYNCMEM_CM_REP_RESUMED))) {
            FUZZ_CHECK((ep->cm.peer_rc_qpn >= 2) &&
                       (ep->cm.peer_rc_qpn <= UCT_SYNCMEM_QPN_MAX));
            ep->cm.rep = UCT_SYNCMEM_CM_REP_TAKEN;
            ep->state  = UCT_SYNCMEM_EP_CONNECTED;
        }
        break;
    case 2: /* the link broke: the same connection, next generation */
        if (ep->state == UCT_SYNCMEM_EP_CONNECTED) {
            ep->state = UCT_SYNCMEM_EP_RECONN_WAIT_BOTH;
            ++ep->cm.gen;
            ep->cm.rep = UCT_SYNCMEM_CM_REP_NONE;
            /* as uct_syncmem_reconnect_start notes it */
            ep->reconnect.old_peer_qpn = ep->cm.peer_rc_qpn;
        }
        break;
    case 3:
        ep->state = UCT_SYNCMEM_EP_FAILED;
        break;
    }
}

/* What the keepalive does: probe, and learn whether the peer is there. */
static void fuzz_keepalive(fuzz_in_t *in, uct_syncmem_iface_t *iface)
{
    uint8_t what = fuzz_u8(in);
    uct_syncmem_cm_passive_t *p, *gone;
    unsigned i = 0, pick = what >> 2;
    uint32_t qpn;

    ucs_list_for_each(p, &iface->cm.passive, list) {
        if (i++ != pick) {
            continue;
        }
        if (!p->probing) {
            p->probing = 1;
            ++iface->cm.probes_posted;
        }
        if (what & 1) {
            gone = uct_syncmem_cm_probe_done(iface, p->qpn, what & 2);
            if (gone != NULL) {
                FUZZ_CHECK(gone == p);
                uct_syncmem_cm_passive_remove(iface, gone, 1);
                free(gone);
            }
        }
        return;
    }
    /* a completion for a QP number from anywhere: at most the connection
     * of that QP, if it was probing */
    qpn  = fuzz_u32(in);
    gone = uct_syncmem_cm_probe_done(iface, qpn, 0);
    if (gone != NULL) {
        FUZZ_CHECK(gone->qpn == qpn);
        uct_syncmem_cm_passive_remove(iface, gone, 1);
        free(gone);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in                = {data, size};
    uct_syncmem_ep_t eps[FUZZ_EPS] = {};
    uint32_t next_qpn            = 0x1000;
    uct_syncmem_cm_passive_t *p, *tmp;
    uct_syncmem_iface_t *iface  = fuzz_iface_create();
    unsigned i, steps;

    iface->config.cm_max_half_open = FUZZ_MAX_HALF;
    for (i = 0; i < FUZZ_EPS; ++i) {
        eps[i].state = UCT_SYNCMEM_EP_FAILED;
        ucs_list_add_tail(&iface->eps, &eps[i].list);
    }

    for (steps = 0; (in.left > 0) && (steps < 256); ++steps) {
        switch (fuzz_u8(&in) % 4) {
        case 0:
        case 1:
            fuzz_message(&in, iface, &next_qpn);
            break;
        case 2:
            fuzz_endpoint(&in, iface, eps);
            break;
        case 3:
            fuzz_keepalive(&in, iface);
            break;
        }
        fuzz_check_tables(iface);
        if (iface->rx.have_links && (steps % 8 == 0)) {
            uct_syncmem_rx_links_apply(iface);
        }
    }

    ucs_list_for_each_safe(p, tmp, &iface->cm.passive, list) {
        uct_syncmem_cm_passive_remove(iface, p, 0);
        free(p);
    }
    uct_syncmem_cm_tombs_free(iface);
    FUZZ_CHECK(iface->cm.half_open == 0);
    fuzz_iface_destroy(iface);
    return 0;
}
