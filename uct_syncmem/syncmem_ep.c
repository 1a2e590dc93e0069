/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the endpoint object: lifetime, flush, fence, check, pending
 * queue (its requests' completions: syncmem_ep_tx.c).
 *
 * An endpoint is one RC QP connected to a passive QP of the peer iface
 * (syncmem_cm.c). It takes operations from the moment it exists: until the
 * handshake completes they are kept in its replay ring (up to TX_QUEUE_LEN;
 * then UCS_ERR_NO_RESOURCE and the pending queue) and posted, in order, at
 * CONNECT; a handshake that fails completes them with its error. With
 * neither RECONNECT nor TX_DB_BATCH there is no ring: operations answer
 * UCS_ERR_NO_RESOURCE until connected.
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"
#include "syncmem_addr.h"
#include "syncmem_tx.inl"

#include <ucs/async/async.h>
#include <string.h>


static UCS_CLASS_INIT_FUNC(uct_syncmem_ep_t, const uct_ep_params_t *params)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(params->iface,
                                                uct_syncmem_iface_t);
    const uct_syncmem_iface_addr_t *iface_addr;
    ucs_status_t status;
    khiter_t it;
    int ret;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    if (!ucs_test_all_flags(params->field_mask,
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("syncmem: endpoints connect to an iface: give its device"
                  " and iface addresses");
        return UCS_ERR_INVALID_PARAM;
    }

    status = uct_syncmem_dev_addr_unpack(
            (const uct_syncmem_dev_addr_t*)params->dev_addr, &self->cm.peer);
    if ((status != UCS_OK) ||
        !uct_syncmem_dev_addr_is_reachable(
                &iface->port, (const uct_syncmem_dev_addr_t*)params->dev_addr)) {
        ucs_error("syncmem: cannot reach the device address given to ep_create"
                  " from %s:%u (garbled, foreign or another network)",
                  ucs_derived_of(iface->super.md, uct_syncmem_md_t)->name,
                  iface->port.num);
        return UCS_ERR_UNREACHABLE;
    }

    iface_addr             = (const uct_syncmem_iface_addr_t*)params->iface_addr;
    self->cm.peer_iface_id = iface_addr->id;
    self->cm.peer_cm_qpn   = iface_addr->cm_qpn;
    self->state            = UCT_SYNCMEM_EP_CONNECTING; /* the first state */
    self->status           = UCS_OK;
    self->fence_wait       = 0;
    self->fence_nop        = 0;
    self->fence_again      = 0;
    self->fence_amo        = 0;
    self->tx.fence_sn      = 0;
    self->amo_inflight     = 0;
    self->tx.sn            = 0;
    self->tx.acked_sn      = 0;
    self->tx.sig_sn        = 1; /* idle: the first request is signalled */
    self->tx.rung_sn       = 0;
    self->cm.gen           = 0;
    self->cm.peer_gone     = 0;
    ucs_list_head_init(&self->db_list);
    ucs_queue_head_init(&self->tx.outstanding);
    ucs_arbiter_group_init(&self->arb_group);
    memset(&self->reconnect, 0, sizeof(self->reconnect));
    memset(&self->wd, 0, sizeof(self->wd));
    uct_syncmem_ep_rtt_init(iface, self);

    uct_syncmem_replay_ep_init(self);
    self->tx.available     = uct_syncmem_ep_tx_limit(iface, self);

    status = uct_syncmem_qp_create(iface, iface->cq, &self->qp);
    if (status != UCS_OK) {
        goto err_fault;
    }

    it = kh_put(uct_syncmem_qp_eps, &iface->qp_eps, self->qp->qp_num, &ret);
    if (ret < 0) {
        status = UCS_ERR_NO_MEMORY;
        goto err_qp;
    }
    kh_value(&iface->qp_eps, it) = self;

    /* the async handler walks iface->eps */
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    ucs_list_add_tail(&iface->eps, &self->list);
    status = uct_syncmem_cm_connect(self);
    if (status != UCS_OK) {
        ucs_list_del(&self->list);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    if (status != UCS_OK) {
        goto err_hash;
    }
    ++iface->cm.connecting; /* as the state machine counts CONNECTING */
    uct_syncmem_iface_keep_any_update(iface);

    ucs_debug("syncmem: ep %p QP 0x%x connecting to iface 0x%" PRIx64, self,
              self->qp->qp_num, self->cm.peer_iface_id);
    return UCS_OK;

err_hash:
    kh_del(uct_syncmem_qp_eps, &iface->qp_eps, it);
err_qp:
    ibv_destroy_qp(self->qp);
err_fault:
    uct_syncmem_replay_ep_cleanup(self);
    ucs_arbiter_group_cleanup(&self->arb_group);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_syncmem_ep_t)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(self->super.super.iface,
                                                uct_syncmem_iface_t);
    khiter_t it;
    uct_syncmem_op_t *op;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    uct_syncmem_cm_disconnect(self);
    ucs_list_del(&self->list);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    uct_syncmem_ep_event(self, UCT_SYNCMEM_EP_EV_DESTROY);
    ucs_list_del(&self->db_list); /* requests not rung: canceled below */

    it = kh_get(uct_syncmem_qp_eps, &iface->qp_eps, self->qp->qp_num);
    if (it != kh_end(&iface->qp_eps)) {
        kh_del(uct_syncmem_qp_eps, &iface->qp_eps, it);
    }
    ucs_arbiter_group_desched(&iface->arbiter, &self->arb_group);
    ucs_arbiter_group_cleanup(&self->arb_group);

    /* What is still outstanding will never be reported by the CQ. */
    uct_syncmem_ep_fence_hold(self, 0);
    iface->cq_available += uct_syncmem_ep_tx_outstanding(self);
    ucs_queue_for_each_extract(op, &self->tx.outstanding, queue, 1) {
        op->handler(op, UCS_ERR_CANCELED);
    }

    uct_syncmem_replay_ep_cleanup(self); /* and the QP it replaced, if any */
    ibv_destroy_qp(self->qp);
}

UCS_CLASS_DEFINE(uct_syncmem_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_syncmem_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_syncmem_ep_t, uct_ep_t);

static int uct_syncmem_ep_has_outstanding(uct_syncmem_iface_t *iface,
                                          uct_syncmem_ep_t *ep)
{
    return uct_syncmem_ep_tx_outstanding(ep) != 0;
}

ucs_status_t uct_syncmem_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_op_t *op;
    ucs_status_t status;

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Nothing new may start; what is in flight ends as soon as the QP
         * has flushed it (or now, while reconnecting: nothing is). */
        uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_CANCEL);
    } else if (ep->state == UCT_SYNCMEM_EP_FAILED) {
        return ep->status;
    } else if (!ucs_arbiter_group_is_empty(&ep->arb_group) &&
               (iface->dispatching != ep)) {
        uct_syncmem_ep_ring(ep);
        return UCS_ERR_NO_RESOURCE; /* after what is pending */
    }

    if (!uct_syncmem_ep_has_outstanding(iface, ep)) {
        return (ep->replay.stride == 0) ? UCS_OK :
                                          uct_syncmem_ep_lost_status(ep);
    }

    /* The last request is unsignalled: nothing would ever report it. Kept
     * while connecting or behind a fence, it is signalled when posted;
     * else a full ring that may grow grows for the empty write (the ring
     * is full whenever the last operation took its last room). */
    if (uct_syncmem_ep_last_unsignaled(iface, ep) &&
        ((ep->state == UCT_SYNCMEM_EP_CONNECTING) ||
         (ep->fence_wait && (ep->tx.sn != ep->tx.fence_sn)))) {
        uct_syncmem_replay_entry(&ep->replay, ep->tx.sn)->send_flags |=
                IBV_SEND_SIGNALED;
        ep->tx.sig_sn = ep->tx.sn + iface->config.tx_signal_every;
    } else if (uct_syncmem_ep_last_unsignaled(iface, ep) &&
               (ep->state == UCT_SYNCMEM_EP_CONNECTED) && !ep->fence_wait) {
        /* (a fence that waits posts its own empty write: fence_nop) */
        if (!uct_syncmem_ep_tx_room(iface, ep)) {
            return uct_syncmem_ep_check_tx(iface, ep); /* says why not */
        }
        status = uct_syncmem_ep_post_nop(iface, ep);
        if (status != UCS_OK) {
            return status;
        }
    }
    if (ep->state == UCT_SYNCMEM_EP_CONNECTED) {
        uct_syncmem_ep_ring(ep); /* a flush waits: nothing may linger */
    }

    if (comp != NULL) {
        /* retired with the last posted request, or by its flush error */
        op = uct_syncmem_op_get(iface, comp, uct_syncmem_op_flush_done);
        if (op == NULL) {
            return UCS_ERR_NO_RESOURCE;
        }
        op->ep = ep;
        op->sn = ep->tx.sn;
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }

    UCT_TL_EP_STAT_FLUSH_WAIT(&ep->super);
    return UCS_INPROGRESS;
}

