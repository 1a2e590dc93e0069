/*
 * syncmem - fault recovery: reconnect after a link outage, operation
 * deadlines, and the testing knob that breaks QPs on purpose.
 *
 * Reconnect (UCX_SYNCMEM_RECONNECT): an RC QP that fails because packets
 * stopped getting through (retry exceeded), or that something else moved
 * to the error state, is replaced instead of failing the endpoint:
 *
 *  1. The first failed completion names request k. RC completes in order,
 *     so every request before k has completed; k and everything after it
 *     may or may not have reached the peer ("unknown outcome").
 *  2. A new QP is created and connected through the handshake (a REQ with
 *     the next generation number; syncmem_cm.c), retried every CM_TIMEOUT
 *     until RECONNECT_TIMEOUT. The old QP stays until its flushed requests
 *     have all come back through the CQ, so that no completion of it is
 *     confused with one of the new QP.
 *  3. Requests k.. are posted again, in order, with their fence flags, from
 *     the replay ring that uct_syncmem_ep_post fills (syncmem_tx.inl):
 *     - puts and gets: again, which is harmless (idempotent);
 *     - active messages: again; each carries its request number in the
 *       immediate data and the receiver drops one it already delivered
 *       (uct_syncmem_rx_is_replayed), so each is delivered exactly once;
 *     - atomics: never twice. The HCA executes them with no trace the next
 *       QP could consult, so one of unknown outcome is replaced by an empty
 *       write and fails: its completion gets UCS_ERR_CONNECTION_RESET; the
 *       next flush does too only if one had no completion (a posted atomic:
 *       nothing else can report it).
 *     Completions still come in request order, so ordering, fences and
 *     flush mean what they meant before.
 *  4. Past the deadline everything outstanding fails with
 *     UCS_ERR_ENDPOINT_TIMEOUT and the error handler is called, once.
 *
 * A dead peer looks like a link that stays down: it is detected after
 * RECONNECT_TIMEOUT instead of after the RC retries. A QP that stops
 * without any error is found by the stall check (syncmem_watchdog.c).
 */
#include "syncmem.h"
#include "syncmem_tx.inl"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <string.h>

#define UCT_SYNCMEM_REPLAY_BATCH   16          /* requests per post call */
#define UCT_SYNCMEM_RX_UNRESOLVED  UCS_BIT(32) /* replaced: an old QP number */


ucs_status_t uct_syncmem_fault_ep_init(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    /* room for every request the send queue holds, and the drain */
    unsigned entries = ucs_roundup_pow2(iface->config.tx_queue_len + 2);

    memset(&ep->rc, 0, sizeof(ep->rc));
    if (!iface->config.reconnect && (iface->config.db_batch <= 1)) {
        return UCS_OK;
    }

    ep->rc.ring = ucs_calloc(entries, sizeof(*ep->rc.ring), "syncmem_replay");
    ep->rc.data = ucs_malloc(entries * iface->config.replay_data,
                             "syncmem_replay_data");
    if ((ep->rc.ring == NULL) || (ep->rc.data == NULL)) {
        ucs_error("syncmem: no memory for the replay ring (%u entries);"
                  " lower UCX_SYNCMEM_TX_QUEUE_LEN or set"
                  " UCX_SYNCMEM_RECONNECT=n", entries);
        uct_syncmem_fault_ep_cleanup(ep);
        return UCS_ERR_NO_MEMORY;
    }
    ep->rc.mask = entries - 1;
    return UCS_OK;
}

static void uct_syncmem_ep_destroy_old_qp(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    khiter_t it;

    if (ep->rc.old_qp == NULL) {
        return;
    }

    it = kh_get(uct_syncmem_qp_eps, &iface->qp_eps, ep->rc.old_qp->qp_num);
    if (it != kh_end(&iface->qp_eps)) {
        kh_del(uct_syncmem_qp_eps, &iface->qp_eps, it);
    }
    ibv_destroy_qp(ep->rc.old_qp);
    ep->rc.old_qp = NULL;
}

void uct_syncmem_fault_ep_cleanup(uct_syncmem_ep_t *ep)
{
    uct_syncmem_ep_destroy_old_qp(ep);
    ucs_free(ep->rc.ring);
    ucs_free(ep->rc.data);
    ep->rc.ring = NULL;
    ep->rc.data = NULL;
}

