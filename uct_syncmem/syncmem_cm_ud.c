/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - the handshake's datagrams: the iface's UD QP, its completion
 * channel and CQ (which the passive RC QPs share), the registered slots
 * that receive and send the messages, and bringing the QP up again when
 * the link took it down. What the messages say, and what is done about
 * them: syncmem_cm_msg.c and syncmem_cm.c.
 */
#include "syncmem_iface.h"
#include "syncmem_cm.h"
#include "syncmem_qp.h"

#include <ucs/time/time.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#define UCT_SYNCMEM_CM_QKEY     0x53594e43u /* "SYNC" */

_Static_assert(UCT_SYNCMEM_CM_GRH_LEN + sizeof(uct_syncmem_cm_msg_t) <=
               UCT_SYNCMEM_CM_SLOT, "CM message does not fit its slot");


void *uct_syncmem_cm_slot(uct_syncmem_iface_t *iface, unsigned slot)
{
    return UCS_PTR_BYTE_OFFSET(iface->cm.bufs, slot * UCT_SYNCMEM_CM_SLOT);
}

ucs_status_t uct_syncmem_cm_post_recv(uct_syncmem_iface_t *iface,
                                      unsigned slot)
{
    struct ibv_recv_wr wr, *bad_wr;
    struct ibv_sge sge;
    int ret;

    sge.addr   = (uintptr_t)uct_syncmem_cm_slot(iface, slot);
    sge.length = UCT_SYNCMEM_CM_SLOT;
    sge.lkey   = iface->cm.mr->lkey;
    wr.wr_id   = slot;
    wr.next    = NULL;
    wr.sg_list = &sge;
    wr.num_sge = 1;

    ret = ibv_post_recv(iface->cm.qp, &wr, &bad_wr);
    if (ret) {
        ucs_error("syncmem: ibv_post_recv(CM QP 0x%x) failed: %s",
                  iface->cm.qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void uct_syncmem_cm_send(uct_syncmem_iface_t *iface,
                         const uct_syncmem_port_t *peer, uint32_t qpn,
                         const uct_syncmem_cm_msg_t *msg)
{
    struct ibv_send_wr wr = {}, *bad_wr;
    struct ibv_sge sge;
    struct ibv_ah *ah;
    unsigned slot;
    int ret;

    if (iface->cm.sends_posted >= UCT_SYNCMEM_CM_SENDS) {
        ucs_debug("syncmem: CM send queue full, message %u dropped (it is"
                  " retransmitted)", msg->type);
        return;
    }
    ah = uct_syncmem_ah_get(iface, peer);
    if (ah == NULL) {
        return; /* retransmitted, and the AH tried again */
    }

    slot = UCT_SYNCMEM_CM_RECVS +
           (iface->cm.send_head++ % UCT_SYNCMEM_CM_SENDS);
    memcpy(uct_syncmem_cm_slot(iface, slot), msg, sizeof(*msg));

    sge.addr              = (uintptr_t)uct_syncmem_cm_slot(iface, slot);
    sge.length            = sizeof(*msg);
    sge.lkey              = iface->cm.mr->lkey;
    wr.wr_id              = slot;
    wr.sg_list            = &sge;
    wr.num_sge            = 1;
    wr.opcode             = IBV_WR_SEND;
    wr.send_flags         = IBV_SEND_SIGNALED;
    wr.wr.ud.ah           = ah;
    wr.wr.ud.remote_qpn   = qpn;
    wr.wr.ud.remote_qkey  = UCT_SYNCMEM_CM_QKEY;

    ret = ibv_post_send(iface->cm.qp, &wr, &bad_wr);
    if (ret) {
        ucs_diag("syncmem: CM send to QP 0x%x failed: %s", qpn, strerror(ret));
        return;
    }
    ++iface->cm.sends_posted;
}

/* Until at most max sends are in flight, or the deadline; the async
 * handler is gone, so nothing else polls. Receives and keepalive writes
 * polled here are dropped: the iface closes. */
void uct_syncmem_cm_sends_wait(uct_syncmem_iface_t *iface, unsigned max,
                               ucs_time_t deadline)
{
    struct ibv_wc wc[8];
    int i, n;

    while ((iface->cm.sends_posted > max) && (ucs_get_time() < deadline)) {
        n = ibv_poll_cq(iface->cm.cq, ucs_static_array_size(wc), wc);
        for (i = 0; i < n; ++i) {
            if ((wc[i].qp_num == iface->cm.qp->qp_num) &&
                (wc[i].wr_id >= UCT_SYNCMEM_CM_RECVS)) {
                --iface->cm.sends_posted;
            }
        }
        if (n < 0) {
            break;
        }
    }
}

/* The UD QP from RESET to ready to send, its receives posted. */
static ucs_status_t uct_syncmem_cm_qp_up(uct_syncmem_iface_t *iface)
{
    struct ibv_qp_attr attr = {};
    ucs_status_t status;
    unsigned slot;
    int ret;

    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = iface->port.pkey_index; /* UCX_SYNCMEM_PKEY */
    attr.port_num   = iface->port.num;
    attr.qkey       = UCT_SYNCMEM_CM_QKEY;
    ret = ibv_modify_qp(iface->cm.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_QKEY);
    if (!ret) {
        attr.qp_state = IBV_QPS_RTR;
        ret = ibv_modify_qp(iface->cm.qp, &attr, IBV_QP_STATE);
    }
    if (!ret) {
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn   = 0;
        ret = ibv_modify_qp(iface->cm.qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (ret) {
        ucs_error("syncmem: bringing up the UD QP 0x%x failed: %s",
                  iface->cm.qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    for (slot = 0; slot < UCT_SYNCMEM_CM_RECVS; ++slot) {
        status = uct_syncmem_cm_post_recv(iface, slot);
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

/*
 * The UD QP failed: Soft-RoCE fails a send it cannot route (the netdev went
 * down) with a local QP error and moves the QP to the error state, where it
 * would stay, and no endpoint could connect or reconnect again. Start it
 * afresh (a stale flushed completion finds it working and changes nothing).
 */
void uct_syncmem_cm_qp_recover(uct_syncmem_iface_t *iface)
{
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;

    if (!ibv_query_qp(iface->cm.qp, &attr, IBV_QP_STATE, &init) &&
        (attr.qp_state == IBV_QPS_RTS)) {
        return;
    }

    ucs_diag("syncmem: iface 0x%" PRIx64 ": the handshake QP 0x%x failed (is"
             " the link down?); restarting it", iface->id,
             iface->cm.qp->qp_num);
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RESET;
    if (ibv_modify_qp(iface->cm.qp, &attr, IBV_QP_STATE) ||
        (uct_syncmem_cm_qp_up(iface) != UCS_OK)) {
        ucs_error("syncmem: iface 0x%" PRIx64 ": cannot restart the handshake"
                  " QP 0x%x: no endpoint of it can connect", iface->id,
                  iface->cm.qp->qp_num);
        return;
    }
    iface->cm.sends_posted = 0; /* the reset dropped them */
}

ucs_status_t uct_syncmem_cm_ud_open(uct_syncmem_iface_t *iface)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    size_t size = (UCT_SYNCMEM_CM_RECVS + UCT_SYNCMEM_CM_SENDS) *
                  UCT_SYNCMEM_CM_SLOT;
    struct ibv_qp_init_attr init = {};
    ucs_status_t status;

    iface->cm.send_head    = 0;
    iface->cm.sends_posted = 0;
    iface->cm.channel      = NULL;

    iface->cm.channel = ibv_create_comp_channel(md->ctx);
    if ((iface->cm.channel == NULL) ||
        (fcntl(iface->cm.channel->fd, F_SETFL, O_NONBLOCK) != 0)) {
        ucs_error("syncmem: completion channel on %s failed: %m", md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_channel;
    }

    iface->cm.cq = ibv_create_cq(md->ctx, UCT_SYNCMEM_CM_RECVS +
                                 UCT_SYNCMEM_CM_SENDS + UCT_SYNCMEM_CM_PROBES,
                                 NULL, iface->cm.channel, 0);
    if (iface->cm.cq == NULL) {
        ucs_error("syncmem: ibv_create_cq(CM) on %s failed: %m", md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_channel;
    }

    iface->cm.bufs = ucs_calloc(1, size, "syncmem_cm_bufs");
    if (iface->cm.bufs == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err_cq;
    }

    iface->cm.mr = ibv_reg_mr(md->pd, iface->cm.bufs, size,
                              IBV_ACCESS_LOCAL_WRITE);
    if (iface->cm.mr == NULL) {
        ucs_error("syncmem: ibv_reg_mr(CM buffers) failed: %m; check"
                  " 'ulimit -l'");
        status = UCS_ERR_IO_ERROR;
        goto err_bufs;
    }

    init.qp_type          = IBV_QPT_UD;
    init.send_cq          = iface->cm.cq;
    init.recv_cq          = iface->cm.cq;
    init.cap.max_send_wr  = UCT_SYNCMEM_CM_SENDS;
    init.cap.max_recv_wr  = UCT_SYNCMEM_CM_RECVS;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    iface->cm.qp = ibv_create_qp(md->pd, &init);
    if (iface->cm.qp == NULL) {
        ucs_error("syncmem: ibv_create_qp(UD) on %s failed: %m", md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_mr;
    }

    status = uct_syncmem_cm_qp_up(iface);
    if (status != UCS_OK) {
        goto err_qp;
    }
    return UCS_OK;

err_qp:
    ibv_destroy_qp(iface->cm.qp);
err_mr:
    ibv_dereg_mr(iface->cm.mr);
err_bufs:
    ucs_free(iface->cm.bufs);
err_cq:
    ibv_destroy_cq(iface->cm.cq);
err_channel:
    if (iface->cm.channel != NULL) {
        ibv_destroy_comp_channel(iface->cm.channel);
    }
    return status;
}

void uct_syncmem_cm_ud_close(uct_syncmem_iface_t *iface)
{
    /* destroying the QP ends its sends, so the AHs are free to go */
    ibv_destroy_qp(iface->cm.qp);
    uct_syncmem_ahs_cleanup(iface);
    ibv_dereg_mr(iface->cm.mr);
    ucs_free(iface->cm.bufs);
    ibv_destroy_cq(iface->cm.cq);
    ibv_destroy_comp_channel(iface->cm.channel);
}
