/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring entry writers of the fast path (syncmem_tx.inl, inline C) made
 * callable from test_replay.cc, compiled with the module's own flags.
 */
#include "replay_save.h"

#include <uct_syncmem/syncmem_tx.inl>

void syncmem_test_replay_save(uct_syncmem_ep_t *ep,
                              const struct ibv_send_wr *wr, uint16_t sn)
{
    uct_syncmem_replay_save(ep, wr, sn);
}

void syncmem_test_replay_sge(uct_syncmem_ep_t *ep, uint16_t sn,
                             const struct ibv_send_wr *wr, uint32_t length)
{
    int atomic = uct_syncmem_opcode_is_atomic(wr->opcode);

    uct_syncmem_replay_sge(ep, sn, wr->opcode, wr->send_flags,
                           atomic ? wr->wr.atomic.remote_addr :
                                    wr->wr.rdma.remote_addr,
                           atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey,
                           atomic ? wr->wr.atomic.compare_add : 0,
                           atomic ? wr->wr.atomic.swap : 0, wr->sg_list,
                           wr->num_sge, length, 0);
}

uct_syncmem_replay_t *syncmem_test_replay_entry(uct_syncmem_ep_t *ep,
                                                uint16_t sn)
{
    return uct_syncmem_replay_entry(&ep->replay, sn);
}
