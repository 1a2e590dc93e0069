/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the transport interface: one per port and worker.
 *
 * The iface owns what its endpoints share: the send CQ, bounce buffers,
 * the pending arbiter and the handshake QP (syncmem_cm.c).
 */
#include "syncmem_ep.h"
#include "syncmem_qp.h"
#include "syncmem_addr.h"

#include <ucs/sys/string.h>
#include <ucs/type/class.h>
#include <ucs/sys/sys.h>
#include <ucs/async/async.h>
#include <ucs/arch/cpu.h>
#include <math.h>


/* One send completion: retire the endpoint's requests up to it. */
static void uct_syncmem_tx_handle(uct_syncmem_iface_t *iface,
                                  const struct ibv_wc *wc)
{
    uct_syncmem_ep_t *ep;
    khiter_t it;

    it = kh_get(uct_syncmem_qp_eps, &iface->qp_eps, wc->qp_num);
    if (ucs_unlikely(it == kh_end(&iface->qp_eps))) {
        return; /* its endpoint was destroyed */
    }

    ep = kh_value(&iface->qp_eps, it);
    if (ucs_likely(wc->status == IBV_WC_SUCCESS)) {
        if ((ep->rtt.state == UCT_SYNCMEM_RTT_PENDING) &&
            UCS_CIRCULAR_COMPARE16((uint16_t)wc->wr_id, >=, ep->rtt.sn)) {
            uct_syncmem_ep_rtt_done(iface, ep);
        }
        uct_syncmem_ep_tx_completed(ep, wc->wr_id, UCS_OK);
    } else {
        uct_syncmem_ep_rtt_failed(iface, ep, wc);
        uct_syncmem_ep_tx_error(ep, wc);
    }
}

/* The completions uct_syncmem_iface_event_arm found in a CQ it meant to
 * arm (syncmem_event.c): handled here, at the next progress. */
static unsigned uct_syncmem_iface_unstash(uct_syncmem_iface_t *iface)
{
    unsigned count = 0;

    if (iface->stashed & UCS_BIT(UCT_SYNCMEM_DIR_RX)) {
        uct_syncmem_rx_handle(iface, &iface->stash[UCT_SYNCMEM_DIR_RX]);
        ++count;
    }
    if (iface->stashed & UCS_BIT(UCT_SYNCMEM_DIR_TX)) {
        uct_syncmem_tx_handle(iface, &iface->stash[UCT_SYNCMEM_DIR_TX]);
        ++count;
    }
    iface->stashed = 0;
    return count;
}

static unsigned uct_syncmem_iface_progress(uct_iface_h tl_iface)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    struct ibv_wc wc[16];
    unsigned count = 0;
    int i, n;

    iface->armed = 0;
    ++iface->rto.polls;
    if (!ucs_list_is_empty(&iface->db_eps)) {
        uct_syncmem_iface_ring_all(iface);
    }
    if (ucs_unlikely(iface->stashed)) {
        count += uct_syncmem_iface_unstash(iface);
    }

    count += uct_syncmem_rx_progress(iface);

    n = ibv_poll_cq(iface->cq, ucs_static_array_size(wc), wc);
    for (i = 0; i < n; ++i) {
        uct_syncmem_tx_handle(iface, &wc[i]);
    }
    count += ucs_max(n, 0);

    /* CM events that found the async lock taken wait for us */
    ucs_async_check_miss(iface->super.worker->async);
    if (ucs_unlikely(iface->cm.connecting > 0)) {
        count += uct_syncmem_iface_connect_progress(iface);
    }
    if (ucs_unlikely(iface->check_due)) {
        uct_syncmem_iface_port_events(iface);
        uct_syncmem_iface_check_deadlines(iface);
    }

    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        ucs_arbiter_dispatch(&iface->arbiter, 1,
                             uct_syncmem_ep_pending_dispatch, NULL);
    }
    /* posted from completions (emulated atomics) and the pending queue */
    if (!ucs_list_is_empty(&iface->db_eps)) {
        uct_syncmem_iface_ring_all(iface);
    }
    iface->db_quiet = 1;
    return count;
}

