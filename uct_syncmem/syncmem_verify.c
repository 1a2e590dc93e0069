/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - consistency check (UCX_SYNCMEM_VERIFY=crc): CRC32C on active
 * messages, read-back of puts.
 *
 * Active messages: the sender appends a CRC32C of the whole message (for
 * am_short, the 8-byte header too) as a 4-byte little-endian trailer and
 * sets UCT_SYNCMEM_AM_IMM_FLAG_CRC in the immediate data. The receiver
 * checks every message with the flag, whatever its own setting, strips the
 * trailer, and drops (and counts, and logs) a message that does not match.
 * The trailer takes 4 bytes of SEG_SIZE and of the inline size, so the AM
 * sizes iface_query reports shrink by 4.
 *
 * Puts (short, bcopy, zcopy): after the RDMA WRITE, an RDMA READ of the
 * same remote range into a bounce buffer; RC executes it after the write at
 * the responder, so it sees what the write left there. Its CRC32C is
 * compared with the CRC of what was written (taken when packing, or from
 * the iov). A mismatch fails the put: a zcopy put with a completion gets
 * UCS_ERR_IO_ERROR in it; a put without one (short, bcopy, zcopy without a
 * completion) fails its endpoint with UCS_ERR_IO_ERROR, through the iface
 * error handler, so nothing goes wrong silently.
 *
 * A put larger than SEG_SIZE is read back in SEG_SIZE chunks, one after the
 * other into the same bounce buffer, each posted from the completion of the
 * previous one (like the steps of an emulated atomic, and counted in
 * ep->amo_inflight so that a flush waits for the last). One buffer and one
 * send queue slot per put, whatever its size, at the price of one round
 * trip per chunk.
 *
 * A verified put takes two send queue slots (write and read) but asks for
 * one, like every other operation, so that the pending queue logic stays
 * the same; with VERIFY=crc each QP and the send CQ have one entry more
 * than TX_QUEUE_LEN and TX_CQ_LEN for the read that may overshoot.
 */
#include "syncmem_ep.h"
#include "syncmem_hooks.h"
#include "syncmem_tx.inl"

#include <arpa/inet.h>
#include <string.h>

const char *uct_syncmem_verify_names[] = {
    [UCT_SYNCMEM_VERIFY_NONE] = "none",
    [UCT_SYNCMEM_VERIFY_CRC]  = "crc",
    [UCT_SYNCMEM_VERIFY_LAST] = NULL
};

/* Mismatched messages logged one by one, then one in this many */
#define UCT_SYNCMEM_VERIFY_LOG_FIRST  16
#define UCT_SYNCMEM_VERIFY_LOG_EVERY  1024


static uint32_t uct_syncmem_crc32c_iov(uint32_t crc, const uct_iov_t *iov,
                                       size_t iovcnt)
{
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        crc = uct_syncmem_crc32c(crc, iov[i].buffer,
                                 uct_iov_get_length(&iov[i]));
    }
    return crc;
}

/* The trailer is little-endian on the wire, whatever the hosts are. */
static void uct_syncmem_crc_store(void *dest, uint32_t crc)
{
    uint8_t *p = dest;

    p[0] = crc;
    p[1] = crc >> 8;
    p[2] = crc >> 16;
    p[3] = crc >> 24;
}

