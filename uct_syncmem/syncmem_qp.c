/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syncmem - reliable-connected QPs: creation, connection, address handles.
 *
 * Each endpoint owns one RC QP; its peer iface owns the matching passive
 * QP (syncmem_cm.c). Both are built here so that their attributes agree.
 */
#include "syncmem_qp.h"
#include "syncmem_ep.h"

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
    /* TX_QUEUE_LEN: what may be outstanding, and the drain when the QP
     * fails (syncmem_ep.c); VERIFY: and the read-back a verified put may
     * add */
    init->cap.max_send_wr     = iface->config.tx_queue_len + 1 +
                                (iface->config.verify != UCT_SYNCMEM_VERIFY_NONE);
    init->cap.max_send_sge    = iface->config.max_sge;
    init->cap.max_inline_data = iface->config.max_inline;
}

/* What a peer may do on our RC QPs */
#define UCT_SYNCMEM_QP_ACCESS (IBV_ACCESS_REMOTE_WRITE | \
                               IBV_ACCESS_REMOTE_READ | \
                               IBV_ACCESS_REMOTE_ATOMIC)

static ucs_status_t uct_syncmem_qp_init(uct_syncmem_iface_t *iface,
                                        struct ibv_qp *qp)
{
    struct ibv_qp_attr attr = {};
    int ret;

    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = iface->port.pkey_index;  /* UCX_SYNCMEM_PKEY */
    attr.port_num        = iface->port.num;
    attr.qp_access_flags = UCT_SYNCMEM_QP_ACCESS;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to INIT failed: %s", qp->qp_num,
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

/* A QP in RESET back to INIT, to be connected again. */
ucs_status_t uct_syncmem_qp_reinit(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp)
{
    return uct_syncmem_qp_init(iface, qp);
}

/* send_cq: the iface's for endpoints, the CM's for passive QPs (whose only
 * sends are keepalives, handled in the async context). */
ucs_status_t uct_syncmem_qp_create(uct_syncmem_iface_t *iface,
                                   struct ibv_cq *send_cq,
                                   struct ibv_qp **qp_p)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    struct ibv_qp_init_attr init;
    struct ibv_qp *qp;

    uct_syncmem_qp_init_attr(iface, &init);
    init.send_cq = send_cq;
    qp = ibv_create_qp(md->pd, &init);
    if (qp == NULL) {
        ucs_error("syncmem: ibv_create_qp(RC) on %s:%u failed: %m (send queue"
                  " %u, sge %u, inline %u); check UCX_SYNCMEM_TX_QUEUE_LEN,"
                  " TX_MAX_SGE, TX_MAX_INLINE and 'ulimit -l'", md->name,
                  iface->port.num, init.cap.max_send_wr,
                  iface->config.max_sge, iface->config.max_inline);
        return UCS_ERR_IO_ERROR;
    }

    if (uct_syncmem_qp_init(iface, qp) != UCS_OK) {
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
    ah->sl       = iface->port.sl;
    /* Every RC QP and every handshake message takes its address from here,
     * so both carry UCX_SYNCMEM_SL and _TRAFFIC_CLASS; on RoCE v2 the
     * traffic class becomes the IP header's DSCP/ECN byte. */
    ah->grh.traffic_class = iface->port.traffic_class;
    if (iface->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah->is_global      = 1;
        ah->grh.dgid       = peer->gid;
        ah->grh.sgid_index = iface->port.gid_index;
        ah->grh.hop_limit  = 64;
    }
}

enum ibv_mtu uct_syncmem_qp_path_mtu(uct_syncmem_iface_t *iface,
                                     const uct_syncmem_port_t *peer)
{
    return ucs_min(iface->port.mtu, peer->mtu);
}

/* Both sides start their send PSN at 0: each QP is used for one connection
 * only, so there are no stale packets to tell apart. A resumed QP starts
 * where its requests stopped (uct_syncmem_qp_resume). */
static ucs_status_t uct_syncmem_qp_rts(uct_syncmem_iface_t *iface,
                                       struct ibv_qp *qp,
                                       const uct_syncmem_port_t *peer,
                                       uint32_t dest_qpn, uint32_t sq_psn,
                                       uint32_t rq_psn, uint8_t timeout_exp)
{
    struct ibv_qp_attr attr = {};
    int ret;

    attr.qp_state           = IBV_QPS_RTR;
    attr.path_mtu           = uct_syncmem_qp_path_mtu(iface, peer);
    attr.dest_qp_num        = dest_qpn;
    attr.rq_psn             = rq_psn;
    attr.max_dest_rd_atomic = iface->config.max_rd_atomic;
    attr.min_rnr_timer      = 12; /* 0.64 ms */
    uct_syncmem_ah_attr_init(iface, peer, &attr.ah_attr);
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to RTR (peer QP 0x%x) failed: %s%s",
                  qp->qp_num, dest_qpn, strerror(ret),
                  (ret == ETIMEDOUT) ? " (the kernel could not resolve the"
                  " peer's address in time: ARP/ND, a busy host or a lossy"
                  " link)" : "");
        return UCS_ERR_IO_ERROR;
    }

    attr.qp_state      = IBV_QPS_RTS;
    attr.sq_psn        = sq_psn;
    attr.timeout       = timeout_exp;
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

