/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - reconnect: an RC QP that the link broke (UCX_SYNCMEM_RECONNECT)
 * is replaced, or resumed, instead of failing the endpoint.
 *
 *  1. The first failed completion names request k. RC completes in order,
 *     so every request before k has completed; k and everything after it
 *     that reached the old QP may or may not have reached the peer
 *     ("unknown outcome").
 *  2. A spare QP is created and the handshake asks the peer again (a REQ of
 *     the next generation; syncmem_cm.c), every CM_TIMEOUT until
 *     RECONNECT_TIMEOUT. The old QP stays until its flushed requests are
 *     all back from the CQ, so that none of them is taken for the new QP's.
 *  3. Resume (UCX_SYNCMEM_RECONNECT_RESUME): if the REP says the peer's QP
 *     is still up, the old QP is reset and reconnected to it at the PSN of
 *     request k (uct_syncmem_qp_resume), and the spare goes. The peer's RC
 *     responder then answers what it already ran as duplicates: a write or
 *     send acknowledged, an atomic's reply from its resources. Every
 *     operation runs exactly once and none fails. Not asked for
 *       - after a stall (the device stopped driving the QP: syncmem_watchdog.c);
 *       - when the same request fails again after a resume;
 *       - with a get of unknown outcome, or an atomic of unknown outcome
 *         after a put or send: Soft-RoCE completes it with no data on a
 *         resumed QP (uct_syncmem_replay_resume_risk says how).
 *     Otherwise the spare is connected to a new passive QP of the peer.
 *  4. Requests k.. are posted again in order, with their fence flags, from
 *     the replay ring (syncmem_replay.c): puts and gets again (idempotent),
 *     active messages again (the receiver drops one it delivered:
 *     syncmem_am.c), atomics on a new QP never: an empty write holds the
 *     place of one of unknown outcome, which fails UCS_ERR_CONNECTION_RESET.
 *     Completions still come in request order: ordering, fences and flush
 *     mean what they meant before.
 *  5. Past the deadline everything outstanding fails with
 *     UCS_ERR_ENDPOINT_TIMEOUT and the error handler is called, once.
 *
 * The state machine (uct_syncmem_rc_next, pure: test/uct_syncmem/
 * test_reconnect.cc drives every transition). ep->rc.state counts while the
 * endpoint is RECONNECTING; IDLE otherwise.
 *
 *   state \ event  ERROR    STALL     DRAINED     REP         TIMER  CONNECT_FAILED  PORT_DOWN  PORT_UP
 *   IDLE           START    QP_ERROR  -           -           -      -               QP_ERROR   -
 *                  ->BOTH
 *   WAIT_BOTH      -        -         ->WAIT_REP  ->WAIT_DRAIN  (a)  -               -          SEND_REQ
 *   WAIT_REP       -        -         -           FINISH      (a)    RESTART         -          SEND_REQ
 *                                                 ->IDLE             ->WAIT_REP
 *   WAIT_DRAIN     -        -         FINISH      -           (b)    RESTART         -          -
 *                                     ->IDLE                         ->WAIT_REP
 *
 *   (a) before the deadline: SEND_REQ if CM_TIMEOUT passed since the last.
 *       After it: SEND_REQ once more if none went out since deadline -
 *       CM_TIMEOUT (the tries so far may all have fallen in the outage, and
 *       the user's progress may have paused since: Open MPI's pml worker
 *       while its osc worker streams); FAIL once that one's CM_TIMEOUT is
 *       up too.
 *   (b) FAIL after the deadline: the old QP never drained.
 *
 *   ERROR     the first failed completion of the endpoint's QP, a link error
 *             (retry exceeded, flushed with no error before it, Soft-RoCE's
 *             local QP operation error when it cannot route), reconnect on
 *   STALL     the watchdog took the QP for wedged: move it to error (an
 *             ERROR follows from its flushes) and do not resume it
 *   DRAINED   the old QP's last request came back flushed
 *   REP       the peer answered this generation's REQ (the async handler
 *             notes it: syncmem_cm_msg.c)
 *   TIMER     progress saw the time
 *   CONNECT_FAILED  connecting or resuming after the REP failed (the link
 *             went down again under the handshake): a new generation, on a
 *             new QP, until the deadline
 *   PORT_DOWN the device said the port went down, and requests are
 *             outstanding (syncmem_port.c): to error now, as for STALL but
 *             resumable
 *   PORT_UP   the device said the port is back: ask now
 *   FINISH    connect the spare (or resume the old QP), post again, CONNECTED
 *   FAIL      fail the endpoint (outside the async lock: it calls the user)
 */