static ucs_status_t uct_syncmem_iface_flush(uct_iface_h tl_iface,
                                            unsigned flags,
                                            uct_completion_t *comp)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    uct_syncmem_ep_t *ep;
    ucs_status_t status;
    unsigned waiting = 0;

    if (!ucs_list_is_empty(&iface->db_eps)) {
        uct_syncmem_iface_ring_all(iface);
    }

    /* Callers flush the iface to wait until new endpoints are connected
     * (ucx_perftest does), so connecting counts as outstanding. */
    if ((comp == NULL) && (iface->cm.connecting > 0) &&
        !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        UCT_TL_IFACE_STAT_FLUSH_WAIT(&iface->super);
        return UCS_INPROGRESS;
    }

    /* One user completion for all: each endpoint still busy holds one
     * count of it, so it is called once, after the last. */
    ucs_list_for_each(ep, &iface->eps, list) {
        if (!(flags & UCT_FLUSH_FLAG_CANCEL) &&
            ((ep->state == UCT_SYNCMEM_EP_FAILED) ||
             (uct_syncmem_ep_tx_outstanding(ep) == 0))) {
            continue;
        }
        if ((comp != NULL) && (waiting > 0)) {
            ++comp->count;
        }
        status = uct_ep_flush(&ep->super.super, flags, comp);
        if (status == UCS_INPROGRESS) {
            ++waiting;
            continue;
        }
        if ((comp != NULL) && (waiting > 0)) {
            --comp->count;
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            /* no room for the flush request now: counts as busy */
            if (comp == NULL) {
                ++waiting;
            } else if (waiting == 0) {
                return status;
            }
        }
    }

    if (waiting > 0) {
        UCT_TL_IFACE_STAT_FLUSH_WAIT(&iface->super);
        return UCS_INPROGRESS;
    }
    UCT_TL_IFACE_STAT_FLUSH(&iface->super);
    return UCS_OK;
}

static ucs_status_t uct_syncmem_iface_fence(uct_iface_h tl_iface,
                                            unsigned flags)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    uct_syncmem_ep_t *ep;

    ucs_list_for_each(ep, &iface->eps, list) {
        uct_syncmem_ep_fence(&ep->super.super, flags);
    }
    UCT_TL_IFACE_STAT_FENCE(&iface->super);
    return UCS_OK;
}

