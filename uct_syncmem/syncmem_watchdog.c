/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the watchdog: operation deadlines (UCX_SYNCMEM_OP_TIMEOUT) and
 * stalled QPs (UCX_SYNCMEM_RC_STALL_TIMEOUT). An async timer, every quarter
 * of the shorter of the two, asks progress to look at the endpoints, so
 * that progress itself pays one flag test. A stall backs off the RC timeout
 * of the endpoint's next QP (syncmem_ep_tx.c). And the testing knob that
 * breaks QPs on purpose (UCX_SYNCMEM_FAULT_QP_ERROR).
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"
#include "syncmem_hooks.h"
#include "syncmem_tx.inl"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <string.h>

/* QPs taken for wedged at one check, at most: a wedge is one QP's; many
 * at once are a device that is only slow (Soft-RoCE driving a thousand
 * QPs), and replacing them all makes it slower still. The others wait for
 * the next check. */
#define UCT_SYNCMEM_STALLS_PER_CHECK 16

/* 24-bit PSN a is later than b */
static int uct_syncmem_psn_after(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) > 0;
}

/*
 * UCX_SYNCMEM_RC_STALL_TIMEOUT: a connected endpoint whose oldest request
 * has not completed for that long. A device that has given up on a QP
 * without an error (Soft-RoCE after a link flap: both QPs in RTS, the
 * requester's PSN ahead of the responder's, no retransmission) would keep
 * it that way forever; its send PSN stops too. A long transfer moves it,
 * so it counts as progress: it is read half-way through the stall time and
 * again at the end. The QP is moved to the error state, and the endpoint
 * reconnects from the flushed completions like after any QP failure.
 * Each stall of the same request doubles the time allowed the next one,
 * so that an operation that only needed longer (a huge get, a receiver
 * that posts no buffers: RNR) still gets to complete. With 'auto' the time
 * is longer still while the port has shown no link trouble: in an
 * oversubscribed MPI job on Soft-RoCE the kernel acknowledged requests
 * that had all run at the peer seconds late, and each QP replaced for it
 * failed the atomics that had run.
 */
