/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - memory windows (syncmem_mw.h says why).
 *
 * A type-1 window is bound and revoked by requests on the send queue of a
 * connected RC QP in RTS, of the window's protection domain. The QP here
 * never sends a packet: it is connected to itself only so that the device
 * accepts it in RTS, and a bind is complete when its completion is polled
 * (the peer learns the key afterwards, through another QP, which gives no
 * ordering with this one). A revoke is a bind of zero length: the key the
 * peer holds is refused from then on, and the window is kept for the next
 * memh until its key byte would come back to a value a peer may still
 * hold (256 binds), then deallocated.
 */
#include "syncmem_mw.h"
#include "syncmem_md.h"

#include <ucs/time/time.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

/* A window is deallocated before its 8-bit key byte wraps: one bind and
 * one revoke per memh. */
#define UCT_SYNCMEM_MW_MAX_BINDS   254
/* Unbound windows kept for reuse; more are deallocated at revoke. */
#define UCT_SYNCMEM_MW_MAX_FREE    256
/* How long a bind may take before the QP is taken for broken: rxe runs
 * them in post_send (Linux 6.1) or in a work queue (6.12). */
#define UCT_SYNCMEM_MW_BIND_TIMEOUT 5.0


struct uct_syncmem_mw_domain {
    uct_syncmem_md_t *md;
    pthread_mutex_t  lock;      /* the QP, its CQ, the free list */
    struct ibv_cq    *cq;
    struct ibv_qp    *qp;
    uint8_t          port;
    struct ibv_ah_attr self;    /* the QP's address: itself */
    uint64_t         wr_id;     /* of the last request posted */
    ucs_list_link_t  free;      /* uct_syncmem_mw_t, unbound */
    unsigned         free_count;
};


/* The QP's own address on the first active port: binds send nothing, but
 * RTR wants a valid address vector. */
static ucs_status_t uct_syncmem_mw_self_address(uct_syncmem_mw_domain_t *d)
{
    struct ibv_port_attr pattr;
    union ibv_gid gid;
    uint8_t port;
    int i;

    for (port = 1; port <= d->md->dev_attr.phys_port_cnt; ++port) {
        if (ibv_query_port(d->md->ctx, port, &pattr) ||
            (pattr.state != IBV_PORT_ACTIVE)) {
            continue;
        }

        memset(&d->self, 0, sizeof(d->self));
        d->self.port_num = port;
        d->port          = port;
        if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET) {
            d->self.dlid = pattr.lid;
            return UCS_OK;
        }
        for (i = 0; i < pattr.gid_tbl_len; ++i) {
            if (ibv_query_gid(d->md->ctx, port, i, &gid) ||
                ((gid.global.subnet_prefix == 0) &&
                 (gid.global.interface_id == 0))) {
                continue;
            }
            d->self.is_global      = 1;
            d->self.grh.dgid       = gid;
            d->self.grh.sgid_index = i;
            d->self.grh.hop_limit  = 1;
            return UCS_OK;
        }
    }
    return UCS_ERR_NO_DEVICE;
}