static ucs_status_t uct_syncmem_iface_query(uct_iface_h tl_iface,
                                            uct_iface_attr_t *attr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    size_t mtu                 = 128ul << iface->port.mtu;
    size_t max_msg             = UCS_GBYTE * 2ul; /* IB message limit */

    uct_base_iface_query(&iface->super, attr);

    attr->device_addr_len = sizeof(uct_syncmem_dev_addr_t);
    attr->iface_addr_len  = sizeof(uct_syncmem_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->cap.flags       = UCT_SYNCMEM_IFACE_FLAG_INTER_NODE |
                            UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                            UCT_IFACE_FLAG_AM_BCOPY |
                            UCT_IFACE_FLAG_AM_ZCOPY |
                            UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY |
                            UCT_IFACE_FLAG_GET_BCOPY |
                            UCT_IFACE_FLAG_GET_ZCOPY |
                            UCT_IFACE_FLAG_PENDING |
                            UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_EP_CHECK |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    if (iface->config.max_inline > 0) {
        attr->cap.flags  |= UCT_IFACE_FLAG_PUT_SHORT;
    }
    if (iface->config.max_inline >= sizeof(uint64_t)) {
        attr->cap.flags  |= UCT_IFACE_FLAG_AM_SHORT;
    }
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV |
                            UCT_IFACE_FLAG_EVENT_FD;

    if (ucs_derived_of(iface->super.md, uct_syncmem_md_t)->dev_attr.atomic_cap !=
        IBV_ATOMIC_NONE) {
        /* add and cswap on the HCA, the rest by CAS: see syncmem_amo.c */
        attr->cap.flags             |= UCT_IFACE_FLAG_ATOMIC_DEVICE;
        attr->cap.atomic32.op_flags  =
        attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD) |
                                       UCS_BIT(UCT_ATOMIC_OP_AND) |
                                       UCS_BIT(UCT_ATOMIC_OP_OR)  |
                                       UCS_BIT(UCT_ATOMIC_OP_XOR);
        attr->cap.atomic32.fop_flags =
        attr->cap.atomic64.fop_flags = attr->cap.atomic64.op_flags |
                                       UCS_BIT(UCT_ATOMIC_OP_SWAP) |
                                       UCS_BIT(UCT_ATOMIC_OP_CSWAP);
    }

    attr->cap.put.max_short       = iface->config.max_inline;
    attr->cap.put.max_bcopy       = iface->config.seg_size;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = max_msg;
    attr->cap.put.opt_zcopy_align = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.put.align_mtu       = mtu;
    attr->cap.put.max_iov         = iface->config.max_sge;

    attr->cap.get.max_bcopy       = iface->config.seg_size;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = max_msg;
    attr->cap.get.opt_zcopy_align = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.get.align_mtu       = mtu;
    attr->cap.get.max_iov         = iface->config.max_sge_rd;

    attr->cap.am.max_short        = iface->config.max_inline;
    attr->cap.am.max_bcopy        = iface->config.seg_size;
    attr->cap.am.min_zcopy        = 0;
    attr->cap.am.max_zcopy        = iface->config.seg_size;
    attr->cap.am.opt_zcopy_align  = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.am.align_mtu        = mtu;
    attr->cap.am.max_hdr          = ucs_min(UCT_SYNCMEM_AM_MAX_HDR,
                                            iface->config.seg_size);
    attr->cap.am.max_iov          = iface->config.max_sge - 1;

    if (iface->config.verify == UCT_SYNCMEM_VERIFY_CRC) {
        /* the CRC trailer: 4 bytes of each message, one SGE of a zcopy */
        if (iface->config.max_inline < sizeof(uint64_t) + UCT_SYNCMEM_CRC_LEN) {
            attr->cap.flags &= ~UCT_IFACE_FLAG_AM_SHORT;
        }
        attr->cap.am.max_short = ucs_max(iface->config.max_inline,
                                         UCT_SYNCMEM_CRC_LEN) -
                                 UCT_SYNCMEM_CRC_LEN;
        attr->cap.am.max_bcopy = iface->config.seg_size - UCT_SYNCMEM_CRC_LEN;
        attr->cap.am.max_zcopy = iface->config.seg_size - UCT_SYNCMEM_CRC_LEN;
        attr->cap.am.max_hdr   = ucs_min(UCT_SYNCMEM_AM_MAX_HDR,
                                         attr->cap.am.max_zcopy);
        attr->cap.am.max_iov   = ucs_max(iface->config.max_sge, 2) - 2;
    }

    attr->latency             = ucs_linear_func_make(
                                  (iface->port.link_layer == IBV_LINK_LAYER_ETHERNET) ?
                                  1.5e-6 : 1e-6, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = uct_syncmem_port_bandwidth(&iface->port);
    attr->overhead            = 75e-9;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t
uct_syncmem_iface_get_device_address(uct_iface_h tl_iface,
                                     uct_device_addr_t *addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    uct_syncmem_dev_addr_pack(&iface->port, (uct_syncmem_dev_addr_t*)addr);
    return UCS_OK;
}

static ucs_status_t uct_syncmem_iface_get_address(uct_iface_h tl_iface,
                                                  uct_iface_addr_t *addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    uct_syncmem_iface_addr_t *iface_addr = (uct_syncmem_iface_addr_t*)addr;

    iface_addr->id     = iface->id;
    iface_addr->cm_qpn = iface->cm.qp->qp_num;
    return UCS_OK;
}

static int uct_syncmem_iface_is_reachable(const uct_iface_h tl_iface,
                                          const uct_device_addr_t *dev_addr,
                                          const uct_iface_addr_t *iface_addr)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);

    uint64_t id;
    uint32_t qpn;

    return (dev_addr != NULL) &&
           uct_syncmem_dev_addr_is_reachable(&iface->port,
                                             (const uct_syncmem_dev_addr_t*)
                                             dev_addr) &&
           ((iface_addr == NULL) ||
            (uct_syncmem_iface_addr_unpack((const uct_syncmem_iface_addr_t*)
                                           iface_addr, &id, &qpn) == UCS_OK));
}

