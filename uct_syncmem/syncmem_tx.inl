/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the send fast path shared by every operation: resource checks,
 * posting with selective signalling, bounce buffers and completion ops.
 */
#ifndef UCT_SYNCMEM_TX_INL_
#define UCT_SYNCMEM_TX_INL_

#include "syncmem_ep.h"

#include <uct/base/uct_iov.inl>
#include <arpa/inet.h>
#include <string.h>

/*
 * How an iface keeps its requests, fixed when it is made: no ring
 * (reconnect off, no batching), a replay ring, a ring and the doorbell.
 * The operations that matter most come in a variant for each
 * (uct_syncmem_iface_tx_ops), so that their fast path tests none of it;
 * ANY tests it at run time. With a ring, room to send means a ring (a
 * parked endpoint has none: uct_syncmem_ep_tx_limit).
 */
enum {
    UCT_SYNCMEM_TX_PLAIN,
    UCT_SYNCMEM_TX_RING,
    UCT_SYNCMEM_TX_BATCH,
    UCT_SYNCMEM_TX_ANY
};

/* Room for one more send on this endpoint now? (None unless connected:
 * uct_syncmem_ep_tx_limit.) */
static UCS_F_ALWAYS_INLINE int
uct_syncmem_ep_has_tx_res(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    return (ep->tx.available > 0) && (iface->cq_available > 0);
}

/* The same off the fast path (pending, flush, check, watchdog): a full
 * ring that may grow grows first. */
static inline int
uct_syncmem_ep_tx_room(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    return uct_syncmem_ep_has_tx_res(iface, ep) ||
           ((iface->cq_available > 0) &&
            (uct_syncmem_replay_grow(ep) == UCS_OK)); /* connected only */
}

/* The next request of ep asks for a completion (out of line: a store here
 * would cost the operations' fast path registers) */
static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_signal_next(uct_syncmem_ep_t *ep)
{
    ep->tx.sig_sn = ep->tx.sn + 1;
    return UCS_OK;
}

/* uct_syncmem_ep_check_room's answer for an endpoint that is parked
 * (uct_syncmem_replay_park) and may send: the operation takes its ring
 * (uct_syncmem_ep_unpark) and goes again. Never returned to UCT's users. */
#define UCT_SYNCMEM_ERR_PARKED ((ucs_status_t)(UCS_ERR_LAST - 1))

/* Not behind requests waiting in the pending queue (or one of them, being
 * dispatched): a new operation may not overtake them. */
static UCS_F_ALWAYS_INLINE int
uct_syncmem_ep_goes_next(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    return ucs_arbiter_group_is_empty(&ep->arb_group) ||
           (iface->dispatching == ep);
}

