/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - an endpoint's requests as its state machine sees them: they
 * complete (in order, with the status the replay ring gives those a
 * reconnect lost), the QP goes to error and drains, the pending queue runs
 * or fails. These are the actions syncmem_reconnect.c carries out; nothing
 * here raises an event. And their round trips timed, for the RC timeout
 * that adapts (UCX_SYNCMEM_RC_TIMEOUT=auto): samples, backoff, and the
 * timeout programmed into a connected QP.
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"

#include <ucs/time/time.h>
#include <string.h>

void uct_syncmem_op_release(uct_syncmem_op_t *op, ucs_status_t status)
{
    ucs_mpool_put(op);
}

void uct_syncmem_op_complete(uct_syncmem_op_t *op, ucs_status_t status)
{
    uct_invoke_completion(op->comp, status);
    ucs_mpool_put(op);
}

/* A flush completes when everything before it has, including emulated
 * atomics, which keep posting new steps: follow the last of them. (Not
 * uct_syncmem_ep_flush_*: callgrind.sh counts those as the flush.) */
void uct_syncmem_op_flush_done(uct_syncmem_op_t *op, ucs_status_t status)
{
    uct_syncmem_ep_t *ep = op->ep;

    if ((ep->amo_inflight > 0) && (status == UCS_OK)) {
        op->sn = ep->tx.sn;
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
        return;
    }
    uct_syncmem_op_complete(op, status);
}

/* While a fence waits (uct_syncmem_ep_fence), the endpoint has no room to
 * send, as while it is not connected (uct_syncmem_ep_tx_limit): what comes
 * meanwhile is kept in its ring (uct_syncmem_ep_check_room). */
void uct_syncmem_ep_fence_hold(uct_syncmem_ep_t *ep, int hold)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    int old_limit              = uct_syncmem_ep_tx_limit(iface, ep);

    iface->fence_waits += hold - ep->fence_wait;
    ep->fence_wait      = hold;
    ep->tx.available   += uct_syncmem_ep_tx_limit(iface, ep) - old_limit;
    if (!hold) {
        ep->fence_again = 0;
    }
    uct_syncmem_iface_keep_any_update(iface);
}

/*
 * A fence (uct_syncmem_ep_fence) on ep: it waits if a read or an atomic is
 * in flight. While it waits, requests posted after it are kept in the ring
 * (not rung: uct_syncmem_replay_ring stops at tx.fence_sn) and go once it
 * is over (the progress that ends it rings them); the steps of emulated
 * atomics from before it go before them (uct_syncmem_replay_gap_open). A
 * second fence after kept requests leaves the endpoint no room until the
 * first is over, and then takes its place. Without a ring (RECONNECT=n, no
 * TX_DB_BATCH) nothing can be kept: operations get UCS_ERR_NO_RESOURCE
 * while it waits. If the last request before the fence is unsignalled, an
 * empty write must report it (fence_nop): the caller posts it, or the next
 * progress does (iface->fence_due).
 */
void uct_syncmem_ep_fence_start(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    if (ep->fence_wait) {
        /* requests kept since the fence it waits for: the next one */
        ep->fence_again |= (ep->tx.sn != ep->tx.fence_sn);
        return;
    } else if (ucs_queue_is_empty(&ep->tx.outstanding) &&
               (ep->amo_inflight == 0)) {
        return; /* writes only, or nothing posted since the last */
    }

    ep->tx.fence_sn = ep->tx.sn;
    ep->fence_amo   = ep->amo_inflight;
    ep->fence_nop   = uct_syncmem_ep_last_unsignaled(iface, ep);
    uct_syncmem_ep_fence_hold(ep, 1);
}

/* The requests kept behind a fence go as soon as it is over, before
 * anything posted next could overtake them (a completion callback, the
 * pending queue). A chain the device refuses moves the QP to error: its
 * completions then fail or reconnect the endpoint. */
static void uct_syncmem_ep_fence_ring(uct_syncmem_ep_t *ep)
{
    struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

    if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
        (uct_syncmem_replay_ring(ep) != UCS_OK) &&
        ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE)) {
        ucs_error("syncmem: ep %p: cannot move QP 0x%x to the error state:"
                  " %m", ep, ep->qp->qp_num);
    }
}

