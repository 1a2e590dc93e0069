/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the handshake's decisions: which messages to believe, and the
 * table of passive connections (see syncmem_cm.c for the protocol).
 *
 * Anything on the fabric can send to an iface's UD QP, so every field of a
 * message is checked before it is used, and a message is believed only
 * from the QP it claims to come from (the HCA reports the sender's QP
 * number, which a process cannot choose). This file makes no verbs calls:
 * syncmem_cm.c does what it decides, and test/fuzz/fuzz_cm.c drives it with
 * arbitrary message sequences on any machine.
 *
 * Half-open connections: a passive QP costs the target kernel memory, and a
 * REQ costs the sender nothing, so passive connections that no keepalive
 * write has yet shown to have a peer are capped
 * (UCX_SYNCMEM_CM_MAX_HALF_OPEN), and one sender (one UD QP) may hold at
 * most half of them: a flood from one process cannot lock out the others.
 * A REQ over the cap is dropped; its sender retransmits.
 */
#include "syncmem_ep.h"

#include <string.h>


void uct_syncmem_cm_msg_init(uct_syncmem_iface_t *iface, uint8_t type,
                             uint64_t dst_iface_id, uint64_t conn_id,
                             uint16_t gen, uint32_t rc_qpn,
                             uct_syncmem_cm_msg_t *msg)
{
    memset(msg, 0, sizeof(*msg));
    msg->type         = type;
    msg->gen          = gen;
    msg->src_cm_qpn   = iface->cm.qp->qp_num;
    msg->rc_qpn       = rc_qpn;
    msg->src_iface_id = iface->id;
    msg->dst_iface_id = dst_iface_id;
    msg->conn_id      = conn_id;
    uct_syncmem_dev_addr_pack(&iface->port, &msg->src_dev);
}