/*
 * Whether an operation may be posted now. Requests waiting in the pending
 * queue go first, so a new operation may not overtake them (except when it
 * is one of them, being dispatched). No call on the way out: a call would
 * make the operation save registers on its fast path too. So a parked
 * endpoint is answered UCT_SYNCMEM_ERR_PARKED, and the operation calls
 * what takes its ring and posts it again last (the operations of
 * uct_syncmem_iface_tx_ops), or uct_syncmem_ep_check_tx does (the others).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_check_room(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    if (ucs_likely((ep->tx.available > 0) &&
                   (iface->cq_available > (int)iface->config.tx_signal_every) &&
                   uct_syncmem_ep_goes_next(iface, ep))) {
        return UCS_OK;
    }

    if (uct_syncmem_ep_has_tx_res(iface, ep) &&
        uct_syncmem_ep_goes_next(iface, ep)) {
        /* Few send CQ entries left: this request asks for a completion.
         * With many endpoints, each may hold up to TX_MODERATION - 1
         * entries that no completion reports yet; asking on every request
         * now gives them back as they complete, where waiting for the CQ
         * to run out would refuse operations and walk every endpoint
         * (uct_syncmem_iface_cq_rescue) */
        return uct_syncmem_ep_signal_next(ep);
    }

    if (ep->state == UCT_SYNCMEM_EP_FAILED) {
        return ep->status;
    }

    if (iface->cq_available <= 0) {
        /* perhaps all taken by requests no completion will report yet:
         * the next progress asks (uct_syncmem_iface_cq_rescue) */
        iface->cq_starved = 1;
        iface->check_due  = 1;
    } else if (((ep->state == UCT_SYNCMEM_EP_CONNECTING) ||
                ((ep->state == UCT_SYNCMEM_EP_CONNECTED) && ep->fence_wait)) &&
               !ep->fence_again && (ep->replay.stride != 0) &&
               uct_syncmem_ep_goes_next(iface, ep)) {
        /* connecting, or a fence waits: kept in the ring until CONNECT or
         * the fence is over; the operation calls out to say how
         * (uct_syncmem_ep_unpark), and then goes */
        return (iface->keeping == ep) ? UCS_OK : UCT_SYNCMEM_ERR_PARKED;
    } else if ((ep->state != UCT_SYNCMEM_EP_CONNECTED) ||
               (ep->tx.available > 0)) {
        /* not connected, or behind its pending requests */
    } else if ((ep->replay.ring == NULL) && (ep->replay.stride != 0)) {
        /* parked: takes a ring and goes at once, unless behind its
         * pending requests (pending_add took one already) */
        if (uct_syncmem_ep_goes_next(iface, ep)) {
            return UCT_SYNCMEM_ERR_PARKED;
        }
    } else if (uct_syncmem_ep_tx_limit(iface, ep) <
               (int)iface->config.tx_queue_len) {
        /* a ring that may grow: it grows now, out of line, as a parked
         * one takes its ring (uct_syncmem_ep_unpark), so that no
         * operation is refused while the send queue has room (a
         * pending_add after it would find room and answer BUSY); behind
         * pending requests, the next progress grows it. Not while a fence
         * waits: no ring grows then (uct_syncmem_replay_grow), and the
         * operation would be sent back here */
        if (!ep->fence_wait &&
            uct_syncmem_ep_goes_next(iface, ep)) {
            return UCT_SYNCMEM_ERR_PARKED;
        }
        iface->grow_due  = 1;
        iface->check_due = 1;
    }
    return UCS_ERR_NO_RESOURCE;
}

/*
 * An operation found ep parked (uct_syncmem_ep_check_room): its ring now (a
 * malloc). Or ep connects, or a fence waits: the request is kept in its
 * ring (room made there, up to TX_QUEUE_LEN) and posted, in order, at
 * CONNECT or when the fence is over; nothing rings it before
 * (uct_syncmem_replay_ring). UCS_OK: the operation may go again, kept
 * for the doorbell: *mode_p is then UCT_SYNCMEM_TX_BATCH, and
 * iface->keeping lets it past uct_syncmem_ep_check_room
 * (uct_syncmem_ep_unparked ends that).
 */
static inline ucs_status_t uct_syncmem_ep_unpark(uct_syncmem_ep_t *ep,
                                                 int *mode_p)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    if ((ep->state != UCT_SYNCMEM_EP_CONNECTING) && !ep->fence_wait) {
        return (uct_syncmem_replay_grow(ep) == UCS_OK) ? UCS_OK :
               UCS_ERR_NO_RESOURCE;
    } else if (uct_syncmem_replay_keep_room(ep) != UCS_OK) {
        return UCS_ERR_NO_RESOURCE;
    }
    iface->keeping  = ep;
    iface->db_quiet = 0; /* kept: not posted at once */
    *mode_p         = UCT_SYNCMEM_TX_BATCH;
    return UCS_OK;
}

static inline void uct_syncmem_ep_unparked(uct_syncmem_ep_t *ep)
{
    ucs_derived_of(ep->super.super.iface, uct_syncmem_iface_t)->keeping =
            NULL;
}

/* The body of an operation's out-of-line function for a parked or
 * connecting endpoint: a ring (or room kept in it), then _call (the
 * operation again, in the variable mode, which uct_syncmem_ep_unpark may
 * change). */