/* A fence waits: over once every request before it has completed and no
 * emulated atomic from before it is in flight. Then a fence that came
 * after it takes its place, what was kept before that goes, and the
 * pending queue runs. Until then an empty write it still needs is posted by
 * the next progress (uct_syncmem_ep_fence_nop), connected. */
void uct_syncmem_ep_fence_check(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    int again;

    if (UCS_CIRCULAR_COMPARE16(ep->tx.acked_sn, >=, ep->tx.fence_sn) &&
        (ep->fence_amo == 0)) {
        again = ep->fence_again;
        uct_syncmem_ep_fence_hold(ep, 0);
        ep->fence_nop = 0;
        if (again) {
            uct_syncmem_ep_fence_start(ep);
        }
        uct_syncmem_ep_fence_ring(ep);
        if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
            ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
        }
    }
    if (ep->fence_nop && (ep->state == UCT_SYNCMEM_EP_CONNECTED)) {
        iface->fence_due = 1;
        iface->check_due = 1;
    }
}

/* An emulated atomic (or a chained read-back) is done: a fence may have
 * waited for it. One that completes while a fence waits is from before
 * it: those after it are kept, not posted. */
void uct_syncmem_ep_amo_done(uct_syncmem_ep_t *ep)
{
    --ep->amo_inflight;
    if (ep->fence_wait && (ep->fence_amo > 0) && (--ep->fence_amo == 0)) {
        uct_syncmem_ep_fence_check(ep);
    }
}

/* Every request up to sn has completed: give back the slots, retire ops. */
void uct_syncmem_ep_tx_completed(uct_syncmem_ep_t *ep, uint16_t sn,
                                 ucs_status_t status)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t count = sn - ep->tx.acked_sn;
    uct_syncmem_op_t *op;

    ep->tx.available    += count;
    iface->cq_available += count;
    ep->tx.acked_sn      = sn;
    if (sn == ep->tx.sn) {
        ep->tx.sig_sn = sn + 1; /* idle: the next request is signalled */
    }
    if (ucs_unlikely(ep->reconnect.ran_valid) &&
        UCS_CIRCULAR_COMPARE16(sn, >=, (uint16_t)(ep->reconnect.ran_end - 1))) {
        ep->reconnect.ran_valid = 0; /* all that the peer said ran are done */
    }

    ucs_queue_for_each_extract(op, &ep->tx.outstanding, queue,
                               UCS_CIRCULAR_COMPARE16(op->sn, <=, sn)) {
        op->handler(op, ucs_likely(ep->lost.count == 0) ? status :
                        uct_syncmem_ep_op_status(ep, op, status));
    }

    if (ucs_unlikely(ep->fence_wait)) {
        uct_syncmem_ep_fence_check(ep);
    }
    if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    } else if ((ep->tx.acked_sn == ep->tx.sn) &&
               (iface->rings > iface->config.idle_rings) &&
               (ep->state == UCT_SYNCMEM_EP_CONNECTED)) {
        /* many endpoints hold a ring: an idle one costs none (its next
         * operation takes one again) */
        uct_syncmem_replay_park(ep);
    }
}

/*
 * Move the QP to error: the HCA then completes what is still in the send
 * queue with a flush status. Requests that had completed unsignalled are no
 * longer there and would never be reported, so a signalled empty write
 * follows (a request posted in the error state is flushed too, after all
 * the others; the kernel's ib_drain_sq does the same). The QP has a slot
 * kept for it; if the post fails all the same, the queue is full of
 * requests that will each be flushed, the last one included.
 */
void uct_syncmem_ep_qp_to_error(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_qp_attr attr    = { .qp_state = IBV_QPS_ERR };
    struct ibv_send_wr wr      = {}, *bad_wr;
    int ret;

    ret = ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to ERR failed: %s", ep->qp->qp_num,
                  strerror(ret));
        return;
    }
    /* not rung yet: flushed with the rest (a fence no longer matters);
     * if the device refuses them, the empty write below still completes
     * them (a flush status, in order) */
    uct_syncmem_ep_fence_hold(ep, 0);
    (void)uct_syncmem_replay_ring(ep);

    if (uct_syncmem_ep_tx_outstanding(ep) == 0) {
        return;
    }
    wr.wr_id      = (uint16_t)(ep->tx.sn + 1);
    wr.opcode     = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(ep->qp, &wr, &bad_wr) == 0) {
        ++ep->tx.sn;
        --ep->tx.available;
        --iface->cq_available;
    }
}

