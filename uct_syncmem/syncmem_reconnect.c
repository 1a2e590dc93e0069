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
 *     RECONNECT_TIMEOUT (after a stall, at least the stall's time:
 *     uct_syncmem_ep_fsm_reconnect_deadline). The old QP stays until its
 *     flushed requests are all back from the CQ, so that none of them is
 *     taken for the new QP's.
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
 *  4. Requests k.. are posted again in order, with their flags, from
 *     the replay ring (syncmem_replay.c): puts and gets again (idempotent),
 *     active messages again (the receiver drops one it delivered:
 *     syncmem_am.c), atomics on a new QP never: an empty write holds the
 *     place of one of unknown outcome, which fails UCS_ERR_CONNECTION_RESET.
 *     Completions still come in request order: ordering, fences and flush
 *     mean what they meant before.
 *  5. Past the deadline everything outstanding fails with
 *     UCS_ERR_ENDPOINT_TIMEOUT and the error handler is called, once.
 *
 * The endpoint's state (syncmem_ep_fsm.c has the machine and its table)
 * changes only here, in uct_syncmem_ep_raise: every event the other files
 * raise comes in through it, the pure transition function decides, and
 * the action it names is carried out below. FAIL's last part (the user's
 * error handler) runs outside the async lock; the rest under it, for what
 * the async handler reads (the generation, the REP, the QP).
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"
#include "syncmem_hooks.h"
#include "syncmem_cm.h"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <string.h>


/* The link, not us: retry exceeded (no acknowledgement came back: link,
 * switch, peer host); local QP operation error (Soft-RoCE's answer when it
 * cannot route the packet: the netdev went down). 'auto' stall times are
 * short for a while after one (syncmem_watchdog.c). */
static int uct_syncmem_wc_is_link_trouble(enum ibv_wc_status status)
{
    return (status == IBV_WC_RETRY_EXC_ERR) ||
           (status == IBV_WC_LOC_QP_OP_ERR);
}

/* Link trouble, or flushed with no error before it: the QP was moved to
 * the error state by something other than us (port event, FAULT_QP_ERROR,
 * the stall check). */
static int uct_syncmem_wc_is_link_error(enum ibv_wc_status status)
{
    return uct_syncmem_wc_is_link_trouble(status) ||
           (status == IBV_WC_WR_FLUSH_ERR);
}

/* ERROR's guard: a link error, or a refusal worth a new QP. */
static int uct_syncmem_ep_wc_recoverable(const uct_syncmem_ep_t *ep,
                                         const struct ibv_wc *wc)
{
    return uct_syncmem_wc_is_link_error(wc->status) ||
           ((wc->status == IBV_WC_REM_INV_REQ_ERR) &&
            uct_syncmem_ep_fsm_retry_refusal(ep->reconnect.refused_once,
                                             ep->reconnect.refused_sn,
                                             wc->wr_id));
}

/* START: a spare QP, the requests of unknown outcome, whether to ask to
 * resume, and the REQ. */