/*
 * Retire everything outstanding with status now, and give its slots back:
 * for an endpoint whose requests will never be reported by a CQ (the old
 * QP is destroyed, the new one has none). Completions that still arrive
 * are older than acked_sn and ignored.
 */
void uct_syncmem_ep_purge(uct_syncmem_ep_t *ep, ucs_status_t status)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_op_t *op;

    uct_syncmem_ep_destroy_old_qp(ep);
    ucs_list_del(&ep->db_list);
    ucs_list_head_init(&ep->db_list);
    ep->tx.rung_sn       = ep->tx.sn;
    iface->cq_available += iface->config.tx_queue_len - ep->tx.available;
    ep->tx.available     = iface->config.tx_queue_len;
    ep->tx.acked_sn      = ep->tx.sn;
    ucs_queue_for_each_extract(op, &ep->tx.outstanding, queue, 1) {
        op->handler(op, status);
    }
}

/*
 * The status an op retires with while atomics lost to a reconnect are not
 * yet reported. The lost atomic itself fails. A flush that follows fails
 * only if one of them has no completion of its own (a posted atomic, which
 * only a flush can report): puts and gets were posted again, active
 * messages delivered once, so the flush has nothing else of unknown outcome
 * to report, and an atomic with a completion has reported itself.
 */
ucs_status_t uct_syncmem_ep_op_status(uct_syncmem_ep_t *ep,
                                      const uct_syncmem_op_t *op,
                                      ucs_status_t status)
{
    if ((status != UCS_OK) || (ep->rc.ring == NULL)) {
        return status;
    }

    if (op->handler == uct_syncmem_ep_flush_done) {
        if (UCS_CIRCULAR_COMPARE16(op->sn, >=, ep->rc.lost_last_sn)) {
            ep->rc.lost = 0; /* all retired, reported */
        }
        return uct_syncmem_ep_lost_status(ep);
    }
    if (ep->rc.ring[op->sn & ep->rc.mask].lost) {
        if (op->comp == NULL) {
            ep->rc.lost_silent = 1;
        }
        return UCS_ERR_CONNECTION_RESET;
    }
    return status;
}

/* For a flush: did a lost atomic that nobody else reports retire? */
ucs_status_t uct_syncmem_ep_lost_status(uct_syncmem_ep_t *ep)
{
    if (ucs_likely(!ep->rc.lost_silent)) {
        return UCS_OK;
    }
    ep->rc.lost_silent = 0;
    return UCS_ERR_CONNECTION_RESET;
}

static int uct_syncmem_wc_is_link_error(enum ibv_wc_status status)
{
    /* retry exceeded: no acknowledgement came back (link, switch, peer
     * host); flushed with no error before it: the QP was moved to the
     * error state by something other than us (port event, FAULT_QP_ERROR);
     * local QP operation error: Soft-RoCE's answer when it cannot route
     * the packet (the netdev went down) */
    return (status == IBV_WC_RETRY_EXC_ERR) ||
           (status == IBV_WC_WR_FLUSH_ERR) ||
           (status == IBV_WC_LOC_QP_OP_ERR);
}

/*
 * Is a get among the requests the old QP may have sent but not completed
 * (fail_sn..old_last_sn)? Its reply may have been cut at the peer, and
 * Soft-RoCE's responder (rxe_resp.c read_reply, kernels 6.1 and 6.12) then
 * keeps that reply pending on its QP, marked as begun although its first
 * packet never left. At the next packet the QP receives, whatever its PSN,
 * it sends the rest: a read response with no first packet, at the PSNs of
 * that get. A resumed QP is sending that very get again at those PSNs, and
 * its completer (rxe_comp.c check_ack) takes a response without a start
 * for an error, completes the get with IBV_WC_SUCCESS and no data (the
 * kernel's WARNING at rxe_comp.c COMPST_ERROR) and moves the QP to error.
 * A new QP pair leaves the pending reply behind on the peer's old QP.
 * (test_wire.cc: reconnect_after_a_cut_read_reply_returns_the_data)
 */
static int uct_syncmem_ep_unknown_read(const uct_syncmem_ep_t *ep)
{
    uint16_t sn;

    for (sn = ep->rc.fail_sn;
         UCS_CIRCULAR_COMPARE16(sn, <=, ep->rc.old_last_sn); ++sn) {
        if (ep->rc.ring[sn & ep->rc.mask].opcode == IBV_WR_RDMA_READ) {
            return 1;
        }
    }
    return 0;
}