#define UCT_SYNCMEM_EP_UNPARKED(_tl_ep, _mode, _call) \
    ({ \
        uct_syncmem_ep_t *_ep = ucs_derived_of(_tl_ep, uct_syncmem_ep_t); \
        typeof(_call) _ret   = UCS_ERR_NO_RESOURCE; \
        \
        if (uct_syncmem_ep_unpark(_ep, &(_mode)) == UCS_OK) { \
            _ret = (_call); \
            uct_syncmem_ep_unparked(_ep); \
        } \
        _ret; \
    })

/* uct_syncmem_ep_check_room for the operations that may call on their
 * way: a parked endpoint takes its ring here. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_check_tx(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    ucs_status_t status = uct_syncmem_ep_check_room(iface, ep);
    int mode;

    if (ucs_unlikely(status == UCT_SYNCMEM_ERR_PARKED)) {
        /* these operations post in mode UCT_SYNCMEM_TX_ANY, which keeps
         * while ep connects (iface->keep_any): no mode to change, nothing
         * to end */
        status = uct_syncmem_ep_unpark(ep, &mode);
        uct_syncmem_ep_unparked(ep);
    }
    return status;
}

/* ibv_post_send failed: the QP is broken. Give back what the post took;
 * kept out of line, and told only of ep (not of the request), so that the
 * fast path keeps nothing but ep across the post. */
static UCS_F_NOINLINE ucs_status_t
uct_syncmem_ep_post_failed(uct_syncmem_ep_t *ep, int ret)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                uct_syncmem_iface_t);

    --ep->tx.sn;
    ++ep->tx.available;
    ++iface->cq_available;
    ucs_error("syncmem: ibv_post_send(QP 0x%x, request %u) failed: %s",
              ep->qp->qp_num, (unsigned)(uint16_t)(ep->tx.sn + 1),
              strerror(ret));
    return UCS_ERR_IO_ERROR;
}

/*
 * The entry of an inline request sn of length bytes, for the caller to fill
 * in the rest (remote address or immediate data, the bytes). One packet: a
 * short request is at most UCT_SYNCMEM_MAX_INLINE bytes, the smallest path
 * MTU.
 */
static UCS_F_ALWAYS_INLINE uct_syncmem_replay_t *
uct_syncmem_replay_inline(uct_syncmem_ep_t *ep, unsigned sn, uint8_t opcode,
                          uint8_t send_flags, unsigned length)
{
    uct_syncmem_replay_t *e = uct_syncmem_replay_entry(&ep->replay, sn);

    e->length     = length;
    e->opcode     = opcode;
    e->send_flags = send_flags;
    ++ep->replay.next_psn;
    return e;
}

/*
 * Keep what a reconnect or the doorbell needs to post request sn: an RDMA
 * (with atomic: an atomic's operands) from num_sge entries of sge, length
 * bytes; count the PSNs it takes. Made from values the operation holds:
 * read back from a work request, each would be loaded again after every
 * byte stored into the entry (which may alias it). sge_kept: sge is the
 * entry's own scatter list already (an RDMA's, made there: zcopy).
 */
static UCS_F_ALWAYS_INLINE void
uct_syncmem_replay_sge(uct_syncmem_ep_t *ep, uint16_t sn, uint8_t opcode,
                       uint8_t send_flags, uint64_t remote_addr, uint32_t rkey,
                       uint64_t compare_add, uint64_t swap,
                       const struct ibv_sge *sge, int num_sge, uint32_t length,
                       int sge_kept)
{
    uct_syncmem_replay_t *e = sge_kept ?
                              ucs_container_of((uint64_t*)sge,
                                               uct_syncmem_replay_t, data) :
                              uct_syncmem_replay_entry(&ep->replay, sn);
    struct ibv_sge *dst     = (struct ibv_sge*)e->data;
    int i;

    e->remote_addr = remote_addr;
    e->rkey        = rkey;
    e->length      = length;
    e->opcode      = opcode;
    e->send_flags  = send_flags;
    e->num_sge     = num_sge;
    e->lost        = 0;
    if (uct_syncmem_opcode_is_atomic(opcode)) {
        e->data[0] = compare_add;
        e->data[1] = swap;
        dst        = (struct ibv_sge*)&e->data[2];
    }
    for (i = 0; !sge_kept && (i < num_sge); ++i) {
        dst[i] = sge[i];
    }
    ep->replay.next_psn += uct_syncmem_wr_npkts(&ep->replay, opcode, length);
}