#include "syncmem.h"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <string.h>


uct_syncmem_rc_action_t uct_syncmem_rc_next(uint8_t *state,
                                            uct_syncmem_rc_event_t event,
                                            const uct_syncmem_rc_timer_t *t)
{
    switch (*state) {
    case UCT_SYNCMEM_RC_IDLE:
        if (event == UCT_SYNCMEM_RC_EV_ERROR) {
            *state = UCT_SYNCMEM_RC_WAIT_BOTH;
            return UCT_SYNCMEM_RC_ACT_START;
        }
        return ((event == UCT_SYNCMEM_RC_EV_STALL) ||
                (event == UCT_SYNCMEM_RC_EV_PORT_DOWN)) ?
               UCT_SYNCMEM_RC_ACT_QP_ERROR : UCT_SYNCMEM_RC_ACT_NONE;
    case UCT_SYNCMEM_RC_WAIT_BOTH:
    case UCT_SYNCMEM_RC_WAIT_REP:
        if ((event == UCT_SYNCMEM_RC_EV_DRAINED) &&
            (*state == UCT_SYNCMEM_RC_WAIT_BOTH)) {
            *state = UCT_SYNCMEM_RC_WAIT_REP;
        } else if (event == UCT_SYNCMEM_RC_EV_REP) {
            if (*state == UCT_SYNCMEM_RC_WAIT_BOTH) {
                *state = UCT_SYNCMEM_RC_WAIT_DRAIN;
                return UCT_SYNCMEM_RC_ACT_NONE;
            }
            *state = UCT_SYNCMEM_RC_IDLE;
            return UCT_SYNCMEM_RC_ACT_FINISH;
        } else if (event == UCT_SYNCMEM_RC_EV_TIMER) {
            if (!t->past_deadline) {
                return t->retry_due ? UCT_SYNCMEM_RC_ACT_SEND_REQ :
                                      UCT_SYNCMEM_RC_ACT_NONE;
            }
            if (!t->last_try_sent) {
                return UCT_SYNCMEM_RC_ACT_SEND_REQ;
            }
            return t->retry_due ? UCT_SYNCMEM_RC_ACT_FAIL :
                                  UCT_SYNCMEM_RC_ACT_NONE;
        } else if ((event == UCT_SYNCMEM_RC_EV_CONNECT_FAILED) &&
                   (*state == UCT_SYNCMEM_RC_WAIT_REP)) {
            return UCT_SYNCMEM_RC_ACT_RESTART;
        } else if (event == UCT_SYNCMEM_RC_EV_PORT_UP) {
            return UCT_SYNCMEM_RC_ACT_SEND_REQ;
        }
        return UCT_SYNCMEM_RC_ACT_NONE;
    case UCT_SYNCMEM_RC_WAIT_DRAIN:
        if (event == UCT_SYNCMEM_RC_EV_DRAINED) {
            *state = UCT_SYNCMEM_RC_IDLE;
            return UCT_SYNCMEM_RC_ACT_FINISH;
        } else if ((event == UCT_SYNCMEM_RC_EV_TIMER) && t->past_deadline) {
            return UCT_SYNCMEM_RC_ACT_FAIL;
        } else if (event == UCT_SYNCMEM_RC_EV_CONNECT_FAILED) {
            *state = UCT_SYNCMEM_RC_WAIT_REP;
            return UCT_SYNCMEM_RC_ACT_RESTART;
        }
        return UCT_SYNCMEM_RC_ACT_NONE;
    default:
        return UCT_SYNCMEM_RC_ACT_NONE;
    }
}

static int uct_syncmem_wc_is_link_error(enum ibv_wc_status status)
{
    /* retry exceeded: no acknowledgement came back (link, switch, peer
     * host); flushed with no error before it: the QP was moved to the
     * error state by something other than us (port event, FAULT_QP_ERROR,
     * the stall check); local QP operation error: Soft-RoCE's answer when
     * it cannot route the packet (the netdev went down) */
    return (status == IBV_WC_RETRY_EXC_ERR) ||
           (status == IBV_WC_WR_FLUSH_ERR) ||
           (status == IBV_WC_LOC_QP_OP_ERR);
}

/* START: a spare QP, the requests of unknown outcome, whether to ask to
 * resume, and the REQ. */
