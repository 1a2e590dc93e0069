/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - connection handshake, so that endpoints connect to an iface.
 *
 * Why a datagram handshake of our own, and not rdma_cm: UCP can then
 * connect syncmem endpoints straight from a worker address
 * (UCT_IFACE_FLAG_CONNECT_TO_IFACE), with no auxiliary transport to carry
 * endpoint addresses (rc_verbs needs ud_verbs for that). A UD QP per iface
 * works the same on InfiniBand and RoCE, needs no IP configuration and no
 * kernel CM, is driven entirely from iface progress (no extra thread or
 * fd), and keeps the protocol in view and testable with packet loss.
 *
 * Protocol: the initiator's endpoint creates its RC QP and sends REQ (its QP
 * number, device address and a connection id) to the peer iface's UD QP;
 * the peer creates a passive RC QP, connects it and answers REP with its QP
 * number; the initiator connects its QP. Lost messages are covered by the
 * initiator retransmitting REQ every UCX_SYNCMEM_CM_TIMEOUT, up to
 * UCX_SYNCMEM_CM_RETRIES times, then failing the endpoint with
 * UCS_ERR_ENDPOINT_TIMEOUT. A duplicate REQ finds the existing passive QP by
 * (initiator iface id, connection id) and gets the same REP again; a
 * duplicate REP finds no connecting endpoint and is dropped. DREQ, best
 * effort, releases the passive QP when the endpoint is destroyed.
 * Which messages are believed, and the cap on half-open connections, are
 * decided in syncmem_cm_msg.c; this file does what it decides, over the
 * datagrams of syncmem_cm_ud.c.
 *
 * Reconnect (syncmem_reconnect.c): the initiator sends REQ again for the same
 * connection id with the next generation number and a new RC QP; the peer
 * replaces the passive QP of that connection, notes for its receive path
 * which QP replaced which (to drop active messages it already delivered),
 * and answers REP with the generation. REQs and REPs of an older
 * generation are dropped. If the keepalive released the passive QP during
 * the outage, a small list of what it released still links them.
 *
 * Keepalive: a passive QP whose peer died, or whose DREQ was lost, would
 * stay until the iface closes: an RC responder never notices that its
 * requester is gone. So every UCX_SYNCMEM_KEEPALIVE_INTERVAL each passive QP
 * sends an empty RDMA write. The peer's HCA acknowledges it with no
 * software involved, as long as the peer's QP exists; when it does not
 * (process gone, endpoint destroyed), the write fails after the RC retries
 * and the passive QP is released. Passive QPs complete on the CM's CQ, so
 * all of this runs in the async context, like the handshake.
 *
 * Threads: the peer must answer even when it is not calling progress (a
 * one-sided target need never call it), so the CM QP's completions raise
 * an event handled in UCX's async context, which accepts REQ and DREQ and
 * notes REPs. Every piece of CM state is touched only under the worker's
 * async lock; the fast path never takes it. The initiator applies a noted
 * REP (connects its QP) from its own progress, since only it may change an
 * endpoint's state.
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <string.h>

/* Keepalive writes (of UCT_SYNCMEM_CM_PROBES in flight) posted by one tick
 * of the keepalive timer: a tick that falls in a link outage fails (and
 * releases) no more connections than this */
#define UCT_SYNCMEM_CM_KEEPALIVES 32

/* A message of ep's connection to the peer's CM QP. */
static void uct_syncmem_cm_send_ep(uct_syncmem_ep_t *ep, uint8_t type,
                                   uint32_t rc_qpn, uint8_t flags)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_cm_msg_t msg;

    uct_syncmem_cm_msg_init(iface, type, ep->cm.peer_iface_id, ep->cm.conn_id,
                            ep->cm.gen, rc_qpn, &msg);
    msg.flags = flags;
    uct_syncmem_cm_send(iface, &ep->cm.peer, ep->cm.peer_cm_qpn, &msg);
}