static ucs_arbiter_cb_result_t
uct_syncmem_ep_pending_take_cb(ucs_arbiter_t *arbiter,
                               ucs_arbiter_group_t *group,
                               ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);

    UCS_STATIC_ASSERT(sizeof(ucs_queue_elem_t) <= UCT_PENDING_REQ_PRIV_LEN);
    ucs_queue_push((ucs_queue_head_t*)arg, (ucs_queue_elem_t*)req->priv);
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

/*
 * Run what waits in the pending queue of a failed endpoint now, before its
 * error handler: each request calls its operation, gets the endpoint's
 * error and completes with it. Left to the handler, UCP 1.13 purges them
 * instead, and its purge never completes a fetching atomic (its completion
 * count starts at 1 and nothing takes it to 0): the application hangs.
 * Not while a pending queue is dispatched (the arbiter walks it).
 */
static void uct_syncmem_ep_fail_pending(uct_syncmem_iface_t *iface,
                                        uct_syncmem_ep_t *ep)
{
    ucs_queue_head_t queue;
    uct_pending_req_t *req;
    ucs_status_t status;

    if (iface->dispatching != NULL) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
        return;
    }

    ucs_queue_head_init(&queue);
    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group,
                            uct_syncmem_ep_pending_take_cb, &queue);
    while (!ucs_queue_is_empty(&queue)) {
        req = ucs_container_of((void*)ucs_queue_pull_non_empty(&queue),
                               uct_pending_req_t, priv);
        iface->dispatching = ep;
        status             = req->func(req);
        iface->dispatching = NULL;
        if (status != UCS_OK) {
            /* not done with (it cannot post): the purge will see it */
            uct_pending_req_arb_group_push(&ep->arb_group, req);
        }
    }
}

/* The last of FAIL: the pending queue, then the user's error handler
 * (which may destroy the endpoint). */
void uct_syncmem_ep_notify_failed(uct_syncmem_ep_t *ep, ucs_status_t status)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
        uct_syncmem_ep_fail_pending(iface, ep);
    }
    uct_iface_handle_ep_err(&iface->super.super, &ep->super.super, status);
}

/* CONNECT and FINISH_*: the QP is ready, the pending queue may run. */
void uct_syncmem_ep_connected(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    ep->replay.mtu_shift = 7 + uct_syncmem_qp_path_mtu(iface, &ep->cm.peer);
    ucs_debug("syncmem: ep %p connected: QP 0x%x to iface 0x%" PRIx64, ep,
              ep->qp->qp_num, ep->cm.peer_iface_id);
    if (ucs_unlikely(ep->fence_wait)) {
        /* posted again, the last is signalled: no empty write needed */
        ep->fence_nop = uct_syncmem_ep_last_unsignaled(iface, ep);
        uct_syncmem_ep_fence_check(ep); /* its empty write, if due */
    }
    if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    }
}

/* A round trip longer than the timeout now counts only when progress was
 * called this many times between the request's post and the call that
 * found its completion: the caller waited for it, so it was found soon
 * after it came. A caller that computed between posting and progress would
 * find it late, and a timeout grown from that would only make a dead link
 * slower to find. A shorter one always counts: found at once, it may have
 * been there at once (Soft-RoCE may complete a request within the post's
 * own system call), and it cannot lengthen the timeout. */
#define UCT_SYNCMEM_RTT_MIN_POLLS 4

static int uct_syncmem_ep_rtt_counts(const uct_syncmem_iface_t *iface,
                                     const uct_syncmem_ep_t *ep, double rtt)
{
    return ((uint32_t)(iface->rto.polls - ep->rtt.polls) >=
            UCT_SYNCMEM_RTT_MIN_POLLS) ||
           (rtt <= uct_syncmem_rto_value(&iface->rto.est));
}

/*
 * RC_TIMEOUT=auto, one estimate per iface (per port: syncmem_rto.h), fed
 * by its endpoints' samples. An endpoint's QP gets the estimate when it is
 * connected (new, reconnected or resumed), doubled for each time its
 * requests failed (retries exceeded, a stall) since they last got through;
 * and, where the device allows it, again in RTS once the exponent it should
 * have changed (checked at its next sample, so an idle endpoint costs
 * nothing). Soft-RoCE on Linux 6.1 refuses that (the core's
 * ib_modify_qp_is_ok table has no IB_QP_TIMEOUT for RTS to RTS, and rxe
 * checks every modify against it); on 6.12 rxe checks it only when the
 * state is in the mask, and takes the timeout alone. The first refusal
 * stops the tries on that iface.
 */
