/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the endpoint: one RC QP connected to a passive QP of the peer
 * iface (syncmem_cm.c), its send bookkeeping, replay ring, reconnect and
 * watchdog state, and its operations (syncmem_rma.c, syncmem_am.c,
 * syncmem_amo.c, syncmem_ep.c).
 */
#ifndef UCT_SYNCMEM_EP_H_
#define UCT_SYNCMEM_EP_H_

#include "syncmem_iface.h"
#include "syncmem_replay.h"
#include "syncmem_reconnect.h"

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
    uct_syncmem_replay_ring_t replay;   /* syncmem_replay.h */
    uct_syncmem_replay_lost_t lost;
    uct_syncmem_reconnect_t   reconnect; /* syncmem_reconnect.h */
    uct_syncmem_ep_watchdog_t wd;
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

/* syncmem_ep_tx.c */
void uct_syncmem_op_release(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_op_complete(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_ep_connected(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_flush_done(uct_syncmem_op_t *op, ucs_status_t status);
/* The FAIL and CANCEL actions' parts, once the state is FAILED */
void uct_syncmem_ep_qp_to_error(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_notify_failed(uct_syncmem_ep_t *ep, ucs_status_t status);
void uct_syncmem_ep_tx_completed(uct_syncmem_ep_t *ep, uint16_t sn,
                                 ucs_status_t status);
void uct_syncmem_ep_amo_done(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_fence_hold(uct_syncmem_ep_t *ep, int hold);
void uct_syncmem_ep_fence_check(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_fence_start(uct_syncmem_ep_t *ep);

/* syncmem_doorbell.c */
void uct_syncmem_ep_ring(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_ep_keep_slow(uct_syncmem_iface_t *iface,
                                      uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_ep_keep_any(uct_syncmem_iface_t *iface,
                                     uct_syncmem_ep_t *ep,
                                     uct_syncmem_op_t *op);

/* syncmem_ep.c */
UCS_CLASS_DECLARE_NEW_FUNC(uct_syncmem_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_syncmem_ep_t, uct_ep_t);
ucs_arbiter_cb_result_t
uct_syncmem_ep_pending_dispatch(ucs_arbiter_t *arbiter,
                                ucs_arbiter_group_t *group,
                                ucs_arbiter_elem_t *elem, void *arg);

/* Endpoint operations, one file per concern: syncmem_rma.c, syncmem_am.c,
 * syncmem_amo.c, syncmem_ep.c. Those that matter most come in a variant for
 * each way an iface keeps its requests (UCT_SYNCMEM_TX_*, picked by
 * uct_syncmem_iface_tx_ops): no ring (the name alone), _ring, _batch. */
#define UCT_SYNCMEM_EP_TX_OP(_ret, _name, ...) \
    _ret _name(__VA_ARGS__); \
    _ret _name##_ring(__VA_ARGS__); \
    _ret _name##_batch(__VA_ARGS__)
UCT_SYNCMEM_EP_TX_OP(ucs_status_t, uct_syncmem_ep_put_short, uct_ep_h,
                     const void*, unsigned, uint64_t, uct_rkey_t);
UCT_SYNCMEM_EP_TX_OP(ssize_t, uct_syncmem_ep_put_bcopy, uct_ep_h,
                     uct_pack_callback_t, void*, uint64_t, uct_rkey_t);
UCT_SYNCMEM_EP_TX_OP(ucs_status_t, uct_syncmem_ep_put_zcopy, uct_ep_h,
                     const uct_iov_t*, size_t, uint64_t, uct_rkey_t,
                     uct_completion_t*);
UCT_SYNCMEM_EP_TX_OP(ucs_status_t, uct_syncmem_ep_get_bcopy, uct_ep_h,
                     uct_unpack_callback_t, void*, size_t, uint64_t,
                     uct_rkey_t, uct_completion_t*);
UCT_SYNCMEM_EP_TX_OP(ucs_status_t, uct_syncmem_ep_get_zcopy, uct_ep_h,
                     const uct_iov_t*, size_t, uint64_t, uct_rkey_t,
                     uct_completion_t*);
UCT_SYNCMEM_EP_TX_OP(ucs_status_t, uct_syncmem_ep_am_short, uct_ep_h, uint8_t,
                     uint64_t, const void*, unsigned);
ucs_status_t uct_syncmem_ep_am_short_iov(uct_ep_h, uint8_t, const uct_iov_t*,
                                         size_t);
ssize_t uct_syncmem_ep_am_bcopy(uct_ep_h, uint8_t, uct_pack_callback_t, void*,
                                unsigned);
ucs_status_t uct_syncmem_ep_am_zcopy(uct_ep_h, uint8_t, const void*, unsigned,
                                     const uct_iov_t*, size_t, unsigned,
                                     uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic64_post(uct_ep_h, unsigned, uint64_t,
                                          uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_atomic32_post(uct_ep_h, unsigned, uint32_t,
                                          uint64_t, uct_rkey_t);
ucs_status_t uct_syncmem_ep_atomic64_fetch(uct_ep_h, uct_atomic_op_t, uint64_t,
                                           uint64_t*, uint64_t, uct_rkey_t,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic32_fetch(uct_ep_h, uct_atomic_op_t, uint32_t,
                                           uint32_t*, uint64_t, uct_rkey_t,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic_cswap64(uct_ep_h, uint64_t, uint64_t,
                                           uint64_t, uct_rkey_t, uint64_t*,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_atomic_cswap32(uct_ep_h, uint32_t, uint32_t,
                                           uint64_t, uct_rkey_t, uint32_t*,
                                           uct_completion_t*);
ucs_status_t uct_syncmem_ep_flush(uct_ep_h, unsigned, uct_completion_t*);
ucs_status_t uct_syncmem_ep_check(uct_ep_h, unsigned, uct_completion_t*);
#if UCT_SYNCMEM_UCX_SINCE(1, 16)
int uct_syncmem_ep_is_connected(const uct_ep_h,
                                const uct_ep_is_connected_params_t*);
#endif
ucs_status_t uct_syncmem_ep_fence(uct_ep_h, unsigned);
ucs_status_t uct_syncmem_ep_pending_add(uct_ep_h, uct_pending_req_t*, unsigned);
void uct_syncmem_ep_pending_purge(uct_ep_h, uct_pending_purge_callback_t,
                                  void*);

#endif
