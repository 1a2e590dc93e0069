/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the endpoint's life as one state machine: its states, the
 * events that move it, the actions it asks for, and what its guards read.
 * The transition function and its table: syncmem_ep_fsm.c. The events come
 * in, and the actions are carried out, in syncmem_reconnect.c.
 */
#ifndef UCT_SYNCMEM_EP_FSM_H_
#define UCT_SYNCMEM_EP_FSM_H_

#include <ucs/type/status.h>
#include <stdint.h>

/* ep->state. The fast path tests CONNECTED alone (one compare). */
typedef enum {
    UCT_SYNCMEM_EP_CONNECTING,          /* the first REQ out, no REP yet */
    UCT_SYNCMEM_EP_CONNECTED,
    UCT_SYNCMEM_EP_RECONN_WAIT_BOTH,    /* REQ out; the old QP flushing */
    UCT_SYNCMEM_EP_RECONN_WAIT_REP,     /* the old QP drained; no REP yet */
    UCT_SYNCMEM_EP_RECONN_DRAIN_NEW,    /* REP in (a new QP); the old QP
                                           still flushing */
    UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME, /* REP in (resume); the old QP still
                                           flushing */
    UCT_SYNCMEM_EP_FAILED,
    UCT_SYNCMEM_EP_STATE_LAST
} uct_syncmem_ep_state_t;

typedef enum {
    UCT_SYNCMEM_EP_EV_REP,            /* the peer answered this REQ */
    UCT_SYNCMEM_EP_EV_DRAINED,        /* the old QP's last request is back */
    UCT_SYNCMEM_EP_EV_ERROR,          /* a failed completion of ep->qp */
    UCT_SYNCMEM_EP_EV_STALL,          /* the watchdog took the QP for wedged */
    UCT_SYNCMEM_EP_EV_TIMER,          /* progress saw the time */
    UCT_SYNCMEM_EP_EV_CONNECT_FAILED, /* CONNECT or FINISH_* failed */
    UCT_SYNCMEM_EP_EV_PORT_DOWN,
    UCT_SYNCMEM_EP_EV_PORT_UP,
    UCT_SYNCMEM_EP_EV_FAIL,           /* fail it with a status */
    UCT_SYNCMEM_EP_EV_CANCEL,         /* flush with UCT_FLUSH_FLAG_CANCEL */
    UCT_SYNCMEM_EP_EV_DESTROY,
    UCT_SYNCMEM_EP_EV_GONE,           /* the peer's iface said it closed */
    UCT_SYNCMEM_EP_EV_LAST
} uct_syncmem_ep_ev_t;

typedef enum {
    UCT_SYNCMEM_EP_ACT_NONE,
    UCT_SYNCMEM_EP_ACT_CONNECT,       /* connect the QP to the REP's */
    UCT_SYNCMEM_EP_ACT_RESEND,        /* the first REQ again, a try fewer */
    UCT_SYNCMEM_EP_ACT_START,         /* spare QP, REQ of the next generation */
    UCT_SYNCMEM_EP_ACT_QP_ERROR,      /* move the QP to error */
    UCT_SYNCMEM_EP_ACT_SEND_REQ,      /* this generation's REQ again */
    UCT_SYNCMEM_EP_ACT_FINISH_NEW_QP, /* connect the spare, post again */
    UCT_SYNCMEM_EP_ACT_FINISH_RESUME, /* resume the old QP, post again */
    UCT_SYNCMEM_EP_ACT_RESTART,       /* the spare reset, a new generation */
    UCT_SYNCMEM_EP_ACT_RETIRE,        /* retire flushed ops, ep->status */
    UCT_SYNCMEM_EP_ACT_FAIL,          /* QP to error, pending, error handler */
    UCT_SYNCMEM_EP_ACT_FAIL_PURGE,    /* ...the ops of unknown outcome too */
    UCT_SYNCMEM_EP_ACT_CANCEL,        /* QP to error, no error handler */
    UCT_SYNCMEM_EP_ACT_CANCEL_PURGE,  /* ...the ops of unknown outcome too */
    UCT_SYNCMEM_EP_ACT_LAST
} uct_syncmem_ep_act_t;

/* What the guards read: every fact a transition depends on besides the
 * state and the event. Filled for every event; each reads its own. */
typedef struct {
    uint8_t reconnect;     /* UCX_SYNCMEM_RECONNECT=y */
    uint8_t recoverable;   /* ERROR: the link broke, or the peer refused a
                              request the first time
                              (uct_syncmem_ep_fsm_retry_refusal) */
    uint8_t peer_gone;     /* ERROR: the peer's iface said it closed (GONE) */
    uint8_t outstanding;   /* requests are in flight */
    uint8_t resume_asked;  /* this generation's REQ asked to resume */
    uint8_t rep_resumed;   /* REP: the peer kept the same QP */
    uint8_t retry_due;     /* TIMER: CM_TIMEOUT passed since the last REQ */
    uint8_t past_deadline; /* TIMER: RECONNECT_TIMEOUT passed since ERROR */
    uint8_t last_try_sent; /* TIMER: a REQ went out at or after the deadline
                              less CM_TIMEOUT */
    uint8_t tries_left;    /* TIMER: CM_RETRIES not all used (connecting) */
} uct_syncmem_ep_fsm_in_t;