static void uct_syncmem_ep_reconnect_start(uct_syncmem_ep_t *ep,
                                           const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t sn                = wc->wr_id;
    struct ibv_qp *qp;
    ucs_status_t status;
    khiter_t it;
    int ret;

    /* RC completes in order: what came before the failed request is done */
    if (sn != (uint16_t)(ep->tx.acked_sn + 1)) {
        uct_syncmem_ep_tx_completed(ep, sn - 1, UCS_OK);
    }

    status = uct_syncmem_qp_create(iface, iface->cq, &qp);
    if (status != UCS_OK) {
        goto err;
    }
    it = kh_put(uct_syncmem_qp_eps, &iface->qp_eps, qp->qp_num, &ret);
    if (ret < 0) {
        ibv_destroy_qp(qp);
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }
    kh_value(&iface->qp_eps, it) = ep;

    ucs_diag("syncmem: ep %p: QP 0x%x to iface 0x%" PRIx64 " failed at"
             " request %u (%s); reconnecting, %u requests to post again"
             " (UCX_SYNCMEM_RECONNECT_TIMEOUT=%.1fs)", ep, wc->qp_num,
             ep->cm.peer_iface_id, sn, ibv_wc_status_str(wc->status),
             (uint16_t)(ep->tx.sn - sn + 1),
             ucs_time_to_sec(iface->config.reconnect_timeout));

    /* requests not rung yet are posted on the new QP with the others */
    ep->rc.fail_sn     = sn;
    ep->rc.old_last_sn = ep->tx.rung_sn;

    /* Resume the same QP pair if the peer's is up (the REP says), but not
     * a QP the device itself stopped driving (a stall), not twice for the
     * same request (a resumed pair that fails again where it failed before,
     * seen on Soft-RoCE under 10 % loss, gets a new QP), and not with a get
     * of unknown outcome (uct_syncmem_ep_unknown_read). */
    ep->rc.resume      = iface->config.reconnect_resume &&
                         (ep->rc.stalls == 0) &&
                         !(ep->rc.resumed_once && (ep->rc.resumed_sn == sn)) &&
                         !uct_syncmem_ep_unknown_read(ep);
    ep->rc.drained     = 0;
    uct_syncmem_qp_query(ep->qp, &ep->rc.old_rq_psn);
    ep->tx.rung_sn     = ep->tx.sn;
    ucs_list_del(&ep->db_list);
    ucs_list_head_init(&ep->db_list);
    ep->rc.qp_ready    = 0;
    ep->rc.started     = ucs_get_time();
    ep->rc.deadline    = ep->rc.started + iface->config.reconnect_timeout;

    /* the async handler (REP) and the fault timer look at these */
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ep->rc.old_qp = ep->qp;
    ep->qp        = qp;
    uct_syncmem_ep_set_state(ep, UCT_SYNCMEM_EP_RECONNECTING);
    uct_syncmem_cm_reconnect(ep);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);

    if (sn == ep->rc.old_last_sn) {
        ep->rc.drained = 1; /* that was its last request */
    }
    return;

err:
    ucs_error("syncmem: ep %p: cannot reconnect (%s)", ep,
              ucs_status_string(status));
    uct_syncmem_ep_tx_completed(ep, sn, status);
    uct_syncmem_ep_set_failed(ep, status);
}

/* A failed send completion (or any of a QP being replaced). */
void uct_syncmem_ep_tx_error(uct_syncmem_ep_t *ep, const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t sn                = wc->wr_id;
    ucs_status_t status;

    if ((ep->rc.old_qp != NULL) && (wc->qp_num == ep->rc.old_qp->qp_num)) {
        /* flushed: posted again once this QP is empty */
        if (sn == ep->rc.old_last_sn) {
            ep->rc.drained = 1;
        }
        return;
    }

    if (UCS_CIRCULAR_COMPARE16(sn, <=, ep->tx.acked_sn)) {
        return; /* purged already */
    }

    if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) && iface->config.reconnect &&
        uct_syncmem_wc_is_link_error(wc->status)) {
        uct_syncmem_ep_reconnect_start(ep, wc);
        return;
    }

    /* After the first error the QP flushes the rest: report the cause (or
     * the cancel) to every op, and the error to the user once. */
    status = (ep->state == UCT_SYNCMEM_EP_FAILED) ? ep->status :
             uct_syncmem_wc_status(wc->status);
    uct_syncmem_ep_tx_completed(ep, sn, status);
    if (ep->state != UCT_SYNCMEM_EP_FAILED) {
        uct_syncmem_wc_log(iface, ep, wc);
        uct_syncmem_ep_set_failed(ep, status);
    }
}