/*
 * Keepalive: is the peer still there? With requests in flight the answer
 * comes anyway; otherwise send an empty write. If the peer process died,
 * its QP is gone, the write is never acknowledged, and after the RC retries
 * (UCX_SYNCMEM_RC_TIMEOUT * (RC_RETRY_COUNT + 1)) the endpoint fails with
 * UCS_ERR_ENDPOINT_TIMEOUT through the iface error handler.
 */
#if UCT_SYNCMEM_UCX_SINCE(1, 16)
/* UCP (1.16+) asks this to reuse an endpoint for a peer it meets again:
 * true only if ep was created to exactly that port and iface. */
int uct_syncmem_ep_is_connected(const uct_ep_h tl_ep,
                                const uct_ep_is_connected_params_t *params)
{
    uct_syncmem_ep_t *ep = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    const uct_syncmem_iface_addr_t *iface_addr;

    if (ep->state == UCT_SYNCMEM_EP_FAILED) {
        return 0;
    }

    if ((params->field_mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) &&
        !uct_syncmem_dev_addr_is_port(&ep->cm.peer,
                                      (const uct_syncmem_dev_addr_t*)
                                      params->device_addr)) {
        return 0;
    }

    if (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) {
        iface_addr = (const uct_syncmem_iface_addr_t*)params->iface_addr;
        return (iface_addr != NULL) &&
               (iface_addr->id == ep->cm.peer_iface_id) &&
               (iface_addr->cm_qpn == ep->cm.peer_cm_qpn);
    }

    /* we have no endpoint addresses: an ep address is never ours */
    return !(params->field_mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR);
}
#endif

