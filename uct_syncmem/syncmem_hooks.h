/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - what only tests and tools call: fault injection and counters.
 * Not part of the module's interface to UCX.
 */
#ifndef UCT_SYNCMEM_HOOKS_H_
#define UCT_SYNCMEM_HOOKS_H_

#include "syncmem_iface.h"

/* syncmem_watchdog.c, syncmem_reconnect.c */
/* Move ep's QP to the error state, as a broken link would. */
ucs_status_t uct_syncmem_ep_inject_qp_error(uct_ep_h ep);
/* How often ep has reconnected. */
unsigned uct_syncmem_ep_reconnects(uct_ep_h ep);
/* Whether ep's first handshake has not completed yet. */
int uct_syncmem_ep_connecting(uct_ep_h ep);
/* The sequence numbers of ep's last request posted and last completed. */
void uct_syncmem_ep_tx_sns(uct_ep_h ep, uint16_t *sn_p, uint16_t *acked_sn_p);

/* syncmem_cm_hooks.c: connections this iface accepted and still holds; the
 * address handles its handshake made (one a peer port) */
unsigned uct_syncmem_iface_num_passive(uct_iface_h iface);
unsigned uct_syncmem_iface_num_ahs(uct_iface_h iface);
/* syncmem_cm_hooks.c: connection requests iface refused for room, ever */
unsigned uct_syncmem_iface_refused(uct_iface_h iface);
/* ...and answers BUSY its endpoints took (refused for room, not counted
 * as tries), ever */
unsigned uct_syncmem_iface_busy_answers(uct_iface_h iface);
/* syncmem_cm_hooks.c: iface's passive QPs refuse RDMA writes from now on (the
 * writer gets IBV_WC_REM_INV_REQ_ERR), as a device that lost track of a
 * connection refuses a valid request; a reconnect's new QP takes them,
 * unless persist: then the QPs it makes later refuse them too. */
ucs_status_t uct_syncmem_iface_inject_refusal(uct_iface_h iface, int persist);

/* syncmem_rcache.c: the counters of md's cache; UNSUPPORTED without one */
ucs_status_t uct_syncmem_md_rcache_counters(uct_md_h md,
                                            uct_syncmem_rcache_counters_t *c);

/* syncmem_memh.c: remote keys made for invalidation (packed with
 * UCT_SYNCMEM_PACK_INVALIDATE), by every md, ever */
uint64_t uct_syncmem_md_inv_keys(void);
/* ...and deregistrations with UCT_MD_MEM_DEREG_FLAG_INVALIDATE */
uint64_t uct_syncmem_md_invalidations(void);
/* syncmem_memh.c: the registration under a memory handle (shared by the
 * handles of the same cached or CUDA registration) */
const uct_syncmem_mem_t *uct_syncmem_md_memh_reg(uct_mem_h memh);

/* syncmem_verify.c: what the consistency check did */
void uct_syncmem_iface_verify_counters(uct_iface_h iface,
                                       uct_syncmem_verify_counters_t *c);

/* syncmem_amo.c: what the emulated atomics did */
void uct_syncmem_iface_amo_counters(uct_iface_h iface,
                                    uct_syncmem_amo_counters_t *c);

/* syncmem_crc.c: the table-driven CRC32C, whatever the CPU has */
uint32_t uct_syncmem_crc32c_sw(uint32_t crc, const void *buf, size_t length);

#endif