static ucs_status_t uct_syncmem_reconnect_start(uct_syncmem_ep_t *ep,
                                                const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint16_t sn                = wc->wr_id;
    const char *why            = NULL;
    char tries[64];
    ucs_time_t allowed;
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
    ep->reconnect.fail_sn      = sn;
    ep->reconnect.old_last_sn  = uct_syncmem_ep_rung_sn(ep);
    ep->reconnect.unrun_sn     = ep->reconnect.old_last_sn + 1;
    ep->reconnect.old_peer_qpn = ep->cm.peer_rc_qpn;
    ep->tx.rung_sn            = ep->tx.sn;
    ucs_list_del(&ep->db_list);
    ucs_list_head_init(&ep->db_list);
    ep->reconnect.started     = ucs_get_time();
    ep->reconnect.deadline    = uct_syncmem_ep_fsm_reconnect_deadline(
            ep->reconnect.started, iface->config.reconnect_timeout,
            (ep->wd.stalls == 0) ? 0 :
            uct_syncmem_ep_fsm_stall_time(
                    uct_syncmem_ep_stall_timeout(iface, ep),
                    iface->config.stall_calm, iface->link_trouble,
                    ucs_time_from_sec(UCT_SYNCMEM_TROUBLE_WINDOW),
                    ep->reconnect.started, ep->wd.stalls - 1));

    if (wc->status == IBV_WC_REM_INV_REQ_ERR) {
        /* both QPs start over: the peer's is in error, and ours may
         * disagree with it on PSNs */
        ep->reconnect.refused_once = 1;
        ep->reconnect.refused_sn   = sn;
        why = "the peer refused the request as invalid (a second refusal"
              " of it fails the endpoint)";
    } else if (!iface->config.reconnect_resume) {
        why = "UCX_SYNCMEM_RECONNECT_RESUME=n";
    } else if (ep->wd.stalls != 0) {
        why = "the QP had stalled";
    } else if (ep->reconnect.resumed_once &&
               (ep->reconnect.resumed_sn == sn)) {
        why = "it failed there after a resume";
    } else {
        why = uct_syncmem_replay_resume_risk(ep, sn, ep->reconnect.old_last_sn);
    }
    ep->reconnect.resume    = (why == NULL);
    ep->reconnect.no_resume = why;
    uct_syncmem_qp_query(ep->qp, &ep->reconnect.old_rq_psn);

    allowed = ep->reconnect.deadline - ep->reconnect.started;
    if (ep->reconnect.deadline == UCS_TIME_INFINITY) {
        snprintf(tries, sizeof(tries), "until it succeeds");
    } else {
        snprintf(tries, sizeof(tries), "for %.1f s%s",
                 ucs_time_to_sec(allowed),
                 (allowed > iface->config.reconnect_timeout) ?
                 ", as long as the stall it follows" : "");
    }
    ucs_diag("syncmem: ep %p: QP 0x%x to iface 0x%" PRIx64 " failed at"
             " request %u (%s); reconnecting, %u requests to post again,"
             " %s%s; trying %s (UCX_SYNCMEM_RECONNECT_TIMEOUT)", ep,
             wc->qp_num, ep->cm.peer_iface_id, sn,
             ibv_wc_status_str(wc->status), (uint16_t)(ep->tx.sn - sn + 1),
             ep->reconnect.resume ? "asking to resume" : "on a new QP: ",
             ep->reconnect.resume ? "" : why, tries);

    ep->reconnect.old_qp = ep->qp;
    ep->qp               = qp;
    uct_syncmem_cm_reconnect(ep);
    return UCS_OK;
}

/* The peer kept its QP: bring the old one back (its flushes are all in) to
 * where it stopped, and let the spare go instead. The count requests
 * posted again (from fail_sn) keep their PSNs (uct_syncmem_qp_resume). */
static ucs_status_t uct_syncmem_reconnect_resume(uct_syncmem_ep_t *ep,
                                                 uint16_t count)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint32_t sq_psn            = (ep->replay.next_psn -
                                  uct_syncmem_replay_npkts(
                                          ep, ep->reconnect.fail_sn, count)) &
                                 UCT_SYNCMEM_PSN_MASK;
    struct ibv_qp *spare       = ep->qp;
    ucs_status_t status;

    ep->rtt.exp = uct_syncmem_ep_rc_timeout(iface, ep);
    status      = uct_syncmem_qp_resume(iface, ep->reconnect.old_qp,
                                        &ep->cm.peer, ep->cm.peer_rc_qpn,
                                        sq_psn, ep->reconnect.old_rq_psn,
                                        ep->rtt.exp);
    if (status != UCS_OK) {
        return status;
    }
    ep->qp                     = ep->reconnect.old_qp;
    ep->reconnect.old_qp       = spare; /* destroyed next, as the old would */
    ep->reconnect.resumed_sn   = ep->reconnect.fail_sn;
    ep->reconnect.resumed_once = 1;
    return UCS_OK;
}

/* FINISH_*: the REP is in and the old QP drained: connect (or resume),
 * post again what had not completed, and let the endpoint work. */