ucs_status_t uct_syncmem_ep_check(uct_ep_h tl_ep, unsigned flags,
                                  uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    ucs_status_t status;

    if ((ep->state != UCT_SYNCMEM_EP_CONNECTED) ||
        uct_syncmem_ep_has_outstanding(iface, ep) ||
        !uct_syncmem_ep_tx_room(iface, ep)) {
        return UCS_OK; /* failing, connecting, or already being checked */
    }

    status = uct_syncmem_ep_post_nop(iface, ep);
    uct_syncmem_ep_ring(ep);
    return status;
}

/*
 * uct_ep_fence: nothing posted after it runs at the target before all that
 * was posted before it has. RC runs writes and sends in order, so a fence
 * after those alone costs nothing. Reads and atomics (every one of which
 * keeps an op in tx.outstanding) may be overtaken, and an emulated atomic
 * is more than one request: its next step is posted from its last one's
 * completion, after whatever was posted meanwhile. So while any of those
 * is in flight the fence waits for everything before it to complete (as
 * UCX's strong fence does), and what is posted after it is taken all the
 * same, kept in the ring and rung once it is over (uct_syncmem_ep_fence_
 * start). IBV_SEND_FENCE is not used: Soft-RoCE's requester can miss the
 * wakeup of a fenced request whose predecessors complete as it checks
 * them, and then sends nothing until another post (a stall of the
 * watchdog's length, seen in syncmem_fence_test).
 */
ucs_status_t uct_syncmem_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);

    UCT_TL_EP_STAT_FENCE(&ep->super);
    uct_syncmem_ep_fence_start(ep);
    if (ep->fence_wait) {
        uct_syncmem_ep_ring(ep); /* what the doorbell keeps before it */
        uct_syncmem_ep_fence_nop(iface, ep);
    }
    return UCS_OK;
}

ucs_status_t uct_syncmem_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                        unsigned flags)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);

    if (ep->state == UCT_SYNCMEM_EP_CONNECTED) {
        uct_syncmem_ep_ring(ep); /* the caller waits for room */
    }
    if ((ep->state == UCT_SYNCMEM_EP_FAILED) ||
        (ucs_arbiter_group_is_empty(&ep->arb_group) &&
         uct_syncmem_ep_tx_room(iface, ep))) {
        return UCS_ERR_BUSY; /* try the operation now */
    }

    uct_pending_req_arb_group_push(&ep->arb_group, req);
    if (uct_syncmem_ep_has_tx_res(iface, ep)) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    }
    UCT_TL_EP_STAT_PEND(&ep->super);
    return UCS_OK;
}

ucs_arbiter_cb_result_t uct_syncmem_ep_pending_dispatch(ucs_arbiter_t *arbiter,
                                                        ucs_arbiter_group_t *group,
                                                        ucs_arbiter_elem_t *elem,
                                                        void *arg)
{
    uct_syncmem_ep_t *ep       = ucs_container_of(group, uct_syncmem_ep_t,
                                                  arb_group);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_pending_req_t *req     = ucs_container_of(elem, uct_pending_req_t,
                                                  priv);
    ucs_status_t status;

    if (uct_syncmem_ep_state_connecting(ep->state)) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP; /* until connected */
    }
    if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) && (iface->cq_available <= 0)) {
        return UCS_ARBITER_CB_RESULT_STOP;          /* nobody can send */
    }
    if ((ep->state == UCT_SYNCMEM_EP_CONNECTED) &&
        !uct_syncmem_ep_tx_room(iface, ep)) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP; /* until it completes */
    }

    iface->dispatching = ep;
    status             = req->func(req);
    iface->dispatching = NULL;

    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    }
    return uct_syncmem_ep_has_tx_res(iface, ep) ?
           UCS_ARBITER_CB_RESULT_RESCHED_GROUP :
           UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
}

static ucs_arbiter_cb_result_t
uct_syncmem_ep_pending_purge_cb(ucs_arbiter_t *arbiter,
                                ucs_arbiter_group_t *group,
                                ucs_arbiter_elem_t *elem, void *arg)
{
    uct_purge_cb_args_t *args = arg;
    uct_pending_req_t *req    = ucs_container_of(elem, uct_pending_req_t,
                                                 priv);

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_syncmem_ep_pending_purge(uct_ep_h tl_ep,
                                  uct_pending_purge_callback_t cb, void *arg)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    uct_purge_cb_args_t args   = { cb, arg };

    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group,
                            uct_syncmem_ep_pending_purge_cb, &args);
}