/*
 * Sends REQ, and arms its retransmission. On RoCE the address handle needs
 * the peer's MAC address, which the kernel resolves (ARP/ND) and may fail to
 * on a lossy link: that is retried with the REQ, not fatal.
 */
void uct_syncmem_cm_send_req(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    ep->cm.next_retry = ucs_get_time() + iface->config.cm_timeout;
    ep->cm.busy       = 0;
    uct_syncmem_cm_send_ep(ep, UCT_SYNCMEM_CM_REQ, ep->qp->qp_num,
                           (ep->reconnect.resume ? UCT_SYNCMEM_CM_F_RESUME :
                                                   0) |
                           UCT_SYNCMEM_CM_F_RTU | UCT_SYNCMEM_CM_F_V3);
}

/* Called with the async lock held, once ep's QP is connected: if the REP
 * asked, the target may probe the connection now. Not retransmitted: if
 * lost, the target probes it once the connect time has passed. */
void uct_syncmem_cm_send_rtu(uct_syncmem_ep_t *ep)
{
    if (ep->cm.rtu) {
        uct_syncmem_cm_send_ep(ep, UCT_SYNCMEM_CM_RTU, ep->qp->qp_num, 0);
    }
}

/* Called with the async lock held, the endpoint already in iface->eps. */
ucs_status_t uct_syncmem_cm_connect(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    ep->cm.conn_id      = ++iface->cm.next_conn_id;
    ep->cm.retries_left = iface->config.cm_retries;
    ep->cm.busy_left    = iface->config.cm_retries *
                          UCT_SYNCMEM_CM_BUSY_FACTOR;
    ep->cm.rep          = UCT_SYNCMEM_CM_REP_NONE;
    uct_syncmem_cm_send_req(ep);
    return UCS_OK;
}

/* Called with the async lock held: ep->qp is the QP that replaces one the
 * link broke; the same connection, next generation. */
void uct_syncmem_cm_reconnect(uct_syncmem_ep_t *ep)
{
    ++ep->cm.gen;
    ep->cm.rep = UCT_SYNCMEM_CM_REP_NONE;
    uct_syncmem_cm_send_req(ep);
}

/* Called with the async lock held. */
void uct_syncmem_cm_disconnect(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    /* No AH: no REQ went out, the peer holds nothing. A lost DREQ leaves
     * the passive QP until the keepalive finds it gone. */
    if (uct_syncmem_ah_find(iface, &ep->cm.peer) != NULL) {
        uct_syncmem_cm_send_ep(ep, UCT_SYNCMEM_CM_DREQ, 0, 0);
    }
}

static void uct_syncmem_cm_passive_destroy(uct_syncmem_iface_t *iface,
                                           uct_syncmem_cm_passive_t *p,
                                           int keep)
{
    uct_syncmem_cm_passive_remove(iface, p, keep);
    ibv_destroy_qp(p->qp);
    ucs_free(p);
}

static void uct_syncmem_cm_send_rep(uct_syncmem_iface_t *iface,
                                    uct_syncmem_cm_passive_t *p,
                                    const uct_syncmem_port_t *peer)
{
    uct_syncmem_cm_msg_t rep;

    uct_syncmem_cm_msg_init(iface, UCT_SYNCMEM_CM_REP, p->peer_iface_id,
                            p->conn_id, p->gen, p->qpn, &rep);
    rep.flags      = (p->resumed ? UCT_SYNCMEM_CM_F_RESUME :
                      p->stopped ? UCT_SYNCMEM_CM_F_RQ_PSN : 0) |
                     (p->rtu ? UCT_SYNCMEM_CM_F_RTU : 0);
    rep.old_qpn    = p->old_qpn;
    rep.old_rq_psn = p->old_rq_psn;
    uct_syncmem_cm_send(iface, peer, p->peer_cm_qpn, &rep);
}

/* A passive RC QP connected to the initiator's QP rc_qpn. */
static ucs_status_t uct_syncmem_cm_passive_qp(uct_syncmem_iface_t *iface,
                                              const uct_syncmem_port_t *peer,
                                              uint32_t rc_qpn,
                                              struct ibv_qp **qp_p)
{
    ucs_status_t status;