static ucs_status_t uct_syncmem_reconnect_finish(uct_syncmem_ep_t *ep,
                                                 int resumed)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    unsigned lost              = ep->lost.count;
    uint16_t count             = ep->tx.sn - ep->reconnect.fail_sn +
                                 1; /* posted again */
    unsigned ran               = 0;
    char peer[64]              = "";
    uint16_t posted;
    ucs_status_t status;

    if (resumed) {
        status = uct_syncmem_reconnect_resume(ep, count);
    } else {
        if (ep->cm.rep_stopped) {
            ep->cm.rep_stopped = 0; /* one round's answer */
            status = uct_syncmem_replay_peer_ran(ep, ep->cm.rep_rq_psn, &ran);
            if (status == UCS_OK) {
                ucs_snprintf_safe(peer, sizeof(peer), " (%u had run at the"
                                  " peer)", ran);
            } else {
                ucs_snprintf_safe(peer, sizeof(peer), " (the peer's PSN 0x%x"
                                  " is not about them)", ep->cm.rep_rq_psn);
            }
        }
        ep->rtt.exp = uct_syncmem_ep_rc_timeout(iface, ep);
        status      = uct_syncmem_qp_connect(iface, ep->qp, &ep->cm.peer,
                                             ep->cm.peer_rc_qpn, ep->rtt.exp);
        /* a new QP starts at PSN 0 */
        ep->replay.next_psn = uct_syncmem_replay_npkts(
                ep, ep->reconnect.fail_sn, count);
    }
    if (status != UCS_OK) {
        return status;
    }
    uct_syncmem_replay_destroy_old_qp(ep);

    /* up to a fence that waits: what was kept after it stays kept */
    posted = uct_syncmem_replay_ring_end(ep) - ep->reconnect.fail_sn + 1;
    posted = ucs_min(posted, count);
    status = uct_syncmem_replay_post(ep, ep->reconnect.fail_sn, posted,
                                     resumed ? UCT_SYNCMEM_POST_RESUMED :
                                               UCT_SYNCMEM_POST_AGAIN);
    if (status != UCS_OK) {
        return status;
    }
    ep->tx.rung_sn = ep->reconnect.fail_sn + posted - 1;
    if (posted != count) {
        /* the kept requests' flags are set; the next new one is signalled */
        ep->tx.sig_sn = ep->tx.sn + 1;
        if (ucs_list_is_empty(&ep->db_list)) {
            ucs_list_add_tail(&iface->db_eps, &ep->db_list);
        }
    }

    ucs_diag("syncmem: ep %p: reconnected to iface 0x%" PRIx64 " after %.0f"
             " ms (%s), %u requests replayed%s, %u atomics of unknown outcome"
             " failed", ep, ep->cm.peer_iface_id,
             ucs_time_to_msec(ucs_get_time() - ep->reconnect.started),
             resumed ? "the same QPs, resumed" : "a new QP",
             count, peer, ep->lost.count - lost);
    if (ep->lost.count > lost) {
        ucs_warn("syncmem: ep %p: %u atomic operations may or may not have"
                 " run when the link to iface 0x%" PRIx64 " failed; they"
                 " report UCS_ERR_CONNECTION_RESET (not run again)", ep,
                 ep->lost.count - lost, ep->cm.peer_iface_id);
    }
    uct_syncmem_cm_send_rtu(ep); /* a new passive QP waits for it */
    uct_syncmem_ep_connected(ep);
    return UCS_OK;
}

/* RESTART: connecting after the REP failed; the spare goes back to INIT
 * and a new generation asks for a new passive QP (the old QP, drained,
 * may be half reset: never resumed now). */
static ucs_status_t uct_syncmem_reconnect_restart(uct_syncmem_ep_t *ep)
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
    ep->reconnect.resume    = 0;
    ep->reconnect.no_resume = "the answer to the first REQ failed";
    /* the spare may have sent them to the peer: none is surely unrun */
    ep->reconnect.unrun_sn = ep->tx.sn + 1;
    uct_syncmem_cm_reconnect(ep);
    return UCS_OK;
}

