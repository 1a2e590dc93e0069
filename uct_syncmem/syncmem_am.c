/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - active messages: RC send/receive through a shared receive
 * queue per iface.
 *
 * The AM id travels in the immediate data, so a message costs no header
 * bytes. Every RC QP of the iface (active and passive) takes its receive
 * buffers from one SRQ, refilled from progress in batches.
 *
 * Receiver not ready: when the SRQ is empty, the receiving HCA answers RNR
 * and the sender's HCA retries after the RNR timer, forever by default
 * (UCX_SYNCMEM_RC_RNR_RETRY_COUNT=7). That is flow control in hardware: a
 * slow receiver slows its senders down, and no message is ever dropped.
 * Credits in software would cost a header and a return path for nothing
 * more.
 *
 * Receive descriptor layout (rx_headroom is what the user asked for, e.g.
 * UCP's receive descriptor):
 *
 *   | uct_syncmem_rx_desc_t | uct_recv_desc_t* | rx_headroom | payload |
 *   ^ desc                                     ^ headroom    ^ data
 */
#include "syncmem_ep.h"
#include "syncmem_tx.inl"

#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include <arpa/inet.h>


static UCS_F_ALWAYS_INLINE void *
uct_syncmem_rx_data(uct_syncmem_iface_t *iface, uct_syncmem_rx_desc_t *desc)
{
    return UCS_PTR_BYTE_OFFSET(desc, iface->rx.payload_offset);
}

/* Release of a descriptor the user kept (uct_iface_release_desc). */
void uct_syncmem_rx_release_desc(uct_recv_desc_t *self, void *desc)
{
    uct_syncmem_iface_t *iface = ucs_container_of(self, uct_syncmem_iface_t,
                                                  rx.release_desc);

    ucs_mpool_put_inline(UCS_PTR_BYTE_OFFSET(desc,
                                             -(ptrdiff_t)iface->rx.headroom_offset));
}

static void uct_syncmem_rx_desc_init(uct_iface_h tl_iface, void *obj,
                                     uct_mem_h memh)
{
    uct_syncmem_rx_desc_t *desc = obj;

    desc->lkey = uct_syncmem_memh_lkey(memh);
}

/* Posts up to max receive buffers to the SRQ, as one chain. */
unsigned uct_syncmem_rx_post(uct_syncmem_iface_t *iface, unsigned max)
{
    struct ibv_recv_wr wrs[max], *bad_wr;
    struct ibv_sge sges[max];
    uct_syncmem_rx_desc_t *desc;
    unsigned count;
    int ret;

    for (count = 0; count < max; ++count) {
        desc = ucs_mpool_get_inline(&iface->rx.mp);
        if (desc == NULL) {
            break;
        }
        sges[count].addr   = (uintptr_t)uct_syncmem_rx_data(iface, desc);
        sges[count].length = iface->config.seg_size;
        sges[count].lkey   = desc->lkey;
        wrs[count].wr_id   = (uintptr_t)desc;
        wrs[count].sg_list = &sges[count];
        wrs[count].num_sge = 1;
        wrs[count].next    = &wrs[count + 1];
    }

    if (count == 0) {
        return 0;
    }

    wrs[count - 1].next = NULL;
    ret = ibv_post_srq_recv(iface->rx.srq, wrs, &bad_wr);
    if (ret) {
        ucs_fatal("syncmem: ibv_post_srq_recv() failed: %s", strerror(ret));
    }
    iface->rx.available -= count;
    return count;
}

/*
 * Whether an AM is one we already have (syncmem_rx_dedup.c). Notes the
 * last request number of each QP, which that needs.
 */
static UCS_F_ALWAYS_INLINE int
uct_syncmem_rx_check_sn(uct_syncmem_iface_t *iface, uint32_t qpn, uint16_t sn)
{
    khiter_t it;
    int ret;

    if (ucs_unlikely(kh_size(&iface->rx.replaced) != 0) &&
        uct_syncmem_rx_is_replayed(iface, qpn, sn)) {
        return 1;
    }

    it = kh_put(uct_syncmem_qp_sn, &iface->rx.last_sn, qpn, &ret);
    if (ucs_likely(ret >= 0)) {
        kh_value(&iface->rx.last_sn, it) = sn;
    }
    return 0;
}

/* A peer sent an AM id out of range: said at most once a second, since a
 * peer can send any number. */
static UCS_F_NOINLINE void uct_syncmem_rx_bad_id(uint32_t qpn, unsigned id)
{
    static ucs_time_t next_report;
    static unsigned dropped;
    ucs_time_t now = ucs_get_time();

    ++dropped;
    if (now >= next_report) {
        ucs_diag("syncmem: dropped %u active message(s) of an id out of"
                 " range (the last: id %u from QP 0x%x; at most %u)", dropped,
                 id, qpn, (unsigned)UCT_AM_ID_MAX - 1);
        next_report = now + ucs_time_from_sec(1.0);
        dropped     = 0;
    }
}

/* One receive completion: hand the message to its handler. */
void uct_syncmem_rx_handle(uct_syncmem_iface_t *iface, const struct ibv_wc *wc)
{
    uct_syncmem_rx_desc_t *desc = (uct_syncmem_rx_desc_t*)wc->wr_id;
    void *data                  = uct_syncmem_rx_data(iface, desc);
    unsigned length             = wc->byte_len;
    ucs_status_t status;
    uint32_t imm;

    ++iface->rx.available;
    if (ucs_unlikely((wc->status != IBV_WC_SUCCESS) ||
                     !(wc->wc_flags & IBV_WC_WITH_IMM))) {
        if (wc->status != IBV_WC_WR_FLUSH_ERR) {
            ucs_diag("syncmem: receive on QP 0x%x failed: %s", wc->qp_num,
                     ibv_wc_status_str(wc->status));
        }
        ucs_mpool_put_inline(desc);
        return;
    }

    imm = ntohl(wc->imm_data);
    if (ucs_unlikely((imm & UCT_SYNCMEM_AM_IMM_ID_MASK) >= UCT_AM_ID_MAX)) {
        /* no sender of ours does this, and UCT would index past its
         * handler table (or abort in its assertion) */
        uct_syncmem_rx_bad_id(wc->qp_num, imm & UCT_SYNCMEM_AM_IMM_ID_MASK);
        ucs_mpool_put_inline(desc);
        return;
    }
    if (ucs_unlikely(uct_syncmem_rx_check_sn(iface, wc->qp_num,
                                             imm >> UCT_SYNCMEM_AM_IMM_SN_SHIFT))) {
        ucs_mpool_put_inline(desc); /* had it before the sender reconnected */
        return;
    }
    if (ucs_unlikely(imm & UCT_SYNCMEM_AM_IMM_FLAG_CRC) &&
        !uct_syncmem_verify_am_rx(iface, wc, data, &length)) {
        ucs_mpool_put_inline(desc); /* corrupted: dropped, counted, logged */
        return;
    }

    status = uct_iface_invoke_am(&iface->super,
                                 imm & UCT_SYNCMEM_AM_IMM_ID_MASK, data,
                                 length, UCT_CB_PARAM_FLAG_DESC);
    if (status == UCS_OK) {
        ucs_mpool_put_inline(desc);
    } else {
        /* the user keeps it; uct_iface_release_desc finds us here */
        uct_recv_desc(UCS_PTR_BYTE_OFFSET(desc, iface->rx.headroom_offset)) =
                &iface->rx.release_desc;
    }
}

unsigned uct_syncmem_rx_progress(uct_syncmem_iface_t *iface)
{
    struct ibv_wc wc[16];
    int i, n;

    n = ibv_poll_cq(iface->rx.cq, ucs_static_array_size(wc), wc);
    /* after polling: a QP that replaced another is known before its first
     * message is handled (the link comes before the handshake answer) */
    if (ucs_unlikely(iface->rx.have_links)) {
        uct_syncmem_rx_links_apply(iface);
    }
    for (i = 0; i < n; ++i) {
        uct_syncmem_rx_handle(iface, &wc[i]);
    }

    if (iface->rx.available >= iface->rx.batch) {
        uct_syncmem_rx_post(iface, iface->rx.batch);
    }
    return ucs_max(n, 0);
}

ucs_status_t uct_syncmem_rx_init(uct_syncmem_iface_t *iface,
                                 const uct_iface_params_t *params,
                                 const uct_syncmem_iface_config_t *config)
{
    uct_syncmem_md_t *md   = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    size_t headroom        = UCT_IFACE_PARAM_VALUE(params, rx_headroom,
                                                   RX_HEADROOM, 0);
    uct_iface_mpool_config_t mp_config = UCT_SYNCMEM_IFACE_MPOOL_CONFIG;
    struct ibv_srq_init_attr srq_attr  = {};
    size_t elem_size, align, align_offset;
    ucs_status_t status;

    iface->rx.headroom_offset      = sizeof(uct_syncmem_rx_desc_t) +
                                     sizeof(uct_recv_desc_t*);
    iface->rx.payload_offset       = iface->rx.headroom_offset + headroom;
    iface->rx.release_desc.cb      = uct_syncmem_rx_release_desc;
    iface->rx.queue_len            = ucs_min(config->rx_queue_len,
                                             (unsigned)md->dev_attr.max_srq_wr);
    iface->rx.batch                = ucs_max(1, ucs_min(32,
                                                        iface->rx.queue_len / 4));
    iface->rx.available            = iface->rx.queue_len;
    iface->rx.links                = NULL;
    iface->rx.have_links           = 0;
    kh_init_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_init_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
    elem_size                      = iface->rx.payload_offset +
                                     iface->config.seg_size;

    status = uct_iface_param_am_alignment(params, elem_size,
                                          iface->rx.payload_offset,
                                          iface->rx.payload_offset, &align,
                                          &align_offset);
    if (status != UCS_OK) {
        goto err_dedup;
    }

    status = uct_iface_mpool_init(&iface->super, &iface->rx.mp, elem_size,
                                  align_offset, align, &mp_config,
                                  iface->rx.batch * 2, uct_syncmem_rx_desc_init,
                                  "syncmem_rx_bufs");
    if (status != UCS_OK) {
        goto err_dedup;
    }

    iface->rx.cq = ibv_create_cq(md->ctx, iface->rx.queue_len, NULL,
                                 iface->channel, 0);
    if (iface->rx.cq == NULL) {
        ucs_error("syncmem: ibv_create_cq(%u) for receives on %s failed: %m;"
                  " lower UCX_SYNCMEM_RX_QUEUE_LEN", iface->rx.queue_len,
                  md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_mp;
    }

    srq_attr.attr.max_wr  = iface->rx.queue_len;
    srq_attr.attr.max_sge = 1;
    iface->rx.srq = ibv_create_srq(md->pd, &srq_attr);
    if (iface->rx.srq == NULL) {
        ucs_error("syncmem: ibv_create_srq(%u) on %s failed: %m; lower"
                  " UCX_SYNCMEM_RX_QUEUE_LEN", iface->rx.queue_len, md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_cq;
    }

    /* The whole queue and two refills beyond it, in one chunk (one
     * registration). Without the spare, the first refill after UCP kept a
     * descriptor (an unexpected message) registers a new chunk from
     * progress, in the middle of the traffic: 10-20 ms on an emulated host,
     * which every rank waiting on this one pays too. */
    ucs_mpool_grow(&iface->rx.mp, iface->rx.queue_len + 2 * iface->rx.batch);
    while ((iface->rx.available > 0) &&
           (uct_syncmem_rx_post(iface, ucs_min(iface->rx.available,
                                               iface->rx.batch)) > 0)) {
    }
    return UCS_OK;

err_cq:
    ibv_destroy_cq(iface->rx.cq);
err_mp:
    ucs_mpool_cleanup(&iface->rx.mp, 1);
err_dedup:
    kh_destroy_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_destroy_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
    return status;
}

void uct_syncmem_rx_cleanup(uct_syncmem_iface_t *iface)
{
    uct_syncmem_rx_link_t *link;

    ibv_destroy_srq(iface->rx.srq);
    ibv_destroy_cq(iface->rx.cq);
    /* descriptors the user still holds are his to release; do not check */
    ucs_mpool_cleanup(&iface->rx.mp, 0);
    while ((link = iface->rx.links) != NULL) {
        iface->rx.links = link->next;
        ucs_free(link);
    }
    kh_destroy_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_destroy_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
}

static UCS_F_ALWAYS_INLINE void
uct_syncmem_wr_send(const uct_syncmem_ep_t *ep, struct ibv_send_wr *wr,
                    uint8_t id, struct ibv_sge *sge, int num_sge)
{
    wr->opcode     = IBV_WR_SEND_WITH_IMM;
    wr->imm_data   = uct_syncmem_am_imm(ep, id);
    wr->send_flags = 0;
    wr->sg_list    = sge;
    wr->num_sge    = num_sge;
}

static ucs_status_t
uct_syncmem_ep_am_short_parked(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                               const void *payload, unsigned length,
                               int mode);

/* am_short for how the iface keeps its requests, as put_short
 * (syncmem_rma.c) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_am_short_inl(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                            const void *payload, unsigned length, int mode)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    struct ibv_send_wr *wr     = &iface->inl_am.wr;
    struct ibv_sge *sge        = iface->inl_am.sge;
    uct_syncmem_replay_t *e;
    ucs_status_t status;
    unsigned sn; /* truncated to 16 bits where kept */

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(hdr) + length, 0, iface->config.max_inline,
                     "am_short");
    status = uct_syncmem_ep_check_room(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return ((mode == UCT_SYNCMEM_TX_PLAIN) || /* no ring: not parked */
                (status != UCT_SYNCMEM_ERR_PARKED)) ? status :
               uct_syncmem_ep_am_short_parked(tl_ep, id, hdr, payload, length,
                                              mode);
    }

    /* the slot is taken first: what the check loaded dies here, and after
     * the copy below only ep is live (no register saved on the way) */
    sn             = ep->tx.sn + 1u;
    uct_syncmem_ep_tx_take(iface, ep, sn);
    wr->wr_id      = sn;
    wr->send_flags = uct_syncmem_ep_tx_flags(iface, ep, IBV_SEND_INLINE, 0,
                                             sn);
    wr->imm_data   = uct_syncmem_am_imm_sn(sn, id);
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, sizeof(hdr) + length);
    if (mode == UCT_SYNCMEM_TX_PLAIN) {
        /* inline: copied while posting, so &hdr may live on this stack */
        sge[0].addr   = (uintptr_t)&hdr;
        sge[0].length = sizeof(hdr);
        sge[1].addr   = (uintptr_t)payload;
        sge[1].length = length;
        wr->num_sge   = 2;
        return uct_syncmem_ep_post_wr(iface, ep, wr, NULL, sn,
                                      UCT_SYNCMEM_TX_PLAIN);
    }

    /* the one copy a replay needs; the request is posted from it */
    e             = uct_syncmem_replay_inline(ep, sn, IBV_WR_SEND_WITH_IMM,
                                              wr->send_flags,
                                              sizeof(hdr) + length);
    e->imm_data   = wr->imm_data;
    e->data[0]    = hdr;
    sge[0].addr   = (uintptr_t)e->data;
    sge[0].length = sizeof(hdr) + length;
    wr->num_sge   = 1;
    if (length != 0) { /* no payload may come as NULL */
        memcpy(&e->data[1], payload, length);
    }
    iface = ucs_derived_of(ep->super.super.iface, uct_syncmem_iface_t);
    return uct_syncmem_ep_post_wr(iface, ep, &iface->inl_am.wr, NULL, sn,
                                  mode);
}

