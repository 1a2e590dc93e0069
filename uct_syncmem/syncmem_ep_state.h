/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - an endpoint's state: its fields, the records of its replay ring
 * and of its reconnect, and the inline accessors that keep its counters and
 * its room to send consistent with each other. Below every file that reads
 * or changes them: the ring (syncmem_replay.c), the machine's actions
 * (syncmem_reconnect.c, syncmem_ep_tx.c), the fast path (syncmem_tx.inl),
 * the watchdog and the endpoint's own file (syncmem_ep.c).
 */
#ifndef UCT_SYNCMEM_EP_STATE_H_
#define UCT_SYNCMEM_EP_STATE_H_

#include "syncmem_iface.h"
#include "syncmem_ep_fsm.h"

/* Entries a ring holds beyond the requests an endpoint may have
 * outstanding (uct_syncmem_ep_tx_limit): the drain when its QP fails
 * (syncmem_ep_tx.c), and VERIFY's read-back. */
#define UCT_SYNCMEM_REPLAY_SPARE    2

/* An endpoint's replay ring (syncmem_replay.c), and the PSNs its requests
 * take. */
typedef struct uct_syncmem_replay_ring {
    uint8_t          *ring;         /* entry of sn: ring + (sn & mask) *
                                       stride; NULL: none kept, or
                                       parked (stride not 0) */
    uint32_t         stride;        /* 0: requests are not kept */
    uint16_t         mask;
    uint8_t          mtu_shift;     /* log2 of the path MTU */
    uint32_t         next_psn;      /* of the next request posted; its
                                       low 24 bits are the PSN */
} uct_syncmem_replay_ring_t;

/* Atomics whose outcome a reconnect lost, not yet retired. */
typedef struct uct_syncmem_replay_lost {
    unsigned         count;
    uint16_t         last_sn;       /* the last of them */
    uint8_t          silent;        /* one without a completion retired:
                                       the next flush reports it */
} uct_syncmem_replay_lost_t;

/* An endpoint's reconnect in progress, and the last resume
 * (syncmem_reconnect.c). */
typedef struct uct_syncmem_reconnect {
    struct ibv_qp    *old_qp;       /* broken, until its flushes are in */
    const char       *no_resume;    /* why this generation's REQ does not
                                       ask to resume (the log's), or NULL */
    uint16_t         fail_sn;       /* first request of unknown outcome */
    uint16_t         old_last_sn;   /* last request posted on old_qp */
    uint32_t         old_peer_qpn;  /* the passive QP old_qp talked to */
    uint16_t         unrun_sn;      /* first request the peer surely did
                                       not run: after old_last_sn, or what
                                       its REP says (RQ_PSN) */
    uint16_t         ran_end;       /* while ran_valid: requests before it
                                       ran (the peer said so), and are
                                       never posted as themselves again */
    uint8_t          ran_valid;     /* ...until they have all completed */
    uint8_t          resume;        /* this generation's REQ asks to
                                       resume */
    uint32_t         old_rq_psn;    /* old_qp's next expected PSN */
    uint16_t         resumed_sn;    /* fail_sn of the last resume */
    uint8_t          resumed_once;  /* ...which is valid */
    uint16_t         refused_sn;    /* the last request the peer refused
                                       as invalid (REM_INV_REQ_ERR) */
    uint8_t          refused_once;  /* ...which is valid */
    ucs_time_t       started;
    ucs_time_t       deadline;
} uct_syncmem_reconnect_t;

/* What the watchdog (syncmem_watchdog.c) saw of an endpoint. */
typedef struct uct_syncmem_ep_watchdog {
    uint16_t         sn;            /* OP_TIMEOUT: acked_sn...; idle:
                                       tx.sn at the last check */
    ucs_time_t       time;          /* ...seen busy since this time */
    ucs_time_t       stall_time;    /* stall: no progress since */
    uint32_t         stall_psn;     /* stall: send PSN seen... */
    uint8_t          stall_psn_valid; /* ...half-way through */
    uint8_t          stalls;        /* stall reconnects of stall_sn */
    uint16_t         stall_sn;      /* the request that stalled */
    uint8_t          idle_checks;   /* checks in a row it posted nothing
                                       since the one before */
} uct_syncmem_ep_watchdog_t;

/* RC_TIMEOUT=auto: an endpoint's round-trip sample (one signalled request
 * in UCT_SYNCMEM_RTT_EVERY, from its post to its completion), the
 * doublings of its QP's RC timeout since its requests last got through,
 * and the exponent its QP has. syncmem_ep_tx.c. */
enum {
    UCT_SYNCMEM_RTT_IDLE,       /* the skip-th next signalled request is
                                   timed */
    UCT_SYNCMEM_RTT_PENDING,    /* request sn is */
    UCT_SYNCMEM_RTT_OFF         /* a fixed RC_TIMEOUT: never */
};