static ucs_status_t uct_syncmem_rc_start(uct_syncmem_ep_t *ep,
                                         const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t sn                = wc->wr_id;
    const char *why            = NULL;
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
        return status;
    }
    it = kh_put(uct_syncmem_qp_eps, &iface->qp_eps, qp->qp_num, &ret);
    if (ret < 0) {
        ibv_destroy_qp(qp);
        return UCS_ERR_NO_MEMORY;
    }
    kh_value(&iface->qp_eps, it) = ep;

    /* requests not rung yet are posted on the new QP with the others */
    ep->rc.fail_sn     = sn;
    ep->rc.old_last_sn = uct_syncmem_ep_rung_sn(ep);
    ep->tx.rung_sn     = ep->tx.sn;
    ucs_list_del(&ep->db_list);
    ucs_list_head_init(&ep->db_list);
    ep->rc.started     = ucs_get_time();
    ep->rc.deadline    = ep->rc.started + iface->config.reconnect_timeout;

    if (!iface->config.reconnect_resume) {
        why = "UCX_SYNCMEM_RECONNECT_RESUME=n";
    } else if (ep->rc.stalls != 0) {
        why = "the QP had stalled";
    } else if (ep->rc.resumed_once && (ep->rc.resumed_sn == sn)) {
        why = "it failed there after a resume";
    } else {
        why = uct_syncmem_replay_resume_risk(ep, sn, ep->rc.old_last_sn);
    }
    ep->rc.resume = (why == NULL);
    uct_syncmem_qp_query(ep->qp, &ep->rc.old_rq_psn);

    ucs_diag("syncmem: ep %p: QP 0x%x to iface 0x%" PRIx64 " failed at"
             " request %u (%s); reconnecting, %u requests to post again,"
             " %s%s (UCX_SYNCMEM_RECONNECT_TIMEOUT=%.1fs)", ep, wc->qp_num,
             ep->cm.peer_iface_id, sn, ibv_wc_status_str(wc->status),
             (uint16_t)(ep->tx.sn - sn + 1),
             ep->rc.resume ? "asking to resume" : "on a new QP: ",
             ep->rc.resume ? "" : why,
             ucs_time_to_sec(iface->config.reconnect_timeout));

    /* the async handler (REP) looks at these */
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ep->rc.old_qp = ep->qp;
    ep->qp        = qp;
    uct_syncmem_ep_set_state(ep, UCT_SYNCMEM_EP_RECONNECTING);
    uct_syncmem_cm_reconnect(ep);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return UCS_OK;
}

/* The peer kept its QP: bring the old one back (its flushes are all in) to
 * where it stopped, and let the spare go instead. The count requests
 * posted again (from fail_sn) keep their PSNs (uct_syncmem_qp_resume). */
static ucs_status_t uct_syncmem_rc_resume(uct_syncmem_ep_t *ep,
                                         uint16_t count)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint32_t sq_psn            = (ep->rc.next_psn -
                                  uct_syncmem_replay_npkts(ep, ep->rc.fail_sn,
                                                           count)) &
                                 UCT_SYNCMEM_PSN_MASK;
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
    ep->rc.resumed_sn   = ep->rc.fail_sn;
    ep->rc.resumed_once = 1;
    return UCS_OK;
}

/* FINISH: the REP is in and the old QP drained: connect (or resume), post
 * again what had not completed, and let the endpoint work. */
static ucs_status_t uct_syncmem_rc_finish(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    int resumed                = ep->cm.resumed;
    unsigned lost              = ep->rc.lost;
    uint16_t count             = ep->tx.sn - ep->rc.fail_sn + 1; /* again */
    ucs_status_t status;

    if (resumed) {
        status = uct_syncmem_rc_resume(ep, count);
    } else {
        status = uct_syncmem_qp_connect(iface, ep->qp, &ep->cm.peer,
                                        ep->cm.peer_rc_qpn);
        /* a new QP starts at PSN 0 */
        ep->rc.next_psn = uct_syncmem_replay_npkts(ep, ep->rc.fail_sn, count);
    }
    if (status != UCS_OK) {
        return status;
    }
    uct_syncmem_replay_destroy_old_qp(ep);

    status = uct_syncmem_replay_post(ep, ep->rc.fail_sn, count,
                                     resumed ? UCT_SYNCMEM_POST_RESUMED :
                                               UCT_SYNCMEM_POST_AGAIN);
    if (status != UCS_OK) {
        return status;
    }
    ep->tx.rung_sn = ep->tx.sn;

    ucs_diag("syncmem: ep %p: reconnected to iface 0x%" PRIx64 " after %.0f"
             " ms (%s), %u requests replayed, %u atomics of unknown outcome"
             " failed", ep, ep->cm.peer_iface_id,
             ucs_time_to_msec(ucs_get_time() - ep->rc.started),
             resumed ? "the same QPs, resumed" : "a new QP",
             count, ep->rc.lost - lost);
    if (ep->rc.lost > lost) {
        ucs_warn("syncmem: ep %p: %u atomic operations may or may not have"
                 " run when the link to iface 0x%" PRIx64 " failed; they"
                 " report UCS_ERR_CONNECTION_RESET (not run again)", ep,
                 ep->rc.lost - lost, ep->cm.peer_iface_id);
    }
    uct_syncmem_ep_connected(ep);
    return UCS_OK;
}

