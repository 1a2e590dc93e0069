/*
 * syncmem - reliable-connected QPs: creation, connection, address handles.
 *
 * Each endpoint owns one RC QP; its peer iface owns the matching passive
 * QP (syncmem_cm.c). Both are built here so that their attributes agree.
 */
#include "syncmem.h"

#include <errno.h>
#include <string.h>


/* The shape of every RC QP of an iface (and of its probe QP). */
void uct_syncmem_qp_init_attr(uct_syncmem_iface_t *iface,
                              struct ibv_qp_init_attr *init)
{
    memset(init, 0, sizeof(*init));
    init->qp_type             = IBV_QPT_RC;
    init->send_cq             = iface->cq;
    init->recv_cq             = iface->rx.cq;
    init->srq                 = iface->rx.srq;
    init->sq_sig_all          = 0;   /* we choose which sends complete */
    /* one more than we use: the drain when the QP fails (syncmem_ep.c) */
    init->cap.max_send_wr     = iface->config.tx_queue_len + 1;
    init->cap.max_send_sge    = iface->config.max_sge;
    init->cap.max_inline_data = iface->config.max_inline;
}

/* send_cq: the iface's for endpoints, the CM's for passive QPs (whose only
 * sends are keepalives, handled in the async context). */
ucs_status_t uct_syncmem_qp_create(uct_syncmem_iface_t *iface,
                                   struct ibv_cq *send_cq,
                                   struct ibv_qp **qp_p)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    struct ibv_qp_attr attr = {};
    struct ibv_qp_init_attr init;
    struct ibv_qp *qp;
    int ret;

    uct_syncmem_qp_init_attr(iface, &init);
    init.send_cq = send_cq;
    qp = ibv_create_qp(md->pd, &init);
    if (qp == NULL) {
        ucs_error("syncmem: ibv_create_qp(RC) on %s:%u failed: %m (send queue"
                  " %u, sge %u, inline %u); check UCX_SYNCMEM_TX_QUEUE_LEN,"
                  " TX_MAX_SGE, TX_MAX_INLINE and 'ulimit -l'", md->name,
                  iface->port.num, iface->config.tx_queue_len,
                  iface->config.max_sge, iface->config.max_inline);
        return UCS_ERR_IO_ERROR;
    }

    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = iface->port.num;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to INIT failed: %s", qp->qp_num,
                  strerror(ret));
        ibv_destroy_qp(qp);
        return UCS_ERR_IO_ERROR;
    }

    *qp_p = qp;
    return UCS_OK;
}

static void uct_syncmem_ah_attr_init(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_port_t *peer,
                                     struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof(*ah));
    ah->port_num = iface->port.num;
    ah->dlid     = peer->lid;
    if (iface->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah->is_global      = 1;
        ah->grh.dgid       = peer->gid;
        ah->grh.sgid_index = iface->port.gid_index;
        ah->grh.hop_limit  = 64;
    }
}

ucs_status_t uct_syncmem_qp_connect(uct_syncmem_iface_t *iface,
                                    struct ibv_qp *qp,
                                    const uct_syncmem_port_t *peer,
                                    uint32_t dest_qpn)
{
    struct ibv_qp_attr attr = {};
    int ret;

    /* Both sides start their send PSN at 0: each QP is used for one
     * connection only, so there are no stale packets to tell apart. */
    attr.qp_state           = IBV_QPS_RTR;
    attr.path_mtu           = ucs_min(iface->port.mtu, peer->mtu);
    attr.dest_qp_num        = dest_qpn;
    attr.rq_psn             = 0;
    attr.max_dest_rd_atomic = iface->config.max_rd_atomic;
    attr.min_rnr_timer      = 12; /* 0.64 ms */
    uct_syncmem_ah_attr_init(iface, peer, &attr.ah_attr);
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to RTR (peer QP 0x%x) failed: %s",
                  qp->qp_num, dest_qpn, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    attr.qp_state      = IBV_QPS_RTS;
    attr.sq_psn        = 0;
    attr.timeout       = iface->config.rc_timeout;
    attr.retry_cnt     = iface->config.rc_retry_count;
    attr.rnr_retry     = iface->config.rc_rnr_retry_count;
    attr.max_rd_atomic = iface->config.max_rd_atomic;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
                        IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to RTS failed: %s", qp->qp_num,
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    return UCS_OK;
}

ucs_status_t uct_syncmem_ah_create(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_port_t *peer,
                                   struct ibv_ah **ah_p)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    struct ibv_ah_attr attr;

    uct_syncmem_ah_attr_init(iface, peer, &attr);
    *ah_p = ibv_create_ah(md->pd, &attr);
    if (*ah_p == NULL) {
        ucs_diag("syncmem: ibv_create_ah on %s:%u failed: %m; is the peer's"
                 " address routable from here?", md->name, iface->port.num);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

/* What a failed work completion means to the user of the endpoint. */
ucs_status_t uct_syncmem_wc_status(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_SUCCESS:
        return UCS_OK;
    case IBV_WC_WR_FLUSH_ERR:
        return UCS_ERR_CANCELED;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
        return UCS_ERR_INVALID_ADDR;
    default:
        return UCS_ERR_IO_ERROR;
    }
}