/* The same for any work request wr (rare ones: AMs but am_short, VERIFY's
 * sends, the nop): inline bytes are copied, the source may be the
 * caller's stack. */
static UCS_F_ALWAYS_INLINE void
uct_syncmem_replay_save(uct_syncmem_ep_t *ep, const struct ibv_send_wr *wr,
                        uint16_t sn)
{
    uct_syncmem_replay_t *e;
    uint64_t remote_addr;
    uint32_t rkey;
    uint8_t *bytes;
    size_t length = 0;
    int i, inl;

    for (i = 0; i < wr->num_sge; ++i) {
        length += wr->sg_list[i].length;
    }
    if (uct_syncmem_opcode_is_atomic(wr->opcode)) {
        uct_syncmem_replay_sge(ep, sn, wr->opcode, wr->send_flags,
                               wr->wr.atomic.remote_addr, wr->wr.atomic.rkey,
                               wr->wr.atomic.compare_add, wr->wr.atomic.swap,
                               wr->sg_list, wr->num_sge, length, 0);
        return;
    }

    remote_addr = (wr->opcode == IBV_WR_SEND_WITH_IMM) ? 0 :
                  wr->wr.rdma.remote_addr;
    rkey        = (wr->opcode == IBV_WR_SEND_WITH_IMM) ? 0 :
                  wr->wr.rdma.rkey;
    inl         = wr->send_flags & IBV_SEND_INLINE;
    uct_syncmem_replay_sge(ep, sn, wr->opcode, wr->send_flags, remote_addr,
                           rkey, 0, 0, wr->sg_list, inl ? 0 : wr->num_sge,
                           length, 0);
    e = uct_syncmem_replay_entry(&ep->replay, sn);
    if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
        e->imm_data = wr->imm_data;
    }
    if (inl) {
        bytes = (uint8_t*)e->data;
        for (i = 0; i < wr->num_sge; ++i) {
            if (wr->sg_list[i].length == 0) {
                continue; /* an empty payload may have no address */
            }
            memcpy(bytes, (void*)(uintptr_t)wr->sg_list[i].addr,
                   wr->sg_list[i].length);
            bytes += wr->sg_list[i].length;
        }
    }
}

/* Immediate data of AM id posted as request sn (layout in syncmem.h). */
static UCS_F_ALWAYS_INLINE uint32_t uct_syncmem_am_imm_sn(unsigned sn,
                                                         uint8_t id)
{
    return htonl(id | ((uint32_t)(uint16_t)sn << UCT_SYNCMEM_AM_IMM_SN_SHIFT));
}

/* The same for the AM that ep posts next. */
static UCS_F_ALWAYS_INLINE uint32_t
uct_syncmem_am_imm(const uct_syncmem_ep_t *ep, uint8_t id)
{
    return uct_syncmem_am_imm_sn(ep->tx.sn + 1u, id);
}

/*
 * The send flags of request sn: signalled when an op waits on it (a user
 * completion, fetched data), and otherwise at tx.sig_sn: TX_MODERATION
 * requests after the last signalled one, so that send queue slots come
 * back (a completion retires every request up to it, because RC completes
 * in order), or the first request after the endpoint was idle. Then a put
 * and a flush (UCP's put and flush, MPI's put and MPI_Win_flush) is one
 * request: an unsignalled put would make the flush post an empty write
 * after it, two requests on the wire (1.7 times the latency on
 * Soft-RoCE).
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_syncmem_ep_tx_flags(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                        unsigned flags, int signal, unsigned sn)
{
    if (signal || ((uint16_t)sn == ep->tx.sig_sn)) {
        flags         |= IBV_SEND_SIGNALED;
        ep->tx.sig_sn  = sn + iface->config.tx_signal_every;
        if (ucs_unlikely(--ep->rtt.skip == 0)) {
            /* timed once posted (a call here would make every caller
             * save registers): uct_syncmem_ep_rtt_post */
            ep->rtt.next_sn = sn;
        }
    }
    return flags;
}