#if UCT_SYNCMEM_HAVE_INTERNAL_OPS
/* UCP asks this (1.15+) and prints the reason when no transport reaches a
 * peer, so say exactly what does not match. */
static int
uct_syncmem_iface_is_reachable_v2(const uct_iface_h tl_iface,
                                  const uct_iface_is_reachable_params_t *params)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    const uct_syncmem_dev_addr_t *dev_addr = NULL;
    const char *why;
    uint64_t id;
    uint32_t qpn;

    if (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR) {
        dev_addr = (const uct_syncmem_dev_addr_t*)params->device_addr;
    }

    why = uct_syncmem_dev_addr_unreachable(&iface->port, dev_addr);
    if ((why == NULL) &&
        (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR) &&
        (params->iface_addr != NULL) &&
        (uct_syncmem_iface_addr_unpack((const uct_syncmem_iface_addr_t*)
                                       params->iface_addr, &id,
                                       &qpn) != UCS_OK)) {
        why = "not a syncmem interface address";
    }
    if ((why == NULL) &&
        (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_SCOPE) &&
        (params->scope == UCT_IFACE_REACHABILITY_SCOPE_DEVICE) &&
        !uct_syncmem_dev_addr_is_port(&iface->port, dev_addr)) {
        why = "the peer is on another port, and the scope is this device";
    }

    if (why == NULL) {
        return 1;
    }

    if ((params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING) &&
        (params->info_string != NULL) && (params->info_string_length > 0)) {
        ucs_snprintf_zero(params->info_string, params->info_string_length,
                          "syncmem %s: %s", iface->super.md->component->name,
                          why);
    }
    return 0;
}
#endif

static void uct_syncmem_iface_desc_init(uct_iface_h tl_iface, void *obj,
                                        uct_mem_h memh)
{
    uct_syncmem_desc_t *desc = obj;

    desc->lkey = uct_syncmem_memh_lkey(memh);
}

static ucs_mpool_ops_t uct_syncmem_op_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

/* The operations made for how this iface keeps its requests
 * (UCT_SYNCMEM_TX_*; the ops table has those without a ring): a replay ring
 * when reconnecting or batching (syncmem_replay.c), and the doorbell when
 * batching. */
static void uct_syncmem_iface_tx_ops(uct_syncmem_iface_t *iface)
{
    uct_iface_ops_t *ops = &iface->super.super.ops;

#define UCT_SYNCMEM_IFACE_TX_OPS(_suffix) \
    ops->ep_put_short = uct_syncmem_ep_put_short##_suffix; \
    ops->ep_put_bcopy = uct_syncmem_ep_put_bcopy##_suffix; \
    ops->ep_put_zcopy = uct_syncmem_ep_put_zcopy##_suffix; \
    ops->ep_get_bcopy = uct_syncmem_ep_get_bcopy##_suffix; \
    ops->ep_get_zcopy = uct_syncmem_ep_get_zcopy##_suffix; \
    ops->ep_am_short  = uct_syncmem_ep_am_short##_suffix;
    if (iface->config.db_batch > 1) {
        UCT_SYNCMEM_IFACE_TX_OPS(_batch)
    } else if (iface->config.reconnect) {
        UCT_SYNCMEM_IFACE_TX_OPS(_ring)
    }
#undef UCT_SYNCMEM_IFACE_TX_OPS
}

/* What the device grants for our QP shape (inline size, SGEs): ask it by
 * creating one QP, so iface_query reports real limits before any ep. */
static ucs_status_t uct_syncmem_iface_probe_qp(uct_syncmem_iface_t *iface)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    struct ibv_qp_init_attr init;
    struct ibv_qp *qp;

    uct_syncmem_qp_init_attr(iface, &init);
    qp = ibv_create_qp(md->pd, &init);
    if ((qp == NULL) && (init.cap.max_inline_data > 0)) {
        init.cap.max_inline_data = 0; /* some devices have no inline */
        qp = ibv_create_qp(md->pd, &init);
    }
    if (qp == NULL) {
        ucs_error("syncmem: cannot create an RC QP on %s:%u (send queue %u,"
                  " sge %u): %m; lower UCX_SYNCMEM_TX_QUEUE_LEN or"
                  " UCX_SYNCMEM_TX_MAX_SGE, check 'ulimit -l'", md->name,
                  iface->port.num, init.cap.max_send_wr,
                  iface->config.max_sge);
        return UCS_ERR_IO_ERROR;
    }

    iface->config.max_inline = ucs_min(init.cap.max_inline_data,
                                       iface->config.max_inline);
    iface->config.max_sge    = ucs_min(init.cap.max_send_sge,
                                       iface->config.max_sge);
    ibv_destroy_qp(qp);
    return UCS_OK;
}

