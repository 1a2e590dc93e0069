/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - put and get: RDMA write and read on the endpoint's RC QP.
 */
#include "syncmem_ep.h"
#include "syncmem_tx.inl"



static UCS_F_ALWAYS_INLINE void
uct_syncmem_wr_rdma(struct ibv_send_wr *wr, enum ibv_wr_opcode opcode,
                    struct ibv_sge *sge, int num_sge, uint64_t remote_addr,
                    uct_rkey_t rkey)
{
    wr->opcode              = opcode;
    wr->send_flags          = 0;
    wr->sg_list             = sge;
    wr->num_sge             = num_sge;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->wr.rdma.rkey        = (uint32_t)rkey;
}

/* An operation found its endpoint parked (UCT_SYNCMEM_ERR_PARKED): each
 * takes a ring and goes again from a function of its own, out of line and
 * called last, so that the operation saves no register for it. */
static ucs_status_t
uct_syncmem_ep_put_short_parked(uct_ep_h tl_ep, const void *buffer,
                                unsigned length, uint64_t remote_addr,
                                uct_rkey_t rkey, int mode);
static ssize_t
uct_syncmem_ep_put_bcopy_parked(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                void *arg, uint64_t remote_addr,
                                uct_rkey_t rkey, int mode);
static ucs_status_t
uct_syncmem_ep_rdma_zcopy_parked(uct_ep_h tl_ep, enum ibv_wr_opcode opcode,
                                 const uct_iov_t *iov, size_t iovcnt,
                                 size_t max_iov, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp,
                                 int mode);
static ucs_status_t
uct_syncmem_ep_get_bcopy_parked(uct_ep_h tl_ep,
                                uct_unpack_callback_t unpack_cb, void *arg,
                                size_t length, uint64_t remote_addr,
                                uct_rkey_t rkey, uct_completion_t *comp,
                                int mode);

/* put_short, made for how the iface keeps its requests (mode:
 * UCT_SYNCMEM_TX_*), so that the fast path tests none of it:
 * uct_syncmem_iface_tx_ops picks one. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_put_short_inl(uct_ep_h tl_ep, const void *buffer,
                             unsigned length, uint64_t remote_addr,
                             uct_rkey_t rkey, int mode)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    struct ibv_send_wr *wr     = &iface->inl_put.wr;
    uct_syncmem_replay_t *e;
    ucs_status_t status;
    unsigned sn; /* truncated to 16 bits where kept */

    UCT_CHECK_LENGTH(length, 0, iface->config.max_inline, "put_short");
    status = uct_syncmem_ep_check_room(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return ((mode == UCT_SYNCMEM_TX_PLAIN) || /* no ring: not parked */
                (status != UCT_SYNCMEM_ERR_PARKED)) ? status :
               uct_syncmem_ep_put_short_parked(tl_ep, buffer, length,
                                               remote_addr, rkey, mode);
    }

    /* the slot is taken first: what the check loaded dies here, and after
     * the copy below only ep is live (no register saved on the way) */
    sn = ep->tx.sn + 1u;
    uct_syncmem_ep_tx_take(iface, ep, sn);
    wr->wr_id                    = sn;
    wr->send_flags               = uct_syncmem_ep_tx_flags(iface, ep,
                                                           IBV_SEND_INLINE, 0,
                                                           sn);
    wr->wr.rdma.remote_addr      = remote_addr;
    wr->wr.rdma.rkey             = (uint32_t)rkey;
    iface->inl_put.sge[0].length = length;
    UCT_TL_EP_STAT_OP(&ep->super, PUT, SHORT, length);
    if (mode == UCT_SYNCMEM_TX_PLAIN) {
        /* inline: the CPU copies the data, no lkey needed */
        iface->inl_put.sge[0].addr = (uintptr_t)buffer;
        return uct_syncmem_ep_post_wr(iface, ep, wr, NULL, sn,
                                      UCT_SYNCMEM_TX_PLAIN);
    }

    /* the one copy a replay needs; the request is posted from it */
    e                          = uct_syncmem_replay_inline(ep, sn,
                                                           IBV_WR_RDMA_WRITE,
                                                           wr->send_flags,
                                                           length);
    e->remote_addr             = remote_addr;
    e->rkey                    = rkey;
    iface->inl_put.sge[0].addr = (uintptr_t)e->data;
    if (ucs_likely(length != 0)) { /* an empty put may have no buffer */
        memcpy(e->data, buffer, length);
    }
    iface = ucs_derived_of(ep->super.super.iface, uct_syncmem_iface_t);
    return uct_syncmem_ep_post_wr(iface, ep, &iface->inl_put.wr, NULL, sn,
                                  mode);
}