/* Rebuild request sn from the replay ring into wr (and its sge). */
static void uct_syncmem_replay_wr(uct_syncmem_iface_t *iface,
                                  uct_syncmem_ep_t *ep, uint16_t sn,
                                  int replay, struct ibv_send_wr *wr,
                                  struct ibv_sge *sge)
{
    unsigned idx            = sn & ep->rc.mask;
    uct_syncmem_replay_t *e = &ep->rc.ring[idx];
    uint8_t *data           = ep->rc.data + idx * iface->config.replay_data;

    memset(wr, 0, sizeof(*wr));
    wr->wr_id      = sn;
    wr->opcode     = e->opcode;
    wr->send_flags = e->send_flags;
    wr->imm_data   = e->imm_data;

    if (replay) {
        /* the PSNs it takes now (the same ones, when resumed) */
        e->psn          = ep->rc.next_psn;
        ep->rc.next_psn = (e->psn + e->npkts) & UCT_SYNCMEM_PSN_MASK;
    }
    if (uct_syncmem_opcode_is_atomic(e->opcode) &&
        (UCS_CIRCULAR_COMPARE16(sn, >, ep->rc.old_last_sn) ||
         ep->cm.resumed)) {
        /* never reached the old QP, or the peer's responder tells a
         * duplicate from a new one: it runs once */
        replay = 0;
    }
    if (!replay && uct_syncmem_opcode_is_atomic(e->opcode)) {
        wr->wr.atomic.remote_addr = e->remote_addr;
        wr->wr.atomic.rkey        = e->rkey;
        wr->wr.atomic.compare_add = e->compare_add;
        wr->wr.atomic.swap        = e->swap;
        wr->sg_list               = (struct ibv_sge*)data;
        wr->num_sge               = e->num_sge;
        return;
    }

    if (uct_syncmem_opcode_is_atomic(e->opcode)) {
        /* may have run already: never again; an empty write holds its
         * place (its completion, its fence) */
        e->lost              = 1;
        ep->rc.lost_last_sn  = sn;
        ++ep->rc.lost;
        wr->opcode           = IBV_WR_RDMA_WRITE;
        wr->send_flags      |= IBV_SEND_SIGNALED;
        return;
    }

    wr->wr.rdma.remote_addr = e->remote_addr;
    wr->wr.rdma.rkey        = e->rkey;
    if (e->send_flags & IBV_SEND_INLINE) {
        sge->addr    = (uintptr_t)data;
        sge->length  = e->inline_len;
        sge->lkey    = 0;
        wr->sg_list  = sge;
        wr->num_sge  = 1;
    } else {
        wr->sg_list  = (struct ibv_sge*)data;
        wr->num_sge  = e->num_sge;
    }
}

/* Posts requests first.. from the ring, as chains: a doorbell, or
 * (replay) what a reconnect must post again. */
static ucs_status_t uct_syncmem_ep_post_ring(uct_syncmem_ep_t *ep,
                                             uint16_t first, uint16_t count,
                                             int replay)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_send_wr wrs[UCT_SYNCMEM_REPLAY_BATCH], *bad_wr;
    struct ibv_sge sges[UCT_SYNCMEM_REPLAY_BATCH];
    uint16_t sn = first;
    unsigned n, i;
    int ret;

    while (count > 0) {
        n = ucs_min(count, UCT_SYNCMEM_REPLAY_BATCH);
        for (i = 0; i < n; ++i, ++sn) {
            uct_syncmem_replay_wr(iface, ep, sn, replay, &wrs[i], &sges[i]);
            wrs[i].next = &wrs[i + 1];
        }
        wrs[n - 1].next = NULL;
        count          -= n;
        if (replay && (count == 0)) {
            /* a flush may wait on the last one: it must complete */
            wrs[n - 1].send_flags |= IBV_SEND_SIGNALED;
            ep->tx.unsignaled      = 0;
        }
        ret = ibv_post_send(ep->qp, wrs, &bad_wr);
        if (ret) {
            ucs_error("syncmem: ep %p: ibv_post_send(QP 0x%x, %u requests)"
                      " failed: %s", ep, ep->qp->qp_num, n, strerror(ret));
            return UCS_ERR_IO_ERROR;
        }
    }
    return UCS_OK;
}