/* What the guards read, now. */
static void uct_syncmem_ep_fsm_inputs(const uct_syncmem_ep_t *ep,
                                      const struct ibv_wc *wc, uint8_t rep,
                                      ucs_time_t now,
                                      uct_syncmem_ep_fsm_in_t *in)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    in->reconnect     = iface->config.reconnect;
    in->recoverable   = (wc != NULL) && uct_syncmem_ep_wc_recoverable(ep, wc);
    in->peer_gone     = ep->cm.peer_gone;
    in->outstanding   = uct_syncmem_ep_tx_outstanding(ep) != 0;
    in->resume_asked  = ep->reconnect.resume;
    in->rep_resumed   = (rep == UCT_SYNCMEM_CM_REP_RESUMED);
    in->retry_due     = (now >= ep->cm.next_retry);
    in->past_deadline = (now >= ep->reconnect.deadline);
    /* a REQ at or after deadline - CM_TIMEOUT armed its retry past it */
    in->last_try_sent = (ep->cm.next_retry >= ep->reconnect.deadline);
    in->tries_left    = (ep->cm.retries_left > 0);
}

/* The actions done under the async lock. Not UCS_OK: the action failed. */
static ucs_status_t uct_syncmem_ep_act(uct_syncmem_ep_t *ep,
                                       uct_syncmem_ep_act_t act,
                                       const struct ibv_wc *wc)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_qp_attr attr    = { .qp_state = IBV_QPS_ERR };
    ucs_status_t status;

    switch (act) {
    case UCT_SYNCMEM_EP_ACT_CONNECT:
        uct_syncmem_ep_rtt_handshake(iface, ep);
        ep->rtt.exp = uct_syncmem_ep_rc_timeout(iface, ep);
        status      = uct_syncmem_qp_connect(iface, ep->qp, &ep->cm.peer,
                                             ep->cm.peer_rc_qpn, ep->rtt.exp);
        if (status == UCS_OK) {
            uct_syncmem_cm_send_rtu(ep);
            /* what was kept while connecting, in order */
            status = uct_syncmem_replay_ring(ep);
        }
        if (status == UCS_OK) {
            uct_syncmem_ep_connected(ep);
        }
        return status;
    case UCT_SYNCMEM_EP_ACT_RESEND:
        if (ep->cm.busy && (ep->cm.busy_left > 0)) {
            --ep->cm.busy_left; /* alive, and will take it: not a try */
        } else {
            --ep->cm.retries_left;
        }
        /* diag: the fault bench counts them (faults_events.h) */
        ucs_diag("syncmem: ep %p resends REQ to iface 0x%" PRIx64 " (%u of"
                 " UCX_SYNCMEM_CM_RETRIES %u%s)", ep, ep->cm.peer_iface_id,
                 iface->config.cm_retries - ep->cm.retries_left,
                 iface->config.cm_retries,
                 ep->cm.busy ? "; the peer was busy" : "");
        uct_syncmem_cm_send_req(ep);
        return UCS_OK;
    case UCT_SYNCMEM_EP_ACT_START:
        status = uct_syncmem_reconnect_start(ep, wc);
        if (status != UCS_OK) {
            ucs_error("syncmem: ep %p: cannot reconnect (%s)", ep,
                      ucs_status_string(status));
        }
        return status;
    case UCT_SYNCMEM_EP_ACT_QP_ERROR:
        if (ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE)) {
            /* a stall: tried again after the next stall time; OP_TIMEOUT
             * holds */
            ucs_error("syncmem: ep %p: cannot move QP 0x%x to the error"
                      " state: %m", ep, ep->qp->qp_num);
        }
        return UCS_OK;
    case UCT_SYNCMEM_EP_ACT_SEND_REQ:
        ucs_diag("syncmem: ep %p resends REQ to iface 0x%" PRIx64 " (reconnect,"
                 " %.0f ms before UCX_SYNCMEM_RECONNECT_TIMEOUT)", ep,
                 ep->cm.peer_iface_id,
                 ucs_time_to_msec(ep->reconnect.deadline) -
                 ucs_time_to_msec(ucs_get_time()));
        uct_syncmem_cm_send_req(ep);
        return UCS_OK;
    case UCT_SYNCMEM_EP_ACT_FINISH_NEW_QP:
    case UCT_SYNCMEM_EP_ACT_FINISH_RESUME:
        return uct_syncmem_reconnect_finish(
                ep, act == UCT_SYNCMEM_EP_ACT_FINISH_RESUME);
    case UCT_SYNCMEM_EP_ACT_RESTART:
        return uct_syncmem_reconnect_restart(ep);
    default:
        return UCS_OK; /* NONE; RETIRE, FAIL and CANCEL: after the lock */
    }
}