/* Request sn takes its send queue slot and CQ entry (the caller checked
 * there is room: uct_syncmem_ep_check_tx). */
static UCS_F_ALWAYS_INLINE void
uct_syncmem_ep_tx_take(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                       unsigned sn)
{
    ep->tx.sn = sn;
    --ep->tx.available;
    --iface->cq_available;
}

/* Keep request tx.sn for the doorbell (syncmem_doorbell.c). Inlined: of a
 * batch, only the first request and the one that rings call out. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_keep(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                    uct_syncmem_op_t *op)
{
    if (op != NULL) {
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }
    if (ucs_unlikely(ucs_list_is_empty(&ep->db_list) ||
                     ((uint16_t)(ep->tx.sn - ep->tx.rung_sn) >=
                      iface->config.db_batch) ||
                     (ep->tx.available <= 0) ||
                     (iface->cq_available <= 0) || iface->armed ||
                     (ep->rtt.skip == 0))) {
        return uct_syncmem_ep_keep_slow(iface, ep);
    }
    return UCS_OK;
}

/*
 * Post request sn, which took the last slot (uct_syncmem_ep_tx_take): wr,
 * with its flags and wr_id set and its ring entry (if any) written; or, in
 * mode UCT_SYNCMEM_TX_BATCH (or ANY with TX_DB_BATCH > 1), keep it for the
 * doorbell. The bookkeeping comes before the post, so that after it only
 * the endpoint is needed.
 *
 * Doorbell batching (UCX_SYNCMEM_TX_DB_BATCH > 1): the first request after
 * a progress is posted at once, so that a lone request costs what it costs
 * without batching and waits for nothing. Those that follow it before the
 * next progress are kept in the replay ring only, and posted as one chain
 * (one doorbell; on Soft-RoCE one system call) at the next progress, flush
 * or check, when TX_DB_BATCH have gathered, when the endpoint or the CQ
 * runs out of room (the caller's next send would block), or at once while
 * the iface is armed for events (the caller may sleep next).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_post_wr(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                       struct ibv_send_wr *wr, uct_syncmem_op_t *op,
                       unsigned sn, int mode)
{
    int ret;

    if (op != NULL) {
        op->sn = sn;
    }
    if ((mode == UCT_SYNCMEM_TX_BATCH) ||
        ((mode == UCT_SYNCMEM_TX_ANY) && ucs_unlikely(iface->keep_any))) {
        if (!iface->db_quiet) {
            /* the batched variants inline the doorbell's test, the rarer
             * operations call it (inlined, it made them save registers) */
            return (mode == UCT_SYNCMEM_TX_BATCH) ?
                   uct_syncmem_ep_keep(iface, ep, op) :
                   uct_syncmem_ep_keep_any(iface, ep, op);
        }
        /* nothing kept anywhere (progress rang it all): this one goes now
         * (db_eps is empty; not asserted: it is a test on the fast path) */
        iface->db_quiet = 0;
    }

    ret = ibv_post_send(ep->qp, wr, &ep->bad_wr);
    if (ucs_unlikely(ret != 0)) {
        return uct_syncmem_ep_post_failed(ep, ret);
    }
    if (op != NULL) {
        ucs_queue_push(&ep->tx.outstanding, &op->queue);
    }
    if (ucs_unlikely(ep->rtt.skip == 0)) {
        return uct_syncmem_ep_rtt_post(ep); /* UCS_OK, a tail call */
    }
    return UCS_OK;
}