/* Doorbell: post what uct_syncmem_ep_post kept (syncmem_tx.inl). */
void uct_syncmem_ep_ring(uct_syncmem_ep_t *ep)
{
    uint16_t first = ep->tx.rung_sn + 1;
    uint16_t count = ep->tx.sn - ep->tx.rung_sn;

    ucs_list_del(&ep->db_list);
    ucs_list_head_init(&ep->db_list);
    ep->tx.rung_sn = ep->tx.sn;
    if ((count > 0) &&
        (uct_syncmem_ep_post_ring(ep, first, count, 0) != UCS_OK)) {
        uct_syncmem_ep_set_failed(ep, UCS_ERR_IO_ERROR);
    }
}

void uct_syncmem_iface_ring_all(uct_syncmem_iface_t *iface)
{
    uct_syncmem_ep_t *ep, *tmp;

    ucs_list_for_each_safe(ep, tmp, &iface->db_eps, db_list) {
        uct_syncmem_ep_ring(ep);
    }
}

/* The new QP is connected and the old one is gone: post again what had
 * not completed, and let the endpoint work. */
static ucs_status_t uct_syncmem_ep_replay(uct_syncmem_ep_t *ep)
{
    unsigned lost = ep->rc.lost;
    ucs_status_t status;

    status = uct_syncmem_ep_post_ring(ep, ep->rc.fail_sn,
                                      ep->tx.sn - ep->rc.fail_sn + 1, 1);
    if (status != UCS_OK) {
        return status;
    }
    ep->tx.rung_sn = ep->tx.sn;

    ucs_diag("syncmem: ep %p: reconnected to iface 0x%" PRIx64 " after %.0f"
             " ms (%s), %u requests replayed, %u atomics of unknown outcome"
             " failed", ep, ep->cm.peer_iface_id,
             ucs_time_to_msec(ucs_get_time() - ep->rc.started),
             ep->cm.resumed ? "the same QPs, resumed" : "a new QP",
             (uint16_t)(ep->tx.sn - ep->rc.fail_sn + 1), ep->rc.lost - lost);
    if (ep->rc.lost > lost) {
        ucs_warn("syncmem: ep %p: %u atomic operations may or may not have"
                 " run when the link to iface 0x%" PRIx64 " failed; they"
                 " report UCS_ERR_CONNECTION_RESET (not run again)", ep,
                 ep->rc.lost - lost, ep->cm.peer_iface_id);
    }
    return UCS_OK;
}

/*
 * The peer kept its QP: bring the old one back (its flushes are all in) to
 * where it stopped, and let the new one, made in case, go instead. The
 * requests posted again keep their PSNs (uct_syncmem_qp_resume).
 */
static ucs_status_t uct_syncmem_ep_resume(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint32_t sq_psn            = ep->rc.ring[ep->rc.fail_sn & ep->rc.mask].psn;
    struct ibv_qp *spare       = ep->qp;
    ucs_status_t status;

    status = uct_syncmem_qp_resume(iface, ep->rc.old_qp, &ep->cm.peer,
                                   ep->cm.peer_rc_qpn, sq_psn,
                                   ep->rc.old_rq_psn);
    if (status != UCS_OK) {
        return status;
    }
    ep->qp              = ep->rc.old_qp;
    ep->rc.old_qp       = spare; /* destroyed next, as the old one would be */
    ep->rc.next_psn     = sq_psn;
    ep->rc.resumed_sn   = ep->rc.fail_sn;
    ep->rc.resumed_once = 1;
    return UCS_OK;
}

/*
 * Progress of a reconnecting endpoint, with the async lock held: connect
 * the new QP once the peer answered, post again once the old QP is empty,
 * resend the request, or give up. Not UCS_OK: fail the endpoint with it.
 */
