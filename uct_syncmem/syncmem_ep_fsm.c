/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the endpoint's state machine: one state (ep->state) for its
 * whole life, changed only by uct_syncmem_ep_fsm_next, which is pure.
 * Every event comes in, and every action is carried out, in
 * syncmem_reconnect.c (uct_syncmem_ep_event and the rest, raised by the
 * files that learn something). test/uct_syncmem/test_ep_fsm.cc reads the
 * table below, drives every cell of it for every input of the guards, and
 * checks that doc/design.md shows the same.
 *
 * A cell: the action, then >the next state; "-": ignored (no action, the
 * same state); (x): the note of that letter decides.
 *
 *   event \ state   CONNECTING      CONNECTED       FAILED
 *   REP             CONNECT         -               -
 *                   >CONNECTED
 *   DRAINED         -               -               -
 *   ERROR           FAIL            (e)             RETIRE
 *                   >FAILED
 *   STALL           -               QP_ERROR        -
 *   TIMER           (c)             -               -
 *   CONNECT_FAILED  FAIL            -               -
 *                   >FAILED
 *   PORT_DOWN       -               (d)             -
 *   PORT_UP         -               -               -
 *   FAIL            FAIL            FAIL            -
 *                   >FAILED         >FAILED
 *   CANCEL          CANCEL          CANCEL          -
 *                   >FAILED         >FAILED
 *   DESTROY         >FAILED         >FAILED         -
 *   GONE            FAIL            -               -
 *                   >FAILED
 *
 *   event \ state   RECONN_WAIT_BOTH  RECONN_WAIT_REP   RECONN_DRAIN_NEW  RECONN_DRAIN_RESUME
 *   REP             (r)               (f)               -                 -
 *   DRAINED         >RECONN_WAIT_REP  -                 FINISH_NEW_QP     FINISH_RESUME
 *                                                       >CONNECTED        >CONNECTED
 *   ERROR           -                 -                 -                 -
 *   STALL           -                 -                 -                 -
 *   TIMER           (a)               (a)               (b)               (b)
 *   CONNECT_FAILED  -                 RESTART           RESTART           RESTART
 *                                     >RECONN_WAIT_REP  >RECONN_WAIT_REP  >RECONN_WAIT_REP
 *   PORT_DOWN       -                 -                 -                 -
 *   PORT_UP         SEND_REQ          SEND_REQ          -                 -
 *   FAIL            FAIL_PURGE        FAIL_PURGE        FAIL_PURGE        FAIL_PURGE
 *                   >FAILED           >FAILED           >FAILED           >FAILED
 *   CANCEL          CANCEL_PURGE      CANCEL_PURGE      CANCEL_PURGE      CANCEL_PURGE
 *                   >FAILED           >FAILED           >FAILED           >FAILED
 *   DESTROY         >FAILED           >FAILED           >FAILED           >FAILED
 *   GONE            FAIL_PURGE        FAIL_PURGE        FAIL_PURGE        FAIL_PURGE
 *                   >FAILED           >FAILED           >FAILED           >FAILED
 *
 *   (c) nothing until CM_TIMEOUT has passed since the last REQ; then RESEND
 *       while tries are left (CM_RETRIES), else FAIL >FAILED
 *       (UCS_ERR_ENDPOINT_TIMEOUT).
 *   (e) reconnect on, a recoverable error (the link broke, or the peer
 *       refused a request the first time) and the peer's iface did not
 *       say it closed: START >RECONN_WAIT_BOTH. Otherwise FAIL >FAILED,
 *       with the completion's status.
 *   (d) reconnect on and requests outstanding: QP_ERROR. Otherwise -.
 *   (r) >RECONN_DRAIN_RESUME if this REQ asked to resume and the peer kept
 *       the same QP, else >RECONN_DRAIN_NEW.
 *   (f) the same choice: FINISH_RESUME or FINISH_NEW_QP, >CONNECTED.
 *   (a) before the deadline: SEND_REQ if CM_TIMEOUT passed since the last,
 *       else -. After it: SEND_REQ once more if none went out since
 *       deadline - CM_TIMEOUT (the tries so far may all have fallen in the
 *       outage, and the user's progress may have paused since: Open MPI's
 *       pml worker while its osc worker streams); FAIL_PURGE >FAILED
 *       (UCS_ERR_ENDPOINT_TIMEOUT) once that one's CM_TIMEOUT is up too.
 *   (b) past the deadline: FAIL_PURGE >FAILED (UCS_ERR_ENDPOINT_TIMEOUT:
 *       the old QP never drained); before it -.
 *
 * An action that fails is raised again, in the state it was decided in:
 * CONNECT and FINISH_* as CONNECT_FAILED, START and RESTART as FAIL.
 *
 * Events:
 *   REP       the peer answered this generation's REQ; the async handler
 *             notes it, progress takes it once (syncmem_cm_msg.c)
 *   DRAINED   the old QP's last request came back flushed
 *   ERROR     a failed completion of the endpoint's QP (link errors: retry
 *             exceeded, flushed with no error before it, Soft-RoCE's local
 *             QP operation error when it cannot route)
 *   STALL     the watchdog took the QP for wedged: to error (an ERROR
 *             follows from its flushes); not resumed (syncmem_watchdog.c)
 *   TIMER     progress saw the time, while endpoints connect
 *   CONNECT_FAILED  connecting the QP after the REP failed (the link went
 *             down again under the handshake)
 *   PORT_DOWN, PORT_UP  the device's port events (syncmem_port.c)
 *   FAIL      something else failed the endpoint (the operation deadline,
 *             a post that failed, VERIFY=crc), with its status
 *   CANCEL    flush with UCT_FLUSH_FLAG_CANCEL: nothing new may start
 *   DESTROY   the endpoint goes away
 *   GONE      the peer's iface said it closed (a CM GONE, which the async
 *             handler notes); progress raises it while the endpoint
 *             connects or reconnects (UCS_ERR_CONNECTION_RESET). A
 *             connected one fails at its first failed request: (e)
 * Actions:
 *   CONNECT   the QP to the REP's, the pending queue runs
 *   RESEND    the first REQ again, one try fewer
 *   START     a spare QP, the requests of unknown outcome, whether to ask
 *             to resume, the REQ of the next generation
 *   QP_ERROR  the QP to error: its flushes raise ERROR
 *   SEND_REQ  this generation's REQ again
 *   FINISH_NEW_QP, FINISH_RESUME  connect the spare (or resume the old QP
 *             at the PSN it failed at), post again what had not completed
 *   RESTART   the spare back to INIT, a new generation on a new QP
 *   RETIRE    a flushed completion retires its ops with ep->status
 *   FAIL      QP to error, the pending queue fails, the error handler once
 *             (outside the async lock: it calls the user); _PURGE: the
 *             requests of unknown outcome (which no QP will report) fail
 *             first and the old QP goes
 *   CANCEL    as FAIL, with UCS_ERR_CANCELED and no error handler
 */