/* Why a TIMER failed the endpoint: no answer, or no drain. */
static void uct_syncmem_ep_log_timeout(uct_syncmem_ep_t *ep, uint8_t from,
                                       ucs_time_t now)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    if (from == UCT_SYNCMEM_EP_CONNECTING) {
        ucs_diag("syncmem: ep %p: no answer from iface 0x%" PRIx64 " after %u"
                 " tries; %s", ep, ep->cm.peer_iface_id,
                 iface->config.cm_retries + 1,
                 (uct_syncmem_ah_find(iface, &ep->cm.peer) == NULL) ?
                 "the peer's address never resolved (ARP/ND): is it on a"
                 " reachable network?" : "is the peer process alive?");
        return;
    }
    /* contrib/harness/faults_events.h matches this line */
    ucs_log(iface->super.config.failure_level,
            "syncmem: ep %p: reconnect to iface 0x%" PRIx64 " gave up"
            " after %.1f s (%s); is the peer alive and its link up?"
            " UCX_SYNCMEM_RECONNECT_TIMEOUT sets how long to try", ep,
            ep->cm.peer_iface_id, ucs_time_to_sec(now - ep->reconnect.started),
            (from == UCT_SYNCMEM_EP_RECONN_WAIT_BOTH) ||
            (from == UCT_SYNCMEM_EP_RECONN_WAIT_REP) ?
            "no answer to the connection request" :
            "the old QP never drained");
}

/* The actions done after the lock: they call the user. wc: the failed
 * completion an ERROR failed the endpoint with. Returns what
 * uct_syncmem_ep_event does. */
static ucs_status_t uct_syncmem_ep_act_unlocked(uct_syncmem_ep_t *ep,
                                                uct_syncmem_ep_act_t act,
                                                const struct ibv_wc *wc,
                                                ucs_status_t status)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    char req[96];

    switch (act) {
    case UCT_SYNCMEM_EP_ACT_RETIRE:
        /* after the first error the QP flushes the rest: the cause (or
         * the cancel) to every op */
        uct_syncmem_ep_tx_completed(ep, wc->wr_id, ep->status);
        return UCS_OK;
    case UCT_SYNCMEM_EP_ACT_FAIL:
    case UCT_SYNCMEM_EP_ACT_FAIL_PURGE:
    case UCT_SYNCMEM_EP_ACT_CANCEL:
    case UCT_SYNCMEM_EP_ACT_CANCEL_PURGE:
        break;
    default:
        return UCS_OK;
    }

    if (wc != NULL) {
        uct_syncmem_replay_describe(ep, wc->wr_id, req, sizeof(req));
        uct_syncmem_ep_tx_completed(ep, wc->wr_id, status);
        uct_syncmem_wc_log(iface, ep, wc, req);
    }
    if ((act == UCT_SYNCMEM_EP_ACT_FAIL_PURGE) ||
        (act == UCT_SYNCMEM_EP_ACT_CANCEL_PURGE)) {
        /* the spare has nothing posted; the old QP goes */
        uct_syncmem_ep_purge(ep, status);
    }
    uct_syncmem_ep_qp_to_error(ep);
    if ((act == UCT_SYNCMEM_EP_ACT_CANCEL) ||
        (act == UCT_SYNCMEM_EP_ACT_CANCEL_PURGE)) {
        return UCS_OK; /* not a failure the user must hear of */
    }
    uct_syncmem_ep_notify_failed(ep, status);
    return status;
}

static int uct_syncmem_ep_act_fails(uct_syncmem_ep_act_t act)
{
    return (act == UCT_SYNCMEM_EP_ACT_FAIL) ||
           (act == UCT_SYNCMEM_EP_ACT_FAIL_PURGE) ||
           (act == UCT_SYNCMEM_EP_ACT_CANCEL) ||
           (act == UCT_SYNCMEM_EP_ACT_CANCEL_PURGE);
}