ucs_status_t uct_syncmem_ep_reconnect_check(uct_syncmem_ep_t *ep,
                                            ucs_time_t now)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    ucs_status_t status;

    if (!ep->rc.qp_ready && ep->cm.replied &&
        (!ep->cm.resumed || ep->rc.drained)) {
        status = ep->cm.resumed ? uct_syncmem_ep_resume(ep) :
                 uct_syncmem_qp_connect(iface, ep->qp, &ep->cm.peer,
                                        ep->cm.peer_rc_qpn);
        if (status != UCS_OK) {
            return status;
        }
        ep->rc.qp_ready = 1;
    }

    if (ep->rc.qp_ready && ((ep->rc.old_qp == NULL) || ep->rc.drained)) {
        uct_syncmem_ep_destroy_old_qp(ep);
        if (!ep->cm.resumed) {
            ep->rc.next_psn = 0; /* a new QP starts there */
        }
        status = uct_syncmem_ep_replay(ep);
        if (status != UCS_OK) {
            return status;
        }
        uct_syncmem_ep_connected(ep);
        return UCS_OK;
    }

    if ((now >= ep->rc.deadline) && !ep->cm.replied) {
        /* The tries so far may all have fallen in the outage, and the
         * user's progress may have paused since (Open MPI's pml worker
         * while its osc worker streams): ask once more after the deadline
         * and wait for that answer, so that an outage shorter than the
         * deadline does not fail the endpoint. Once only: a REQ at or after
         * deadline - CM_TIMEOUT leaves next_retry past the deadline. */
        if (ep->cm.next_retry < ep->rc.deadline) {
            uct_syncmem_cm_send_req(ep);
            return UCS_OK;
        }
        if (now < ep->cm.next_retry) {
            return UCS_OK;
        }
    }

    if (now >= ep->rc.deadline) {
        ucs_log(iface->super.config.failure_level,
                "syncmem: ep %p: reconnect to iface 0x%" PRIx64 " gave up"
                " after %.1f s (%s); is the peer alive and its link up?"
                " UCX_SYNCMEM_RECONNECT_TIMEOUT sets how long to try", ep,
                ep->cm.peer_iface_id, ucs_time_to_sec(now - ep->rc.started),
                ep->rc.qp_ready ? "the old QP never drained" :
                                  "no answer to the connection request");
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (!ep->cm.replied && (now >= ep->cm.next_retry)) {
        uct_syncmem_cm_send_req(ep);
    }
    return UCS_OK;
}

/* UCX_SYNCMEM_FAULT_QP_ERROR (testing): async timer, lock held. */
static void uct_syncmem_fault_timer(int id, ucs_event_set_types_t events,
                                    void *arg)
{
    uct_syncmem_iface_t *iface = arg;
    struct ibv_qp_attr attr    = { .qp_state = IBV_QPS_ERR };
    uct_syncmem_ep_t *ep;

    ucs_list_for_each(ep, &iface->eps, list) {
        if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
            !ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE)) {
            ucs_diag("syncmem: UCX_SYNCMEM_FAULT_QP_ERROR: QP 0x%x of ep %p"
                     " forced to the error state", ep->qp->qp_num, ep);
        }
    }
}

ucs_status_t uct_syncmem_ep_inject_qp_error(uct_ep_h tl_ep)
{
    uct_syncmem_ep_t *ep    = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

    return ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE) ? UCS_ERR_IO_ERROR :
                                                        UCS_OK;
}

unsigned uct_syncmem_ep_reconnects(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep, uct_syncmem_ep_t)->cm.gen;
}

ucs_status_t uct_syncmem_fault_iface_init(uct_syncmem_iface_t *iface)
{
    ucs_status_t status;

    kh_init_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_init_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
    iface->rx.links            = NULL;
    iface->rx.have_links       = 0;
    iface->cm.fault_id         = -1;

    status = uct_syncmem_watchdog_init(iface);
    if (status != UCS_OK) {
        uct_syncmem_fault_iface_cleanup(iface);
        return status;
    }

    if (iface->config.fault_qp_error == UCS_TIME_INFINITY) {
        return UCS_OK;
    }

    ucs_warn("syncmem: UCX_SYNCMEM_FAULT_QP_ERROR is set: endpoints are"
             " broken on purpose every %.3f s (for testing)",
             ucs_time_to_sec(iface->config.fault_qp_error));
    status = ucs_async_add_timer(iface->super.worker->async->mode,
                                 iface->config.fault_qp_error,
                                 uct_syncmem_fault_timer, iface,
                                 iface->super.worker->async,
                                 &iface->cm.fault_id);
    if (status != UCS_OK) {
        ucs_error("syncmem: cannot start the FAULT_QP_ERROR timer: %s",
                  ucs_status_string(status));
        uct_syncmem_fault_iface_cleanup(iface); /* the caller does not */
    }
    return status;
}