    status = uct_syncmem_qp_create(iface, iface->cm.cq, qp_p);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_syncmem_qp_connect(iface, *qp_p, peer, rc_qpn,
                                    iface->rto.est.exp);
    if ((status == UCS_OK) && iface->cm.refuse_writes) {
        status = uct_syncmem_qp_refuse_writes(*qp_p);
    }
    if (status != UCS_OK) {
        ibv_destroy_qp(*qp_p);
    }
    return status;
}

/* REQ of a later generation: the initiator's QP broke. If it kept that QP
 * and ours is still up (only our keepalive writes can break it), both are
 * kept and it resumes where it stopped (uct_syncmem_qp_resume). Otherwise
 * the passive QP is replaced by one connected to the initiator's new QP. */
static void uct_syncmem_cm_passive_replace(uct_syncmem_iface_t *iface,
                                           uct_syncmem_cm_passive_t *p,
                                           const uct_syncmem_cm_msg_t *msg,
                                           const uct_syncmem_port_t *peer)
{
    uint32_t rq_psn;
    struct ibv_qp *qp;
    ucs_status_t status;

    if ((msg->flags & UCT_SYNCMEM_CM_F_RESUME) &&
        (uct_syncmem_qp_query(p->qp, &rq_psn) == IBV_QPS_RTS)) {
        ucs_debug("syncmem: iface 0x%" PRIx64 ": connection %" PRIu64 " from"
                  " iface 0x%" PRIx64 " resumes (generation %u) on QP 0x%x,"
                  " next PSN 0x%x", iface->id, p->conn_id, p->peer_iface_id,
                  msg->gen, p->qpn, rq_psn);
        p->gen     = msg->gen;
        p->resumed = 1;
        p->stopped = 0;
        p->peer    = *peer;
        uct_syncmem_cm_send_rep(iface, p, peer);
        return;
    }

    if (uct_syncmem_cm_passive_qp(iface, peer, msg->rc_qpn, &qp) != UCS_OK) {
        return; /* the initiator retransmits */
    }
    ucs_debug("syncmem: iface 0x%" PRIx64 ": connection %" PRIu64 " from iface"
              " 0x%" PRIx64 " reconnects (generation %u): QP 0x%x replaces"
              " 0x%x", iface->id, p->conn_id, p->peer_iface_id, msg->gen,
              qp->qp_num, p->qpn);
    /* where the old QP stopped: what the initiator may post again */
    status     = uct_syncmem_qp_stop(p->qp, &rq_psn);
    p->old_qpn = p->qpn;
    uct_syncmem_cm_passive_replaced(iface, p, msg, qp->qp_num);
    p->stopped    = (status == UCS_OK);
    p->old_rq_psn = rq_psn;
    p->peer       = *peer;
    ibv_destroy_qp(p->qp);
    p->qp = qp;
    uct_syncmem_cm_send_rep(iface, p, peer);
}

static void uct_syncmem_cm_accept(uct_syncmem_iface_t *iface,
                                  const uct_syncmem_cm_msg_t *msg,
                                  const uct_syncmem_port_t *peer)
{
    uct_syncmem_cm_passive_t *p;

    /* the REP needs it: no QP held for a peer that cannot be answered */
    if (uct_syncmem_ah_get(iface, peer) == NULL) {
        return; /* the initiator retransmits */
    }
    p = ucs_calloc(1, sizeof(*p), "syncmem_passive");
    if (p == NULL) {
        return;
    }
    if (uct_syncmem_cm_passive_qp(iface, peer, msg->rc_qpn, &p->qp) != UCS_OK) {
        goto err_free;
    }
    p->qpn  = p->qp->qp_num;
    p->peer = *peer;
    uct_syncmem_cm_passive_insert(iface, p, msg);
    ucs_debug("syncmem: iface 0x%" PRIx64 " accepted connection %" PRIu64
              " from iface 0x%" PRIx64 ": QP 0x%x <-> 0x%x", iface->id,
              msg->conn_id, msg->src_iface_id, p->qpn, msg->rc_qpn);
    uct_syncmem_cm_send_rep(iface, p, peer);
    return;

err_free:
    ucs_free(p);
}