/*
 * The one entry of every event: the machine decides, the action is done,
 * and an action that failed is raised again as the event the table names
 * (CONNECT_FAILED or FAIL) in the state it was decided in. wc: ERROR's and
 * DRAINED's completion; status: FAIL's; rep: the REP taken in.
 */
static ucs_status_t uct_syncmem_ep_raise(uct_syncmem_ep_t *ep,
                                         uct_syncmem_ep_ev_t event,
                                         const struct ibv_wc *wc,
                                         ucs_status_t status, uint8_t rep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    ucs_async_context_t *async = iface->super.worker->async;
    const struct ibv_wc *failed_wc = (event == UCT_SYNCMEM_EP_EV_ERROR) ?
                                     wc : NULL;
    ucs_time_t now             = ucs_get_time();
    uct_syncmem_ep_fsm_in_t in;
    uct_syncmem_ep_act_t act;
    ucs_status_t act_status;
    uint8_t from, state;

    if (event == UCT_SYNCMEM_EP_EV_ERROR) {
        status = uct_syncmem_wc_status(wc->status);
    } else if (event == UCT_SYNCMEM_EP_EV_TIMER) {
        status = UCS_ERR_ENDPOINT_TIMEOUT;
    } else if (event == UCT_SYNCMEM_EP_EV_CANCEL) {
        status = UCS_ERR_CANCELED;
    } else if (event == UCT_SYNCMEM_EP_EV_GONE) {
        status = UCS_ERR_CONNECTION_RESET;
    }

    UCS_ASYNC_BLOCK(async);
    for (;;) {
        uct_syncmem_ep_fsm_inputs(ep, wc, rep, now, &in);
        from       = ep->state;
        state      = from;
        act        = uct_syncmem_ep_fsm_next(&state, event, &in);
        act_status = uct_syncmem_ep_act(ep, act, wc);
        if (act_status == UCS_OK) {
            break;
        }
        event  = ((act == UCT_SYNCMEM_EP_ACT_CONNECT) ||
                  (act == UCT_SYNCMEM_EP_ACT_FINISH_NEW_QP) ||
                  (act == UCT_SYNCMEM_EP_ACT_FINISH_RESUME)) ?
                 UCT_SYNCMEM_EP_EV_CONNECT_FAILED : UCT_SYNCMEM_EP_EV_FAIL;
        status = act_status;
    }
    if ((act != UCT_SYNCMEM_EP_ACT_NONE) || (state != from)) {
        ucs_debug("syncmem: ep %p: %s + %s: %s, now %s", ep,
                  uct_syncmem_ep_state_names[from],
                  uct_syncmem_ep_ev_names[event],
                  uct_syncmem_ep_act_names[act],
                  uct_syncmem_ep_state_names[state]);
    }
    uct_syncmem_ep_set_state(ep, state);
    if (uct_syncmem_ep_act_fails(act)) {
        ep->status = status;
    }
    UCS_ASYNC_UNBLOCK(async);

    if (uct_syncmem_ep_act_fails(act) &&
        (event == UCT_SYNCMEM_EP_EV_TIMER)) {
        uct_syncmem_ep_log_timeout(ep, from, now);
    } else if (uct_syncmem_ep_act_fails(act) &&
               (event == UCT_SYNCMEM_EP_EV_GONE)) {
        ucs_diag("syncmem: ep %p: iface 0x%" PRIx64 " closed while the"
                 " endpoint %s; failed with no more tries", ep,
                 ep->cm.peer_iface_id,
                 (from == UCT_SYNCMEM_EP_CONNECTING) ? "connected" :
                 "reconnected");
    }
    return uct_syncmem_ep_act_unlocked(ep, act, failed_wc, status);
}

ucs_status_t uct_syncmem_ep_event(uct_syncmem_ep_t *ep,
                                  uct_syncmem_ep_ev_t event)
{
    return uct_syncmem_ep_raise(ep, event, NULL, UCS_OK,
                                UCT_SYNCMEM_CM_REP_NONE);
}

ucs_status_t uct_syncmem_ep_fail(uct_syncmem_ep_t *ep, ucs_status_t status)
{
    return uct_syncmem_ep_raise(ep, UCT_SYNCMEM_EP_EV_FAIL, NULL, status,
                                UCT_SYNCMEM_CM_REP_NONE);
}