void uct_syncmem_fault_iface_cleanup(uct_syncmem_iface_t *iface)
{
    uct_syncmem_rx_link_t *link;

    if (iface->cm.fault_id >= 0) {
        ucs_async_remove_handler(iface->cm.fault_id, 1);
    }
    uct_syncmem_watchdog_cleanup(iface);
    while ((link = iface->rx.links) != NULL) {
        iface->rx.links = link->next;
        ucs_free(link);
    }
    kh_destroy_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_destroy_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
}

/* Async context, lock held: tell the receive path that new_qpn replaces
 * old_qpn (new_qpn 0: old_qpn is gone for good). */
void uct_syncmem_rx_link_push(uct_syncmem_iface_t *iface, uint32_t new_qpn,
                              uint32_t old_qpn)
{
    uct_syncmem_rx_link_t *link = ucs_malloc(sizeof(*link), "syncmem_link");

    if (link == NULL) {
        ucs_warn("syncmem: no memory to note that QP 0x%x replaces 0x%x;"
                 " active messages sent again may be delivered twice",
                 new_qpn, old_qpn);
        return;
    }
    link->new_qpn      = new_qpn;
    link->old_qpn      = old_qpn;
    link->next         = iface->rx.links;
    iface->rx.links    = link;
    iface->rx.have_links = 1;
}

/* Progress: take the links noted by the async context. */
void uct_syncmem_rx_links_apply(uct_syncmem_iface_t *iface)
{
    uct_syncmem_rx_link_t *link, *links;
    khiter_t it;
    int ret;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    links                = iface->rx.links;
    iface->rx.links      = NULL;
    iface->rx.have_links = 0;
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);

    while ((link = links) != NULL) {
        links = link->next;
        if (link->new_qpn == 0) {
            it = kh_get(uct_syncmem_qp_sn, &iface->rx.last_sn, link->old_qpn);
            if (it != kh_end(&iface->rx.last_sn)) {
                kh_del(uct_syncmem_qp_sn, &iface->rx.last_sn, it);
            }
        } else {
            /* resolved at its first message: the old QP's may still be in
             * the CQ behind this poll */
            it = kh_put(uct_syncmem_qp_link, &iface->rx.replaced,
                        link->new_qpn, &ret);
            if (ret >= 0) {
                kh_value(&iface->rx.replaced, it) = UCT_SYNCMEM_RX_UNRESOLVED |
                                                    link->old_qpn;
            }
        }
        ucs_free(link);
    }
}

/* A message on a QP that replaced another: already delivered through the
 * old one? The old QP's messages all came first (one CQ, in order). */
int uct_syncmem_rx_is_replayed(uct_syncmem_iface_t *iface, uint32_t qpn,
                               uint16_t sn)
{
    khiter_t it = kh_get(uct_syncmem_qp_link, &iface->rx.replaced, qpn);
    khiter_t old;
    uint64_t value;

    if (it == kh_end(&iface->rx.replaced)) {
        return 0;
    }

    value = kh_value(&iface->rx.replaced, it);
    if (value & UCT_SYNCMEM_RX_UNRESOLVED) {
        old = kh_get(uct_syncmem_qp_sn, &iface->rx.last_sn, (uint32_t)value);
        if (old == kh_end(&iface->rx.last_sn)) {
            /* no message ever came through the old QP */
            kh_del(uct_syncmem_qp_link, &iface->rx.replaced, it);
            return 0;
        }
        value = kh_value(&iface->rx.last_sn, old);
        kh_del(uct_syncmem_qp_sn, &iface->rx.last_sn, old);
        kh_value(&iface->rx.replaced, it) = value;
    }

    if (UCS_CIRCULAR_COMPARE16(sn, <=, (uint16_t)value)) {
        ucs_trace("syncmem: QP 0x%x: dropped AM %u, delivered before the"
                  " sender reconnected", qpn, sn);
        return 1;
    }

    /* past what the old QP delivered: in order from here on */
    kh_del(uct_syncmem_qp_link, &iface->rx.replaced, it);
    return 0;
}