static uint32_t uct_syncmem_crc_load(const void *src)
{
    const uint8_t *p = src;

    return p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* VERIFY_INJECT: whether the check with this number gets a flipped byte */
static int uct_syncmem_verify_inject(uct_syncmem_iface_t *iface,
                                     uint64_t count)
{
    return (iface->verify.inject != 0) && ((count % iface->verify.inject) == 0);
}


/*
 * Active messages
 */

int uct_syncmem_verify_am_rx(uct_syncmem_iface_t *iface,
                             const struct ibv_wc *wc, void *data,
                             unsigned *length_p)
{
    uct_syncmem_verify_counters_t *counters = &iface->verify.counters;
    unsigned length                         = *length_p;
    uint32_t expected, got;

    ++counters->am_checked;
    if (ucs_unlikely(length < UCT_SYNCMEM_CRC_LEN)) {
        expected = got = 0; /* not even room for the trailer */
        goto bad;
    }

    if (ucs_unlikely(uct_syncmem_verify_inject(iface, counters->am_checked))) {
        *(uint8_t*)data ^= 0xff;
    }

    length  -= UCT_SYNCMEM_CRC_LEN;
    expected = uct_syncmem_crc_load(UCS_PTR_BYTE_OFFSET(data, length));
    got      = uct_syncmem_crc32c(0, data, length);
    if (ucs_likely(expected == got)) {
        *length_p = length;
        return 1;
    }

bad:
    ++counters->am_dropped;
    if ((counters->am_dropped <= UCT_SYNCMEM_VERIFY_LOG_FIRST) ||
        ((counters->am_dropped % UCT_SYNCMEM_VERIFY_LOG_EVERY) == 0)) {
        /* RC completions need not name the source QP (src_qp is for UD):
         * our QP, the passive end of one connection, tells which */
        ucs_error("syncmem: active message %u dropped: %u bytes (and a CRC)"
                  " received on QP 0x%x (source QP 0x%x%s), CRC32C expected"
                  " 0x%08x got 0x%08x (%" PRIu64 " dropped so far on this"
                  " iface; logged one by one up to %u, then one in %u)",
                  ntohl(wc->imm_data) & UCT_SYNCMEM_AM_IMM_ID_MASK,
                  length, wc->qp_num, wc->src_qp,
                  (wc->src_qp == 0) ? ": not reported by the device" : "",
                  expected, got,
                  counters->am_dropped, UCT_SYNCMEM_VERIFY_LOG_FIRST,
                  UCT_SYNCMEM_VERIFY_LOG_EVERY);
    }
    return 0;
}

static UCS_F_ALWAYS_INLINE void
uct_syncmem_verify_wr_send(const uct_syncmem_ep_t *ep, struct ibv_send_wr *wr,
                           uint8_t id, struct ibv_sge *sge, int num_sge,
                           unsigned flags)
{
    wr->opcode     = IBV_WR_SEND_WITH_IMM;
    /* the request number, as every AM (reconnect), and the flag */
    wr->imm_data   = uct_syncmem_am_imm(ep, id) |
                     htonl(UCT_SYNCMEM_AM_IMM_FLAG_CRC);
    wr->send_flags = flags;
    wr->sg_list    = sge;
    wr->num_sge    = num_sge;
}

/* Short messages: header, payload and trailer gathered into one inline
 * segment, so that no more SGEs are needed than without the check. */
static ucs_status_t
uct_syncmem_verify_am_inline(uct_syncmem_ep_t *ep, uint8_t id, void *buf,
                             unsigned length)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_send_wr wr;
    struct ibv_sge sge;

    uct_syncmem_crc_store(UCS_PTR_BYTE_OFFSET(buf, length),
                          uct_syncmem_crc32c(0, buf, length));
    sge.addr   = (uintptr_t)buf;
    sge.length = length + UCT_SYNCMEM_CRC_LEN;
    sge.lkey   = 0;
    uct_syncmem_verify_wr_send(ep, &wr, id, &sge, 1, IBV_SEND_INLINE);
    return uct_syncmem_ep_post(iface, ep, &wr, NULL, 0);
}

static ucs_status_t
uct_syncmem_verify_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t hdr,
                            const void *payload, unsigned length)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint8_t buf[iface->config.max_inline + UCT_SYNCMEM_CRC_LEN];
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(hdr) + length + UCT_SYNCMEM_CRC_LEN, 0,
                     iface->config.max_inline, "am_short");
    status = uct_syncmem_ep_check_tx(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    memcpy(buf, &hdr, sizeof(hdr));
    if (length > 0) { /* no payload may come as NULL */
        memcpy(buf + sizeof(hdr), payload, length);
    }
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, sizeof(hdr) + length);
    return uct_syncmem_verify_am_inline(ep, id, buf, sizeof(hdr) + length);
}

static ucs_status_t
uct_syncmem_verify_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                const uct_iov_t *iov, size_t iovcnt)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uint8_t buf[iface->config.max_inline + UCT_SYNCMEM_CRC_LEN];
    size_t length              = uct_iov_total_length(iov, iovcnt);
    size_t i, offset;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)iface->config.max_sge, "am_short_iov");
    UCT_CHECK_LENGTH(length + UCT_SYNCMEM_CRC_LEN, 0, iface->config.max_inline,
                     "am_short_iov");
    status = uct_syncmem_ep_check_tx(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    for (i = 0, offset = 0; i < iovcnt; ++i) {
        if (uct_iov_get_length(&iov[i]) == 0) {
            continue; /* an empty entry may have no buffer */
        }
        memcpy(buf + offset, iov[i].buffer, uct_iov_get_length(&iov[i]));
        offset += uct_iov_get_length(&iov[i]);
    }
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, length);
    return uct_syncmem_verify_am_inline(ep, id, buf, length);
}