ucs_status_t uct_syncmem_qp_connect(uct_syncmem_iface_t *iface,
                                    struct ibv_qp *qp,
                                    const uct_syncmem_port_t *peer,
                                    uint32_t dest_qpn, uint8_t timeout_exp)
{
    return uct_syncmem_qp_rts(iface, qp, peer, dest_qpn, 0, 0, timeout_exp);
}

/* A connected QP's RC timeout, changed in RTS: the timeout alone in the
 * mask, no state, the only form a kernel may take (syncmem_watchdog.c says
 * which do). 0, or the error. */
int uct_syncmem_qp_set_timeout(struct ibv_qp *qp, uint8_t timeout_exp)
{
    struct ibv_qp_attr attr = { .timeout = timeout_exp };

    return ibv_modify_qp(qp, &attr, IBV_QP_TIMEOUT);
}

ucs_status_t uct_syncmem_qp_refuse_writes(struct ibv_qp *qp)
{
    struct ibv_qp_attr attr = {
        .qp_access_flags = UCT_SYNCMEM_QP_ACCESS & ~IBV_ACCESS_REMOTE_WRITE
    };

    return ibv_modify_qp(qp, &attr, IBV_QP_ACCESS_FLAGS) ? UCS_ERR_IO_ERROR :
                                                           UCS_OK;
}

/*
 * A QP the link broke, whose peer QP is still up, is brought back to where
 * it stopped: reset, and connected to the same peer QP with the send PSN of
 * its first request of unknown outcome and the receive PSN it expected.
 * The requests posted again from there carry the PSNs they had, so the
 * peer's RC responder treats those it already executed as duplicates: a
 * write or send is acknowledged again, not applied again, and an atomic
 * gets the reply it had, from the responder's resources. Exactly once.
 */
ucs_status_t uct_syncmem_qp_resume(uct_syncmem_iface_t *iface,
                                   struct ibv_qp *qp,
                                   const uct_syncmem_port_t *peer,
                                   uint32_t dest_qpn, uint32_t sq_psn,
                                   uint32_t rq_psn, uint8_t timeout_exp)
{
    struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
    int ret;

    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    if (ret) {
        ucs_error("syncmem: QP 0x%x to RESET failed: %s", qp->qp_num,
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    if (uct_syncmem_qp_init(iface, qp) != UCS_OK) {
        return UCS_ERR_IO_ERROR;
    }
    return uct_syncmem_qp_rts(iface, qp, peer, dest_qpn, sq_psn, rq_psn,
                              timeout_exp);
}

/* The state of a QP (IBV_QPS_ERR where it cannot be read), and in *rq_psn_p
 * the PSN it expects next. */
enum ibv_qp_state uct_syncmem_qp_query(struct ibv_qp *qp, uint32_t *rq_psn_p)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;

    if (ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_RQ_PSN, &init) != 0) {
        *rq_psn_p = 0;
        return IBV_QPS_ERR;
    }
    *rq_psn_p = attr.rq_psn;
    return attr.qp_state;
}