/* Post one work request (any but put_short and am_short, which write their
 * ring entry themselves): signal it if asked (see uct_syncmem_ep_tx_flags),
 * and keep it in the ring. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_post(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                    struct ibv_send_wr *wr, uct_syncmem_op_t *op, int signal)
{
    uint16_t sn = ep->tx.sn + 1;

    wr->send_flags = uct_syncmem_ep_tx_flags(iface, ep, wr->send_flags,
                                             signal, sn);
    wr->wr_id      = sn;
    wr->next       = NULL;
    if (ep->replay.ring != NULL) {
        uct_syncmem_replay_save(ep, wr, sn);
    }
    uct_syncmem_ep_tx_take(iface, ep, sn);
    return uct_syncmem_ep_post_wr(iface, ep, wr, op, sn, UCT_SYNCMEM_TX_ANY);
}

/*
 * Post an RDMA (put, get) or an atomic (compare_add, swap) from num_sge
 * entries of sge, length bytes: uct_syncmem_ep_post for the operations
 * that matter most, with the ring entry written from the arguments (see
 * uct_syncmem_replay_sge), made for mode (UCT_SYNCMEM_TX_*).
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_post_sge(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                        enum ibv_wr_opcode opcode, uint64_t remote_addr,
                        uct_rkey_t rkey, uint64_t compare_add, uint64_t swap,
                        struct ibv_sge *sge, int num_sge, uint32_t length,
                        uct_syncmem_op_t *op, int signal, int mode,
                        int sge_kept)
{
    uint16_t sn    = ep->tx.sn + 1;
    unsigned flags = uct_syncmem_ep_tx_flags(iface, ep, 0, signal, sn);
    struct ibv_send_wr wr;

    if (mode == UCT_SYNCMEM_TX_ANY) {
        if (ep->replay.ring != NULL) {
            uct_syncmem_replay_sge(ep, sn, opcode, flags, remote_addr, rkey,
                                   compare_add, swap, sge, num_sge, length,
                                   0);
        }
    } else {
        /* not asserted: an assertion is a test on the fast path */
        if (mode != UCT_SYNCMEM_TX_PLAIN) {
            uct_syncmem_replay_sge(ep, sn, opcode, flags, remote_addr, rkey,
                                   compare_add, swap, sge, num_sge, length,
                                   sge_kept);
        }
    }
    wr.wr_id      = sn;
    wr.next       = NULL;
    wr.sg_list    = sge;
    wr.num_sge    = num_sge;
    wr.opcode     = opcode;
    wr.send_flags = flags;
    if (uct_syncmem_opcode_is_atomic(opcode)) {
        wr.wr.atomic.remote_addr = remote_addr;
        wr.wr.atomic.rkey        = (uint32_t)rkey;
        wr.wr.atomic.compare_add = compare_add;
        wr.wr.atomic.swap        = swap;
    } else {
        wr.wr.rdma.remote_addr   = remote_addr;
        wr.wr.rdma.rkey          = (uint32_t)rkey;
    }
    uct_syncmem_ep_tx_take(iface, ep, sn);
    return uct_syncmem_ep_post_wr(iface, ep, &wr, op, sn, mode);
}

/* A signalled empty write: it completes after everything posted before it,
 * so it reports on unsignalled requests (flush) or on the peer (ep_check). */
static inline ucs_status_t
uct_syncmem_ep_post_nop(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep)
{
    struct ibv_send_wr wr;

    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    return uct_syncmem_ep_post(iface, ep, &wr, NULL, 1);
}

/* Post a further request of an operation from its last one's completion
 * (_post, a call returning ucs_status_t): the next step of an emulated
 * atomic, a chained read-back. While a fence waits the operation is from
 * before it, so the request goes before what is kept after the fence
 * (uct_syncmem_replay_gap_open). */
#define UCT_SYNCMEM_EP_POST_STEP(_ep, _post) \
    ({ \
        uct_syncmem_replay_gap_t _gap; \
        ucs_status_t _status; \
        \
        if (ucs_likely(!(_ep)->fence_wait)) { \
            _status = (_post); \
        } else { \
            _status = uct_syncmem_replay_gap_open(_ep, &_gap); \
            if (_status == UCS_OK) { \
                _status = (_post); \
                uct_syncmem_replay_gap_close(_ep, &_gap, _status); \
                uct_syncmem_ep_ring(_ep); \
            } \
        } \
        _status; \
    })

/* The empty write of a fence that waits for an unsignalled request
 * (uct_syncmem_ep_fence_start): a request from before the fence, so it goes
 * before what is kept after it; once there is room for it. Until then each
 * progress tries again (iface->fence_due). */