static void uct_syncmem_ep_check_stall(uct_syncmem_iface_t *iface,
                                       uct_syncmem_ep_t *ep, ucs_time_t now,
                                       unsigned *stalls_left)
{
    ucs_time_t window  = ucs_time_from_sec(UCT_SYNCMEM_TROUBLE_WINDOW);
    ucs_time_t timeout = uct_syncmem_ep_stall_timeout(iface, ep);
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    ucs_time_t allowed;
    int again;

    if ((ep->state != UCT_SYNCMEM_EP_CONNECTED) ||
        (timeout == UCS_TIME_INFINITY)) {
        ep->wd.stall_time = 0;
        return;
    }
    if (ep->wd.stall_time == 0) {
        ep->wd.stall_time      = now;
        ep->wd.stall_psn_valid = 0;
        return;
    }

    allowed = uct_syncmem_ep_fsm_stall_time(
            timeout, iface->config.stall_calm, iface->link_trouble, window,
            now, ep->wd.stalls);
    if (now - ep->wd.stall_time < allowed / 2) {
        return;
    }
    if (ibv_query_qp(ep->qp, &attr, IBV_QP_SQ_PSN, &init)) {
        return; /* cannot tell: do not guess */
    }
    if (!ep->wd.stall_psn_valid) {
        ep->wd.stall_psn       = attr.sq_psn;
        ep->wd.stall_psn_valid = 1;
        return;
    }
    if (uct_syncmem_psn_after(attr.sq_psn, ep->wd.stall_psn)) {
        ep->wd.stall_time      = now; /* the device is still sending */
        ep->wd.stall_psn_valid = 0;
        return;
    }
    if ((now - ep->wd.stall_time < allowed) || (*stalls_left == 0)) {
        return;
    }
    --*stalls_left;

    /* An expected recovery, not a warning: the endpoint reconnects (or
     * fails through its error path), and a peer that died looked like this
     * before Soft-RoCE's retries were kept finite. A person need act only
     * when the same request stalls again on the new QP. */
    again = (ep->wd.stalls != 0) &&
            (ep->wd.stall_sn == (uint16_t)(ep->tx.acked_sn + 1));
    ucs_log(again ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DIAG,
            "syncmem: ep %p to iface 0x%" PRIx64 ": request %u made no"
            " progress for %.1f s and QP 0x%x sent nothing new (send PSN"
            " 0x%x): taking the QP for wedged%s and %s (%.1f s allowed:"
            " UCX_SYNCMEM_RC_STALL_TIMEOUT=%.1fs%s)", ep,
            ep->cm.peer_iface_id, (uint16_t)(ep->tx.acked_sn + 1),
            ucs_time_to_sec(now - ep->wd.stall_time), ep->qp->qp_num,
            attr.sq_psn, again ? " again" : "",
            iface->config.reconnect ? "reconnecting" :
            "failing the endpoint (UCX_SYNCMEM_RECONNECT=n)",
            ucs_time_to_sec(allowed), ucs_time_to_sec(timeout),
            (allowed > uct_syncmem_ep_fsm_stall_time(
                    timeout, 1, iface->link_trouble, window, now,
                    ep->wd.stalls)) ?
            ", auto: longer with no link trouble in the last minute" : "");
    if ((ep->wd.stalls == 0) ||
        (ep->wd.stall_sn != (uint16_t)(ep->tx.acked_sn + 1))) {
        ep->wd.stalls   = 0;
        ep->wd.stall_sn = ep->tx.acked_sn + 1;
    }
    ++ep->wd.stalls;
    ep->wd.stall_time = 0;
    uct_syncmem_ep_rtt_backoff(iface, ep, "stalled");
    /* to error: its flushes start the reconnect, or fail the endpoint */
    uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_STALL);
}

/*
 * From progress, every quarter of the shorter of UCX_SYNCMEM_OP_TIMEOUT and
 * UCX_SYNCMEM_RC_STALL_TIMEOUT, look for endpoints whose oldest request has
 * not completed for that long. RC completes in order, so that is one whose
 * acked_sn has not moved while it had work outstanding. OP_TIMEOUT fails
 * the endpoint with UCS_ERR_ENDPOINT_TIMEOUT: its requests are flushed with
 * that status, and UCP purges the pending ones from its error handler. A
 * stall (above) replaces the QP instead.
 */
/*
 * Every entry of the send CQ is taken (each request holds one: a broken QP
 * flushes them all into it), and perhaps by requests that no completion
 * will report yet: with many endpoints, each may hold up to TX_MODERATION - 1
 * unsignalled ones, TX_CQ_LEN in all, and then nothing completes and no
 * operation may post. A signalled empty write on each such endpoint reports
 * them (RC completes in order) and gives their entries back. These take the
 * CQ's slack (UCT_SYNCMEM_CQ_SLACK), half of it at most, and a send queue
 * slot the endpoint has.
 */
static void uct_syncmem_iface_cq_rescue(uct_syncmem_iface_t *iface)
{
    uct_syncmem_ep_t *ep;

    iface->cq_starved = 0;
    ucs_list_for_each(ep, &iface->eps, list) {
        if (iface->cq_available <= -(int)(UCT_SYNCMEM_CQ_SLACK / 2)) {
            break;
        }
        if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
            uct_syncmem_ep_last_unsignaled(iface, ep) &&
            ((ep->tx.available > 0) ||
             (uct_syncmem_replay_grow(ep) == UCS_OK))) {
            uct_syncmem_ep_post_nop(iface, ep);
            uct_syncmem_ep_ring(ep);
        }
    }
}