static ssize_t
uct_syncmem_verify_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                            uct_pack_callback_t pack_cb, void *arg,
                            unsigned flags)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    size_t length;

    UCT_CHECK_AM_ID(id);
    status = uct_syncmem_ep_tx_desc(iface, ep, uct_syncmem_op_release, &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    length = pack_cb(uct_syncmem_desc_data(desc), arg);
    if (ENABLE_PARAMS_CHECK &&
        ucs_unlikely(length + UCT_SYNCMEM_CRC_LEN > iface->config.seg_size)) {
        ucs_error("syncmem: am_bcopy packed %zu bytes, more than SEG_SIZE"
                  " (%zu) less the CRC (VERIFY=crc)", length,
                  iface->config.seg_size);
        ucs_mpool_put(desc);
        return UCS_ERR_INVALID_PARAM;
    }
    uct_syncmem_crc_store(UCS_PTR_BYTE_OFFSET(uct_syncmem_desc_data(desc),
                                              length),
                          uct_syncmem_crc32c(0, uct_syncmem_desc_data(desc),
                                             length));

    sge.addr   = (uintptr_t)uct_syncmem_desc_data(desc);
    sge.length = length + UCT_SYNCMEM_CRC_LEN;
    sge.lkey   = desc->lkey;
    uct_syncmem_verify_wr_send(ep, &wr, id, &sge, 1, 0);
    status = uct_syncmem_ep_post(iface, ep, &wr, &desc->super, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

static void uct_syncmem_verify_am_zcopy_done(uct_syncmem_op_t *op,
                                             ucs_status_t status)
{
    if (op->comp != NULL) {
        uct_invoke_completion(op->comp, status);
    }
    ucs_mpool_put(op);
}

/* Header and trailer in a bounce buffer, the payload from the user's iov:
 * one SGE more than without the check (iface_query's max_iov says so). */
static ucs_status_t
uct_syncmem_verify_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                            unsigned header_length, const uct_iov_t *iov,
                            size_t iovcnt, unsigned flags,
                            uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_sge sge[UCT_SYNCMEM_MAX_SGE];
    uct_syncmem_desc_t *desc;
    struct ibv_send_wr wr;
    ucs_status_t status;
    uint32_t crc, length;
    void *trailer;
    int num_sge;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)iface->config.max_sge - 2,
                       "am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, UCT_SYNCMEM_AM_MAX_HDR,
                     "am_zcopy header");
    UCT_CHECK_LENGTH(header_length + uct_iov_total_length(iov, iovcnt) +
                     UCT_SYNCMEM_CRC_LEN, 0, iface->config.seg_size,
                     "am_zcopy");
    status = uct_syncmem_ep_tx_desc(iface, ep, uct_syncmem_verify_am_zcopy_done,
                                    &desc);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    desc->super.comp = comp;

    if (header_length > 0) { /* no header may come as NULL */
        memcpy(uct_syncmem_desc_data(desc), header, header_length);
    }
    crc     = uct_syncmem_crc32c_iov(uct_syncmem_crc32c(0, header,
                                                        header_length),
                                     iov, iovcnt);
    trailer = UCS_PTR_BYTE_OFFSET(uct_syncmem_desc_data(desc), header_length);
    sge[0].addr   = (uintptr_t)uct_syncmem_desc_data(desc);
    sge[0].length = header_length;
    sge[0].lkey   = desc->lkey;
    num_sge       = 1 + uct_syncmem_sge_fill_iov(&sge[1], iov, iovcnt,
                                                 &length);
    uct_syncmem_crc_store(trailer, crc);
    sge[num_sge].addr   = (uintptr_t)trailer;
    sge[num_sge].length = UCT_SYNCMEM_CRC_LEN;
    sge[num_sge].lkey   = desc->lkey;
    ++num_sge;

    uct_syncmem_verify_wr_send(ep, &wr, id, sge, num_sge, 0);
    status = uct_syncmem_ep_post(iface, ep, &wr, &desc->super, comp != NULL);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(desc);
        return status;
    }

    UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY,
                      header_length + uct_iov_total_length(iov, iovcnt));
    return UCS_INPROGRESS;
}


