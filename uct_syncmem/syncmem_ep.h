/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the endpoint: one RC QP connected to a passive QP of the peer
 * iface (syncmem_cm.c), and its operations (syncmem_rma.c, syncmem_am.c,
 * syncmem_amo.c, syncmem_ep.c). Its fields, send bookkeeping, replay ring,
 * reconnect and watchdog records are in syncmem_ep_state.h, below the
 * files that keep them.
 */
#ifndef UCT_SYNCMEM_EP_H_
#define UCT_SYNCMEM_EP_H_

#include "syncmem_ep_state.h"
#include "syncmem_replay.h"
#include "syncmem_reconnect.h"

/* syncmem_ep_tx.c */
void uct_syncmem_op_release(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_op_complete(uct_syncmem_op_t *op, ucs_status_t status);
void uct_syncmem_ep_connected(uct_syncmem_ep_t *ep);
void uct_syncmem_op_flush_done(uct_syncmem_op_t *op, ucs_status_t status);
/* The FAIL and CANCEL actions' parts, once the state is FAILED */
void uct_syncmem_ep_qp_to_error(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_notify_failed(uct_syncmem_ep_t *ep, ucs_status_t status);
void uct_syncmem_ep_tx_completed(uct_syncmem_ep_t *ep, uint16_t sn,
                                 ucs_status_t status);
void uct_syncmem_ep_amo_done(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_fence_hold(uct_syncmem_ep_t *ep, int hold);
void uct_syncmem_ep_fence_check(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_fence_start(uct_syncmem_ep_t *ep);
/* RC_TIMEOUT=auto: ep's count of signalled requests ran out (time the one
 * just posted?), its timed request completed (its round trip is a
 * sample), one of its requests failed (a retry exceeded backs off), it
 * stalled (backs off too), its first handshake answered (a sample) */
ucs_status_t uct_syncmem_ep_rtt_post(uct_syncmem_ep_t *ep);
void uct_syncmem_ep_rtt_done(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep);
void uct_syncmem_ep_rtt_failed(uct_syncmem_iface_t *iface,
                               uct_syncmem_ep_t *ep, const struct ibv_wc *wc);
void uct_syncmem_ep_rtt_backoff(uct_syncmem_iface_t *iface,
                                uct_syncmem_ep_t *ep, const char *why);
void uct_syncmem_ep_rtt_handshake(uct_syncmem_iface_t *iface,
                                  uct_syncmem_ep_t *ep);

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