/* A keepalive write on p's QP, if none is in flight and the CQ has room. */
static int uct_syncmem_cm_probe_post(uct_syncmem_iface_t *iface,
                                     uct_syncmem_cm_passive_t *p)
{
    struct ibv_send_wr wr = {}, *bad_wr;

    wr.opcode     = IBV_WR_RDMA_WRITE;   /* no data: no rkey is checked */
    wr.send_flags = IBV_SEND_SIGNALED;
    if (p->probing || (iface->cm.probes_posted >= UCT_SYNCMEM_CM_PROBES) ||
        ibv_post_send(p->qp, &wr, &bad_wr)) {
        return 0;
    }
    p->probing = 1;
    ++iface->cm.probes_posted;
    return 1;
}

/* Async timer: a keepalive write on each passive QP, as far as the CQ has
 * room; the list rotates, so that every connection gets its turn.
 * half_open: only the connections not confirmed yet. Either way not one
 * whose RTU has not come, unless its initiator's whole connect time
 * (CM_TIMEOUT * (CM_RETRIES + 1)) has passed since (the datagram was lost,
 * or the initiator is gone): probed before its initiator is at RTR, under
 * a short RC timeout, a live connection would be released. */
static void uct_syncmem_cm_probe(uct_syncmem_iface_t *iface, int half_open)
{
    ucs_time_t now       = ucs_get_time();
    ucs_time_t rtu_after = iface->config.cm_timeout *
                           (iface->config.cm_retries + 1);
    unsigned max         = half_open ? UCT_SYNCMEM_CM_PROBES :
                           ucs_min(UCT_SYNCMEM_CM_PROBES,
                                   iface->cm.probes_posted +
                                   UCT_SYNCMEM_CM_KEEPALIVES);
    uct_syncmem_cm_passive_t *p, *tmp;
    ucs_list_link_t probed;

    ucs_list_head_init(&probed);
    ucs_list_for_each_safe(p, tmp, &iface->cm.passive, list) {
        if (iface->cm.probes_posted >= max) {
            break;
        }
        if ((half_open && p->confirmed) ||
            (p->rtu && !p->ready && (now - p->accepted < rtu_after)) ||
            !uct_syncmem_cm_probe_post(iface, p)) {
            continue;
        }
        ucs_list_del(&p->list);
        ucs_list_add_tail(&probed, &p->list);
    }
    ucs_list_splice_tail(&iface->cm.passive, &probed);
}

static void uct_syncmem_cm_keepalive(int id, ucs_event_set_types_t events,
                                     void *arg)
{
    uct_syncmem_cm_probe(arg, 0);
}

/* Async context: does what a message asks; 0 if it is a REQ refused for
 * lack of room (left to the caller). */