/*
 * Puts
 */

/* One put being read back: the op of each of its reads. */
typedef struct uct_syncmem_verify_put {
    uct_syncmem_op_t   super;       /* ep, comp (zcopy), handler */
    uct_syncmem_desc_t *desc;       /* the reads land here */
    uint64_t           remote_addr;
    size_t             length;
    size_t             offset;      /* read back and checked so far */
    uint32_t           rkey;
    uint32_t           expected;    /* CRC32C of what was written */
    uint32_t           crc;         /* of what was read so far */
    uint8_t            chained;     /* more than one read: in amo_inflight */
    uint8_t            injected;
} uct_syncmem_verify_put_t;

static ucs_status_t uct_syncmem_verify_put_read(uct_syncmem_iface_t *iface,
                                                uct_syncmem_verify_put_t *vp)
{
    struct ibv_send_wr wr;
    struct ibv_sge sge;

    sge.addr                = (uintptr_t)uct_syncmem_desc_data(vp->desc);
    sge.length              = ucs_min(vp->length - vp->offset,
                                      iface->config.seg_size);
    sge.lkey                = vp->desc->lkey;
    wr.opcode               = IBV_WR_RDMA_READ;
    wr.send_flags           = 0;
    wr.sg_list              = &sge;
    wr.num_sge              = (sge.length > 0);
    wr.wr.rdma.remote_addr  = vp->remote_addr + vp->offset;
    wr.wr.rdma.rkey         = vp->rkey;
    return uct_syncmem_ep_post(iface, vp->super.ep, &wr, &vp->super, 1);
}

static void uct_syncmem_verify_put_finish(uct_syncmem_verify_put_t *vp,
                                          ucs_status_t status)
{
    uct_syncmem_ep_t *ep   = vp->super.ep;
    uct_completion_t *comp = vp->super.comp;

    if (vp->chained) {
        uct_syncmem_ep_amo_done(ep);
    }
    ucs_mpool_put(vp->desc);
    ucs_mpool_put(vp);
    if (comp != NULL) {
        uct_invoke_completion(comp, status);
    } else if (status == UCS_ERR_IO_ERROR) {
        /* nobody to tell but the endpoint's error handler */
        uct_syncmem_ep_fail(ep, status);
    }
}

/* A read of a put completed: check its chunk, read the next one. */
static void uct_syncmem_verify_put_read_done(uct_syncmem_op_t *op,
                                             ucs_status_t status)
{
    uct_syncmem_verify_put_t *vp = ucs_derived_of(op, uct_syncmem_verify_put_t);
    uct_syncmem_ep_t *ep         = op->ep;
    uct_syncmem_iface_t *iface   = ucs_derived_of(ep->super.super.iface,
                                                  uct_syncmem_iface_t);
    uct_syncmem_verify_counters_t *counters = &iface->verify.counters;
    uint8_t *data                = uct_syncmem_desc_data(vp->desc);
    size_t chunk;

    if (status != UCS_OK) {
        /* the write or the read failed: the endpoint says why */
        uct_syncmem_verify_put_finish(vp, status);
        return;
    }

    chunk = ucs_min(vp->length - vp->offset, iface->config.seg_size);
    if (vp->injected && (vp->offset == 0) && (chunk > 0)) {
        data[0] ^= 0xff;
    }
    vp->crc     = uct_syncmem_crc32c(vp->crc, data, chunk);
    vp->offset += chunk;

    if (vp->offset < vp->length) {
        /* this read's completion gave its send slot back: the next one
         * always has room */
        status = UCT_SYNCMEM_EP_POST_STEP(ep, uct_syncmem_verify_put_read(
                                                      iface, vp));
        if (status != UCS_OK) {
            uct_syncmem_verify_put_finish(vp, status);
        }
        return;
    }

    if (ucs_unlikely(vp->crc != vp->expected)) {
        ++counters->put_failed;
        ucs_error("syncmem: put of %zu bytes to remote address 0x%" PRIx64
                  " (rkey 0x%x) on ep %p QP 0x%x to iface 0x%" PRIx64 " (peer"
                  " QP 0x%x) read back different: CRC32C written 0x%08x, read"
                  " 0x%08x; the operation fails with UCS_ERR_IO_ERROR",
                  vp->length, vp->remote_addr, vp->rkey, ep, ep->qp->qp_num,
                  ep->cm.peer_iface_id, ep->cm.peer_rc_qpn, vp->expected,
                  vp->crc);
        status = UCS_ERR_IO_ERROR;
    }
    uct_syncmem_verify_put_finish(vp, status);
}

