/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the doorbell of UCX_SYNCMEM_TX_DB_BATCH (syncmem_tx.inl says
 * when requests are kept): requests written to the replay ring only, and
 * posted as one chain by the next progress, flush or check. A chain the
 * device refuses fails its endpoint, through the endpoint's state machine.
 */
#include "syncmem_ep.h"

/* Doorbell: post what uct_syncmem_ep_keep kept, up to a fence that waits;
 * an endpoint that connects keeps it until CONNECT (its QP cannot send
 * yet), one that reconnects until its requests are posted again (by
 * uct_syncmem_reconnect_finish, with the rest). */
void uct_syncmem_ep_ring(uct_syncmem_ep_t *ep)
{
    if (ep->state != UCT_SYNCMEM_EP_CONNECTED) {
        return;
    } else if (uct_syncmem_replay_ring(ep) != UCS_OK) {
        uct_syncmem_ep_fail(ep, UCS_ERR_IO_ERROR);
    }
}

/* The doorbell's decisions for a request just kept, when the test inlined
 * in uct_syncmem_ep_keep says one may be due or it is to be timed
 * (RC_TIMEOUT=auto), and for each request
 * uct_syncmem_ep_keep_any keeps): the first kept of a batch
 * joins the iface's list; a full batch, endpoint or CQ, or an armed iface,
 * rings. UCS_OK: the request is taken (a chain the device refuses fails
 * the endpoint, which fails the request). Returned so that the caller's
 * call is its last, which leaves its fast path no frame to keep. */
ucs_status_t uct_syncmem_ep_keep_slow(uct_syncmem_iface_t *iface,
                                      uct_syncmem_ep_t *ep)
{
    if (ep->rtt.skip == 0) {
        uct_syncmem_ep_rtt_post(ep); /* timed from when it is kept */
    }
    if (ucs_list_is_empty(&ep->db_list)) {
        /* the first kept: all before it are on the device */
        ep->tx.rung_sn = ep->tx.sn - 1;
        ucs_list_add_tail(&iface->db_eps, &ep->db_list);
    }
    if (((uint16_t)(ep->tx.sn - ep->tx.rung_sn) >= iface->config.db_batch) ||
        ((ep->tx.available <= 0) && (uct_syncmem_replay_grow(ep) != UCS_OK)) ||
        (iface->cq_available <= 0) ||
        iface->armed) {
        uct_syncmem_ep_ring(ep);
    }
    return UCS_OK;
}

/* The doorbell's keep for the operations that test for batching at run
 * time (UCT_SYNCMEM_TX_ANY): out of line, so that its test is inlined in
 * the batched variants only (uct_syncmem_ep_keep); here it is made whole. */
ucs_status_t uct_syncmem_ep_keep_any(uct_syncmem_iface_t *iface,
                                     uct_syncmem_ep_t *ep,
                                     uct_syncmem_op_t *op)
{
    if (op != NULL) {
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }
    return uct_syncmem_ep_keep_slow(iface, ep);
}

void uct_syncmem_iface_ring_all(uct_syncmem_iface_t *iface)
{
    uct_syncmem_ep_t *ep, *tmp;

    ucs_list_for_each_safe(ep, tmp, &iface->db_eps, db_list) {
        uct_syncmem_ep_ring(ep);
    }
}