#include "syncmem_ep_fsm.h"

#include <stddef.h>

#define UCT_SYNCMEM_EP_NAME(_prefix, _name) \
    [UCT_SYNCMEM_EP_##_prefix##_name] = #_name

const char *uct_syncmem_ep_state_names[] = {
    UCT_SYNCMEM_EP_NAME(, CONNECTING),
    UCT_SYNCMEM_EP_NAME(, CONNECTED),
    UCT_SYNCMEM_EP_NAME(, RECONN_WAIT_BOTH),
    UCT_SYNCMEM_EP_NAME(, RECONN_WAIT_REP),
    UCT_SYNCMEM_EP_NAME(, RECONN_DRAIN_NEW),
    UCT_SYNCMEM_EP_NAME(, RECONN_DRAIN_RESUME),
    UCT_SYNCMEM_EP_NAME(, FAILED),
    [UCT_SYNCMEM_EP_STATE_LAST] = NULL
};

const char *uct_syncmem_ep_ev_names[] = {
    UCT_SYNCMEM_EP_NAME(EV_, REP),
    UCT_SYNCMEM_EP_NAME(EV_, DRAINED),
    UCT_SYNCMEM_EP_NAME(EV_, ERROR),
    UCT_SYNCMEM_EP_NAME(EV_, STALL),
    UCT_SYNCMEM_EP_NAME(EV_, TIMER),
    UCT_SYNCMEM_EP_NAME(EV_, CONNECT_FAILED),
    UCT_SYNCMEM_EP_NAME(EV_, PORT_DOWN),
    UCT_SYNCMEM_EP_NAME(EV_, PORT_UP),
    UCT_SYNCMEM_EP_NAME(EV_, FAIL),
    UCT_SYNCMEM_EP_NAME(EV_, CANCEL),
    UCT_SYNCMEM_EP_NAME(EV_, DESTROY),
    UCT_SYNCMEM_EP_NAME(EV_, GONE),
    [UCT_SYNCMEM_EP_EV_LAST] = NULL
};

const char *uct_syncmem_ep_act_names[] = {
    UCT_SYNCMEM_EP_NAME(ACT_, NONE),
    UCT_SYNCMEM_EP_NAME(ACT_, CONNECT),
    UCT_SYNCMEM_EP_NAME(ACT_, RESEND),
    UCT_SYNCMEM_EP_NAME(ACT_, START),
    UCT_SYNCMEM_EP_NAME(ACT_, QP_ERROR),
    UCT_SYNCMEM_EP_NAME(ACT_, SEND_REQ),
    UCT_SYNCMEM_EP_NAME(ACT_, FINISH_NEW_QP),
    UCT_SYNCMEM_EP_NAME(ACT_, FINISH_RESUME),
    UCT_SYNCMEM_EP_NAME(ACT_, RESTART),
    UCT_SYNCMEM_EP_NAME(ACT_, RETIRE),
    UCT_SYNCMEM_EP_NAME(ACT_, FAIL),
    UCT_SYNCMEM_EP_NAME(ACT_, FAIL_PURGE),
    UCT_SYNCMEM_EP_NAME(ACT_, CANCEL),
    UCT_SYNCMEM_EP_NAME(ACT_, CANCEL_PURGE),
    [UCT_SYNCMEM_EP_ACT_LAST] = NULL
};

static uct_syncmem_ep_act_t uct_syncmem_ep_fsm_go(uint8_t *state, uint8_t next,
                                                  uct_syncmem_ep_act_t act)
{
    *state = next;
    return act;
}

/* TIMER: notes (c), (a) and (b) */
static uct_syncmem_ep_act_t
uct_syncmem_ep_fsm_timer(uint8_t *state, const uct_syncmem_ep_fsm_in_t *in)
{
    switch (*state) {
    case UCT_SYNCMEM_EP_CONNECTING:
        if (!in->retry_due) {
            return UCT_SYNCMEM_EP_ACT_NONE;
        }
        return in->tries_left ? UCT_SYNCMEM_EP_ACT_RESEND :
               uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_FAILED,
                                     UCT_SYNCMEM_EP_ACT_FAIL);
    case UCT_SYNCMEM_EP_RECONN_WAIT_BOTH:
    case UCT_SYNCMEM_EP_RECONN_WAIT_REP:
        if (!in->past_deadline) {
            return in->retry_due ? UCT_SYNCMEM_EP_ACT_SEND_REQ :
                                   UCT_SYNCMEM_EP_ACT_NONE;
        }
        if (!in->last_try_sent) {
            return UCT_SYNCMEM_EP_ACT_SEND_REQ;
        }
        return !in->retry_due ? UCT_SYNCMEM_EP_ACT_NONE :
               uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_FAILED,
                                     UCT_SYNCMEM_EP_ACT_FAIL_PURGE);
    case UCT_SYNCMEM_EP_RECONN_DRAIN_NEW:
    case UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME:
        return !in->past_deadline ? UCT_SYNCMEM_EP_ACT_NONE :
               uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_FAILED,
                                     UCT_SYNCMEM_EP_ACT_FAIL_PURGE);
    default:
        return UCT_SYNCMEM_EP_ACT_NONE;
    }
}