ucs_status_t uct_syncmem_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                      unsigned length, uint64_t remote_addr,
                                      uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_short_inl(tl_ep, buffer, length, remote_addr,
                                        rkey, UCT_SYNCMEM_TX_PLAIN);
}

ucs_status_t uct_syncmem_ep_put_short_ring(uct_ep_h tl_ep, const void *buffer,
                                           unsigned length,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_short_inl(tl_ep, buffer, length, remote_addr,
                                        rkey, UCT_SYNCMEM_TX_RING);
}

ucs_status_t uct_syncmem_ep_put_short_batch(uct_ep_h tl_ep, const void *buffer,
                                            unsigned length,
                                            uint64_t remote_addr,
                                            uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_short_inl(tl_ep, buffer, length, remote_addr,
                                        rkey, UCT_SYNCMEM_TX_BATCH);
}

static UCS_F_ALWAYS_INLINE ssize_t
uct_syncmem_ep_put_bcopy_inl(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                             void *arg, uint64_t remote_addr, uct_rkey_t rkey,
                             int mode)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_desc_t *desc;
    struct ibv_sge sge;
    ucs_status_t status;
    ssize_t length;

    status = uct_syncmem_ep_check_room(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return ((mode == UCT_SYNCMEM_TX_PLAIN) || /* no ring: not parked */
                (status != UCT_SYNCMEM_ERR_PARKED)) ? status :
               uct_syncmem_ep_put_bcopy_parked(tl_ep, pack_cb, arg,
                                               remote_addr, rkey, mode);
    }
    desc = uct_syncmem_desc_get(iface, uct_syncmem_op_release);
    if (ucs_unlikely(desc == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }

    length = uct_syncmem_desc_pack(iface, desc, pack_cb, arg, &sge);
    if (ucs_unlikely(length < 0)) {
        return length;
    }
    status = uct_syncmem_ep_post_sge(iface, ep, IBV_WR_RDMA_WRITE, remote_addr,
                                     rkey, 0, 0, &sge, 1, length,
                                     &desc->super, 0, mode, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }
    UCT_TL_EP_STAT_OP(&ep->super, PUT, BCOPY, length);
    return length;
}

ssize_t uct_syncmem_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                 void *arg, uint64_t remote_addr,
                                 uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_bcopy_inl(tl_ep, pack_cb, arg, remote_addr, rkey,
                                        UCT_SYNCMEM_TX_PLAIN);
}

ssize_t uct_syncmem_ep_put_bcopy_ring(uct_ep_h tl_ep,
                                      uct_pack_callback_t pack_cb, void *arg,
                                      uint64_t remote_addr, uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_bcopy_inl(tl_ep, pack_cb, arg, remote_addr, rkey,
                                        UCT_SYNCMEM_TX_RING);
}