ucs_status_t uct_syncmem_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                                     const void *payload, unsigned length)
{
    return uct_syncmem_ep_am_short_inl(tl_ep, id, hdr, payload, length,
                                       UCT_SYNCMEM_TX_PLAIN);
}

ucs_status_t uct_syncmem_ep_am_short_ring(uct_ep_h tl_ep, uint8_t id,
                                          uint64_t hdr, const void *payload,
                                          unsigned length)
{
    return uct_syncmem_ep_am_short_inl(tl_ep, id, hdr, payload, length,
                                       UCT_SYNCMEM_TX_RING);
}

ucs_status_t uct_syncmem_ep_am_short_batch(uct_ep_h tl_ep, uint8_t id,
                                           uint64_t hdr, const void *payload,
                                           unsigned length)
{
    return uct_syncmem_ep_am_short_inl(tl_ep, id, hdr, payload, length,
                                       UCT_SYNCMEM_TX_BATCH);
}

/* am_short found its endpoint parked: as put_short's (syncmem_rma.c) */
static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_am_short_parked(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                               const void *payload, unsigned length,
                               int mode)
{
    return UCT_SYNCMEM_EP_UNPARKED(tl_ep, mode,
            uct_syncmem_ep_am_short_inl(tl_ep, id, hdr, payload, length,
                                        mode));
}

