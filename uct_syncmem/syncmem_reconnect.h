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

/* An endpoint's reconnect in progress, and the last resume. */
typedef struct uct_syncmem_reconnect {
    struct ibv_qp    *old_qp;       /* broken, until its flushes are in */
    uint16_t         fail_sn;       /* first request of unknown outcome */
    uint16_t         old_last_sn;   /* last request posted on old_qp */
    uint32_t         old_peer_qpn;  /* the passive QP old_qp talked to */
    uint16_t         unrun_sn;      /* first request the peer surely did
                                       not run: after old_last_sn, or what
                                       its REP says (RQ_PSN) */
    uint16_t         ran_end;       /* while ran_valid: requests before it
                                       ran (the peer said so), and are
                                       never posted as themselves again */
    uint8_t          ran_valid;     /* ...until they have all completed */
    uint8_t          resume;        /* this generation's REQ asks to
                                       resume */
    uint32_t         old_rq_psn;    /* old_qp's next expected PSN */
    uint16_t         resumed_sn;    /* fail_sn of the last resume */
    uint8_t          resumed_once;  /* ...which is valid */
    uint16_t         refused_sn;    /* the last request the peer refused
                                       as invalid (REM_INV_REQ_ERR) */
    uint8_t          refused_once;  /* ...which is valid */
    ucs_time_t       started;
    ucs_time_t       deadline;
} uct_syncmem_reconnect_t;

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