/*
 * Where the responder of qp stopped for good: the PSN it expected next once
 * nothing more can run on it. The error state stops it; on Soft-RoCE a
 * request it had begun may still finish on another CPU after the modify
 * returns, and the reset that follows waits for its task (rxe_qp_reset),
 * keeping the PSN. A device that clears it on reset (or reports anything
 * before the error state's value) has the error state's value taken.
 */
ucs_status_t uct_syncmem_qp_stop(struct ibv_qp *qp, uint32_t *rq_psn_p)
{
    struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
    struct ibv_qp_init_attr init;
    uint32_t at_error, late;

    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) ||
        ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_RQ_PSN, &init) ||
        (attr.qp_state != IBV_QPS_ERR)) {
        return UCS_ERR_IO_ERROR;
    }
    at_error      = attr.rq_psn;
    attr.qp_state = IBV_QPS_RESET;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) ||
        ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_RQ_PSN, &init)) {
        return UCS_ERR_IO_ERROR;
    }
    /* a little later: a request finished; else (0, or before): cleared */
    late      = (attr.rq_psn - at_error) & UCT_SYNCMEM_PSN_MASK;
    *rq_psn_p = ((late < UCT_SYNCMEM_QP_STOP_SLACK) &&
                 ((attr.rq_psn != 0) || (at_error == 0))) ? attr.rq_psn :
                                                           at_error;
    return UCS_OK;
}

static uct_syncmem_ah_key_t uct_syncmem_ah_key(const uct_syncmem_port_t *peer)
{
    uct_syncmem_ah_key_t key;

    memset(&key, 0, sizeof(key));
    key.gid = peer->gid;
    key.lid = peer->lid;
    return key;
}

struct ibv_ah *uct_syncmem_ah_find(uct_syncmem_iface_t *iface,
                                   const uct_syncmem_port_t *peer)
{
    khiter_t it = kh_get(uct_syncmem_ahs, &iface->cm.ahs,
                         uct_syncmem_ah_key(peer));

    return (it == kh_end(&iface->cm.ahs)) ? NULL :
           kh_value(&iface->cm.ahs, it);
}

/* Connections to one host share an AH, as UCX's own verbs transports do:
 * one ibv_create_ah (a system call on most providers) a host, not two a
 * connection, and no per-connection memory. On RoCE it holds the peer's
 * MAC address as resolved then, as an AH made for each connection would
 * for that connection's whole life. */
struct ibv_ah *uct_syncmem_ah_get(uct_syncmem_iface_t *iface,
                                  const uct_syncmem_port_t *peer)
{
    uct_syncmem_md_t *md = ucs_derived_of(iface->super.md, uct_syncmem_md_t);
    struct ibv_ah_attr attr;
    struct ibv_ah *ah;
    khiter_t it;
    int ret;

    ah = uct_syncmem_ah_find(iface, peer);
    if (ah != NULL) {
        return ah;
    }

    uct_syncmem_ah_attr_init(iface, peer, &attr);
    ah = ibv_create_ah(md->pd, &attr);
    if (ah == NULL) {
        ucs_diag("syncmem: ibv_create_ah on %s:%u failed: %m; is the peer's"
                 " address routable from here?", md->name, iface->port.num);
        return NULL;
    }
    it = kh_put(uct_syncmem_ahs, &iface->cm.ahs, uct_syncmem_ah_key(peer),
                &ret);
    if (ret < 0) {
        ucs_diag("syncmem: no memory for an address handle of %s:%u",
                 md->name, iface->port.num);
        ibv_destroy_ah(ah);
        return NULL;
    }
    kh_value(&iface->cm.ahs, it) = ah;
    return ah;
}