void uct_syncmem_iface_check_deadlines(uct_syncmem_iface_t *iface)
{
    unsigned stalls_left = UCT_SYNCMEM_STALLS_PER_CHECK;
    ucs_time_t now       = ucs_get_time();
    /* a check the timer asked for: an operation that found no room asks
     * for one too, and those come as often as operations do */
    int tick             = iface->check_tick;
    uct_syncmem_ep_t *ep, *expired;

    iface->check_due  = 0;
    iface->check_tick = 0;
    if (ucs_unlikely(iface->cq_starved)) {
        uct_syncmem_iface_cq_rescue(iface);
    }
    if (ucs_unlikely(iface->fence_due)) {
        iface->fence_due = 0;
        ucs_list_for_each(ep, &iface->eps, list) {
            uct_syncmem_ep_fence_nop(iface, ep); /* sets it again if due */
        }
    }
    if (ucs_unlikely(iface->grow_due)) {
        /* rings that an operation found full (all full ones: with many
         * endpoints sending in turn, one pass for each would walk the
         * list each time; a parked endpoint took its ring at once) */
        iface->grow_due = 0;
        ucs_list_for_each(ep, &iface->eps, list) {
            if ((ep->replay.ring != NULL) &&
                (ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
                (ep->tx.available <= 0)) {
                (void)uct_syncmem_replay_grow(ep);
            }
        }
    }

    do {
        expired = NULL;
        ucs_list_for_each(ep, &iface->eps, list) {
            if (((ep->state != UCT_SYNCMEM_EP_CONNECTED) &&
                 !uct_syncmem_ep_state_reconnecting(ep->state)) ||
                (uct_syncmem_ep_tx_outstanding(ep) == 0)) {
                ep->wd.time = 0;
                ep->wd.stall_time = 0;
                /* nothing posted since the timer's last check, two of
                 * them in a row: gives its ring back (one that sends
                 * only now and then, nothing outstanding at a check,
                 * keeps it); wd.sn is the busy branch's again once
                 * wd.time is 0 */
                if (ep->wd.sn != ep->tx.sn) {
                    ep->wd.sn          = ep->tx.sn;
                    ep->wd.idle_checks = 0;
                } else if (tick && (ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
                           (++ep->wd.idle_checks >= 2)) {
                    uct_syncmem_replay_park(ep);
                    ep->wd.idle_checks = 0;
                }
                continue;
            }
            ep->wd.idle_checks = 0;
            if ((ep->wd.time == 0) || (ep->wd.sn != ep->tx.acked_sn)) {
                if ((ep->wd.stalls != 0) &&
                    UCS_CIRCULAR_COMPARE16(ep->tx.acked_sn, >=,
                                           ep->wd.stall_sn)) {
                    ep->wd.stalls = 0; /* what stalled got through */
                }
                ep->wd.sn        = ep->tx.acked_sn;
                ep->wd.time      = now;
                ep->wd.stall_time      = now;
                ep->wd.stall_psn_valid = 0;
                /* requests that completed unsignalled would never say so */
                if (uct_syncmem_ep_last_unsignaled(iface, ep) &&
                    uct_syncmem_ep_tx_room(iface, ep)) {
                    uct_syncmem_ep_post_nop(iface, ep);
                    uct_syncmem_ep_ring(ep);
                }
                continue;
            }
            if (now - ep->wd.time >= iface->config.op_timeout) {
                expired = ep;
                break;
            }
            uct_syncmem_ep_check_stall(iface, ep, now, &stalls_left);
        }

        if (expired != NULL) {
            ucs_log(iface->super.config.failure_level,
                    "syncmem: ep %p to iface 0x%" PRIx64 ": request %u not"
                    " completed within UCX_SYNCMEM_OP_TIMEOUT (%.3f s);"
                    " failing the endpoint", expired,
                    expired->cm.peer_iface_id,
                    (uint16_t)(expired->tx.acked_sn + 1),
                    ucs_time_to_sec(iface->config.op_timeout));
            expired->wd.time = 0;
            uct_syncmem_ep_fail(expired, UCS_ERR_ENDPOINT_TIMEOUT);
        }
    } while (expired != NULL);
}

/* Async timer: progress looks at the endpoints' deadlines next time (the
 * timer cannot: failing an endpoint calls the user outside the lock). */
static void uct_syncmem_check_timer(int id, ucs_event_set_types_t events,
                                    void *arg)
{
    ((uct_syncmem_iface_t*)arg)->check_tick = 1;
    ((uct_syncmem_iface_t*)arg)->check_due  = 1;
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

ucs_status_t uct_syncmem_watchdog_init(uct_syncmem_iface_t *iface)
{
    ucs_status_t status;

    iface->check_due   = 0;
    iface->check_tick  = 0;
    iface->check_id    = -1;
    iface->cm.fault_id = -1;
    if (iface->config.check_interval != UCS_TIME_INFINITY) {
        status = ucs_async_add_timer(iface->super.worker->async->mode,
                                     iface->config.check_interval,
                                     uct_syncmem_check_timer, iface,
                                     iface->super.worker->async,
                                     &iface->check_id);
        if (status != UCS_OK) {
            ucs_error("syncmem: cannot start the deadline timer: %s",
                      ucs_status_string(status));
            return status;
        }
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
        uct_syncmem_watchdog_cleanup(iface); /* the caller does not */
    }
    return status;
}

void uct_syncmem_watchdog_cleanup(uct_syncmem_iface_t *iface)
{
    if (iface->cm.fault_id >= 0) {
        ucs_async_remove_handler(iface->cm.fault_id, 1);
        iface->cm.fault_id = -1;
    }
    if (iface->check_id >= 0) {
        ucs_async_remove_handler(iface->check_id, 1);
        iface->check_id = -1;
    }
}

/* RC_TIMEOUT: a fixed exponent (exp_min == exp_max: nothing moves it), or
 * 'auto': measured within UCT_SYNCMEM_RTO_EXP_MIN..MAX, starting at
 * UCT_SYNCMEM_RTO_EXP_INIT (syncmem_rto.h). */
void uct_syncmem_watchdog_rto_init(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_iface_config_t *config)
{
    uint8_t exp;

    iface->rto.adaptive   = (config->rc.timeout == UCS_TIME_AUTO);
    iface->rto.rts_modify = 1;
    iface->rto.polls      = 0;
    if (iface->rto.adaptive) {
        uct_syncmem_rto_init(&iface->rto.est, UCT_SYNCMEM_RTO_EXP_MIN,
                             UCT_SYNCMEM_RTO_EXP_MAX,
                             UCT_SYNCMEM_RTO_EXP_INIT);
    } else {
        exp = (config->rc.timeout == UCS_TIME_INFINITY) ? 31 :
              uct_syncmem_rto_exp_of(ucs_time_to_sec(config->rc.timeout));
        uct_syncmem_rto_init(&iface->rto.est, exp, exp, exp);
    }
    iface->config.rc_timeout = iface->rto.est.exp;
}

/* RC_STALL_TIMEOUT: 'auto' waits well past the time the HCA's own retries
 * take to report a dead link (uct_syncmem_iface_stall_auto, for each QP's
 * RC timeout); this is the least of it, for the check's interval. And
 * UCT_SYNCMEM_STALL_CALM times that while the port shows no link trouble
 * (uct_syncmem_ep_fsm_stall_time). */
ucs_time_t
uct_syncmem_watchdog_stall_timeout(const uct_syncmem_iface_t *iface,
                                   const uct_syncmem_iface_config_t *config)
{
    if (config->stall_timeout != UCS_TIME_AUTO) {
        return config->stall_timeout;
    }
    if (!config->reconnect) {
        /* a stall would fail the endpoint, and a receiver that only stopped
         * progressing for a while (RNR) stalls too: only when asked */
        return UCS_TIME_INFINITY;
    }
    return uct_syncmem_iface_stall_auto(iface, iface->rto.est.exp_min);
}