/* Room to send, a read-back record and its bounce buffer. */
static ucs_status_t
uct_syncmem_verify_put_start(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                             uint64_t remote_addr, uct_rkey_t rkey,
                             uct_completion_t *comp,
                             uct_syncmem_verify_put_t **vp_p)
{
    uct_syncmem_verify_put_t *vp;
    ucs_status_t status;

    status = uct_syncmem_ep_check_tx(iface, ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    vp = ucs_mpool_get(&iface->verify.mp);
    if (ucs_unlikely(vp == NULL)) {
        return UCS_ERR_NO_RESOURCE;
    }
    vp->desc = uct_syncmem_desc_get(iface, uct_syncmem_op_release);
    if (ucs_unlikely(vp->desc == NULL)) {
        ucs_mpool_put(vp);
        return UCS_ERR_NO_RESOURCE;
    }

    vp->super.handler = uct_syncmem_verify_put_read_done;
    vp->super.comp    = comp;
    vp->super.ep      = ep;
    vp->remote_addr   = remote_addr;
    vp->rkey          = (uint32_t)rkey;
    vp->offset        = 0;
    vp->crc           = 0;
    vp->chained       = 0;
    *vp_p             = vp;
    return UCS_OK;
}

/* Posts the write, then the first read behind it. */
static ucs_status_t
uct_syncmem_verify_put_post(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                            uct_syncmem_verify_put_t *vp,
                            struct ibv_send_wr *wr, size_t length,
                            uint32_t crc)
{
    uct_syncmem_verify_counters_t *counters = &iface->verify.counters;
    ucs_status_t status;

    wr->opcode              = IBV_WR_RDMA_WRITE;
    wr->wr.rdma.remote_addr = vp->remote_addr;
    wr->wr.rdma.rkey        = vp->rkey;
    status = uct_syncmem_ep_post(iface, ep, wr, NULL, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_mpool_put(vp->desc);
        ucs_mpool_put(vp);
        return status;
    }

    vp->length   = length;
    vp->expected = crc;
    vp->injected = uct_syncmem_verify_inject(iface, ++counters->put_checked);
    status       = uct_syncmem_verify_put_read(iface, vp);
    if (ucs_unlikely(status != UCS_OK)) {
        /* the write is posted and nothing would check it: the QP is
         * broken anyway (ibv_post_send failed), fail the endpoint */
        ucs_mpool_put(vp->desc);
        ucs_mpool_put(vp);
        uct_syncmem_ep_fail(ep, UCS_ERR_IO_ERROR);
        return status;
    }

    if (length > iface->config.seg_size) {
        vp->chained = 1;
        ++ep->amo_inflight; /* a flush waits for the last read */
    }
    return UCS_OK;
}

static ucs_status_t
uct_syncmem_verify_put_short(uct_ep_h tl_ep, const void *buffer,
                             unsigned length, uint64_t remote_addr,
                             uct_rkey_t rkey)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_verify_put_t *vp;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.max_inline, "put_short");
    status = uct_syncmem_verify_put_start(iface, ep, remote_addr, rkey, NULL,
                                          &vp);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    sge.addr      = (uintptr_t)buffer;
    sge.length    = length;
    sge.lkey      = 0;
    wr.send_flags = IBV_SEND_INLINE;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    status = uct_syncmem_verify_put_post(iface, ep, vp, &wr, length,
                                         uct_syncmem_crc32c(0, buffer, length));
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, &ep->super, PUT, SHORT, length);
    return status;
}

/* The read lands in the buffer the write was sent from: the responder
 * answers it only after the write arrived, so the write's data has left
 * that buffer long before. */