ssize_t uct_syncmem_ep_put_bcopy_batch(uct_ep_h tl_ep,
                                       uct_pack_callback_t pack_cb, void *arg,
                                       uint64_t remote_addr, uct_rkey_t rkey)
{
    return uct_syncmem_ep_put_bcopy_inl(tl_ep, pack_cb, arg, remote_addr, rkey,
                                        UCT_SYNCMEM_TX_BATCH);
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_rdma_zcopy(uct_ep_h tl_ep, enum ibv_wr_opcode opcode,
                          const uct_iov_t *iov, size_t iovcnt, size_t max_iov,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp, int mode)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    struct ibv_sge sge_buf[UCT_SYNCMEM_MAX_SGE];
    struct ibv_sge *sge  = sge_buf;
    uct_syncmem_op_t *op = NULL;
    ucs_status_t status;
    uint32_t length;
    int num_sge;

    UCT_CHECK_IOV_SIZE(iovcnt, max_iov, "rdma zcopy");
    status = uct_syncmem_ep_check_room(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return ((mode == UCT_SYNCMEM_TX_PLAIN) || /* no ring: not parked */
                (status != UCT_SYNCMEM_ERR_PARKED)) ? status :
               uct_syncmem_ep_rdma_zcopy_parked(tl_ep, opcode, iov, iovcnt,
                                                max_iov, remote_addr, rkey,
                                                comp, mode);
    }

    if (comp != NULL) {
        op = uct_syncmem_op_get(iface, comp, uct_syncmem_op_complete);
    } else if (opcode == IBV_WR_RDMA_READ) {
        /* no completion asked: an op all the same, so that a fence sees a
         * read in flight (uct_syncmem_ep_fence) */
        op = uct_syncmem_op_get(iface, NULL, uct_syncmem_op_release);
    }
    if (ucs_unlikely((op == NULL) &&
                     ((comp != NULL) || (opcode == IBV_WR_RDMA_READ)))) {
        return UCS_ERR_NO_RESOURCE;
    }

    if (mode != UCT_SYNCMEM_TX_PLAIN) {
        /* the scatter list is made in the ring entry, and posted from it */
        sge = (struct ibv_sge*)uct_syncmem_replay_entry(&ep->replay,
                                                        ep->tx.sn + 1u)->data;
    }
    num_sge = uct_syncmem_sge_fill_iov(sge, iov, iovcnt, &length);
    status  = uct_syncmem_ep_post_sge(iface, ep, opcode, remote_addr, rkey, 0,
                                      0, sge, num_sge, length, op,
                                      comp != NULL, mode,
                                      mode != UCT_SYNCMEM_TX_PLAIN);
    if (ucs_unlikely(status != UCS_OK)) {
        if (op != NULL) {
            ucs_mpool_put(op);
        }
        return status;
    }
    return UCS_INPROGRESS;
}

/* put_zcopy and get_zcopy for each mode (uct_syncmem_iface_tx_ops) */
#define UCT_SYNCMEM_EP_RDMA_ZCOPY(_name, _opcode, _max_iov, _op, _mode) \
    ucs_status_t _name(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, \
                       uint64_t remote_addr, uct_rkey_t rkey, \
                       uct_completion_t *comp) \
    { \
        uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface, \
                                                    uct_syncmem_iface_t); \
        ucs_status_t status; \
        \
        status = uct_syncmem_ep_rdma_zcopy(tl_ep, _opcode, iov, iovcnt, \
                                           iface->config._max_iov, \
                                           remote_addr, rkey, comp, _mode); \
        UCT_TL_EP_STAT_OP_IF_SUCCESS(status, \
                                     &ucs_derived_of(tl_ep, \
                                                     uct_syncmem_ep_t)->super, \
                                     _op, ZCOPY, \
                                     uct_iov_total_length(iov, iovcnt)); \
        return status; \
    }

UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_put_zcopy, IBV_WR_RDMA_WRITE,
                          max_sge, PUT, UCT_SYNCMEM_TX_PLAIN)
UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_put_zcopy_ring, IBV_WR_RDMA_WRITE,
                          max_sge, PUT, UCT_SYNCMEM_TX_RING)
UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_put_zcopy_batch, IBV_WR_RDMA_WRITE,
                          max_sge, PUT, UCT_SYNCMEM_TX_BATCH)
UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_get_zcopy, IBV_WR_RDMA_READ,
                          max_sge_rd, GET, UCT_SYNCMEM_TX_PLAIN)
UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_get_zcopy_ring, IBV_WR_RDMA_READ,
                          max_sge_rd, GET, UCT_SYNCMEM_TX_RING)
UCT_SYNCMEM_EP_RDMA_ZCOPY(uct_syncmem_ep_get_zcopy_batch, IBV_WR_RDMA_READ,
                          max_sge_rd, GET, UCT_SYNCMEM_TX_BATCH)