/* Reading the clock costs more than a short put where the TSC is not
 * trusted (a virtual machine: UCS then calls gettimeofday), and a smoothed
 * estimate needs no more: time one signalled request in this many. The
 * count goes on in every state (a decrement and a branch: the whole cost
 * on the send path); a fixed RC_TIMEOUT only counts. */
#define UCT_SYNCMEM_RTT_EVERY 64

typedef struct uct_syncmem_ep_rtt {
    ucs_time_t       posted;        /* when request sn was posted */
    uint32_t         polls;         /* iface->rto.polls then */
    uint16_t         sn;
    uint16_t         next_sn;       /* the signalled request that took
                                       skip to 0 */
    uint8_t          state;         /* UCT_SYNCMEM_RTT_* */
    uint8_t          skip;          /* signalled requests until the next
                                       is timed (if IDLE), counting it; 0:
                                       one is, once posted */
    uint8_t          backoff;       /* retries exceeded or stalls since
                                       its last completed sample */
    uint8_t          exp;           /* its QP's RC timeout exponent */
} uct_syncmem_ep_rtt_t;

struct uct_syncmem_ep {
    uct_base_ep_t        super;
    struct ibv_qp        *qp;
    ucs_list_link_t      list;          /* in iface->eps */
    ucs_arbiter_group_t  arb_group;     /* pending requests */
    uint8_t              state;         /* uct_syncmem_ep_state_t: only
                                           syncmem_ep_fsm.c decides it */
    uint8_t              fence_wait;    /* a fence waits for the requests
                                           up to tx.fence_sn: those after
                                           it are kept, not rung */
    uint8_t              fence_nop;     /* ...and for an empty write that
                                           reports them */
    uint8_t              fence_again;   /* another fence after kept
                                           requests: no room until the
                                           first is over */
    unsigned             fence_amo;     /* emulated atomics from before the
                                           fence not done yet */
    ucs_status_t         status;        /* why the endpoint failed */
    unsigned             amo_inflight;  /* emulated atomics not done yet */
    ucs_list_link_t      db_list;       /* in iface->db_eps, or empty */
    struct {
        int              available;     /* free send queue slots */
        uint16_t         sn;            /* of the last posted request */
        uint16_t         rung_sn;       /* ...of the last on the device, while
                                           some wait for the doorbell (in
                                           db_list): uct_syncmem_ep_rung_sn */
        uint16_t         acked_sn;      /* of the last completed request */
        uint16_t         fence_sn;      /* the last before a fence */
        uint16_t         sig_sn;        /* the next request signalled anyway:
                                           TX_MODERATION after the last
                                           signalled one, or the first
                                           after the endpoint was idle */
        ucs_queue_head_t outstanding;   /* uct_syncmem_op_t, by sn */
    } tx;
    uct_syncmem_replay_ring_t replay;
    uct_syncmem_replay_lost_t lost;
    uct_syncmem_reconnect_t   reconnect;
    uct_syncmem_ep_watchdog_t wd;
    uct_syncmem_ep_rtt_t      rtt;
    struct {
        uint64_t         conn_id;       /* unique within our iface */
        uint64_t         peer_iface_id;
        uint32_t         peer_cm_qpn;
        uct_syncmem_port_t peer;        /* the peer's port, unpacked */
        ucs_time_t       next_retry;
        unsigned         retries_left;
        unsigned         busy_left;     /* tries not counted: BUSY answers */
        uint32_t         peer_rc_qpn;   /* from the REP */
        uint32_t         rep_rq_psn;    /* ...where the replaced passive QP
                                           stopped, if rep_stopped */
        uint8_t          rep_stopped;
        uint8_t          rtu;           /* the REP asked for an RTU */
        uint16_t         gen;           /* bumped by each reconnect */
        volatile uint8_t rep;           /* UCT_SYNCMEM_CM_REP_*: set by the
                                           async handler, taken by progress */
        volatile uint8_t peer_gone;     /* the peer's iface said it closed
                                           (CM GONE): never reconnect */
        volatile uint8_t busy;          /* the last REQ was answered BUSY */
    } cm;
    struct ibv_send_wr   *bad_wr;       /* ibv_post_send's, never read */
};

/* The last request on the device: after it, requests wait in the ring for
 * the doorbell (batching), and only then is rung_sn kept. */
static inline uint16_t
uct_syncmem_ep_rung_sn(uct_syncmem_ep_t *ep)
{
    return ucs_list_is_empty(&ep->db_list) ? ep->tx.sn : ep->tx.rung_sn;
}

/* Requests sent and not yet completed (or purged). */
static inline uint16_t uct_syncmem_ep_tx_outstanding(const uct_syncmem_ep_t *ep)
{
    return ep->tx.sn - ep->tx.acked_sn;
}

/* The RC timeout exponent for ep's next QP (connect, reconnect, resume):
 * the iface's estimate, doubled for each backoff. */
