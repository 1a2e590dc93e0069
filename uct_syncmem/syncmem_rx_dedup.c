/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the receive side of reconnect (syncmem_reconnect.c): the
 * sender posts again the active messages it does not know to have arrived,
 * on the QP that replaced the broken one. The handshake (async context)
 * notes which QP replaced which; the receive path keeps the last request
 * number each QP delivered, and drops a message on the new QP that the old
 * one delivered.
 */
#include "syncmem_iface.h"

#include <ucs/async/async.h>


#define UCT_SYNCMEM_RX_UNRESOLVED  UCS_BIT(32) /* replaced: an old QP number */

/* Async context, lock held: tell the receive path that new_qpn replaces
 * old_qpn (new_qpn 0: old_qpn is gone for good). */
void uct_syncmem_rx_link_push(uct_syncmem_iface_t *iface, uint32_t new_qpn,
                              uint32_t old_qpn)
{
    uct_syncmem_rx_link_t *link = ucs_malloc(sizeof(*link), "syncmem_link");

    if (link == NULL) {
        ucs_warn("syncmem: no memory to note that QP 0x%x replaces 0x%x;"
                 " active messages sent again may be delivered twice",
                 new_qpn, old_qpn);
        return;
    }
    link->new_qpn      = new_qpn;
    link->old_qpn      = old_qpn;
    link->next         = iface->rx.links;
    iface->rx.links    = link;
    iface->rx.have_links = 1;
}

/* Progress: take the links noted by the async context. */
void uct_syncmem_rx_links_apply(uct_syncmem_iface_t *iface)
{
    uct_syncmem_rx_link_t *link, *links;
    khiter_t it;
    int ret;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    links                = iface->rx.links;
    iface->rx.links      = NULL;
    iface->rx.have_links = 0;
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);

    while ((link = links) != NULL) {
        links = link->next;
        if (link->new_qpn == 0) {
            it = kh_get(uct_syncmem_qp_sn, &iface->rx.last_sn, link->old_qpn);
            if (it != kh_end(&iface->rx.last_sn)) {
                kh_del(uct_syncmem_qp_sn, &iface->rx.last_sn, it);
            }
        } else {
            /* resolved at its first message: the old QP's may still be in
             * the CQ behind this poll */
            it = kh_put(uct_syncmem_qp_link, &iface->rx.replaced,
                        link->new_qpn, &ret);
            if (ret >= 0) {
                kh_value(&iface->rx.replaced, it) = UCT_SYNCMEM_RX_UNRESOLVED |
                                                    link->old_qpn;
            }
        }
        ucs_free(link);
    }
}

/*
 * The last request number delivered through old QP qpn, for the QP that
 * replaced it: its own; or, if none came through it, what the QP it had
 * replaced delivered (a QP replaced again before any message reached it:
 * two reconnects onto new QPs at the same request), and so on down the
 * chain. Takes the entries: qpn is gone. 0: nothing came through any.
 */
static int uct_syncmem_rx_last_delivered(uct_syncmem_iface_t *iface,
                                         uint32_t qpn, uint16_t *sn_p)
{
    khiter_t it;
    uint64_t value;
    unsigned hops;

    for (hops = 0; hops < 64; ++hops) {
        it = kh_get(uct_syncmem_qp_sn, &iface->rx.last_sn, qpn);
        if (it != kh_end(&iface->rx.last_sn)) {
            *sn_p = kh_value(&iface->rx.last_sn, it);
            kh_del(uct_syncmem_qp_sn, &iface->rx.last_sn, it);
            return 1;
        }
        it = kh_get(uct_syncmem_qp_link, &iface->rx.replaced, qpn);
        if (it == kh_end(&iface->rx.replaced)) {
            return 0;
        }
        value = kh_value(&iface->rx.replaced, it);
        kh_del(uct_syncmem_qp_link, &iface->rx.replaced, it);
        if (!(value & UCT_SYNCMEM_RX_UNRESOLVED)) {
            *sn_p = value; /* it had resolved, and delivered nothing new */
            return 1;
        }
        qpn = (uint32_t)value;
    }
    ucs_warn("syncmem: QP 0x%x: more than %u QPs replaced in a row without a"
             " message; active messages sent again may be delivered twice",
             qpn, hops);
    return 0;
}

/* A message on a QP that replaced another: already delivered through the
 * old one? The old QP's messages all came first (one CQ, in order). */
int uct_syncmem_rx_is_replayed(uct_syncmem_iface_t *iface, uint32_t qpn,
                               uint16_t sn)
{
    khiter_t it = kh_get(uct_syncmem_qp_link, &iface->rx.replaced, qpn);
    uint64_t value;
    uint16_t last;

    if (it == kh_end(&iface->rx.replaced)) {
        return 0;
    }

    value = kh_value(&iface->rx.replaced, it);
    if (value & UCT_SYNCMEM_RX_UNRESOLVED) {
        if (!uct_syncmem_rx_last_delivered(iface, (uint32_t)value, &last)) {
            /* no message ever came through the old QPs */
            kh_del(uct_syncmem_qp_link, &iface->rx.replaced, it);
            return 0;
        }
        value                             = last;
        kh_value(&iface->rx.replaced, it) = value;
    }

    if (UCS_CIRCULAR_COMPARE16(sn, <=, (uint16_t)value)) {
        ucs_trace("syncmem: QP 0x%x: dropped AM %u, delivered before the"
                  " sender reconnected", qpn, sn);
        return 1;
    }

    /* past what the old QP delivered: in order from here on */
    kh_del(uct_syncmem_qp_link, &iface->rx.replaced, it);
    return 0;
}