static uct_iface_ops_t uct_syncmem_iface_ops;

/* Before UCX 1.15 all transports share UCT's base table (see compat.h) */
#if UCT_SYNCMEM_HAVE_INTERNAL_OPS
static uct_iface_internal_ops_t uct_syncmem_iface_internal_ops = {
    UCT_SYNCMEM_INTERNAL_OPS_QUERY_FIELDS
    .iface_estimate_perf = uct_base_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    UCT_SYNCMEM_INTERNAL_OPS_ELEM_FIELDS
    .ep_query            = (uct_ep_query_func_t)
            ucs_empty_function_return_unsupported,
    .ep_invalidate       = (uct_ep_invalidate_func_t)
            ucs_empty_function_return_unsupported,
    UCT_SYNCMEM_INTERNAL_OPS_REACHABLE_FIELDS
    UCT_SYNCMEM_INTERNAL_OPS_CONNECTED_FIELDS
    UCT_SYNCMEM_INTERNAL_OPS_DEVICE_FIELDS
    UCT_SYNCMEM_INTERNAL_OPS_SGL_FIELDS
};
#  define UCT_SYNCMEM_IFACE_INTERNAL_OPS (&uct_syncmem_iface_internal_ops)
#else
#  define UCT_SYNCMEM_IFACE_INTERNAL_OPS (&uct_base_iface_internal_ops)
#endif

static void uct_syncmem_iface_inline_wr_init(struct ibv_send_wr *wr,
                                             struct ibv_sge *sge, int num_sge,
                                             enum ibv_wr_opcode opcode)
{
    memset(wr, 0, sizeof(*wr));
    memset(sge, 0, sizeof(*sge) * num_sge);
    wr->opcode  = opcode;
    wr->sg_list = sge;
    wr->num_sge = num_sge;
}