static int uct_syncmem_ep_is_old_qp(const uct_syncmem_ep_t *ep,
                                    const struct ibv_wc *wc)
{
    return (ep->reconnect.old_qp != NULL) &&
           (wc->qp_num == ep->reconnect.old_qp->qp_num);
}

/* A failed send completion of ep: ERROR, or of the QP being replaced (the
 * one ERROR has just replaced, too): DRAINED when it is its last. */
void uct_syncmem_ep_tx_error(uct_syncmem_ep_t *ep, const struct ibv_wc *wc)
{
    uint16_t sn = wc->wr_id;

    if (uct_syncmem_wc_is_link_trouble(wc->status)) {
        /* not flushes: those follow our own QP_ERROR too */
        ucs_derived_of(ep->super.super.iface,
                       uct_syncmem_iface_t)->link_trouble = ucs_get_time();
    }
    if (!uct_syncmem_ep_is_old_qp(ep, wc)) {
        if (UCS_CIRCULAR_COMPARE16(sn, <=, ep->tx.acked_sn)) {
            return; /* purged already */
        }
        if (uct_syncmem_ep_raise(ep, UCT_SYNCMEM_EP_EV_ERROR, wc, UCS_OK,
                                 UCT_SYNCMEM_CM_REP_NONE) != UCS_OK) {
            return; /* failed: the endpoint may be gone */
        }
    }
    if (uct_syncmem_ep_is_old_qp(ep, wc) && (sn == ep->reconnect.old_last_sn)) {
        uct_syncmem_ep_raise(ep, UCT_SYNCMEM_EP_EV_DRAINED, wc, UCS_OK,
                             UCT_SYNCMEM_CM_REP_NONE);
    }
}

/* The REP the async handler noted, taken once. */
static uint8_t uct_syncmem_ep_take_rep(uct_syncmem_ep_t *ep)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint8_t rep;

    if ((ep->cm.rep != UCT_SYNCMEM_CM_REP_NEW_QP) &&
        (ep->cm.rep != UCT_SYNCMEM_CM_REP_RESUMED)) {
        return UCT_SYNCMEM_CM_REP_NONE; /* only progress takes one */
    }
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    rep        = ep->cm.rep;
    ep->cm.rep = UCT_SYNCMEM_CM_REP_TAKEN;
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return rep;
}

/*
 * Progress while endpoints connect or reconnect: each endpoint gets the REP
 * noted for it, then whether its peer's iface closed, then the time (the
 * machine ignores each where it means nothing). After an endpoint failed
 * the walk starts again: its error handler may have changed the list.
 */
unsigned uct_syncmem_iface_connect_progress(uct_syncmem_iface_t *iface)
{
    unsigned count = 0;
    uct_syncmem_ep_t *ep;
    uint8_t rep;

again:
    ucs_list_for_each(ep, &iface->eps, list) {
        rep = uct_syncmem_ep_take_rep(ep);
        if (rep != UCT_SYNCMEM_CM_REP_NONE) {
            ++count;
            if (uct_syncmem_ep_raise(ep, UCT_SYNCMEM_EP_EV_REP, NULL, UCS_OK,
                                     rep) != UCS_OK) {
                goto again;
            }
        }
        if ((ep->cm.peer_gone &&
             uct_syncmem_ep_state_connecting(ep->state) &&
             (uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_GONE) != UCS_OK)) ||
            (uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_TIMER) != UCS_OK)) {
            ++count;
            goto again;
        }
    }
    return count;
}

unsigned uct_syncmem_ep_reconnects(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep, uct_syncmem_ep_t)->cm.gen;
}

int uct_syncmem_ep_connecting(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep, uct_syncmem_ep_t)->state ==
           UCT_SYNCMEM_EP_CONNECTING;
}

void uct_syncmem_ep_tx_sns(uct_ep_h tl_ep, uint16_t *sn_p, uint16_t *acked_sn_p)
{
    uct_syncmem_ep_t *ep = ucs_derived_of(tl_ep, uct_syncmem_ep_t);

    *sn_p       = ep->tx.sn;
    *acked_sn_p = ep->tx.acked_sn;
}