/* RESET -> INIT -> RTR -> RTS, connected to itself. */
static ucs_status_t uct_syncmem_mw_qp_connect(uct_syncmem_mw_domain_t *d)
{
    struct ibv_qp_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RESET;
    if (ibv_modify_qp(d->qp, &attr, IBV_QP_STATE)) {
        goto err;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = IBV_QPS_INIT;
    attr.port_num        = d->port;
    attr.pkey_index      = 0;
    attr.qp_access_flags = 0;
    if (ibv_modify_qp(d->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        goto err;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state           = IBV_QPS_RTR;
    attr.ah_attr            = d->self;
    attr.path_mtu           = IBV_MTU_1024;
    attr.dest_qp_num        = d->qp->qp_num;
    attr.rq_psn             = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer      = 1;
    if (ibv_modify_qp(d->qp, &attr, IBV_QP_STATE | IBV_QP_AV |
                      IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        goto err;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = IBV_QPS_RTS;
    attr.timeout       = 14;
    attr.retry_cnt     = 7;
    attr.rnr_retry     = 7;
    attr.sq_psn        = 0;
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(d->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC)) {
        goto err;
    }
    return UCS_OK;

err:
    ucs_diag("syncmem: %s: the memory window QP (port %u) cannot be"
             " connected to itself: ibv_modify_qp to %d failed: %m",
             d->md->name, d->port, attr.qp_state);
    return UCS_ERR_IO_ERROR;
}

/* Posts one bind (length 0: a revoke) and waits for its completion. On
 * failure the QP is reset for the next caller, and this one fails. */
static ucs_status_t uct_syncmem_mw_post(uct_syncmem_mw_domain_t *d,
                                        uct_syncmem_mw_t *mw,
                                        struct ibv_mr *mr, void *address,
                                        size_t length, int access)
{
    ucs_time_t deadline = ucs_get_time() +
                          ucs_time_from_sec(UCT_SYNCMEM_MW_BIND_TIMEOUT);
    uint32_t old_rkey   = mw->ibmw->rkey;
    struct ibv_mw_bind bind;
    struct ibv_wc wc;
    const char *what;
    int ret;

    memset(&bind, 0, sizeof(bind));
    bind.wr_id                     = ++d->wr_id;
    bind.send_flags                = IBV_SEND_SIGNALED;
    bind.bind_info.mr              = mr;
    bind.bind_info.addr            = (uintptr_t)address;
    bind.bind_info.length          = length;
    bind.bind_info.mw_access_flags = access;

    ++mw->binds;
    mw->mr = mr;
    ret    = ibv_bind_mw(d->qp, mw->ibmw, &bind);
    if (ret) {
        errno = ret;
        what  = "ibv_bind_mw";
        goto err;
    }

    /* completions of requests from before a reset may still be there */
    do {
        ret = ibv_poll_cq(d->cq, 1, &wc);
        if ((ret == 1) && (wc.wr_id == d->wr_id)) {
            if (wc.status == IBV_WC_SUCCESS) {
                return UCS_OK;
            }
            errno = 0;
            what  = ibv_wc_status_str(wc.status);
            goto err;
        }
    } while ((ret >= 0) && (ucs_get_time() < deadline));
    errno = (ret < 0) ? -ret : ETIMEDOUT;
    what  = (ret < 0) ? "ibv_poll_cq" : "no completion";

err:
    ucs_error("syncmem: %s: cannot %s a memory window over %p..%p (lkey"
              " 0x%x, window rkey 0x%x): %s%s%s; the window QP is reset, this"
              " registration's key for invalidation is refused (check dmesg)",
              d->md->name, length ? "bind" : "revoke", address,
              UCS_PTR_BYTE_OFFSET(address, length), mr ? mr->lkey : 0,
              old_rkey, what, errno ? ": " : "", errno ? strerror(errno) : "");
    /* the provider moved the key on when it posted: a failed bind left
     * the window as it was */
    mw->ibmw->rkey = old_rkey;
    uct_syncmem_mw_qp_connect(d);
    return UCS_ERR_IO_ERROR;
}

ucs_status_t uct_syncmem_mw_domain_create(uct_syncmem_md_t *md, int mode,
                                          uct_syncmem_mw_domain_t **domain_p)
{
    int has_mw = (md->dev_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
                 (md->dev_attr.max_mw > 0);
    struct ibv_qp_init_attr init;
    uct_syncmem_mw_domain_t *d;
    ucs_status_t status;

    *domain_p = NULL;
    if ((mode == UCS_NO) || (!has_mw && (mode == UCS_TRY))) {
        ucs_debug("syncmem: %s: no memory windows (%s): a key packed for"
                  " invalidation is a registration of its own", md->name,
                  has_mw ? "UCX_SYNCMEM_MW=n or RCACHE=n" :
                  "the device has none");
        return UCS_OK;
    }
    if (!has_mw) {
        ucs_error("syncmem: %s has no memory windows (ibv_devinfo -v:"
                  " MEM_WINDOW, max_mw), UCX_SYNCMEM_MW=y wants them",
                  md->name);
        return UCS_ERR_UNSUPPORTED;
    }

    d = ucs_calloc(1, sizeof(*d), "syncmem_mw_domain");
    if (d == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    d->md = md;
    pthread_mutex_init(&d->lock, NULL);
    ucs_list_head_init(&d->free);

    status = uct_syncmem_mw_self_address(d);
    if (status != UCS_OK) {
        ucs_diag("syncmem: %s: no active port for the memory window QP",
                 md->name);
        goto err_free;
    }

    d->cq = ibv_create_cq(md->ctx, 4, NULL, NULL, 0);
    if (d->cq == NULL) {
        ucs_diag("syncmem: %s: ibv_create_cq for memory windows failed: %m",
                 md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_free;
    }

    memset(&init, 0, sizeof(init));
    init.send_cq          = d->cq;
    init.recv_cq          = d->cq;
    init.qp_type          = IBV_QPT_RC;
    init.cap.max_send_wr  = 2;
    init.cap.max_recv_wr  = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all       = 1;
    d->qp = ibv_create_qp(md->pd, &init);
    if (d->qp == NULL) {
        ucs_diag("syncmem: %s: ibv_create_qp for memory windows failed: %m",
                 md->name);
        status = UCS_ERR_IO_ERROR;
        goto err_destroy_cq;
    }

    status = uct_syncmem_mw_qp_connect(d);
    if (status != UCS_OK) {
        goto err_destroy_qp;
    }

    ucs_debug("syncmem: %s: memory windows through QP 0x%x on port %u",
              md->name, d->qp->qp_num, d->port);
    *domain_p = d;
    return UCS_OK;

err_destroy_qp:
    ibv_destroy_qp(d->qp);
err_destroy_cq:
    ibv_destroy_cq(d->cq);
err_free:
    pthread_mutex_destroy(&d->lock);
    ucs_free(d);
    /* 'auto' falls back to registrations of their own */
    return (mode == UCS_YES) ? status : UCS_OK;
}

static void uct_syncmem_mw_free(uct_syncmem_mw_t *mw)
{
    int ret = ibv_dealloc_mw(mw->ibmw);

    if (ret) {
        ucs_warn("syncmem: ibv_dealloc_mw(rkey 0x%x) failed: %s",
                 mw->ibmw->rkey, strerror(ret));
    }
    ucs_free(mw);
}

void uct_syncmem_mw_domain_destroy(uct_syncmem_mw_domain_t *d)
{
    uct_syncmem_mw_t *mw, *tmp;

    if (d == NULL) {
        return;
    }
    ucs_list_for_each_safe(mw, tmp, &d->free, list) {
        uct_syncmem_mw_free(mw);
    }
    ibv_destroy_qp(d->qp);
    ibv_destroy_cq(d->cq);
    pthread_mutex_destroy(&d->lock);
    ucs_free(d);
}

ucs_status_t uct_syncmem_mw_bind(uct_syncmem_mw_domain_t *d,
                                 struct ibv_mr *mr, void *address,
                                 size_t length, int access,
                                 uct_syncmem_mw_t **mw_p)
{
    uct_syncmem_mw_t *mw;
    ucs_status_t status;

    pthread_mutex_lock(&d->lock);
    if (!ucs_list_is_empty(&d->free)) {
        mw = ucs_list_extract_head(&d->free, uct_syncmem_mw_t, list);
        --d->free_count;
    } else {
        mw = ucs_malloc(sizeof(*mw), "syncmem_mw");
        if (mw == NULL) {
            status = UCS_ERR_NO_MEMORY;
            goto out;
        }
        mw->binds = 0;
        mw->ibmw  = ibv_alloc_mw(d->md->pd, IBV_MW_TYPE_1);
        if (mw->ibmw == NULL) {
            ucs_error("syncmem: %s: ibv_alloc_mw failed: %m (max_mw %d)",
                      d->md->name, d->md->dev_attr.max_mw);
            ucs_free(mw);
            status = UCS_ERR_NO_RESOURCE;
            goto out;
        }
    }

    status = uct_syncmem_mw_post(d, mw, mr, address, length,
                                 access & (IBV_ACCESS_REMOTE_READ |
                                           IBV_ACCESS_REMOTE_WRITE |
                                           IBV_ACCESS_REMOTE_ATOMIC));
    if (status != UCS_OK) {
        /* bound or not, nobody knows its key: a new window next time */
        uct_syncmem_mw_free(mw);
        goto out;
    }
    ucs_trace("syncmem: %s: window rkey 0x%x over %p..%p (lkey 0x%x)",
              d->md->name, mw->ibmw->rkey, address,
              UCS_PTR_BYTE_OFFSET(address, length), mr->lkey);
    *mw_p = mw;
out:
    pthread_mutex_unlock(&d->lock);
    return status;
}

void uct_syncmem_mw_unbind(uct_syncmem_mw_domain_t *d, uct_syncmem_mw_t *mw)
{
    uint32_t rkey = mw->ibmw->rkey;

    pthread_mutex_lock(&d->lock);
    if ((mw->binds < UCT_SYNCMEM_MW_MAX_BINDS) &&
        (d->free_count < UCT_SYNCMEM_MW_MAX_FREE) &&
        (uct_syncmem_mw_post(d, mw, mw->mr, NULL, 0, 0) == UCS_OK)) {
        ucs_list_add_tail(&d->free, &mw->list);
        ++d->free_count;
    } else {
        /* deallocating revokes it too (and a failed revoke leaves only
         * this way) */
        uct_syncmem_mw_free(mw);
    }
    pthread_mutex_unlock(&d->lock);
    ucs_trace("syncmem: %s: window rkey 0x%x revoked", d->md->name, rkey);
}