static int uct_syncmem_cm_act(uct_syncmem_iface_t *iface,
                              const uct_syncmem_cm_msg_t *msg,
                              const uct_syncmem_port_t *peer)
{
    uct_syncmem_cm_passive_t *p;
    uct_syncmem_ep_t *ep;

    switch (uct_syncmem_cm_decide(iface, msg, &p, &ep)) {
    case UCT_SYNCMEM_CM_ACCEPT:
        uct_syncmem_cm_accept(iface, msg, peer);
        break;
    case UCT_SYNCMEM_CM_REFUSE:
        /* under pressure, find out now which half-open ones have a peer */
        if (iface->cm.probes_posted == 0) {
            uct_syncmem_cm_probe(iface, 1);
        }
        return 0;
    case UCT_SYNCMEM_CM_ANSWER:
        uct_syncmem_cm_send_rep(iface, p, peer);
        break;
    case UCT_SYNCMEM_CM_REPLACE:
        uct_syncmem_cm_passive_replace(iface, p, msg, peer);
        break;
    case UCT_SYNCMEM_CM_REPLIED:
        uct_syncmem_cm_replied(ep, msg);
        break;
    case UCT_SYNCMEM_CM_RELEASE:
        uct_syncmem_cm_passive_destroy(iface, p, 0);
        break;
    case UCT_SYNCMEM_CM_PROBE:
        p->ready = 1; /* if no probe can go now, the next one will */
        (void)uct_syncmem_cm_probe_post(iface, p);
        break;
    case UCT_SYNCMEM_CM_PEER_BUSY:
        ep->cm.busy = 1; /* the next RESEND is not counted */
        ++iface->cm.busy_total;
        break;
    case UCT_SYNCMEM_CM_PEER_GONE:
        /* progress fails it when its reconnect starts or if it has */
        ep->cm.peer_gone = 1;
        ucs_diag("syncmem: ep %p: iface 0x%" PRIx64 " closed; the endpoint"
                 " fails at its next failed request, with no reconnect", ep,
                 msg->src_iface_id);
        break;
    case UCT_SYNCMEM_CM_DROP:
        ucs_debug("syncmem: iface 0x%" PRIx64 " dropped CM message %u of"
                  " connection %" PRIu64 " from iface 0x%" PRIx64
                  " (stale, duplicate or not its own)", iface->id, msg->type,
                  msg->conn_id, msg->src_iface_id);
        break;
    }
    return 1;
}

/* Async context: a REQ refused for room (kept or not) is answered BUSY,
 * so that its initiator does not count the try. Only to an initiator that
 * knows BUSY, only over an address handle made already (by an earlier
 * connection of that host: a flood of REQs naming new addresses gets no
 * answer and costs no AH), and only while the send queue is less than
 * half full: the REPs that make room go first. */
static void uct_syncmem_cm_send_busy(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_cm_msg_t *req,
                                     const uct_syncmem_port_t *peer)
{
    uct_syncmem_cm_msg_t busy;

    if (!(req->flags & UCT_SYNCMEM_CM_F_V3) ||
        (iface->cm.sends_posted >= UCT_SYNCMEM_CM_SENDS / 2) ||
        (uct_syncmem_ah_find(iface, peer) == NULL)) {
        return;
    }
    uct_syncmem_cm_msg_init(iface, UCT_SYNCMEM_CM_BUSY, req->src_iface_id,
                            req->conn_id, req->gen, 0, &busy);
    uct_syncmem_cm_send(iface, peer, req->src_cm_qpn, &busy);
}

/* Async context: one received message (buf after the GRH). */
static void uct_syncmem_cm_handle_msg(uct_syncmem_iface_t *iface,
                                      const void *buf, uint32_t byte_len,
                                      uint32_t src_qp)
{
    uct_syncmem_cm_msg_t msg;
    uct_syncmem_port_t peer;
    ucs_status_t status;

    status = uct_syncmem_cm_msg_parse(iface, buf, byte_len, src_qp, &msg,
                                      &peer);
    if (status == UCS_ERR_INVALID_ADDR) {
        ++iface->cm.dropped;
        return;
    } else if (status != UCS_OK) {
        ++iface->cm.malformed;
        return;
    }
    if (uct_syncmem_cm_act(iface, &msg, &peer)) {
        return;
    }
    if (!uct_syncmem_cm_defer(iface, &msg, &peer)) {
        ++iface->cm.refused;
        ++iface->cm.refused_total;
    }
    uct_syncmem_cm_send_busy(iface, &msg, &peer);
}

/* Async context: the REQs kept for room (uct_syncmem_cm_defer), in the
 * order they came, until one is refused again (a refusal probes the
 * half-open connections of initiators that send no RTU). */