/* The read landed in the bounce buffer: hand it to the user. */
static void uct_syncmem_get_bcopy_done(uct_syncmem_op_t *op,
                                       ucs_status_t status)
{
    uct_syncmem_desc_t *desc = ucs_derived_of(op, uct_syncmem_desc_t);

    if (status == UCS_OK) {
        op->unpack_cb(op->arg, uct_syncmem_desc_data(desc),
                      op->length);
    }
    if (op->comp != NULL) {
        uct_invoke_completion(op->comp, status);
    }
    ucs_mpool_put(desc);
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_get_bcopy_inl(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                             void *arg, size_t length, uint64_t remote_addr,
                             uct_rkey_t rkey, uct_completion_t *comp,
                             int mode)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_desc_t *desc;
    struct ibv_sge sge;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "get_bcopy");
    status = uct_syncmem_ep_check_room(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return ((mode == UCT_SYNCMEM_TX_PLAIN) || /* no ring: not parked */
                (status != UCT_SYNCMEM_ERR_PARKED)) ? status :
               uct_syncmem_ep_get_bcopy_parked(tl_ep, unpack_cb, arg, length,
                                               remote_addr, rkey, comp, mode);
    }
    desc = uct_syncmem_desc_get(iface, uct_syncmem_get_bcopy_done);
    if (ucs_unlikely(desc == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }
    desc->super.comp       = comp;
    desc->super.unpack_cb  = unpack_cb;
    desc->super.arg        = arg;
    desc->super.length     = length;

    sge.addr   = (uintptr_t)uct_syncmem_desc_data(desc);
    sge.length = length;
    sge.lkey   = desc->lkey;
    status     = uct_syncmem_ep_post_sge(iface, ep, IBV_WR_RDMA_READ,
                                         remote_addr, rkey, 0, 0, &sge, 1,
                                         length, &desc->super, 1, mode, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, GET, BCOPY, length);
    return UCS_INPROGRESS;
}

/* get_bcopy for each mode (uct_syncmem_iface_tx_ops) */
#define UCT_SYNCMEM_EP_GET_BCOPY(_name, _mode) \
    ucs_status_t _name(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, \
                       void *arg, size_t length, uint64_t remote_addr, \
                       uct_rkey_t rkey, uct_completion_t *comp) \
    { \
        return uct_syncmem_ep_get_bcopy_inl(tl_ep, unpack_cb, arg, length, \
                                            remote_addr, rkey, comp, _mode); \
    }

UCT_SYNCMEM_EP_GET_BCOPY(uct_syncmem_ep_get_bcopy, UCT_SYNCMEM_TX_PLAIN)
UCT_SYNCMEM_EP_GET_BCOPY(uct_syncmem_ep_get_bcopy_ring, UCT_SYNCMEM_TX_RING)
UCT_SYNCMEM_EP_GET_BCOPY(uct_syncmem_ep_get_bcopy_batch, UCT_SYNCMEM_TX_BATCH)

static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_put_short_parked(uct_ep_h tl_ep, const void *buffer,
                                unsigned length, uint64_t remote_addr,
                                uct_rkey_t rkey, int mode)
{
    return UCT_SYNCMEM_EP_UNPARKED(tl_ep, mode,
            uct_syncmem_ep_put_short_inl(tl_ep, buffer, length, remote_addr,
                                         rkey, mode));
}

static UCS_F_NOINLINE ssize_t
uct_syncmem_ep_put_bcopy_parked(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                void *arg, uint64_t remote_addr,
                                uct_rkey_t rkey, int mode)
{
    return UCT_SYNCMEM_EP_UNPARKED(tl_ep, mode,
            uct_syncmem_ep_put_bcopy_inl(tl_ep, pack_cb, arg, remote_addr,
                                         rkey, mode));
}

static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_rdma_zcopy_parked(uct_ep_h tl_ep, enum ibv_wr_opcode opcode,
                                 const uct_iov_t *iov, size_t iovcnt,
                                 size_t max_iov, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp,
                                 int mode)
{
    return UCT_SYNCMEM_EP_UNPARKED(tl_ep, mode,
            uct_syncmem_ep_rdma_zcopy(tl_ep, opcode, iov, iovcnt, max_iov,
                                      remote_addr, rkey, comp, mode));
}

static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_get_bcopy_parked(uct_ep_h tl_ep,
                                uct_unpack_callback_t unpack_cb, void *arg,
                                size_t length, uint64_t remote_addr,
                                uct_rkey_t rkey, uct_completion_t *comp,
                                int mode)
{
    return UCT_SYNCMEM_EP_UNPARKED(tl_ep, mode,
            uct_syncmem_ep_get_bcopy_inl(tl_ep, unpack_cb, arg, length,
                                         remote_addr, rkey, comp, mode));
}