/* FAIL, CANCEL, DESTROY, GONE: from any state but FAILED (GONE: but
 * CONNECTED too), to FAILED */
static uct_syncmem_ep_act_t
uct_syncmem_ep_fsm_end(uint8_t *state, uct_syncmem_ep_ev_t event)
{
    int purge = uct_syncmem_ep_state_reconnecting(*state);

    if (*state == UCT_SYNCMEM_EP_FAILED) {
        return UCT_SYNCMEM_EP_ACT_NONE;
    }
    *state = UCT_SYNCMEM_EP_FAILED;
    switch (event) {
    case UCT_SYNCMEM_EP_EV_FAIL:
    case UCT_SYNCMEM_EP_EV_GONE:
        return purge ? UCT_SYNCMEM_EP_ACT_FAIL_PURGE : UCT_SYNCMEM_EP_ACT_FAIL;
    case UCT_SYNCMEM_EP_EV_CANCEL:
        return purge ? UCT_SYNCMEM_EP_ACT_CANCEL_PURGE :
                       UCT_SYNCMEM_EP_ACT_CANCEL;
    default:
        return UCT_SYNCMEM_EP_ACT_NONE; /* DESTROY: the destructor does it */
    }
}

uct_syncmem_ep_act_t uct_syncmem_ep_fsm_next(uint8_t *state,
                                             uct_syncmem_ep_ev_t event,
                                             const uct_syncmem_ep_fsm_in_t *in)
{
    const uint8_t s = *state;
    int resume;

    if (s >= UCT_SYNCMEM_EP_STATE_LAST) {
        return UCT_SYNCMEM_EP_ACT_NONE;
    }

    switch (event) {
    case UCT_SYNCMEM_EP_EV_REP:
        resume = in->resume_asked && in->rep_resumed;
        if (s == UCT_SYNCMEM_EP_CONNECTING) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_CONNECTED,
                                         UCT_SYNCMEM_EP_ACT_CONNECT);
        } else if (s == UCT_SYNCMEM_EP_RECONN_WAIT_BOTH) {
            return uct_syncmem_ep_fsm_go(state, resume ?
                                         UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME :
                                         UCT_SYNCMEM_EP_RECONN_DRAIN_NEW,
                                         UCT_SYNCMEM_EP_ACT_NONE);
        } else if (s == UCT_SYNCMEM_EP_RECONN_WAIT_REP) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_CONNECTED,
                                         resume ?
                                         UCT_SYNCMEM_EP_ACT_FINISH_RESUME :
                                         UCT_SYNCMEM_EP_ACT_FINISH_NEW_QP);
        }
        return UCT_SYNCMEM_EP_ACT_NONE; /* late or duplicate */
    case UCT_SYNCMEM_EP_EV_DRAINED:
        if (s == UCT_SYNCMEM_EP_RECONN_WAIT_BOTH) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_RECONN_WAIT_REP,
                                         UCT_SYNCMEM_EP_ACT_NONE);
        } else if (s == UCT_SYNCMEM_EP_RECONN_DRAIN_NEW) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_CONNECTED,
                                         UCT_SYNCMEM_EP_ACT_FINISH_NEW_QP);
        } else if (s == UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_CONNECTED,
                                         UCT_SYNCMEM_EP_ACT_FINISH_RESUME);
        }
        return UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_ERROR:
        if ((s == UCT_SYNCMEM_EP_CONNECTED) && in->reconnect &&
            in->recoverable && !in->peer_gone) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_RECONN_WAIT_BOTH,
                                         UCT_SYNCMEM_EP_ACT_START);
        } else if ((s == UCT_SYNCMEM_EP_CONNECTING) ||
                   (s == UCT_SYNCMEM_EP_CONNECTED)) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_FAILED,
                                         UCT_SYNCMEM_EP_ACT_FAIL);
        }
        /* reconnecting: the spare has nothing posted */
        return (s == UCT_SYNCMEM_EP_FAILED) ? UCT_SYNCMEM_EP_ACT_RETIRE :
                                              UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_STALL:
        return (s == UCT_SYNCMEM_EP_CONNECTED) ? UCT_SYNCMEM_EP_ACT_QP_ERROR :
                                                 UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_TIMER:
        return uct_syncmem_ep_fsm_timer(state, in);
    case UCT_SYNCMEM_EP_EV_CONNECT_FAILED:
        if (s == UCT_SYNCMEM_EP_CONNECTING) {
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_FAILED,
                                         UCT_SYNCMEM_EP_ACT_FAIL);
        } else if ((s == UCT_SYNCMEM_EP_RECONN_WAIT_REP) ||
                   (s == UCT_SYNCMEM_EP_RECONN_DRAIN_NEW) ||
                   (s == UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME)) {
            /* drained already: a new generation waits for its REP */
            return uct_syncmem_ep_fsm_go(state, UCT_SYNCMEM_EP_RECONN_WAIT_REP,
                                         UCT_SYNCMEM_EP_ACT_RESTART);
        }
        return UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_PORT_DOWN:
        /* an idle endpoint is left alone: nothing to lose, and it may
         * never be used again */
        return ((s == UCT_SYNCMEM_EP_CONNECTED) && in->reconnect &&
                in->outstanding) ? UCT_SYNCMEM_EP_ACT_QP_ERROR :
                                   UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_PORT_UP:
        return ((s == UCT_SYNCMEM_EP_RECONN_WAIT_BOTH) ||
                (s == UCT_SYNCMEM_EP_RECONN_WAIT_REP)) ?
               UCT_SYNCMEM_EP_ACT_SEND_REQ : UCT_SYNCMEM_EP_ACT_NONE;
    case UCT_SYNCMEM_EP_EV_GONE:
        /* connected: its requests fail through ERROR, when they do */
        return (s == UCT_SYNCMEM_EP_CONNECTED) ? UCT_SYNCMEM_EP_ACT_NONE :
               uct_syncmem_ep_fsm_end(state, event);
    case UCT_SYNCMEM_EP_EV_FAIL:
    case UCT_SYNCMEM_EP_EV_CANCEL:
    case UCT_SYNCMEM_EP_EV_DESTROY:
        return uct_syncmem_ep_fsm_end(state, event);
    default:
        return UCT_SYNCMEM_EP_ACT_NONE;
    }
}

