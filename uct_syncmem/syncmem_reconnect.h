/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - an endpoint's events in, its state machine's actions out
 * (syncmem_ep_fsm.c decides, syncmem_reconnect.c carries out): connect,
 * reconnect onto a new QP or resume the old one, fail.
 */
#ifndef UCT_SYNCMEM_RECONNECT_H_
#define UCT_SYNCMEM_RECONNECT_H_

#include "syncmem.h"
#include "syncmem_ep_fsm.h"

/* Each returns UCS_OK, or the status the
 * event failed the endpoint with: its error handler has run, and the
 * endpoint may be gone. Called without the async lock. */
ucs_status_t uct_syncmem_ep_event(uct_syncmem_ep_t *ep,
                                  uct_syncmem_ep_ev_t event);
ucs_status_t uct_syncmem_ep_fail(uct_syncmem_ep_t *ep, ucs_status_t status);
void uct_syncmem_ep_tx_error(uct_syncmem_ep_t *ep, const struct ibv_wc *wc);
/* While endpoints connect: the REPs the async handler noted, the timer. */
unsigned uct_syncmem_iface_connect_progress(uct_syncmem_iface_t *iface);

#endif