/* RESTART: connecting after the REP failed; the spare goes back to INIT
 * and a new generation asks for a new passive QP (the old QP, drained,
 * may be half reset: never resumed now). */
static ucs_status_t uct_syncmem_rc_restart(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_qp_attr attr    = { .qp_state = IBV_QPS_RESET };
    ucs_status_t status;

    if (ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE)) {
        return UCS_ERR_IO_ERROR;
    }
    status = uct_syncmem_qp_reinit(iface, ep->qp);
    if (status != UCS_OK) {
        return status;
    }
    ucs_diag("syncmem: ep %p: connecting to iface 0x%" PRIx64 " after its"
             " answer failed; asking again for a new QP", ep,
             ep->cm.peer_iface_id);
    ep->rc.resume = 0;
    uct_syncmem_cm_reconnect(ep);
    return UCS_OK;
}

/* The timer's facts, now. */
static void uct_syncmem_rc_timer(const uct_syncmem_ep_t *ep, ucs_time_t now,
                                 uct_syncmem_rc_timer_t *t)
{
    t->retry_due     = (now >= ep->cm.next_retry);
    t->past_deadline = (now >= ep->rc.deadline);
    /* a REQ at or after deadline - CM_TIMEOUT armed its retry past it */
    t->last_try_sent = (ep->cm.next_retry >= ep->rc.deadline);
}

/*
 * The event entry: what the state machine says to do, done. Takes the
 * async lock (recursive) for what the async handler also reads. Not UCS_OK:
 * the caller must fail the endpoint with it, outside the async lock.
 */
ucs_status_t uct_syncmem_ep_rc_event(uct_syncmem_ep_t *ep,
                                     uct_syncmem_rc_event_t event,
                                     const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    ucs_async_context_t *async = iface->super.worker->async;
    uint8_t state              = ep->rc.state;
    uct_syncmem_rc_timer_t timer;
    struct ibv_qp_attr attr;
    ucs_status_t status        = UCS_OK;
    ucs_time_t now             = ucs_get_time();

    uct_syncmem_rc_timer(ep, now, &timer);
    UCS_ASYNC_BLOCK(async);
    switch (uct_syncmem_rc_next(&state, event, &timer)) {
    case UCT_SYNCMEM_RC_ACT_NONE:
        break;
    case UCT_SYNCMEM_RC_ACT_START:
        status = uct_syncmem_rc_start(ep, wc);
        if (status != UCS_OK) {
            ucs_error("syncmem: ep %p: cannot reconnect (%s)", ep,
                      ucs_status_string(status));
            uct_syncmem_ep_tx_completed(ep, (uint16_t)wc->wr_id, status);
            state = UCT_SYNCMEM_RC_IDLE;
        }
        break;
    case UCT_SYNCMEM_RC_ACT_QP_ERROR:
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_ERR;
        if (ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE)) {
            /* a stall: tried again after the next stall time; OP_TIMEOUT
             * holds */
            ucs_error("syncmem: ep %p: cannot move QP 0x%x to the error"
                      " state: %m", ep, ep->qp->qp_num);
        }
        break;
    case UCT_SYNCMEM_RC_ACT_SEND_REQ:
        uct_syncmem_cm_send_req(ep);
        break;
    case UCT_SYNCMEM_RC_ACT_FINISH:
        status = uct_syncmem_rc_finish(ep);
        if (status == UCS_OK) {
            break;
        }
        /* the state before FINISH takes the failure */
        state  = ep->rc.state;
        status = UCS_OK;
        if (uct_syncmem_rc_next(&state, UCT_SYNCMEM_RC_EV_CONNECT_FAILED,
                                &timer) == UCT_SYNCMEM_RC_ACT_RESTART) {
            status = uct_syncmem_rc_restart(ep);
        }
        break;
    case UCT_SYNCMEM_RC_ACT_RESTART:
        status = uct_syncmem_rc_restart(ep);
        break;
    case UCT_SYNCMEM_RC_ACT_FAIL:
        ucs_log(iface->super.config.failure_level,
                "syncmem: ep %p: reconnect to iface 0x%" PRIx64 " gave up"
                " after %.1f s (%s); is the peer alive and its link up?"
                " UCX_SYNCMEM_RECONNECT_TIMEOUT sets how long to try", ep,
                ep->cm.peer_iface_id, ucs_time_to_sec(now - ep->rc.started),
                (state == UCT_SYNCMEM_RC_WAIT_DRAIN) ?
                "the old QP never drained" :
                "no answer to the connection request");
        status = UCS_ERR_ENDPOINT_TIMEOUT;
        state  = UCT_SYNCMEM_RC_IDLE;
        break;
    }
    ep->rc.state = state;
    UCS_ASYNC_UNBLOCK(async);
    return status;
}

