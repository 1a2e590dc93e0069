/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A syncmem iface as far as the handshake's decisions and the receive path
 * need one, with no device behind it: its ids and port, lists, tables, a
 * worker with an async context (for the lock the receive path takes), and
 * receive buffers from a plain memory pool.
 */
#ifndef SYNCMEM_FUZZ_IFACE_H_
#define SYNCMEM_FUZZ_IFACE_H_

#include "fuzz.h"

#include <ucs/async/async.h>

static inline uct_syncmem_iface_t *fuzz_iface_create(void)
{
    static ucs_async_context_t *async;
    static uct_worker_h worker;
    uct_syncmem_iface_t *iface;

    if (worker == NULL) {
        FUZZ_CHECK(ucs_async_context_create(UCS_ASYNC_MODE_POLL, &async) ==
                   UCS_OK);
        FUZZ_CHECK(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) ==
                   UCS_OK);
    }

    iface = calloc(1, sizeof(*iface));
    iface->super.worker = (uct_priv_worker_t*)worker;
    iface->id           = 0x5359a3c0ffee0001ull;
    fuzz_local_port(&iface->port, 1);
    ucs_list_head_init(&iface->eps);
    ucs_list_head_init(&iface->cm.passive);
    kh_init_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_init_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
    return iface;
}

static inline void fuzz_iface_destroy(uct_syncmem_iface_t *iface)
{
    uct_syncmem_rx_links_apply(iface); /* frees the links */
    kh_destroy_inplace(uct_syncmem_qp_sn, &iface->rx.last_sn);
    kh_destroy_inplace(uct_syncmem_qp_link, &iface->rx.replaced);
    free(iface);
}

#endif