static inline void uct_syncmem_ep_fence_nop(uct_syncmem_iface_t *iface,
                                            uct_syncmem_ep_t *ep)
{
    if (!ep->fence_nop || (ep->state != UCT_SYNCMEM_EP_CONNECTED)) {
        return;
    }

    if (UCT_SYNCMEM_EP_POST_STEP(ep, uct_syncmem_ep_post_nop(iface, ep)) ==
        UCS_OK) {
        ep->fence_nop = 0;
    } else {
        iface->fence_due = 1;
        iface->check_due = 1;
    }
}

static UCS_F_ALWAYS_INLINE uct_syncmem_op_t *
uct_syncmem_op_get(uct_syncmem_iface_t *iface, uct_completion_t *comp,
                   uct_syncmem_op_cb_t handler)
{
    uct_syncmem_op_t *op = ucs_mpool_get_inline(&iface->op_mp);

    if (ucs_likely(op != NULL)) {
        op->handler = handler;
        op->comp    = comp;
    }
    return op;
}

static UCS_F_ALWAYS_INLINE uct_syncmem_desc_t *
uct_syncmem_desc_get(uct_syncmem_iface_t *iface, uct_syncmem_op_cb_t handler)
{
    uct_syncmem_desc_t *desc = ucs_mpool_get_inline(&iface->tx_mp);

    if (ucs_likely(desc != NULL)) {
        desc->super.handler = handler;
        desc->super.comp    = NULL;
    }
    return desc;
}

static UCS_F_ALWAYS_INLINE void *uct_syncmem_desc_data(uct_syncmem_desc_t *desc)
{
    return desc + 1;
}

/* Room to send, and a bounce buffer to send from. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_syncmem_ep_tx_desc(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                       uct_syncmem_op_cb_t handler, uct_syncmem_desc_t **desc_p)
{
    ucs_status_t status = uct_syncmem_ep_check_tx(iface, ep);

    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    *desc_p = uct_syncmem_desc_get(iface, handler);
    return ucs_likely(*desc_p != NULL) ? UCS_OK : UCS_ERR_NO_RESOURCE;
}

/*
 * bcopy: packs the user's data into the bounce buffer, the sge to post it
 * from. Returns the length, or an error after giving the buffer back.
 */
static UCS_F_ALWAYS_INLINE ssize_t
uct_syncmem_desc_pack(uct_syncmem_iface_t *iface, uct_syncmem_desc_t *desc,
                      uct_pack_callback_t pack_cb, void *arg,
                      struct ibv_sge *sge)
{
    sge->addr   = (uintptr_t)uct_syncmem_desc_data(desc);
    sge->length = pack_cb(uct_syncmem_desc_data(desc), arg);
    sge->lkey   = desc->lkey;
    if (ENABLE_PARAMS_CHECK &&
        ucs_unlikely(sge->length > iface->config.seg_size)) {
        ucs_error("syncmem: bcopy packed %u bytes, more than SEG_SIZE (%zu)",
                  sge->length, iface->config.seg_size);
        ucs_mpool_put(desc);
        return UCS_ERR_INVALID_PARAM;
    }
    return sge->length;
}

/* Scatter/gather list from a UCT iov, and the bytes in it (*length_p);
 * empty entries are left out. */
static UCS_F_ALWAYS_INLINE int
uct_syncmem_sge_fill_iov(struct ibv_sge *sge, const uct_iov_t *iov,
                         size_t iovcnt, uint32_t *length_p)
{
    uint32_t length = 0;
    int num_sge     = 0;
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        sge[num_sge].length = uct_iov_get_length(&iov[i]);
        if (sge[num_sge].length == 0) {
            continue;
        }
        sge[num_sge].addr = (uintptr_t)iov[i].buffer;
        sge[num_sge].lkey = ((uct_syncmem_mem_t*)iov[i].memh)->mr->lkey;
        length           += sge[num_sge].length;
        ++num_sge;
    }
    *length_p = length;
    return num_sge;
}

#endif