static void uct_syncmem_ep_rtt_apply(uct_syncmem_iface_t *iface,
                                     uct_syncmem_ep_t *ep)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    uint8_t exp          = uct_syncmem_ep_rc_timeout(iface, ep);
    int ret;

    if ((exp == ep->rtt.exp) || !iface->rto.rts_modify ||
        (ep->state != UCT_SYNCMEM_EP_CONNECTED)) {
        return;
    }
    ret = uct_syncmem_qp_set_timeout(ep->qp, exp);
    if (ret == 0) {
        ep->rtt.exp = exp;
        return;
    }
    iface->rto.rts_modify = 0;
    ucs_diag("syncmem: %s:%u: the device does not change the RC timeout of"
             " a connected QP (QP 0x%x, 4.096us*2^%u: %s): UCX_SYNCMEM_RC_TIMEOUT"
             "=auto applies to new and reconnected QPs only", md->name,
             iface->port.num, ep->qp->qp_num, exp, strerror(ret));
}

static void uct_syncmem_iface_rto_log(uct_syncmem_iface_t *iface,
                                      uint8_t old, const char *what)
{
    uct_syncmem_md_t *md         = ucs_derived_of(iface->super.md,
                                                  uct_syncmem_md_t);
    const uct_syncmem_rto_t *est = &iface->rto.est;

    ucs_diag("syncmem: %s:%u: RC timeout (auto) 4.096us*2^%u -> 2^%u"
             " (%.1f -> %.1f ms): round trip %.3f ms smoothed, %.3f ms"
             " variance, last %.3f ms (%s; %" PRIu64 " samples); SRTT + %d"
             " RTTVAR = %.3f ms, bounds %.1f ms..%.0f ms; a dead link is"
             " found after %.2f s%s", md->name, iface->port.num, old,
             est->exp, uct_syncmem_rto_exp_sec(old) * 1e3,
             uct_syncmem_rto_exp_sec(est->exp) * 1e3, est->srtt * 1e3,
             est->rttvar * 1e3, est->last * 1e3, what, est->samples,
             UCT_SYNCMEM_RTO_K, uct_syncmem_rto_value(est) * 1e3,
             uct_syncmem_rto_exp_sec(est->exp_min) * 1e3,
             uct_syncmem_rto_exp_sec(est->exp_max) * 1e3,
             uct_syncmem_rto_exp_sec(est->exp) *
             (iface->config.rc_retry_count + 1),
             iface->rto.rts_modify ? "" : " (new and reconnected QPs)");
}

/* RC_TIMEOUT=auto: signalled request next_sn, just posted (or kept for
 * the doorbell), was the UCT_SYNCMEM_RTT_EVERY-th: time it (its completion
 * ends the sample, uct_syncmem_ep_rtt_done) unless one is timed already or
 * the timeout is fixed; count again. */
ucs_status_t uct_syncmem_ep_rtt_post(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    ep->rtt.skip = UCT_SYNCMEM_RTT_EVERY;
    if (ep->rtt.state == UCT_SYNCMEM_RTT_IDLE) {
        ep->rtt.posted = ucs_get_time();
        ep->rtt.polls  = iface->rto.polls;
        ep->rtt.sn     = ep->rtt.next_sn;
        ep->rtt.state  = UCT_SYNCMEM_RTT_PENDING;
    }
    return UCS_OK;
}

void uct_syncmem_ep_rtt_done(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    double rtt  = ucs_time_to_sec(ucs_get_time() - ep->rtt.posted);
    uint8_t old = iface->rto.est.exp;

    ep->rtt.state = UCT_SYNCMEM_RTT_IDLE;
    ep->rtt.skip  = UCT_SYNCMEM_RTT_EVERY;
    if (ucs_unlikely(ep->rtt.backoff != 0)) {
        ucs_diag("syncmem: ep %p to iface 0x%" PRIx64 ": its requests get"
                 " through again: RC timeout back to the estimate"
                 " (4.096us*2^%u, not 2^%u)", ep, ep->cm.peer_iface_id,
                 old, ep->rtt.exp);
        ep->rtt.backoff = 0;
    }
    if (uct_syncmem_ep_rtt_counts(iface, ep, rtt) &&
        uct_syncmem_rto_sample(&iface->rto.est, rtt)) {
        uct_syncmem_iface_rto_log(iface, old, "a request");
    }
    uct_syncmem_ep_rtt_apply(iface, ep);
}