static ssize_t
uct_syncmem_verify_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                             void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    uct_syncmem_verify_put_t *vp;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    void *data;

    status = uct_syncmem_verify_put_start(iface, ep, remote_addr, rkey, NULL,
                                          &vp);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    data       = uct_syncmem_desc_data(vp->desc);
    sge.addr   = (uintptr_t)data;
    sge.length = pack_cb(data, arg);
    sge.lkey   = vp->desc->lkey;
    if (ENABLE_PARAMS_CHECK &&
        ucs_unlikely(sge.length > iface->config.seg_size)) {
        ucs_error("syncmem: bcopy packed %u bytes, more than SEG_SIZE (%zu)",
                  sge.length, iface->config.seg_size);
        ucs_mpool_put(vp->desc);
        ucs_mpool_put(vp);
        return UCS_ERR_INVALID_PARAM;
    }

    wr.send_flags = 0;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    status = uct_syncmem_verify_put_post(iface, ep, vp, &wr, sge.length,
                                         uct_syncmem_crc32c(0, data,
                                                            sge.length));
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    UCT_TL_EP_STAT_OP(&ep->super, PUT, BCOPY, sge.length);
    return sge.length;
}

static ucs_status_t
uct_syncmem_verify_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                             size_t iovcnt, uint64_t remote_addr,
                             uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_syncmem_ep_t *ep       = ucs_derived_of(tl_ep, uct_syncmem_ep_t);
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);
    struct ibv_sge sge[UCT_SYNCMEM_MAX_SGE];
    uct_syncmem_verify_put_t *vp;
    struct ibv_send_wr wr;
    ucs_status_t status;
    uint32_t length;

    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)iface->config.max_sge, "put_zcopy");
    status = uct_syncmem_verify_put_start(iface, ep, remote_addr, rkey, comp,
                                          &vp);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    wr.send_flags = 0;
    wr.sg_list    = sge;
    wr.num_sge    = uct_syncmem_sge_fill_iov(sge, iov, iovcnt, &length);
    status = uct_syncmem_verify_put_post(iface, ep, vp, &wr, length,
                                         uct_syncmem_crc32c_iov(0, iov,
                                                                iovcnt));
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    UCT_TL_EP_STAT_OP(&ep->super, PUT, ZCOPY, uct_iov_total_length(iov, iovcnt));
    return UCS_INPROGRESS;
}


/*
 * The iface
 */

static ucs_mpool_ops_t uct_syncmem_verify_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

ucs_status_t uct_syncmem_verify_init(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_iface_config_t *config)
{
    uct_iface_ops_t *ops = &iface->super.super.ops;

    iface->verify.inject = config->verify_inject;
    memset(&iface->verify.counters, 0, sizeof(iface->verify.counters));
    if (iface->config.verify == UCT_SYNCMEM_VERIFY_NONE) {
        return UCS_OK;
    }

    /* the iface's own copy of the ops: the checked sends replace the
     * plain ones, so that these never test for VERIFY */
    ops->ep_put_short    = uct_syncmem_verify_put_short;
    ops->ep_put_bcopy    = uct_syncmem_verify_put_bcopy;
    ops->ep_put_zcopy    = uct_syncmem_verify_put_zcopy;
    ops->ep_am_short     = uct_syncmem_verify_am_short;
    ops->ep_am_short_iov = uct_syncmem_verify_am_short_iov;
    ops->ep_am_bcopy     = uct_syncmem_verify_am_bcopy;
    ops->ep_am_zcopy     = uct_syncmem_verify_am_zcopy;

    return uct_syncmem_mpool_init(&iface->verify.mp,
                                  sizeof(uct_syncmem_verify_put_t),
                                  UCS_SYS_CACHE_LINE_SIZE, 128,
                                  &uct_syncmem_verify_mpool_ops,
                                  "syncmem_verify_puts");
}

void uct_syncmem_verify_cleanup(uct_syncmem_iface_t *iface)
{
    if (iface->config.verify != UCT_SYNCMEM_VERIFY_NONE) {
        ucs_mpool_cleanup(&iface->verify.mp, 1);
    }
}

void uct_syncmem_iface_verify_counters(uct_iface_h tl_iface,
                                       uct_syncmem_verify_counters_t *c)
{
    *c = ucs_derived_of(tl_iface, uct_syncmem_iface_t)->verify.counters;
}