ucs_status_t uct_syncmem_cm_msg_parse(const uct_syncmem_iface_t *iface,
                                      const void *buf, uint32_t byte_len,
                                      uint32_t src_qp,
                                      uct_syncmem_cm_msg_t *msg,
                                      uct_syncmem_port_t *peer)
{
    if (byte_len < UCT_SYNCMEM_CM_GRH_LEN + UCT_SYNCMEM_CM_MSG_V1_LEN) {
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    /* a version 1 peer's is shorter: what it did not send is zero */
    memset(msg, 0, sizeof(*msg));
    memcpy(msg, buf, ucs_min(byte_len - UCT_SYNCMEM_CM_GRH_LEN, sizeof(*msg)));
    if ((byte_len - UCT_SYNCMEM_CM_GRH_LEN) < sizeof(*msg)) {
        msg->flags &= ~UCT_SYNCMEM_CM_F_RQ_PSN;
    }

    if ((msg->type < UCT_SYNCMEM_CM_REQ) || (msg->type > UCT_SYNCMEM_CM_BUSY) ||
        (msg->src_cm_qpn != src_qp)) {
        return UCS_ERR_INVALID_PARAM; /* no peer sends that */
    }
    if (msg->dst_iface_id != iface->id) {
        return UCS_ERR_INVALID_ADDR;  /* for an iface gone from this QP */
    }

    /* REQ, REP and RTU name an RC QP: never 0 or 1, the management QPs */
    if (((msg->type == UCT_SYNCMEM_CM_REQ) ||
         (msg->type == UCT_SYNCMEM_CM_REP) ||
         (msg->type == UCT_SYNCMEM_CM_RTU)) &&
        ((msg->rc_qpn < 2) || (msg->rc_qpn > UCT_SYNCMEM_QPN_MAX))) {
        return UCS_ERR_INVALID_PARAM;
    }

    /* a peer we could not build an address handle to is no peer */
    if ((uct_syncmem_dev_addr_unreachable(&iface->port, &msg->src_dev) != NULL) ||
        (uct_syncmem_dev_addr_unpack(&msg->src_dev, peer) != UCS_OK)) {
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

static uct_syncmem_cm_passive_t *
uct_syncmem_cm_find_passive(uct_syncmem_iface_t *iface,
                            const uct_syncmem_cm_msg_t *msg,
                            unsigned *from_sender_p)
{
    uct_syncmem_cm_passive_t *p;

    *from_sender_p = 0;
    ucs_list_for_each(p, &iface->cm.passive, list) {
        if ((p->peer_iface_id == msg->src_iface_id) &&
            (p->conn_id == msg->conn_id)) {
            return p;
        }
        *from_sender_p += !p->confirmed &&
                          (p->peer_cm_qpn == msg->src_cm_qpn);
    }
    return NULL;
}

static uct_syncmem_cm_action_t
uct_syncmem_cm_decide_req(uct_syncmem_iface_t *iface,
                          const uct_syncmem_cm_msg_t *msg,
                          uct_syncmem_cm_passive_t **p_p)
{
    unsigned max = iface->config.cm_max_half_open;
    uct_syncmem_cm_passive_t *p;
    unsigned from_sender;

    p = uct_syncmem_cm_find_passive(iface, msg, &from_sender);
    if (p == NULL) {
        if ((iface->cm.half_open >= max) ||
            (from_sender >= ucs_max(1, max / 2))) {
            return UCT_SYNCMEM_CM_REFUSE;
        }
        return UCT_SYNCMEM_CM_ACCEPT;
    }

    *p_p = p;
    if (msg->src_cm_qpn != p->peer_cm_qpn) {
        return UCT_SYNCMEM_CM_DROP; /* someone else's connection */
    }
    if (UCS_CIRCULAR_COMPARE16(msg->gen, <, p->gen)) {
        return UCT_SYNCMEM_CM_DROP; /* a stale retransmission */
    }
    return (msg->gen == p->gen) ? UCT_SYNCMEM_CM_ANSWER :
                                  UCT_SYNCMEM_CM_REPLACE;
}

/* The endpoint of ours a REP or GONE is about: the connection, from the
 * CM QP it was asked of; NULL if none. */
static uct_syncmem_ep_t *
uct_syncmem_cm_find_ep(uct_syncmem_iface_t *iface,
                       const uct_syncmem_cm_msg_t *msg)
{
    uct_syncmem_ep_t *ep;

    ucs_list_for_each(ep, &iface->eps, list) {
        if ((ep->cm.conn_id == msg->conn_id) &&
            (ep->cm.peer_iface_id == msg->src_iface_id)) {
            return (ep->cm.peer_cm_qpn == msg->src_cm_qpn) ? ep : NULL;
        }
    }
    return NULL;
}

/* A REP is believed once per generation, from the iface the endpoint
 * asked, for the generation it asked about. */
static uct_syncmem_cm_action_t
uct_syncmem_cm_decide_rep(uct_syncmem_iface_t *iface,
                          const uct_syncmem_cm_msg_t *msg,
                          uct_syncmem_ep_t **ep_p)
{
    uct_syncmem_ep_t *ep = uct_syncmem_cm_find_ep(iface, msg);

    /* not the state: the REP may come before the endpoint that sent the
     * REQ has marked itself connecting */
    if ((ep == NULL) || (ep->cm.gen != msg->gen) ||
        (ep->cm.rep != UCT_SYNCMEM_CM_REP_NONE)) {
        return UCT_SYNCMEM_CM_DROP;
    }
    *ep_p = ep;
    return UCT_SYNCMEM_CM_REPLIED;
}

uct_syncmem_cm_action_t uct_syncmem_cm_decide(uct_syncmem_iface_t *iface,
                                              const uct_syncmem_cm_msg_t *msg,
                                              uct_syncmem_cm_passive_t **p_p,
                                              uct_syncmem_ep_t **ep_p)
{
    uct_syncmem_cm_passive_t *p;
    uct_syncmem_ep_t *ep;
    unsigned from_sender;

    *p_p  = NULL;
    *ep_p = NULL;
    switch (msg->type) {
    case UCT_SYNCMEM_CM_REQ:
        return uct_syncmem_cm_decide_req(iface, msg, p_p);
    case UCT_SYNCMEM_CM_REP:
        return uct_syncmem_cm_decide_rep(iface, msg, ep_p);
    case UCT_SYNCMEM_CM_DREQ:
        p = uct_syncmem_cm_find_passive(iface, msg, &from_sender);
        if ((p == NULL) || (p->peer_cm_qpn != msg->src_cm_qpn)) {
            return UCT_SYNCMEM_CM_DROP;
        }
        *p_p = p;
        return UCT_SYNCMEM_CM_RELEASE;
    case UCT_SYNCMEM_CM_RTU:
        p = uct_syncmem_cm_find_passive(iface, msg, &from_sender);
        if ((p == NULL) || (p->peer_cm_qpn != msg->src_cm_qpn) ||
            (p->gen != msg->gen) || p->confirmed) {
            return UCT_SYNCMEM_CM_DROP;
        }
        *p_p = p;
        return UCT_SYNCMEM_CM_PROBE;
    case UCT_SYNCMEM_CM_GONE:
        /* any generation: the iface is gone for all of them */
        *ep_p = uct_syncmem_cm_find_ep(iface, msg);
        return (*ep_p != NULL) ? UCT_SYNCMEM_CM_PEER_GONE :
                                 UCT_SYNCMEM_CM_DROP;
    case UCT_SYNCMEM_CM_BUSY:
        /* about this generation's REQ, not answered yet */
        ep = uct_syncmem_cm_find_ep(iface, msg);
        if ((ep == NULL) || (ep->cm.gen != msg->gen) ||
            (ep->cm.rep != UCT_SYNCMEM_CM_REP_NONE)) {
            return UCT_SYNCMEM_CM_DROP;
        }
        *ep_p = ep;
        return UCT_SYNCMEM_CM_PEER_BUSY;
    default:
        return UCT_SYNCMEM_CM_DROP;
    }
}

/* The QP a released connection had, if the keepalive released it. */
static uint32_t uct_syncmem_cm_tomb_take(uct_syncmem_iface_t *iface,
                                         const uct_syncmem_cm_msg_t *msg)
{
    uct_syncmem_cm_tomb_t *tomb, **prev;
    uint32_t qpn;

    for (prev = &iface->cm.tombs; (tomb = *prev) != NULL; prev = &tomb->next) {
        if ((tomb->peer_iface_id == msg->src_iface_id) &&
            (tomb->conn_id == msg->conn_id)) {
            *prev = tomb->next;
            --iface->cm.num_tombs;
            qpn = tomb->qpn;
            ucs_free(tomb);
            return qpn;
        }
    }
    return 0;
}

/* p->qpn is set: the new connection's passive QP exists. */
void uct_syncmem_cm_passive_insert(uct_syncmem_iface_t *iface,
                                   uct_syncmem_cm_passive_t *p,
                                   const uct_syncmem_cm_msg_t *msg)
{
    uint32_t old_qpn;

    p->peer_iface_id = msg->src_iface_id;
    p->conn_id       = msg->conn_id;
    p->peer_cm_qpn   = msg->src_cm_qpn;
    p->gen           = msg->gen;
    p->probing       = 0;
    p->confirmed     = 0;
    p->resumed       = 0;
    p->rtu           = !!(msg->flags & UCT_SYNCMEM_CM_F_RTU);
    p->gone          = !!(msg->flags & UCT_SYNCMEM_CM_F_V3);
    p->ready         = 0;
    p->accepted      = ucs_get_time();
    ucs_list_add_tail(&iface->cm.passive, &p->list);
    ++iface->cm.half_open;

    old_qpn = (msg->gen != 0) ? uct_syncmem_cm_tomb_take(iface, msg) : 0;
    if (old_qpn != 0) {
        uct_syncmem_rx_link_push(iface, p->qpn, old_qpn);
    }
}

/* REQ of a later generation: the initiator's QP broke, and new_qpn, now
 * connected to its new one, replaces p's. */
void uct_syncmem_cm_passive_replaced(uct_syncmem_iface_t *iface,
                                     uct_syncmem_cm_passive_t *p,
                                     const uct_syncmem_cm_msg_t *msg,
                                     uint32_t new_qpn)
{
    uct_syncmem_rx_link_push(iface, new_qpn, p->qpn);
    /* a probe on the old QP may still complete: it finds no passive QP */
    iface->cm.probes_posted -= p->probing;
    p->probing = 0;
    p->qpn     = new_qpn;
    p->gen     = msg->gen;
    p->resumed = 0;
}

/* Tombs newest first: the ones past (how long a reconnect may still come:
 * twice RECONNECT_TIMEOUT, 10 s at least) or beyond UCT_SYNCMEM_CM_TOMBS
 * are forgotten, and the receive path with them. One forgotten too soon
 * would let a reconnect's replayed active messages through twice. */
static void uct_syncmem_cm_tombs_expire(uct_syncmem_iface_t *iface,
                                        ucs_time_t now)
{
    ucs_time_t keep_for = ucs_max(2 * iface->config.reconnect_timeout,
                                  ucs_time_from_sec(10.0));
    uct_syncmem_cm_tomb_t *tomb, **last = &iface->cm.tombs;
    unsigned n = 0;

    while ((*last != NULL) && (n < UCT_SYNCMEM_CM_TOMBS) &&
           (now - (*last)->released <= keep_for)) {
        last = &(*last)->next;
        ++n;
    }
    while ((tomb = *last) != NULL) {
        *last = tomb->next;
        --iface->cm.num_tombs;
        uct_syncmem_rx_link_push(iface, 0, tomb->qpn);
        ucs_free(tomb);
    }
}

/* The receive path may drop what it knows of the QP, unless a reconnect
 * may still need it (keep): then a tomb remembers it. */
void uct_syncmem_cm_passive_remove(uct_syncmem_iface_t *iface,
                                   uct_syncmem_cm_passive_t *p, int keep)
{
    uct_syncmem_cm_tomb_t *tomb;

    iface->cm.probes_posted -= p->probing;
    iface->cm.half_open     -= !p->confirmed;
    ucs_list_del(&p->list);

    if (keep && ((tomb = ucs_malloc(sizeof(*tomb), "syncmem_tomb")) != NULL)) {
        tomb->peer_iface_id = p->peer_iface_id;
        tomb->conn_id       = p->conn_id;
        tomb->qpn           = p->qpn;
        tomb->released      = ucs_get_time();
        tomb->next          = iface->cm.tombs;
        iface->cm.tombs     = tomb;
        ++iface->cm.num_tombs;
        uct_syncmem_cm_tombs_expire(iface, tomb->released);
        return;
    }
    uct_syncmem_rx_link_push(iface, 0, p->qpn);
}

void uct_syncmem_cm_replied(uct_syncmem_ep_t *ep,
                            const uct_syncmem_cm_msg_t *msg)
{
    /* resumed: the same passive QP as before, still up (whether the
     * endpoint asked is the state machine's to check) */
    ep->cm.rep         = ((msg->flags & UCT_SYNCMEM_CM_F_RESUME) &&
                          (msg->rc_qpn == ep->cm.peer_rc_qpn)) ?
                         UCT_SYNCMEM_CM_REP_RESUMED : UCT_SYNCMEM_CM_REP_NEW_QP;
    /* where the peer stopped: only of the QP our old QP talked to (not
     * of one a failed try connected to our spare) */
    ep->cm.rep_stopped = (ep->cm.rep == UCT_SYNCMEM_CM_REP_NEW_QP) &&
                         (msg->flags & UCT_SYNCMEM_CM_F_RQ_PSN) &&
                         (msg->old_qpn == ep->reconnect.old_peer_qpn);
    ep->cm.rep_rq_psn  = msg->old_rq_psn;
    ep->cm.peer_rc_qpn = msg->rc_qpn;
    ep->cm.rtu         = !!(msg->flags & UCT_SYNCMEM_CM_F_RTU);
}

uct_syncmem_cm_passive_t *uct_syncmem_cm_probe_done(uct_syncmem_iface_t *iface,
                                                    uint32_t qpn, int ok)
{
    uct_syncmem_cm_passive_t *p;

    ucs_list_for_each(p, &iface->cm.passive, list) {
        if ((p->qpn != qpn) || !p->probing) {
            continue;
        }
        p->probing = 0;
        --iface->cm.probes_posted;
        if (!ok) {
            return p;
        }
        if (!p->confirmed) {
            p->confirmed = 1;
            --iface->cm.half_open;
            ++iface->cm.confirmed;
        }
        return NULL;
    }
    return NULL;
}

void uct_syncmem_cm_tombs_free(uct_syncmem_iface_t *iface)
{
    uct_syncmem_cm_tomb_t *tomb;

    while ((tomb = iface->cm.tombs) != NULL) {
        iface->cm.tombs = tomb->next;
        ucs_free(tomb);
    }
    iface->cm.num_tombs = 0;
}

/*
 * A connection storm (many endpoints to one iface at once) finds the
 * half-open connections at their limit until keepalive writes confirm
 * them, which takes a round trip. A REQ refused then would wait for its
 * retransmission (CM_TIMEOUT, in waves: a thousand endpoints of one
 * sender took 1.6 times rc_verbs' time to connect); kept instead, it is
 * accepted as soon as there is room (uct_syncmem_cm_undefer). A kept REQ
 * is a hundred bytes and no QP: UCT_SYNCMEM_CM_DEFER_FACTOR times
 * CM_MAX_HALF_OPEN of them are kept, one sender's at most half of them,
 * so that a flood from one leaves room for the others.
 */
int uct_syncmem_cm_defer(uct_syncmem_iface_t *iface,
                         const uct_syncmem_cm_msg_t *msg,
                         const uct_syncmem_port_t *peer)
{
    unsigned max  = UCT_SYNCMEM_CM_DEFER_FACTOR *
                    iface->config.cm_max_half_open;
    unsigned mine = 0;
    uct_syncmem_cm_deferred_t *d, *grown;
    unsigned i, room;

    for (i = 0; i < iface->cm.num_deferred; ++i) {
        d = &iface->cm.deferred[i];
        if (d->msg.src_iface_id != msg->src_iface_id) {
            continue;
        } else if (d->msg.conn_id == msg->conn_id) {
            d->msg  = *msg; /* a retransmission, or a later generation */
            d->peer = *peer;
            return 1;
        }
        ++mine;
    }
    if ((iface->cm.num_deferred >= max) || (mine >= max / 2)) {
        return 0;
    } else if (iface->cm.num_deferred == iface->cm.max_deferred) {
        /* grown as a storm needs it, given back when it is over */
        room  = ucs_min(max, ucs_max(16, 2 * iface->cm.max_deferred));
        grown = ucs_realloc(iface->cm.deferred, room * sizeof(*grown),
                            "syncmem_deferred");
        if (grown == NULL) {
            return 0;
        }
        iface->cm.deferred     = grown;
        iface->cm.max_deferred = room;
    }
    d       = &iface->cm.deferred[iface->cm.num_deferred++];
    d->msg  = *msg;
    d->peer = *peer;
    return 1;
}

/*
 * Whether what the handshake refused and dropped since the last report
 * looks like a flood: 1 to say it in a warning (once an episode), 0 as a
 * diagnostic, -1 nothing to say yet (once a second at most). A burst of
 * endpoints from live processes is refused for room only until the
 * half-open connections before it are confirmed, a round trip, and its
 * requesters retry: that is no flood. A flood is a message no peer sends
 * (malformed, or sent from another QP than it names), or refusals that go
 * on, with no connection confirmed, for longer than a requester retries
 * (retry_span: CM_TIMEOUT x (CM_RETRIES + 1)). An episode ends after a
 * retry span with nothing to report.
 */
int uct_syncmem_cm_flood_report(uct_syncmem_cm_flood_t *flood,
                                unsigned malformed, unsigned refused,
                                unsigned confirmed, ucs_time_t now,
                                ucs_time_t retry_span)
{
    ucs_time_t second = ucs_time_from_sec(1.0);
    int quiet;

    if ((flood->report_time != 0) && (now < flood->report_time + second)) {
        return -1;
    }

    quiet = (flood->report_time == 0) ||
            (now - flood->report_time > ucs_max(retry_span, 2 * second));
    if (quiet) {
        flood->warned = 0;
    }
    if ((refused == 0) || quiet || (confirmed != flood->confirmed)) {
        flood->refusing_since = (refused == 0) ? 0 : now;
    } else if (flood->refusing_since == 0) {
        flood->refusing_since = now;
    }
    flood->report_time = now;
    flood->confirmed   = confirmed;

    if (flood->warned ||
        ((malformed == 0) && ((flood->refusing_since == 0) ||
                              (now - flood->refusing_since <= retry_span)))) {
        return 0;
    }
    flood->warned = 1;
    return 1;
}

/* What the handshake refused and dropped, as counts: a stranger can send
 * any number of messages. */
void uct_syncmem_cm_drops_report(uct_syncmem_iface_t *iface)
{
    uct_syncmem_cm_t *cm  = &iface->cm;
    ucs_time_t retry_span = iface->config.cm_timeout *
                            (iface->config.cm_retries + 1);
    int flood;

    if ((cm->dropped == 0) && (cm->malformed == 0) && (cm->refused == 0)) {
        return;
    }
    flood = uct_syncmem_cm_flood_report(&cm->flood, cm->malformed,
                                        cm->refused, cm->confirmed,
                                        ucs_get_time(), retry_span);
    if (flood < 0) {
        return;
    }

    ucs_log((flood > 0) ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DIAG,
            "syncmem: iface 0x%" PRIx64 "%s refused %u connection request(s)"
            " for room (%u half-open connections, at most %u, half of them"
            " per sender: UCX_SYNCMEM_CM_MAX_HALF_OPEN), dropped %u malformed"
            " and %u stale or foreign handshake message(s)", iface->id,
            (flood > 0) ? " looks flooded (malformed messages, or refusals"
                          " longer than a requester retries): it" : "",
            cm->refused, cm->half_open, iface->config.cm_max_half_open,
            cm->malformed, cm->dropped);
    cm->dropped   = 0;
    cm->malformed = 0;
    cm->refused   = 0;
}