int32_t uct_syncmem_ep_fsm_peer_ran(uint32_t first_psn, uint32_t end_psn,
                                    uint32_t rq_psn)
{
    const uint32_t mask = 0xffffffu; /* PSNs are 24 bits */
    uint32_t span       = (end_psn - first_psn) & mask;
    uint32_t ran        = (rq_psn - first_psn) & mask;

    return (ran <= span) ? (int32_t)ran : -1;
}

uint64_t uct_syncmem_ep_fsm_reconnect_deadline(uint64_t started,
                                               uint64_t timeout,
                                               uint64_t stalled)
{
    uint64_t allowed = (stalled > timeout) ? stalled : timeout;

    return (allowed >= UINT64_MAX - started) ? UINT64_MAX : started + allowed;
}

int uct_syncmem_ep_fsm_retry_refusal(uint8_t refused_once, uint16_t refused_sn,
                                     uint16_t sn)
{
    return !refused_once || (refused_sn != sn);
}

uint64_t uct_syncmem_ep_fsm_stall_time(uint64_t timeout, unsigned calm,
                                       uint64_t trouble, uint64_t window,
                                       uint64_t now, unsigned stalls)
{
    unsigned shift = (stalls < UCT_SYNCMEM_STALL_MAX_SHIFT) ? stalls :
                     UCT_SYNCMEM_STALL_MAX_SHIFT;

    if ((calm > 1) && ((trouble == 0) || (now - trouble >= window))) {
        timeout *= calm;
    }
    return timeout << shift;
}