ucs_status_t uct_syncmem_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                         const uct_iov_t *iov, size_t iovcnt)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    struct ibv_sge sge[UCT_SYNCMEM_MAX_SGE];
    struct ibv_send_wr wr;
    ucs_status_t status;
    size_t i;


    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)iface->config.max_sge, "am_short_iov");
    UCT_CHECK_LENGTH(uct_iov_total_length(iov, iovcnt), 0,
                     iface->config.max_inline, "am_short_iov");
    status = uct_syncmem_ep_check_tx(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    for (i = 0; i < iovcnt; ++i) {
        sge[i].addr   = (uintptr_t)iov[i].buffer;
        sge[i].length = uct_iov_get_length(&iov[i]);
        sge[i].lkey   = 0;
    }
    uct_syncmem_wr_send(ep, &wr, id, sge, iovcnt);
    wr.send_flags = IBV_SEND_INLINE;
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, uct_iov_total_length(iov, iovcnt));
    return uct_syncmem_ep_post(iface, ep, &wr, NULL, 0);
}

ssize_t uct_syncmem_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                uct_pack_callback_t pack_cb, void *arg,
                                unsigned flags)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    ssize_t length;


    UCT_CHECK_AM_ID(id);
    status = uct_syncmem_ep_tx_desc(iface, ep, uct_syncmem_op_release, &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    length = uct_syncmem_desc_pack(iface, desc, pack_cb, arg, &sge);
    if (ucs_unlikely(length < 0)) {
        return length;
    }
    uct_syncmem_wr_send(ep, &wr, id, &sge, 1);
    status = uct_syncmem_ep_post(iface, ep, &wr, &desc->super, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }
    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

/* The header was copied into a bounce buffer: release it, then tell the
 * user the payload is no longer needed. */
static void uct_syncmem_am_zcopy_done(uct_syncmem_op_t *op, ucs_status_t status)
{
    if (op->comp != NULL) {
        uct_invoke_completion(op->comp, status);
    }
    ucs_mpool_put(op);
}

ucs_status_t uct_syncmem_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                     const void *header, unsigned header_length,
                                     const uct_iov_t *iov, size_t iovcnt,
                                     unsigned flags, uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    struct ibv_sge sge[UCT_SYNCMEM_MAX_SGE];
    uct_syncmem_desc_t *desc;
    struct ibv_send_wr wr;
    ucs_status_t status;
    uint32_t length;
    int num_sge;


    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)iface->config.max_sge - 1,
                       "am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, UCT_SYNCMEM_AM_MAX_HDR, "am_zcopy header");
    UCT_CHECK_LENGTH(header_length + uct_iov_total_length(iov, iovcnt), 0,
                     iface->config.seg_size, "am_zcopy");
    status = uct_syncmem_ep_tx_desc(iface, ep, uct_syncmem_am_zcopy_done, &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    desc->super.comp = comp;

    if (header_length > 0) { /* no header may come as NULL */
        memcpy(uct_syncmem_desc_data(desc), header, header_length);
    }
    sge[0].addr   = (uintptr_t)uct_syncmem_desc_data(desc);
    sge[0].length = header_length;
    sge[0].lkey   = desc->lkey;
    num_sge       = 1 + uct_syncmem_sge_fill_iov(&sge[1], iov, iovcnt,
                                                 &length);

    uct_syncmem_wr_send(ep, &wr, id, sge, num_sge);
    status = uct_syncmem_ep_post(iface, ep, &wr, &desc->super, comp != NULL);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY,
                      header_length + uct_iov_total_length(iov, iovcnt));
    return UCS_INPROGRESS;
}
