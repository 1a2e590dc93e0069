/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the device's asynchronous events (ibv_get_async_event): a port
 * that goes down or comes back tells the endpoints on it at once, instead
 * of leaving them to find out through RC retries and handshake timers.
 *
 *  - IBV_EVENT_PORT_ERR: a connected endpoint with requests outstanding
 *    moves its QP to the error state (PORT_DOWN), so that its reconnect
 *    starts now. Without it a request in flight waits out every RC retry,
 *    and Soft-RoCE, whose send fails locally while the port is down, may
 *    leave the QP with neither a completion nor a retransmission until the
 *    stall check (syncmem_watchdog.c). An idle endpoint is left alone: RC
 *    rides out a flap with nothing to send.
 *  - IBV_EVENT_PORT_ACTIVE: a reconnecting endpoint still waiting for its
 *    answer sends its REQ again now (PORT_UP), not at its next CM_TIMEOUT.
 *  - QP and device errors are logged; a QP's own failure reaches its
 *    endpoint through its flushed completions.
 *
 * The events belong to the device context, which all ifaces of an MD share,
 * so the MD owns the handler, in UCS's async thread with no async context
 * (it only sets bits); each iface takes its bits in progress, with the
 * watchdog's (iface->check_due).
 */
#include "syncmem_ep.h"

#include <ucs/async/async.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#define UCT_SYNCMEM_PORT_DOWN  UCS_BIT(0)
#define UCT_SYNCMEM_PORT_UP    UCS_BIT(1)


/* Async thread: the bits go to every iface on that port. */
static void uct_syncmem_port_note(uct_syncmem_md_t *md, uint8_t port_num,
                                  uint32_t bit)
{
    uct_syncmem_iface_t *iface;

    ucs_spin_lock(&md->iface_lock);
    ucs_list_for_each(iface, &md->ifaces, md_list) {
        if (iface->port.num == port_num) {
            __sync_fetch_and_or(&iface->port_events, bit);
            iface->check_due = 1;
        }
    }
    ucs_spin_unlock(&md->iface_lock);
}

static void uct_syncmem_port_async_cb(int fd, ucs_event_set_types_t events,
                                      void *arg)
{
    uct_syncmem_md_t *md = arg;
    struct ibv_async_event event;

    while (ibv_get_async_event(md->ctx, &event) == 0) {
        switch (event.event_type) {
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_PORT_ACTIVE:
            ucs_diag("syncmem: %s:%d: %s", md->name, event.element.port_num,
                     ibv_event_type_str(event.event_type));
            uct_syncmem_port_note(md, event.element.port_num,
                                  (event.event_type == IBV_EVENT_PORT_ERR) ?
                                  UCT_SYNCMEM_PORT_DOWN : UCT_SYNCMEM_PORT_UP);
            break;
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
            ucs_debug("syncmem: %s: QP 0x%x: %s", md->name,
                      event.element.qp->qp_num,
                      ibv_event_type_str(event.event_type));
            break;
        case IBV_EVENT_DEVICE_FATAL:
            ucs_error("syncmem: %s: %s; the device needs a reset (check"
                      " dmesg)", md->name,
                      ibv_event_type_str(event.event_type));
            break;
        default:
            ucs_debug("syncmem: %s: %s", md->name,
                      ibv_event_type_str(event.event_type));
            break;
        }
        ibv_ack_async_event(&event);
    }
}

ucs_status_t uct_syncmem_port_events_init(uct_syncmem_md_t *md)
{
    int fd = md->ctx->async_fd;
    ucs_status_t status;

    ucs_list_head_init(&md->ifaces);
    ucs_spinlock_init(&md->iface_lock, 0);
    md->async_events = 0;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        ucs_diag("syncmem: %s: no port events (fcntl: %m); endpoints find a"
                 " port failure through their RC retries", md->name);
        return UCS_OK;
    }
    status = ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_SPINLOCK, fd,
                                         UCS_EVENT_SET_EVREAD,
                                         uct_syncmem_port_async_cb, md, NULL);
    if (status != UCS_OK) {
        ucs_diag("syncmem: %s: no port events (%s); endpoints find a port"
                 " failure through their RC retries", md->name,
                 ucs_status_string(status));
        return UCS_OK;
    }
    md->async_events = 1;
    return UCS_OK;
}

void uct_syncmem_port_events_cleanup(uct_syncmem_md_t *md)
{
    if (md->async_events) {
        ucs_async_remove_handler(md->ctx->async_fd, 1);
    }
    ucs_spinlock_destroy(&md->iface_lock);
}

void uct_syncmem_port_events_add(uct_syncmem_iface_t *iface)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);

    iface->port_events = 0;
    ucs_spin_lock(&md->iface_lock);
    ucs_list_add_tail(&md->ifaces, &iface->md_list);
    ucs_spin_unlock(&md->iface_lock);
}

void uct_syncmem_port_events_remove(uct_syncmem_iface_t *iface)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);

    ucs_spin_lock(&md->iface_lock);
    ucs_list_del(&iface->md_list);
    ucs_spin_unlock(&md->iface_lock);
}

/* Progress: the port's news to its endpoints (a flap shorter than the gap
 * between two progress calls brings both, down first). */
void uct_syncmem_iface_port_events(uct_syncmem_iface_t *iface)
{
    uint32_t events = __sync_fetch_and_and(&iface->port_events, 0);
    uct_syncmem_ep_t *ep;

    if (ucs_likely(events == 0)) {
        return;
    }
    iface->link_trouble = ucs_get_time(); /* see syncmem_watchdog.c */
    /* neither event fails an endpoint (the machine's QP_ERROR and
     * SEND_REQ), so the list stays as it is */
    ucs_list_for_each(ep, &iface->eps, list) {
        if (events & UCT_SYNCMEM_PORT_DOWN) {
            uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_PORT_DOWN);
        }
        if (events & UCT_SYNCMEM_PORT_UP) {
            uct_syncmem_ep_event(ep, UCT_SYNCMEM_EP_EV_PORT_UP);
        }
    }
}