static void uct_syncmem_cm_undefer(uct_syncmem_iface_t *iface)
{
    unsigned n = 0;

    while ((n < iface->cm.num_deferred) &&
           uct_syncmem_cm_act(iface, &iface->cm.deferred[n].msg,
                              &iface->cm.deferred[n].peer)) {
        ++n;
    }
    if (n == 0) {
        return; /* none, or the first refused again */
    }
    iface->cm.num_deferred -= n;
    if (iface->cm.num_deferred == 0) {
        /* the storm is over: what it took goes back */
        ucs_free(iface->cm.deferred);
        iface->cm.deferred     = NULL;
        iface->cm.max_deferred = 0;
        return;
    }
    memmove(iface->cm.deferred, iface->cm.deferred + n,
            iface->cm.num_deferred * sizeof(*iface->cm.deferred));
}

/* Async context: a keepalive write completed; failed, its peer is gone. */
static void uct_syncmem_cm_probe_wc(uct_syncmem_iface_t *iface,
                                    const struct ibv_wc *wc)
{
    uct_syncmem_cm_passive_t *p;

    p = uct_syncmem_cm_probe_done(iface, wc->qp_num,
                                  wc->status == IBV_WC_SUCCESS);
    if (p != NULL) {
        ucs_diag("syncmem: iface 0x%" PRIx64 ": connection %" PRIu64
                 " from iface 0x%" PRIx64 " is gone (keepalive: %s);"
                 " releasing QP 0x%x", iface->id, p->conn_id,
                 p->peer_iface_id, ibv_wc_status_str(wc->status),
                 wc->qp_num);
        uct_syncmem_cm_passive_destroy(iface, p, 1);
    }
}

/* Async context: the CM QP has completions. */
static void uct_syncmem_cm_async_cb(int id, ucs_event_set_types_t events,
                                    void *arg)
{
    uct_syncmem_iface_t *iface = arg;
    struct ibv_wc wc[8];
    struct ibv_cq *cq;
    void *cq_ctx;
    int i, n, failed = 0;

    /* consume the event and re-arm before polling, so none is missed */
    while (ibv_get_cq_event(iface->cm.channel, &cq, &cq_ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
    }
    ibv_req_notify_cq(iface->cm.cq, 0);

    while ((n = ibv_poll_cq(iface->cm.cq, ucs_static_array_size(wc), wc)) > 0) {
        for (i = 0; i < n; ++i) {
            if (wc[i].qp_num != iface->cm.qp->qp_num) {
                uct_syncmem_cm_probe_wc(iface, &wc[i]);
                continue;
            }
            failed |= (wc[i].status != IBV_WC_SUCCESS);
            /* by slot: the opcode of a failed completion is undefined */
            if (wc[i].wr_id >= UCT_SYNCMEM_CM_RECVS) {
                iface->cm.sends_posted -= (iface->cm.sends_posted > 0);
                continue;
            }
            if (wc[i].status == IBV_WC_SUCCESS) {
                uct_syncmem_cm_handle_msg(iface,
                        UCS_PTR_BYTE_OFFSET(uct_syncmem_cm_slot(iface,
                                                                wc[i].wr_id),
                                            UCT_SYNCMEM_CM_GRH_LEN),
                        wc[i].byte_len, wc[i].src_qp);
            }
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                uct_syncmem_cm_post_recv(iface, wc[i].wr_id);
            }
        }
    }

    if (failed) {
        uct_syncmem_cm_qp_recover(iface);
    }
    uct_syncmem_cm_undefer(iface);
    uct_syncmem_cm_drops_report(iface);
}