static UCS_CLASS_INIT_FUNC(uct_syncmem_iface_t, uct_md_h tl_md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_syncmem_iface_config_t *config =
            ucs_derived_of(tl_config, uct_syncmem_iface_config_t);
    uct_syncmem_md_t *md = ucs_derived_of(tl_md, uct_syncmem_md_t);
    struct ibv_device_attr *dev = &md->dev_attr;
    uct_iface_mpool_config_t mp_config = UCT_SYNCMEM_IFACE_MPOOL_CONFIG;
    ucs_status_t status;
    uint8_t port_num;

    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("syncmem: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_syncmem_iface_ops,
                              UCT_SYNCMEM_IFACE_INTERNAL_OPS, tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(NULL)
                              UCS_STATS_ARG(UCT_SYNCMEM_NAME));

    status = uct_syncmem_device_parse_name(md, params->mode.device.dev_name,
                                           &port_num);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_syncmem_port_open(md, port_num, config, &self->port);
    if (status != UCS_OK) {
        return status;
    }

    if ((config->tx_queue_len < 4) || (config->tx_cq_len < 4) ||
        (config->rx_queue_len < 4) ||
        (config->tx_moderation < 1) || (config->seg_size < 64) ||
        (config->rc.retry_count > 7) || (config->rc_rnr_retry_count > 7)) {
        ucs_error("syncmem: invalid configuration: TX_QUEUE_LEN, TX_CQ_LEN and"
                  " RX_QUEUE_LEN must be >= 4, TX_MODERATION >= 1, SEG_SIZE >= 64,"
                  " RC_RETRY_COUNT and RC_RNR_RETRY_COUNT <= 7");
        return UCS_ERR_INVALID_PARAM;
    }

    self->id                        = ucs_generate_uuid((uintptr_t)self);
    self->dispatching               = NULL;
    /* TX_QUEUE_LEN is the QP's send queue: one entry is kept for the drain
     * of a failing endpoint (syncmem_ep_tx.c), and with VERIFY one for the
     * read-back a verified put may add; the rest is what an endpoint may
     * have outstanding */
    self->config.tx_queue_len       = ucs_min(config->tx_queue_len,
                                              (unsigned)dev->max_qp_wr) - 1 -
                                      (config->verify !=
                                       UCT_SYNCMEM_VERIFY_NONE);
    self->config.ring_min           = ucs_roundup_pow2(
            ucs_max(ucs_min(config->tx_ring_min, self->config.tx_queue_len),
                    2) + UCT_SYNCMEM_REPLAY_SPARE);
    self->config.idle_rings         = config->tx_idle_rings;
    self->rings                     = 0;
    self->config.tx_signal_every    = ucs_max(1, ucs_min(config->tx_moderation,
                                                  (config->tx_queue_len + 3) / 4));
    self->config.db_batch           = ucs_max(1, ucs_min(config->tx_db_batch,
                                              self->config.tx_queue_len));
    self->config.max_inline         = ucs_min(config->tx_max_inline,
                                              UCT_SYNCMEM_MAX_INLINE);
    self->config.max_sge            = ucs_min(ucs_min(config->tx_max_sge,
                                                      (unsigned)dev->max_sge),
                                              UCT_SYNCMEM_MAX_SGE);
    self->config.seg_size           = config->seg_size;
    self->config.cm_timeout         = config->cm_timeout;
    self->config.cm_retries         = config->cm_retries;
    self->config.cm_max_half_open   = ucs_max(config->cm_max_half_open, 1);
    self->config.keepalive_interval = config->keepalive_interval;
    self->config.rc_retry_count     = uct_syncmem_config_rc_retry_count(
            config->rc.retry_count,
            dev->vendor_id == UCT_SYNCMEM_RXE_VENDOR_ID);
    self->config.rc_rnr_retry_count = config->rc_rnr_retry_count;
    self->config.max_rd_atomic      = ucs_min(16, ucs_min(dev->max_qp_rd_atom,
                                                          dev->max_qp_init_rd_atom));
    self->config.reconnect          = config->reconnect;
    self->config.reconnect_resume   = config->reconnect_resume;
    self->config.reconnect_timeout  = config->reconnect_timeout;
    self->config.op_timeout         = config->op_timeout;
    self->config.stall_calm         = (config->stall_timeout == UCS_TIME_AUTO) ?
                                      UCT_SYNCMEM_STALL_CALM : 1;
    self->link_trouble              = 0;
    uct_syncmem_watchdog_rto_init(self, config);
    self->config.stall_timeout      = uct_syncmem_watchdog_stall_timeout(self,
                                                                      config);
    self->config.stall_auto         = (config->stall_timeout ==
                                       UCS_TIME_AUTO) &&
                                      (self->config.stall_timeout !=
                                       UCS_TIME_INFINITY);
    self->config.check_interval     =
            ucs_min(self->config.op_timeout, self->config.stall_timeout);
    if (self->config.check_interval != UCS_TIME_INFINITY) {
        /* a timeout of 0 must not make the timer fire without pause */
        self->config.check_interval = ucs_max(self->config.check_interval / 4,
                                              ucs_time_from_msec(1));
    }
    self->config.fault_qp_error     = config->fault_qp_error;
    self->config.verify             = config->verify;
    ucs_list_head_init(&self->eps);
    ucs_list_head_init(&self->db_eps);
    uct_syncmem_iface_inline_wr_init(&self->inl_put.wr, self->inl_put.sge, 1,
                                     IBV_WR_RDMA_WRITE);
    uct_syncmem_iface_inline_wr_init(&self->inl_am.wr, self->inl_am.sge, 2,
                                     IBV_WR_SEND_WITH_IMM);
    self->armed = 0;
    self->db_quiet = 1;
    kh_init_inplace(uct_syncmem_qp_eps, &self->qp_eps);
    ucs_arbiter_init(&self->arbiter);

    status = uct_syncmem_iface_event_init(self);
    if (status != UCS_OK) {
        goto err;
    }

    /* a failing endpoint may post one request over its share (the drain),
     * and with VERIFY the read of a verified put may overshoot by one */
    self->cq = ibv_create_cq(md->ctx, config->tx_cq_len + UCT_SYNCMEM_CQ_SLACK +
                             (config->verify != UCT_SYNCMEM_VERIFY_NONE),
                             NULL, self->channel, 0);
    if (self->cq == NULL) {
        ucs_error("syncmem: ibv_create_cq(%u) on %s failed: %m; lower"
                  " UCX_SYNCMEM_TX_CQ_LEN", config->tx_cq_len, md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_channel;
    }
    self->cq_available = config->tx_cq_len;
    self->cq_starved   = 0;
    self->grow_due     = 0;
    self->fence_due    = 0;
    self->fence_waits  = 0;
    self->keeping      = NULL;

    status = uct_syncmem_rx_init(self, params, config);
    if (status != UCS_OK) {
        goto err_cq;
    }

    status = uct_syncmem_iface_probe_qp(self);
    if (status != UCS_OK) {
        goto err_rx;
    }
    /* RDMA reads scatter into at most max_sge_rd entries (0: same as send) */
    self->config.max_sge_rd = dev->max_sge_rd ?
                              ucs_min(self->config.max_sge,
                                      (unsigned)dev->max_sge_rd) :
                              self->config.max_sge;
    /* inline bytes, a scatter list, or an atomic's operands and its sge */
    self->config.replay_data = ucs_align_up_pow2(
            ucs_max(ucs_max(self->config.max_sge * sizeof(struct ibv_sge),
                            2 * sizeof(uint64_t) + sizeof(struct ibv_sge)),
                    self->config.max_inline), 8);
    if ((config->tx_queue_len >= 32768) && self->config.reconnect) {
        ucs_error("syncmem: UCX_SYNCMEM_TX_QUEUE_LEN must be below 32768 with"
                  " UCX_SYNCMEM_RECONNECT=y (16-bit request numbers)");
        status = UCS_ERR_INVALID_PARAM;
        goto err_rx;
    }

    status = uct_syncmem_watchdog_init(self);
    if (status != UCS_OK) {
        goto err_rx;
    }

    /* ops grow 64 at a time (8 KiB): the first flush pays for one chunk,
     * and a worker with few endpoints would not use a larger one */
    status = uct_syncmem_mpool_init(&self->op_mp, sizeof(uct_syncmem_op_t),
                                    UCS_SYS_CACHE_LINE_SIZE, 64,
                                    &uct_syncmem_op_mpool_ops, "syncmem_ops");
    if (status != UCS_OK) {
        goto err_watchdog;
    }

    status = uct_iface_mpool_init(&self->super, &self->tx_mp,
                                  sizeof(uct_syncmem_desc_t) +
                                  self->config.seg_size,
                                  sizeof(uct_syncmem_desc_t),
                                  UCS_SYS_CACHE_LINE_SIZE, &mp_config, 128,
                                  uct_syncmem_iface_desc_init,
                                  "syncmem_tx_bufs");
    if (status != UCS_OK) {
        goto err_op_mp;
    }

    uct_syncmem_iface_tx_ops(self);
    status = uct_syncmem_verify_init(self, config);
    if (status != UCS_OK) {
        goto err_tx_mp;
    }

    uct_syncmem_amo_init(self, config); /* (its table comes later) */
    status = uct_syncmem_cm_init(self);
    if (status != UCS_OK) {
        goto err_verify;
    }
    uct_syncmem_iface_keep_any_update(self); /* none connects yet */

    ucs_debug("syncmem: iface %p on %s id 0x%" PRIx64 " CM QP 0x%x inline %u"
              " sge %u/%u", self, params->mode.device.dev_name, self->id,
              self->cm.qp->qp_num, self->config.max_inline,
              self->config.max_sge, self->config.max_sge_rd);
    uct_syncmem_port_events_add(self);
    return UCS_OK;

err_verify:
    uct_syncmem_verify_cleanup(self);
err_tx_mp:
    ucs_mpool_cleanup(&self->tx_mp, 1);
err_op_mp:
    ucs_mpool_cleanup(&self->op_mp, 1);
err_watchdog:
    uct_syncmem_watchdog_cleanup(self);
err_rx:
    uct_syncmem_rx_cleanup(self);
err_cq:
    ibv_destroy_cq(self->cq);
err_channel:
    ibv_destroy_comp_channel(self->channel);
err:
    ucs_arbiter_cleanup(&self->arbiter);
    kh_destroy_inplace(uct_syncmem_qp_eps, &self->qp_eps);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_syncmem_iface_t)
{
    uct_syncmem_ep_t *ep, *tmp;

    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    uct_syncmem_port_events_remove(self);
    ucs_list_for_each_safe(ep, tmp, &self->eps, list) {
        ucs_warn("syncmem: iface %p closed with ep %p still open", self, ep);
        uct_ep_destroy(&ep->super.super);
    }
    uct_syncmem_cm_cleanup(self);
    uct_syncmem_watchdog_cleanup(self);
    uct_syncmem_verify_cleanup(self);
    uct_syncmem_amo_cleanup(self);
    ucs_mpool_cleanup(&self->tx_mp, 1);
    ucs_mpool_cleanup(&self->op_mp, 1);
    uct_syncmem_rx_cleanup(self);
    ibv_destroy_cq(self->cq);
    ibv_destroy_comp_channel(self->channel);
    ucs_arbiter_cleanup(&self->arbiter);
    kh_destroy_inplace(uct_syncmem_qp_eps, &self->qp_eps);
}

UCS_CLASS_DEFINE(uct_syncmem_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_syncmem_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_syncmem_iface_t, uct_iface_t);


static uct_iface_ops_t uct_syncmem_iface_ops = {
    .ep_put_short             = uct_syncmem_ep_put_short,
    .ep_put_bcopy             = uct_syncmem_ep_put_bcopy,
    .ep_put_zcopy             = uct_syncmem_ep_put_zcopy,
    .ep_get_bcopy             = uct_syncmem_ep_get_bcopy,
    .ep_get_zcopy             = uct_syncmem_ep_get_zcopy,
    .ep_am_short              = uct_syncmem_ep_am_short,
    .ep_am_short_iov          = uct_syncmem_ep_am_short_iov,
    .ep_am_bcopy              = uct_syncmem_ep_am_bcopy,
    .ep_am_zcopy              = uct_syncmem_ep_am_zcopy,
    .ep_atomic64_post         = uct_syncmem_ep_atomic64_post,
    .ep_atomic32_post         = uct_syncmem_ep_atomic32_post,
    .ep_atomic64_fetch        = uct_syncmem_ep_atomic64_fetch,
    .ep_atomic32_fetch        = uct_syncmem_ep_atomic32_fetch,
    .ep_atomic_cswap64        = uct_syncmem_ep_atomic_cswap64,
    .ep_atomic_cswap32        = uct_syncmem_ep_atomic_cswap32,
    .ep_pending_add           = uct_syncmem_ep_pending_add,
    .ep_pending_purge         = uct_syncmem_ep_pending_purge,
    .ep_flush                 = uct_syncmem_ep_flush,
    .ep_fence                 = uct_syncmem_ep_fence,
    .ep_check                 = uct_syncmem_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_syncmem_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_syncmem_ep_t),
    .iface_flush              = uct_syncmem_iface_flush,
    .iface_fence              = uct_syncmem_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_syncmem_iface_progress,
    .iface_event_fd_get       = uct_syncmem_iface_event_fd_get,
    .iface_event_arm          = uct_syncmem_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_syncmem_iface_t),
    .iface_query              = uct_syncmem_iface_query,
    .iface_get_device_address = uct_syncmem_iface_get_device_address,
    .iface_get_address        = uct_syncmem_iface_get_address,
    .iface_is_reachable       = uct_syncmem_iface_is_reachable
};

UCT_TL_DEFINE_ENTRY(&uct_syncmem_component, syncmem,
                    uct_syncmem_query_tl_devices, uct_syncmem_iface_t,
                    UCT_SYNCMEM_CONFIG_PREFIX, uct_syncmem_iface_config_table,
                    uct_syncmem_iface_config_t);

/* Registered when the library loads; libuct_syncmem.so (syncmem_version.c)
 * loads it only into the UCX release it was built for. -z nodelete because
 * UCX 1.13 never unlinks a component from its list. */
UCT_SINGLE_TL_INIT(&uct_syncmem_component, syncmem, ctor,,)
