/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef SYNCMEM_TEST_REPLAY_SAVE_H_
#define SYNCMEM_TEST_REPLAY_SAVE_H_

#ifdef __cplusplus
extern "C" {
#endif

#include <uct_syncmem/syncmem_ep.h>
#include <uct_syncmem/syncmem_qp.h>
#include <uct_syncmem/syncmem_hooks.h>

/* uct_syncmem_replay_save: an entry from any work request */
void syncmem_test_replay_save(uct_syncmem_ep_t *ep,
                              const struct ibv_send_wr *wr, uint16_t sn);
/* uct_syncmem_replay_sge: an RDMA's or atomic's entry from its values */
void syncmem_test_replay_sge(uct_syncmem_ep_t *ep, uint16_t sn,
                             const struct ibv_send_wr *wr, uint32_t length);
uct_syncmem_replay_t *syncmem_test_replay_entry(uct_syncmem_ep_t *ep,
                                                uint16_t sn);

#ifdef __cplusplus
}
#endif

#endif