/* A failed send completion of ep (or one of a QP being replaced). */
void uct_syncmem_ep_tx_error(uct_syncmem_ep_t *ep, const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t sn                = wc->wr_id;
    ucs_status_t status;

    if ((ep->rc.old_qp != NULL) && (wc->qp_num == ep->rc.old_qp->qp_num)) {
        /* flushed: posted again once this QP is empty */
        if ((sn == ep->rc.old_last_sn) &&
            ((status = uct_syncmem_ep_rc_event(ep, UCT_SYNCMEM_RC_EV_DRAINED,
                                               wc)) != UCS_OK)) {
            uct_syncmem_ep_set_failed(ep, status);
        }
        return;
    }

    if (UCS_CIRCULAR_COMPARE16(sn, <=, ep->tx.acked_sn)) {
        return; /* purged already */
    }

    if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) && iface->config.reconnect &&
        uct_syncmem_wc_is_link_error(wc->status)) {
        status = uct_syncmem_ep_rc_event(ep, UCT_SYNCMEM_RC_EV_ERROR, wc);
        if (status != UCS_OK) {
            uct_syncmem_ep_set_failed(ep, status);
        } else if ((ep->state == UCT_SYNCMEM_EP_RECONNECTING) &&
                   (sn == ep->rc.old_last_sn) &&
                   ((status = uct_syncmem_ep_rc_event(
                             ep, UCT_SYNCMEM_RC_EV_DRAINED, wc)) != UCS_OK)) {
            uct_syncmem_ep_set_failed(ep, status); /* its last request */
        }
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

/* Progress of the reconnecting endpoints, async lock held: the REP the
 * async handler noted, and the timer. Returns one to fail, if any. */
static uct_syncmem_ep_t *uct_syncmem_rc_check(uct_syncmem_iface_t *iface,
                                              ucs_status_t *status_p,
                                              unsigned *count_p)
{
    uct_syncmem_ep_t *ep;

    ucs_list_for_each(ep, &iface->eps, list) {
        if (ep->state != UCT_SYNCMEM_EP_RECONNECTING) {
            continue;
        }
        *status_p = UCS_OK;
        if (ep->cm.replied) {
            *status_p = uct_syncmem_ep_rc_event(ep, UCT_SYNCMEM_RC_EV_REP,
                                                NULL);
        }
        if ((*status_p == UCS_OK) &&
            (ep->state == UCT_SYNCMEM_EP_RECONNECTING)) {
            *status_p = uct_syncmem_ep_rc_event(ep, UCT_SYNCMEM_RC_EV_TIMER,
                                                NULL);
        }
        if (*status_p != UCS_OK) {
            return ep;
        }
        *count_p += (ep->state == UCT_SYNCMEM_EP_CONNECTED);
    }
    return NULL;
}

unsigned uct_syncmem_iface_reconnect_progress(uct_syncmem_iface_t *iface)
{
    return uct_syncmem_iface_eps_progress(iface, uct_syncmem_rc_check);
}

unsigned uct_syncmem_ep_reconnects(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep, uct_syncmem_ep_t)->cm.gen;
}
