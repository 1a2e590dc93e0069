/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - an endpoint's replay ring: every request as it was posted, kept
 * until it completes, and what is built on it (the doorbell's chains, a
 * reconnect's replay, lost atomics, the purge); see syncmem_replay.c.
 */
#ifndef UCT_SYNCMEM_REPLAY_H_
#define UCT_SYNCMEM_REPLAY_H_

#include "syncmem_ep_state.h"

#define UCT_SYNCMEM_RESUME_MAX_PKTS 128 /* Soft-RoCE's unacknowledged PSNs:
                                          a longer request is not resumed
                                          (uct_syncmem_replay_resume_risk) */

/*
 * A request as it was posted, kept until it completes, so that a reconnect
 * can post it again and a doorbell can post it at all (syncmem_replay.c).
 * Written once by the operation; the work request is made from it. data[]
 * holds the bytes of an inline request (the source may be the caller's
 * stack), else the atomic operands (compare_add, swap) and then the
 * scatter list, whose memory (bounce buffer or the user's zcopy buffer) is
 * held until completion. Its PSNs are not kept: a reconnect counts them
 * back from the endpoint's next_psn (uct_syncmem_replay_npkts).
 */
typedef struct uct_syncmem_replay {
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t imm_data;
    uint32_t length;     /* bytes it moves (a read: reads) */
    uint8_t  opcode;     /* enum ibv_wr_opcode */
    uint8_t  send_flags;
    uint8_t  num_sge;    /* of the scatter list; not set when inline */
    uint8_t  lost;       /* an atomic whose outcome a reconnect lost;
                            not set when inline (never an atomic) */
    uint64_t data[];
} uct_syncmem_replay_t;

static UCS_F_ALWAYS_INLINE int uct_syncmem_opcode_is_atomic(int opcode)
{
    return (opcode == IBV_WR_ATOMIC_CMP_AND_SWP) ||
           (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD);
}

/* Packet sequence numbers a request takes: one per MTU of payload (of the
 * reply, for a read), at least one; an atomic one. */
static UCS_F_ALWAYS_INLINE uint32_t
uct_syncmem_wr_npkts(const uct_syncmem_replay_ring_t *replay, int opcode,
                     size_t length)
{
    if (uct_syncmem_opcode_is_atomic(opcode)) {
        return 1;
    }
    return ((length + UCS_MASK(replay->mtu_shift)) >> replay->mtu_shift) +
           (length == 0);
}

/* The ring entry of request sn (the ring exists). */
static UCS_F_ALWAYS_INLINE uct_syncmem_replay_t *
uct_syncmem_replay_entry(const uct_syncmem_replay_ring_t *replay, unsigned sn)
{
    return (uct_syncmem_replay_t*)(replay->ring +
                                   (sn & replay->mask) * replay->stride);
}

/* Requests kept after a fence, moved up by one for a request from before
 * it (uct_syncmem_replay_gap_open). */
typedef struct uct_syncmem_replay_gap {
    ucs_queue_head_t moved;         /* their ops */
    uint16_t         kept;
    uint16_t         sig_sn;        /* ep->tx.sig_sn, moved with them */
} uct_syncmem_replay_gap_t;

enum {
    UCT_SYNCMEM_POST_RING,    /* the doorbell: requests kept, not posted */
    UCT_SYNCMEM_POST_AGAIN,   /* a reconnect's, on a new QP */
    UCT_SYNCMEM_POST_RESUMED  /* a reconnect's, on the resumed QP */
};
void uct_syncmem_replay_ep_init(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_keep_room(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_grow(uct_syncmem_ep_t *ep);
void uct_syncmem_replay_park(uct_syncmem_ep_t *ep);
void uct_syncmem_replay_ep_cleanup(uct_syncmem_ep_t *ep);
void uct_syncmem_replay_destroy_old_qp(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_post(uct_syncmem_ep_t *ep, uint16_t first,
                                     uint16_t count, int how);
ucs_status_t uct_syncmem_replay_peer_ran(uct_syncmem_ep_t *ep,
                                         uint32_t rq_psn, unsigned *ran_p);
uint32_t uct_syncmem_replay_npkts(const uct_syncmem_ep_t *ep, uint16_t first,
                                  uint16_t count);
/* " (RDMA_READ of 16384 bytes at 0x...)": what request sn was, for a log
 * line; "" when the endpoint keeps no ring. */
void uct_syncmem_replay_describe(const uct_syncmem_ep_t *ep, uint16_t sn,
                                 char *buf, size_t max);

const char *uct_syncmem_replay_resume_risk(const uct_syncmem_ep_t *ep,
                                           uint16_t first, uint16_t last);
void uct_syncmem_ep_purge(uct_syncmem_ep_t *ep, ucs_status_t status);
ucs_status_t uct_syncmem_ep_op_status(uct_syncmem_ep_t *ep,
                                      const uct_syncmem_op_t *op,
                                      ucs_status_t status);
ucs_status_t uct_syncmem_ep_lost_status(uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_ring(uct_syncmem_ep_t *ep);
uint16_t uct_syncmem_replay_ring_end(const uct_syncmem_ep_t *ep);
ucs_status_t uct_syncmem_replay_gap_open(uct_syncmem_ep_t *ep,
                                         uct_syncmem_replay_gap_t *gap);
void uct_syncmem_replay_gap_close(uct_syncmem_ep_t *ep,
                                  uct_syncmem_replay_gap_t *gap,
                                  ucs_status_t status);

#endif
