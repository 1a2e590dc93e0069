/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - events: a file descriptor that becomes readable when the iface
 * has work, so a waiting process (UCP_FEATURE_WAKEUP) uses no CPU.
 *
 * Both CQs of the iface (sends, receives) report to one completion
 * channel; its fd is the iface's event fd, edge-triggered: one arm, at most
 * one wakeup.
 *
 * Arming only when nothing is pending: a completion channel reports only
 * completions that arrive after the CQ was armed, so after arming we look
 * at each armed CQ once more. A completion found there is kept (the
 * "stash", handed to the next progress call) and arm answers UCS_ERR_BUSY:
 * no event is lost between the last progress and the arm. Endpoints still
 * connecting also answer BUSY, because handshake retransmissions are timed
 * from progress.
 */
#include "syncmem_ep.h"

#include <errno.h>
#include <fcntl.h>


ucs_status_t uct_syncmem_iface_event_init(uct_syncmem_iface_t *iface)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);

    iface->stashed = 0;
    iface->channel = ibv_create_comp_channel(md->ctx);
    if (iface->channel == NULL) {
        ucs_error("syncmem: ibv_create_comp_channel(%s) failed: %m", md->name);
        return UCS_ERR_IO_ERROR;
    }

    if (fcntl(iface->channel->fd, F_SETFL, O_NONBLOCK) != 0) {
        ucs_error("syncmem: cannot make the event fd non-blocking: %m");
        ibv_destroy_comp_channel(iface->channel);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t uct_syncmem_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    *fd_p = ucs_derived_of(tl_iface, uct_syncmem_iface_t)->channel->fd;
    return UCS_OK;
}

/* Arm one CQ; BUSY if it already holds a completion (kept for progress). */
static ucs_status_t uct_syncmem_iface_arm_cq(uct_syncmem_iface_t *iface,
                                             struct ibv_cq *cq, int dir)
{
    int ret;

    if (iface->stashed & UCS_BIT(dir)) {
        return UCS_ERR_BUSY;
    }

    ret = ibv_req_notify_cq(cq, 0);
    if (ret) {
        ucs_error("syncmem: ibv_req_notify_cq() failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    if (ibv_poll_cq(cq, 1, &iface->stash[dir]) > 0) {
        iface->stashed |= UCS_BIT(dir);
        return UCS_ERR_BUSY;
    }
    return UCS_OK;
}

ucs_status_t uct_syncmem_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_syncmem_iface_t *iface = ucs_derived_of(tl_iface, uct_syncmem_iface_t);
    unsigned tx_events = 0, rx_events = 0;
    ucs_status_t status;
    struct ibv_cq *cq;
    void *cq_ctx;

    /* consume what woke us: an event not consumed keeps the fd readable */
    while (ibv_get_cq_event(iface->channel, &cq, &cq_ctx) == 0) {
        if (cq == iface->cq) {
            ++tx_events;
        } else {
            ++rx_events;
        }
    }
    if (errno != EAGAIN) {
        ucs_error("syncmem: ibv_get_cq_event() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    if (tx_events > 0) {
        ibv_ack_cq_events(iface->cq, tx_events);
    }
    if (rx_events > 0) {
        ibv_ack_cq_events(iface->rx.cq, rx_events);
    }

    /* requests not rung yet would never complete while we sleep */
    if ((tx_events + rx_events > 0) || (iface->cm.connecting > 0) ||
        (iface->stashed != 0) || !ucs_list_is_empty(&iface->db_eps)) {
        return UCS_ERR_BUSY;
    }

    if (events & UCT_EVENT_SEND_COMP) {
        status = uct_syncmem_iface_arm_cq(iface, iface->cq, UCT_SYNCMEM_DIR_TX);
        if (status != UCS_OK) {
            return status;
        }
    }

    if (events & UCT_EVENT_RECV) {
        status = uct_syncmem_iface_arm_cq(iface, iface->rx.cq,
                                          UCT_SYNCMEM_DIR_RX);
        if (status != UCS_OK) {
            return status;
        }
    }

    iface->armed = 1;
    return UCS_OK;
}