void uct_syncmem_ahs_cleanup(uct_syncmem_iface_t *iface)
{
    struct ibv_ah *ah;

    kh_foreach_value(&iface->cm.ahs, ah, {
        ibv_destroy_ah(ah);
    })
    kh_destroy_inplace(uct_syncmem_ahs, &iface->cm.ahs);
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

/*
 * What to check for each work completion status: the first thing a user
 * sees when an endpoint fails. The RD and tag matching statuses cannot
 * happen with RC QPs; they still get a line, so that every status has one
 * (test/uct_syncmem/test_wc_advice.cc checks it, and that every
 * UCX_SYNCMEM_* name here exists).
 */
static const struct {
    const char *name;
    const char *advice;
} uct_syncmem_wc_advice_table[] = {
    [IBV_WC_SUCCESS] = {"SUCCESS", "nothing: the request succeeded"},
    [IBV_WC_LOC_LEN_ERR] = {"LOC_LEN_ERR",
        "a request longer than the local QP accepts (inline data, message"
        " size); check UCX_SYNCMEM_TX_MAX_INLINE and UCX_SYNCMEM_SEG_SIZE"
        " against the device limits (ibv_devinfo -v)"},
    [IBV_WC_LOC_QP_OP_ERR] = {"LOC_QP_OP_ERR",
        "the local QP refused the request (malformed, or an opcode the device"
        " lacks): a syncmem bug, report it with UCX_LOG_LEVEL=debug output"},
    [IBV_WC_LOC_EEC_OP_ERR] = {"LOC_EEC_OP_ERR",
        "an RD end-to-end context error, impossible on RC QPs: check the"
        " device driver (dmesg)"},
    [IBV_WC_LOC_PROT_ERR] = {"LOC_PROT_ERR",
        "a local buffer is not registered with this device, or its memory"
        " handle was released (uct_md_mem_dereg) before the operation"
        " completed"},
    [IBV_WC_WR_FLUSH_ERR] = {"WR_FLUSH_ERR",
        "secondary: the QP was already in error (an earlier failure on this"
        " endpoint, a cancel, or a device or port event), so its outstanding"
        " requests are flushed; look for the first error"},
    [IBV_WC_MW_BIND_ERR] = {"MW_BIND_ERR",
        "a memory window bind failed; syncmem binds windows only on its"
        " memory domain's own QP, never an endpoint's: check the device"
        " driver (dmesg)"},
    [IBV_WC_BAD_RESP_ERR] = {"BAD_RESP_ERR",
        "the responder answered with an unexpected transport opcode: a"
        " corrupted link or a peer QP that is not this connection's; check"
        " the link (port counters, dmesg) and that both sides run the same"
        " syncmem"},
    [IBV_WC_LOC_ACCESS_ERR] = {"LOC_ACCESS_ERR",
        "the local buffer of a get or fetching atomic is not registered for"
        " local write: register it with UCT_MD_MEM_ACCESS_LOCAL_WRITE"},
    [IBV_WC_REM_INV_REQ_ERR] = {"REM_INV_REQ_ERR",
        "the peer refused the request as invalid: an active message longer"
        " than its receive buffers (its UCX_SYNCMEM_SEG_SIZE is smaller than"
        " ours), or an RDMA or atomic length or alignment it does not"
        " accept"},
    [IBV_WC_REM_ACCESS_ERR] = {"REM_ACCESS_ERR",
        "remote region not registered for this access (e.g. written but"
        " registered read-only), the address outside the registration, or"
        " the rkey stale (the peer deregistered or unmapped that memory, or"
        " revoked the key: UCP does for a rendezvous whose transfer failed"
        " on an endpoint with peer error handling)"},
    [IBV_WC_REM_OP_ERR] = {"REM_OP_ERR",
        "the responder could not complete the request (its QP or receive"
        " queue in error); check the peer's log"},
    [IBV_WC_RETRY_EXC_ERR] = {"RETRY_EXC_ERR",
        "no acknowledgement from the peer after all retries: link or peer"
        " down (process gone, port down, no route to its GID); on a slow or"
        " lossy network raise UCX_SYNCMEM_RC_RETRY_COUNT or"
        " UCX_SYNCMEM_RC_TIMEOUT"},
    [IBV_WC_RNR_RETRY_EXC_ERR] = {"RNR_RETRY_EXC_ERR",
        "the receiver kept having no buffer posted: it does not progress, or"
        " has too few; raise UCX_SYNCMEM_RX_QUEUE_LEN on the peer, or set"
        " UCX_SYNCMEM_RC_RNR_RETRY_COUNT=7 (retry forever)"},
    [IBV_WC_LOC_RDD_VIOL_ERR] = {"LOC_RDD_VIOL_ERR",
        "an RD domain violation, impossible on RC QPs: check the device"
        " driver (dmesg)"},
    [IBV_WC_REM_INV_RD_REQ_ERR] = {"REM_INV_RD_REQ_ERR",
        "an invalid RD request, impossible on RC QPs: check the device driver"
        " (dmesg)"},
    [IBV_WC_REM_ABORT_ERR] = {"REM_ABORT_ERR",
        "the responder aborted the operation (its QP destroyed or moved to"
        " error meanwhile); check the peer's log"},
    [IBV_WC_INV_EECN_ERR] = {"INV_EECN_ERR",
        "an invalid RD context number, impossible on RC QPs: check the device"
        " driver (dmesg)"},
    [IBV_WC_INV_EEC_STATE_ERR] = {"INV_EEC_STATE_ERR",
        "an RD context in a bad state, impossible on RC QPs: check the device"
        " driver (dmesg)"},
    [IBV_WC_FATAL_ERR] = {"FATAL_ERR",
        "the device failed: check dmesg and ibv_devinfo; it needs a reset"},
    [IBV_WC_RESP_TIMEOUT_ERR] = {"RESP_TIMEOUT_ERR",
        "the responder did not answer in time (overloaded peer or link);"
        " raise UCX_SYNCMEM_RC_TIMEOUT"},
    [IBV_WC_GENERAL_ERR] = {"GENERAL_ERR",
        "an error the provider does not classify: see the vendor error and"
        " dmesg"},
    [IBV_WC_TM_ERR] = {"TM_ERR",
        "a tag matching error; syncmem uses no tag matching: check the device"
        " driver (dmesg)"},
    [IBV_WC_TM_RNDV_INCOMPLETE] = {"TM_RNDV_INCOMPLETE",
        "an incomplete tag matching rendezvous; syncmem uses no tag matching:"
        " check the device driver (dmesg)"}
};

static const char *uct_syncmem_wc_name(enum ibv_wc_status status)
{
    if (((unsigned)status < ucs_static_array_size(uct_syncmem_wc_advice_table)) &&
        (uct_syncmem_wc_advice_table[status].name != NULL)) {
        return uct_syncmem_wc_advice_table[status].name;
    }
    return "unknown status";
}

const char *uct_syncmem_wc_advice(enum ibv_wc_status status)
{
    if (((unsigned)status < ucs_static_array_size(uct_syncmem_wc_advice_table)) &&
        (uct_syncmem_wc_advice_table[status].advice != NULL)) {
        return uct_syncmem_wc_advice_table[status].advice;
    }
    return "a status newer than this syncmem: see the vendor error and dmesg";
}

/*
 * The first failed completion of an endpoint. Once a request fails the QP
 * flushes every request after it (WR_FLUSH_ERR): those are counted here,
 * once, and never logged one by one. A completion in error has only wr_id,
 * status, qp_num and vendor_err valid (ibv_poll_cq man page): what the
 * request was comes from its replay entry, where it has one (req).
 */
void uct_syncmem_wc_log(uct_syncmem_iface_t *iface, uct_syncmem_ep_t *ep,
                        const struct ibv_wc *wc, const char *req)
{
    uint16_t flushed = ep->tx.sn - (uint16_t)wc->wr_id;
    char more[64]    = "";

    if ((flushed > 0) && (wc->status != IBV_WC_WR_FLUSH_ERR)) {
        ucs_snprintf_zero(more, sizeof(more), "; %u later requests flushed"
                          " (WR_FLUSH_ERR, not logged)", flushed);
    }
    ucs_log(iface->super.config.failure_level,
            "syncmem: ep %p QP 0x%x to iface 0x%" PRIx64 " (peer QP 0x%x):"
            " request %u%s: IBV_WC_%s (%s, vendor error 0x%x)%s; check: %s",
            ep, wc->qp_num, ep->cm.peer_iface_id, ep->cm.peer_rc_qpn,
            (uint16_t)wc->wr_id, req,
            uct_syncmem_wc_name(wc->status), ibv_wc_status_str(wc->status),
            wc->vendor_err, more, uct_syncmem_wc_advice(wc->status));
}