/* The transition: *state moves, the action is returned. No side effect. */
uct_syncmem_ep_act_t uct_syncmem_ep_fsm_next(uint8_t *state,
                                             uct_syncmem_ep_ev_t event,
                                             const uct_syncmem_ep_fsm_in_t *in);

/*
 * FINISH_NEW_QP, when the REP says where the peer's responder stopped on
 * its old QP (rq_psn: the PSN it expected next, read once that QP was in
 * the error state, where nothing more runs): of the PSNs first_psn..
 * end_psn - 1 that the requests of unknown outcome took, how many ran.
 * -1: rq_psn lies outside them (24-bit PSNs, modulo), so it says nothing
 * of these requests and none is taken to have run.
 */
int32_t uct_syncmem_ep_fsm_peer_ran(uint32_t first_psn, uint32_t end_psn,
                                    uint32_t rq_psn);

/* Doublings of the stall time, at most (32 times). */
#define UCT_SYNCMEM_STALL_MAX_SHIFT 5
/* 'auto': how many times longer the stall time is while the port shows no
 * link trouble, and for how long (seconds) a sign of trouble counts */
#define UCT_SYNCMEM_STALL_CALM      8
#define UCT_SYNCMEM_TROUBLE_WINDOW  60.0

/*
 * How long the watchdog lets an endpoint's oldest request go without
 * progress before it takes the QP for wedged (STALL); times in any one
 * unit. timeout: RC_STALL_TIMEOUT; doubled for each time the same request
 * stalled before (stalls), UCT_SYNCMEM_STALL_MAX_SHIFT times at most. With
 * 'auto', calm (> 1) times longer unless the port showed link trouble (a
 * port event, a request past its retries or not routed) within window
 * before now; trouble: when it last did, 0: never. The wedge it is there
 * for is Soft-RoCE's after a link flap; without one, a request that waits
 * that long is one a busy device or receiver answers late, and replacing
 * its QP fails the atomics that had run.
 */
uint64_t uct_syncmem_ep_fsm_stall_time(uint64_t timeout, unsigned calm,
                                       uint64_t trouble, uint64_t window,
                                       uint64_t now, unsigned stalls);

/*
 * When a reconnect that started at 'started' gives up (TIMER's
 * past_deadline): timeout (RECONNECT_TIMEOUT) later; timeout UINT64_MAX
 * ('inf'): never. One the stall check started gets at least stalled, the
 * time that stall let the request wait (0: no stall started it). Such a
 * peer was late, not gone (a dead one fails the requests with retry
 * exceeded instead), and what made it late slows its handshake too: in a
 * 24-rank job on two vCPUs the peer's kernel could not resolve our
 * address for 7 s.
 */
uint64_t uct_syncmem_ep_fsm_reconnect_deadline(uint64_t started,
                                               uint64_t timeout,
                                               uint64_t stalled);

/*
 * Whether a request the peer refused as invalid (IBV_WC_REM_INV_REQ_ERR) is
 * worth a reconnect: yes the first time. Our sends stay within the peer's
 * limits (checked when posting and when connecting), so a refusal says the
 * two QPs disagree on where a message starts: Soft-RoCE 6.1 does that after
 * its requester re-sends a packet the netdev dropped (doc/testing.md). A
 * new QP starts both over. The same request refused again (refused_once,
 * refused_sn: the last refusal) is a real one, and fails the endpoint.
 */
int uct_syncmem_ep_fsm_retry_refusal(uint8_t refused_once, uint16_t refused_sn,
                                     uint16_t sn);

/* Names as in the table, for logs and tests. */
extern const char *uct_syncmem_ep_state_names[];
extern const char *uct_syncmem_ep_ev_names[];
extern const char *uct_syncmem_ep_act_names[];

/* Connecting or reconnecting: waiting for the handshake or the old QP. */
static inline int uct_syncmem_ep_state_connecting(uint8_t state)
{
    return (state != UCT_SYNCMEM_EP_CONNECTED) &&
           (state != UCT_SYNCMEM_EP_FAILED);
}

/* Reconnecting: requests of unknown outcome wait in the replay ring. */
static inline int uct_syncmem_ep_state_reconnecting(uint8_t state)
{
    return (state >= UCT_SYNCMEM_EP_RECONN_WAIT_BOTH) &&
           (state <= UCT_SYNCMEM_EP_RECONN_DRAIN_RESUME);
}

#endif