/*
 * The handshake's round trip of an iface's first endpoint, from its first
 * REQ to the REP that connects it (progress takes the REP): the first
 * sample, so that the first QPs have a measured timeout before any request
 * (on a kernel that keeps a connected QP's timeout, for the QP's life).
 * It includes the peer creating and connecting a QP, work that no
 * acknowledgement waits for (3 to 48 ms on the emulated guest, where a
 * request's round trip is 0.03): an upper bound of the round trip. So it
 * counts only where it shortens the timeout (the first sample's is 3
 * times it: below the initial 67 ms), never to lengthen it: a dead link
 * is found at least as fast as with the fixed 67 ms; only requests show
 * that the round trip is longer. Not when the REQ was sent again or
 * answered BUSY (Karn's rule: which one did the REP answer?).
 */
void uct_syncmem_ep_rtt_handshake(uct_syncmem_iface_t *iface,
                                  uct_syncmem_ep_t *ep)
{
    uint8_t old = iface->rto.est.exp;
    double rtt;

    if ((ep->rtt.state == UCT_SYNCMEM_RTT_OFF) ||
        (iface->rto.est.samples != 0) || (ep->cm.gen != 0) ||
        (ep->cm.retries_left != iface->config.cm_retries) ||
        (ep->cm.busy_left != iface->config.cm_retries *
                             UCT_SYNCMEM_CM_BUSY_FACTOR)) {
        return;
    }
    rtt = ucs_time_to_sec(ucs_get_time() -
                          (ep->cm.next_retry - iface->config.cm_timeout));
    if ((UCT_SYNCMEM_RTO_K / 2 + 1) * rtt >
        uct_syncmem_rto_exp_sec(UCT_SYNCMEM_RTO_EXP_INIT)) {
        return;
    }
    if (uct_syncmem_rto_sample(&iface->rto.est, rtt)) {
        uct_syncmem_iface_rto_log(iface, old, "a handshake");
    }
}

/* Doubles the RC timeout of ep's next QP (RFC 6298 5.5): its requests
 * failed for want of an acknowledgement. */
void uct_syncmem_ep_rtt_backoff(uct_syncmem_iface_t *iface,
                                uct_syncmem_ep_t *ep, const char *why)
{
    if (ep->rtt.state == UCT_SYNCMEM_RTT_OFF) {
        return; /* a fixed RC_TIMEOUT */
    }
    ep->rtt.state = UCT_SYNCMEM_RTT_IDLE;
    ep->rtt.skip  = 1; /* the next: has it got through? */
    if (ep->rtt.backoff < uct_syncmem_rto_backoff_max(&iface->rto.est)) {
        ++ep->rtt.backoff;
    }
    ucs_diag("syncmem: ep %p to iface 0x%" PRIx64 ": %s: RC timeout of its"
             " next QP 4.096us*2^%u (%.1f ms: the estimate doubled %u"
             " times)", ep, ep->cm.peer_iface_id, why,
             uct_syncmem_ep_rc_timeout(iface, ep),
             uct_syncmem_rto_exp_sec(uct_syncmem_ep_rc_timeout(iface, ep)) *
             1e3, ep->rtt.backoff);
}

void uct_syncmem_ep_rtt_failed(uct_syncmem_iface_t *iface,
                               uct_syncmem_ep_t *ep, const struct ibv_wc *wc)
{
    if (wc->status == IBV_WC_RETRY_EXC_ERR) {
        uct_syncmem_ep_rtt_backoff(iface, ep, "RC retries exceeded");
    } else if (ep->rtt.state == UCT_SYNCMEM_RTT_PENDING) {
        /* the request timed may be posted again: its time is not one */
        ep->rtt.state = UCT_SYNCMEM_RTT_IDLE;
        ep->rtt.skip  = 1;
    }
}