static inline uint8_t uct_syncmem_ep_rc_timeout(const uct_syncmem_iface_t *iface,
                                                const uct_syncmem_ep_t *ep)
{
    return uct_syncmem_rto_backoff_exp(&iface->rto.est, ep->rtt.backoff);
}

/* RC_STALL_TIMEOUT=auto for a QP whose RC timeout is 4.096us * 2^exp: four
 * times its retry window (RC_TIMEOUT * (RC_RETRY_COUNT + 1)), at least
 * UCT_SYNCMEM_STALL_AUTO_MIN: a QP called stalled is one whose retries
 * should have said something long ago. */
#define UCT_SYNCMEM_STALL_AUTO_MIN 2.0 /* seconds */
static inline ucs_time_t
uct_syncmem_iface_stall_auto(const uct_syncmem_iface_t *iface, uint8_t exp)
{
    double window = uct_syncmem_rto_exp_sec(exp) *
                    (iface->config.rc_retry_count + 1);

    return ucs_time_from_sec(ucs_max(UCT_SYNCMEM_STALL_AUTO_MIN, 4 * window));
}

/* RC_STALL_TIMEOUT for ep: the fixed value, or 'auto''s for its QP. */
static inline ucs_time_t
uct_syncmem_ep_stall_timeout(const uct_syncmem_iface_t *iface,
                             const uct_syncmem_ep_t *ep)
{
    return iface->config.stall_auto ?
           uct_syncmem_iface_stall_auto(iface, ep->rtt.exp) :
           iface->config.stall_timeout;
}

/* A new endpoint (before its first REQ): nothing timed yet, no backoff. */
static inline void uct_syncmem_ep_rtt_init(const uct_syncmem_iface_t *iface,
                                           uct_syncmem_ep_t *ep)
{
    ep->rtt.state   = iface->rto.adaptive ? UCT_SYNCMEM_RTT_IDLE :
                                            UCT_SYNCMEM_RTT_OFF;
    ep->rtt.skip    = 1; /* its first request */
    ep->rtt.backoff = 0;
    ep->rtt.exp     = iface->rto.est.exp;
    ep->rtt.polls   = iface->rto.polls; /* its handshake's sample */
}

/* Is the last request outstanding, and was it posted unsignalled? Then
 * nothing would report it (a flush or the watchdog posts a signalled one
 * after it). */
static UCS_F_ALWAYS_INLINE int
uct_syncmem_ep_last_unsignaled(const uct_syncmem_iface_t *iface,
                               const uct_syncmem_ep_t *ep)
{
    return (ep->tx.sn != ep->tx.acked_sn) &&
           ((uint16_t)(ep->tx.sig_sn - iface->config.tx_signal_every) !=
            ep->tx.sn);
}

/* Requests ep may have outstanding now: tx.available is this less those
 * outstanding. None unless connected, so that the room to send says it
 * alone and the fast path never reads the state; whatever changes the
 * limit moves tx.available by as much (the state: uct_syncmem_ep_set_state;
 * the ring: syncmem_replay.c). A replay ring bounds it by what it holds,
 * and grows as more are in flight. */
static inline int uct_syncmem_ep_tx_limit(const uct_syncmem_iface_t *iface,
                                          const uct_syncmem_ep_t *ep)
{
    if ((ep->state != UCT_SYNCMEM_EP_CONNECTED) || ep->fence_wait) {
        return 0;
    } else if (ep->replay.ring == NULL) {
        /* no ring needed; or parked: no room until it is given one */
        return (ep->replay.stride == 0) ? iface->config.tx_queue_len : 0;
    }
    return ucs_min((int)iface->config.tx_queue_len,
                   (int)(ep->replay.mask + 1u) - UCT_SYNCMEM_REPLAY_SPARE);
}

/* Whether the operations without variants (UCT_SYNCMEM_TX_ANY) keep their
 * requests for the doorbell: with batching, and while some endpoint
 * connects or waits for a fence, whose requests wait in its ring until
 * CONNECT or the fence is over (another endpoint's are rung at once then,
 * as TX_DB_BATCH=1 rings each). */
static inline void uct_syncmem_iface_keep_any_update(uct_syncmem_iface_t *iface)
{
    iface->keep_any = (iface->config.db_batch > 1) ||
                      (iface->config.reconnect &&
                       ((iface->cm.connecting + iface->fence_waits) > 0));
}

/* The only place the state changes. The iface watches the handshake's
 * timers only while endpoints connect; the room to send is there only
 * while connected (uct_syncmem_ep_tx_limit). */
static inline void uct_syncmem_ep_set_state(uct_syncmem_ep_t *ep,
                                            uint8_t state)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    int old_limit              = uct_syncmem_ep_tx_limit(iface, ep);

    iface->cm.connecting += uct_syncmem_ep_state_connecting(state) -
                            uct_syncmem_ep_state_connecting(ep->state);
    ep->state             = state;
    ep->tx.available     += uct_syncmem_ep_tx_limit(iface, ep) - old_limit;
    uct_syncmem_iface_keep_any_update(iface);
}

#endif