ucs_status_t uct_syncmem_cm_init(uct_syncmem_iface_t *iface)
{
    ucs_status_t status;

    ucs_list_head_init(&iface->cm.passive);
    kh_init_inplace(uct_syncmem_ahs, &iface->cm.ahs);
    iface->cm.connecting    = 0;
    iface->cm.next_conn_id  = 0;
    iface->cm.probes_posted = 0;
    iface->cm.keepalive_id  = -1;
    iface->cm.tombs         = NULL;
    iface->cm.num_tombs     = 0;
    iface->cm.half_open     = 0;
    iface->cm.deferred      = NULL;
    iface->cm.num_deferred  = 0;
    iface->cm.max_deferred  = 0;
    iface->cm.dropped       = 0;
    iface->cm.malformed     = 0;
    iface->cm.refused       = 0;
    iface->cm.refused_total = 0;
    iface->cm.busy_total    = 0;
    iface->cm.confirmed     = 0;
    iface->cm.refuse_writes = 0;
    memset(&iface->cm.flood, 0, sizeof(iface->cm.flood));

    status = uct_syncmem_cm_ud_open(iface);
    if (status != UCS_OK) {
        return status;
    }

    ibv_req_notify_cq(iface->cm.cq, 0);
    status = ucs_async_set_event_handler(iface->super.worker->async->mode,
                                         iface->cm.channel->fd,
                                         UCS_EVENT_SET_EVREAD,
                                         uct_syncmem_cm_async_cb, iface,
                                         iface->super.worker->async);
    if (status != UCS_OK) {
        ucs_error("syncmem: cannot watch the CM completion channel: %s",
                  ucs_status_string(status));
        goto err_ud;
    }

    if (iface->config.keepalive_interval != UCS_TIME_INFINITY) {
        status = ucs_async_add_timer(iface->super.worker->async->mode,
                                     iface->config.keepalive_interval,
                                     uct_syncmem_cm_keepalive, iface,
                                     iface->super.worker->async,
                                     &iface->cm.keepalive_id);
        if (status != UCS_OK) {
            ucs_error("syncmem: cannot start the keepalive timer: %s",
                      ucs_status_string(status));
            ucs_async_remove_handler(iface->cm.channel->fd, 1);
            goto err_ud;
        }
    }
    return UCS_OK;

err_ud:
    uct_syncmem_cm_ud_close(iface);
    return status;
}

/*
 * Tells each initiator that knows GONE that this iface closes, so that its
 * endpoint does not try to reconnect to it for RECONNECT_TIMEOUT. Before
 * the passive QPs go: the initiator learns it before its requests fail.
 * The sends get a bounded time to leave (a datagram, best effort: one that
 * does not leave costs the initiator its reconnect deadline, as a process
 * that is killed does).
 */
static void uct_syncmem_cm_say_gone(uct_syncmem_iface_t *iface)
{
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_msec(100);
    uct_syncmem_cm_passive_t *p;
    uct_syncmem_cm_msg_t msg;
    unsigned sent = 0;

    ucs_list_for_each(p, &iface->cm.passive, list) {
        if (!p->gone) {
            continue;
        }
        uct_syncmem_cm_sends_wait(iface, UCT_SYNCMEM_CM_SENDS - 1, deadline);
        uct_syncmem_cm_msg_init(iface, UCT_SYNCMEM_CM_GONE, p->peer_iface_id,
                                p->conn_id, p->gen, 0, &msg);
        uct_syncmem_cm_send(iface, &p->peer, p->peer_cm_qpn, &msg);
        ++sent;
    }
    uct_syncmem_cm_sends_wait(iface, 0, deadline);
    if (sent > 0) {
        ucs_debug("syncmem: iface 0x%" PRIx64 " closes: told %u initiators,"
                  " %u datagrams still in flight", iface->id, sent,
                  iface->cm.sends_posted);
    }
}

void uct_syncmem_cm_cleanup(uct_syncmem_iface_t *iface)
{
    uct_syncmem_cm_passive_t *p, *tmp;

    /* waits for a running handler; none runs after this */
    if (iface->cm.keepalive_id >= 0) {
        ucs_async_remove_handler(iface->cm.keepalive_id, 1);
    }
    ucs_async_remove_handler(iface->cm.channel->fd, 1);

    uct_syncmem_cm_say_gone(iface);
    ucs_list_for_each_safe(p, tmp, &iface->cm.passive, list) {
        uct_syncmem_cm_passive_destroy(iface, p, 0);
    }
    uct_syncmem_cm_tombs_free(iface);
    ucs_free(iface->cm.deferred);
    uct_syncmem_cm_ud_close(iface);
}
